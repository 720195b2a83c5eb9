"""The pacing rules (``SimConfig.resize_cooldown``, ``SimConfig.one_action_per_instant``): hand-computed instants
at which a resize, a preemption or a start is legal, the same rules in the simulator, the masks and the env's
invalid-action handling, env v6's defaults (both rules on, a 60 s cooldown) and the v5 keywords
(``resize_cooldown=None``, ``one_action_per_instant=False``) leaving env v5's dynamics as they were, and a property
test of the bound they give: with both on, no sequence of legal actions keeps the clock still for more than (jobs
present + 1) steps."""

from __future__ import annotations

import copy
import math
import pickle

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frenzy_env  # noqa: F401  (registers the ids)
from frenzy_env.errors import ConfigError
from frenzy_env.simulator import QUEUED, ClusterSimulator, SimConfig
from frenzy_env.testing.checker import InvariantChecker
from frenzy_env.world.cluster import ClusterSpec
from tests.strategies import clusters, workloads

A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
# start-up 30 s and restart overhead 10 s, no load or checkpoint time: a start makes progress 30 s later, a
# resize 40 s later
FLAT = dict(startup_time=30.0, restart_overhead=10.0, load_bandwidth=math.inf, checkpoint_bandwidth=math.inf)
# starts and restarts free: progress from the very instant of the action (only the pacing rules hold a job)
FREE = dict(startup_time=0.0, restart_overhead=0.0, load_bandwidth=math.inf, checkpoint_bandwidth=math.inf)
# env v5's pacing (no cooldown, any number of actions per instant: v6's defaults are a 60 s cooldown and one action)
V5_PACING = dict(resize_cooldown=None, one_action_per_instant=False)
# env v5's preemption (the GPUs free and the job back in the queue at once: v6's default "save_first" holds them)
V5_STOP = dict(stop_mode="v5", checkpoint_interval=None)


def _sim(make_job, make_workload, jobs=1, **config) -> ClusterSimulator:
    return ClusterSimulator(A100_1x8, make_workload(*[make_job(j, 0.0, 1e6) for j in range(jobs)]), SimConfig(**config))


def _advance_to(sim: ClusterSimulator, t: float) -> None:
    sim.request_wakeup(t)
    sim.advance()
    assert sim.now == t


@pytest.mark.parametrize(
    ("field", "value"),
    [("resize_cooldown", -1.0), ("resize_cooldown", math.nan), ("resize_cooldown", math.inf),
     ("resize_cooldown", True), ("resize_cooldown", "60"), ("one_action_per_instant", 1),
     ("one_action_per_instant", "yes"), ("one_action_per_instant", None)],
)
def test_bad_values_are_refused_naming_the_field_and_the_value(field, value):
    with pytest.raises(ConfigError, match=rf"{field} must be .*got {value!r}".replace("(", r"\(")):
        SimConfig(**{field: value})


def test_the_env_and_gym_make_take_the_keywords():
    env = gym.make("frenzy/HeteroClusterSmall-v5", resize_cooldown=60, one_action_per_instant=True).unwrapped
    assert env.sim.config.resize_cooldown == 60 and env.sim.config.one_action_per_instant is True
    default = gym.make("frenzy/HeteroClusterSmall-v5").unwrapped
    assert default.observation_space == env.observation_space and default.action_space == env.action_space
    with pytest.raises(ConfigError, match="resize_cooldown"):
        gym.make("frenzy/HeteroClusterSmall-v5", resize_cooldown=-5)


