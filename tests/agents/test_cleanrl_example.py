"""The single-file PPO example (agents/cleanrl_ppo.py) runs in its short mode: finite losses, an evaluation row
per seed next to FIFO's, and never an illegal action (in training or in evaluation)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents import cleanrl_ppo

ROOT = Path(__file__).resolve().parents[2]


def test_quick_mode_trains_and_evaluates(capsys):
    result = cleanrl_ppo.main(["--quick"])
    assert result["args"].quick and result["decisions"] >= 512
    assert result["losses"], "no update ran"
    for row in result["losses"]:
        assert all(math.isfinite(row[k]) for k in ("pg", "v", "entropy", "kl", "clipfrac")), row
    assert result["illegal"] == 0
    assert len(result["eval"]) == result["args"].eval_seeds == 2
    for row in result["eval"]:
        assert row["ppo_invalid"] == 0  # the env counted no illegal action of the policy
        assert math.isfinite(row["ppo_jct_h"]) and math.isfinite(row["fifo_jct_h"]) and row["fifo_jct_h"] > 0
    assert math.isfinite(result["ppo_avg_jct_h"]) and math.isfinite(result["fifo_avg_jct_h"])
    out = capsys.readouterr().out
    assert "PPO avg JCT h" in out and "FIFO avg JCT h" in out and "PPO/FIFO" in out


def test_flags_come_from_the_dataclass():
    args = cleanrl_ppo.parse_args(["--quick", "--num-envs", "3", "--anneal-lr", "false"])
    assert args.num_envs == 3 and args.anneal_lr is False and args.num_steps == cleanrl_ppo.QUICK["num_steps"]
    assert cleanrl_ppo.parse_args([]).total_timesteps == cleanrl_ppo.Args().total_timesteps


def test_runs_as_a_script():
    proc = subprocess.run(
        [sys.executable, "agents/cleanrl_ppo.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "--total-timesteps" in proc.stdout and "--quick" in proc.stdout


# ------------------------------------------------------------------------------------------ layouts and env v6 prep
PACED = {"interface": "universal", "one_action_per_instant": True, "resize_cooldown": 60, "max_steps": "auto",
         "max_sim_hours": "auto"}


def test_default_env_id_follows_the_env_version():
    from frenzy_env.versions import ENV_VERSION

    assert cleanrl_ppo.ENV_ID == f"frenzy/HeteroClusterSmall-{ENV_VERSION}" == cleanrl_ppo.Args().env_id
    assert cleanrl_ppo.parse_args(["--env-id", "frenzy/Doubling64-v5"]).env_id == "frenzy/Doubling64-v5"


def test_default_env_keywords():
    """8 + 8 slots, 20-job workloads, the id's "auto" budgets; --steps-per-job and --max-sim-hours set fixed ones."""
    args = cleanrl_ppo.Args()
    kwargs = cleanrl_ppo.env_kwargs(args)
    assert set(kwargs) == {"queue_slots", "running_slots", "workload", "max_steps", "max_sim_hours"}
    assert (kwargs["queue_slots"], kwargs["running_slots"], kwargs["max_steps"], kwargs["max_sim_hours"]) == (
        8, 8, "auto", "auto")
    fixed = cleanrl_ppo.env_kwargs(cleanrl_ppo.parse_args(["--steps-per-job", "30", "--max-sim-hours", "400"]))
    assert (fixed["max_steps"], fixed["max_sim_hours"]) == (30 * 20, 400.0)
    env = cleanrl_ppo.make_env(args, reference=False).unwrapped
    interface = gym.make(args.env_id).unwrapped.sim_config.interface  # the id's own layout: the example sets none
    assert env.sim_config.interface == interface
    assert env.action_space.n == {"cluster": 292, "universal": 452}[interface]  # 4 waits + 16 slots x P plans


def test_env_kwargs_add_and_override_keywords():
    args = cleanrl_ppo.parse_args(["--env-kwargs", json.dumps(PACED)])
    env = cleanrl_ppo.make_env(args, reference=False).unwrapped
    assert env.sim_config.interface == "universal" and env.sim_config.one_action_per_instant
    assert env.sim_config.resize_cooldown == 60 and env.max_steps == "auto" and env.max_sim_hours == "auto"
    with pytest.raises(SystemExit, match="must be a JSON object"):
        cleanrl_ppo.env_kwargs(cleanrl_ppo.parse_args(["--env-kwargs", "[1]"]))


