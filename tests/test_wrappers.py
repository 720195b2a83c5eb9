"""The reward wrapper of :mod:`frenzy_env.wrappers` (the PPO trainer's differenced and normalised reward for any
learner): its return checked by hand on the tiny instance, truncation, the reference as a factory or a name,
Gymnasium's and stable-baselines3's env checkers, and the trainer using the same core."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.wrappers import ReferenceReward, differenced_reward


class FirstStart:
    """A scripted policy from the masks alone: the first legal start (queue slot, then plan order), else the
    first legal action (wait). ``last=True``: the last legal start instead (the largest plan of the last job)."""

    def __init__(self, env, last: bool = False) -> None:
        self.env, self.last, self.resets = env.unwrapped, last, 0

    def reset(self) -> None:
        self.resets += 1

    def predict(self, observation, state=None, episode_start=None, deterministic=True, action_masks=None):
        env = self.env
        mask = env.action_masks() if action_masks is None else np.asarray(action_masks, dtype=bool)
        starts = np.flatnonzero(mask[env.first_start : env.first_resize])
        if starts.size:
            return np.array(env.first_start + int(starts[-1 if self.last else 0])), state
        return np.array(int(np.flatnonzero(mask)[0])), state


def _play_raw(env, policy, seed: int = 0):
    """(times, env rewards, terminated, truncated) of one episode of the bare env: times[0] is the reset's."""
    _, info = env.reset(seed=seed)
    policy.reset()
    times, rewards, done = [info["time"]], [], False
    while not done:
        action, _ = policy.predict(None, action_masks=env.action_masks())
        _, r, term, trunc, info = env.step(int(action))
        times.append(info["time"])
        rewards.append(r)
        done = term or trunc
    return np.array(times), np.array(rewards), term, trunc


def _play_wrapped(env, policy, seed: int = 0):
    """(shaped rewards, env rewards from info) of one episode through the wrapper."""
    env.reset(seed=seed)
    policy.reset()
    shaped, raw, done = [], [], False
    while not done:
        action, _ = policy.predict(None, action_masks=env.unwrapped.action_masks())
        _, r, term, trunc, info = env.step(int(action))
        shaped.append(r)
        raw.append(info["env_reward"])
        done = term or trunc
    return np.array(shaped), np.array(raw)


def test_the_wrappers_return_is_the_formula_by_hand(tiny_cluster, tiny_workload, make_env):
    # the reference, FirstStart, played on its own env: its cumulative cost C_ref at its decisions
    ref_env = make_env(tiny_cluster, list(tiny_workload.jobs))
    t_ref, r_ref, term, _ = _play_raw(ref_env, FirstStart(ref_env))
    assert term
    c_ref = np.concatenate(([0.0], np.cumsum(-r_ref)))
    total = c_ref[-1]
    # the agent, the last start (another schedule), on the bare env: its own times and rewards
    bare = make_env(tiny_cluster, list(tiny_workload.jobs))
    t_agent, r_agent, term, _ = _play_raw(bare, FirstStart(bare, last=True))
    assert term and not np.isclose(-r_agent.sum(), total)  # the two schedules differ
    gain = 10.0
    by_hand = []
    for k, r in enumerate(r_agent):
        t0, t1 = t_agent[k], t_agent[k + 1]
        step = r + np.interp(t1, t_ref, c_ref) - np.interp(t0, t_ref, c_ref)
        if k == len(r_agent) - 1:  # the terminal step settles the reference's cost after t1
            step += total - np.interp(t1, t_ref, c_ref)
        by_hand.append(gain / total * step)
    # the wrapper, with the reference as a factory env -> policy
    env = ReferenceReward(make_env(tiny_cluster, list(tiny_workload.jobs)), FirstStart, gain=gain)
    shaped, raw = _play_wrapped(env, FirstStart(env, last=True))
    assert np.allclose(raw, r_agent, rtol=0, atol=0)  # the env itself is unchanged
    assert np.allclose(shaped, by_hand, rtol=1e-12, atol=1e-12)
    # the episode's return: gain * (1 - agent cost / reference cost)
    assert shaped.sum() == pytest.approx(gain * (1 - (-r_agent.sum()) / total), rel=1e-12)
    assert env.cache.runs == 1 and env.cache.get(0).total == pytest.approx(total)
    # the reference against itself earns exactly 0
    same, _ = _play_wrapped(env, FirstStart(env))
    assert same.sum() == pytest.approx(0.0, abs=1e-12) and env.cache.runs == 1  # cached per workload seed


