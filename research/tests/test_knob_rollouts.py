"""The knob with several plays per workload (research.knob.rollouts) and the knob's ``hold`` option."""

from __future__ import annotations

import json

import numpy as np
import pytest
from knob_configs import SMALL, play_level
from knob_configs import small_config as _cfg

from agents.ppo.workloads import make_env, training_generator
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from research.knob.agent import (
    KnobConfig,
    KnobEnv,
    load_knob_policy,
    play_plan,
    save_knob_model,
    start_at_plan,
    train_knob,
)
from research.knob.rollouts import Play, leave_one_out_advantages, ppo_update, train_knob_rollouts


def _play(workload: int, times, cost_times, cost) -> Play:
    n = len(times)
    return Play(workload, np.zeros((n, 2), np.float32), np.zeros(n, np.int64), np.zeros(n), np.asarray(times, float),
                np.asarray(cost_times, float), np.asarray(cost, float), 0.0, n, 0.0)


@pytest.mark.parametrize(
    "kw, field",
    [({"hold": 0}, "hold"), ({"rollouts": 0}, "rollouts"), ({"workloads_per_update": 0}, "workloads_per_update"),
     ({"workloads_per_update": 2}, "workloads_per_update")],
)
def test_config_errors_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        _cfg(**kw)


def test_leave_one_out_advantages_by_hand():
    """Three plays of one workload. Costs after t=5: play a 10 - 5 = 5 (its curve is 1/s up to 10), b 20 - 10 =
    10 (2/s), c 9 - 5 = 4 (1/s up to 9, then flat). Mean total cost 13, gain 2: play a's advantage at t=5 is
    2/13 x ((10 + 4) / 2 - 5) = 4/13; at t=0: 2/13 x ((20 + 9) / 2 - 10) = 9/13."""
    a = _play(0, [0, 5], [0, 10], [0, 10])
    b = _play(0, [0, 5], [0, 10], [0, 20])
    c = _play(0, [5], [0, 9, 12], [0, 9, 9])
    adv = leave_one_out_advantages([a, b, c], gain=2.0)
    assert adv[0] == pytest.approx([9 / 13, 4 / 13])
    assert adv[1] == pytest.approx([2 / 13 * ((10 + 9) / 2 - 20), 2 / 13 * ((5 + 4) / 2 - 10)])
    assert adv[2] == pytest.approx([2 / 13 * ((5 + 10) / 2 - 4)])
    with pytest.raises(ConfigError, match="at least 2"):
        leave_one_out_advantages([a])
    with pytest.raises(ConfigError, match="one workload"):
        leave_one_out_advantages([a, _play(1, [0], [0, 1], [0, 1])])


def test_equal_plays_have_zero_advantage():
    p = _play(3, [0, 2, 7], [0, 4, 8], [0, 3, 6])
    assert all(np.allclose(a, 0.0) for a in leave_one_out_advantages([p, p, p]))


def test_ppo_update_raises_the_probability_of_the_better_action():
    from stable_baselines3 import PPO

    cfg = _cfg(n_epochs=4, batch_size=16, learning_rate=1e-2, ent_coef=0.0, rollouts=2)
    model = PPO("MlpPolicy", KnobEnv(cfg), device="cpu", seed=0, learning_rate=cfg.learning_rate)
    start_at_plan(model, 0.85, 0)
    x = np.random.default_rng(0).uniform(0, 1, (64, model.observation_space.shape[0])).astype(np.float32)
    actions = np.tile([0, 1, 2, 3], 16)
    logp = np.log(np.where(actions == 0, 0.85, 0.05))
    adv = np.where(actions == 2, 1.0, -0.2)
    stats = ppo_update(model, x, actions, logp, adv, cfg, np.random.default_rng(0))
    import torch as th

    with th.no_grad():
        p = model.policy.get_distribution(th.as_tensor(x)).distribution.probs.numpy().mean(axis=0)
    assert p[2] > 0.05 * 1.5 and p[0] < 0.85 and stats["kl"] > 0


def _episode(env: KnobEnv, level: int) -> tuple[float, int]:
    return play_level(env, level, options={"workload": 0})


