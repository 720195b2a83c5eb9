"""Measured peak-memory cases mapped to MARP estimator inputs, and the estimator's calibration on them.

A case is one row of a calibration CSV: the shipped ``frenzy_env/data/memory_cases.csv`` (published
measurements from several independent sources; see ``frenzy_env/data/ATTRIBUTION.md``) or a file in the
older, narrower format of the shared ``memory/calibration.csv`` (same first columns, no ``kind`` /
``source_id`` / ``framework``; those are inferred). :func:`calibration_case` turns a row into a model, the job
keywords of :func:`frenzy_env.world.memory.estimator.estimate_memory` and the "extended" options that match

* what was measured, the row's ``kind`` (:data:`frenzy_env.world.memory.estimator.KINDS`): ``allocated`` (the peak of
live   tensors: ``torch.cuda.max_memory_allocated``, or llm.c's static allocation), ``reserved`` (the caching
  allocator's peak, ``max_memory_reserved``) or ``device`` (nvidia-smi: reserved plus the CUDA context, whose
  size the row gives in ``context_mib`` when the source measured it);
* the framework (:data:`FRAMEWORKS`): which copies of the model states it keeps, per parameter;
* ZeRO stage (Megatron's distributed optimizer is stage 1, FSDP / Megatron-FSDP full sharding is stage 3),
  recomputation and the attention kernel, from their columns.

:func:`fit_constants` fits the estimator's two free constants (allocator fragmentation and a per-process
framework constant) to a set of cases by non-negative least squares on relative errors, and
:func:`leave_one_source_out` validates that procedure: fit on every source but one, predict the held-out
source. ``scripts/validate_memory.py`` prints both; ``frenzy reproduce`` uses :func:`predict_case`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.paths import PACKAGE_DATA
from frenzy_env.world.memory.estimator import (
    FRAGMENTATION,
    FRAMEWORK_BYTES,
    KINDS,
    VALIDATED_FRAMEWORKS,
    MiB,
    estimate_memory,
    framework_options,
)
from frenzy_env.world.memory.estimator import FRAMEWORKS as _MEMORY_FRAMEWORKS
from frenzy_env.world.models import ModelSpec, custom_model

#: the shipped cases (published measurements, one source per ``source_id``)
CASES_CSV = PACKAGE_DATA / "memory_cases.csv"
# the cases the shipped FRAGMENTATION and FRAMEWORK_BYTES were fitted on (frenzy_env.world.memory.estimator)
FITTED_CASES = ("A1", "A2")
PRECISION_MAP = {
    "fp32": "fp32", "amp-fp16": "amp", "amp-bf16": "amp", "amp": "amp", "bf16": "bf16", "fp16": "fp16",
    "bf16-pure": "bf16-pure",
}
#: Extended-estimator options implied by a framework (the ``framework`` column): the estimator's public
#: ``framework`` option, :data:`frenzy_env.world.memory.estimator.FRAMEWORKS` (documented there, per framework and
# buffer).
#: A case's own columns (precision, ZeRO stage, recomputation, attention, ...) win over the framework's.
FRAMEWORKS = _MEMORY_FRAMEWORKS
#: case columns whose values the per-feature error table groups by
FEATURES = ("framework", "kind", "zero_stage", "recompute", "attention", "tp")


def load_cases(path: str | Path | None = None) -> list[dict[str, str]]:
    """The rows of a calibration CSV (default: the shipped :data:`CASES_CSV`), each with ``source_id``,
    ``framework`` and ``kind`` filled in (inferred for the older format)."""
    with open(CASES_CSV if path is None else path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        metric = row.get("metric", "").lower()
        if not row.get("kind"):
            row["kind"] = "device" if "nvidia-smi" in metric else "allocated" if "llm.c" in metric else "reserved"
        if not row.get("framework"):
            row["framework"] = "llm.c" if "llm.c" in metric else "hf-trainer"
        if not row.get("source_id"):
            row["source_id"] = row.get("source", "").split(":")[0].split(" PR")[0].strip() or row["case"]
    return rows


def _int(row: dict[str, str], key: str, default: int) -> int:
    value = row.get(key, "")
    try:
        return int(value) if value not in ("", None) else default
    except ValueError:
        raise ConfigError(f"calibration case {row.get('case')}: {key} must be an integer, got {value!r}") from None


def calibration_case(row: dict[str, str]) -> tuple[ModelSpec, dict[str, Any], dict[str, Any]]:
    """(model, job keywords, extended options) of one calibration row."""
    case = row.get("case", "?")
    arch = row.get("arch", "decoder") or "decoder"
    seq = int(row["seq_len"])
    shape: dict[str, Any] = {}
    for key in ("kv_heads", "ffn_hidden"):
        if row.get(key):
            shape[key] = _int(row, key, 0)
    if row.get("mlp"):
        shape["mlp"] = row["mlp"]
    if row.get("tied"):
        shape["tied_embeddings"] = bool(_int(row, "tied", 1))
    if row.get("positions"):
        shape["positions"] = "rotary" if row["positions"] == "rotary" else "learned"
    model = custom_model(
        name=row["model"], vocab_size=int(row["vocab"]), hidden=int(row["hidden"]), layers=int(row["layers"]),
        heads=int(row["heads"]), arch=arch, max_seq_len=max(seq, 512 if arch == "encoder" else 1024), **shape,
    )
    mb, ga, dp, tp = (_int(row, k, 1) for k in ("micro_batch", "grad_accum", "dp", "tp"))
    job = {"batch_size": mb * ga * dp, "seq_len": seq, "dp": dp, "tp": tp}
    prec = row["precision"].strip().lower()
    if prec not in PRECISION_MAP:
        raise ConfigError(f"calibration case {case}: unknown precision {row['precision']!r}")
    kind = row.get("kind") or "reserved"
    if kind not in KINDS:
        raise ConfigError(f"calibration case {case}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    framework = row.get("framework") or "hf-trainer"
    if framework not in FRAMEWORKS:
        raise ConfigError(f"calibration case {case}: unknown framework {framework!r} (known: {', '.join(FRAMEWORKS)})")
    try:
        opts: dict[str, Any] = framework_options(framework, PRECISION_MAP[prec])
    except ConfigError as e:
        raise ConfigError(f"calibration case {case}: {e}") from None
    opts.update({
        "precision": PRECISION_MAP[prec], "micro_batch": mb, "recompute": row.get("recompute", "none") or "none",
        "zero_stage": _int(row, "zero_stage", int(opts.get("zero_stage", 0))), "pp": _int(row, "pp", 1), "kind": kind,
    })
    if row.get("attention"):
        opts["attention"] = row["attention"]
    if row.get("dropout", "") not in ("", None):  # the model's own dropout (empty: the framework's default)
        if row["dropout"] not in ("0", "1"):
            raise ConfigError(f"calibration case {case}: dropout must be 0, 1 or empty, got {row['dropout']!r}")
        opts["dropout"] = row["dropout"] == "1"
    if kind == "device":
        m = re.search(r"(\d+(?:\.\d+)?)\s*mib cuda context", row.get("metric", "").lower())
        context = row.get("context_mib") or (m.group(1) if m else "")
        if context:
            opts["context_bytes"] = float(context) * MiB
    if arch == "encoder":
        opts["vocab_logits"] = False  # HF docs train a sequence classifier: no vocabulary logits
    return model, job, opts


def predict_case(row: dict[str, str], **override: Any) -> dict[str, Any]:
    """Both methods' predictions (MiB) of one case; ``override`` replaces extended options."""
    model, job, opts = calibration_case(row)
    opts.update(override)
    ext = estimate_memory(model, method="extended", **job, **opts)
    fr = estimate_memory(model, method="frenzy", **job)
    return {"extended": ext.total_bytes / MiB, "frenzy": fr.total_bytes / MiB, "ext": ext}