def test_without_a_reference_the_reward_is_normalised_by_the_jobs(tiny_cluster, tiny_workload, make_env):
    env = ReferenceReward(make_env(tiny_cluster, list(tiny_workload.jobs)), None, gain=4.0)
    shaped, raw = _play_wrapped(env, FirstStart(env))
    assert np.allclose(shaped, raw * 4.0 / 3)  # three jobs
    assert env.cache is None


def test_a_truncated_episode_settles_nothing(tiny_cluster, tiny_workload, make_env):
    ref_env = make_env(tiny_cluster, list(tiny_workload.jobs))
    t_ref, r_ref, _, _ = _play_raw(ref_env, FirstStart(ref_env))
    c_ref = np.concatenate(([0.0], np.cumsum(-r_ref)))
    env = ReferenceReward(make_env(tiny_cluster, list(tiny_workload.jobs), max_steps=2), FirstStart, gain=10.0)
    agent = FirstStart(env, last=True)
    env.reset(seed=0)
    agent.reset()
    t0 = env.unwrapped.sim.now
    shaped, raw, trunc = [], [], False
    while not trunc:
        _, r, term, trunc, info = env.step(int(agent.predict(None)[0]))
        assert not term
        shaped.append(r)
        raw.append(info["env_reward"])
    assert env.cache.get(0).total == pytest.approx(c_ref[-1])  # the reference played without the agent's budget
    t_cut = info["time"]
    span = np.interp(t_cut, t_ref, c_ref) - np.interp(t0, t_ref, c_ref)
    assert sum(shaped) == pytest.approx(10.0 / c_ref[-1] * (span + sum(raw)), rel=1e-12)


def test_the_reference_by_name_needs_its_factory(tiny_cluster, tiny_workload, make_env):
    env = make_env(tiny_cluster, list(tiny_workload.jobs))
    with pytest.raises(ConfigError, match="make_policy"):
        ReferenceReward(env, "first")
    with pytest.raises(ConfigError, match="gain"):
        ReferenceReward(env, FirstStart, gain=0.0)
    with pytest.raises(ConfigError, match="reference"):
        ReferenceReward(env, 3)
    registry = {"first": FirstStart}
    named = ReferenceReward(env, "first", make_policy=lambda name, e: registry[name](e))
    by_factory = ReferenceReward(make_env(tiny_cluster, list(tiny_workload.jobs)), FirstStart)
    a, _ = _play_wrapped(named, FirstStart(named, last=True))
    b, _ = _play_wrapped(by_factory, FirstStart(by_factory, last=True))
    assert np.array_equal(a, b)


def test_the_wrapper_passes_the_env_checkers(tiny_cluster, tiny_workload, make_env):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the checkers warn that the env is wrapped)
        check_env(ReferenceReward(make_env(tiny_cluster, list(tiny_workload.jobs)), FirstStart),
                  skip_render_check=True)
        sb3_check_env(ReferenceReward(make_env(tiny_cluster, list(tiny_workload.jobs)), FirstStart), warn=True)


def test_the_trainer_uses_the_wrappers_core_and_gives_the_same_rewards():
    """agents.ppo's reward is frenzy_env.wrappers' (no copy), and its baseline-named wrapper gives exactly what the
    generic wrapper gives with baselines.make_policy."""
    import baselines
    from agents.ppo import reference_reward as reference
    from frenzy_env import wrappers
    from frenzy_env.env import FrenzyEnv

    assert reference.differenced_reward is differenced_reward and reference.RewardShaper is wrappers.RewardShaper
    assert reference.ReferenceCurve is wrappers.ReferenceCurve and reference.play_curve is wrappers.play_curve
    assert issubclass(reference.ReferenceReward, wrappers.ReferenceReward)
    assert issubclass(reference.ReferenceCache, wrappers.CurveCache)
    ours = reference.ReferenceReward(FrenzyEnv(workload="synthetic-small"), "srpt_est")
    generic = ReferenceReward(FrenzyEnv(workload="synthetic-small"), "srpt_est", make_policy=baselines.make_policy)
    for env in (ours, generic):
        env.reset(seed=1003)
    a, _ = _play_wrapped(ours, baselines.make_policy("fifo", ours), seed=1003)
    b, _ = _play_wrapped(generic, baselines.make_policy("fifo", generic), seed=1003)
    assert np.array_equal(a, b) and a.sum() != 0.0
