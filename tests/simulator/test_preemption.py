"""Preemption: the simulator's cost of a preemption, the env's opt-in preempt actions (``preemption=True``) and
the planner that uses them (``SiaPolicy(preempt=True)``)."""

from __future__ import annotations

import numpy as np
import pytest

from baselines import make_policy
from baselines.sia import SiaPolicy
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.simulator import QUEUED, ClusterSimulator, SimConfig
from frenzy_env.testing.checker import InvariantChecker
from frenzy_env.world.cluster import ClusterSpec

A100_1x1 = ClusterSpec.from_counts("one", {"A100-80GB": (1, 1)}, reference_gpu_type="A100-80GB")
A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
# env v5's preemption: the GPUs free and the job back in the queue at once, its save charged to its next start (v6's
# default "save_first" holds the GPUs while it saves: tests/simulator/test_stops.py)
V5_STOP = dict(stop_mode="v5", checkpoint_interval=None)


def test_preempt_then_restart_costs_what_a_resize_does(make_job, make_workload):
    """A job preempted at t = 100 and started again on the same plan at once makes its first iteration
    ``restart_seconds`` later, exactly as a resize there would; its progress is kept and the deferred cost is
    paid once. (Env v5's preemption, ``stop_mode="v5"``, and any number of actions per instant, so that the job
    starts again at the instant of its preemption.)"""
    sim = ClusterSimulator(A100_1x8, make_workload(make_job(0, 0.0, 1e6), make_job(1, 100.0, 1e3)),
                           SimConfig(startup_time=5.0, restart_overhead=10.0, one_action_per_instant=False, **V5_STOP))
    p1 = sim.plan_index("A100-80GB", 1)
    assert sim.start(0, p1)
    first = sim.attempts[0].progress_from
    sim.advance()  # t = 100: job 1 arrives
    assert sim.now == 100.0 and sim.running[0].progress_from < 100.0
    resize_cost = sim.restart_seconds(0, p1)
    start_cost = sim.startup_seconds(0, p1)
    done = (100.0 - first) / sim.iter_time[0, p1]
    assert sim.preempt(0)
    assert sim.status[0] == QUEUED and sim.done_iters[0] == pytest.approx(done, rel=1e-12)
    assert sim.resume_extra[0] == pytest.approx(resize_cost - start_cost, rel=1e-12) and sim.resume_extra[0] > 10.0
    assert sim.startup_seconds(0, p1) == pytest.approx(resize_cost, rel=1e-12)
    assert sim.start(0, p1)
    assert sim.attempts[-1].progress_from == pytest.approx(100.0 + resize_cost, rel=1e-12)
    assert sim.resume_extra[0] == 0.0 and sim.startup_seconds(0, p1) == pytest.approx(start_cost, rel=1e-12)
    assert sim.records[0].restarts == 1 and [a.outcome for a in sim.attempts] == ["preempted", "running"]
    while np.isnan(sim.records[0].finish_time):  # (job 1 stays queued: the episode itself never ends)
        sim.advance()
    expect = 100.0 + resize_cost + (1e6 - done) * sim.iter_time[0, p1]
    assert sim.records[0].finish_time == pytest.approx(expect, rel=1e-9)
    sim.check_invariants()


def test_env_without_preemption_keeps_its_action_space(make_job, make_env):
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e4)])
    assert env.action_space.n == env.first_preempt == env.first_resize + env.running_slots * env.num_plans
    env.reset(seed=0)
    env.step(env.start_action(0, env.sim.plan_index("A100-80GB", 1)))
    assert env.preempt_action(0) is None


def test_env_preempt_action_mask_and_step(make_job, make_env):
    """The preempt action of a running job is legal once its start-up is over (the rule of a resize); taking it
    puts the job back in the queue at once (env v5's preemption, ``stop_mode="v5"``) and counts a restart; taking it
    again is an illegal no-op."""
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e6), make_job(1, 0.0, 1e3)], preemption=True,
                   queue_slots=4, running_slots=3, **V5_STOP)
    assert env.action_space.n == env.first_preempt + 3
    assert env.observation_space["action_mask"].shape == (env.first_preempt + 3,)
    obs, info = env.reset(seed=0)
    checker = InvariantChecker(env, check_space=True)
    checker.on_reset(obs, info)
    plan = env.sim.plan_index("A100-80GB", 1)

    def step(action):
        checker.before_step(action)
        out = env.step(action)
        checker.after_step(action, *out)
        return out

    step(env.start_action(0, plan))  # job 1 could start too: the env stays at t = 0
    assert env.sim.now == 0.0
    stop = env.preempt_action(0)
    assert stop == env.first_preempt
    assert not env.action_masks()[stop]  # still starting up
    assert not env.action_masks()[env.first_preempt + 1 :].any()  # empty running slots
    while env.sim.now <= env.sim.running[0].progress_from:
        step(1)  # timed waits
    assert env.action_masks()[stop]
    _, reward, *_, info = step(stop)
    assert info["reward_components"]["invalid"] == 0.0
    assert env.sim.status[0] == QUEUED and env.sim.records[0].restarts == 1
    assert env.preempt_action(0) is None
    _, reward, *_, info = step(stop)
    assert info["reward_components"]["invalid"] == -env.invalid_action_penalty and info["invalid_actions"] == 1


