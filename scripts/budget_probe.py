"""Decisions per job and makespans of policies against the env's ``"auto"`` budgets (``FrenzyEnv(max_steps="auto",
max_sim_hours="auto")``, :func:`frenzy_env.env.auto_budgets`), to check that no scripted baseline is cut by them.

For each id, policy and seed it plays one episode with the budgets off and prints, as one JSON line: whether it
ended, its decisions (per job), its makespan, the auto budgets of that workload and whether they would have cut
it. Keywords after ``--env`` (``key=value``) go to every env, e.g. the v6 pacing::

    python scripts/budget_probe.py --ids frenzy/HeteroClusterSmall-v5 --policies fifo,sia_srpt,random \\
        --seeds 0 --env resize_cooldown=60 one_action_per_instant=True preemption=True

``--wall`` caps each episode's wall-clock seconds (the Sia planner takes minutes on the default week).
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym

import frenzy_env  # noqa: F401  (registers the ids)
from baselines import make_policy
from frenzy_env.env import auto_budgets
from frenzy_env.evaluation.episodes import play


def _value(text: str):
    """``key=value`` values: Python literals where they parse (numbers, True/False/None), else the string."""
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", required=True, help="comma-separated registered ids")
    parser.add_argument("--policies", default="fifo,srpt_est,frenzy,doubling,asrpt,sia_srpt")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--wall", type=float, default=600.0, help="wall-clock seconds per episode at most")
    parser.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    kwargs = {k: _value(v) for k, v in (item.split("=", 1) for item in args.env)}
    for env_id in args.ids.split(","):
        for name in args.policies.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                env = gym.make(env_id, **kwargs)
                base = env.unwrapped
                policy = make_policy(name, base)
                t0 = time.perf_counter()
                info, ended, lat = play(env, policy, seed, time_budget_s=args.wall)
                steps, hours = auto_budgets(base.sim)
                jobs = base.sim.num_jobs
                makespan_h = (base.sim.now - float(base.sim.submit.min())) / 3600.0
                print(json.dumps({
                    "id": env_id, "policy": name, "seed": seed, "ended": ended, "decisions": int(lat.size),
                    "jobs": jobs, "decisions_per_job": round(lat.size / jobs, 1), "makespan_h": round(makespan_h, 1),
                    "auto_max_steps": steps, "auto_max_sim_hours": round(hours, 1),
                    "cut_by_auto": bool(lat.size > steps or makespan_h > hours),
                    "wall_s": round(time.perf_counter() - t0, 1),
                }), flush=True)


if __name__ == "__main__":
    main()
