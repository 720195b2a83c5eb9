"""Per-GPU efficiency against the micro-batch (the ``efficiency="microbatch"`` world option, env v5's default, and
``efficiency="per_type"``, a curve per GPU type).

The flat model (``efficiency="flat"``, env v4's world and the throughput functions' own default) runs dense
compute at one utilisation, 0.40 of the peak, whatever the micro-batch, and gradient accumulation costs no time.
Under ``efficiency="microbatch"`` (:class:`~frenzy_env.simulator.SimConfig`, ``FrenzyEnv(efficiency=...)``, the
``efficiency`` keyword of :func:`frenzy_env.world.throughput.iteration_time_array`) the model FLOPs utilisation of a GPU
depends on the tokens of the micro-batch it works on, ``T = micro_batch x seq_len`` (one data-parallel replica's
micro-batch; every tensor- and pipeline-parallel rank of the replica sees all of its tokens)::

    u(T) = utilisation * g(T) / g(T_ref),   g(T) = T / (T + T_half)          (capped at 1)

with ``T_half`` = :data:`HALF_TOKENS` (fitted below) and ``T_ref`` = :data:`REFERENCE_TOKENS` = 16384.

Why tokens: a transformer layer's matrix multiplies are ``(tokens x h) @ (h x h / tp)``; the tokens are the
only dimension the batch changes, and they set the arithmetic intensity (FLOPs per byte of weights read),
so a micro-batch of 8 sequences of 256 tokens and one of 2048 tokens load the GPU alike. The form
``T / (T + T_half)`` is the same as a fixed cost per micro-batch of ``T_half`` tokens' worth of compute
(weight reads, kernel launches, per-micro-batch communication latencies): the time of a micro-batch is
``c (T + T_half)``.

Normalisation: ``u(T_ref) = utilisation`` (0.40 by default), ``T_ref`` = 16384 tokens, the largest
micro-batch of the fitted measurements and the order of the one-GPU micro-batches of the ElasticFlow A100
curves the flat utilisation was calibrated on (GPT-2 at 128 and 256 sequences of ~176 effective tokens,
22.5k-45k tokens; BERT at 64 and 128 of ~218, 14k-28k; :mod:`frenzy_env.world.throughput`). So well-sized jobs keep
their speed (the saturated efficiency is ``0.40 x (16384 + T_half) / 16384`` = 0.411, +2.8 %), and small
micro-batches get slower: 2048 tokens (one 2048-token sequence) runs at 0.336, 512 tokens at 0.218.

Fit (:func:`fit_half_tokens`, ``scipy.optimize.curve_fit`` on log time): the BigScience BLOOM-176B
topology search on 40-48 nodes of 8 x A100-80GB (Megatron-DeepSpeed, bf16/fp16, TP = 8, sequence 2048, global
batch 2048; bigscience-workshop/bigscience, ``train/tr11-176B-ml/chronicles-prequel.md``, sections "Choosing
the fastest 3D Topology", "tile and wave quantization" and "48 node contenders"): seven model/topology
configurations each measured at micro-batch sizes 1, 2, 4 (and 8) with the global batch fixed, so the
optimizer steps and the data-parallel all-reduces per iteration are the same and only the micro-batch (and
with it the pipeline bubble) changes. Each measured ``sec/it`` is put on one stage's compute time by taking
out the 1F1B bubble the simulator itself models, ``x m / (m + pp - 1)`` with ``m = GBS / (DP x MBS)``
micro-batches (:func:`frenzy_env.world.throughput.bubble_fraction`), then fitted as ``A_c (1 + T_half / T)``: one
scale ``A_c`` per configuration and one shared ``T_half``. Rows at 75 GB or more of the 80 GB are left out
(three MBS = 8 rows; the source calls one "too close to OOM" and all three are slower than MBS = 4 even
after the bubble, allocator pressure that the curve does not model). Result: ``T_half`` = 455 +- 43 tokens,
root-mean-square error 2.0 % (largest 3.8 %) over the 23 points; a saturating ``1 - exp(-T / T_c)`` fits worse
(3.1 %, largest 6.8 %). Fitting the three configurations with hidden sizes that are multiples of 128 alone
(A-C) gives 567 +- 67.

Out-of-sample check: Hugging Face's single-GPU guide (``perf_train_gpu_one``, transformers v4.21; bert-large-uncased,
sequence 512, V100-16GB, fp32) measured 8.86 samples/s at micro-batch 4 (2048 tokens) and 7.75 at micro-batch 1 with 4
accumulation steps (512 tokens), the optimizer stepping every 4 samples in both: 0.875; the curve gives ``g(512) /
g(2048)`` = 0.647, too steep there. The V100's fp32 pipeline needs far fewer tokens to saturate (FLOPs per byte of an
fp32 V100 are ~1/10 of a bf16 A100's), so one curve for every GPU type is a simplification: it is the A100's, the
reference type of every shipped cluster.

Limits: one curve for every model width and GPU type; the fitted configurations are 180-200B models at
``h / tp`` = 1728-1800, and their ``sec/it`` also holds the (constant) data-parallel all-reduce, which makes
the fitted ``T_half`` a little small; the per-iteration overhead of :mod:`frenzy_env.world.throughput` (49 ms,
calibrated with flat utilisation) is kept as it is.

Per GPU type (``efficiency="per_type"``): the same form with a half-saturation point and a level of its own per
GPU type, ``u(T) = utilisation x level x g_type(T) / g_type(T_ref)``, ``g_type(T) = T / (T + T_half,type)``
(capped at 1; :data:`HALF_TOKENS_BY_TYPE`, :data:`LEVEL_BY_TYPE`; the A100-80GB's is the ``"microbatch"`` curve,
level 1, so ``utilisation`` stays the A100's efficiency at ``T_ref``). Fits, sources and checks in
:mod:`frenzy_env.world.efficiency_fits` (``scripts/fit_efficiency_per_type.py`` prints them):

========== ======= ======================================== ====== ==========================================
type       T_half  T_half from                              level  level from
========== ======= ======================================== ====== ==========================================
A100-80GB  455     fit: BLOOM-176B sweep (above)            1      reference (``utilisation``)
A100-40GB  597     RULE (ridge)                             0.962  fit: Lambda BERT-large, A100 40GB SXM4
H100-80GB  878     RULE (ridge)                             0.662  fit: Lambda BERT-large, H100 SXM5
V100       651     fit: NVIDIA BERT-large sweep (mixed)     1.145  fit: Lambda BERT-large, V100 SXM2
RTX3090    226     RULE (ridge)                             1.581  fit: Lambda BERT-large, RTX 3090
T4         604     RULE (ridge)                             0.887  RULE (ridge); checked on TU104 (RTX 5000)
P100       38      RULE (ridge)                             2.533  RULE (ridge); checked on Pascal (1080 Ti)
H200       613     RULE (ridge)                             0.879  RULE (ridge); not checked
L40S       1246    RULE (ridge)                             0.443  its chip (AD102): Lambda, RTX 6000 Ada
A10        619     RULE (ridge)                             0.720  fit: Lambda BERT-large, A10
========== ======= ======================================== ====== ==========================================

The levels above are at BERT-large's width (1024). At a model width ``h`` the level is ``level ** e(h)``
(:func:`width_exponent`): ``e`` = 1 at ``h`` <= 1024, :data:`WIDTH_EXPONENT` = 0.799 at ``h`` >= 2048, linear in
log2(h) between. Fit (:func:`frenzy_env.world.efficiency_fits.fit_width_exponent`): MosaicML's MPT benchmarks
(mosaicml/llm-foundry ``scripts/train/benchmarking/README.md``: the same Composer/FSDP code in bf16 on H100 80GB and
A100 80GB) give the H100's level over the A100-80GB's, each MFU put in the simulator's terms as the Lambda levels
are, on 20 one-node pairs of widths 2,048-7,168: 0.719 (sd 4.0% in log, no trend with width), against 0.662 at
BERT-large and 0.603 at BERT-base; 0.799 = log 0.719 / log 0.662. Held out: the 760m pairs (width 1,536) 0.715
against the rule's 0.694 (-2.9%), the 70B pairs on 32 and 64 GPUs 0.796 against 0.719 (-9.7%). The H100 is the only
type measured at LLM widths; the exponent is applied to every type's level as a RULE (a wider model spends less of
its time on memory-bound work, so every level moves toward the A100's 1; BERT-base's levels lie further from 1
than BERT-large's on the H100, V100, RTX 3090, A10 and RTX 6000 Ada alike). The A100-80GB stays at 1 at every width.

- V100 ``T_half`` = 651 +- 174 tokens (rms 1.9 %): NVIDIA DeepLearningExamples' BERT-large pretraining on one
  V100 of a DGX-1 16GB and of a DGX-1 32GB (TensorFlow 20.06, mixed precision; micro-batches 16 and 64 at
  sequence 128, 4 and 8 at 512; 512+ accumulation steps). V100-16GB and V100-32GB share it (the same chip).
- Levels: Lambda's GPU benchmark (lambdal/deeplearning-benchmark: NVIDIA's PyTorch BERT SQuAD fine-tuning,
  sequence 384, fp16, one GPU, the largest batch that fits; one container per benchmark version), each
  iteration time put on the simulator's one-GPU formula with its 49 ms overhead and solved for the efficiency
  at ``T_ref``, relative to the A100 80GB SXM4's of the same version. The A100-80GB's own comes out at 0.416
  (BERT-large) and 0.396 (BERT-base), the default ``utilisation`` 0.40 within 4 %.
- RULE (no measurement of the type): ``ridge = peak / memory bandwidth`` (datasheets; FLOP per byte).
  ``T_half = 455 x ridge / 153`` (the A100-80GB's ridge); ``level = 1 / (0.346 + 0.00384 ridge)``, fitted on
  the five measured types (largest residual 7.5 %). The T4's level is an upper estimate: its 70 W limit holds its
  clocks below the boost the datasheet's peak assumes (the rule overestimates the 250 W A100 PCIe by 8-13 %).
  The P100's level (ridge 12.7, outside the fitted 76-295) puts it at the peak of its FP32 rate, the
  catalogue's mixed-precision peak for Pascal; the GTX 1080 Ti (Pascal, ridge 23) measures 6 % above the rule.
- The A10 (150 W) and the RTX 6000 Ada (300 W), power-limited GDDR6 parts measured in the same benchmark, lie
  21% and 26% below the rule; so the A10 takes its measured level and the L40S (no measurement; the RTX 6000 Ada's
  AD102 chip at 350 W) the RTX 6000 Ada's delivered FLOP/s, 0.440 x 364.2 / 362. The H200 (the H100's chip with
  4.8 TB/s) takes the rule's level at its ridge (206), with no like-for-like measurement to check it.
- Held-out checks: the V100 check above, which ran in FP32, predicted by the V100 curve at FP32 (``T_half``
  scaled by the ridge at 15.7 TFLOP/s and 4-byte weights over that at 125 and 2 bytes): 0.818 against 0.875
  (-6.4 %; the V100 FP32 columns of the same NVIDIA tables fitted alone: 0.793, -9.4 %); V100 SQuAD throughput
  at micro-batch 24 over 4 and 12 over 6 (NVIDIA): +10.9 % and +8.5 %; BERT-base (width 768) levels of V100,
  RTX 3090, H100, A100-40GB predicted by BERT-large's: -8.7 %, -10.8 %, +9.8 %, -2.7 %; the RTX 3090 in the
  older benchmark version: -13.8 %; the level rule on GPUs outside its fit (V100 PCIe, Quadro RTX 5000,
  GTX 1080 Ti, A100 40GB PCIe, H100 PCIe): +4.5, +1.9, -5.5, +12.6 / +8.3, +0.8 %. The ``T_half`` rule is
  weaker: it gives the V100 413 against the fitted 651 (-37 %).
- The levels follow the ridge: a GPU with more memory bandwidth per FLOP (RTX 3090, V100, Pascal) spends less
  of its time on memory-bound work, so it reaches more of its peak than an A100, and an H100 less. BERT-base's
  levels differ from BERT-large's by up to 11 % in the direction of the ridge, and the H100's MPT levels at LLM
  widths lie 9 % above its BERT-large level: the width rule above. The V100, RTX 3090 and the rule types have
  no measurement at LLM widths; their wide-model levels are the rule's.

Gradient accumulation (:data:`MICROSTEP_OVERHEAD_S`): under ``"microbatch"`` and ``"per_type"`` each of the ``m``
micro-steps of an iteration computes at its micro-batch's efficiency, and every micro-step after the first also
pays a fixed 2 ms (ASSUMPTION, not a measurement: the launch of an optimizer-free forward/backward pass and the
loading of its micro-batch, the order of a few hundred eager-mode kernel launches at a few microseconds
each; the first micro-step's share is inside the calibrated per-iteration overhead). The data-parallel
all-reduce still runs once per iteration.
"""

