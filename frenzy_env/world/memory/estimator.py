"""MARP: peak GPU memory of a training job (the plans that fit are searched in :mod:`frenzy_env.world.memory.planning`).

Two estimators, both per GPU, both vectorised over plans (:func:`estimate_memory_array`):

``method="frenzy"`` -- the formula of Frenzy (Chang et al., arXiv 2412.14479), exactly and nothing more::

    W       = V h + l (12 h^2 + 13 h)                      parameters as the paper counts them
    static  = 20 W / t                                      fp16 weights + fp16/fp32 gradients + fp32 Adam
    act     = s B h l (10/d + 24/(d t) + 5 a s/(d h t))     Korthikanti et al.'s per-layer 34 s b h + 5 a s^2 b
    total   = static + act                                  B: global batch, d: data-, t: tensor-parallel

It has no pipeline parallelism, no recomputation, no logits/cross-entropy buffer, no CUDA context or
framework memory and no allocator fragmentation. Measured (``frenzy reproduce``, scenario ``marp``, on
``frenzy_env/data/memory_cases.csv``): on the llm.c GPT-2 runs (bf16, flash attention: outside its scope) it
predicts 1.8-2.8x the measured peak; on the two published cases inside its scope, BERT-large (fp16 autocast,
eager attention, one GPU, HF docs) 0.71x of nvidia-smi's total and a 12-layer GPT (Megatron-LM CI, ``--fp16``,
unfused attention, 8-way data parallel) 0.78x of ``max_memory_allocated`` (accuracy 71% and 78%, against the
paper's 92-98%; the formula has no vocabulary-logit term).

``method="extended"`` (the default) -- an estimator that keeps those terms, validated on published
measurements (``scripts/validate_memory.py``):

* parameters: the exact count of :class:`~frenzy_env.world.models.ModelSpec` (SwiGLU, grouped-query attention,
  untied heads, biases and norms), split over tensor parallelism (norms replicated) and pipeline stages;
* model states per parameter by ``precision``: ``"fp16"`` mixed precision 20 B (fp16 weights 2 + fp16
  gradients 2 + fp32 gradient copy 4 + fp32 master weights 4 + Adam moments 8), ``"bf16"`` 18 (no fp16
  gradient), ``"fp32"`` 16, ``"amp"`` (PyTorch autocast over fp32 weights) 18 (16 + the half copies of the
  weights that autocast keeps for the backward pass), ``"bf16-pure"`` 8 (bf16 weights, gradients and Adam
  moments, no fp32 master copy; unvalidated); a ``framework`` (:data:`FRAMEWORKS`) sets a framework's options
  under the caller's own (default None: none, the numbers are unchanged); ZeRO (Rajbhandari et al. 2020,
  arXiv 1910.02054) stage 1 shards the optimizer states over ``dp``, stage 2 also the gradients, stage 3
  also the weights (plus two gathered layers);
* activations after Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv 2205.05198), per layer and per token of a micro-batch: replicated part (norm inputs,
  attention and MLP inputs, dropout masks; split by ``t`` under sequence parallelism) + tensor-parallel part
  (Q, K, V with ``kv_heads``, attention output, the MLP's GELU or SwiGLU intermediates) + the ``a s``
  score terms of eager attention (softmax output, dropout mask and output) which flash attention drops
  (it keeps only the fp32 log-sum-exp). With 2-byte activations, GELU, dropout and ``t = 1`` this is
  their ``34 s b h + 5 a s^2 b``. ``recompute="selective"`` drops the score terms, ``"full"`` keeps only
  each layer's input, ``"op"`` (op-level selective checkpointing, torchtitan's "selective op" policy) keeps
  the layer input, the attention kernel's output and every second matmul output; ``extra_layer_bytes``
  adds a framework's own per-layer copies (bytes per token and hidden unit); micro-batching with gradient
  accumulation sizes everything by the micro-batch; pipeline parallelism with the 1F1B schedule keeps
  ``min(p, micro-batches)`` micro-batches in flight on the first stage (Narayanan et al. 2021, arXiv
  2104.04473);
* the backward working set: the gradients of one layer's activations (twice that under full or op-level
  recomputation, which also rebuild the layer);
* the logits and cross-entropy buffer, ``logits_bytes * s b V / t`` on the last stage;
* overhead: the CUDA context (``include_context``; 1343 MiB as measured by HuggingFace on a V100 with
  PyTorch), a framework constant, and an allocator fragmentation factor on everything that is allocated
  and freed during a step (activations, working set, logits). The last two are fitted (see
  :data:`FRAGMENTATION` and :data:`FRAMEWORK_BYTES`).

Three kinds of number (``kind``, :data:`KINDS`): ``"allocated"`` = model states + activations + working set
+ logits + framework constant (``torch.cuda.max_memory_allocated``); ``"reserved"`` = allocated +
fragmentation (``max_memory_reserved``); ``"device"`` (the default, and the simulator's out-of-memory truth) =
reserved + the CUDA context (what nvidia-smi shows). ZeRO stages map frameworks: Megatron's distributed
optimizer is stage 1 (fp32 master weights and Adam moments sharded, the gradient buffer not), PyTorch FSDP
full sharding and DeepSpeed stage 3 are stage 3. Validated per kind, framework and feature on published
measurements from several sources by ``scripts/validate_memory.py`` (leave-one-source-out; see
:mod:`frenzy_env.world.memory.calibration` and ``docs/world.md``).

All quantities are bytes; ``batch_size`` is always the global batch ``B`` (``B / dp`` sequences per replica,
rounded up; a plan with ``dp > B`` is infeasible).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from frenzy_env.errors import ConfigError, check_keys, unknown_name
from frenzy_env.world.layouts import per_replica_batch
from frenzy_env.world.models import ModelSpec, get_model

MiB = 1024**2
GiB = 1024**3

METHODS = ("frenzy", "extended")
DEFAULT_METHOD = "extended"

# Fitted on cases A1 and A2 of frenzy_env/data/memory_cases.csv (HuggingFace Trainer, bert-large-uncased, fp32,
# batch 4 and batch 1 x 4 accumulation, nvidia-smi) by solving the two equations
# measured - context - states = (1 + FRAGMENTATION) * dynamic + FRAMEWORK_BYTES (reproduce with
# ``python scripts/validate_memory.py --fit``). Kept as shipped (they set the simulator's out-of-memory truth):
# on the 22 published cases of the validated frameworks in that file (4 sources: HF docs, llm.c, Megatron-LM CI,
# torchtitan) they are within -2.7 % .. +6.9 % of every case (the llm.c cases C1-C4 -2.7 % .. -0.8 %), and a fit
# on those 22 cases (frenzy_env.world.memory.calibration.fit_constants) would give 0.157 and 75.4 MiB; the
# leave-one-source-out validation of that fit, and the 5 DeepSpeed cases (up to 29 % under): docs/world.md.
FRAGMENTATION = 0.2081
FRAMEWORK_BYTES = 134.8 * MiB
# CUDA context + PyTorch kernels, nvidia-smi, V100 (HuggingFace docs "model_memory_anatomy"): a measured
# constant, not fitted.
CONTEXT_BYTES = 1343.0 * MiB


@dataclass(frozen=True)
class _Precision:
    weight: float  # bytes per parameter: weights (and, for "amp", the cached half copies)
    grad: float  # gradients (all copies)
    optim: float  # optimizer states: fp32 master weights (when separate) + Adam moments
    act: float  # bytes of a stored matmul activation
    norm_in: float  # bytes of a stored norm input (the residual stream)
    softmax: float  # bytes of a stored attention-probability element
    logits: float  # bytes per logit element: logits + cross-entropy copy + their gradient


PRECISIONS: dict[str, _Precision] = {
    # Megatron-LM mixed precision (Micikevicius et al. 2018, arXiv 1710.03740; Frenzy's 20 B/param).
    "fp16": _Precision(2.0, 6.0, 12.0, 2.0, 2.0, 2.0, 10.0),
    # bf16 weights, fp32 gradient accumulation, fp32 master + Adam (Megatron-LM --bf16).
    "bf16": _Precision(2.0, 4.0, 12.0, 2.0, 2.0, 2.0, 10.0),
    # everything fp32.
    "fp32": _Precision(4.0, 4.0, 8.0, 4.0, 4.0, 4.0, 12.0),
    # torch.autocast over fp32 weights: half matmul activations, fp32 residual stream and softmax.
    "amp": _Precision(6.0, 4.0, 8.0, 2.0, 4.0, 4.0, 10.0),
    # pure bf16, no fp32 master copy: bf16 weights, bf16 gradients and Adam moments in the parameters' dtype
    # (what torch.optim.AdamW keeps for a model loaded in bf16: Lightning "bf16-true", HF fine-tuning
    # recipes that load the model with torch_dtype=bfloat16); 8 B/param. Not validated on a measurement.
    "bf16-pure": _Precision(2.0, 2.0, 4.0, 2.0, 2.0, 2.0, 10.0),
}

#: Training frameworks (the ``framework`` option): the options each implies, applied under the caller's own
#: options (an explicitly given option wins). Per parameter and buffer:
#:
#: - ``hf-trainer`` (HF Transformers Trainer, one GPU): the precision's defaults; ``"fp32"`` (the Trainer's
#:   default), ``"amp"`` (``--fp16`` / ``--bf16`` autocast) or ``"bf16-pure"``. Validated (hf-docs, fp32 and amp).
#: - ``llm.c`` (karpathy/llm.c, PR 309 era, ``train_gpt2.cu``): bf16 weights and bf16 gradients with fp32
#:   master weights and Adam moments (``grad_bytes=2``: 16 B/param), no dropout, the loss computed in place in
#:   one bf16 logits buffer (``logits_bytes=2``) and cuDNN flash attention. Its ``ActivationTensors`` keep, per
#:   layer, the attention and MLP projection outputs (``attproj``, ``fcproj``) apart from the residual sums:
#:   two bf16 tensors of width h more than the Korthikanti set (``extra_layer_bytes=4``). Validated (llm.c).
#: - ``megatron-core``: ``--bf16`` keeps bf16 weights, an fp32 ``main_grad`` buffer (4 B) and fp32 master
#:   weights + Adam moments (12 B): the estimator's ``"bf16"`` precision. Its vocabulary-parallel cross entropy
#:   turns the bf16 logits into fp32 and keeps only the fp32 softmax for the backward pass, whose gradient
#:   it writes in place and casts to bf16: at most 6 bytes per logit element live (``logits_bytes=6``).
#:   The distributed optimizer is ``zero_stage=1``, Megatron-FSDP ``3``. Validated (megatron-ci, bf16).
#: - ``torchtitan-fsdp2``: FSDP2 with ``param_dtype=bf16, reduce_dtype=fp32`` shards fp32 parameters (4 B),
#:   fp32 gradients (4 B) and Adam moments (8 B) (``zero_stage=3``); the bf16 copies it gathers are freed after
#:   each layer. Its "selective op" activation checkpointing is ``recompute="op"``. Validated (torchtitan).
#: - ``deepspeed-zero1`` / ``-zero2`` / ``-zero3``: DeepSpeed ZeRO with fp16 or bf16 mixed precision, the ZeRO
#:   paper's memory model (Rajbhandari et al. 2020, arXiv 1910.02054, section 5: 2 B half weights + 2 B half
#:   gradients + 12 B fp32 master weights and Adam moments, ``grad_bytes=2``), stage k sharding the optimizer
#:   states (1), also the gradients (2), also the weights (3, plus two gathered layers) over ``dp``. NOT
#:   validated: on 5 published cases (DeepSpeedExamples ZeRO-3, a ZeRO-2 DistilBERT run) it is 29% under to 3%
#:   over (``docs/world.md``): DeepSpeed's buckets and its fp32 gradient partition at the step are not modelled.
#: - ``lightning-ddp``: PyTorch Lightning's ``strategy="ddp"``, precision ``"fp32"`` ("32-true", Lightning's
#:   default), ``"amp"`` ("16-mixed" / "bf16-mixed") or ``"bf16-pure"`` ("bf16-true"). DDP's reducer keeps its
#:   own gradient buckets beside ``param.grad`` (``gradient_as_bucket_view=False``, the default; PyTorch's
#:   DistributedDataParallel docs: the bucket view "can reduce peak memory usage, where the saved memory size
#:   will be equal to the total gradients size"): twice the gradient bytes. NOT validated.
FRAMEWORKS: dict[str, dict[str, object]] = {
    "hf-trainer": {},
    "llm.c": {"grad_bytes": 2.0, "dropout": False, "logits_bytes": 2.0, "attention": "flash", "extra_layer_bytes": 4.0},
    "megatron-core": {"logits_bytes": 6.0},
    "torchtitan-fsdp2": {"zero_stage": 3, "weight_bytes": 4.0, "grad_bytes": 4.0, "optimizer_bytes": 8.0},
    "deepspeed-zero1": {"zero_stage": 1, "grad_bytes": 2.0},
    "deepspeed-zero2": {"zero_stage": 2, "grad_bytes": 2.0},
    "deepspeed-zero3": {"zero_stage": 3, "grad_bytes": 2.0},
    "lightning-ddp": {},
}
#: The precisions each framework runs, its default first (``precision`` not given: the default).
FRAMEWORK_PRECISIONS: dict[str, tuple[str, ...]] = {
    "hf-trainer": ("fp32", "amp", "bf16-pure"),
    "llm.c": ("bf16",),
    "megatron-core": ("bf16", "fp16"),
    "torchtitan-fsdp2": ("bf16", "fp32"),
    "deepspeed-zero1": ("bf16", "fp16"),
    "deepspeed-zero2": ("bf16", "fp16"),
    "deepspeed-zero3": ("bf16", "fp16"),
    "lightning-ddp": ("fp32", "amp", "bf16-pure"),
}
#: Options a framework implies only under one precision (over :data:`FRAMEWORKS`' own).
FRAMEWORK_PRECISION_OPTIONS: dict[str, dict[str, dict[str, object]]] = {
    # --fp16 accumulates gradients in the fp16 main_grad buffer: only --bf16 turns on fp32 accumulation
    # (Megatron-LM megatron/training/arguments.py, accumulate_allreduce_grads_in_fp32)
    "megatron-core": {"fp16": {"grad_bytes": 2.0}},
    "lightning-ddp": {"fp32": {"grad_bytes": 8.0}, "amp": {"grad_bytes": 8.0}, "bf16-pure": {"grad_bytes": 4.0}},
}
#: The frameworks whose mapping is checked on published measurements (``frenzy_env/data/memory_cases.csv``).
VALIDATED_FRAMEWORKS = ("hf-trainer", "llm.c", "megatron-core", "torchtitan-fsdp2")


def framework_options(framework: str, precision: str | None = None) -> dict[str, object]:
    """The options ``framework`` implies (``precision`` included: the given one, else the framework's default);
    an unknown framework raises :class:`~frenzy_env.errors.UnknownNameError` listing the known ones, a precision
    the framework does not run a ConfigError."""
    if not isinstance(framework, str) or framework not in FRAMEWORKS:
        raise unknown_name("framework", framework, FRAMEWORKS)
    runs = FRAMEWORK_PRECISIONS[framework]
    prec = runs[0] if precision is None else precision
    if prec not in runs:
        raise ConfigError(f"framework {framework!r} runs precision {', '.join(runs)}; got precision={prec!r}")
    out: dict[str, object] = {"precision": prec}
    out.update(FRAMEWORKS[framework])
    out.update(FRAMEWORK_PRECISION_OPTIONS.get(framework, {}).get(prec, {}))
    return out

RECOMPUTE = ("none", "selective", "op", "full")
_REBUILDS = ("op", "full")  # recomputation that rebuilds a whole layer in the backward pass
ATTENTION = ("eager", "flash")
#: What number the estimate is (``kind`` option), largest first: ``"device"`` -- the device total a tool such
#: as nvidia-smi shows (the caching allocator's reservation plus the CUDA context); ``"reserved"`` -- the
#: allocator's peak reservation (``torch.cuda.max_memory_reserved``: allocated plus fragmentation);
#: ``"allocated"`` -- the peak of live tensors (``torch.cuda.max_memory_allocated``). Always
#: device >= reserved >= allocated. The simulator's out-of-memory truth is ``"device"`` (the default).
KINDS = ("device", "reserved", "allocated")

#: Options of ``method="extended"`` and their defaults.
DEFAULT_OPTIONS: dict[str, object] = {
    "precision": "fp16",
    "weight_bytes": None,
    "grad_bytes": None,
    "optimizer_bytes": None,
    "zero_stage": 0,
    "recompute": "none",
    "sequence_parallel": False,
    "micro_batch": None,
    "pp": 1,
    "attention": "eager",
    "dropout": None,
    "vocab_logits": True,
    "logits_bytes": None,
    "extra_layer_bytes": 0.0,
    "include_context": True,
    "context_bytes": CONTEXT_BYTES,
    "framework_bytes": FRAMEWORK_BYTES,
    "fragmentation": FRAGMENTATION,
    "kind": "device",
    "framework": None,
}
OPTION_NAMES = tuple(DEFAULT_OPTIONS)


# ------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory of one GPU of a plan, in bytes.

    ``total_bytes = static_bytes + activation_bytes + overhead_bytes``; ``breakdown`` itemises the three.
    """

    total_bytes: float
    static_bytes: float
    activation_bytes: float
    overhead_bytes: float
    breakdown: dict[str, float]
    method: str

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GiB


# --------------------------------------------------------------------------------------- validation
def check_positive_int(field: str, value: object) -> int:
    """``value`` as an int when it is a positive whole number (an integral float passes), else ConfigError
    naming ``field``."""
    if type(value) is int and value >= 1:  # fast path
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise ConfigError(f"{field} must be a positive integer, got {value!r}")
    if value != value or int(value) != value or value < 1:  # NaN, fractional, < 1
        raise ConfigError(f"{field} must be a positive integer, got {value!r}")
    return int(value)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise unknown_name("memory method", method, METHODS)
    return method


def _number(field: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))
    if not ok or value != value or value < 0 or value == float("inf"):  # type: ignore[operator]
        kind = "a non-negative number" + (" or None" if allow_none else "")
        raise ConfigError(f"{field} must be {kind}, got {value!r}")


