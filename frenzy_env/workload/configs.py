"""Training configurations of jobs: layouts, memory fit, reference iteration times and the assignment rule.

Model assignment (traces record no model)
-----------------------------------------
A job that records no model gets a training configuration by this seeded rule (:func:`assign_configs`):

1. Candidates: every catalogue model (or those given) x global batch in :data:`ASSIGN_BATCH_SIZES`, at
   sequence length ``min(model.max_seq_len, 2048)`` (recorded batch or sequence values are kept).
2. A candidate *fits* g GPUs when some layout ``dp x tp x pp = g`` (:func:`frenzy_env.world.layouts.plan_layouts`:
   ``tp`` a power of two dividing g and the heads, at most ``gpus_per_node``; ``pp`` a power of two dividing
   the layers; ``dp <= batch``; gradient accumulation over power-of-two micro-batches) has an "extended" MARP
   estimate within the memory of the reference GPU type (default A100-80GB). Its *minimum* is the smallest
   power of two it fits.
3. For a job that asked for g GPUs, keep the candidates that fit g and are *right-sized*: minimum <= g <
   2 x minimum (the job asked for about what its configuration needs). None right-sized: every candidate
   that fits g. None at all: a :class:`ValueError` (for a recorded model: all its candidates).
4. Draw two uniforms per job, in job order, from ``numpy.random.default_rng(seed)``: the first picks the
   model among the kept ones (catalogue order), the second the batch among that model's kept batches.

With a GPU mix (``gpu_mix``: the cluster's GPU types with their counts and node sizes, as trace loaders pass
when given a cluster), step 2's memory is not always the reference type's: after the draws of step 4, one
more uniform per job (in job order) draws the job's *sizing type* among the types with at least ``g`` GPUs,
with probability proportional to their GPU counts, and steps 2-3 use that type's memory and node size. A job
sized for the smallest-memory type fits every larger one at its recorded count, so every GPU type keeps
work it can run at the counts the trace recorded, in proportion to its share of the cluster (sizing every
job to the reference A100-80GB left 447 of the 570 jobs of the default ITP week runnable at their recorded
count only on the 32 A100s of frenzy-testbed, and the RTX3090s idle under FIFO). A job with no candidate
on its sizing type falls back to the reference type.

Assigned fields are listed in :attr:`JobSpec.assigned`; recorded ones never change with the seed.

The rule above is sizing ``"v4"``, env v4's rule (``sizing=`` of :func:`assign_configs`,
:meth:`Workload.from_csv`, :class:`~frenzy_env.workload.generators.TraceGenerator` and
:class:`~frenzy_env.workload.generators.SyntheticGenerator`). It counts a configuration as fitting g GPUs when
it fits *with* gradient accumulation, so with micro-batch 1 almost any batch fits one GPU: 37% of the
default ITP week's 1-GPU jobs get a global batch of 256 or more, and a planner without accumulation (Frenzy's
MARP) gives them 16 GPUs at the median (up to 32; seeds 0-2 on frenzy-testbed).

Sizing rule recorded (v5)
-------------------------
The default, env v5's (``sizing="recorded"``; every preset, and the aliases ``"itp-recorded"`` and
``"synthetic-recorded"``). A job that recorded ``g`` GPUs runs at ``g`` with a per-GPU micro-batch from public training
configurations and at most :data:`MAX_ACCUMULATION` (4) accumulation steps, and does not fit a quarter of its
GPUs without accumulation. For a job, its sizing type ``T`` (memory ``M``, ``p`` GPUs per node; drawn as above)
and a model ``m`` at sequence length ``s`` (recorded, else ``min(m.max_seq_len, 2048)``):

1. Layout at ``g`` (:func:`recorded_layout`): among ``tp x pp`` with ``tp`` a power of two dividing the heads,
   at most ``min(p, 8)``, ``pp`` a power of two dividing the layers and ``tp * pp`` dividing ``g``, the first in
   order of ``(tp * pp, pp, tp)`` at which micro-batch 1 fits ``M`` ("extended" MARP estimate, the simulator's
   truth; with ``pp > 1``, ``pp`` micro-batches in flight): model parallelism only where the model needs it.
   ``d = g / (tp * pp)`` data-parallel replicas. No such layout: ``m`` cannot be sized at ``g`` on ``T``.
2. Micro-batch ``b`` and accumulation steps ``a`` (:func:`recorded_options`): with ``pp == 1``, ``b`` from
   :data:`MICRO_BATCH_WEIGHTS` among the values whose micro-batch fits ``M`` on that layout (probabilities
   renormalised), ``a`` uniform on :data:`ACCUMULATION_STEPS` = (1, 2, 4); global batch ``B = d * b * a``. With
   ``pp > 1``, micro-batch 1 (as the simulator's pipelined plans, :func:`frenzy_env.world.layouts.plan_layouts`) and
   ``a * pp`` micro-batches per iteration (a 1F1B pipeline needs ``pp`` to fill), ``B = d * pp * a``.
3. Not fitting a quarter (:func:`fits_unaccumulated`): a candidate ``B`` is kept only if on no count
   ``c <= floor(g / 4)`` of ``T`` does any layout ``dp x tp = c`` (``tp`` as in step 1, ``dp <= B``, no pipeline)
   hold the per-replica batch ``ceil(B / dp)`` as one micro-batch (no accumulation) in ``M``. For ``g < 4`` there
   is no such count.
4. A job's candidates: every model (or the recorded one) with at least one kept ``(b, a)``; with a recorded
   batch, that batch when ``ceil(B / d) = b' x a`` for some ``a`` in (1, 2, 4) with micro-batch
   ``b' = ceil(ceil(B / d) / a)`` fitting (``pp > 1``: ``ceil(B / d) <= 4 * pp``) and step 3 holds. None on the
   sizing type: the reference type (as above). None there either: :class:`NoConfigurationError` naming the
   value (a trace loader turns it into a :class:`~frenzy_env.errors.TraceFormatError` naming the file, the row,
   the job and the GPU count). There is no silent fallback.
5. Draws, seeded like the v4 rule (``numpy.random.default_rng(seed)``: ``(n, 2)`` uniforms, then ``n`` for the
   sizing type): the first uniform picks the model uniformly among the candidates (catalogue order), the second
   ``(b, a)`` among that model's kept pairs with probability ``P(b) P(a)`` renormalised (pairs ordered by ``b``
   then ``a``).

:data:`MICRO_BATCH_WEIGHTS` is the empirical distribution of the per-GPU micro-batches of the 16 public
configurations in :data:`MICRO_BATCH_SOURCES` (each rounded to the nearest power of two in log scale: nanoGPT's
12 counts as 16): 1: 3, 2: 2, 4: 4, 8: 1, 16: 3, 32: 1, 64: 2 (of 16). Accumulation uniform on (1, 2, 4) is an
assumption: the same configurations accumulate 1 (Hugging Face Trainer's default ``gradient_accumulation_steps``,
llm.c GPT-2 124M and 350M), 2 (llm.c 774M), 4 (Megatron-DeepSpeed's Llama example), and more (nanoGPT's GPT-2
5 per GPU, llm.c 1.5B 8, Megatron-LM's Llama-3 8B 16); 4 is the cap, so a job uses about the GPUs it recorded.
Consequences: a 1-GPU job's batch is at most 64 x 4 = 256; a planner without accumulation needs at most ``4 g``
GPUs of the sizing type for a ``pp == 1`` job (at ``4 g`` the per-replica batch is at most ``b``), and more than
``g / 4``.

:func:`reference_iteration_time` is the seconds per iteration of a configuration on a given GPU count of the
reference GPU type, consolidated: what a trace's recorded duration means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from frenzy_env.errors import ConfigError, unknown_name
from frenzy_env.world.cluster import get_gpu_type
from frenzy_env.world.efficiency import DEFAULT_EFFICIENCY
from frenzy_env.world.layouts import layouts, pipeline_depths, plan_layouts, powers_of_two
from frenzy_env.world.memory.estimator import estimate_memory_layouts
from frenzy_env.world.models import MODELS, ModelSpec, get_model
from frenzy_env.world.throughput import DEFAULT_UTILISATION, iteration_time_array

REFERENCE_GPU_TYPE = "A100-80GB"
ASSIGN_BATCH_SIZES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024)
MAX_ASSIGN_SEQ_LEN = 2048
TP_LEVELS: tuple[int, ...] = (1, 2, 4, 8)

#: Sizing rules (``sizing=``): ``"v4"`` the right-sized rule of the module docstring (env v4's),
#: ``"recorded"`` its section "Sizing rule recorded (v5)".
SIZING_RULES: tuple[str, ...] = ("v4", "recorded")
DEFAULT_SIZING = "recorded"
MAX_ACCUMULATION = 4
ACCUMULATION_STEPS: tuple[int, ...] = (1, 2, 4)  # uniform (an assumption; see the module docstring)

#: Per-GPU micro-batch (sequences) of public training configurations, each with where it is set. Read from the
#: repositories' files (nanoGPT at commit 3adf61e, llm.c at f1e2ace, Megatron-LM at d98e8a6, Megatron-DeepSpeed
#: at 4efb479, transformers' TrainingArguments docstring and field default).
MICRO_BATCH_SOURCES: tuple[tuple[int, str], ...] = (
    (8, "huggingface/transformers src/transformers/training_args.py: per_device_train_batch_size defaults to 8"),
    (12, "karpathy/nanoGPT config/train_gpt2.py: batch_size = 12 (GPT-2 124M, block 1024, 8 x A100-40GB)"),
    (1, "karpathy/nanoGPT config/finetune_shakespeare.py: batch_size = 1 (GPT-2 XL fine-tuning)"),
    (64, "karpathy/llm.c scripts/run_gpt2_124M.sh: -b 64 -t 1024 (8 GPUs)"),
    (64, "karpathy/llm.c scripts/run_gpt2_350M.sh: -b 64 -t 1024 (8 GPUs)"),
    (32, "karpathy/llm.c scripts/run_gpt2_774M.sh: -b 32 -t 1024 (8 GPUs)"),
    (16, "karpathy/llm.c scripts/run_gpt2_1558M.sh: -b 16 -t 1024 (8 GPUs)"),
    (4, "NVIDIA/Megatron-LM examples/bert/train_bert_340m_distributed.sh: --micro-batch-size 4"),
    (1, "NVIDIA/Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh: --micro-batch-size 1"),
    (1, "NVIDIA/Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh: MICRO_BATCH_SIZE=1 (sequence 8192)"),
    (2, "deepspeedai/Megatron-DeepSpeed examples_deepspeed/rebase/ds_pretrain_gpt_125M.sh: batch_size=2"),
    (2, "deepspeedai/Megatron-DeepSpeed examples_deepspeed/rebase/ds_pretrain_gpt_1.3B.sh: batch_size=2"),
    (4, "deepspeedai/Megatron-DeepSpeed examples_deepspeed/MoE/ds_pretrain_gpt_350M_dense.sh: BATCH_SIZE=4"),
    (4, "deepspeedai/Megatron-DeepSpeed examples_deepspeed/MoE/ds_pretrain_gpt_6.7B_dense.sh: BATCH_SIZE=4"),
    (4, "deepspeedai/Megatron-DeepSpeed examples_deepspeed/pretrain_llama2_distributed.sh: MICRO_BATCH_SIZE=4"),
    (
        16,
        "deepspeedai/Megatron-DeepSpeed examples_deepspeed/finetune_hf_llama/finetune_llama.sh: "
        "MICRO_BATCH_SIZE=16 (Llama 7B, sequence 512)",
    ),
)


def _micro_batch_weights() -> dict[int, float]:
    counts: dict[int, int] = {}
    for value, _ in MICRO_BATCH_SOURCES:
        p = 1 << round(math.log2(value))  # nearest power of two in log scale
        counts[p] = counts.get(p, 0) + 1
    total = sum(counts.values())
    return {k: counts[k] / total for k in sorted(counts)}


#: Probability of each per-GPU micro-batch under sizing "recorded": :data:`MICRO_BATCH_SOURCES`' empirical shares.
MICRO_BATCH_WEIGHTS: dict[int, float] = _micro_batch_weights()


def _layouts(heads: int, batch: int, count: int, per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(L,) dp and tp of every legal layout of ``count`` GPUs (:mod:`frenzy_env.world.layouts`), tp in TP_LEVELS."""
    return layouts(heads, batch, (count,), min(per_node, TP_LEVELS[-1]))