from __future__ import annotations

import math

import numpy as np

#: the world options of SimConfig.efficiency and the ``efficiency`` keyword of the throughput functions
EFFICIENCY_MODES = ("flat", "microbatch", "per_type")
#: the world's efficiency in env v5 (SimConfig.efficiency, the workload generators and the offered-load
#: functions; the throughput functions themselves default to "flat", the speed model without the curve)
DEFAULT_EFFICIENCY = "per_type"
#: tokens of a micro-batch at which the efficiency is half its saturated value (fitted, see the docstring)
HALF_TOKENS = 455.0
#: tokens of a micro-batch at which ``u`` equals the configured (flat) utilisation (normalisation)
REFERENCE_TOKENS = 16384.0
#: seconds each micro-step after the first of an iteration costs on top of its compute (an ASSUMPTION)
MICROSTEP_OVERHEAD_S = 0.002

SOURCE_BIGSCIENCE = (
    "bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md (BLOOM-176B topology search, "
    "A100-80GB, Megatron-DeepSpeed, TP=8, seq 2048, GBS 2048)"
)
#: The measurements the curve is fitted on: (configuration, section and date of the source table, DP, PP,
#: micro-batch size, sequence length, seconds per iteration, peak memory GB). All from
#: :data:`SOURCE_BIGSCIENCE`; configurations A-B "48 node contenders" (NHIDDEN=14336, NLAYERS=72, 181B,
#: 02-21), C "tile and wave quantization" (NHIDDEN=13824, 187B, 02-20), D-G "Choosing the fastest 3D
#: Topology" (NHIDDEN=14400, 183-200B, 02-20).
POINTS: tuple[tuple[str, str, int, int, int, int, float, float], ...] = (
    ("A", "48 node contenders, 181B, 02-21", 4, 12, 1, 2048, 143.31, 29),
    ("A", "48 node contenders, 181B, 02-21", 4, 12, 2, 2048, 134.02, 37),
    ("A", "48 node contenders, 181B, 02-21", 4, 12, 4, 2048, 123.69, 49),
    ("A", "48 node contenders, 181B, 02-21", 4, 12, 8, 2048, 129.26, 69),
    ("B", "48 node contenders, 181B, 02-21", 8, 6, 1, 2048, 139.82, 38),
    ("B", "48 node contenders, 181B, 02-21", 8, 6, 2, 2048, 131.02, 44),
    ("B", "48 node contenders, 181B, 02-21", 8, 6, 4, 2048, 121.48, 56),
    ("C", "tile and wave quantization, 187B, 02-20", 4, 10, 1, 2048, 160.29, 33),
    ("C", "tile and wave quantization, 187B, 02-20", 4, 10, 2, 2048, 151.07, 39),
    ("C", "tile and wave quantization, 187B, 02-20", 4, 10, 4, 2048, 147.43, 53),
    ("C", "tile and wave quantization, 187B, 02-20", 4, 10, 8, 2048, 152.51, 73),
    ("D", "fastest 3D topology, 200B, 02-20", 4, 10, 1, 2048, 221.21, 35),
    ("D", "fastest 3D topology, 200B, 02-20", 4, 10, 2, 2048, 207.92, 43),
    ("D", "fastest 3D topology, 200B, 02-20", 4, 10, 4, 2048, 208.18, 55),
    ("D", "fastest 3D topology, 200B, 02-20", 4, 10, 8, 2048, 229.69, 76),
    ("E", "fastest 3D topology, 195B, 02-20", 4, 11, 1, 2048, 197.15, 32),
    ("E", "fastest 3D topology, 195B, 02-20", 4, 11, 2, 2048, 186.65, 41),
    ("E", "fastest 3D topology, 195B, 02-20", 4, 11, 4, 2048, 185.79, 53),
    ("E", "fastest 3D topology, 195B, 02-20", 4, 11, 8, 2048, 206.62, 75),
    ("F", "fastest 3D topology, 183B, 02-20", 4, 12, 1, 2048, 172.40, 30),
    ("F", "fastest 3D topology, 183B, 02-20", 4, 12, 2, 2048, 161.96, 39),
    ("F", "fastest 3D topology, 183B, 02-20", 4, 12, 4, 2048, 163.32, 50),
    ("G", "fastest 3D topology, 194B, 02-20", 8, 6, 1, 2048, 183.64, 39),
    ("G", "fastest 3D topology, 194B, 02-20", 8, 6, 2, 2048, 172.36, 45),
    ("G", "fastest 3D topology, 194B, 02-20", 8, 6, 4, 2048, 173.92, 56),
    ("G", "fastest 3D topology, 194B, 02-20", 8, 6, 8, 2048, 192.42, 75),
)
#: global batch of every fitted configuration (sequences)
POINTS_GLOBAL_BATCH = 2048
#: rows at this peak memory (GB of 80) or more are left out of the fit (allocator pressure)
POINTS_MAX_MEMORY_GB = 75.0

