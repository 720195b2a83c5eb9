"""The published measurements behind ``efficiency="per_type"`` and the fits of its constants.

:mod:`frenzy_env.world.efficiency` ships the constants (:data:`~frenzy_env.world.efficiency.HALF_TOKENS_BY_TYPE`,
:data:`~frenzy_env.world.efficiency.LEVEL_BY_TYPE`); this module holds the numbers they are fitted on, quoted
from their sources, and the fits and held-out checks that reproduce them (``scripts/fit_efficiency_per_type.py``
prints them; ``tests/world/test_efficiency_per_type.py`` checks that the fits give the shipped constants).

Two quantities per GPU type, both in the simulator's own terms (its FLOPs per token,
:meth:`~frenzy_env.world.models.ModelSpec.flops_per_token`; its dense mixed-precision peak,
:attr:`~frenzy_env.world.cluster.GPUType.peak_tflops`; its per-iteration overhead,
:data:`~frenzy_env.world.throughput.DEFAULT_OVERHEAD_S`), so that the simulator's iteration time of a measured job
is the measured one:

- ``T_half`` (tokens per micro-batch at half the saturated efficiency): a micro-batch sweep on one GPU type
  with the optimizer step amortised over many accumulation steps, fitted as in
  :func:`frenzy_env.world.efficiency.fit_half_tokens` (``log y = log A_c + log(1 + T_half / T)``, one scale per
  configuration). A100-80GB: BLOOM's sweep (455, :mod:`frenzy_env.world.efficiency`). V100: :data:`V100_SWEEP`.
- the level (efficiency at ``T_ref`` = 16384 tokens relative to the A100-80GB's): one job run alike on every
  GPU type (:data:`LAMBDA_POINTS`: NVIDIA's BERT SQuAD fine-tuning scripts under one container, one GPU,
  mixed precision, the largest batch that fits). Each measured iteration time ``b / throughput`` is put on the
  simulator's formula for one GPU, ``F b s / (peak u) + overhead`` with ``u = U g(b s) / g(T_ref)``, and solved
  for ``U`` (:func:`measured_level`); the level is ``U / U(A100-80GB)`` of the same benchmark version and model.

Types without such a measurement get a RULE, not a fit, on the ratio of the datasheet's dense mixed-precision
peak to its memory bandwidth, ``ridge = peak / bandwidth`` (FLOP per byte; :data:`BENCH_GPUS`, :data:`TYPE_MEMORY`):

- ``T_half`` in proportion to it, from the A100-80GB's (:func:`rule_half_tokens`): the fixed cost of a
  micro-batch (reading the weights, launching kernels) is worth more tokens of compute where compute is fast
  against memory.
- the level ``1 / (a + b ridge)`` (:func:`fit_level_rule`, least squares on log level over the measured catalogue
  types): the time of memory-bound work (normalisations, softmax, dropout, the optimizer) per FLOP grows with
  the ridge. It is checked on GPUs outside the fit (:func:`rule_checks`).

Held-out checks (:func:`checks`): Hugging Face's V100 accumulation check (the module docstring of
:mod:`frenzy_env.world.efficiency`), V100 SQuAD micro-batch pairs, BERT-base (another width) on every measured
type, the other benchmark version, the A100's absolute level, and the rule on GPUs it was not fitted on.
"""

from __future__ import annotations

import numpy as np

from frenzy_env.world.cluster import GPU_TYPES
from frenzy_env.world.efficiency import HALF_TOKENS, HF_CHECK, REFERENCE_TOKENS, saturation, width_exponent
from frenzy_env.world.models import ModelSpec, custom_model, get_model
from frenzy_env.world.throughput import DEFAULT_OVERHEAD_S, DEFAULT_UTILISATION