def test_hold_carries_out_that_many_instants_per_step_and_the_unreferenced_reward_is_the_plans_cost():
    """``hold=3``: a step moves simulated time on three times (the last step fewer); with ``reference=False``
    an episode at level k returns -gain / jobs x the cost of the plan with that margin, and the recorded cost
    curve ends at that cost."""
    one, three = KnobEnv(_cfg(pool=1), reference=False), KnobEnv(_cfg(pool=1, hold=3), reference=False)
    r1, n1 = _episode(one, 2)
    r3, n3 = _episode(three, 2)
    assert n3 == -(-n1 // 3)  # ceil(instants / 3)
    assert r3 == pytest.approx(r1, rel=1e-9)
    plan = play_plan(make_env(SMALL, training_generator(SMALL)), 0, "completion", margin=0.2)
    assert -r1 == pytest.approx(one.cfg.gain / one.env.sim.num_jobs * plan.total, rel=1e-9)
    assert three.cost[-1] == pytest.approx(-r3, rel=1e-12) and len(three.cost) == len(three.cost_times)
    with pytest.raises(ConfigError, match="workload"):
        three.reset(options={"workload": -1})


def test_a_held_policy_chooses_once_per_hold_instants(tmp_path):
    cfg = _cfg(hold=4)
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", KnobEnv(cfg), n_steps=16, batch_size=16, device="cpu", seed=0)
    start_at_plan(model, 0.5, 0)
    save_knob_model(model, cfg, tmp_path / "m.zip")
    assert json.loads((tmp_path / "m.json").read_text())["hold"] == 4
    env = make_env(SMALL, training_generator(SMALL))
    pol = load_knob_policy(env, tmp_path / "m.zip", sample=False)  # level 0 throughout
    run_episode(env, pol, seed=0)
    steps = _episode(KnobEnv(_cfg(pool=1, hold=4)), 0)[1]  # workload 0 is seed 0's: the same instants
    assert pol.hold == 4 and pol.levels_used.sum() == steps


@pytest.mark.slow
def test_training_with_rollouts_writes_a_playable_model_and_resumes(tmp_path):
    cfg = _cfg(rollouts=3, workloads_per_update=2, hold=2, timesteps=60, batch_size=16, n_epochs=2,
               checkpoint_every=30)
    with pytest.raises(ConfigError, match="rollouts"):
        train_knob(cfg, tmp_path / "x")
    with pytest.raises(ConfigError, match="rollouts"):
        train_knob_rollouts(_cfg(), tmp_path / "x")
    logs: list[str] = []
    path = train_knob_rollouts(cfg, tmp_path / "run", log=logs.append)
    import pandas as pd
    from stable_baselines3 import PPO

    plays = pd.read_csv(tmp_path / "run" / "plays.csv")
    updates = pd.read_csv(tmp_path / "run" / "updates.csv")
    assert len(plays) == 3 * 2 * len(updates) and set(plays.play) == {0, 1, 2}
    assert (plays.groupby("update").workload.nunique() == 2).all()
    done = PPO.load(path).num_timesteps
    assert done == plays.decisions.sum() == updates.decisions.iloc[-1] and done >= 60
    assert np.allclose(plays[[f"level{i}" for i in range(4)]].sum(axis=1), 1.0, atol=1e-3)
    with pytest.raises(ConfigError, match="already holds a run"):
        train_knob_rollouts(cfg, tmp_path / "run")
    more = KnobConfig.from_dict({**cfg.to_dict(), "timesteps": done + 1})
    logs.clear()
    train_knob_rollouts(more, tmp_path / "run", resume=True, log=logs.append)
    assert any(f"{done:,} decisions, update {len(updates)}" in line for line in logs)
    assert PPO.load(tmp_path / "run" / "model.zip").num_timesteps > done
    assert len(pd.read_csv(tmp_path / "run" / "updates.csv")) == len(updates) + 1
    env = make_env(SMALL, training_generator(SMALL))
    pol = load_knob_policy(env, path)
    assert pol.hold == 2 and run_episode(env, pol, seed=3).metrics["invalid_actions"] == 0