def _resolve_options(method: str, options: dict[str, object]) -> dict[str, object]:
    """Validate ``options`` for ``method`` and fill in the defaults (a new dict)."""
    _check_method(method)
    check_keys("memory option", options, OPTION_NAMES)
    if method == "frenzy":
        if options:
            raise ConfigError(
                f"method 'frenzy' is the paper's formula and takes no options (got {', '.join(sorted(options))}); "
                "use method='extended'"
            )
        return {}
    opts = dict(DEFAULT_OPTIONS)
    framework = options.get("framework")
    if framework is not None:  # the framework's options under the caller's own
        prec = options.get("precision")
        if prec is not None and prec not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {prec!r}")
        opts.update(framework_options(framework, prec))  # type: ignore[arg-type]
    opts.update(options)
    if opts["precision"] not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {opts['precision']!r}")
    for k in ("weight_bytes", "grad_bytes", "optimizer_bytes", "logits_bytes"):
        _number(k, opts[k], allow_none=True)
    _number("extra_layer_bytes", opts["extra_layer_bytes"])
    if isinstance(opts["zero_stage"], bool) or opts["zero_stage"] not in (0, 1, 2, 3):
        raise ConfigError(f"zero_stage must be 0, 1, 2 or 3, got {opts['zero_stage']!r}")
    opts["zero_stage"] = int(opts["zero_stage"])  # type: ignore[call-overload]
    if opts["recompute"] not in RECOMPUTE:
        raise ConfigError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {opts['recompute']!r}")
    if opts["attention"] not in ATTENTION:
        raise ConfigError(f"attention must be one of {', '.join(ATTENTION)}, got {opts['attention']!r}")
    for k in ("sequence_parallel", "vocab_logits", "include_context"):
        if not isinstance(opts[k], (bool, np.bool_)):
            raise ConfigError(f"{k} must be a bool, got {opts[k]!r}")
        opts[k] = bool(opts[k])
    if opts["dropout"] is not None:
        if not isinstance(opts["dropout"], (bool, np.bool_)):
            raise ConfigError(f"dropout must be a bool or None (automatic), got {opts['dropout']!r}")
        opts["dropout"] = bool(opts["dropout"])
    if opts["micro_batch"] is not None:
        opts["micro_batch"] = check_positive_int("micro_batch", opts["micro_batch"])
    opts["pp"] = check_positive_int("pp", opts["pp"])
    for k in ("context_bytes", "framework_bytes", "fragmentation"):
        _number(k, opts[k])
    if opts["kind"] not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {opts['kind']!r}")
    if opts["kind"] != "device":  # the torch counters see neither the CUDA context ...
        if options.get("include_context"):
            raise ConfigError(f"include_context=True contradicts kind={opts['kind']!r} (only 'device' has a context)")
        opts["include_context"] = False
        if opts["kind"] == "allocated":  # ... nor, for live tensors, the allocator's fragmentation
            opts["fragmentation"] = 0.0
    return opts