SOURCE_NVIDIA_TF1 = (
    "NVIDIA/DeepLearningExamples TensorFlow/LanguageModeling/BERT/README.md, 'Training performance results' "
    "(TensorFlow 20.06-py3 NGC container; DGX-1 8 x V100 16GB and 32GB; BERT-large)"
)
SOURCE_NVIDIA_TF2 = (
    "NVIDIA/DeepLearningExamples TensorFlow2/LanguageModeling/BERT/README.md, 'Fine-tuning training performance for "
    "SQuAD v1.1' (TensorFlow 21.02-py3 NGC container; DGX-1 8 x V100 16GB and 32GB; BERT-large)"
)
SOURCE_LAMBDA = (
    "lambdal/deeplearning-benchmark pytorch/pytorch-train-throughput-fp16.csv and pytorch-train-bs-fp16.csv "
    "(Lambda's GPU benchmarks: NVIDIA DeepLearningExamples PyTorch BERT run_squad.py, sequence 384, fp16/AMP, "
    "one GPU); version 'v1' at commit 4e11f68 (2024-07-24), version 'v0' at commit 67a9bb5 (2022-07-06)"
)

#: Pretraining micro-batch sweeps on V100 (:data:`SOURCE_NVIDIA_TF1`, one GPU, gradient accumulation of 512 to
#: 16384 steps, so the optimizer step is amortised): (configuration, precision, sequence length, micro-batch,
#: sequences/s). The DGX-1 16GB and 32GB rows run the same V100 SXM2 chip; only the micro-batch differs.
V100_SWEEP: tuple[tuple[int, str, int, int, float], ...] = (
    (0, "mixed", 128, 16, 134.34),  # DGX-1 16GB
    (0, "mixed", 128, 64, 168.63),  # DGX-1 32GB
    (1, "mixed", 512, 4, 28.72),  # 16GB
    (1, "mixed", 512, 8, 31.23),  # 32GB
    (0, "fp32", 128, 8, 39.43),  # 16GB
    (0, "fp32", 128, 32, 46.78),  # 32GB
    (1, "fp32", 512, 2, 9.80),  # 16GB
    (1, "fp32", 512, 8, 10.67),  # 32GB
)

#: SQuAD v1.1 fine-tuning (sequence 384, one GPU, mixed precision, the optimizer stepping every micro-batch) on
#: V100 16GB and 32GB at two micro-batches: (source, micro-batch on 16GB, sequences/s, micro-batch on 32GB,
#: sequences/s). Held out: they check the whole V100 model (curve, level and per-iteration overhead).
V100_SQUAD_PAIRS: tuple[tuple[str, int, float, int, float], ...] = (
    ("TF 20.06", 4, 29.74, 24, 51.02),  # SOURCE_NVIDIA_TF1
    ("TF2 21.02", 6, 39.10, 12, 47.06),  # SOURCE_NVIDIA_TF2
)

#: The GPUs of the like-for-like measurements: label -> (catalogue type or "", dense FP16/BF16 tensor peak with
#: FP32 accumulate in TFLOP/s (the catalogue's convention), memory bandwidth in GB/s, datasheet). GeForce parts
#: run FP32 accumulate at half their FP16-accumulate rate; Pascal has no tensor cores, so mixed-precision GEMMs
#: with FP32 accumulation run at the FP32 rate (as the catalogue's P100).
BENCH_GPUS: dict[str, tuple[str, float, float, str]] = {
    "V100 SXM2": ("V100-16GB", 125.0, 900.0, "NVIDIA V100 datasheet (SXM2: 125 TFLOPS tensor, 900 GB/s HBM2)"),
    "V100 PCIe": ("", 112.0, 900.0, "NVIDIA V100 datasheet (PCIe: 112 TFLOPS tensor, 900 GB/s)"),
    "RTX 3090": ("RTX3090-24GB", 71.0, 936.0, "NVIDIA GA102 whitepaper App. A (71 TFLOPS FP16 w/ FP32 acc, 936 GB/s)"),
    "A100 80GB SXM4": ("A100-80GB", 312.0, 2039.0, "NVIDIA A100 datasheet (312 TFLOPS BF16/FP16, 2,039 GB/s)"),
    "A100 40GB SXM4": ("A100-40GB", 312.0, 1555.0, "NVIDIA A100 datasheet (312 TFLOPS, 1,555 GB/s)"),
    "A100 40GB PCIe": ("", 312.0, 1555.0, "NVIDIA A100 datasheet (PCIe 40GB, 250 W: 312 TFLOPS, 1,555 GB/s)"),
    "H100 SXM5": ("H100-80GB", 989.0, 3350.0, "NVIDIA H100 datasheet (SXM: 1,979 sparse = 989 dense, 3.35 TB/s)"),
    "H100 PCIe": ("", 756.0, 2000.0, "NVIDIA H100 datasheet (PCIe: 1,513 sparse = 756 dense TFLOPS, 2 TB/s)"),
    "Quadro RTX 5000": ("", 89.2, 448.0, "NVIDIA Quadro RTX 5000 datasheet (TU104, as T4: 89.2 TFLOPS, 448 GB/s)"),
    "GTX 1080 Ti": ("", 11.34, 484.0, "NVIDIA GTX 1080 Ti specifications (Pascal GP102: 11.34 TFLOPS FP32, 484 GB/s)"),
    "A10": ("A10-24GB", 125.0, 600.0, "NVIDIA A10 datasheet (125 TFLOPS FP16/BF16 dense, 600 GB/s GDDR6)"),
    "RTX 6000 Ada": ("", 364.2, 960.0, "NVIDIA Ada Lovelace whitepaper App. (RTX 6000 Ada: AD102, the L40S's chip, "
                     "364.2 TFLOPS FP16 w/ FP32 acc; 960 GB/s)"),
}

