"""How far from optimal: lower bounds on each held-out workload's average JCT, and every policy's gap to them.

    python research/scripts/jct_bounds.py --config research/results/ppo/configs/ppo_gate3.json --split test \\
        --episodes research/results/ppo/episodes.csv research/results/ppo/v10/episodes.csv \\
        --out research/results/ppo/bounds

Builds each workload of the config's ``--split`` (``agents.ppo.test_workloads`` or ``validation_workloads``:
the same jobs ``research/scripts/evaluate_ppo.py --test-split`` and ``research/scripts/validate_knob.py`` play),
computes the isolated, fluid and LP lower bounds of :mod:`frenzy_env.evaluation.bounds` on its average JCT and appends
them to
``bounds.csv`` (a workload already there is not computed again). With ``--episodes`` (csvs with ``workload``,
``policy`` and ``avg_jct_h`` columns, such as ``evaluate_ppo.py``'s ``episodes.csv``), writes ``gaps.md``: each
policy's average JCT over the best bound, the mean over workloads (trace windows and synthetic seeds apart),
beside its ratio to ``--reference``. A policy that plays a workload several times counts its mean.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, required=True, help="a PPO TrainConfig json, or a knob run's config.json")
    ap.add_argument("--split", choices=("test", "validation"), default="test")
    ap.add_argument("--episodes", type=Path, nargs="*", default=[], help="episode csvs to score against the bounds")
    ap.add_argument("--reference", default="sia_srpt", help="policy the gap table also divides by (sia_srpt)")
    ap.add_argument("--step-s", type=float, default=None, help="the LP's interval, seconds (default: automatic)")
    ap.add_argument("--plans", action="store_true",
                    help="the tighter, much slower LP with one variable per plan "
                    "(frenzy_env.evaluation.bounds.lp_bound)")
    ap.add_argument("--out", type=Path, required=True, help="folder of bounds.csv and gaps.md")
    args = ap.parse_args()

    import pandas as pd
    from split_tables import config_split, fill_table

    from frenzy_env.evaluation.bounds import jct_lower_bound

    cfg, items = config_split(args.config, args.split)
    table = fill_table(args.out / "bounds.csv", cfg, items,
                       lambda sim, _seed: jct_lower_bound(sim, step_s=args.step_s, plans=args.plans).as_row(), "bounds")
    if args.episodes:
        md = gap_table(table, pd.concat([pd.read_csv(p) for p in args.episodes]), args.reference)
        (args.out / "gaps.md").write_text(md)
        print(md)


def gap_table(bounds, episodes, reference: str) -> str:
    """Markdown: per policy, the mean over workloads of avg JCT / bound (all, trace windows, synthetic) and
    of avg JCT / the reference's, over the workloads both the bounds and the policy have."""
    bound = bounds.set_index("workload").jct_bound_h
    jct = episodes[episodes.workload.isin(bound.index)].groupby(["policy", "workload"]).avg_jct_h.mean()
    ref = jct.loc[reference] if reference in jct.index.get_level_values(0) else None
    lines = [f"| policy | workloads | avg JCT / bound | trace windows | synthetic | x {reference} |",
             "|---|---|---|---|---|---|"]
    rows = []
    for policy in jct.index.get_level_values(0).unique():
        r = jct.loc[policy] / bound.loc[jct.loc[policy].index]
        syn = r.index.str.startswith("synthetic")
        vs = (jct.loc[policy] / ref.loc[jct.loc[policy].index]).mean() if ref is not None else float("nan")
        rows.append((r.mean(), f"| {policy} | {r.size} | {r.mean():.2f} | {r[~syn].mean():.2f} | {r[syn].mean():.2f} "
                               f"| {vs:.3f} |"))
    lines += [line for _, line in sorted(rows)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
