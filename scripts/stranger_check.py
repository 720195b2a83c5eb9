"""The env tried as a stranger would, with the libraries' own documented code: a masked-random episode (decisions
per job, whether it ended or was cut) on registered ids, and sb3-contrib's MaskablePPO with its documented
``ActionMasker`` wrapper and ``MultiInputPolicy`` for N steps (episodes ended, cut, and the returns logged)::

    python scripts/stranger_check.py --random frenzy/HeteroClusterSmall-v6,frenzy/HeteroClusterSynthetic-v6 \\
        --ppo frenzy/HeteroClusterSmall-v6 --ppo-steps 20000

Masked random: ``rng.choice(np.flatnonzero(mask))`` on the observation's mask, up to ``--random-steps`` steps or
the id's own budget, whichever comes first (``--no-budgets``: the ids' budgets off, so the episode shows how many
decisions per job the pacing alone allows).
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np

import frenzy_env  # noqa: F401  (registers the ids)


def random_episode(env_id: str, seed: int, max_steps: int, budgets: bool = True) -> dict:
    """One masked-random episode: decisions, jobs, decisions per job, ended / cut, simulated hours; without
    ``budgets`` the id's own budgets are off (``max_steps=None, max_sim_hours=None``)."""
    env = gym.make(env_id) if budgets else gym.make(env_id, max_steps=None, max_sim_hours=None)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    steps, term, trunc, info = 0, False, False, {}
    t0 = time.perf_counter()
    while not (term or trunc) and steps < max_steps:
        obs, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        steps += 1
    base = env.unwrapped
    jobs = base.sim.num_jobs
    m = info.get("metrics", {})
    return {"id": env_id, "seed": seed, "decisions": steps, "jobs": jobs, "decisions_per_job": round(steps / jobs, 1),
            "terminated": term, "truncated": trunc, "finished_jobs": int(base.sim.finished),
            "sim_hours": round(base.sim.now / 3600.0, 1), "avg_jct_h": m.get("avg_jct_h"),
            "budgets": base.budgets, "wall_s": round(time.perf_counter() - t0, 1)}


def maskable_ppo(env_id: str, steps: int, seed: int) -> dict:
    """sb3-contrib's MaskablePPO as its documentation shows it: ActionMasker(env, mask_fn), MultiInputPolicy,
    default hyperparameters; Monitor records every episode (ended or cut)."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.wrappers import ActionMasker
    from stable_baselines3.common.monitor import Monitor

    def mask_fn(env: gym.Env) -> np.ndarray:
        return env.unwrapped.action_masks()

    env = ActionMasker(Monitor(gym.make(env_id)), mask_fn)
    model = MaskablePPO("MultiInputPolicy", env, seed=seed, verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    monitor = env.env
    returns = monitor.get_episode_rewards()
    return {"id": env_id, "steps": steps, "episodes": len(returns),
            "returns": [round(r, 1) for r in returns], "episode_lengths": monitor.get_episode_lengths(),
            "wall_s": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random", default="", help="comma-separated ids for masked-random episodes")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--random-steps", type=int, default=2_000_000)
    parser.add_argument("--no-budgets", action="store_true", help="masked random with the ids' budgets off")
    parser.add_argument("--ppo", default="", help="comma-separated ids for MaskablePPO")
    parser.add_argument("--ppo-steps", type=int, default=20_000)
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    for env_id in filter(None, args.random.split(",")):
        for seed in seeds:
            print(json.dumps(random_episode(env_id, seed, args.random_steps, not args.no_budgets)), flush=True)
    for env_id in filter(None, args.ppo.split(",")):
        print(json.dumps(maskable_ppo(env_id, args.ppo_steps, seeds[0])), flush=True)


if __name__ == "__main__":
    main()
