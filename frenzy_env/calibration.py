"""Measured peak-memory cases (calibration CSV format) mapped to MARP estimator inputs.

One row of a calibration CSV (``case, model, arch, vocab, hidden, layers, heads, seq_len, micro_batch,
grad_accum, dp, tp, precision, recompute, zero_stage, metric, measured_mib, ...``) becomes a model, the job
keywords of :func:`frenzy_env.memory.estimate_memory` and the "extended" options that match what the
``metric`` column says was measured (nvidia-smi includes the CUDA context; llm.c's static allocation has
none, keeps bf16 gradients and uses flash attention). Used by ``scripts/validate_memory.py`` and by
``frenzy reproduce``.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from frenzy_env.errors import ConfigError
from frenzy_env.memory import MiB, estimate_memory
from frenzy_env.models import ModelSpec, custom_model

# the cases the extended estimator's FRAGMENTATION and FRAMEWORK_BYTES were fitted on
FITTED_CASES = ("A1", "A2")
PRECISION_MAP = {"fp32": "fp32", "amp-fp16": "amp", "amp-bf16": "amp", "amp": "amp", "bf16": "bf16", "fp16": "fp16"}


def load_cases(path: str | Path) -> list[dict[str, str]]:
    """The rows of a calibration CSV."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def calibration_case(row: dict[str, str]) -> tuple[ModelSpec, dict[str, Any], dict[str, Any]]:
    """(model, job keywords, extended options) of one calibration row."""
    arch = row.get("arch", "decoder") or "decoder"
    seq = int(row["seq_len"])
    model = custom_model(
        name=row["model"], vocab_size=int(row["vocab"]), hidden=int(row["hidden"]), layers=int(row["layers"]),
        heads=int(row["heads"]), arch=arch, max_seq_len=max(seq, 512 if arch == "encoder" else 1024),
    )
    mb, ga, dp, tp = (int(row[k]) for k in ("micro_batch", "grad_accum", "dp", "tp"))
    job = {"batch_size": mb * ga * dp, "seq_len": seq, "dp": dp, "tp": tp}
    prec = row["precision"].strip().lower()
    if prec not in PRECISION_MAP:
        raise ConfigError(f"calibration case {row['case']}: unknown precision {row['precision']!r}")
    opts: dict[str, Any] = {
        "precision": PRECISION_MAP[prec], "micro_batch": mb, "recompute": row.get("recompute", "none") or "none",
        "zero_stage": int(row.get("zero_stage", 0) or 0),
    }
    metric = row["metric"].lower()
    if "nvidia-smi" in metric:
        opts["include_context"] = True
        m = re.search(r"(\d+(?:\.\d+)?)\s*mib cuda context", metric)
        if m:
            opts["context_bytes"] = float(m.group(1)) * MiB
    elif "llm.c" in metric:
        opts.update(include_context=False, grad_bytes=2.0, dropout=False, logits_bytes=2.0, attention="flash")
    else:  # PyTorch max reserved / allocated: no context
        opts["include_context"] = False
    if arch == "encoder":
        opts["vocab_logits"] = False
    return model, job, opts


def predict_case(row: dict[str, str], **override: Any) -> dict[str, Any]:
    """Both methods' predictions (MiB) of one case; ``override`` replaces extended options."""
    model, job, opts = calibration_case(row)
    opts.update(override)
    ext = estimate_memory(model, method="extended", **job, **opts)
    fr = estimate_memory(model, method="frenzy", **job)
    return {"extended": ext.total_bytes / MiB, "frenzy": fr.total_bytes / MiB, "ext": ext}