@lru_cache(maxsize=512)
def _resolved_cached(method: str, items: tuple) -> tuple[dict[str, object], tuple]:
    opts = _resolve_options(method, {k: v for k, _, v in items})
    return opts, tuple(sorted(opts.items()))


def resolved_options(method: str, options: dict[str, object]) -> tuple[dict[str, object], tuple]:
    """(resolved options, hashable key); cached. The returned dict is shared: never mutate it."""
    try:
        # the value's type is part of the key: True == 1 must not pass as a cached zero_stage=1
        return _resolved_cached(method, tuple(sorted((k, type(v).__name__, v) for k, v in options.items())))
    except TypeError:  # an unhashable option value: validate without the cache (and fail loudly)
        opts = _resolve_options(method, options)
        return opts, tuple(sorted(opts.items()))


def check_layout(model: ModelSpec, tp: int, pp: int = 1) -> None:
    """ConfigError unless the model can take the layout: tensor parallelism splits the attention heads, so
    ``tp`` must divide ``heads``; pipeline stages hold equal shares of the layers, so ``pp`` must divide
    ``layers`` (the rule of :mod:`frenzy_env.world.layouts`, whose plans the simulator evaluates)."""
    if model.heads % tp:
        raise ConfigError(
            f"tp={tp} does not divide {model.name}'s {model.heads} attention heads: tensor parallelism splits "
            f"the heads evenly over the tp GPUs"
        )
    if model.layers % pp:
        raise ConfigError(
            f"pp={pp} does not divide {model.name}'s {model.layers} layers: every pipeline stage holds the "
            f"same number of layers"
        )


