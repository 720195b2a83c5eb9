"""Scripted baselines act at their own times through wake-ups (env v1 timers), checked against hand computations:
A-SRPT releases at virtual completions, doubling's exploration steps and deferred resizes keep their times, and
Sia holds a round at every multiple of 60 s."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import make_policy
from baselines.base import ScriptedPolicy
from frenzy_env.env import FrenzyEnv
from frenzy_env.world.cluster import ClusterSpec

A100_2x64 = ClusterSpec.from_counts("x", {"A100-80GB": (2, 64)})
A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
# the flat start-up of env v2 (no model-size part): these tests pin the policies' timers to round numbers
FLAT = {"checkpoint_bandwidth": math.inf, "load_bandwidth": math.inf}


def _run(env: FrenzyEnv, policy, max_steps: int = 100_000) -> tuple[dict, list[tuple[float, int]]]:
    """Play one episode; returns the final info and the (time, action) of every decision."""
    env.reset(seed=0)
    policy.reset()
    decisions = []
    for _ in range(max_steps):
        action = int(policy.predict(None)[0])
        decisions.append((env.sim.now, action))
        _, _, term, trunc, info = env.step(action)
        if term or trunc:
            assert info["metrics"]["invalid_actions"] == 0
            return info, decisions
    raise AssertionError("episode did not end")


# ----------------------------------------------------------------------------------------------- A-SRPT
def _asrpt_jobs(make_job, make_env, third: bool):
    """A: 1 GPU for 100,000 s; B: 64 GPUs for 2,000 s (predicted = true run times at those counts), both at 0;
    with ``third``, an unrelated 1-GPU job at 50,000 s."""
    probe = make_env(A100_2x64, [make_job(0, 0, 1, batch_size=16, requested_gpus=1),
                                 make_job(1, 0, 1, batch_size=64, requested_gpus=64)], predictor="oracle")
    s = probe.sim
    alpha_a = float(s.iter_time[0, s.plan_index("A100-80GB", 1)])
    alpha_b = float(s.iter_time[1, s.plan_index("A100-80GB", 64)])
    jobs = [make_job(0, 0, 100_000 / alpha_a, batch_size=16, requested_gpus=1),
            make_job(1, 0, 2_000 / alpha_b, batch_size=64, requested_gpus=64)]
    if third:
        jobs.append(make_job(2, 50_000, 1_000, batch_size=16, requested_gpus=1))
    return make_env(A100_2x64, jobs, predictor="oracle", queue_slots="all", running_slots="all")


@pytest.mark.parametrize("third", [False, True])
def test_asrpt_releases_exactly_at_virtual_completions(make_job, make_env, third):
    """The paper's virtual single machine (G = 128 GPUs, SRPT): A's virtual work is (1/128) x 100,000 = 781.25 s,
    B's (64/128) x 2,000 = 1,000 s. SRPT runs A first: A completes at 781.25 s, then B at 781.25 + 1,000 =
    1,781.25 s. Starts are decisions: A starts at 781.25 s, B at 1,781.25 s (nothing else happens at those
    times; before timers both started at 0, and with the third job at 50,000 s strict release started them
    there)."""
    env = _asrpt_jobs(make_job, make_env, third)
    policy = make_policy("asrpt", env, predictor="perfect", tau=0.0, comm_heavy=math.inf)
    assert policy.release == "timer"  # the default
    info, _ = _run(env, policy)
    rec = env.sim.records
    assert info["metrics"]["finished"] == len(rec)
    np.testing.assert_allclose(policy.release_time[:2], [781.25, 1_781.25], atol=1e-6)
    np.testing.assert_allclose([rec[0].start_time, rec[1].start_time], [781.25, 1_781.25], atol=1e-6)
    assert rec[0].num_gpus == 1 and rec[1].num_gpus == 64
    if third:  # released at its own virtual completion, after its arrival (nothing else is left then)
        assert rec[2].start_time == pytest.approx(policy.release_time[2]) and rec[2].start_time > 50_000


@pytest.mark.parametrize("release, starts", [("lookahead", (0.0, 0.0)), ("strict", (50_000.0, 50_000.0))])
def test_asrpt_v0_release_modes_stay_available(make_job, make_env, release, starts):
    """The modes without a timer, as documented: lookahead releases at the last decision before the virtual
    completion (t = 0 here, nothing happens before); strict waits for the next event (the arrival at 50,000 s)."""
    env = _asrpt_jobs(make_job, make_env, third=True)
    policy = make_policy("asrpt", env, predictor="perfect", tau=0.0, comm_heavy=math.inf, release=release)
    _run(env, policy)
    rec = env.sim.records
    assert (rec[0].start_time, rec[1].start_time) == starts


def test_asrpt_heavy_job_takes_any_placement_exactly_at_its_deadline(make_job, make_env):
    """2 nodes x 8 V100 (G = 16); 4-GPU jobs A (5,000 s), B and C (8,000 s each) at 0: virtual works 1,250 s,
    2,000 s, 2,000 s, so A is released at 1,250 s (node 0), B at 3,250 s (node 0, best fit), C at 5,250 s (node
    1: node 0 is full until A ends at 1,250 + 30 + 5,000 = 6,280 s). From then on 4 + 4 GPUs are free until B
    ends (3,250 + 30 + 8,000 = 11,280 s). The heavy 8-GPU gpt2-large job D arrives at 7,000 s, alone in the
    virtual machine: released at 7,000 + (8/16) n alpha, it waits tau n alpha = 0.5 n alpha for a consolidated
    placement and takes the spread one exactly at that deadline, when no event happens."""
    cluster = ClusterSpec.from_counts("v2", {"V100-32GB": (2, 8)}, reference_gpu_type="V100-32GB")
    probe = make_env(cluster, [make_job(0, 0, 1, requested_gpus=4)], queue_slots="all", running_slots="all",
                     efficiency="flat")
    alpha4 = float(probe.sim.iter_time[0, probe.sim.plan_index("V100-32GB", 4)])
    jobs = [make_job(0, 0, 5_000 / alpha4, requested_gpus=4), make_job(1, 0, 8_000 / alpha4, requested_gpus=4),
            make_job(2, 0, 8_000 / alpha4, requested_gpus=4),
            make_job(3, 7_000, 2e3, model="gpt2-large", requested_gpus=8)]
    env = make_env(cluster, jobs, queue_slots="all", running_slots="all", efficiency="flat")  # v4's speed
    policy = make_policy("asrpt", env, predictor="perfect", tau=0.5, comm_heavy=1.2)  # spread 4 + 4: ~1.25x
    _run(env, policy)
    rec = env.sim.records
    assert policy.heavy[3] and not policy.heavy[:3].any()
    np.testing.assert_allclose([r.start_time for r in rec[:3]], [1_250, 3_250, 5_250], atol=1e-6)
    na = 2e3 * policy.alpha[3]  # D's predicted run time n alpha
    assert policy.release_time[3] == pytest.approx(7_000 + 0.5 * na)
    deadline = 7_000 + 0.5 * na + 0.5 * na
    assert deadline < 11_280 - 1
    assert rec[3].start_time == pytest.approx(deadline, abs=1e-6)


# ----------------------------------------------------------------------------------------------- doubling
def test_doubling_exploration_steps_last_their_stated_time(make_job, make_env):
    """One job alone on 8 A100s, strategy "exploratory", explore_time E = 60 s, start-up S = 30 s, restart
    overhead R = 10 s. It starts at 0 on 1 GPU; its first iteration is at S = 30; the step ends E later, at 90,
    when it is resized to 2 GPUs (first iteration at 90 + R + S = 130); then at 130 + E = 190 to 4 GPUs (first
    iteration 230), at 290 to 8 GPUs (first iteration 330), and at 330 + E = 390 the last step ends: the speed
    model is fitted from the four measurements. (Before timers each step lasted until the next event, here the
    job's finish: one size only.)"""
    env = make_env(A100_1x8, [make_job(0, 0, 3e5)], startup_time=30.0, restart_overhead=10.0, **FLAT)
    policy = make_policy("doubling", env, strategy="exploratory", explore_time=60.0)
    fitted_at: list[float] = []
    act = policy.act

    def watching_act(mask):
        had = 0 in policy.fitted if hasattr(policy, "fitted") else False
        a = act(mask)
        if not had and 0 in policy.fitted:
            fitted_at.append(env.sim.now)
        return a

    policy.act = watching_act
    _, decisions = _run(env, policy)
    moves = [(t, env.sim.plan_count[(a - env.first_start) % env.num_plans]) for t, a in decisions
             if a >= env.first_start]
    assert moves == [(0.0, 1), (90.0, 2), (190.0, 4), (290.0, 8)]
    assert fitted_at == [390.0]
    assert env.sim.records[0].restarts == 3


@pytest.mark.parametrize("cooldown, ready", [(None, 30.0), (60.0, 60.0)], ids=["v5-no-cooldown", "v6-cooldown"])
def test_doubling_resizes_a_starting_job_as_soon_as_the_env_allows(make_job, make_env, cooldown, ready):
    """Strategy "precompute" on 8 A100s and one V100: job 0 arrives alone at 0 and starts on all 8 A100s; job 1
    arrives at 10 s, while job 0 is still starting up (first iteration at S = 30 s). The env consults the policy
    then (job 1 could start on the V100); the recomputed allocation puts job 1 on the faster A100s and shrinks
    job 0 to 4. Without a cooldown (``resize_cooldown=None``, env v5's pacing) the env refuses the resize until
    30 s, the end of the start-up; with env v6's 60 s cooldown (the default) until 60 s, 60 s after job 0's
    start. The policy's timer makes it happen exactly then, and job 1 starts on the GPUs it frees (before timers,
    or with a timer at the start-up's end only under the cooldown: at the next event, job 0's finish, 4 h
    later)."""
    cluster = ClusterSpec.from_counts("h", {"A100-80GB": (1, 8), "V100-32GB": (1, 1)}, reference_gpu_type="A100-80GB")
    env = make_env(cluster, [make_job(0, 0, 2e5), make_job(1, 10, 2e5)], startup_time=30.0,
                   queue_slots="all", running_slots="all", resize_cooldown=cooldown, **FLAT)
    policy = make_policy("doubling", env)
    _, decisions = _run(env, policy)
    sim = env.sim
    moves = [(t, a >= env.first_resize, sim.plan_label((a - env.first_start) % env.num_plans))
             for t, a in decisions if a >= env.first_start]
    assert moves[:3] == [(0.0, False, "A100-80GBx8"), (ready, True, "A100-80GBx4"), (ready, False, "A100-80GBx4")]
    assert sim.records[1].start_time == ready


# ----------------------------------------------------------------------------------------------- Sia
def test_sia_holds_a_round_every_60_s_while_jobs_are_in_the_system(make_job, make_env):
    """Three jobs (arrivals at 5, 130 and 3,010 s; the first two done before 3,000 s): every multiple of 60
    s at which a job is in the system (submitted at or before it, finishing after it) is a round, and a decision
    time; the other rounds are the first decisions after arrivals into an empty system (5 s, 3,010 s)."""
    jobs = [make_job(0, 5, 2e4), make_job(1, 130, 1.5e4), make_job(2, 3010, 1e4)]
    env = make_env(A100_1x8, jobs, queue_slots="all", running_slots="all")
    policy = make_policy("sia", env)
    _, decisions = _run(env, policy)
    rec = env.sim.records
    sub = np.array([r.submit_time for r in rec])
    fin = np.array([r.finish_time for r in rec])
    assert fin[:2].max() < 2990  # an idle gap before job 2
    boundaries = np.arange(0.0, fin.max(), 60.0)
    busy = [t for t in boundaries.tolist() if ((sub <= t) & (t < fin)).any()]
    assert len(busy) > 20
    times = {t for t, _ in decisions}
    rounds = set(policy.rounds_at)
    assert set(busy) <= rounds and set(busy) <= times
    assert rounds - set(busy) == {5.0, 3010.0}
    assert policy.rounds == len(policy.rounds_at) == len(rounds)


# ----------------------------------------------------------------------------------------------- the helper
def test_wake_at_asks_once_per_time_and_waiting_becomes_legal(make_job, make_env):
    env = make_env(A100_1x8, [make_job(0, 0, 1e3)])
    env.reset(seed=0)
    policy = ScriptedPolicy(env)
    mask = env.action_masks()
    assert not mask[0]  # nothing pending: one queued job, nothing running, no arrival to come
    assert policy.wake_at(math.inf) is None and policy.wake_at(0.0) is None
    for _ in range(40):  # far more than the env's 16 requests per instant: asked once only
        assert policy.wake_at(100.0) == 100.0
    assert policy.wake_at(0.5) == 1.0  # at least 1 s ahead (the env's rule)
    assert env.view.pending_wakeups == (1.0, 100.0)
    assert policy.wait_action(mask) == 0  # legal now, though the mask was computed before the request
    assert env.action_masks()[0]