#: out-of-sample check: Hugging Face transformers v4.21 docs, perf_train_gpu_one (bert-large-uncased, seq 512,
#: V100-16GB, fp32, HF Trainer): (micro-batch, accumulation steps, samples/s)
HF_CHECK = ((4, 1, 8.86), (1, 4, 7.75))

#: ``efficiency="per_type"``: tokens of a micro-batch at half the saturated efficiency, per catalogue GPU type
#: (fits and RULES of :mod:`frenzy_env.world.efficiency_fits`; see the table in the module docstring)
HALF_TOKENS_BY_TYPE: dict[str, float] = {
    "H100-80GB": 878.0,  # RULE: ridge 989 / 3,350 = 295 FLOP/byte
    "A100-80GB": 455.0,  # fit: BLOOM-176B (HALF_TOKENS)
    "A100-40GB": 597.0,  # RULE: ridge 312 / 1,555 = 201
    "V100-32GB": 651.0,  # fit: NVIDIA BERT-large micro-batch sweep, mixed precision
    "V100-16GB": 651.0,  # the same chip
    "RTX3090-24GB": 226.0,  # RULE: ridge 71 / 936 = 76
    "T4-16GB": 604.0,  # RULE: ridge 65 / 320 = 203
    "P100-16GB": 38.0,  # RULE: ridge 9.3 / 732 = 12.7
    "H200-141GB": 613.0,  # RULE: ridge 989 / 4,800 = 206
    "L40S-48GB": 1246.0,  # RULE: ridge 362 / 864 = 419
    "A10-24GB": 619.0,  # RULE: ridge 125 / 600 = 208
}
#: ``efficiency="per_type"``: the efficiency at REFERENCE_TOKENS of each catalogue GPU type over the A100-80GB's
#: (``utilisation``), measured on one job run alike on each type, or by the RULE (see the module docstring)
LEVEL_BY_TYPE: dict[str, float] = {
    "H100-80GB": 0.662,  # fit: Lambda BERT-large SQuAD, H100 SXM5
    "A100-80GB": 1.0,  # the reference
    "A100-40GB": 0.962,  # fit: A100 40GB SXM4
    "V100-32GB": 1.145,  # the V100-16GB's (the same chip)
    "V100-16GB": 1.145,  # fit: V100 SXM2 16GB
    "RTX3090-24GB": 1.581,  # fit: RTX 3090
    "T4-16GB": 0.887,  # RULE: 1 / (0.346 + 0.00384 x 203); an upper estimate (70 W)
    "P100-16GB": 2.533,  # RULE: 1 / (0.346 + 0.00384 x 12.7); u is capped at the peak
    "H200-141GB": 0.879,  # RULE: 1 / (0.346 + 0.00384 x 206)
    "L40S-48GB": 0.443,  # the same chip (AD102): RTX 6000 Ada's measured 0.440 x 364.2 / 362 TFLOP/s
    "A10-24GB": 0.720,  # fit: Lambda BERT-large, A10 (the rule gives 0.873: +21%)
}
#: ``efficiency="per_type"``: the exponent of the level at LLM widths (``hidden`` >= WIDTH_WIDE), ``level **
#: WIDTH_EXPONENT``: the H100's level over the A100-80GB's on MosaicML's MPT benchmarks (widths 2,048-7,168, one
#: node, 20 pairs: 0.719) against its BERT-large level (0.6615): log 0.719 / log 0.6615 (fitted, see the docstring)
WIDTH_EXPONENT = 0.799
#: model widths at or below which the level is the BERT-large one, and at or above which it is ``level **
#: WIDTH_EXPONENT`` (linear in log2(width) between)
WIDTH_NARROW = 1024
WIDTH_WIDE = 2048