def test_env_preemption_validates(make_job, make_env):
    for bad in ("yes", 1, None):
        with pytest.raises(ConfigError, match="preemption"):
            make_env(A100_1x8, [make_job(0, 0.0, 1e4)], preemption=bad)


def _short_job_arrives(make_job, make_env, **kwargs):
    """One GPU: job 0 (1e7 iterations) runs from t = 0; at 3,600 s job 1 (1e3 iterations) arrives."""
    env = make_env(A100_1x1, [make_job(0, 0.0, 1e7), make_job(1, 3600.0, 1e3)], preemption=True,
                   queue_slots="all", running_slots="all")
    env.reset(seed=0)
    policy = make_policy("sia_srpt", env, **kwargs)
    policy.reset()
    env.step(policy.act(env.action_masks()))
    while env.view.now < 3600.0:
        env.step(0)
    assert 0 in env.view.running and env.view.status[1] == QUEUED
    return env, policy


def test_sia_srpt_preempts_a_long_job_for_a_short_one(make_job, make_env):
    """On one GPU the short job's completion rate is about 1e4 times the long job's: with ``preempt`` the plan
    stops job 0 first and starts job 1 on the freed GPU; without it job 1 waits (the program must keep every
    running job), and a huge ``preempt_margin`` keeps job 0 as well."""
    env, policy = _short_job_arrives(make_job, make_env, preempt=True)
    plan = env.sim.plan_index("A100-80GB", 1)
    assert policy.plan_round() == [("preempt", 0, -1), ("start", 1, plan)]
    env, policy = _short_job_arrives(make_job, make_env)
    assert policy.plan_round() == []
    env, policy = _short_job_arrives(make_job, make_env, preempt=True, preempt_margin=1e6)
    assert policy.plan_round() == []


def test_preempting_plan_plays_the_short_job_first(make_job, make_env):
    """Whole episodes on one GPU (job 0: 3e4 iterations, about 53 minutes; job 1: 1e3, arriving at 600 s):
    with ``preempt`` job 1 starts on arrival and job 0 resumes after it, paying its restart; the average JCT
    is lower than without preemption, where job 1 waits for job 0 (and the next round). (Env v5's preemption,
    ``stop_mode="v5"``, which frees the GPU at the instant of the preemption.)"""
    jobs = [make_job(0, 0.0, 3e4), make_job(1, 600.0, 1e3)]
    results = {}
    for preempt in (False, True):
        env = make_env(A100_1x1, jobs, preemption=True, queue_slots="all", running_slots="all", **V5_STOP)
        ep = run_episode(env, make_policy("sia_srpt", env, preempt=preempt), seed=0)
        assert ep.metrics["invalid_actions"] == 0 and ep.metrics["finished"] == 2
        results[preempt] = (ep.metrics["avg_jct_h"], env.sim.records, [a.outcome for a in env.sim.attempts])
    _, records, outcomes = results[True]
    assert records[1].start_time == 600.0 and records[1].finish_time < records[0].finish_time
    assert outcomes == ["preempted", "finished", "finished"] and records[0].restarts == 1
    _, records, outcomes = results[False]
    # (the round after job 0's finish: sia_srpt re-plans every 60 s)
    assert records[0].finish_time <= records[1].start_time < records[0].finish_time + 60.0
    assert outcomes == ["finished", "finished"]
    assert results[True][0] < results[False][0]


def test_sia_preempt_validates(make_job, make_env):
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e4)])
    with pytest.raises(ConfigError, match="preemption=True"):
        SiaPolicy(env, preempt=True)
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e4)], preemption=True)
    for bad in (-1.0, float("inf"), "1"):
        with pytest.raises(ConfigError, match="preempt_margin"):
            SiaPolicy(env, preempt=True, preempt_margin=bad)
    with pytest.raises(ConfigError, match="preempt must"):
        SiaPolicy(env, preempt="yes")
    assert np.isfinite(SiaPolicy(env, preempt=True).preempt_margin)