def _plan_layouts(
    model: ModelSpec, batch: int, count: int, per_node: int, pipeline_micro_batches: bool = False
) -> dict[str, np.ndarray]:
    """(L,) dp, tp, pp and micro-batch of every candidate layout of ``count`` GPUs, tp in TP_LEVELS
    (``pipeline_micro_batches``: as in :func:`frenzy_env.world.layouts.plan_layouts`)."""
    dp, tp, pp, mb = plan_layouts(
        model.heads, model.layers, batch, (count,), min(per_node, TP_LEVELS[-1]),
        pipeline_micro_batches=pipeline_micro_batches,
    )
    return {"dp": dp, "tp": tp, "pp": pp, "micro_batch": mb}


@lru_cache(maxsize=65536)
def reference_iteration_time(
    model: ModelSpec,
    batch_size: int,
    seq_len: int,
    gpus: int,
    *,
    gpu: str = REFERENCE_GPU_TYPE,
    gpus_per_node: int = 8,
    utilisation: float = DEFAULT_UTILISATION,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> float:
    """Seconds per iteration of a job on ``gpus`` GPUs of ``gpu``, consolidated (what trace durations mean).

    The fastest memory-feasible ("extended") layout (with pipeline stages and gradient accumulation, as
    MARP plans them); if none fits, the fastest layout ignoring memory; if no layout exists (``gpus``
    exceeds the batch and no tensor parallelism helps), ``dp = min(gpus, batch)``. ``efficiency``: the speed
    model's option (:func:`frenzy_env.world.throughput.iteration_time_array`; pass the simulator's, so that a trace's
    duration becomes the work the simulator runs in that time); under ``"microbatch"`` and ``"per_type"`` pipelined
    layouts get every micro-batch size, as in the simulator's plan table.
    """
    g = get_gpu_type(gpu)
    lay = _plan_layouts(model, batch_size, gpus, gpus_per_node, efficiency != "flat")
    if lay["dp"].size == 0:
        one = np.array([1])
        lay = {"dp": np.array([min(gpus, batch_size)]), "tp": one, "pp": one, "micro_batch": np.array([batch_size])}
    span = max(1, -(-gpus // gpus_per_node))
    it = iteration_time_array(
        model,
        batch_size=batch_size,
        seq_len=seq_len,
        gpu=g,
        dp=lay["dp"],
        tp=lay["tp"],
        nodes_spanned=span,
        utilisation=utilisation,
        pp=lay["pp"],
        micro_batch=lay["micro_batch"],
        efficiency=efficiency,
    )  # (L,)
    mem = estimate_memory_layouts(model, batch_size=batch_size, seq_len=seq_len, **lay)  # (L,)
    ok = mem <= g.memory_bytes
    return float(it[ok].min() if ok.any() else it.min())


@lru_cache(maxsize=65536)
def _fits(model: ModelSpec, batch: int, seq: int, count: int, gpu: str, per_node: int) -> bool:
    lay = _plan_layouts(model, batch, count, per_node)
    if lay["dp"].size == 0:
        return False
    mem = estimate_memory_layouts(model, batch_size=batch, seq_len=seq, **lay)
    return bool((mem <= get_gpu_type(gpu).memory_bytes).any())


@lru_cache(maxsize=16384)
def _min_pow2(model: ModelSpec, batch: int, seq: int, gpu: str, per_node: int, limit: int) -> int:
    """Smallest power-of-two GPU count (<= limit) the configuration fits; 0 if none."""
    c = 1
    while c <= limit:
        if _fits(model, batch, seq, c, gpu, per_node):
            return c
        c *= 2
    return 0


def default_seq_len(model: ModelSpec) -> int:
    """Sequence length the assignment rule gives a model: ``min(max_seq_len, 2048)``."""
    return min(model.max_seq_len, MAX_ASSIGN_SEQ_LEN)


class NoConfigurationError(ConfigError):
    """No catalogue configuration fits a job's GPU count; ``index`` is the job's position (if known)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


def _candidates(
    count: int,
    model: ModelSpec | None,
    batch: int | None,
    seq: int | None,
    models: tuple[ModelSpec, ...],
    gpu: str,
    per_node: int,
) -> list[tuple[ModelSpec, int, int]]:
    """Kept candidate configurations for one job (rule steps 1-3), in (catalogue, batch) order."""
    limit = 1 << max(0, (count - 1).bit_length())
    pool = [
        (m, b, seq if seq is not None else default_seq_len(m))
        for m in ((model,) if model is not None else models)
        for b in ((batch,) if batch is not None else ASSIGN_BATCH_SIZES)
    ]
    fit = [c for c in pool if _fits(c[0], c[1], c[2], count, gpu, per_node)]
    right = [
        c for c in fit if (mn := _min_pow2(c[0], c[1], c[2], gpu, per_node, limit)) and mn <= count < 2 * mn
    ]
    if right:
        return right
    if fit:
        return fit
    if model is not None:
        return pool
    raise NoConfigurationError(
        f"no configuration of models {', '.join(m.name for m in models)} fits {count} GPUs of {gpu} "
        f"(gpus_per_node={per_node}); pass other models"
    )


def check_sizing(sizing: object) -> str:
    """``sizing`` if it names a rule of :data:`SIZING_RULES`, else :class:`~frenzy_env.errors.UnknownNameError`."""
    if sizing not in SIZING_RULES:
        raise unknown_name("sizing rule", str(sizing), SIZING_RULES)
    return str(sizing)


def _one_layout_bytes(model: ModelSpec, batch: int, seq: int, dp: int, tp: int, pp: int, mb: int) -> float:
    one = lambda x: np.array([x], dtype=np.int64)  # noqa: E731
    return float(
        estimate_memory_layouts(
            model, batch_size=batch, seq_len=seq, dp=one(dp), tp=one(tp), pp=one(pp), micro_batch=one(mb)
        )[0]
    )


@lru_cache(maxsize=16384)
def recorded_layout(
    model: ModelSpec, seq: int, count: int, gpu: str = REFERENCE_GPU_TYPE, gpus_per_node: int = 8
) -> tuple[int, int, int] | None:
    """``(dp, tp, pp)`` a job sized by rule "recorded" runs on ``count`` GPUs of ``gpu`` (step 1 of the module
    docstring): the fewest model-parallel GPUs ``tp * pp`` (then the fewest stages) at which micro-batch 1 fits;
    ``None`` when no layout of ``count`` GPUs holds it."""
    cap = get_gpu_type(gpu).memory_bytes
    opts = sorted(
        (tp * pp, pp, tp)
        for pp in pipeline_depths(model.layers, count)
        for tp in powers_of_two(min(gpus_per_node, TP_LEVELS[-1]))
        if model.heads % tp == 0 and count % (tp * pp) == 0
    )
    for _, pp, tp in opts:
        d = count // (tp * pp)
        # pp == 1: one micro-batch of 1; pp > 1: pp micro-batches of 1 (all in flight on the first stage)
        if _one_layout_bytes(model, d * pp, seq, d, tp, pp, 1) <= cap:
            return d, tp, pp
    return None


@lru_cache(maxsize=65536)
def fits_unaccumulated(
    model: ModelSpec, batch: int, seq: int, max_count: int, gpu: str = REFERENCE_GPU_TYPE, gpus_per_node: int = 8
) -> bool:
    """Whether global batch ``batch`` fits some count ``c <= max_count`` of ``gpu`` without gradient accumulation
    or pipeline (any layout ``dp x tp = c``, ``tp`` as in :func:`recorded_layout`, ``dp <= batch``, the
    per-replica batch ``ceil(batch / dp)`` as one micro-batch): step 3 of the module docstring."""
    if max_count < 1:
        return False
    dp, tp = layouts(model.heads, batch, range(1, max_count + 1), min(gpus_per_node, TP_LEVELS[-1]))  # (L,)
    if dp.size == 0:
        return False
    mem = estimate_memory_layouts(
        model, batch_size=batch, seq_len=seq, dp=dp, tp=tp, pp=np.ones_like(dp), micro_batch=-(-batch // dp)
    )  # (L,)
    return bool((mem <= get_gpu_type(gpu).memory_bytes).any())


@lru_cache(maxsize=16384)
def recorded_options(
    model: ModelSpec, seq: int, count: int, gpu: str = REFERENCE_GPU_TYPE, gpus_per_node: int = 8
) -> tuple[tuple[int, int, int, float], ...]:
    """``(global batch, micro-batch, accumulation steps, probability)`` of every kept pair of rule "recorded"
    (steps 1-3 of the module docstring) for ``model`` at ``count`` GPUs of ``gpu``, ordered by micro-batch then
    steps; probabilities sum to 1; empty when the model cannot be sized there."""
    lay = recorded_layout(model, seq, count, gpu, gpus_per_node)
    if lay is None:
        return ()
    d, tp, pp = lay
    cap = get_gpu_type(gpu).memory_bytes
    low = count // 4
    pa = 1.0 / len(ACCUMULATION_STEPS)
    out: list[tuple[int, int, int, float]] = []
    if pp == 1:
        for mb, w in MICRO_BATCH_WEIGHTS.items():
            if _one_layout_bytes(model, d * mb, seq, d, tp, 1, mb) > cap:
                continue
            for a in ACCUMULATION_STEPS:
                b = d * mb * a
                if not fits_unaccumulated(model, b, seq, low, gpu, gpus_per_node):
                    out.append((b, mb, a, w * pa))
    else:
        for a in ACCUMULATION_STEPS:
            b = d * pp * a
            if not fits_unaccumulated(model, b, seq, low, gpu, gpus_per_node):
                out.append((b, 1, a, pa))
    total = sum(o[3] for o in out)
    return tuple((b, mb, a, w / total) for b, mb, a, w in out)


@lru_cache(maxsize=16384)
def recorded_batch_fits(
    model: ModelSpec, batch: int, seq: int, count: int, gpu: str = REFERENCE_GPU_TYPE, gpus_per_node: int = 8
) -> bool:
    """Whether a recorded global batch obeys rule "recorded" at ``count`` GPUs of ``gpu`` (step 4)."""
    lay = recorded_layout(model, seq, count, gpu, gpus_per_node)
    if lay is None:
        return False
    d, tp, pp = lay
    if d > batch:
        return False
    rep = -(-batch // d)
    if pp == 1:
        cap = get_gpu_type(gpu).memory_bytes
        ok = any(_one_layout_bytes(model, batch, seq, d, tp, 1, -(-rep // a)) <= cap for a in ACCUMULATION_STEPS)
    else:
        ok = rep <= MAX_ACCUMULATION * pp
    return ok and not fits_unaccumulated(model, batch, seq, count // 4, gpu, gpus_per_node)


def _recorded_candidates(
    count: int,
    model: ModelSpec | None,
    batch: int | None,
    seq: int | None,
    models: tuple[ModelSpec, ...],
    gpu: str,
    per_node: int,
) -> list[tuple[ModelSpec, int, int, float]]:
    """Rule "recorded" candidates ``(model, batch, seq, probability within the model)`` of one job (step 4)."""
    out = []
    for m in (model,) if model is not None else models:
        s = seq if seq is not None else default_seq_len(m)
        if batch is not None:
            if recorded_batch_fits(m, batch, s, count, gpu, per_node):
                out.append((m, batch, s, 1.0))
            continue
        out.extend((m, b, s, w) for b, _, _, w in recorded_options(m, s, count, gpu, per_node))
    return out


def _recorded_error(
    count: int, model: ModelSpec | None, batch: int | None, models: tuple[ModelSpec, ...], gpu: str, per_node: int
) -> NoConfigurationError:
    names = model.name if model is not None else ", ".join(m.name for m in models)
    what = f"{count} GPUs" + (f" with global batch {batch}" if batch is not None else "")
    quarter = f", and not on {count // 4} or fewer GPUs without accumulation" if count >= 4 else ""
    return NoConfigurationError(
        f"sizing rule 'recorded': no configuration of models {names} fits {what} of {gpu} "
        f"(gpus_per_node={per_node}) with a micro-batch that fits and at most {MAX_ACCUMULATION} accumulation "
        f"steps{quarter}; record another GPU count or batch, or pass other models"
    )


def _sizing_types(
    counts: np.ndarray,
    u: np.ndarray,
    gpu_mix: Sequence[tuple[str, int, int]] | None,
    reference_gpu_type: str,
    gpus_per_node: int,
) -> list[tuple[str, int]]:
    """(n,) (GPU type, GPUs per node) each job is sized for: drawn by ``u`` among the types of ``gpu_mix`` with
    at least the job's count of GPUs, in proportion to their counts; the reference type without a mix."""
    ref = (reference_gpu_type, int(gpus_per_node))
    if not gpu_mix:
        return [ref] * len(counts)
    mix = [(get_gpu_type(t).name, int(c), int(p)) for t, c, p in gpu_mix if int(c) > 0]
    out = []
    for g, x in zip(counts.tolist(), u.tolist()):
        ok = [(t, c, p) for t, c, p in mix if c >= g]
        if not ok:
            out.append(ref)
            continue
        w = np.cumsum([c for _, c, _ in ok], dtype=np.float64)
        k = min(int(np.searchsorted(w, x * w[-1], side="right")), len(ok) - 1)
        out.append((ok[k][0], ok[k][2]))
    return out


def assign_configs(
    counts: np.ndarray,
    *,
    seed: int,
    recorded_model: Sequence[ModelSpec | None] | None = None,
    recorded_batch: Sequence[int | None] | None = None,
    recorded_seq: Sequence[int | None] | None = None,
    models: Sequence[str | ModelSpec] | None = None,
    reference_gpu_type: str = REFERENCE_GPU_TYPE,
    gpus_per_node: int = 8,
    gpu_mix: Sequence[tuple[str, int, int]] | None = None,
    sizing: str = DEFAULT_SIZING,
) -> tuple[list[ModelSpec], np.ndarray, np.ndarray]:
    """Training configurations for jobs that asked for ``counts`` GPUs (the rule in the module docstring).

    ``gpu_mix``: ``(gpu type, GPUs of that type, GPUs per node)`` of the cluster; ``None`` sizes every job to
    ``reference_gpu_type``. ``sizing``: ``"recorded"`` (default) or ``"v4"`` (:data:`SIZING_RULES`). Returns
    (models list, (n,) batch sizes, (n,) sequence lengths); recorded values are kept as given.
    """
    check_sizing(sizing)
    counts = np.asarray(counts, dtype=np.int64)  # (n,)
    n = counts.size
    get_gpu_type(reference_gpu_type)
    model_pool = tuple(get_model(m) for m in (models if models is not None else MODELS))
    if not model_pool:
        raise ConfigError("models must name at least one model")
    rec_m = list(recorded_model) if recorded_model is not None else [None] * n
    rec_b = list(recorded_batch) if recorded_batch is not None else [None] * n
    rec_s = list(recorded_seq) if recorded_seq is not None else [None] * n
    rng = np.random.default_rng(seed)
    u = rng.random((n, 2))  # (n, 2): model draw, batch draw
    types = _sizing_types(counts, rng.random(n), gpu_mix, reference_gpu_type, gpus_per_node)  # (n,) (type, node)
    out_m: list[ModelSpec] = [None] * n  # type: ignore[list-item]
    out_b = np.empty(n, dtype=np.int64)
    out_s = np.empty(n, dtype=np.int64)
    groups: dict[tuple, list[int]] = {}
    for i in range(n):
        groups.setdefault((int(counts[i]), rec_m[i], rec_b[i], rec_s[i], types[i]), []).append(i)
    for (count, m, b, s, (gpu, per_node)), rows in groups.items():
        if sizing == "recorded":
            ref = (reference_gpu_type, gpus_per_node)
            _draw_recorded(rows, u, (count, m, b, s), model_pool, (gpu, per_node), ref, (out_m, out_b, out_s))
            continue
        try:
            try:
                cands = _candidates(count, m, b, s, model_pool, gpu, per_node)
            except NoConfigurationError:
                if (gpu, per_node) == (reference_gpu_type, gpus_per_node):
                    raise
                cands = _candidates(count, m, b, s, model_pool, reference_gpu_type, gpus_per_node)
        except NoConfigurationError as exc:
            raise NoConfigurationError(str(exc), index=rows[0]) from None
        kept_models = list(dict.fromkeys(c[0] for c in cands))  # catalogue order, distinct
        per_model = {km: [c for c in cands if c[0] is km] for km in kept_models}
        idx = np.asarray(rows)
        mi = np.minimum((u[idx, 0] * len(kept_models)).astype(np.int64), len(kept_models) - 1)
        for r, k, ub in zip(rows, mi.tolist(), u[idx, 1].tolist()):
            opts = per_model[kept_models[k]]
            c = opts[min(int(ub * len(opts)), len(opts) - 1)]
            out_m[r], out_b[r], out_s[r] = c
    return out_m, out_b, out_s


def _draw_recorded(
    rows: list[int],
    u: np.ndarray,
    job: tuple[int, ModelSpec | None, int | None, int | None],
    pool: tuple[ModelSpec, ...],
    sizing_type: tuple[str, int],
    reference: tuple[str, int],
    out: tuple[list, np.ndarray, np.ndarray],
) -> None:
    """Rule "recorded" (step 5) for the jobs ``rows`` that share a GPU count, recorded fields and sizing type."""
    count, m, b, s = job
    cands = _recorded_candidates(count, m, b, s, pool, *sizing_type)
    if not cands and sizing_type != reference:
        cands = _recorded_candidates(count, m, b, s, pool, *reference)
    if not cands:
        err = _recorded_error(count, m, b, pool, *reference)
        err.index = rows[0]
        raise err
    kept = list(dict.fromkeys(c[0] for c in cands))  # catalogue order, distinct
    per_model = {km: [c for c in cands if c[0] is km] for km in kept}
    cum = {km: np.cumsum([c[3] for c in opts]) for km, opts in per_model.items()}
    idx = np.asarray(rows)
    mi = np.minimum((u[idx, 0] * len(kept)).astype(np.int64), len(kept) - 1)
    out_m, out_b, out_s = out
    for r, k, ub in zip(rows, mi.tolist(), u[idx, 1].tolist()):
        opts, c = per_model[kept[k]], cum[kept[k]]
        j = min(int(np.searchsorted(c, ub * c[-1], side="right")), len(opts) - 1)
        out_m[r], out_b[r], out_s[r] = opts[j][:3]
