"""The training curve of a knob run with several plays per workload (``research.knob.rollouts``), on its own
training workloads: each play's average JCT over a fixed plan's on the same workload.

    python research/scripts/knob_plays_report.py --run runs/knob4 \\
        --plans research/results/ppo/v14/training_seeds_margin.csv \\
        --margin 0.2 --out research/results/ppo/v15

``--plans`` is a csv with ``seed``, ``margin`` and ``avg_jct_h`` columns (``research/scripts/planner_sweep.py``'s
training-pool rows: the plan with each fixed margin, one deterministic play per workload seed); plays of
workloads it lacks are left out. Prints, by fifths of the run's updates, the mean ratio over plays (with a
95% CI over the fifth's updates) and each level's share, and the ratio of each workload's first and last
visit (the mean of its K plays, paired per workload); ``--out`` also draws ``training_plays_knob.png``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def play_ratios(plays, plans, margin: float):
    """``plays`` (a run's ``plays.csv``) with a ``ratio`` column: its average JCT over the plan's with
    ``margin`` on the same workload; plays of workloads ``plans`` lacks are dropped."""
    plan = plans[np.isclose(plans.margin, margin)].set_index("seed").avg_jct_h
    if plan.empty:
        raise SystemExit(f"--plans has no rows with margin {margin:g} (margins: {sorted(set(plans.margin))})")
    out = plays[plays.workload.isin(plan.index)].copy()
    out["ratio"] = out.avg_jct_h / plan.loc[out.workload].to_numpy()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="the run folder (its plays.csv)")
    ap.add_argument("--plans", type=Path, required=True, help="csv of fixed plans: seed, margin, avg_jct_h")
    ap.add_argument("--margin", type=float, required=True, help="the plan to compare with (its margin)")
    ap.add_argument("--out", type=Path, help="folder for training_plays_knob.png")
    args = ap.parse_args(argv)
    import pandas as pd

    plays = play_ratios(pd.read_csv(args.run / "plays.csv"), pd.read_csv(args.plans), args.margin)
    if plays.empty:
        raise SystemExit("no play of a workload the plans csv has")
    levels = [c for c in plays.columns if c.startswith("level")]
    per_update = plays.groupby("update").agg(ratio=("ratio", "mean"), decisions=("decisions", "sum"),
                                             **{c: (c, "mean") for c in levels})
    per_update["cum_decisions"] = per_update.decisions.cumsum()
    fifths = [f for f in np.array_split(per_update.index.to_numpy(), 5) if len(f)]  # fewer when few updates
    print(f"{len(plays)} plays over {len(per_update)} updates, x the plan with margin {args.margin:g}:")
    for k, ups in enumerate(fifths, 1):
        r = per_update.loc[ups]
        ci = 1.96 * r.ratio.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
        print(f"  fifth {k} (updates {ups[0]}-{ups[-1]}): {r.ratio.mean():.4f} +- {ci:.4f}; levels "
              + " ".join(f"{r[c].mean():.2f}" for c in levels))
    visits = plays.groupby(["workload", "update"]).ratio.mean().reset_index()
    first = visits.groupby("workload").first().ratio
    last = visits.groupby("workload").last().ratio
    n_visits = visits.groupby("workload").size()
    keep = n_visits > 1
    if keep.any():
        d = (last[keep] / first[keep] - 1) * 100
        ci = 1.96 * d.std(ddof=1) / np.sqrt(keep.sum()) if keep.sum() > 1 else float("nan")
        print(f"last visit over first, paired over {keep.sum()} workloads: {d.mean():+.2f}% +- {ci:.2f}% "
              f"(first {first[keep].mean():.4f}, last {last[keep].mean():.4f} x the plan)")
    if args.out is not None:
        _plot(per_update, args.out / "training_plays_knob.png", args.margin)
    return 0


def _plot(per_update, path: Path, margin: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    x = per_update.cum_decisions.to_numpy()
    ax.plot(x, per_update.ratio, ".", color="grey", alpha=0.6, label="each update (its workload's plays)")
    w = min(10, len(per_update))
    ax.plot(x, per_update.ratio.rolling(w, min_periods=1).mean(), "-", label=f"mean of the last {w} updates")
    ax.axhline(1.0, color="black", lw=1, label=f"the plan, margin {margin:g}")
    ax.set_xlabel("training decisions")
    ax.set_ylabel("training average JCT / the plan's")
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
