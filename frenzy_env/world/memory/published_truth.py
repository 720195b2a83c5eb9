"""The simulator's true peak memory under ``SimConfig(memory_truth="published")``: a structural peak that no
compared predictor computes, times a per-job factor drawn from what published runs of six frameworks measured
against that same structural peak, with the caching allocator's fragmentation drawn per job where the
measurement did not include it.

Why not ``memory_truth="residual"`` (:mod:`frenzy_env.world.memory.truth`): there the truth is the "extended"
estimate times that estimator's own held-out residuals (0.942 .. 1.030). The "extended" predictor is then
never more than 3% off by construction, the published misses of the DeepSpeed cases (up to 29% under) and the
caching allocator's reserved-over-allocated gap are absent, and the truth is built from one of the
predictors being compared. Every policy's out-of-memory risk is understated, and a comparison of predictors
favours the one the truth was made of.

The reference: the *structural peak* ``S`` of a plan's layout (:func:`structural_peak_layouts`): model
states (bytes per parameter by precision, sharded by ZeRO stage; Rajbhandari et al. 2020, arXiv 1910.02054),
stored activations (Korthikanti et al. 2022, arXiv 2205.05198), one layer's backward working set and the
logits, per GPU, for the layout's (dp, tp, pp, micro-batch): what the layout's tensors occupy, with no
allocator fragmentation, no framework constant and no CUDA context. It is the physics both predictors
approximate and neither predicts: the paper's formula (``predictor="frenzy"``) is a coarser account of it
(its own parameter count, no logits, no working set, no context); the "extended" predictor is ``S`` plus two
constants fitted to measurements (fragmentation 0.2081 of the activations, 134.8 MiB) plus the context. ``S``
is computed by the estimator's accounting with those constants at zero (``kind="allocated",
framework_bytes=0``), so it carries none of the extended estimator's fitted numbers. A simulated job's ``S``
is its layout's under the estimator's default options (fp16 mixed precision, eager attention, no
recomputation, no ZeRO): the configuration the simulator's plans run.

The factor: for each of the 27 published cases of ``frenzy_env/data/memory_cases.csv`` (6 sources, DeepSpeed
included) the ratio ``(measured - CUDA context) / S(case)``, the context subtracted only where the source
measured the device total (nvidia-smi; the source's own 1,343 MiB), and ``S(case)`` the structural peak of the
case's own configuration (model, layout, precision, ZeRO stage, recomputation, attention and the framework's
buffers: :func:`frenzy_env.world.memory.calibration.calibration_case`). The ratios ship as
:data:`RATIOS_CSV` (``frenzy_env/data/memory_published_ratios.csv``, recomputed by :func:`compute_ratios`; a
test checks the two agree). (The framework mappings were derived from each framework's code after a first
mapping missed, ``docs/world.md``, so the ratios of the four validated frameworks are not fully blind and sit
near 1 partly by that derivation; the DeepSpeed mappings' misses are kept as they are.) They span 0.9725
(Megatron M1) to 1.4175 (DeepSpeed D3):

=================== ========= ==================================================================
source              allocator measured / structural
=================== ========= ==================================================================
hf-docs             measured  A1 1.1308, A2 1.0723, A3 1.0241, A4 1.0438, A5 1.0002
llm.c               static    C1 1.0167, C2 1.0179, C3 1.0212, C4 1.0339
megatron-ci         drawn     M1 0.9725, M2 1.0134, M3 0.9874, M4 1.1066, M5 1.0281, M6 1.0900,
                              M7 1.1156, M8 1.0629, M9 0.9867, P1 0.9825, P3 1.0201
torchtitan          measured  T1 1.1351, T3 1.1439
ds-examples-bf16mw  drawn     D1 0.9849, D2 1.1242, D3 1.4175, D4 1.1698
rasbt-memory-optim  measured  D6 1.4069
=================== ========= ==================================================================

The allocator (column ``allocator``): a ``reserved`` or ``device`` measurement (hf-docs, torchtitan, rasbt)
already holds the PyTorch caching allocator's gap between what it reserves and what tensors use
("measured"). llm.c allocates its buffers once with ``cudaMalloc`` (its static allocation is its
reservation; no caching allocator): "static". A ``torch.cuda.max_memory_allocated`` measurement
(Megatron-LM CI, DeepSpeedExamples) does not hold the gap, yet the GPU must hold the reservation: "drawn",
the job's fragmentation ``phi`` is drawn from Uniform(0, :data:`FRAGMENTATION_MAX` = 0.30) and the factor is
``ratio / (1 - phi)``. Source of the spread: GMLake (Guo et al., ASPLOS 2024, arXiv 2401.08156) measures the
fragmentation of PyTorch's caching allocator as ``1 - peak active / peak reserved`` in LLM training
(DeepSpeed ZeRO-3, FSDP and Colossal-AI, 1.3B to 20B models on A100-80GB): "up to 30%", and its allocator
removes 15% of it on average (up to 33%). The uniform shape is an ASSUMPTION: the source gives a bound and an
average (the uniform's mean, 0.15, is that average), not a distribution; and its runs use recomputation,
LoRA, offloading and ZeRO-3, which fragment more than plain data and tensor parallelism, so this draw is the
pessimistic side of the published range.

Weights: each SOURCE is equally likely (1/6), split evenly over its cases, as under ``"residual"``: each
source is one framework (hf-trainer, llm.c, megatron-core, torchtitan-fsdp2, deepspeed-zero3,
deepspeed-zero2) and a simulated job's framework is unknown, so every framework is equally likely and the
11 Megatron cases do not outweigh the one DistilBERT case; DeepSpeed (two ZeRO stages, two front ends) is 2
of the 6. The factor distribution (:func:`factor_summary`): 0.9725 .. 2.025 (D3 at phi = 0.30), weighted
mean 1.208, P(factor > 1) = 0.994, P(factor > 1.2) = 0.385; 1/3 of the jobs draw a fragmentation. (Above 1
almost always: a real run holds more than its tensors' structural sum.)

The true peak of a plan (:func:`true_peak_layouts`): ``CONTEXT_BYTES + factor x S(plan)``, the CUDA context
(1,343 MiB, measured by Hugging Face on a V100: the estimator's ``CONTEXT_BYTES``) plus the job's factor on
its layout's structural peak. Both predictors can be wrong in both directions, by published amounts: the
"extended" estimate is ``S + 0.2081 x activations + 134.8 MiB + context``, above the truth for a job whose
factor is below ``1 + (0.2081 x activations + 134.8 MiB) / S`` (an llm.c or HF-docs draw, a Megatron one
with little fragmentation: up to 20% over) and up to half below it for a DeepSpeed ZeRO-3 draw (D3's 29%
under, and the allocator's gap on top);
the paper's formula leaves out the logits, the working set and the context (under, by up to 90% on the
workloads of ``docs/world.md``) but counts 5 bytes of attention scores per head and token pair where a model
without dropout keeps 2 (over, by up to 16% on their llama jobs). Measured on plan tables and episodes by
``scripts/memory_truth_margins.py`` (``docs/world.md``, "The published truth").

The factor of a job is drawn once per episode from ``(seed, job_id)`` alone (:func:`published_factors`), with
its own random stream (two uniforms: the case, the fragmentation): the same for every plan, restart and
resize of the job, whatever a policy does, and the same for every predictor and margin, so runs that differ
only in policy or predictor stay paired. It is per job, not per plan: the framework, and the allocator it
runs on, are the job's; the published cases give one ratio per run, not how a run's fragmentation moves
with its layout, and one factor keeps a plan of smaller structural peak never truly larger.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.paths import PACKAGE_DATA, atomic_open
from frenzy_env.world.memory.estimator import CONTEXT_BYTES, MiB, estimate_memory_layouts
from frenzy_env.world.memory.truth import read_numeric_rows, source_weights
from frenzy_env.world.models import ModelSpec

#: the shipped ratio table (see the module docstring)
RATIOS_CSV = PACKAGE_DATA / "memory_published_ratios.csv"
#: columns of :data:`RATIOS_CSV`
RATIO_COLUMNS = (
    "case", "source_id", "framework", "kind", "allocator", "measured_mib", "context_mib", "structural_mib", "ratio",
)
#: GMLake's bound on the PyTorch caching allocator's fragmentation, ``1 - peak active / peak reserved``
#: (Guo et al., ASPLOS 2024, arXiv 2401.08156: "up to 30%"); a "drawn" job's phi is Uniform(0, this)
FRAGMENTATION_MAX = 0.30
#: frameworks that allocate their buffers once, without a caching allocator (llm.c's static allocation)
STATIC_ALLOCATION_FRAMEWORKS = ("llm.c",)
#: the values of the ``allocator`` column: the measurement holds the allocator's gap; there is none; it is drawn
ALLOCATORS = ("measured", "static", "drawn")
#: the random stream of the draws (mixed into the seed, so they are independent of the workload's and of
#: ``memory_truth="residual"``'s)
_STREAM = 0x6D656D5F70756273  # "mem_pubs"


def allocator_of(row: dict[str, str]) -> str:
    """The ``allocator`` value of a calibration case (see the module docstring)."""
    if row.get("kind") in ("reserved", "device"):
        return "measured"
    return "static" if row.get("framework") in STATIC_ALLOCATION_FRAMEWORKS else "drawn"


def compute_ratios(cases: str | Path | None = None) -> list[dict[str, Any]]:
    """The ratio table recomputed from a calibration CSV (default: the shipped ``memory_cases.csv``), every
    case, in the CSV's order: ``case, source_id, framework, kind, allocator, measured_mib``, the CUDA context
    the measurement holds (``context_mib``, 0 unless ``kind="device"``), the structural peak of the case's own
    configuration (``structural_mib``) and ``ratio = (measured_mib - context_mib) / structural_mib``."""
    from frenzy_env.world.memory.calibration import load_cases, predict_case

    out = []
    for row in load_cases(cases):
        ext = predict_case(row, kind="allocated", framework_bytes=0.0)["ext"]
        context = float(row.get("context_mib") or 0.0) if row.get("kind") == "device" else 0.0
        if row.get("kind") == "device" and not context:
            raise ConfigError(f"calibration case {row['case']}: a device measurement needs its context_mib")
        structural = ext.total_bytes / MiB
        measured = float(row["measured_mib"])
        out.append({
            "case": row["case"], "source_id": row["source_id"], "framework": row.get("framework", ""),
            "kind": row["kind"], "allocator": allocator_of(row), "measured_mib": measured, "context_mib": context,
            "structural_mib": structural, "ratio": (measured - context) / structural,
        })
    return out


def write_ratios(path: str | Path = RATIOS_CSV, cases: str | Path | None = None) -> Path:
    """Write :func:`compute_ratios` as the ratio CSV (``structural_mib`` to 0.1 MiB, ``ratio`` to 6 decimals),
    atomically. Regenerate the shipped table with ``python -c "from frenzy_env.world.memory.published_truth
    import write_ratios; write_ratios()"``."""
    path = Path(path)
    with atomic_open(path, newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(RATIO_COLUMNS)
        for r in compute_ratios(cases):
            w.writerow([r["case"], r["source_id"], r["framework"], r["kind"], r["allocator"], f"{r['measured_mib']:g}",
                        f"{r['context_mib']:g}", f"{r['structural_mib']:.1f}", f"{r['ratio']:.6f}"])
    return path


def load_ratios(path: str | Path = RATIOS_CSV) -> list[dict[str, Any]]:
    """The rows of a ratio CSV (numbers as floats)."""
    rows = read_numeric_rows(path, "ratio", ("measured_mib", "context_mib", "structural_mib", "ratio"))
    for r in rows:
        if r["allocator"] not in ALLOCATORS:
            raise ConfigError(f"ratio table {path}: case {r['case']} has allocator {r['allocator']!r}")
    return rows


@lru_cache(maxsize=1)
def ratio_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ratios, probabilities, drawn) of the shipped ratio table, the distribution :func:`published_draws`
    draws from; ``drawn`` (bool) marks the cases whose fragmentation is drawn. (Tests may replace this function
    to force a draw.)"""
    rows = load_ratios()
    ratios = np.array([r["ratio"] for r in rows], dtype=np.float64)
    drawn = np.array([r["allocator"] == "drawn" for r in rows], dtype=bool)
    return ratios, source_weights([r["source_id"] for r in rows]), drawn


def factors_from_uniforms(u_case: np.ndarray, u_frag: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(case index, fragmentation phi, factor) of each pair of uniforms in [0, 1): the case is the inverse of
    :func:`ratio_table`'s cumulative probabilities at ``u_case``; ``phi = FRAGMENTATION_MAX x u_frag`` for a
    "drawn" case, else 0; ``factor = ratio / (1 - phi)``."""
    ratios, weights, drawn = ratio_table()
    cdf = np.cumsum(np.asarray(weights, dtype=np.float64))
    cdf /= cdf[-1]
    idx = np.minimum(np.searchsorted(cdf, np.asarray(u_case, dtype=np.float64), side="right"), len(ratios) - 1)
    phi = np.where(drawn[idx], FRAGMENTATION_MAX * np.asarray(u_frag, dtype=np.float64), 0.0)
    return idx, phi, ratios[idx] / (1.0 - phi)