def check_efficiency(value: object, name: str = "efficiency") -> str:
    """``value`` if it is one of :data:`EFFICIENCY_MODES`, else a ``ValueError`` naming ``name`` and the value."""
    if not isinstance(value, str) or value not in EFFICIENCY_MODES:
        from frenzy_env.errors import ConfigError

        raise ConfigError(f"{name} must be one of {', '.join(map(repr, EFFICIENCY_MODES))}, got {value!r}")
    return value


def saturation(tokens: np.ndarray | float, half_tokens: float = HALF_TOKENS) -> np.ndarray | float:
    """``g(T) = T / (T + T_half)``: the fraction of the saturated efficiency at ``tokens`` per micro-batch."""
    t = np.asarray(tokens, dtype=np.float64)
    out = t / (t + half_tokens)
    return float(out) if out.ndim == 0 else out


def microbatch_efficiency(
    tokens: np.ndarray | float,
    utilisation: float,
    *,
    half_tokens: float = HALF_TOKENS,
    reference_tokens: float = REFERENCE_TOKENS,
) -> np.ndarray | float:
    """Model FLOPs utilisation at ``tokens`` per micro-batch: ``utilisation x g(T) / g(T_ref)``, at most 1."""
    scale = utilisation / saturation(reference_tokens, half_tokens)
    out = np.minimum(scale * np.asarray(saturation(tokens, half_tokens)), 1.0)
    return float(out) if np.ndim(out) == 0 else out