#: Memory bandwidth (GB/s, datasheet) of the catalogue types without a like-for-like measurement; with the peak
#: of :data:`frenzy_env.world.cluster.GPU_TYPES` they give the ridge of the rule.
TYPE_MEMORY: dict[str, tuple[float, str]] = {
    "T4-16GB": (320.0, "NVIDIA T4 datasheet (320 GB/s GDDR6)"),
    "P100-16GB": (732.0, "NVIDIA Tesla P100 datasheet (PCIe 16GB: 732 GB/s HBM2)"),
    "H200-141GB": (4800.0, "NVIDIA H200 datasheet (SXM: 4.8 TB/s HBM3e)"),
    "L40S-48GB": (864.0, "NVIDIA L40S datasheet (864 GB/s GDDR6)"),
}

#: BERT SQuAD v1.1 fine-tuning, fp16 (AMP), one GPU (:data:`SOURCE_LAMBDA`): (benchmark version, GPU label of
#: :data:`BENCH_GPUS`, model ("bert-large" or "bert-base"), micro-batch (the batch that fits), sequences/s).
LAMBDA_POINTS: tuple[tuple[str, str, str, int, float], ...] = (
    ("v1", "V100 SXM2", "bert-large", 16, 57.0),  # "LambdaCloud V100 16GB", 300 W
    ("v1", "RTX 3090", "bert-large", 28, 52.0),
    ("v1", "A100 80GB SXM4", "bert-large", 112, 152.0),
    ("v1", "H100 SXM5", "bert-large", 112, 301.0),
    ("v1", "A100 40GB PCIe", "bert-large", 48, 117.0),  # "LambdaCloud A100 40GB PCIe"
    ("v1", "H100 PCIe", "bert-large", 112, 203.0),  # "H100 80GB PCIe Gen5"
    ("v1", "V100 SXM2", "bert-base", 48, 189.0),
    ("v1", "RTX 3090", "bert-base", 96, 172.0),
    ("v1", "A100 80GB SXM4", "bert-base", 320, 443.0),
    ("v1", "H100 SXM5", "bert-base", 320, 812.0),
    ("v1", "A10", "bert-large", 28, 42.0),  # "LambdaCloud A10", 150 W
    ("v1", "A10", "bert-base", 80, 135.0),
    ("v1", "RTX 6000 Ada", "bert-large", 64, 79.0),
    ("v1", "RTX 6000 Ada", "bert-base", 192, 255.0),
    ("v0", "V100 PCIe", "bert-large", 24, 49.0),  # "V100 32GB", 250 W
    ("v0", "RTX 3090", "bert-large", 16, 47.0),
    ("v0", "A100 80GB SXM4", "bert-large", 64, 123.0),
    ("v0", "A100 40GB SXM4", "bert-large", 32, 107.0),
    ("v0", "A100 40GB PCIe", "bert-large", 32, 91.0),
    ("v0", "Quadro RTX 5000", "bert-large", 8, 25.0),
    ("v0", "GTX 1080 Ti", "bert-large", 4, 10.0),
    ("v0", "A100 80GB SXM4", "bert-base", 176, 374.0),
    ("v0", "A100 40GB SXM4", "bert-base", 88, 335.0),
)
#: sequence length of the SQuAD runs (run_squad.py's max_seq_length)
SQUAD_SEQ = 384
#: (version, GPU label) of the measured level of each catalogue type: the newest version that ran it (the
#: A100-40GB SXM4 ran in v0 only). V100-32GB takes the V100-16GB's (the same chip).
LEVEL_SOURCES: dict[str, tuple[str, str]] = {
    "A100-80GB": ("v1", "A100 80GB SXM4"),
    "V100-16GB": ("v1", "V100 SXM2"),
    "RTX3090-24GB": ("v1", "RTX 3090"),
    "H100-80GB": ("v1", "H100 SXM5"),
    "A100-40GB": ("v0", "A100 40GB SXM4"),
    "A10-24GB": ("v1", "A10"),
}
#: the measured types the level RULE is fitted on (the A10, measured like them, is held out: it checks the rule)
RULE_FIT_TYPES = ("A100-80GB", "V100-16GB", "RTX3090-24GB", "H100-80GB", "A100-40GB")