def published_draws(seed: int, job_ids: Iterable[int]) -> dict[str, np.ndarray]:
    """Each job's draw (J,) from ``(seed, job_id)`` only, its own random stream per job (two uniforms: the
    case, then the fragmentation): ``case`` (index into :func:`ratio_table`), ``fragmentation`` (phi) and
    ``factor``."""
    s = int(seed) % 2**64
    u = np.array(
        [np.random.default_rng((_STREAM, s, int(j) % 2**64)).random(2) for j in job_ids], dtype=np.float64
    ).reshape(-1, 2)
    idx, phi, factor = factors_from_uniforms(u[:, 0], u[:, 1])
    return {"case": idx, "fragmentation": phi, "factor": factor}


def published_factors(seed: int, job_ids: Iterable[int]) -> np.ndarray:
    """The true-memory factor of each job (J,): true peak = context + factor x structural peak."""
    return published_draws(seed, job_ids)["factor"]


def factor_summary(samples: int = 200_000, seed: int = 0) -> dict[str, float]:
    """The factor distribution of :func:`ratio_table` (the "drawn" cases' phi by ``samples`` uniform draws):
    ``min``, ``max`` (exact: the smallest ratio, the largest ratio over ``1 - phi``), the weighted ``mean``,
    ``p_above_1``, ``p_above_1.2`` and ``p_drawn`` (the probability that a job draws a fragmentation)."""
    ratios, weights, drawn = ratio_table()
    w = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    u = np.random.default_rng(seed).random(samples)
    scale = 1.0 / (1.0 - FRAGMENTATION_MAX * u)  # (samples,) the drawn cases' 1 / (1 - phi)
    mean_scale = float(np.mean(scale))
    largest = np.where(drawn, ratios / (1 - FRAGMENTATION_MAX), ratios)
    out = {"min": float(np.min(ratios)), "max": float(np.max(largest)),
           "mean": float(np.sum(w * ratios * np.where(drawn, mean_scale, 1.0))), "p_drawn": float(w[drawn].sum())}
    for t, key in ((1.0, "p_above_1"), (1.2, "p_above_1.2")):
        above = [np.mean(r * scale > t) if d else float(r > t) for r, d in zip(ratios, drawn)]
        out[key] = float(np.sum(w * np.array(above)))
    return out