def test_cooldown_holds_resizes_and_preemptions_for_its_seconds_after_a_start_or_resize(make_job, make_workload):
    """Cooldown 60 s: started at 0 (progress from 30), the job may be resized from 60, not at 30 or 59; resized at
    60 (progress from 100), it is held until 120 although its start-up ends at 100. (Under v5's preemption and
    without the one-action rule, so that the job preempted at 120 is back in the queue and starts again at 120.)"""
    sim = _sim(make_job, make_workload, resize_cooldown=60.0, one_action_per_instant=False, **V5_STOP, **FLAT)
    p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
    job = np.array([0])
    assert sim.start(0, p1)
    for t in (30.0, 59.0):
        _advance_to(sim, t)
        assert not sim.resize_ready(job)[0] and not sim.resize_mask(job).any()
        assert not sim.resize(0, p2) and not sim.preempt(0) and sim.restarts == 0
    _advance_to(sim, 60.0)
    assert sim.resize_ready(job)[0] and sim.resize_mask(job)[0, p2]
    assert sim.resize(0, p2) and sim.running[0].progress_from == 100.0
    for t in (100.0, 119.0):
        _advance_to(sim, t)
        assert not sim.resize_ready(job)[0] and not sim.resize_mask(job).any() and not sim.preempt(0)
    _advance_to(sim, 120.0)
    assert sim.resize_mask(job)[0, p1] and sim.preempt(0) and sim.status[0] == QUEUED
    assert sim.start(0, p1)  # a cooldown holds running jobs only: a preempted job starts again at once


def test_without_a_cooldown_the_start_up_alone_holds_a_resize(make_job, make_workload):
    """``resize_cooldown=None`` (env v5's) or 0: v5's rule, a resize once the start-up is over. The default (env
    v6's) is a 60 s cooldown, which still holds the job at 30."""
    assert SimConfig().resize_cooldown == 60.0
    sim = _sim(make_job, make_workload, **FLAT)
    p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
    assert sim.start(0, p1)
    _advance_to(sim, 30.0)
    assert not sim.resize_mask(np.array([0])).any() and not sim.resize(0, p2)
    for config in ({"resize_cooldown": None}, {"resize_cooldown": 0.0}, V5_PACING):
        sim = _sim(make_job, make_workload, **FLAT, **config)
        p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
        assert sim.start(0, p1)
        _advance_to(sim, 29.0)
        assert not sim.resize_mask(np.array([0])).any()
        _advance_to(sim, 30.0)
        assert sim.resize(0, p2) and sim.running[0].progress_from == 70.0


def test_one_action_per_instant_holds_a_job_until_the_clock_moves(make_job, make_workload):
    """Free starts and restarts: at t = 0 job 0 is started and may then take no other action before t = 1 (no
    resize, no preemption, though its start-up is over); job 1 still may act at 0. Preempted at 1, job 0 is not
    started again before 2, the wake-up the preemption set. (No cooldown and v5's preemption, so that the rule
    alone holds the job and the preempted job is back in the queue at once.)"""
    sim = _sim(make_job, make_workload, jobs=2, one_action_per_instant=True, resize_cooldown=None, **V5_STOP, **FREE)
    p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
    both = np.array([0, 1])
    assert sim.start(0, p1) and sim.running[0].progress_from == 0.0
    assert sim.last_action.tolist() == [0.0, -math.inf]
    assert not sim.resize_ready(np.array([0]))[0] and not sim.resize_mask(np.array([0])).any()
    assert not sim.resize(0, p2) and not sim.preempt(0)
    assert sim.start_mask(both)[1, p1] and sim.start(1, p1)
    _advance_to(sim, 1.0)
    assert sim.resize_ready(both).all() and sim.preempt(0)
    assert not sim.start_mask(both)[0].any() and not sim.start(0, p1)
    assert sim.pending_wakeups == (2.0,)  # the preemption's: the first instant job 0 may start again
    assert sim.resize(1, p2)  # another job: free to act
    _advance_to(sim, 2.0)
    assert sim.start_mask(both)[0, p1] and sim.start(0, p1)
    out = np.ones((4, sim.num_plans), dtype=bool)  # both masks at once (no queued job): job 0 held, job 1 not
    count = sim.legal_masks(np.zeros(0, np.int64), both, 2, out)
    assert not out[:3].any() and out[3].any() and (out[2:] == sim.resize_mask(both)).all() and count == out.sum()