def check_job(batch_size: object, seq_len: object) -> tuple[int, int]:
    """(global batch, sequence length) of a job as positive ints, else ConfigError."""
    return check_positive_int("batch_size", batch_size), check_positive_int("seq_len", seq_len)


# ------------------------------------------------------------------------------------ coefficients
@lru_cache(maxsize=4096)
def _coefficients(model: ModelSpec, seq_len: int, opts_key: tuple) -> dict[str, float]:
    """Per-token and per-parameter constants of the extended estimator (depend on model, s and options)."""
    o = dict(opts_key)
    prec = PRECISIONS[o["precision"]]
    h, s, a, v = model.hidden, seq_len, model.heads, model.vocab_size
    kv, f = model.kv_hidden, model.ffn_hidden
    dropout = (model.mlp == "gelu") if o["dropout"] is None else bool(o["dropout"])
    m = 1.0 if dropout else 0.0  # bytes of a dropout mask element (torch keeps a bool mask)
    e, en, sm = prec.act, prec.norm_in, prec.softmax
    # Per layer, per token of a micro-batch (Korthikanti et al. 2022, Sec. 4.1, generalised).
    # Replicated across tensor parallelism (split by t only under sequence parallelism): the two norm
    # inputs, the inputs of QKV and of the MLP (norm outputs), the dropout masks after the attention
    # output projection and after the MLP.
    rep = 2 * en * h + 2 * e * h + 2 * m * h + float(o["extra_layer_bytes"]) * h  # + a framework's own copies
    # Split over tensor parallelism: Q, K, V (K and V at kv_heads width); the attention output (input of
    # the output projection); GELU: fc output + GELU output; SwiGLU: gate, up, silu(gate), product.
    mlp = (2 if model.mlp == "gelu" else 4) * e * f
    shard = e * (h + 2 * kv) + e * h + mlp
    # Attention scores, per token: a * s elements under eager attention -- softmax output, dropout mask and
    # output, and a half copy when the softmax runs in fp32 (autocast). Flash attention (Dao et al. 2022,
    # arXiv 2205.14135) keeps only the fp32 log-sum-exp: 4 bytes per head and token.
    flash_stats = 4.0 * a
    if o["attention"] == "eager":
        score = (sm + (1.0 + sm if dropout else 0.0) + (e if sm != e else 0.0)) * a * s
    else:
        score = flash_stats
    logits_b = prec.logits if o["logits_bytes"] is None else float(o["logits_bytes"])
    norms = 2 * model.norm_params
    head_shard = 0 if model.tied_embeddings else v * h
    return {
        "rep": rep,
        "shard": shard,
        "score": score,
        "selective_score": flash_stats if o["attention"] == "flash" else 0.0,
        "full_input": en * h,  # the layer input kept by full recomputation (the residual stream)
        # op-level selective checkpointing (torchtitan's "selective op" policy): keep the layer input, the
        # attention kernel's output (and flash statistics) and every second matmul output in call order
        # (q, k, v, out-proj, MLP in (gate, up), MLP out); recompute everything else
        "op_saved": e * (sum(([h, kv, kv, h] + ([f, f] if model.mlp != "gelu" else [f]) + [h])[0::2]) + h)
        + (flash_stats if o["attention"] == "flash" else score),
        "emb_tok": m * h,  # embedding dropout mask (the embedding output is the first norm's input)
        "final_tok": en * h + e * h,  # final norm input and output (the head's input)
        "logits_tok": logits_b * v if o["vocab_logits"] else 0.0,
        "layer_shard": float(model.layer_params - norms),
        "layer_rep": float(norms),
        "emb_shard": float(v * h),
        "emb_rep": float(model.embedding_params - v * h),
        "head_shard": float(head_shard),
        "head_rep": float(model.head_params - head_shard),
        "w": prec.weight if o["weight_bytes"] is None else float(o["weight_bytes"]),
        "g": prec.grad if o["grad_bytes"] is None else float(o["grad_bytes"]),
        "o": prec.optim if o["optimizer_bytes"] is None else float(o["optimizer_bytes"]),
    }


