"""A standard learner on a registered id, as its documentation shows it: sb3-contrib's MaskablePPO with its
``ActionMasker`` wrapper, ``MultiInputPolicy`` and default hyperparameters (only the number of envs and the
rollout length set), trained for a wall-clock budget and evaluated every few minutes against FIFO on held-out
workload seeds (training draws its seeds from the env's own generator, 0 to 2**31; the evaluation plays seeds
0 to N-1 with the id's budgets)::

    python scripts/standard_learner.py --minutes 20 --out runs/standard_learner

Writes ``curve.csv`` (one row per evaluation: wall minutes, decisions, mean average JCT of the learner and of
FIFO on the evaluation seeds, their ratio, episodes cut, decisions per job), ``curve.png`` and
``summary.json``. The learner acts by sampling its masked distribution (``deterministic=False``, torch seeded
per evaluation), as PPO optimised it.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import frenzy_env  # noqa: F401  (registers the ids)
from frenzy_env.versions import ENV_VERSION


def mask_fn(env: gym.Env) -> np.ndarray:
    """The documented ActionMasker hook: the env's own mask."""
    return env.unwrapped.action_masks()


def fifo_episode(env_id: str, seed: int) -> dict:
    """FIFO on one evaluation seed."""
    from baselines import make_policy
    from frenzy_env.evaluation.episodes import run_episode

    env = gym.make(env_id)
    result = run_episode(env, make_policy("fifo", env), seed=seed)
    return result.metrics


def learner_episode(model, env_id: str, seed: int) -> dict:
    """The learner on one evaluation seed: masked sampling, the id's budgets."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    steps, done, info = 0, False, {}
    while not done:
        action, _ = model.predict(obs, action_masks=obs["action_mask"].astype(bool), deterministic=False)
        obs, _, term, trunc, info = env.step(int(action))
        steps += 1
        done = term or trunc
    metrics = dict(info["metrics"])
    metrics["decisions"] = steps
    metrics["jobs"] = env.unwrapped.sim.num_jobs
    return metrics


def evaluate(model, env_id: str, seeds: list[int], fifo: list[dict]) -> dict:
    import torch

    torch.manual_seed(12345)
    runs = [learner_episode(model, env_id, s) for s in seeds]
    ppo_jct = float(np.mean([m["avg_jct_h"] for m in runs]))
    fifo_jct = float(np.mean([m["avg_jct_h"] for m in fifo]))
    return {
        "ppo_avg_jct_h": round(ppo_jct, 4),
        "fifo_avg_jct_h": round(fifo_jct, 4),
        "ratio_to_fifo": round(ppo_jct / fifo_jct, 4),
        "paired_lower": int(sum(m["avg_jct_h"] < f["avg_jct_h"] for m, f in zip(runs, fifo))),
        "cut": int(sum(bool(m.get("truncated", 0)) for m in runs)),
        "decisions_per_job": round(float(np.mean([m["decisions"] / m["jobs"] for m in runs])), 1),
    }


def plot(rows: list[dict], path: Path, env_id: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = [r["decisions"] / 1e3 for r in rows]
    ax.plot(x, [r["ppo_avg_jct_h"] for r in rows], marker="o", label="MaskablePPO (sampled)")
    ax.axhline(rows[0]["fifo_avg_jct_h"], color="k", ls="--", label="fifo")
    ax.set_xlabel("training decisions (thousands)")
    ax.set_ylabel("average JCT on evaluation seeds (h)")
    ax.set_title(f"{env_id}: stock MaskablePPO from scratch")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default=f"frenzy/HeteroClusterSmall-{ENV_VERSION}")
    parser.add_argument("--minutes", type=float, default=20.0, help="training wall-clock budget")
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--n-steps", type=int, default=512, help="rollout length per env")
    parser.add_argument("--eval-every-min", type=float, default=2.5)
    parser.add_argument("--eval-seeds", type=int, default=5, help="evaluation seeds 0..N-1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.wrappers import ActionMasker
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.eval_seeds))
    fifo = [fifo_episode(args.env_id, s) for s in seeds]
    venv = make_vec_env(args.env_id, n_envs=args.n_envs, seed=args.seed, wrapper_class=ActionMasker,
                        wrapper_kwargs={"action_mask_fn": mask_fn})
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=args.n_steps, seed=args.seed, verbose=0)
    rows: list[dict] = []
    budget_s = args.minutes * 60.0

    class Clock(BaseCallback):
        """Stops training at the wall-clock budget and evaluates every few minutes (evaluation time excluded)."""

        def __init__(self) -> None:
            super().__init__()
            self.train_s = 0.0
            self.t_last = time.perf_counter()
            self.next_eval = 0.0

        def _evaluate(self) -> None:
            row = {"train_min": round(self.train_s / 60.0, 2), "decisions": int(self.num_timesteps),
                   **evaluate(self.model, args.env_id, seeds, fifo)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            self.next_eval += args.eval_every_min * 60.0

        def _on_step(self) -> bool:
            now = time.perf_counter()
            self.train_s += now - self.t_last
            self.t_last = now
            if self.train_s >= self.next_eval:
                self._evaluate()
                self.t_last = time.perf_counter()
            return self.train_s < budget_s

    clock = Clock()
    model.learn(total_timesteps=10**9, callback=clock)
    clock._evaluate()
    model.save(args.out / "model.zip")
    with open(args.out / "curve.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "curve.png", args.env_id)
    summary = {"env_id": args.env_id, "n_envs": args.n_envs, "n_steps": args.n_steps, "seed": args.seed,
               "minutes": args.minutes, "eval_seeds": seeds, "final": rows[-1],
               "best": min(rows, key=lambda r: r["ppo_avg_jct_h"])}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