def width_exponent(hidden: float | None) -> float:
    """The exponent of the per-type level at model width ``hidden``: 1 at or below :data:`WIDTH_NARROW` (and for
    ``None``), :data:`WIDTH_EXPONENT` at or above :data:`WIDTH_WIDE`, linear in log2(width) between."""
    if hidden is None:
        return 1.0
    x = math.log2(max(float(hidden), 1.0) / WIDTH_NARROW) / math.log2(WIDTH_WIDE / WIDTH_NARROW)
    return 1.0 + (WIDTH_EXPONENT - 1.0) * min(max(x, 0.0), 1.0)


def type_curve(gpu_name: str, hidden: float | None = None) -> tuple[float, float]:
    """``(T_half, level)`` of the GPU type ``gpu_name`` for a model of width ``hidden`` under
    ``efficiency="per_type"``: the level is ``LEVEL_BY_TYPE ** width_exponent(hidden)`` (the BERT-large level at
    ``hidden`` <= 1024 or ``None``); a type outside the catalogue gets the A100-80GB's, ``(HALF_TOKENS, 1.0)``:
    the ``"microbatch"`` curve."""
    level = LEVEL_BY_TYPE.get(gpu_name, 1.0)
    return HALF_TOKENS_BY_TYPE.get(gpu_name, HALF_TOKENS), level ** width_exponent(hidden) if level != 1.0 else 1.0


