"""Comparators as the papers used them: strict vs backfilling FIFO, SJF at requested counts, ``srpt_est`` (order by
estimate, growth into idle GPUs), A-SRPT's forest trained on history. Tiny hand-computed instances."""

from __future__ import annotations

import numpy as np
import pytest

from baselines import POLICIES, make_policy
from baselines.doubling import greedy_allocation
from baselines.fifo import FifoPolicy, SjfGreedyPolicy, SjfPolicy
from baselines.srpt import SrptEstPolicy
from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.workload import Workload
from frenzy_env.world.cluster import ClusterSpec
from tests.episodes import play_episode as _play

A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
A100_1x1 = ClusterSpec.from_counts("one", {"A100-80GB": (1, 1)}, reference_gpu_type="A100-80GB")




def _seconds_to_iterations(make_env, make_job, gpus: int, seconds: float) -> float:
    probe = make_env(A100_1x8, [make_job(0, 0, 1)])
    return seconds / float(probe.sim.iter_time[0, probe.sim.plan_index("A100-80GB", gpus)])


def test_new_names_are_registered():
    assert {"srpt_est", "fifo_strict", "sjf", "sjf_greedy"} <= set(POLICIES)
    assert POLICIES["sjf"] is SjfPolicy and POLICIES["sjf_greedy"] is SjfGreedyPolicy
    assert POLICIES["srpt_est"] is SrptEstPolicy


# ----------------------------------------------------------------------------------------------- FIFO
def test_strict_fifo_blocks_behind_a_head_that_does_not_fit(make_job, make_env):
    # j0 holds 4 of 8 GPUs for ~1000 s; j1 (t=10) asks for 8 and cannot start before j0 ends; j2 (t=20) asks
    # for 1. Backfilling starts j2 at once at t=20; strict FCFS keeps it behind j1.
    jobs = [make_job(0, 0, _seconds_to_iterations(make_env, make_job, 4, 1000), requested_gpus=4),
            make_job(1, 10, 100, requested_gpus=8), make_job(2, 20, 100, requested_gpus=1)]
    starts = {}
    for name, kw in (("fifo", {}), ("fifo_strict", {}), ("fifo", {"backfill": False})):
        env = make_env(A100_1x8, jobs)
        policy = make_policy(name, env, **kw)
        info = _play(env, policy)
        assert info["metrics"]["finished"] == 3
        rec = env.sim.records
        assert [rec[j].num_gpus for j in range(3)] == [4, 8, 1]  # requested counts
        starts[(name, policy.backfill)] = [rec[j].start_time for j in range(3)]
    back = starts[("fifo", True)]
    assert back[2] == pytest.approx(20.0)  # backfilled beside j0
    assert back[1] >= back[0] + 1000.0 - 1e-6  # j1 still waits for j0
    for strict in (starts[("fifo_strict", False)], starts[("fifo", False)]):
        assert strict[1] == pytest.approx(back[1])  # j1 when j0 is done
        assert strict[2] >= strict[1]  # j2 strictly behind the head
        assert strict[2] > 1000.0
    with pytest.raises(ConfigError, match="backfill"):
        FifoPolicy(make_env(A100_1x8, jobs), backfill="no")


# ----------------------------------------------------------------------------------------------- SJF
def test_sjf_orders_by_true_work_at_requested_counts(make_job, make_env):
    # j0 takes the whole node for ~500 s; j1 (long, t=10) and j2 (short, t=20) each ask for 8 GPUs. SJF starts
    # the short j2 first when j0 ends, on exactly its 8 requested GPUs; FIFO starts j1 first.
    it8 = _seconds_to_iterations(make_env, make_job, 8, 1.0)
    jobs = [make_job(0, 0, 500 * it8, requested_gpus=8), make_job(1, 10, 3000 * it8, requested_gpus=8),
            make_job(2, 20, 100 * it8, requested_gpus=8)]
    order = {}
    for name in ("sjf", "fifo"):
        env = make_env(A100_1x8, jobs)
        info = _play(env, make_policy(name, env))
        assert info["metrics"]["finished"] == 3
        rec = env.sim.records
        assert all(rec[j].num_gpus == 8 for j in range(3))
        order[name] = sorted(range(3), key=lambda j: rec[j].start_time)
    assert order["sjf"] == [0, 2, 1] and order["fifo"] == [0, 1, 2]