# ------------------------------------------------------------------------------------------ calibration
def case_terms(row: dict[str, str]) -> tuple[float, float, float]:
    """(fixed, dynamic, fragmentable) MiB of one case, with no fragmentation and no framework constant:
    the prediction with constants ``(f, c)`` is ``fixed + dynamic + f * fragmentable + c``.

    ``fixed``: model states (+ the CUDA context for ``kind="device"``); ``dynamic``: activations, backward
    working set and logits; ``fragmentable``: ``dynamic`` where the measured kind includes the allocator's
    fragmentation (``reserved``, ``device``), else 0."""
    e = predict_case(row, fragmentation=0.0, framework_bytes=0.0)["ext"]
    fixed = (e.static_bytes + e.breakdown["cuda_context"]) / MiB
    dynamic = e.activation_bytes / MiB
    return fixed, dynamic, (dynamic if row["kind"] != "allocated" else 0.0)


def fit_constants(
    rows: Sequence[dict[str, str]], *, fit_framework: bool = True, framework_bytes: float = FRAMEWORK_BYTES
) -> tuple[float, float]:
    """Fragmentation ``f >= 0`` and framework constant ``c >= 0`` (bytes) that minimise the squared relative
    errors ``(fixed + dynamic + f * fragmentable + c - measured) / measured`` over ``rows`` (non-negative
    least squares, :func:`scipy.optimize.nnls`). ``fit_framework=False`` keeps ``c = framework_bytes`` and
    fits ``f`` alone. A constant no row can determine (no reserved or device row for ``f``) is 0."""
    from scipy.optimize import nnls

    if not rows:
        raise ConfigError("fit_constants needs at least one case")
    a, y = [], []
    c_fixed = 0.0 if fit_framework else framework_bytes / MiB
    for row in rows:
        meas = float(row["measured_mib"])
        fixed, dynamic, frag = case_terms(row)
        a.append([frag / meas, 1.0 / meas] if fit_framework else [frag / meas])
        y.append((meas - fixed - dynamic - c_fixed) / meas)
    sol, _ = nnls(np.array(a), np.array(y))
    return float(sol[0]), (float(sol[1]) * MiB if fit_framework else float(framework_bytes))