#: BERT-base (Devlin et al. 2019, arXiv 1810.04805: L=12, H=768, A=12), for the width check
BERT_BASE = custom_model(vocab_size=30522, hidden=768, layers=12, heads=12, max_seq_len=512, arch="encoder",
                         name="bert-base")


def ridge(peak_tflops: float, memory_gbps: float) -> float:
    """FLOP per byte at which the datasheet's peak and memory bandwidth balance (the roofline's ridge point)."""
    return peak_tflops * 1e3 / memory_gbps


def reference_ridge() -> float:
    """The A100-80GB's ridge (312 TFLOP/s over 2,039 GB/s: 153 FLOP/byte), the rule's anchor."""
    return ridge(*BENCH_GPUS["A100 80GB SXM4"][1:3])


def rule_half_tokens(peak_tflops: float, memory_gbps: float) -> float:
    """The RULE for ``T_half`` of a type without a micro-batch sweep: 455 (the A100-80GB's) x its ridge over the
    A100-80GB's."""
    return HALF_TOKENS * ridge(peak_tflops, memory_gbps) / reference_ridge()


def fit_v100_half_tokens(precision: str = "mixed") -> tuple[float, float, float, float]:
    """``T_half`` of V100 fitted to :data:`V100_SWEEP` at ``precision`` ("mixed" or "fp32"), as
    :func:`frenzy_env.world.efficiency.fit_half_tokens` (one scale per sequence length). Returns (T_half, its
    standard error, rms and largest absolute log residual)."""
    from scipy.optimize import curve_fit

    rows = [r for r in V100_SWEEP if r[1] == precision]
    conf = np.array([r[0] for r in rows], dtype=np.float64)
    tokens = np.array([r[2] * r[3] for r in rows], dtype=np.float64)
    y = np.array([1.0 / (r[2] * r[4]) for r in rows])  # seconds per token

    def model(x, p, *scales):
        c, t = x
        return np.log(np.asarray(scales)[c.astype(int)]) + np.log1p(p / t)

    popt, pcov = curve_fit(model, (conf, tokens), np.log(y), p0=[500.0, float(y.min()), float(y.min())])
    resid = np.log(y) - model((conf, tokens), *popt)
    return float(popt[0]), float(np.sqrt(pcov[0, 0])), float(np.sqrt(np.mean(resid**2))), float(np.abs(resid).max())


def _model(name: str) -> ModelSpec:
    return BERT_BASE if name == "bert-base" else get_model(name)