def structural_peak_layouts(
    model: ModelSpec, *, batch_size: int, seq_len: int, dp: np.ndarray, tp: np.ndarray, pp: np.ndarray,
    micro_batch: np.ndarray,
) -> np.ndarray:
    """The structural peak (bytes per GPU) of many layouts of one job: model states, activations, working set
    and logits (the estimator's accounting with no fragmentation, no framework constant and no context)."""
    return estimate_memory_layouts(
        model, batch_size=batch_size, seq_len=seq_len, dp=dp, tp=tp, pp=pp, micro_batch=micro_batch,
        kind="allocated", framework_bytes=0.0,
    )


def true_peak_layouts(
    model: ModelSpec, *, batch_size: int, seq_len: int, factor: float, dp: np.ndarray, tp: np.ndarray,
    pp: np.ndarray, micro_batch: np.ndarray,
) -> np.ndarray:
    """The true peak (bytes per GPU) of many layouts of a job whose factor is ``factor``:
    ``CONTEXT_BYTES + factor x`` :func:`structural_peak_layouts`."""
    lay = {"dp": dp, "tp": tp, "pp": pp, "micro_batch": micro_batch}
    return CONTEXT_BYTES + float(factor) * structural_peak_layouts(model, batch_size=batch_size, seq_len=seq_len, **lay)