def test_a_job_out_of_memory_at_the_instant_of_its_start_gets_a_wake_up(make_job, make_workload):
    """``oom_delay=0``: a start that does not fit fails at once; the job, back in the queue at the instant it was
    started, may not start again before the clock moves, and with nothing else pending a wake-up 1 s later is
    what moves it (in the env: no deadlock, no empty mask)."""
    one_gpu = ClusterSpec.from_counts("a40", {"A100-40GB": (2, 1)}, reference_gpu_type="A100-40GB")
    workload = make_workload(make_job(0, 0.0, 1.0, batch_size=64, seq_len=512))
    sim = ClusterSimulator(one_gpu, workload, SimConfig(predictor="frenzy", oom_delay=0.0, one_action_per_instant=True))
    doomed = np.flatnonzero(sim.avail[0] & ~sim.true_ok[0])
    assert doomed.size  # the paper's formula admits a plan that does not fit
    assert sim.start(0, int(doomed[0])) and sim.advance() == 0.0
    assert sim.status[0] == QUEUED and sim.pending_wakeups == (1.0,) and not sim.start_mask(np.array([0])).any()
    assert sim.advance() == 1.0 and sim.start_mask(np.array([0])).any()
    env = frenzy_env.FrenzyEnv(cluster=one_gpu, workload=workload, predictor="frenzy", oom_delay=0.0,
                               one_action_per_instant=True)
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.start_action(0, int(doomed[0])))  # fails at 0; the env moves to the wake-up
    assert info["time"] == 1.0 and info["ooms"] == 1 and env.action_masks()[env.first_start :].any()


def test_without_the_rules_a_job_may_act_without_bound_at_one_instant(make_job, make_workload):
    """What the rules bound: with free restarts and env v5's pacing and preemption (``resize_cooldown=None``,
    ``one_action_per_instant=False``, ``stop_mode="v5"``), one job is started, resized ten times and preempted and
    started again at t = 0. Under the defaults (env v6's: both rules on) the start is its only action there."""
    default = _sim(make_job, make_workload, **FREE)
    assert default.config.one_action_per_instant is True
    assert default.start(0, default.plan_index("A100-80GB", 1))
    assert not default.resize(0, default.plan_index("A100-80GB", 2)) and not default.preempt(0)
    sim = _sim(make_job, make_workload, **V5_PACING, **V5_STOP, **FREE)
    p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
    assert sim.start(0, p1)
    for k in range(10):
        assert sim.resize(0, (p2, p1)[k % 2])
    assert sim.preempt(0) and sim.start(0, p1)
    assert sim.now == 0.0 and len(sim.attempts) == 12  # 12 allocations: 13 actions at one instant


def test_last_action_is_reset_copied_and_pickled_with_the_state(make_job, make_workload):
    sim = _sim(make_job, make_workload, one_action_per_instant=True, resize_cooldown=60.0, **FREE)
    p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
    assert sim.start(0, p1)
    for other in (copy.deepcopy(sim), pickle.loads(pickle.dumps(sim))):
        assert other.last_action.tolist() == [0.0] and not other.resize(0, p2)
        _advance_to(other, 60.0)
        assert other.resize(0, p2)
    assert sim.now == 0.0 and not sim.resize_mask(np.array([0])).any()  # the original is untouched
    sim.reset_state()
    assert sim.last_action.tolist() == [-math.inf] and sim.start(0, p1)


def test_env_masks_and_invalid_actions_follow_the_cooldown(make_job, make_env):
    """In the env, a held job's resize and preempt actions are masked (in the observation's mask too), and
    taking one is an invalid action: a penalised no-op, not an error."""
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e6)], resize_cooldown=60.0, preemption=True, **FLAT)
    env.reset(seed=0)
    sim = env.sim
    p1, p2 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
    env.request_wakeup(30.0)
    obs, *_ = env.step(env.start_action(0, p1))  # nothing else is legal: the env advances to the wake-up
    assert sim.now == 30.0 and sim.running[0].progress_from == 30.0
    resize, preempt = env.resize_action(0, p2), env.preempt_action(0)
    assert not obs["action_mask"][resize] and not obs["action_mask"][preempt]
    for action in (resize, preempt):
        _, reward, *_, info = env.step(action)
        assert reward == -env.invalid_action_penalty and info["time"] == 30.0 and 0 in sim.running
    assert info["invalid_actions"] == 2 and sim.restarts == 0
    env.request_wakeup(60.0)
    obs, *_ = env.step(0)
    assert sim.now == 60.0 and obs["action_mask"][resize] and obs["action_mask"][preempt]
    _, _, _, _, info = env.step(preempt)
    assert info["invalid_actions"] == 2 and sim.status[0] == QUEUED


