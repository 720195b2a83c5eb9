"""How loose is the JCT lower bound? Schedules of the bounds' own relaxed world, beside the LP bound.

    python research/scripts/relaxed_gap.py --config research/results/ppo/configs/knob4.json \\
        --split validation --only synthetic --plans \\
        --episodes research/results/ppo/episodes.csv --out research/results/ppo/v17

The LP of :func:`frenzy_env.evaluation.bounds.lp_bound` relaxes a world (GPU pools without nodes, free restarts and
preemption, re-planning at every arrival and completion) whose optimum it bounds from below. Any schedule of
that world bounds the same optimum from above, so ``relaxed / lp`` caps the LP's slack there, and a policy of
the environment that is far above the relaxed schedules loses to what the environment adds (placement,
restarts, decision instants) or to its own choices. For each workload of the config's ``--split`` this
solves the LP (``--plans``: the plan-level program) and plays four allocation rules in the relaxed world
(:func:`frenzy_env.evaluation.bounds.relaxed_schedule`): SRPT list scheduling by seconds (``srpt``) and by GPU-seconds
(``work``), list scheduling in the order of the LP's completion times (``lp_order``), and the completion-rate
integer program of ``sia_srpt`` (``rate``: each job's speed over its remaining share, summed, maximised by
:func:`baselines.sia.solve_sia_milp` at every event). Appends a row per workload to ``relaxed.csv`` (a workload
already there is skipped) and, with ``--episodes``, writes ``relaxed_gaps.md``: each policy's average JCT
over the LP bound and over the best relaxed schedule. ``--search-s S`` adds a hindsight search over per-job
weights of the ``rate`` rule (:func:`weight_search`, S seconds per workload).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

RULES = ("srpt", "work", "lp_order", "rate")


def rate_allocation(inp, floor: float = 1e-3, weights=None):
    """The relaxed world's ``sia_srpt``: at each event the plan per ready job that maximises the summed
    completion rates (a job's speed on the plan over its remaining share, at least ``floor``; times its
    weight, a (J,) array, where ``weights`` is given), under the GPU types' capacities, solved as
    :func:`baselines.sia.solve_sia_milp` with ``p = 1``."""
    import numpy as np

    from baselines.sia import solve_sia_milp

    def allocate(t, ready, rem):
        rate = np.where(np.isfinite(inp.plan_exec[ready]), 1.0 / inp.plan_exec[ready], 0.0)
        scale = 1.0 if weights is None else weights[ready]
        rate = rate * (scale / np.maximum(rem[ready], floor))[:, None]
        return solve_sia_milp(rate / rate.max(), inp.plan_count, inp.plan_type, inp.capacity, p=1.0)

    return allocate


def weight_search(inp, seconds: float, seed: int = 0, subset: int = 8, sigma: float = 0.7):
    """Hindsight local search over per-job weights of :func:`rate_allocation`: from all ones, multiply the
    weights of ``subset`` random jobs by ``exp(N(0, sigma))`` and keep the change when the relaxed mean JCT
    falls, for ``seconds`` of wall time. It sees the whole workload (future arrivals included), so it is an
    upper bound on the relaxed world's optimum, not a policy. Returns (the rule's mean JCT with unit weights,
    the best found, in seconds; the weights; the number of schedules played)."""
    import numpy as np

    from frenzy_env.evaluation.bounds import relaxed_schedule

    def mean_jct(w):
        return float((relaxed_schedule(inp, rate_allocation(inp, weights=w)) - inp.release).mean())

    rng = np.random.default_rng(seed)
    weights = np.ones(inp.num_jobs)
    start = best = mean_jct(weights)
    plays, t0 = 1, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        cand = weights.copy()
        pick = rng.choice(inp.num_jobs, min(subset, inp.num_jobs), replace=False)
        cand[pick] *= np.exp(rng.normal(0.0, sigma, pick.size))
        value = mean_jct(cand)
        plays += 1
        if value < best:
            best, weights = value, cand
    return start, best, weights, plays


def relaxed_row(inp, plans: bool) -> dict[str, float]:
    """One workload's LP bound, its solve seconds and each rule's relaxed mean JCT, hours."""
    from frenzy_env.evaluation.bounds import HOUR, list_allocation, lp_solution, relaxed_schedule

    t0 = time.perf_counter()
    lp, completions = lp_solution(inp, plans=plans)
    row = {"jobs": inp.num_jobs, "lp_h": lp / HOUR, "lp_s": time.perf_counter() - t0}
    rules = {"srpt": list_allocation(inp), "work": list_allocation(inp, by="work"),
             "lp_order": list_allocation(inp, order=completions), "rate": rate_allocation(inp)}
    for name, allocate in rules.items():
        row[f"{name}_h"] = float((relaxed_schedule(inp, allocate) - inp.release).mean()) / HOUR
    row["relaxed_h"] = min(row[f"{r}_h"] for r in RULES)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, required=True, help="a PPO TrainConfig json, or a knob run's config.json")
    ap.add_argument("--split", choices=("test", "validation"), default="validation")
    ap.add_argument("--only", choices=("all", "synthetic", "trace"), default="all",
                    help="the split's synthetic seeds, its trace windows, or both")
    ap.add_argument("--plans", action="store_true", help="the plan-level LP (tighter, slower on trace windows)")
    ap.add_argument("--episodes", type=Path, nargs="*", default=[], help="episode csvs to score (workload, policy "
                    "or setting, avg_jct_h)")
    ap.add_argument("--search-s", type=float, default=0.0,
                    help="seconds of weight_search per workload (hindsight; columns search_h, search_plays)")
    ap.add_argument("--out", type=Path, required=True, help="folder of relaxed.csv and relaxed_gaps.md")
    args = ap.parse_args()

    import pandas as pd
    from split_tables import config_split, fill_table

    from frenzy_env.evaluation.bounds import bound_inputs

    cfg, items = config_split(args.config, args.split)
    if args.only != "all":
        items = [i for i in items if i[0].startswith("synthetic") == (args.only == "synthetic")]

    def row_of(sim, seed: int) -> dict:
        inp = bound_inputs(sim)
        row = {"split": args.split, "plans": args.plans, **relaxed_row(inp, args.plans)}
        if args.search_s > 0:
            _, best, _, plays = weight_search(inp, args.search_s, seed=seed)
            row.update(search_h=best / 3600.0, search_plays=plays)
        return row

    table = fill_table(args.out / "relaxed.csv", cfg, items, row_of, "relaxed")
    md = rule_table(table)
    if args.episodes:
        frames = [pd.read_csv(p) for p in args.episodes]  # a planner sweep's csv names its policies "setting"
        md += "\n" + policy_table(table, pd.concat([f.rename(columns={"setting": "policy"}) for f in frames]))
    (args.out / "relaxed_gaps.md").write_text(md)
    print(md)


def rule_table(table) -> str:
    """Markdown: per split and workload kind, the mean over workloads of each rule's relaxed JCT / LP bound (and
    of the hindsight weight search's, where the table has it)."""
    cols = [*RULES, "relaxed"] + (["search"] if "search_h" in table else [])
    lines = ["| split | workloads | " + " | ".join(f"{r} / LP" for r in RULES) + " | best / LP |"
             + (" hindsight weights / LP |" if "search" in cols else ""), "|---|---|" + "---|" * (len(cols))]
    kind = table.workload.str.startswith("synthetic").map({True: "synthetic", False: "trace windows"})
    for (split, k), g in table.groupby([table.split, kind]):
        ratios = [(g[f"{r}_h"] / g.lp_h).mean() for r in cols]
        lines.append(f"| {split} {k} | {len(g)} | " + " | ".join(f"{x:.3f}" for x in ratios) + " |")
    return "\n".join(lines) + "\n"


def policy_table(table, episodes) -> str:
    """Markdown: per policy, the mean over workloads of avg JCT / LP bound and / the best relaxed schedule."""
    t = table.set_index("workload")
    jct = episodes[episodes.workload.isin(t.index)].groupby(["policy", "workload"]).avg_jct_h.mean()
    lines = ["| policy | workloads | avg JCT / LP | avg JCT / best relaxed schedule |", "|---|---|---|---|"]
    rows = []
    for policy in jct.index.get_level_values(0).unique():
        j = jct.loc[policy]
        lp, rel = (j / t.lp_h.loc[j.index]).mean(), (j / t.relaxed_h.loc[j.index]).mean()
        rows.append((lp, f"| {policy} | {j.size} | {lp:.3f} | {rel:.3f} |"))
    return "\n".join(lines + [line for _, line in sorted(rows)]) + "\n"


if __name__ == "__main__":
    main()
