"""Score saved PPO models on a run's validation split, with many sampled plays: pick a model, draw a curve.

Usage: ``python research/scripts/validate_models.py --run runs/ppo_v4c --samples 8 [--reference srpt_est] [--out DIR]
[--decisions N,N,...] [--reference-cache FILE.json] NAME=MODEL.zip ...``

Every model plays each validation workload of the run's ``config.json`` (``agents.ppo.validation_workloads``:
synthetic seeds 500, ... and fixed windows of the validation clusters, never the test split) ``--samples``
times with sampled actions, on the same draws for every model (common random numbers), next to the run's
reference (``ppo.reference``, or ``--reference``). A model's score is the mean over workloads and draws of
``model / reference`` average JCT (lower is better), with the spread of the per-draw means. The trainer's own
validation (2 draws) is noisy at the level of a few percent; this is the tool to choose among checkpoints or
runs.

Writes ``validation.csv`` (name, decisions, score, per-draw scores, synthetic and trace-window scores) and,
with ``--decisions`` (the training decisions behind each model, in order), ``validation_curve.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="NAME=MODEL.zip")
    ap.add_argument("--run", type=Path, required=True, help="training folder whose config.json gives the split")
    ap.add_argument("--samples", type=int, default=8, help="sampled plays of each workload (default 8)")
    ap.add_argument("--decisions", default=None, metavar="N,N,...",
                    help="training decisions behind each model, comma-separated in the same order: draws the curve")
    ap.add_argument("--out", type=Path, default=None, help="folder for validation.csv (default: print only)")
    ap.add_argument("--reference", default=None,
                    help="baseline the scores are ratios to (default: the run's ppo.reference)")
    ap.add_argument("--reference-cache", type=Path, default=None, metavar="FILE.json",
                    help="keep the reference's results here and reuse them (elastic Sia: 20 minutes per split)")
    args = ap.parse_args()
    if args.samples < 1:
        ap.error(f"--samples must be >= 1, got {args.samples}")
    named = []
    for item in args.models:
        name, eq, path = item.partition("=")
        if not eq or not Path(path).is_file():
            ap.error(f"expected NAME=MODEL.zip of an existing file, got {item!r}")
        named.append((name, Path(path)))
    if args.reference is not None:
        from baselines import POLICIES

        if args.reference not in POLICIES:
            ap.error(f"--reference: unknown baseline {args.reference!r}; known: {', '.join(sorted(POLICIES))}")
    if args.decisions is not None:
        try:
            args.decisions = [float(x) for x in args.decisions.split(",")]
        except ValueError:
            ap.error(f"--decisions: expected comma-separated numbers, got {args.decisions!r}")
        if len(args.decisions) != len(named):
            ap.error(f"--decisions: {len(args.decisions)} values for {len(named)} models")

    import torch as th

    from agents.ppo import TrainConfig, load_policy
    from agents.ppo.training import Validator

    th.set_num_threads(1)
    cfg = TrainConfig.from_dict(json.loads((args.run / "config.json").read_text()))
    if args.reference is not None:
        cfg = dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, reference=args.reference))
    validator = Validator(dataclasses.replace(cfg, validation_samples=args.samples), args.reference_cache)
    synthetic = np.array([name.startswith("synthetic") for name, _, _ in validator.items])
    rows = []
    for i, (name, path) in enumerate(named):
        policy = load_policy(validator.envs[0], path).model.policy
        ratio = validator.run(policy) / validator.ref_jct  # (samples, workloads)
        per_draw = ratio.mean(axis=1)
        rows.append({
            "name": name, "decisions": args.decisions[i] if args.decisions else np.nan, "score": ratio.mean(),
            "draw_sd": per_draw.std(ddof=1) if len(per_draw) > 1 else 0.0,
            "synthetic": ratio[:, synthetic].mean(), "trace_windows": ratio[:, ~synthetic].mean(),
            "per_draw": " ".join(f"{x:.4f}" for x in per_draw), "path": str(path),
        })
        print(f"{name}: {ratio.mean():.4f} x {validator.reference} (per draw {rows[-1]['per_draw']}; synthetic "
              f"{rows[-1]['synthetic']:.4f}, trace windows {rows[-1]['trace_windows']:.4f})", flush=True)
    if args.out is not None:
        import pandas as pd

        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(args.out / "validation.csv", index=False)
        if args.decisions:
            _plot(rows, args.out / "validation_curve.png", validator.reference, args.samples, len(synthetic))
        print(f"wrote {args.out / 'validation.csv'}")


def _plot(rows: list[dict], path: Path, reference: str, samples: int, workloads: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = np.array([r["decisions"] for r in rows]) / 1e6
    y = np.array([r["score"] for r in rows])
    err = np.array([r["draw_sd"] for r in rows]) / np.sqrt(samples)
    ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label="PPO (sampled actions)")
    ax.axhline(1.0, ls="--", color="grey", label=f"{reference} (same workloads)")
    for r, xi, yi in zip(rows, x, y):
        ax.annotate(r["name"], (xi, yi), textcoords="offset points", xytext=(4, 6), fontsize=7)
    ax.set_xlabel("training decisions (millions)")
    ax.set_ylabel(f"validation avg JCT / {reference}")
    ax.set_title(f"{workloads} validation workloads x {samples} draws", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
