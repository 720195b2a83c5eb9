"""The simulator's true peak memory under ``SimConfig(memory_truth="residual")``: the calibrated "extended"
estimate times a per-job factor drawn from the estimator's residuals on published measurements.

Why: with ``memory_truth="estimate"`` (env v4's default) the simulator decides out-of-memory with the "extended"
estimator itself, so the "extended" predictor never fails by construction and a comparison of predictors is
circular. A real estimator is wrong by as much as it is wrong on measurements it was not fitted on; this module
makes the simulated truth differ from the estimate by exactly such errors.

The residual table (:data:`RESIDUALS_CSV`, ``frenzy_env/data/memory_residuals.csv``, recomputed by
:func:`compute_residuals` from the shipped ``frenzy_env/data/memory_cases.csv``; a test checks the two agree):
for each of the 4 sources of the 20 published cases env v5 was built on (:data:`V5_RESIDUAL_CASES`), the
estimator's two fitted constants (allocator fragmentation and framework constant,
:func:`frenzy_env.world.memory.calibration.fit_constants`) are refitted on the other 3 sources and the held-out
source's cases are predicted (:func:`frenzy_env.world.memory.calibration.leave_one_source_out`, a true refit);
each case gives a ratio ``measured / predicted``. (The framework mappings,
:data:`frenzy_env.world.memory.calibration.FRAMEWORKS`, are structural, not refitted; they were derived from each
framework's code, so these residuals are not fully blind, see ``docs/world.md``.) The 20 ratios:

==========  =======================================================================================
source      measured / predicted (held out)
==========  =======================================================================================
hf-docs     A1 1.0270, A2 1.0161, A3 1.0022, A4 0.9616, A5 0.9852
llm.c       C1 1.0117, C2 1.0125, C3 1.0188, C4 1.0300
megatron-ci M1 0.9479, M2 0.9677, M3 0.9419, M4 1.0223, M5 0.9487, M6 0.9635, M7 0.9970, M8 0.9744,
            M9 0.9845
torchtitan  T1 1.0148, T3 0.9974
==========  =======================================================================================

The distribution of the factor is this empirical distribution with each SOURCE weighted equally (1/4 each,
split evenly over its cases: a simulated job's framework is unknown and each source is one framework, so the
9 Megatron cases do not outweigh the 2 torchtitan ones): range 0.9419 .. 1.0300, P(factor > 1) = 0.553,
weighted mean of ln(factor) -0.0016 and standard deviation 0.0249 (a lognormal summary, not what is drawn;
unweighted over the 20 cases: mean -0.0092, sample sd 0.0289). A factor above 1 means the job needs more than
the estimate (an "extended" plan within 3% of a GPU's memory can fail); below 1, less (the estimate is
conservative and the oracle may pack tighter).

The factor of a job is drawn once per episode from ``(seed, job_id)`` alone (:func:`memory_factors`), with
its own random stream: the same for every plan, restart and resize of the job, the same whatever a policy
does, and the same for every predictor and margin, so runs that differ only in policy or predictor stay
paired. It multiplies the whole per-GPU device total (model states, activations, overheads) of the job's
chosen layout on every plan.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.paths import PACKAGE_DATA, atomic_open

#: the shipped residual table (see the module docstring)
RESIDUALS_CSV = PACKAGE_DATA / "memory_residuals.csv"
#: columns of :data:`RESIDUALS_CSV`
RESIDUAL_COLUMNS = ("case", "source_id", "framework", "measured_mib", "predicted_mib", "ratio")
#: the random stream of the factors (mixed into the seed, so the draw is independent of the workload's)
_STREAM = 0x6D656D5F74727574  # "mem_trut"


#: The cases env v5's residual table is computed from: the 20 published cases env v5 was built on. The file's
#: other cases (P1, P3: Megatron-LM fp16 runs; D1-D4, D6: DeepSpeed) validate the estimator but change the
#: simulated world only with a new env version.
V5_RESIDUAL_CASES = (
    "A1", "A2", "A3", "A4", "A5", "C1", "C2", "C3", "C4",
    "M1", "M2", "M3", "M4", "M5", "M6", "M7", "M8", "M9", "T1", "T3",
)


def compute_residuals(
    cases: str | Path | None = None, names: Sequence[str] | None = V5_RESIDUAL_CASES
) -> list[dict[str, Any]]:
    """The residual table recomputed from a calibration CSV (default: the shipped ``memory_cases.csv``), over
    the cases named in ``names`` (default :data:`V5_RESIDUAL_CASES`; None: every case): one record per case, in
    the CSV's order, with ``case, source_id, framework, measured_mib``, the leave-one-source-out
    ``predicted_mib`` (fitted on those cases only) and ``ratio = measured_mib / predicted_mib``."""
    from frenzy_env.world.memory.calibration import leave_one_source_out, load_cases

    rows = load_cases(cases)
    if names is not None:
        wanted = set(names)
        rows = [r for r in rows if r["case"] in wanted]
        if missing := wanted - {r["case"] for r in rows}:
            where = cases or "the shipped table"
            raise ConfigError(f"calibration cases {', '.join(sorted(missing))} are not in {where}")
    by_case = {r["case"]: r for r in leave_one_source_out(rows)}
    out = []
    for row in rows:
        rec = by_case[row["case"]]
        out.append({
            "case": row["case"], "source_id": row["source_id"], "framework": row.get("framework", ""),
            "measured_mib": float(rec["measured_mib"]), "predicted_mib": float(rec["predicted_mib"]),
            "ratio": float(rec["measured_mib"]) / float(rec["predicted_mib"]),
        })
    return out


def write_residuals(
    path: str | Path = RESIDUALS_CSV, cases: str | Path | None = None, names: Sequence[str] | None = V5_RESIDUAL_CASES
) -> Path:
    """Write :func:`compute_residuals` as the residual CSV (``predicted_mib`` to 0.1 MiB, ``ratio`` to 6
    decimals), atomically. Regenerate the shipped table with ``python -c "from frenzy_env.world.memory.truth import
    write_residuals; write_residuals()"``."""
    path = Path(path)
    with atomic_open(path, newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(RESIDUAL_COLUMNS)
        for r in compute_residuals(cases, names):
            w.writerow([r["case"], r["source_id"], r["framework"], f"{r['measured_mib']:g}",
                        f"{r['predicted_mib']:.1f}", f"{r['ratio']:.6f}"])
    return path


def read_numeric_rows(path: str | Path, what: str, numeric: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of a CSV of per-case ratios, the ``numeric`` columns as floats; a :class:`ConfigError` naming
    ``what`` (the table's kind) and ``path`` when it has no rows."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ConfigError(f"{what} table {path} has no rows")
    for r in rows:
        for k in numeric:
            r[k] = float(r[k])
    return rows


def load_residuals(path: str | Path = RESIDUALS_CSV) -> list[dict[str, Any]]:
    """The rows of a residual CSV (numbers as floats)."""
    return read_numeric_rows(path, "residual", ("measured_mib", "predicted_mib", "ratio"))


def source_weights(source_ids: Sequence[str]) -> np.ndarray:
    """Probability of each case: every source equally likely, split evenly over its cases."""
    ids = list(source_ids)
    counts = {s: ids.count(s) for s in set(ids)}
    return np.array([1.0 / (len(counts) * counts[s]) for s in ids])


@lru_cache(maxsize=1)
def residual_table() -> tuple[np.ndarray, np.ndarray]:
    """(ratios, probabilities) of the shipped residual table, the distribution :func:`memory_factors` draws
    from. (Tests may replace this function to force a factor.)"""
    rows = load_residuals()
    ratios = np.array([r["ratio"] for r in rows], dtype=np.float64)
    return ratios, source_weights([r["source_id"] for r in rows])


def residual_summary(ratios: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """Weighted summary of a factor distribution: min, max, P(factor > 1), mean and sd of ln(factor)."""
    w = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    lg = np.log(np.asarray(ratios, dtype=np.float64))
    mu = float(np.sum(w * lg))
    return {"min": float(np.min(ratios)), "max": float(np.max(ratios)), "p_above_1": float(w[ratios > 1].sum()),
            "log_mean": mu, "log_sd": float(np.sqrt(np.sum(w * (lg - mu) ** 2)))}


def memory_factors(seed: int, job_ids: Iterable[int]) -> np.ndarray:
    """The true-memory factor of each job (J,): a draw from :func:`residual_table` that depends on
    ``(seed, job_id)`` only (its own random stream per job)."""
    ratios, weights = residual_table()
    cdf = np.cumsum(np.asarray(weights, dtype=np.float64))
    cdf /= cdf[-1]
    s = int(seed) % 2**64
    u = np.array([np.random.default_rng((_STREAM, s, int(j) % 2**64)).random() for j in job_ids], dtype=np.float64)
    idx = np.minimum(np.searchsorted(cdf, u, side="right"), len(ratios) - 1)
    return np.asarray(ratios, dtype=np.float64)[idx]
