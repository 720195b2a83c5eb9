"""Time in the environment: wake-ups (simulator timers), timed waits (agent actions), never skipping a job that
could start; values computed by hand on tiny instances, and a property test that no policy can stall time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frenzy_env.env import FrenzyEnv
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.simulator.core import MAX_WAKEUPS_PER_INSTANT, MIN_WAKEUP_INTERVAL
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.models import get_model

ONE_NODE = ClusterSpec.from_counts("one-node", {"A100-80GB": (1, 4)})


def _workload(*jobs: tuple[float, float]) -> Workload:
    """gpt2 jobs (batch 8, seq 512) of (submit time, iterations)."""
    return Workload("t", [JobSpec(i, s, get_model("gpt2"), 8, 512, it, requested_gpus=1) for i, (s, it) in
                          enumerate(jobs)])


def _sim(*jobs: tuple[float, float]) -> ClusterSimulator:
    return ClusterSimulator(ONE_NODE, _workload(*jobs), SimConfig(startup_time=30.0))


def test_wakeup_is_an_event_after_finishes_at_the_same_instant():
    sim = _sim((0.0, 1000.0), (10_000.0, 10.0))
    assert sim.start(0, 0)
    finish = sim.startup_seconds(0, 0) + 1000.0 * sim.iter_time[0, 0]  # start-up: 30 s + loading the states
    assert sim.next_event_time() == pytest.approx(finish)
    assert sim.request_wakeup(100.0) == 100.0  # earlier than the finish: the next event
    assert sim.request_wakeup(finish) == finish  # at the finish's instant: ordered after it
    assert sim.pending_wakeups == (100.0, finish)
    assert sim.advance() == 100.0 and sim.now == 100.0 and sim.woke and sim.status[0] == 2  # still running
    assert sim.advance() == pytest.approx(finish - 100.0)
    assert sim.woke and sim.finished == 1 and sim.pending_wakeups == ()  # the finish came first, same call
    assert sim.next_event_time() == 10_000.0  # the arrival


def test_wakeup_rules_min_interval_dedup_cap_reset():
    sim = _sim((0.0, 1000.0), (50_000.0, 10.0))
    assert sim.request_wakeup(sim.now - 5.0) == sim.now + MIN_WAKEUP_INTERVAL  # never sooner than 1 s ahead
    assert sim.request_wakeup(sim.now + MIN_WAKEUP_INTERVAL) == MIN_WAKEUP_INTERVAL  # the same event again
    assert len([e for e in sim._events if e[1] == 2]) == 1
    accepted = [sim.request_wakeup(100.0 + i) for i in range(MAX_WAKEUPS_PER_INSTANT + 5)]
    assert sum(t is not None for t in accepted) == MAX_WAKEUPS_PER_INSTANT - 2  # 2 asked already at this instant
    with pytest.raises(ValueError, match="finite"):
        sim.request_wakeup(math.inf)
    sim.advance()
    assert sim.now == 1.0 and sim.request_wakeup(500.0) == 500.0  # a new instant: the cap starts again
    sim.reset_state()
    assert sim.pending_wakeups == () and sim.next_event_time() == 0.0 or sim.next_event_time() == 50_000.0


def test_advance_to_stops_between_events_and_refuses_past_them():
    sim = _sim((0.0, 1000.0), (5000.0, 10.0))
    assert sim.start(0, 0)
    assert sim.advance_to(20.0) == 20.0 and sim.now == 20.0 and sim.finished == 0
    with pytest.raises(ValueError, match="next event"):
        sim.advance_to(6000.0)
    with pytest.raises(ValueError):
        sim.advance_to(10.0)  # the past


def test_timed_wait_goes_to_the_earlier_of_its_delay_and_the_next_event():
    env = FrenzyEnv(cluster=ONE_NODE, workload=_workload((0.0, 1e6), (3000.0, 1e6), (5000.0, 10.0)),
                    queue_slots=3, running_slots=3, wait_options=(60.0, 3600.0), startup_time=30.0)
    obs, _ = env.reset(seed=0)
    assert env.first_start == 3 and obs["action_mask"][:3].all()
    # job 0 on 1 GPU: nothing else is legal during its start-up, so the env runs to the next event (3,000 s)
    obs, reward, *_, info = env.step(env.start_action(0, 0))
    assert info["time"] == 3000.0 and reward == pytest.approx(-3000.0 / 3600.0)
    obs, reward, _, _, info = env.step(1)  # wait 60 s: no event before
    assert info["time"] == 3060.0 and reward == pytest.approx(-2 * 60.0 / 3600.0)  # jobs 0 and 1
    obs, reward, _, _, info = env.step(2)  # wait 1 h: the arrival at 5,000 s comes first
    assert info["time"] == 5000.0 and reward == pytest.approx(-2 * 1940.0 / 3600.0)
    assert info["queue_length"] == 2


def test_a_wakeup_returns_to_the_policy_where_the_env_would_advance():
    """Only "wait" is legal (job 0 holds every GPU, job 1 waits for them); without a timer the env advances to
    the finish by itself; with one, it returns at the timer."""
    jobs = [JobSpec(0, 0.0, get_model("gpt2"), 64, 512, 1e5, requested_gpus=4),
            JobSpec(1, 0.0, get_model("gpt2"), 64, 512, 10.0, requested_gpus=4)]

    def play(timer: float | None) -> tuple[float, float]:
        env = FrenzyEnv(cluster=ONE_NODE, workload=Workload("w", jobs), queue_slots=2, running_slots=2,
                        wait_options=())
        env.reset(seed=0)
        plan4 = env.sim.plan_index("A100-80GB", 4)
        if timer is not None:
            assert env.request_wakeup(timer) == timer
        *_, info = env.step(env.start_action(0, plan4))
        t1 = info["time"]
        *_, info = env.step(0) if t1 < 1e4 and timer is not None else (None, None, None, None, info)
        return t1, info["time"]

    no_timer, _ = play(None)
    assert no_timer > 1000.0  # ran past start-up to the finish of job 0
    at_timer, _ = play(500.0)
    assert at_timer == 500.0


def test_the_env_never_skips_a_job_beyond_the_window_that_could_start():
    """Queue window of 1: job 0 (llama-13b: 4 GPUs at least, even with gradient accumulation and pipeline stages)
    cannot start while job 2 holds 2 of the 4 GPUs, but job 1 (gpt2, beyond the window) could: the env stops
    instead of advancing to job 2's finish."""
    jobs = [JobSpec(0, 0.0, get_model("llama-13b"), 8, 512, 1e5, requested_gpus=4),
            JobSpec(1, 0.0, get_model("gpt2"), 8, 512, 100.0, requested_gpus=1),
            JobSpec(2, 0.0, get_model("gpt2"), 8, 512, 1e5, requested_gpus=2)]
    env = FrenzyEnv(cluster=ONE_NODE, workload=Workload("w", jobs), queue_slots=1, running_slots=4)
    env.reset(seed=0)
    sim = env.sim
    # job 0 fits only the 4-GPU plan slot (read by its index: the slot layout is the interface's)
    assert env.visible_queue.tolist() == [0]
    assert np.flatnonzero(sim.pred_ok[0]).tolist() == [sim.plan_index("A100-80GB", 4)]
    assert sim.start(2, sim.plan_index("A100-80GB", 2))  # the simulator directly: job 2 holds 2 GPUs
    env._settle()
    assert not env.action_masks()[env.first_start :].any()  # nothing visible can start
    assert env._hidden_start() and sim.now == 0.0  # job 1 could: the env did not advance
    wide = FrenzyEnv(cluster=ONE_NODE, workload=Workload("w", jobs), queue_slots="all", running_slots="all")
    assert wide.queue_slots == 3 and wide.running_slots == 3
    wide.reset(seed=0)
    assert wide.start_action(1, 0) is not None  # every job within reach


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    delays=st.lists(st.floats(-100.0, 5000.0, allow_nan=False), min_size=0, max_size=6),
    seed=st.integers(0, 1000),
)
def test_no_sequence_of_actions_stalls_time(delays, seed):
    """Random legal actions (starts, resizes, waits and timed waits) while asking for wake-ups at any delay,
    the past included: time never goes back, and it moves forward within a bounded number of steps (at one
    instant only finitely many starts and resizes are legal: a resized job is starting up again)."""
    env = FrenzyEnv(cluster=ONE_NODE, workload=_workload((0.0, 2e4), (100.0, 5e3), (300.0, 3e3), (300.0, 1e3)),
                    queue_slots=4, running_slots=4, wait_options=(60.0, 600.0, 3600.0))
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    last, same = 0.0, 0
    bound = 2 * env.sim.num_jobs + 2  # starts and resizes possible at one instant, plus one
    for _ in range(300):
        for d in delays:
            env.request_wakeup(env.sim.now + d)
        legal = np.flatnonzero(env.action_masks())
        obs, _, terminated, _, info = env.step(int(rng.choice(legal)))
        assert info["time"] >= last
        same = same + 1 if info["time"] == last else 0
        assert same <= bound, f"{same} steps without time moving at {last} s"
        last = info["time"]
        if terminated:
            obs, _ = env.reset(seed=seed + 1)
            last, same = 0.0, 0