def type_efficiency(
    tokens: np.ndarray | float, utilisation: float, gpu_name: str, hidden: float | None = None
) -> np.ndarray | float:
    """Model FLOPs utilisation of the GPU type ``gpu_name`` at ``tokens`` per micro-batch of a model of width
    ``hidden`` under ``efficiency="per_type"``: ``utilisation x level x g_type(T) / g_type(T_ref)``, at most 1
    (:func:`type_curve`)."""
    half, level = type_curve(gpu_name, hidden)
    return microbatch_efficiency(tokens, utilisation * level, half_tokens=half)


def fit_points(max_memory_gb: float = POINTS_MAX_MEMORY_GB):
    """The fitted rows of :data:`POINTS` as arrays: (configuration index (N,), tokens (N,), bubble-free seconds
    per iteration (N,)); the bubble taken out is the simulator's, ``m / (m + pp - 1)``."""
    rows = [p for p in POINTS if p[7] < max_memory_gb]
    names = sorted({p[0] for p in rows})
    conf = np.array([names.index(p[0]) for p in rows])
    dp, pp, mbs, seq, secs = (np.array([p[i] for p in rows], dtype=np.float64) for i in (2, 3, 4, 5, 6))
    m = POINTS_GLOBAL_BATCH / (dp * mbs)  # micro-batches per replica
    return conf, mbs * seq, secs * m / (m + pp - 1.0)