def predict_with(row: dict[str, str], fragmentation: float, framework_bytes: float) -> float:
    """The extended prediction (MiB) of one case with the given constants."""
    fixed, dynamic, frag = case_terms(row)
    return fixed + dynamic + fragmentation * frag + framework_bytes / MiB


def leave_one_source_out(
    rows: Sequence[dict[str, str]],
    fit: Callable[[Sequence[dict[str, str]]], tuple[float, float]] = fit_constants,
    predict: Callable[[dict[str, str], float, float], float] = predict_with,
    fit_frameworks: Collection[str] | None = VALIDATED_FRAMEWORKS,
) -> list[dict[str, Any]]:
    """Leave-one-source-out validation: for each ``source_id``, fit on the other sources' rows and predict
    the held-out rows. One record per row: ``case, source_id, measured_mib, predicted_mib, err`` (signed,
    ``(pred - meas) / meas``), the constants used (``fragmentation``, ``framework_mib``) and the row's
    :data:`FEATURES`. Needs at least two sources.

    Only rows of ``fit_frameworks`` (default :data:`~frenzy_env.world.memory.estimator.VALIDATED_FRAMEWORKS`; None:
    every row; a row naming no framework counts) enter a fit: the cases of a framework whose mapping misses its
    measurements (DeepSpeed's) are predicted like any held-out source but would bend the shared constants
    towards that mapping's error if they were fitted on."""
    sources = sorted({r["source_id"] for r in rows})
    if len(sources) < 2:
        raise ConfigError(f"leave-one-source-out needs at least two sources, got {sources}")

    def fits(r: dict[str, str]) -> bool:
        return fit_frameworks is None or "framework" not in r or r["framework"] in fit_frameworks

    out = []
    for held in sources:
        f, c = fit([r for r in rows if r["source_id"] != held and fits(r)])
        for r in rows:
            if r["source_id"] != held:
                continue
            meas = float(r["measured_mib"])
            pred = predict(r, f, c)
            rec = {"case": r["case"], "source_id": held, "measured_mib": meas, "predicted_mib": pred,
                   "err": (pred - meas) / meas, "fragmentation": f, "framework_mib": c / MiB}
            rec.update({k: r.get(k, "") for k in FEATURES})
            out.append(rec)
    return out


def error_table(records: Iterable[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Signed errors of ``records`` grouped by the column ``by``: ``n``, ``mean``, ``min`` (most under),
    ``max`` (most over) and ``worst`` (largest magnitude, signed) per group, groups sorted by name."""
    groups: dict[str, list[float]] = {}
    for r in records:
        groups.setdefault(str(r[by]), []).append(float(r["err"]))
    table = []
    for key in sorted(groups):
        e = groups[key]
        table.append({by: key, "n": len(e), "mean": float(np.mean(e)), "min": min(e), "max": max(e),
                      "worst": max(e, key=abs)})
    return table


def loso_summary(rows: Sequence[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """The leave-one-source-out table of ``docs/world.md`` ("Memory across frameworks"): one record per
    held-out source (default rows: the shipped cases), from :func:`leave_one_source_out` and
    :func:`error_table`: ``source_id``, ``framework`` (the source's frameworks, comma-joined), ``kind``,
    ``n``, the constants fitted on the other sources (``fragmentation``, ``framework_mib``) and the signed
    held-out errors ``mean``, ``min`` (most under) and ``max`` (most over)."""
    recs = leave_one_source_out(load_cases() if rows is None else rows)
    out = []
    for t in error_table(recs, "source_id"):
        mine = [r for r in recs if r["source_id"] == t["source_id"]]
        out.append({**t, "framework": ",".join(sorted({str(r["framework"]) for r in mine})),
                    "kind": ",".join(sorted({str(r["kind"]) for r in mine})),
                    "fragmentation": mine[0]["fragmentation"], "framework_mib": mine[0]["framework_mib"]})
    return out


#: the shipped constants (:mod:`frenzy_env.world.memory.estimator`), for comparison with a fit
SHIPPED_CONSTANTS = (FRAGMENTATION, FRAMEWORK_BYTES)