def bench_half_tokens(label: str, v100_half: float) -> float:
    """``T_half`` the fit gives the GPU ``label``: the A100-80GB's 455, the V100 fit for V100s, else the rule."""
    if label == "A100 80GB SXM4":
        return HALF_TOKENS
    if label.startswith("V100"):
        return v100_half
    return rule_half_tokens(*BENCH_GPUS[label][1:3])


def measured_level(label: str, model: str, batch: int, seqs_per_s: float, half_tokens: float) -> float:
    """``U``, the efficiency at ``T_ref`` that makes the simulator's one-GPU iteration time of ``batch`` sequences
    of ``model`` (sequence :data:`SQUAD_SEQ`) on ``label`` equal the measured ``batch / seqs_per_s``:
    ``F b s g(T_ref) / (peak (t - overhead) g(b s))``."""
    tokens = batch * SQUAD_SEQ
    compute = batch / seqs_per_s - DEFAULT_OVERHEAD_S
    u = _model(model).flops_per_token(SQUAD_SEQ) * tokens / (BENCH_GPUS[label][1] * 1e12 * compute)
    return u * saturation(REFERENCE_TOKENS, half_tokens) / saturation(tokens, half_tokens)


def levels(v100_half: float | None = None) -> dict[tuple[str, str, str], float]:
    """``(version, GPU label, model) -> U / U(A100 80GB SXM4)`` of the same version and model, for every row
    of :data:`LAMBDA_POINTS` (``v100_half``: the V100 ``T_half``, default the fit's)."""
    v100_half = fit_v100_half_tokens()[0] if v100_half is None else v100_half
    u = {(v, g, m): measured_level(g, m, b, thr, bench_half_tokens(g, v100_half)) for v, g, m, b, thr in LAMBDA_POINTS}
    return {k: x / u[(k[0], "A100 80GB SXM4", k[2])] for k, x in u.items()}


def fit_level_rule(lv: dict | None = None) -> tuple[float, float, float]:
    """The RULE's ``level = 1 / (a + b ridge)`` fitted by least squares on log level over the measured catalogue
    types of :data:`RULE_FIT_TYPES` (BERT-large). Returns (a, b, largest absolute log residual)."""
    from scipy.optimize import least_squares

    lv = levels() if lv is None else lv
    sources = [LEVEL_SOURCES[t] for t in RULE_FIT_TYPES]
    x = np.array([ridge(*BENCH_GPUS[g][1:3]) for v, g in sources])
    y = np.log([lv[(v, g, "bert-large")] for v, g in sources])
    res = least_squares(lambda p: -np.log(p[0] + p[1] * x) - y, [0.4, 0.004])
    return float(res.x[0]), float(res.x[1]), float(np.abs(res.fun).max())


def rule_level(peak_tflops: float, memory_gbps: float, rule: tuple[float, float, float]) -> float:
    """The rule's level at a datasheet's peak and bandwidth (``rule``: :func:`fit_level_rule`'s result)."""
    return 1.0 / (rule[0] + rule[1] * ridge(peak_tflops, memory_gbps))


def fitted_constants() -> tuple[dict[str, float], dict[str, float]]:
    """(``T_half``, level) per catalogue type, as the fits and rules give them (the shipped constants are these,
    rounded: ``T_half`` to a token, the level to 0.001)."""
    v100 = fit_v100_half_tokens()[0]
    lv = levels(v100)
    rule = fit_level_rule(lv)
    half, level = {}, {}
    for name, g in GPU_TYPES.items():
        if name in LEVEL_SOURCES or name == "V100-32GB":
            version, label = LEVEL_SOURCES["V100-16GB" if name.startswith("V100") else name]
            level[name] = lv[(version, label, "bert-large")]
            half[name] = bench_half_tokens(label, v100)
        else:
            memory = TYPE_MEMORY[name][0]
            half[name] = rule_half_tokens(g.peak_tflops, memory)
            if name in LEVEL_SAME_CHIP:  # the same chip's measured delivered FLOP/s over this type's peak
                version, label = LEVEL_SAME_CHIP[name]
                level[name] = lv[(version, label, "bert-large")] * BENCH_GPUS[label][1] / g.peak_tflops
            else:
                level[name] = rule_level(g.peak_tflops, memory, rule)
    return half, level