def test_the_defaults_leave_the_episode_as_it_was():
    """The keywords at their defaults, explicitly or not, play the same masked-random episode (actions, rewards
    and observations), and with both rules on the same seed plays another one."""

    def play(**kw):
        env = gym.make("frenzy/HeteroClusterSmall-v5", preemption=True, **kw).unwrapped
        obs, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        trace = []
        for _ in range(1500):
            a = int(rng.choice(np.flatnonzero(env.action_masks())))
            obs, reward, term, trunc, info = env.step(a)
            trace.append((a, reward, info["time"], obs["running"].tobytes(), obs["action_mask"].tobytes()))
            if term or trunc:
                break
        return trace

    default = play()
    assert play(resize_cooldown=None, one_action_per_instant=False) == default
    assert play(resize_cooldown=0.0) == default
    assert play(resize_cooldown=60.0, one_action_per_instant=True) != default


# ----------------------------------------------------------------------------------------- the bound
PACED_SIM = st.fixed_dictionaries(
    {
        "predictor": st.sampled_from(["frenzy", "extended", "oracle"]),
        "startup_time": st.sampled_from([0.0, 30.0]),
        "restart_overhead": st.sampled_from([0.0, 10.0]),
        "load_bandwidth": st.sampled_from([math.inf, 2.5e9]),
        "checkpoint_bandwidth": st.sampled_from([math.inf, 2.5e9]),
        "oom_delay": st.sampled_from([None, 0.0, 30.0]),
        "max_plan_gpus": st.sampled_from([1, 2, 4, 64]),
        "resize_cooldown": st.sampled_from([0.5, 60.0, 600.0]),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    cluster=clusters(),
    workload=workloads(),
    sim_options=PACED_SIM,
    slots=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 2),
    picks=st.lists(st.integers(0, 2**20), min_size=50, max_size=300),
)
def test_with_both_rules_the_clock_never_stays_still_for_more_than_the_jobs_present_plus_one(
    cluster, workload, sim_options, slots, seed, picks
):
    """Arbitrary legal actions, never a wait while a start, resize or preemption is legal: the steps at one
    ``now`` are at most the jobs in the system there plus one (the step that moved the clock there). Each action
    at an instant acts on a job not acted on before at it, and nothing arrives before the clock moves."""
    env = frenzy_env.FrenzyEnv(cluster=cluster, workload=workload, queue_slots=slots, running_slots=slots,
                               preemption=True, one_action_per_instant=True, **sim_options)
    checker = InvariantChecker(env)
    obs, info = env.reset(seed=seed)
    checker.on_reset(obs, info)
    sim = env.sim
    at, run, present = info["time"], 0, sim.jobs_in_system  # the run of steps at one instant
    for raw in picks:
        mask = env.action_masks()
        moves = np.flatnonzero(mask[env.first_start :])
        action = env.first_start + int(moves[raw % moves.size]) if moves.size else 0
        checker.before_step(action)
        obs, reward, term, trunc, info = env.step(action)
        checker.after_step(action, obs, reward, term, trunc, info)
        assert info["invalid_actions"] == 0
        if info["time"] == at:
            run += 1
            assert run <= present + 1, f"{run} steps at t = {at} with {present} jobs present"
        else:
            at, run, present = info["time"], 1, sim.jobs_in_system
        if term or trunc:
            break