def _stored_per_layer(c: dict[str, float], recompute: str) -> tuple[float, float]:
    """(replicated, tensor-parallel) bytes per token a layer keeps for the backward pass."""
    if recompute == "none":
        return c["rep"], c["shard"] + c["score"]
    if recompute == "selective":  # Korthikanti et al.: recompute the attention core, keep the rest
        return c["rep"], c["shard"] + c["selective_score"]
    if recompute == "op":
        return c["full_input"], c["op_saved"]
    return c["full_input"], 0.0  # full: only the layer input


def _extended_components(
    model: ModelSpec,
    batch_size: int,
    seq_len: int,
    dp: np.ndarray,
    tp: np.ndarray,
    opts: dict[str, object],
    opts_key: tuple,
) -> dict[str, np.ndarray]:
    """Byte components per plan, itemised; dp, tp: (P,) float64 arrays of valid plans (dp <= batch_size)."""
    c = _coefficients(model, seq_len, opts_key)
    s, t = seq_len, tp
    p = int(opts["pp"])  # type: ignore[call-overload]
    lp = math.ceil(model.layers / p)  # layers on a stage (the first stages when they do not divide)
    b_rep = np.ceil(batch_size / dp)  # (P,) sequences per replica
    mbs = opts["micro_batch"]
    mb = b_rep if mbs is None else np.minimum(float(mbs), b_rep)  # type: ignore[arg-type]  # (P,) micro-batch
    n_mb = np.ceil(b_rep / mb)  # (P,) micro-batches per iteration (gradient accumulation steps)
    in_flight = np.minimum(float(p), n_mb)  # (P,) micro-batches the first stage holds under 1F1B
    tok = mb * s  # (P,) tokens per micro-batch

    rd = t if opts["sequence_parallel"] else 1.0
    full_layer = c["rep"] / rd + (c["shard"] + c["score"]) / t  # (P,) bytes per token, nothing recomputed
    sr, ss = _stored_per_layer(c, opts["recompute"])  # type: ignore[arg-type]
    stored_layer = sr / rd + ss / t  # (P,)
    rc_full = opts["recompute"] in _REBUILDS
    working = tok * full_layer * (2.0 if rc_full else 1.0)  # gradients of one layer (+ its rebuild)
    logits = tok * c["logits_tok"] / t

    zero = int(opts["zero_stage"])  # type: ignore[call-overload]
    per_param = (
        c["w"] / (dp if zero >= 3 else 1.0)
        + c["g"] / (dp if zero >= 2 else 1.0)
        + c["o"] / (dp if zero >= 1 else 1.0)
    )
    wb = c["w"] / (dp if zero >= 3 else 1.0)
    gb = c["g"] / (dp if zero >= 2 else 1.0)
    layer_params = lp * (c["layer_shard"] / t + c["layer_rep"])  # (P,)
    emb_params = c["emb_shard"] / t + c["emb_rep"]
    head_params = c["head_shard"] / t + c["head_rep"]
    gather = (
        2.0 * c["w"] * (c["layer_shard"] / t + c["layer_rep"]) if zero >= 3 else 0.0 * t
    )  # ZeRO-3 prefetch

    frag = float(opts["fragmentation"])  # type: ignore[arg-type]
    if p == 1:
        params = layer_params + emb_params + head_params
        acts = tok * (lp * stored_layer + c["emb_tok"] + c["final_tok"])
        logit_part = logits
    else:
        if model.tied_embeddings:
            head_params = head_params + emb_params  # the last stage keeps its own copy of the tied matrix
        first_params = layer_params + emb_params
        last_params = layer_params + head_params
        first_acts = tok * in_flight * (lp * stored_layer + c["emb_tok"])
        last_acts = tok * (lp * stored_layer + c["final_tok"])
        first_peak = first_params * per_param + (1.0 + frag) * (first_acts + working)
        last_peak = last_params * per_param + (1.0 + frag) * (last_acts + working + logits)
        use_last = last_peak > first_peak  # (P,) the stage with the larger peak decides
        params = np.where(use_last, last_params, first_params)
        acts = np.where(use_last, last_acts, first_acts)
        logit_part = np.where(use_last, logits, 0.0)
    dynamic = acts + working + logit_part
    context = float(opts["context_bytes"]) if opts["include_context"] else 0.0  # type: ignore[arg-type]
    return {
        "weights": params * wb + gather,
        "gradients": params * gb,
        "optimizer": params * (per_param - wb - gb),
        "activations": acts,
        "backward_working_set": working,
        "logits": logit_part,
        "cuda_context": np.full_like(dp, context),
        "framework": np.full_like(dp, float(opts["framework_bytes"])),  # type: ignore[arg-type]
        "fragmentation": dynamic * frag,
    }