#: Types without a measurement of their own whose level is their chip's, measured on a sibling part: label of
#: :data:`BENCH_GPUS` and benchmark version. The L40S is an AD102 as the RTX 6000 Ada (142 SMs, 48 GB GDDR6;
#: 350 W against 300 W, 864 against 960 GB/s); the rule overestimates that measured sibling by 26% (and the
#: A10, another power-limited GDDR6 part, by 21%), so the sibling's delivered FLOP/s stand for the L40S's.
LEVEL_SAME_CHIP: dict[str, tuple[str, str]] = {"L40S-48GB": ("v1", "RTX 6000 Ada")}


SOURCE_MOSAIC = (
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md at commit 061f2c7 ('MPT Training Benchmarks': "
    "tables 'H100 80GB BF16' and 'A100 80GB with 1600 Gbps node-node interconnect (RoCE)'; Composer, FSDP "
    "FULL_SHARD, amp_bf16, the same code on both GPUs)"
)
#: MPT model widths (d_model of llm-foundry's scripts/train/yamls/pretrain/mpt-*.yaml)
MPT_WIDTH = {"760m": 1536, "1b": 2048, "3b": 2560, "7b": 4096, "13b": 5120, "30b": 7168, "70b": 8192}
#: LLM-width pairs, the same model, sequence and GPU count on H100 80GB SXM and A100 80GB SXM
#: (:data:`SOURCE_MOSAIC`): (model, sequence, GPUs, then per GPU type (H100 first): MFU in %, micro-batch, gradient
#: accumulation steps, tokens/s per GPU). Every pair of the two tables with the same model, sequence and GPUs.
MPT_PAIRS: tuple[tuple[str, int, int, tuple[float, int, int, float], tuple[float, int, int, float]], ...] = (
    ("760m", 512, 8, (40.42, 96, 2, 83749), (45.07, 96, 2, 29446)),
    ("760m", 1024, 8, (39.76, 48, 2, 78581), (47.76, 48, 2, 29765)),
    ("760m", 2048, 8, (34.9, 24, 2, 63147), (56.85, 24, 2, 32434)),
    ("760m", 4096, 8, (35.83, 12, 2, 55459), (56.05, 12, 2, 27351)),
    ("760m", 8192, 8, (34.84, 6, 2, 41825), (55.31, 6, 2, 20933)),
    ("1b", 512, 8, (43.21, 56, 4, 52275), (60.68, 56, 4, 23148)),
    ("1b", 1024, 8, (41.95, 18, 4, 48910), (60.15, 18, 4, 22112)),
    ("1b", 2048, 8, (41.82, 14, 1, 45455), (59.86, 14, 4, 20513)),
    ("1b", 4096, 8, (40.26, 7, 4, 38535), (59.0, 7, 4, 17807)),
    ("1b", 8192, 8, (37.73, 3, 4, 29157), (56.69, 3, 4, 13814)),
    ("3b", 512, 8, (46.32, 40, 6, 27965), (63.71, 40, 6, 12127)),
    ("3b", 1024, 8, (46.2, 20, 6, 27046), (62.73, 20, 6, 11580)),
    ("3b", 4096, 8, (42.31, 5, 6, 20964), (60.53, 5, 6, 9457)),
    ("3b", 8192, 8, (40.31, 3, 6, 16578), (59.34, 3, 6, 7695)),
    ("7b", 1024, 8, (42.83, 64, 2, 10203), (58.01, 64, 2, 4357)),
    ("7b", 2048, 8, (46.44, 6, 1, 10643), (64.23, 6, 2, 4641)),
    ("7b", 4096, 8, (40.42, 16, 2, 8611), (54.84, 16, 2, 3684)),
    ("7b", 8192, 8, (37.14, 8, 2, 6935), (54.47, 8, 2, 3206)),
    ("13b", 1024, 8, (44.27, 40, 3, 5502), (59.48, 40, 3, 2330)),
    ("13b", 2048, 8, (39.79, 2, 1, 4792), (59.57, 2, 3, 2262)),
    ("13b", 4096, 8, (41.6, 10, 3, 4717), (57.62, 10, 3, 2060)),
    ("30b", 1024, 8, (38.76, 6, 21, 2084), (55.82, 6, 21, 946)),
    ("30b", 2048, 8, (38.11, 3, 21, 2002), (55.3, 3, 21, 916)),
    ("30b", 4096, 8, (35.86, 1, 21, 1802), (51.37, 1, 21, 814)),
    ("30b", 8192, 8, (29.92, 1, 21, 1384), (39.38, 1, 21, 574)),
    ("70b", 2048, 32, (36.15, 2, 16, 882), (48.56, 2, 16, 373)),
    ("70b", 2048, 64, (42.57, 8, 4, 1039), (53.33, 8, 4, 410)),
)
#: the width-rule's anchors: at or below WIDTH_NARROW (BERT-large, where the levels are measured) the level is the
#: type's; at or above WIDTH_WIDE (the narrowest MPT width of the fit) the level is the type's raised to the
#: fitted exponent; linear in log2(width) between
WIDTH_NARROW = 1024
WIDTH_WIDE = 2048


def mpt_level(pair: tuple) -> float:
    """The H100's level over the A100-80GB's of one :data:`MPT_PAIRS` pair, in the simulator's terms: each MFU
    is put on compute alone (the per-GPU iteration time ``GA x MBS x seq / (tokens/s)`` less the 49 ms overhead
    and 2 ms per extra micro-step) and on ``T_ref`` (``x g(T_ref) / g(MBS x seq)`` on the type's curve)."""
    _, seq, _, *rows = pair
    u = []
    for (mfu, mb, ga, tps), half in zip(rows, (878.0, HALF_TOKENS), strict=True):
        t = ga * mb * seq / tps
        compute = t - DEFAULT_OVERHEAD_S - (ga - 1) * 0.002
        u.append(mfu / 100.0 * t / compute * saturation(REFERENCE_TOKENS, half) / saturation(mb * seq, half))
    return u[0] / u[1]


def fit_width_exponent() -> tuple[float, float, float, int]:
    """The level at LLM widths: the geometric mean of :func:`mpt_level` over the one-node pairs (8 GPUs) at
    widths of at least :data:`WIDTH_WIDE`, and the exponent ``k`` that puts it on the H100's BERT-large level,
    ``level_LLM = level_BERT-large ** k``. Returns (H100 level at LLM widths, k, standard deviation of the log
    levels, pairs)."""
    lv = [mpt_level(p) for p in MPT_PAIRS if p[2] == 8 and MPT_WIDTH[p[0]] >= WIDTH_WIDE]
    llm = float(np.exp(np.mean(np.log(lv))))
    bert = levels()[("v1", "H100 SXM5", "bert-large")]
    return llm, float(np.log(llm) / np.log(bert)), float(np.std(np.log(lv))), len(lv)


def hf_check(half_tokens: float) -> float:
    """Hugging Face's V100 check (:data:`frenzy_env.world.efficiency.HF_CHECK`) predicted by a curve of
    ``half_tokens``: samples/s at micro-batch 1 x 4 accumulation steps over micro-batch 4 (sequence 512),
    ``g(512) / g(2048)``; measured 7.75 / 8.86 = 0.875."""
    return saturation(512.0, half_tokens) / saturation(2048.0, half_tokens)


#: V100's FP32 peak (NVIDIA V100 datasheet, SXM2: 15.7 TFLOPS single precision): the precision rule scales the
#: mixed-precision ``T_half`` by the ridge at FP32 (peak 15.7, 4-byte weights) over the ridge at mixed precision
#: (peak 125, 2-byte weights)
V100_FP32_TFLOPS = 15.7


def squad_pair_prediction(v100_half: float, v100_level: float, mb_a: int, mb_b: int) -> float:
    """The simulator's V100 throughput at micro-batch ``mb_b`` over that at ``mb_a`` (BERT-large, sequence 384,
    one GPU, an optimizer step per micro-batch: the overhead of every iteration)."""
    f = get_model("bert-large").flops_per_token(SQUAD_SEQ)
    u_ref = DEFAULT_UTILISATION * v100_level

    def seqs_per_s(mb):
        tokens = mb * SQUAD_SEQ
        u = u_ref * saturation(tokens, v100_half) / saturation(REFERENCE_TOKENS, v100_half)
        return mb / (f * tokens / (125e12 * u) + DEFAULT_OVERHEAD_S)

    return seqs_per_s(mb_b) / seqs_per_s(mb_a)


def checks() -> list[tuple[str, float, float]]:
    """Every held-out check as (what, predicted, measured); the relative error is ``predicted / measured - 1``."""
    v100, _, _, _ = fit_v100_half_tokens()
    v100_fp32 = fit_v100_half_tokens("fp32")[0]
    lv = levels(v100)
    rule = fit_level_rule(lv)
    hf = HF_CHECK[1][2] / HF_CHECK[0][2]
    to_fp32 = ridge(V100_FP32_TFLOPS, 900.0 / 4) / ridge(125.0, 900.0 / 2)
    out = [
        ("HF V100 fp32: 'microbatch' curve (A100's)", hf_check(HALF_TOKENS), hf),
        ("HF V100 fp32: V100 fp32 fit", hf_check(v100_fp32), hf),
        ("HF V100 fp32: V100 mixed fit x precision rule", hf_check(v100 * to_fp32), hf),
    ]
    v100_level = lv[LEVEL_SOURCES["V100-16GB"] + ("bert-large",)]
    for source, mb_a, thr_a, mb_b, thr_b in V100_SQUAD_PAIRS:
        out.append((f"V100 SQuAD {source}: throughput mb {mb_b} / mb {mb_a}",
                    squad_pair_prediction(v100, v100_level, mb_a, mb_b), thr_b / thr_a))
    for (version, label, model), x in sorted(lv.items()):
        if model == "bert-base" and label != "A100 80GB SXM4":  # another width: predicted by the BERT-large level
            out.append((f"width: BERT-base level of {label} ({version})", lv[(version, label, "bert-large")], x))
    out.append(("version: RTX 3090 level, v1 against v0", lv[("v1", "RTX 3090", "bert-large")],
                lv[("v0", "RTX 3090", "bert-large")]))
    for version, label in (("v0", "V100 PCIe"), ("v0", "Quadro RTX 5000"), ("v0", "GTX 1080 Ti"),
                           ("v0", "A100 40GB PCIe"), ("v1", "A100 40GB PCIe"), ("v1", "H100 PCIe"), ("v1", "A10"),
                           ("v1", "RTX 6000 Ada")):
        kind = "rule, power-limited GDDR6 part" if label in ("A10", "RTX 6000 Ada") else "rule"
        out.append((f"{kind}: level of {label} ({version})", rule_level(*BENCH_GPUS[label][1:3], rule),
                    lv[(version, label, "bert-large")]))
    for model in ("bert-large", "bert-base"):
        b, thr = next((b, thr) for v, g, m, b, thr in LAMBDA_POINTS if (v, g, m) == ("v1", "A100 80GB SXM4", model))
        out.append((f"A100-80GB absolute level, {model} (v1): utilisation against measured", DEFAULT_UTILISATION,
                    measured_level("A100 80GB SXM4", model, b, thr, HALF_TOKENS)))
    out.append(("rule: V100 T_half (mixed) against the V100 fit", rule_half_tokens(125.0, 900.0), v100))
    h100 = lv[("v1", "H100 SXM5", "bert-large")]
    for what, keep in (("width 1536 (MPT 760m, 8 GPUs, 5 pairs)", lambda p: p[0] == "760m"),
                       ("width 8192 (MPT 70B, 32 and 64 GPUs)", lambda p: p[0] == "70b")):
        rows = [p for p in MPT_PAIRS if keep(p)]
        measured = float(np.exp(np.mean([np.log(mpt_level(p)) for p in rows])))
        out.append((f"width rule: H100 level at {what}", h100 ** width_exponent(MPT_WIDTH[rows[0][0]]), measured))
    return out