def fit_half_tokens(form: str = "hyperbolic") -> tuple[float, float, float, float]:
    """Fit the curve to :data:`POINTS` (:func:`fit_points`): ``log y = log A_c + log(1 + T_half / T)``
    (``form="hyperbolic"``, the shipped form) or ``log A_c - log(1 - exp(-T / T_c))`` (``"exp"``), one scale
    per configuration, by :func:`scipy.optimize.curve_fit`. Returns (parameter, its standard error, rms and
    largest absolute log residual)."""
    from scipy.optimize import curve_fit

    conf, tokens, y = fit_points()
    k = int(conf.max()) + 1

    def model(x, p, *scales):
        c, t = x
        a = np.asarray(scales)[c.astype(int)]
        if form == "hyperbolic":
            return np.log(a) + np.log1p(p / t)
        return np.log(a) - np.log1p(-np.exp(-t / p))

    p0 = [500.0 if form == "hyperbolic" else 2000.0] + [float(y.min())] * k
    popt, pcov = curve_fit(model, (conf.astype(np.float64), tokens), np.log(y), p0=p0)
    resid = np.log(y) - model((conf.astype(np.float64), tokens), *popt)
    return float(popt[0]), float(np.sqrt(pcov[0, 0])), float(np.sqrt(np.mean(resid**2))), float(np.abs(resid).max())