_STATIC_KEYS = ("weights", "gradients", "optimizer")
_ACT_KEYS = ("activations", "backward_working_set", "logits")
_OVER_KEYS = ("cuda_context", "framework", "fragmentation")


@lru_cache(maxsize=4096)
def _closed_form(model: ModelSpec, seq_len: int, opts_key: tuple) -> tuple[float, ...]:
    """Constants of the extended total for pp = 1, the same sum as :func:`_extended_components`::

        total = K + (P0 + P1/t)(S0 + S1/d) + G0 + G1/t + F * mb * (D0 + D1/t)

    with ``mb`` the micro-batch, ``F = (1 + fragmentation) * s``.
    """
    o = dict(opts_key)
    c = _coefficients(model, seq_len, opts_key)
    lp = model.layers
    sr, ss = _stored_per_layer(c, o["recompute"])
    wf = 2.0 if o["recompute"] in _REBUILDS else 1.0
    x_rep = lp * sr + wf * c["rep"]  # per token, split by t only under sequence parallelism
    x_tp = lp * ss + wf * (c["shard"] + c["score"]) + c["logits_tok"]
    x_0 = c["emb_tok"] + c["final_tok"]
    d0, d1 = (x_0, x_tp + x_rep) if o["sequence_parallel"] else (x_0 + x_rep, x_tp)
    zero = o["zero_stage"]
    parts = ((c["w"], zero >= 3), (c["g"], zero >= 2), (c["o"], zero >= 1))
    s0 = sum(v for v, sharded in parts if not sharded)
    s1 = sum(v for v, sharded in parts if sharded)
    p0 = lp * c["layer_rep"] + c["emb_rep"] + c["head_rep"]
    p1 = lp * c["layer_shard"] + c["emb_shard"] + c["head_shard"]
    g0, g1 = (2.0 * c["w"] * c["layer_rep"], 2.0 * c["w"] * c["layer_shard"]) if zero >= 3 else (0.0, 0.0)
    k = float(o["framework_bytes"]) + (float(o["context_bytes"]) if o["include_context"] else 0.0) + g0
    f = (1.0 + float(o["fragmentation"])) * seq_len
    mbs = float(o["micro_batch"]) if o["micro_batch"] is not None else 0.0
    return k, p0, p1, s0, s1, g1, f, d0, d1, mbs


def _frenzy_components(
    model: ModelSpec, batch_size: int, seq_len: int, dp: np.ndarray, tp: np.ndarray
) -> dict[str, np.ndarray]:
    """Frenzy (arXiv 2412.14479) MARP, verbatim: 20 W / t and s B h l (10/d + 24/(d t) + 5 a s/(d h t))."""
    v, h, l, a, s, b = model.vocab_size, model.hidden, model.layers, model.heads, seq_len, batch_size
    w_paper = v * h + l * (12 * h * h + 13 * h)  # Frenzy's W
    static = 20.0 * w_paper / tp
    act = s * b * h * l * (10.0 / dp + 24.0 / (dp * tp) + 5.0 * a * s / (dp * h * tp))
    return {"model_states": static, "activations": act}


def _total(
    spec: ModelSpec,
    b: int,
    s: int,
    dp: np.ndarray,
    tp: np.ndarray,
    method: str,
    opts: dict[str, object],
    key: tuple,
) -> np.ndarray:
    """Totals of valid plans; dp, tp: (P,) float64 with 1 <= dp <= b, tp >= 1."""
    if method == "frenzy":
        v, h, l, a = spec.vocab_size, spec.hidden, spec.layers, spec.heads
        w_paper = v * h + l * (12 * h * h + 13 * h)
        inv_t = 1.0 / tp
        return 20.0 * w_paper * inv_t + (s * b * h * l) / dp * (10.0 + (24.0 + 5.0 * a * s / h) * inv_t)
    if opts["pp"] != 1:
        return sum(_extended_components(spec, b, s, dp, tp, opts, key).values())  # type: ignore[return-value]
    k, p0, p1, s0, s1, g1, f, d0, d1, mbs = _closed_form(spec, s, key)
    inv_t = 1.0 / tp
    mb = np.ceil(b / dp)  # (P,) sequences per replica
    if mbs:
        mb = np.minimum(mb, mbs)
    states = (p0 + p1 * inv_t) * (s0 + s1 / dp) if s1 else (p0 + p1 * inv_t) * s0
    out = states + f * mb * (d0 + d1 * inv_t) + k
    if g1:
        out += g1 * inv_t
    return out