@pytest.mark.parametrize("layout", [{}, {"interface": "universal"}, {"interface": "cluster"}])
def test_flatten_and_rows_follow_the_observation_space(layout):
    """Under the default layout (the universal one, env v6's), the universal and the cluster one (env v5's)."""
    env = cleanrl_ppo.make_env(cleanrl_ppo.parse_args(["--env-kwargs", json.dumps(layout)]), reference=False)
    obs, _ = env.reset(seed=0)
    keys = cleanrl_ppo.feature_keys(env.observation_space)
    assert keys == tuple(k for k in env.observation_space.spaces if k != "action_mask")
    cluster = layout.get("interface", "universal") == "cluster"
    assert ("nodes" in keys) == cluster and ("plans" in keys) == (not cluster)
    x, mask = cleanrl_ppo.flatten(obs, keys)
    assert x.dtype == np.float32 and np.array_equal(x, np.concatenate([obs[k] for k in keys]))
    assert mask.dtype == bool and np.array_equal(mask, obs["action_mask"].astype(bool))
    agent = cleanrl_ppo.Agent(env, hidden=16)
    base = env.unwrapped
    q, r = base.queue_shape, base.running_shape
    assert np.array_equal(x[agent.q0: agent.q0 + q[0] * q[1]], obs["queue"])  # the rows the start scorer reads
    assert np.array_equal(x[agent.r0: agent.r0 + r[0] * r[1]], obs["running"])  # and the resize scorer
    assert agent.logits(torch.as_tensor(x)[None]).shape == (1, env.action_space.n)


def test_paced_universal_run_without_decision_cost_ends_its_episodes():
    """env v6's pacing and budgets (issue 55 item 5): the example trains and evaluates with no decision cost."""
    result = cleanrl_ppo.main(["--quick", "--decision-cost", "0", "--num-jobs", "4", "--env-kwargs",
                               json.dumps(PACED)])
    assert result["illegal"] == 0 and result["args"].decision_cost == 0
    assert result["episodes"] >= 2 and len(result["returns"]) == result["episodes"]  # 4-job episodes end in training
    for row in result["eval"]:
        assert row["ppo_invalid"] == 0 and row["ppo_truncated"] == 0 and row["ppo_unfinished"] == 0
        assert math.isfinite(row["ppo_jct_h"]) and row["fifo_truncated"] == 0


@pytest.mark.slow
def test_paced_universal_training_ends_episodes():
    """A longer run (about 20,000 decisions) under the pacing and "auto" budgets: training episodes end."""
    result = cleanrl_ppo.main(["--decision-cost", "0", "--total-timesteps", "20480", "--num-envs", "4",
                               "--num-jobs", "8", "--eval-seeds", "2", "--env-kwargs", json.dumps(PACED)])
    assert result["episodes"] >= 2 and result["illegal"] == 0
    assert len(result["returns"]) == result["episodes"] and all(math.isfinite(r) for r in result["returns"])


@pytest.mark.parametrize("discount, expected", [("time", [2.1875, 2.375, 3.0]), ("decision", [1.6875, 2.75, 3.0])])
def test_gae_discounts_per_simulated_hour_or_per_decision(discount, expected):
    """Three steps with rewards 1, 2, 3 lasting 0, 2 and 1 simulated hours, values 0, gamma 0.5, lambda 0.5. Per
    hour the second step is discounted by 0.5 ** 2 (A_1 = 2 + 0.25 x 0.5 x 3) and the first, a decision at one
    instant, not at all (A_0 = 1 + 0.5 x A_1); per decision each by gamma x lambda = 0.25 (A_1 = 2 + 0.25 x 3,
    A_0 = 1 + 0.25 x A_1)."""
    args = cleanrl_ppo.Args(discount=discount, gamma=0.5, gae_lambda=0.5, num_steps=3, num_envs=1)
    shape = (3, 1)
    buf = cleanrl_ppo.Buffer(
        obs=torch.zeros((*shape, 2)), masks=torch.ones((*shape, 2), dtype=torch.bool),
        actions=torch.zeros(shape, dtype=torch.long), logprobs=torch.zeros(shape),
        rewards=torch.tensor([[1.0], [2.0], [3.0]]), values=torch.zeros(shape), dones=torch.zeros(shape),
        boot=torch.zeros(shape), hours=torch.tensor([[0.0], [2.0], [1.0]]),
    )

    class Zero:
        def get_value(self, x):
            return torch.zeros(x.shape[0])

    class Run:
        cur = [(np.zeros(2, dtype=np.float32), np.ones(2, dtype=bool))]

    advantages, returns = cleanrl_ppo.gae(Zero(), Run(), buf, args)
    assert torch.allclose(advantages[:, 0], torch.tensor(expected)) and torch.allclose(returns, advantages)


def test_discount_flag_is_checked():
    assert cleanrl_ppo.parse_args([]).discount == "time" and cleanrl_ppo.parse_args([]).decision_cost == 0.0
    with pytest.raises(SystemExit):
        cleanrl_ppo.parse_args(["--discount", "episode"])
