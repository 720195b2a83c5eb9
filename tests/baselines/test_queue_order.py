"""A-SRPT's comparators (``spwf``, ``fifo_he``, ``sjf_he``) on the shared Heavy-Edge placement: tiny hand-computed
instances, registry, legal episodes."""

from __future__ import annotations

import pytest

from baselines import POLICIES, make_policy
from baselines.queue_order import FifoHeavyEdgePolicy, SjfHeavyEdgePolicy, SpwfPolicy
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.world.cluster import ClusterSpec
from tests.episodes import play_episode as _play

A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
V100_2x8 = ClusterSpec.from_counts("v2", {"V100-32GB": (2, 8)}, reference_gpu_type="V100-32GB")
NEW = ("spwf", "fifo_he", "sjf_he")


def test_registry_and_keywords():
    assert POLICIES["spwf"] is SpwfPolicy and POLICIES["fifo_he"] is FifoHeavyEdgePolicy
    assert POLICIES["sjf_he"] is SjfHeavyEdgePolicy
    env = FrenzyEnv(workload="synthetic-small")
    assert make_policy("spwf", env).order == "pending_work" and make_policy("sjf_he", env).order == "run_time"
    assert make_policy("fifo_he", env).order == "arrival" and make_policy("fifo_he", env).placement == "heavy_edge"
    assert make_policy("spwf", env, predictor="perfect").oracle and not make_policy("spwf", env).oracle
    assert make_policy("asrpt", env).placement == "heavy_edge"  # A-SRPT's default is the shared rule
    with pytest.raises(UnknownNameError, match="placement"):
        make_policy("spwf", env, placement="scatter")
    with pytest.raises(UnknownNameError, match="placement"):
        make_policy("asrpt", env, placement="scatter")
    with pytest.raises(ConfigError, match="tau"):
        make_policy("fifo_he", env, tau=-1)
    with pytest.raises(ConfigError, match="history"):
        make_policy("spwf", env, predictor="perfect", history=[])


def _it(make_env, make_job, cluster, gpu_type, gpus, seconds, efficiency="microbatch", **kw):
    probe = make_env(cluster, [make_job(0, 0, 1, requested_gpus=gpus, **kw)], efficiency=efficiency)
    return seconds / float(probe.sim.iter_time[0, probe.sim.plan_index(gpu_type, gpus)])


def test_orders_pick_the_first_job_by_hand(make_job, make_env):
    # One node of 8 A100s; j0 (8 GPUs, 500 s) holds it. Waiting: j1 (t=10) 8 GPUs x 100 s = 800 GPU-s,
    # j2 (t=20) 1 GPU x 400 s = 400 GPU-s, j3 (t=30) 4 GPUs x 150 s = 600 GPU-s. When j0 ends:
    # fifo_he starts j1 (first to arrive), spwf j2 (least pending GPU-seconds), sjf_he j1 (shortest run time).
    # Each on exactly its requested GPUs of the node.
    jobs = [make_job(0, 0, _it(make_env, make_job, A100_1x8, "A100-80GB", 8, 500), requested_gpus=8),
            make_job(1, 10, _it(make_env, make_job, A100_1x8, "A100-80GB", 8, 100), requested_gpus=8),
            make_job(2, 20, _it(make_env, make_job, A100_1x8, "A100-80GB", 1, 400), requested_gpus=1),
            make_job(3, 30, _it(make_env, make_job, A100_1x8, "A100-80GB", 4, 150), requested_gpus=4)]
    expect = {"fifo_he": 1, "spwf": 2, "sjf_he": 1}
    for name, first in expect.items():
        env = make_env(A100_1x8, jobs)
        policy = make_policy(name, env, predictor="perfect")
        info = _play(env, policy)
        rec = env.sim.records
        assert info["metrics"]["finished"] == 4 and info["metrics"]["invalid_actions"] == 0
        assert [rec[j].num_gpus for j in range(4)] == [8, 8, 1, 4]
        after = sorted((j for j in (1, 2, 3)), key=lambda j: (rec[j].start_time, j))
        assert after[0] == first, (name, after)
        assert rec[first].start_time == pytest.approx(rec[0].finish_time)
    # spwf with backfill: j2 (1 GPU) and j3 (4 GPUs) fit beside each other, j1 (8) waits for both
    env = make_env(A100_1x8, jobs)
    _play(env, make_policy("spwf", env, predictor="perfect"))
    rec = env.sim.records
    assert rec[3].start_time == pytest.approx(rec[2].start_time) and rec[1].start_time >= rec[3].finish_time - 1e-6


def test_heavy_edge_applied_alike(make_job, make_env):
    # A-SRPT's consolidation test (test_baselines.py): 2 nodes x 8 V100; three 4-GPU jobs and a heavy 8-GPU
    # gpt2-large job at t=7,000 that finds only a spread 4 + 4 placement until a node empties. Every comparator,
    # like A-SRPT, marks it heavy and waits for one node with placement="heavy_edge" (tau large), and starts it
    # spread at once with placement="any" (or tau=0).
    # (under efficiency="flat", env v4's speed: with the micro-batch efficiency of v5 the 1-sequence micro-batches
    # compute longer and the spread placement costs under 1.2x)
    a4 = _it(make_env, make_job, V100_2x8, "V100-32GB", 4, 1.0, efficiency="flat")
    jobs = [make_job(0, 0, 5000 * a4, requested_gpus=4), make_job(1, 0, 8000 * a4, requested_gpus=4),
            make_job(2, 0, 8000 * a4, requested_gpus=4),
            make_job(3, 7000, 2e3, model="gpt2-large", requested_gpus=8)]
    for name in NEW:
        starts = {}
        for kw in ({"tau": 1e6}, {"placement": "any"}, {"tau": 0.0}):
            env = make_env(V100_2x8, jobs, efficiency="flat")
            policy = make_policy(name, env, predictor="perfect", comm_heavy=1.2, **kw)
            info = _play(env, policy)
            rec = env.sim.records
            assert info["metrics"]["finished"] == 4 and info["metrics"]["invalid_actions"] == 0
            assert policy.heavy[3] == (kw.get("placement") != "any") and not policy.heavy[1]
            key = next(iter(kw.items()))
            starts[key] = rec[3].start_time
            spans = sum(1 for c in env.sim.records[3].counts if c) if hasattr(rec[3], "counts") else None
            if key == ("tau", 1e6):  # waits until a node is free: one of the 8,000 s jobs ends
                assert rec[3].start_time == pytest.approx(min(rec[1].finish_time, rec[2].finish_time))
                assert spans in (None, 1)
        # with no wait the job starts while both nodes are still shared (earlier)
        assert starts[("placement", "any")] < starts[("tau", 1e6)]
        assert starts[("tau", 0.0)] == pytest.approx(starts[("placement", "any")])


@pytest.mark.parametrize("name", NEW)
def test_legal_episodes_on_synthetic_small(name):
    env = FrenzyEnv(workload="synthetic-small")
    res = run_episode(env, make_policy(name, env), seed=0)
    assert res.metrics["invalid_actions"] == 0
    assert res.metrics["finished"] == env.unwrapped.sim.num_jobs
