"""A-SRPT's variants: ``head="per_type"`` (opt-in: a waiting head holds back only its GPU types) and
``history="auto"`` (the default: the forest trained on the jobs before the episode, from the env's workload
generator; ``history=None`` a cold forest)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from baselines import make_policy
from baselines.asrpt import auto_history
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import UnknownNameError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.reproduce.generators import ASRPT_CLUSTER, asrpt_generator
from frenzy_env.workload import ITP_EXTRACT, SyntheticGenerator, TraceGenerator, data_path
from frenzy_env.world.cluster import ClusterSpec
from tests.episodes import play_episode as _play

# 8 A100s on one node and 4 V100s on another: an 8-GPU job can run on the A100s only
TWO_TYPES = ClusterSpec.from_counts("a8v4", {"A100-80GB": (1, 8), "V100-32GB": (1, 4)}, reference_gpu_type="A100-80GB")
WIDE = {"queue_slots": "all", "running_slots": "all"}


def _seconds(make_env, job, gpus: int) -> float:
    """Seconds per iteration of ``job`` on ``gpus`` A100s (its fastest type)."""
    probe = make_env(TWO_TYPES, [job])
    return float(probe.sim.iter_time[0, probe.sim.plan_index("A100-80GB", gpus)])


# ----------------------------------------------------------------------------------------------- head
def test_per_type_starts_a_job_on_an_idle_type_while_the_head_waits_for_its_only_type(make_job, make_env):
    """Perfect prediction, G = 12 GPUs. j0 (1 GPU, 12,000 s: virtual work 1,000 s) is released at 1,000 and starts
    on an A100. j1 (8 GPUs, 600 s: virtual 400 s) arrives at 1,100 and is released at 1,500; it fits the A100s
    only, and only 7 are free until j0 ends. j2 (1 GPU, 2,400 s: virtual 200 s) arrives at 1,600 and is released at
    1,800 behind j1. strict: j2 waits until j1 has started; per_type: j1 holds back the A100s only, so j2 starts on a
    V100 at its release."""
    a1 = _seconds(make_env, make_job(0, requested_gpus=1), 1)
    a8 = _seconds(make_env, make_job(0, requested_gpus=8), 8)
    jobs = [make_job(0, 0, 12_000 / a1, requested_gpus=1), make_job(1, 1100, 600 / a8, requested_gpus=8),
            make_job(2, 1600, 2400 / a1, requested_gpus=1)]
    starts = {}
    for head in ("strict", "per_type"):
        env = make_env(TWO_TYPES, jobs)
        policy = make_policy("asrpt", env, predictor="perfect", placement="any", head=head)
        info = _play(env, policy)
        assert info["metrics"]["finished"] == 3 and info["metrics"]["invalid_actions"] == 0
        assert policy.release_seq.tolist() == [0, 1, 2]
        np.testing.assert_allclose(policy.release_time, [1000.0, 1500.0, 1800.0])
        rec = env.sim.records
        assert rec[1].start_time >= rec[0].finish_time  # j1 waits for the A100 j0 holds
        starts[head] = (rec[1].start_time, rec[2].start_time, rec[2].gpu_type)
    j1, j2, _ = starts["strict"]
    assert j2 >= j1  # strict: nothing behind the waiting head starts
    j1, j2, gpu = starts["per_type"]
    assert j2 == pytest.approx(1800.0) and j2 < j1 and gpu == "V100-32GB"  # on the type j1 cannot use


def test_per_type_keeps_the_order_on_the_held_type(make_job, make_env):
    # as above, but j2 is gpt2-xl, which fits one A100-80GB and no V100-32GB: 7 A100s are free at its release, yet
    # it waits behind j1, which holds the A100s back
    a1 = _seconds(make_env, make_job(0, requested_gpus=1), 1)
    a8 = _seconds(make_env, make_job(0, requested_gpus=8), 8)
    xl = _seconds(make_env, make_job(0, model="gpt2-xl", requested_gpus=1), 1)
    jobs = [make_job(0, 0, 12_000 / a1, requested_gpus=1), make_job(1, 1100, 600 / a8, requested_gpus=8),
            make_job(2, 1600, 2400 / xl, model="gpt2-xl", requested_gpus=1)]
    env = make_env(TWO_TYPES, jobs)
    policy = make_policy("asrpt", env, predictor="perfect", placement="any", head="per_type")
    _play(env, policy)
    rec = env.sim.records
    np.testing.assert_allclose(policy.release_time, [1000.0, 1500.0, 1800.0])
    assert rec[2].start_time >= rec[1].start_time >= rec[0].finish_time and rec[2].gpu_type == "A100-80GB"
    assert policy.job_types(1).tolist() == policy.job_types(2).tolist() == [True, False]  # type 0, the A100s


def test_per_type_is_strict_on_one_gpu_type(make_job, make_env):
    # A-SRPT's own setting (homogeneous 64 V100s, the reproduction's workload): the same schedule, job for job
    gen = asrpt_generator("testbed", 60)
    env = FrenzyEnv(cluster=ASRPT_CLUSTER, workload=gen, **WIDE)
    tables = [run_episode(env, make_policy("asrpt", env, head=head, history="auto"), 0).jobs
              for head in ("strict", "per_type")]
    pd.testing.assert_frame_equal(*tables)
    # and on a hand-built one where the head blocks (the strict-order test's instance)
    cluster = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
    a4 = float(make_env(cluster, [make_job(0, requested_gpus=4)]).sim.iter_time[0, 1])
    jobs = [make_job(0, 0, 1500 / a4, requested_gpus=4), make_job(1, 1000, 1.0, requested_gpus=8),
            make_job(2, 1010, 100.0, requested_gpus=1)]
    records = []
    for head in ("strict", "per_type"):
        env = make_env(cluster, jobs)
        _play(env, make_policy("asrpt", env, predictor="perfect", head=head))
        records.append([(r.start_time, r.finish_time, r.gpu_type, r.num_gpus) for r in env.sim.records])
    assert records[0] == records[1]
    assert records[0][2][0] >= records[0][1][0]  # j2 strictly after the blocking j1


def test_head_keyword_is_checked(make_job, make_env):
    env = make_env(TWO_TYPES, [make_job(0)])
    with pytest.raises(UnknownNameError, match="head"):
        make_policy("asrpt", env, head="loose")


# ----------------------------------------------------------------------------------------------- history="auto"
def _recurring_trace(tmp_path, before: int, window: int):
    """A canonical trace: ``before`` gpt2 jobs of 1,000 s, then ``window`` of 5,000 s, all the same configuration
    (gpt2, batch 8, sequence 1024, 1 GPU) 100 s apart; the window starts at the first 5,000 s job."""
    rows = [f"h{i},{100 * i},1,1000,gpt2,8,1024\n" for i in range(before)]
    rows += [f"w{i},{100 * (before + i)},1,5000,gpt2,8,1024\n" for i in range(window)]
    path = tmp_path / "recurring.csv"
    path.write_text("job_id,submit_time,num_gpus,duration,model,batch_size,seq_len\n" + "".join(rows))
    return TraceGenerator(str(path), format="canonical", start=100.0 * before)


def test_auto_history_predicts_a_seen_group_at_its_first_arrival(tmp_path):
    cluster = ClusterSpec.homogeneous("A100-80GB", 1, 8)
    env = FrenzyEnv(cluster=cluster, workload=_recurring_trace(tmp_path, before=12, window=3), **WIDE)
    env.reset(seed=0)
    history = auto_history(env)
    assert [j.name for j in history.jobs] == [f"h{i}" for i in range(12)]  # the rows before the window, no other
    assert not {j.name for j in history.jobs} & {j.name for j in env.view.jobs}
    per_1000s = float(history.work_iterations(cluster)[0])  # 1,000 s of the configuration, in iterations
    warm, cold = make_policy("asrpt", env, history="auto"), make_policy("asrpt", env, history=None)
    for policy in (warm, cold):
        run_episode(env, policy, 0)
    # first arrival: the group (configuration) was seen in the history only, at 1,000 s; the episode's own jobs
    # run 5,000 s, so a forest taught anything of the episode would predict more
    assert warm.pred_iters[0] == pytest.approx(per_1000s)
    assert cold.pred_iters[0] == 0.0  # cold: the paper's zero for an unseen group
    assert float(env.view.work[0]) == pytest.approx(5 * per_1000s)
    spwf = make_policy("spwf", env, history="auto")  # the comparators know as much
    run_episode(env, spwf, 0)
    assert spwf.pred_iters[0] == pytest.approx(per_1000s)


def test_auto_history_of_a_synthetic_episode(make_job):
    gen = SyntheticGenerator(num_jobs=12, cluster="frenzy-testbed", recurring_fraction=1.0, mean_group_size=6.0)
    env = FrenzyEnv(cluster="frenzy-testbed", workload=gen, **WIDE)
    policy = make_policy("asrpt", env, history="auto")
    run_episode(env, policy, 4)
    history = auto_history(env)
    assert history == gen.history(4)  # the generator's history of the episode's seed
    episode = env.view.jobs
    assert not {j.iterations for j in episode} & {j.iterations for j in history.jobs}  # none of its jobs
    group = episode[0].group
    seen = [j.iterations for j in history.jobs if j.group == group]
    assert seen and policy.pred_iters[0] > 0  # predicted from its group's history at the first arrival
    assert min(seen) * 0.5 <= policy.pred_iters[0] <= max(seen) * 1.5


def test_auto_history_without_a_generator_is_a_cold_forest(make_job, make_env):
    env = make_env(ClusterSpec.homogeneous("A100-80GB", 1, 8), [make_job(0, 0, 500), make_job(1, 5, 500)])
    policy = make_policy("asrpt", env, history="auto")
    _play(env, policy)
    assert auto_history(env) is None and policy.pred_iters.tolist() == [0.0, 0.0]
    assert make_policy("asrpt", env, history="auto", predictor="perfect").history == "auto"  # ignored: no forest


# ----------------------------------------------------------------------------------------------- defaults
@pytest.mark.parametrize("workload", ["synthetic-small", "itp-week-80"])
def test_defaults_are_auto_history_and_the_strict_head(workload):
    # a heterogeneous cluster (3 GPU types), where the two head rules differ, and a trace with jobs after its window
    if workload == "itp-week-80":
        workload = TraceGenerator(str(data_path(ITP_EXTRACT)), format="itp", cluster="frenzy-testbed", max_jobs=80)
    env = FrenzyEnv(cluster="frenzy-testbed", workload=workload, **WIDE)
    default = make_policy("asrpt", env)
    assert default.history == "auto" and default.head == "strict"
    assert make_policy("spwf", env).history == "auto"  # the comparators' default too
    tables = [run_episode(env, p, 1).jobs for p in (default, make_policy("asrpt", env, history="auto", head="strict"))]
    pd.testing.assert_frame_equal(*tables)
