"""The calibrated world in numbers: the offered load of every shipped scenario and the busy fraction of each GPU
type under the scripted baselines (README, "The world").

Usage: ``python research/scripts/world_report.py [--seeds 3] [--policies fifo,frenzy]``. Prints two markdown tables.
"""

from __future__ import annotations

import argparse

import numpy as np

import baselines
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.registration import ENV_PRESETS
from frenzy_env.workload import offered_load_detail


def load_table(seeds: int) -> str:
    rows = ["| env id | cluster | workload | offered load | arrival window (h) | per-type load |", "|" + "---|" * 6]
    for preset in ENV_PRESETS:
        env = FrenzyEnv(cluster=preset.cluster, workload=preset.workload)
        reps = []
        for seed in range(seeds):  # the workload the env draws for each seed, bound to its cluster
            env.reset(seed=seed)
            reps.append(offered_load_detail(env.sim.workload, env.cluster))
        load = np.mean([r.offered_load for r in reps])
        window = np.mean([r.window_s for r in reps]) / 3600
        per_type = ", ".join(
            f"{t} {np.mean([r.per_type_load[t] for r in reps]):.2f}" for t in reps[0].per_type_load
        )
        rows.append(
            f"| `{preset.env_id}` | {preset.cluster} | {preset.workload} | {load:.2f} | {window:,.0f} | {per_type} |"
        )
    return "\n".join(rows)


def busy_table(seeds: int, policies: list[str]) -> str:
    env = FrenzyEnv(workload="itp-default", queue_slots="all", running_slots="all")
    types = env.cluster.gpu_types
    head = "| policy | seed | " + " | ".join(types) + " | avg JCT (h) |"
    rows = [head, "|" + "---|" * (len(types) + 3)]
    for name in policies:
        for seed in range(seeds):
            res = run_episode(env, baselines.make_policy(name, env), seed=seed)
            a, span = res.attempts, res.metrics["makespan_h"] * 3600
            busy = []
            for t in types:
                sub = a[a.gpu_type == t]
                held = float(((sub.end_time_s - sub.start_time_s) * sub.num_gpus).sum())
                busy.append(held / (env.cluster.gpus_of_type(t) * span))
            rows.append(f"| {name} | {seed} | " + " | ".join(f"{b:.2f}" for b in busy)
                        + f" | {res.metrics['avg_jct_h']:.1f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--policies", default="fifo,frenzy")
    args = parser.parse_args()
    print(load_table(args.seeds))
    print()
    print(busy_table(args.seeds, args.policies.split(",")))


if __name__ == "__main__":
    main()