def total_layouts(
    spec: ModelSpec,
    b: int,
    s: int,
    dp: np.ndarray,
    tp: np.ndarray,
    pp: np.ndarray,
    mb: np.ndarray,
    method: str,
    opts: dict[str, object],
    key: tuple,
) -> np.ndarray:
    """Totals of valid plans with per-plan pipeline stages ``pp`` and micro-batch ``mb`` (all (P,) float64,
    ``1 <= dp <= b``): the same sums as :func:`_extended_components` with ``pp`` and ``micro_batch`` as arrays
    (``mb`` is capped at the per-replica batch ``ceil(b / dp)``).

    ``method="frenzy"``: the paper's formula with the same substitutions (it models neither): weights and
    optimizer states ``20 W / (t p)``; activations of ``l / p`` layers for ``mb x min(p, micro-batches)``
    sequences (the per-replica ``B / d`` when there is one micro-batch, as in the paper).
    """
    b_rep = np.ceil(b / dp)
    mb = np.minimum(mb, b_rep)
    n_mb = np.ceil(b_rep / mb)  # micro-batches per iteration (gradient accumulation steps)
    in_flight = np.minimum(pp, n_mb)  # 1F1B: micro-batches the first stage holds (Narayanan et al. 2021)
    if method == "frenzy":
        v, h, l, a = spec.vocab_size, spec.hidden, spec.layers, spec.heads
        w_paper = v * h + l * (12 * h * h + 13 * h)
        inv_t = 1.0 / tp
        seqs = np.where(n_mb == 1.0, b / dp, mb * in_flight)
        return 20.0 * w_paper * inv_t / pp + (s * h * l) * seqs / pp * (10.0 + (24.0 + 5.0 * a * s / h) * inv_t)
    c = _coefficients(spec, s, key)
    lp = np.ceil(spec.layers / pp)
    tok = mb * s
    rd = tp if opts["sequence_parallel"] else 1.0
    sr, ss = _stored_per_layer(c, opts["recompute"])  # type: ignore[arg-type]
    stored_layer = sr / rd + ss / tp
    full_layer = c["rep"] / rd + (c["shard"] + c["score"]) / tp
    working = tok * full_layer * (2.0 if opts["recompute"] in _REBUILDS else 1.0)
    logits = tok * c["logits_tok"] / tp
    zero = int(opts["zero_stage"])  # type: ignore[call-overload]
    per_param = (
        c["w"] / (dp if zero >= 3 else 1.0) + c["g"] / (dp if zero >= 2 else 1.0) + c["o"] / (dp if zero >= 1 else 1.0)
    )
    layer_params = lp * (c["layer_shard"] / tp + c["layer_rep"])
    emb_params = c["emb_shard"] / tp + c["emb_rep"]
    head_params = c["head_shard"] / tp + c["head_rep"]
    f1 = 1.0 + float(opts["fragmentation"])  # type: ignore[arg-type]
    single = (layer_params + emb_params + head_params) * per_param + f1 * (
        tok * (lp * stored_layer + c["emb_tok"] + c["final_tok"]) + working + logits
    )
    last_head = head_params + emb_params if spec.tied_embeddings else head_params
    first_acts = tok * in_flight * (lp * stored_layer + c["emb_tok"])
    first = (layer_params + emb_params) * per_param + f1 * (first_acts + working)
    last = (layer_params + last_head) * per_param + f1 * (tok * (lp * stored_layer + c["final_tok"]) + working + logits)
    peak = np.where(pp == 1.0, single, np.maximum(first, last))
    context = float(opts["context_bytes"]) if opts["include_context"] else 0.0  # type: ignore[arg-type]
    k = context + float(opts["framework_bytes"])  # type: ignore[arg-type]
    if zero >= 3:
        k = k + 2.0 * c["w"] * (c["layer_shard"] / tp + c["layer_rep"])  # ZeRO-3 prefetch of two layers
    return peak + k


# ----------------------------------------------------------------------------------------- public
def estimate_memory_array(
    model: str | ModelSpec,
    *,
    batch_size: int,
    seq_len: int,
    dp: np.ndarray,
    tp: np.ndarray,
    method: str = DEFAULT_METHOD,
    **options: object,
) -> np.ndarray:
    """Peak bytes per GPU for many (dp, tp) plans of one job in one numpy evaluation.

    Parameters
    ----------
    model: catalogue name or :class:`ModelSpec`.
    batch_size: global batch B (sequences per iteration); seq_len: tokens per sequence.
    dp, tp: (P,) data- and tensor-parallel degrees (broadcast together).
    method: ``"frenzy"`` (the paper's formula) or ``"extended"``.
    options: extended-method options, see :data:`DEFAULT_OPTIONS`; unknown names raise ``ConfigError``.

    Returns
    -------
    (P,) float64 bytes; ``inf`` where the plan is impossible (``dp < 1``, ``tp < 1``, ``dp > batch_size`` or
    not finite).
    """
    spec = model if isinstance(model, ModelSpec) else get_model(model)
    b, s = check_job(batch_size, seq_len)
    opts, key = resolved_options(method, options)
    dp_a = np.asarray(dp, dtype=np.float64)
    tp_a = np.asarray(tp, dtype=np.float64)
    if dp_a.shape != tp_a.shape:
        dp_a, tp_a = np.broadcast_arrays(dp_a, tp_a)
    ok = (dp_a >= 1.0) & (dp_a <= b) & (tp_a >= 1.0) & (tp_a < np.inf)  # NaN compares False
    if ok.all():
        return _total(spec, b, s, dp_a, tp_a, method, opts, key)
    out = _total(spec, b, s, np.where(ok, dp_a, 1.0), np.where(ok, tp_a, 1.0), method, opts, key)
    return np.where(ok, out, np.inf)