def test_sjf_takes_the_requested_count_and_sjf_greedy_does_not(make_job, make_env):
    jobs = [make_job(0, 0, 5e4, requested_gpus=2)]
    env = make_env(A100_1x8, jobs)
    _play(env, make_policy("sjf", env))
    assert env.sim.records[0].num_gpus == 2  # no greed: the idle 6 GPUs stay idle
    env = make_env(A100_1x8, jobs)
    _play(env, make_policy("sjf_greedy", env))
    assert env.sim.records[0].num_gpus == 8  # the v0-v2 oracle: every GPU that speeds the job up
    assert make_policy("sjf", env).oracle and make_policy("sjf_greedy", env).oracle


# ----------------------------------------------------------------------------------------------- srpt_est
def _start_order(env, policy) -> list[int]:
    info = _play(env, policy)
    assert info["metrics"]["finished"] == env.sim.num_jobs
    rec = env.sim.records
    return sorted(range(env.sim.num_jobs), key=lambda j: rec[j].start_time)


def test_srpt_est_orders_by_estimate_not_truth(make_job, make_env):
    # one GPU: j0 runs first; j1 (long) and j2 (short) wait. With exact work estimates srpt_est starts the short
    # j2 before j1. With work_info="none" every estimate is the workload's median, the estimated areas tie and
    # arrival order decides: the truth (j2 is shorter) is never read.
    jobs = [make_job(0, 0, 2000), make_job(1, 10, 50_000), make_job(2, 20, 1000)]
    env = make_env(A100_1x1, jobs)
    assert _start_order(env, make_policy("srpt_est", env, grow=False)) == [0, 2, 1]
    env = make_env(A100_1x1, jobs, work_info="none")
    env.reset(seed=0)
    assert env.sim.work_estimate[1] == env.sim.work_estimate[2]  # no information
    assert _start_order(env, make_policy("srpt_est", env, grow=False)) == [0, 1, 2]
    # the oracle reads the truth in the same setting
    env = make_env(A100_1x1, jobs, work_info="none")
    assert _start_order(env, make_policy("sjf", env)) == [0, 2, 1]


def test_srpt_est_area_is_estimated_remaining_gpu_seconds(make_job, make_env):
    jobs = [make_job(0, 0, 3000), make_job(1, 0, 1000)]
    env = make_env(A100_1x8, jobs)
    env.reset(seed=0)
    policy = SrptEstPolicy(env)
    sim = env.sim
    area = sim.plan_count[None, :] * sim.iter_time[:2]
    expect = sim.work_estimate[:2] * np.where(sim.pred_ok[:2], area, np.inf).min(axis=1)
    assert policy.estimated_area(np.array([0, 1])) == pytest.approx(expect)
    assert policy.admission_order(np.array([0, 1])).tolist() == [1, 0]


def test_srpt_est_grows_into_idle_gpus_by_the_doubling_rule(make_job, make_env):
    # one job alone on 8 GPUs: admitted at 1 GPU, then doubled while the estimated time saved per added GPU is
    # positive -- the allocation greedy_allocation computes from the env's speeds; grow=False keeps 1 GPU
    jobs = [make_job(0, 0, 1e5)]
    env = make_env(A100_1x8, jobs)
    env.reset(seed=0)
    sim = env.sim
    levels = np.array([1, 2, 4, 8])
    speed = 1.0 / sim.iter_time[:1, [sim.plan_index("A100-80GB", n) for n in levels]]
    expect = int(greedy_allocation(sim.work_estimate[:1], speed, levels, np.zeros(1, dtype=int), np.array([8]))[0])
    assert expect > 1
    info = _play(env, SrptEstPolicy(env))
    assert info["metrics"]["finished"] == 1
    assert env.sim.records[0].num_gpus == expect  # started at 1 and resized up: the doubling rule's size
    assert env.sim.records[0].restarts == 0  # the job's target is known at its start: it starts on it
    env = make_env(A100_1x8, jobs)
    _play(env, SrptEstPolicy(env, grow=False))
    assert env.sim.records[0].num_gpus == 1 and env.sim.records[0].restarts == 0
    with pytest.raises(ConfigError, match="grow"):
        SrptEstPolicy(env, grow=1)


