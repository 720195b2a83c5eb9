"""Predicted vs measured peak GPU memory, both MARP methods side by side, and the calibration's validation.

1. Published measurements: every row of a calibration-format CSV (default: the shipped
   ``frenzy_env/data/memory_cases.csv``, 27 cases from 6 independent sources; the shared
   ``memory/calibration.csv`` and older files of its narrower format work too). For each case it prints
   the measured MiB, the "frenzy" and "extended" predictions, the signed relative error
   ``(pred - meas) / meas`` and the accuracy ``1 - |pred - meas| / meas``, and whether the case was used to fit
   the extended estimator's constants. ``--fit`` re-derives those constants from the fitted cases.
   Each case is predicted as the KIND of number its source measured (``kind`` column: allocated, reserved
   or device total; see :data:`frenzy_env.world.memory.estimator.KINDS`).
1b. Leave-one-source-out validation (``--loso``, on by default when the CSV has two or more sources): for
   each source, the constants are fitted on the other sources' cases of validated frameworks
   (:func:`frenzy_env.world.memory.calibration.fit_constants`; the DeepSpeed cases are predicted, never fitted on)
   and the held-out source is predicted; printed per case, per source and per framework feature (framework,
   kind, ZeRO stage, recomputation, attention kernel, tensor parallelism), signed (+ over, - under), for
   two procedures: fragmentation and framework constant both fitted, and fragmentation alone with the
   shipped framework constant.
2. Own measurements, where CUDA is available: real training steps of GPT-2-shaped models built with torch
   from random weights (nothing is downloaded) over a grid of batch, sequence, heads and recomputation;
   ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` against the prediction of the same kind
   (``kind="allocated"`` / ``kind="reserved"``: the torch counters do not include the CUDA context). On a
   CPU-only machine this part is skipped, and the script says so.

How each CSV row maps to estimator options: :func:`frenzy_env.world.memory.calibration.calibration_case` (the ``kind``
column, or for older files the ``metric`` column; the ``framework`` column through
:data:`frenzy_env.world.memory.calibration.FRAMEWORKS`; ZeRO stage, recomputation and attention from their columns).

Usage: ``python scripts/validate_memory.py [CSV] [--fit] [--loso | --no-loso] [--no-cuda] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

from frenzy_env.paths import atomic_write_json
from frenzy_env.world.memory import calibration
from frenzy_env.world.memory.calibration import (
    CASES_CSV,
    FEATURES,
    FITTED_CASES,
    FRAMEWORKS,
    calibration_case,
    error_table,
    leave_one_source_out,
    load_cases,
    predict_case,
)
from frenzy_env.world.memory.estimator import MiB, estimate_memory
from frenzy_env.world.models import custom_model

DEFAULT_CSV = CASES_CSV
# the case mapping lives in the package (frenzy reproduce uses it too)
row_to_case = calibration_case
load_rows = load_cases
predict = predict_case


def fit_constants(rows: list[dict[str, str]], cases=FITTED_CASES) -> tuple[float, float]:
    """Least-squares (exact for two cases) fragmentation f and framework constant c (MiB):
    measured - context - static = (1 + f) * dynamic + c."""
    a, y = [], []
    for row in rows:
        if row["case"] not in cases:
            continue
        e = predict(row, fragmentation=0.0, framework_bytes=0.0)["ext"]
        dyn = e.activation_bytes / MiB
        fixed = (e.static_bytes + e.breakdown["cuda_context"]) / MiB
        a.append([dyn, 1.0])
        y.append(float(row["measured_mib"]) - fixed - dyn)
    sol, *_ = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)
    return float(sol[0]), float(sol[1])


def validate_csv(path: Path) -> list[dict[str, object]]:
    rows = load_rows(path)
    out = []
    for row in rows:
        meas = float(row["measured_mib"])
        pred = predict(row)
        rec: dict[str, object] = {
            "case": row["case"],
            "model": row["model"],
            "metric": row["metric"],
            "kind": row["kind"],
            "source_id": row["source_id"],
            "measured_mib": meas,
            "fitted": row["case"] in FITTED_CASES,
        }
        for method in ("frenzy", "extended"):
            p = float(pred[method])
            rec[f"{method}_mib"] = p
            rec[f"{method}_err"] = (p - meas) / meas
            rec[f"{method}_acc"] = 1.0 - abs(p - meas) / meas
        out.append(rec)
    return out


def print_csv_report(recs: list[dict[str, object]]) -> None:
    hdr = (
        f"{'case':<5}{'source':<12}{'kind':<10}{'measured':>10}{'frenzy':>10}{'err':>8}{'acc':>7}"
        f"{'extended':>10}{'err':>8}{'acc':>7}  fit"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in recs:
        print(
            f"{r['case']:<5}{str(r['source_id'])[:11]:<12}{str(r['kind']):<10}{r['measured_mib']:>10.0f}"
            f"{r['frenzy_mib']:>10.0f}{r['frenzy_err']:>+8.1%}{r['frenzy_acc']:>7.1%}"
            f"{r['extended_mib']:>10.0f}{r['extended_err']:>+8.1%}{r['extended_acc']:>7.1%}"
            f"  {'fit' if r['fitted'] else ''}"
        )
    held = [r for r in recs if not r["fitted"]]
    if held:
        worst = max(abs(float(r["extended_err"])) for r in held)  # type: ignore[arg-type]
        under = min(float(r["extended_err"]) for r in recs)  # type: ignore[arg-type]
        mean_fr = np.mean([float(r["frenzy_acc"]) for r in recs])  # type: ignore[arg-type]
        mean_ex = np.mean([float(r["extended_acc"]) for r in recs])  # type: ignore[arg-type]
        print(
            f"extended: worst |error| on held-out cases {worst:.1%} (target <= 10%); "
            f"most negative error on any case {under:+.1%} (target >= -5%)"
        )
        print(f"mean accuracy: frenzy {mean_fr:.1%}, extended {mean_ex:.1%}")


# ------------------------------------------------------------------------------ leave one source out
PROCEDURES = {
    "fragmentation + framework constant": calibration.fit_constants,
    "fragmentation only (shipped framework constant)": partial(calibration.fit_constants, fit_framework=False),
}


def _fmt_table(table: list[dict[str, object]], by: str) -> list[str]:
    lines = [f"  {by:<18}{'n':>3}{'mean':>8}{'most under':>12}{'most over':>11}"]
    for t in table:
        lines.append(
            f"  {str(t[by])[:17]:<18}{t['n']:>3}{float(t['mean']):>+8.1%}"
            f"{float(t['min']):>+12.1%}{float(t['max']):>+11.1%}"
        )
    return lines


def loso_report(rows: list[dict[str, str]]) -> dict[str, list[dict[str, object]]]:
    """Print the leave-one-source-out tables of every procedure; returns the per-case records."""
    out = {}
    for name, fit in PROCEDURES.items():
        recs = leave_one_source_out(rows, fit=fit)
        out[name] = recs
        print(f"== leave-one-source-out, fitting {name}: signed error (pred - meas) / meas of each held-out case")
        consts = {r["source_id"]: (r["fragmentation"], r["framework_mib"]) for r in recs}
        for src, (f, c) in consts.items():
            cases = " ".join(f"{r['case']} {float(r['err']):+.1%}" for r in recs if r["source_id"] == src)
            print(f"  held out {src:<12} (fit on the rest: f={f:.3f}, c={c:.1f} MiB): {cases}")
        for by in ("source_id", *FEATURES):
            print("\n".join(_fmt_table(error_table(recs, by), by)))
        worst = max(abs(float(r["err"])) for r in recs)
        under = min(float(r["err"]) for r in recs)
        print(f"  worst |error| {worst:.1%} (target <= 10%); most under {under:+.1%} (target >= -5%)")
    untested = [f for f in FRAMEWORKS if f not in {r.get("framework") for r in rows}]
    if untested:
        print(f"  frameworks with no published case (unvalidated): {', '.join(untested)}")
    return out


# ------------------------------------------------------------------------------------ own CUDA runs
def _build_gpt2(torch, vocab: int, hidden: int, layers: int, heads: int, seq: int, recompute: str):
    """A GPT-2-shaped torch model from random weights (tied head, learned positions, dropout 0.1)."""
    nn = torch.nn
    F = torch.nn.functional
    from torch.utils.checkpoint import checkpoint

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.drop = nn.Dropout(0.1)
            self.resid_drop = nn.Dropout(0.1)
            mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
            self.register_buffer("mask", mask, persistent=False)

        def core(self, q, k, v):
            att = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
            att = att.masked_fill(~self.mask[: q.shape[2], : q.shape[2]], float("-inf"))
            att = self.drop(F.softmax(att, dim=-1))
            return att @ v

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).split(hidden, dim=2)
            q, k, v = (z.view(b, s, heads, hidden // heads).transpose(1, 2) for z in (q, k, v))
            if recompute == "selective":
                y = checkpoint(self.core, q, k, v, use_reentrant=False)
            else:
                y = self.core(q, k, v)
            y = y.transpose(1, 2).contiguous().view(b, s, hidden)
            return self.resid_drop(self.proj(y))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(hidden)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.out = nn.Linear(4 * hidden, hidden)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(seq, hidden)
            self.drop = nn.Dropout(0.1)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for blk in self.blocks:
                x = checkpoint(blk, x, use_reentrant=False) if recompute == "full" else blk(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, vocab), targets.view(-1))

    return GPT()


def cuda_grid(quick: bool) -> list[dict[str, object]]:
    grid = []
    shapes = [(768, 12, 12), (1024, 24, 16)] if not quick else [(768, 12, 12)]
    for hidden, layers, heads in shapes:
        for batch in (4, 8):
            for seq in (512, 1024):
                for recompute in ("none", "selective", "full"):
                    for precision in ("fp32", "amp"):
                        grid.append(
                            dict(
                                hidden=hidden,
                                layers=layers,
                                heads=heads,
                                batch=batch,
                                seq=seq,
                                recompute=recompute,
                                precision=precision,
                            )
                        )
    grid += [
        dict(hidden=768, layers=12, heads=h, batch=8, seq=1024, recompute="none", precision="amp")
        for h in (6, 24)
    ]
    return grid


def measure_cuda(quick: bool = False, steps: int = 3) -> list[dict[str, object]] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    vocab = 50257
    out = []
    for cfg in cuda_grid(quick):
        torch.cuda.empty_cache()
        torch.manual_seed(0)
        model = _build_gpt2(
            torch, vocab, cfg["hidden"], cfg["layers"], cfg["heads"], cfg["seq"], cfg["recompute"]
        ).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        idx = torch.randint(0, vocab, (cfg["batch"], cfg["seq"]), device="cuda")
        torch.cuda.reset_peak_memory_stats()
        try:
            for _ in range(steps):
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg["precision"] == "amp"):
                    loss = model(idx, idx)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=False)
            torch.cuda.synchronize()
            alloc = torch.cuda.max_memory_allocated() / MiB
            reserved = torch.cuda.max_memory_reserved() / MiB
        except torch.cuda.OutOfMemoryError:
            alloc = reserved = float("nan")
        spec = custom_model(
            name="gpt2-shaped",
            vocab_size=vocab,
            hidden=cfg["hidden"],
            layers=cfg["layers"],
            heads=cfg["heads"],
            max_seq_len=cfg["seq"],
        )
        ext, ext_alloc = (
            estimate_memory(
                spec, batch_size=cfg["batch"], seq_len=cfg["seq"], precision=cfg["precision"],
                recompute=cfg["recompute"], kind=kind,
            ).total_bytes
            / MiB
            for kind in ("reserved", "allocated")
        )
        fr = (
            estimate_memory(spec, batch_size=cfg["batch"], seq_len=cfg["seq"], method="frenzy").total_bytes
            / MiB
        )
        out.append(
            {
                **cfg,
                "allocated_mib": alloc,
                "reserved_mib": reserved,
                "extended_mib": ext,
                "extended_allocated_mib": ext_alloc,
                "frenzy_mib": fr,
                "extended_err": (ext - reserved) / reserved,
                "extended_allocated_err": (ext_alloc - alloc) / alloc,
                "frenzy_err": (fr - reserved) / reserved,
            }
        )
        del model, opt, idx
    return out


def print_cuda_report(recs: list[dict[str, object]]) -> None:
    print(
        f"{'h':>5}{'l':>4}{'a':>4}{'B':>4}{'s':>6} {'recomp':<10}{'prec':<6}{'alloc':>8}{'reserved':>9}"
        f"{'frenzy':>8}{'err':>8}{'extended':>9}{'err':>8}{'ext alloc':>10}{'err':>8}"
    )
    for r in recs:
        print(
            f"{r['hidden']:>5}{r['layers']:>4}{r['heads']:>4}{r['batch']:>4}{r['seq']:>6} {r['recompute']:<10}"
            f"{r['precision']:<6}{r['allocated_mib']:>8.0f}{r['reserved_mib']:>9.0f}{r['frenzy_mib']:>8.0f}"
            f"{r['frenzy_err']:>+8.1%}{r['extended_mib']:>9.0f}{r['extended_err']:>+8.1%}"
            f"{r['extended_allocated_mib']:>10.0f}{r['extended_allocated_err']:>+8.1%}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV, help="calibration-format CSV")
    ap.add_argument(
        "--fit", action="store_true", help="re-derive the fitted constants from " + ",".join(FITTED_CASES)
    )
    ap.add_argument(
        "--loso", action=argparse.BooleanOptionalAction, default=None,
        help="leave-one-source-out validation (default: on when the CSV has two or more sources)",
    )
    ap.add_argument("--no-cuda", action="store_true", help="skip the torch measurements")
    ap.add_argument("--quick", action="store_true", help="smaller CUDA grid")
    ap.add_argument("--json", type=Path, help="write all results as JSON here")
    args = ap.parse_args(argv)

    results: dict[str, object] = {}
    if args.csv is not None and args.csv.exists():
        rows = load_rows(args.csv)
        if args.fit:
            f, c = fit_constants(rows)
            print(
                f"fitted on {', '.join(FITTED_CASES)}: FRAGMENTATION = {f:.4f}, FRAMEWORK_BYTES = {c:.1f} MiB"
            )
        print(f"== published measurements: {args.csv}")
        recs = validate_csv(args.csv)
        print_csv_report(recs)
        results["calibration"] = recs
        n_sources = len({r["source_id"] for r in rows})
        if args.loso or (args.loso is None and n_sources >= 2):
            f, c = calibration.fit_constants(rows)
            print(f"fit on all {len(rows)} cases ({n_sources} sources): fragmentation {f:.4f}, "
                  f"framework {c / MiB:.1f} MiB")
            results["loso"] = loso_report(rows)
    else:
        where = args.csv if args.csv is not None else "memory/calibration.csv of the shared data folder"
        print(f"== published measurements: {where} not found, skipped")

    if args.no_cuda:
        print("== own CUDA measurements: skipped (--no-cuda)")
    else:
        cuda = measure_cuda(quick=args.quick)
        if cuda is None:
            print("== own CUDA measurements: skipped (no CUDA device on this machine)")
        else:
            print(
                "== own CUDA measurements (torch, random-weight GPT-2-shaped models; errors vs max reserved, allocated)"
            )
            print_cuda_report(cuda)
            results["cuda"] = cuda
    if args.json:
        atomic_write_json(args.json, results, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