def estimate_memory_layouts(
    model: str | ModelSpec,
    *,
    batch_size: int,
    seq_len: int,
    dp: np.ndarray,
    tp: np.ndarray,
    pp: np.ndarray,
    micro_batch: np.ndarray,
    method: str = DEFAULT_METHOD,
    **options: object,
) -> np.ndarray:
    """Peak bytes per GPU for many (dp, tp, pp, micro-batch) plan layouts of one job in one numpy evaluation.

    Like :func:`estimate_memory_array` with the ``pp`` and ``micro_batch`` options given per plan (so they
    must not be passed as options): plan ``i`` equals ``estimate_memory(..., dp=dp[i], tp=tp[i],
    pp=pp[i], micro_batch=micro_batch[i])``. ``method="frenzy"`` extends the paper's formula (see
    :func:`total_layouts`). Returns (P,) float64 bytes; ``inf`` where a plan is impossible (a degree or
    micro-batch below 1, ``dp > batch_size``, not finite).
    """
    spec = model if isinstance(model, ModelSpec) else get_model(model)
    b, s = check_job(batch_size, seq_len)
    if "pp" in options or "micro_batch" in options:
        raise ConfigError("estimate_memory_layouts takes pp and micro_batch per plan, not as options")
    opts, key = resolved_options(method, options)
    arrs = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (dp, tp, pp, micro_batch)))
    dp_a, tp_a, pp_a, mb_a = arrs
    ok = (dp_a >= 1.0) & (dp_a <= b) & (tp_a >= 1.0) & (tp_a < np.inf) & (pp_a >= 1.0) & (pp_a < np.inf)
    ok &= (mb_a >= 1.0) & (mb_a < np.inf)
    if ok.all():
        return total_layouts(spec, b, s, dp_a, tp_a, pp_a, mb_a, method, opts, key)
    one = np.ones_like(dp_a)
    safe = [np.where(ok, x, one) for x in arrs]
    return np.where(ok, total_layouts(spec, b, s, *safe, method, opts, key), np.inf)


def estimate_memory(
    model: str | ModelSpec,
    *,
    batch_size: int,
    seq_len: int,
    dp: int = 1,
    tp: int = 1,
    method: str = DEFAULT_METHOD,
    **options: object,
) -> MemoryEstimate:
    """Peak memory of one GPU when training ``model`` with global batch ``batch_size`` on ``dp x tp`` GPUs.

    See the module docstring for both methods and :data:`DEFAULT_OPTIONS` for the extended options:
    ``precision`` ("fp16" default, "bf16", "fp32", "amp"), ``weight_bytes`` / ``grad_bytes`` /
    ``optimizer_bytes`` (per parameter, override the precision), ``zero_stage`` (0-3), ``recompute``
    ("none", "selective", "op", "full"), ``sequence_parallel``, ``micro_batch`` (None: the whole per-replica
    batch, no gradient accumulation), ``pp`` (pipeline stages, 1F1B), ``attention`` ("eager", "flash"),
    ``dropout`` (None: on for GELU models), ``vocab_logits`` (False for a classification head),
    ``logits_bytes``, ``extra_layer_bytes``, ``include_context``, ``context_bytes``, ``framework_bytes``,
    ``fragmentation``, ``kind`` ("device" default: the device total with the CUDA context; "reserved": the
    caching allocator's peak; "allocated": the peak of live tensors), ``framework`` (None default: exactly the
    options above; else a name of :data:`FRAMEWORKS`, whose options, :func:`framework_options`, apply under
    the ones given; ``precision`` "bf16-pure" is pure bf16 with no fp32 master copy).
    ``method="frenzy"`` takes no options.

    Raises
    ------
    ConfigError: a non-positive or fractional batch, sequence, dp, tp or pp, ``dp > batch_size``, a
        ``micro_batch`` above the per-replica batch ``ceil(batch_size / dp)``, a ``tp`` that does not divide the
        attention heads or a ``pp`` that does not divide the layers (:func:`check_layout`), an unknown option
        name or a bad option value, a precision the ``framework`` does not run.
    UnknownNameError: an unknown model, method or framework (the error lists the known ones).
    """
    spec = get_model(model)
    b, s = check_job(batch_size, seq_len)
    d, t = check_positive_int("dp", dp), check_positive_int("tp", tp)
    if d > b:
        raise ConfigError(
            f"dp={d} exceeds batch_size={b}: every data-parallel replica needs at least one sequence"
        )
    opts, key = resolved_options(method, options)
    check_layout(spec, t, int(opts.get("pp", 1)))  # type: ignore[call-overload]
    mb, rep = opts.get("micro_batch"), per_replica_batch(b, d)
    if mb is not None and mb > rep:  # type: ignore[operator]
        raise ConfigError(
            f"micro_batch={mb} exceeds the per-replica batch {rep} (ceil(batch_size={b} / dp={d})): a micro-batch "
            "is a slice of one replica's batch"
        )
    dp_a, tp_a = np.array([float(d)]), np.array([float(t)])
    if method == "frenzy":
        comp = _frenzy_components(spec, b, s, dp_a, tp_a)
        static = float(comp["model_states"][0])
        act = float(comp["activations"][0])
        w_paper = spec.vocab_size * spec.hidden + spec.layers * (12 * spec.hidden**2 + 13 * spec.hidden)
        breakdown = {"model_states": static, "activations": act, "paper_params_W": float(w_paper)}
        return MemoryEstimate(static + act, static, act, 0.0, breakdown, method)
    comp = _extended_components(spec, b, s, dp_a, tp_a, opts, key)
    breakdown = {k: float(np.asarray(val).reshape(-1)[0]) for k, val in comp.items()}
    static = sum(breakdown[k] for k in _STATIC_KEYS)
    act = sum(breakdown[k] for k in _ACT_KEYS)
    over = sum(breakdown[k] for k in _OVER_KEYS)
    return MemoryEstimate(static + act + over, static, act, over, breakdown, method)