def test_srpt_est_growth_weights_favour_the_short_job(make_job, make_env):
    # two admitted jobs on 1 GPU each, 1 GPU free; speeds f(1) = 1, f(2) = 1.8, f(4) = 3.2 it/s for both;
    # remaining 100 (A) and 1000 (B) iterations. Doubling's gain Q (1/f(1) - 1/f(2)) / 1: A 44.4, B 444 -> B
    # doubles. srpt weighs it by 1 / T^2 (T = Q / f(1)): A 44.4 / 100^2 = 0.00444 > B 444 / 1000^2 -> A doubles.
    env = make_env(A100_1x8, [make_job(0)])
    speed = np.array([[1.0, 1.8, 3.2], [1.0, 1.8, 3.2]])
    rem = np.array([100.0, 1000.0])
    sizes, pool, cap = np.array([1, 2, 4]), np.zeros(2, dtype=int), np.array([3])
    srpt = SrptEstPolicy(env)
    assert srpt.growth_weights(rem, speed) == pytest.approx([0.01, 0.001])
    assert greedy_allocation(srpt.growth_weights(rem, speed), speed, sizes, pool, cap).tolist() == [2, 1]
    plain = SrptEstPolicy(env, growth="doubling")
    assert plain.growth_weights(rem, speed).tolist() == rem.tolist()
    assert greedy_allocation(plain.growth_weights(rem, speed), speed, sizes, pool, cap).tolist() == [1, 2]
    with pytest.raises(UnknownNameError, match="growth"):
        SrptEstPolicy(env, growth="fastest")


def test_srpt_est_grows_a_running_job_when_the_other_finishes(make_job, make_env):
    # two jobs share the node; when the short one ends, the long one is given the freed GPUs (a resize)
    jobs = [make_job(0, 0, 2e3), make_job(1, 0, 2e5)]
    env = make_env(A100_1x8, jobs, restart_overhead=10.0)
    info = _play(env, SrptEstPolicy(env))
    assert info["metrics"]["finished"] == 2
    rec = env.sim.records
    assert rec[1].restarts >= 1 and rec[1].num_gpus == 8


# ----------------------------------------------------------------------------------------------- A-SRPT history
def test_asrpt_forest_trained_on_history_predicts_a_recurring_job(make_job, make_env):
    # ten finished jobs of each group (a forest's bootstrap samples then hold both groups, and its trees split
    # on the group: every leaf holds one group's iterations)
    history = [make_job(i, 10 * i, 700 if i % 2 else 4000, group=7 if i % 2 else 3) for i in range(20)]
    jobs = [make_job(0, 0, 690, group=7), make_job(1, 5, 100, group=9)]
    env = make_env(A100_1x8, jobs)
    warm = make_policy("asrpt", env, history=history)
    cold = make_policy("asrpt", env)
    for policy in (warm, cold):
        _play(env, policy)
    # group 7 is recurring: the trained forest predicts its history's 700 iterations; group 9 was never seen
    assert warm.pred_iters[0] == pytest.approx(700.0)
    assert warm.pred_iters[1] == 0.0
    assert cold.pred_iters[0] == 0.0  # cold start: the paper's zero for an unseen group
    assert warm.forest.predict(make_job(5, 0, 1, group=3)) == pytest.approx(4000.0)
    # a Workload is accepted as well
    trained = make_policy("asrpt", env, history=Workload("h", tuple(history)))
    _play(env, trained)
    assert trained.pred_iters[0] == pytest.approx(700.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"history": [1, 2]}, r"history\[0\] must be a JobSpec"),
        ({"history": "jobs.csv"}, "history must be a Workload"),
        ({"history": [], "predictor": "perfect"}, "needs predictor='forest'"),
    ],
)
def test_asrpt_history_bad_input(make_job, make_env, kwargs, match):
    env = make_env(A100_1x8, [make_job(0)])
    with pytest.raises(ConfigError, match=match):
        make_policy("asrpt", env, **kwargs)
