"""How much do the costs of stopping and starting a job matter? Average JCT and restarts per episode of scripted
policies at 1x and 5x the start-up and restart costs, under a chosen stop mode.

Each run is one episode of one policy on the default world (``frenzy/HeteroCluster-v6``'s cluster, the
``itp-default`` week, optionally cut to its first ``--max-jobs`` jobs) with ``SimConfig.stop_mode`` and
``checkpoint_interval`` as given (default: "save_first" with the recommended 1800 s interval) and the start-up and
restart costs times k: ``startup_time`` and ``restart_overhead`` times k, ``load_bandwidth`` and
``checkpoint_bandwidth`` divided by k (the OOM teardown is left as it is). Every finished run is appended to
``--out`` (JSON Lines) and skipped when the script runs again with it, so an interrupted sweep resumes where it
stopped; the table is printed from every row in the file that matches the arguments. An episode that hits
``--max-steps`` decisions is reported as cut (its JCT then counts unfinished jobs, ``run_episode``).

    python scripts/stop_cost_sensitivity.py --seeds 0,1 --costs 1,5
    python scripts/stop_cost_sensitivity.py --modes save_first,kill --max-jobs 200 --out /tmp/stops.jsonl
    python scripts/stop_cost_sensitivity.py --policies ppo,srpt_est --seeds 0,1,2 --costs 1,5

A policy is a baseline's name, ``ppo`` (the learned agent's shipped model for the env) or ``ppo=PATH`` (a model
file).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from baselines import make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.paths import append_json_line
from frenzy_env.simulator.config import RECOMMENDED_CHECKPOINT_INTERVAL, stop_cost_keywords
from frenzy_env.workload import make_generator

POLICIES = "fifo,frenzy,sia,srpt_est,doubling"


def run_one(policy: str, seed: int, k: float, mode: str, interval: float | None, max_jobs: int | None,
            max_steps: int | None) -> dict:
    """One episode; the row appended to the results file."""
    gen = make_generator("itp-default") if max_jobs is None else make_generator("itp-default", max_jobs=max_jobs)
    env = FrenzyEnv(cluster="frenzy-testbed", workload=gen, stop_mode=mode, checkpoint_interval=interval,
                    **stop_cost_keywords(k))
    t0 = time.perf_counter()
    result = run_episode(env, _policy(policy, env), seed=seed, max_steps=max_steps)
    m = result.metrics
    return {
        "policy": policy, "seed": seed, "cost": k, "mode": mode, "interval": interval, "max_jobs": max_jobs,
        "avg_jct_h": m["avg_jct_h"], "restarts": m["restarts"], "overhead_gpu_hours": m["overhead_gpu_hours"],
        "rolled_back_gpu_hours": m.get("rolled_back_gpu_hours", 0.0), "cut": bool(m.get("truncated", 0.0)),
        "wall_s": time.perf_counter() - t0,
    }


def _policy(name: str, env: FrenzyEnv) -> object:
    """A baseline by name, or the learned agent: ``ppo`` (the shipped model for the env) or ``ppo=PATH``."""
    if name == "ppo" or name.startswith("ppo="):
        from agents.ppo import load_policy

        return load_policy(env, name.partition("=")[2] or None)
    return make_policy(name, env)


def key(row: dict) -> tuple:
    return (row["policy"], row["seed"], float(row["cost"]), row["mode"], row["interval"], row["max_jobs"])


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(rows: list[dict], policies: list[str], costs: list[float], modes: list[str]) -> str:
    """One line per (mode, policy): mean (over the seeds) average JCT, restarts and GPU-hours of run lost to kills
    (``rolled_back_gpu_hours``) at each cost, and the ratio of the highest cost's JCT to the lowest's."""
    head = "| stop | policy | seeds |" + "".join(
        f" JCT (h) {k:g}x | restarts {k:g}x | run lost (GPU-h) {k:g}x |" for k in costs
    )
    head += f" JCT {costs[-1]:g}x / {costs[0]:g}x |" if len(costs) > 1 else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for mode in modes:
        for p in policies:
            got = {k: [r for r in rows if r["policy"] == p and r["mode"] == mode and float(r["cost"]) == k]
                   for k in costs}
            seeds = sorted({r["seed"] for rs in got.values() for r in rs})
            cells = [mode, f"`{p}`", ",".join(map(str, seeds))]
            jct = {}
            for k in costs:
                rs = got[k]
                jct[k] = float(np.mean([r["avg_jct_h"] for r in rs])) if rs else math.nan
                cut = "*" if any(r["cut"] for r in rs) else ""
                cells.append(f"{jct[k]:.1f}{cut}" if rs else "-")
                cells.append(f"{np.mean([r['restarts'] for r in rs]):.0f}" if rs else "-")
                cells.append(f"{np.mean([r['rolled_back_gpu_hours'] for r in rs]):.0f}" if rs else "-")
            if len(costs) > 1:
                ratio = jct[costs[-1]] / jct[costs[0]]
                cells.append(f"{ratio:.2f}" if math.isfinite(ratio) else "-")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policies", default=POLICIES, help=f"comma-separated (default {POLICIES})")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--costs", default="1,5", help="multipliers of the start-up and restart costs")
    ap.add_argument("--modes", default="save_first", help="stop modes (v5, save_first, kill)")
    ap.add_argument("--interval", type=float, default=RECOMMENDED_CHECKPOINT_INTERVAL,
                    help="checkpoint_interval, seconds (default: the recommended 1800)")
    ap.add_argument("--max-jobs", type=int, default=None, help="cut the week to its first N jobs (default: all)")
    ap.add_argument("--max-steps", type=int, default=None, help="decisions before an episode is cut")
    ap.add_argument("--out", default="stop_cost_sensitivity.jsonl", help="results file (JSON Lines), resumed")
    ap.add_argument("--table-only", action="store_true", help="print the table of the file without running")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    costs = [float(k) for k in args.costs.split(",")]
    modes = args.modes.split(",")
    out = Path(args.out)
    done = {key(r) for r in read_rows(out)}
    for mode in modes if not args.table_only else ():
        for k in costs:
            for policy in policies:
                for seed in seeds:
                    want = (policy, seed, k, mode, args.interval, args.max_jobs)
                    if want in done:
                        continue
                    row = run_one(policy, seed, k, mode, args.interval, args.max_jobs, args.max_steps)
                    append_json_line(out, row)
                    print(f"{mode} {k:g}x {policy} seed {seed}: avg JCT {row['avg_jct_h']:.2f} h, "
                          f"{row['restarts']:.0f} restarts{' (cut)' if row['cut'] else ''}, {row['wall_s']:.0f} s",
                          flush=True)
    rows = [r for r in read_rows(out) if r["interval"] == args.interval and r["max_jobs"] == args.max_jobs
            and r["seed"] in seeds]
    print()
    print(table(rows, policies, costs, modes))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
