"""Offered load (frenzy_env.workload.load), the capacity-aware synthetic load, the trace assignment's GPU mix and
the OOM cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import (
    JobSpec,
    SyntheticGenerator,
    Workload,
    make_generator,
    offered_load,
    offered_load_detail,
)
from frenzy_env.workload.configs import _fits
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.models import get_model
from frenzy_env.world.throughput import iteration_time


@pytest.fixture
def two_type_cluster() -> ClusterSpec:
    """2 A100-80GB (one node) + 2 V100-16GB (one node)."""
    return ClusterSpec.from_counts(
        "two-type", {"A100-80GB": (1, 2), "V100-16GB": (1, 2)}, reference_gpu_type="A100-80GB"
    )


def test_offered_load_hand_computed(two_type_cluster):
    # (under efficiency="flat", the speed model's plain rate: the arithmetic of the load, not the curve)
    # job 0: gpt2, batch 8, 1 GPU: fits both types at 1 GPU; job 1: gpt2-xl, batch 8, 1 GPU: fits an
    # A100 at 1 GPU, no V100 plan up to the V100s' 2 GPUs (its ~30 GB of model states, even split over tp = 2,
    # leave no room on 16 GB, whatever the micro-batch)
    small, large = get_model("gpt2"), get_model("gpt2-xl")
    assert _fits(small, 8, 1024, 1, "V100-16GB", 2) and _fits(large, 8, 1024, 1, "A100-80GB", 2)
    assert not _fits(large, 8, 1024, 1, "V100-16GB", 2) and not _fits(large, 8, 1024, 2, "V100-16GB", 2)
    wl = Workload("tiny", (
        JobSpec(0, 0.0, small, 8, 1024, iterations=1000.0, requested_gpus=1),
        JobSpec(1, 3600.0, large, 8, 1024, iterations=500.0, requested_gpus=1),
    ))

    def t(model, gpu):  # one GPU: the only layout is dp = tp = 1
        return iteration_time(model, batch_size=8, seq_len=1024, gpu=gpu, dp=1, tp=1)

    c0 = 2 / t(small, "A100-80GB") + 2 / t(small, "V100-16GB")  # iterations per second of the whole cluster
    c1 = 2 / t(large, "A100-80GB")  # the V100s cannot hold job 1
    window = 3600.0 * 2 / 1  # (last - first) * n / (n - 1)
    expected = (1000.0 / c0 + 500.0 / c1) / window
    rep = offered_load_detail(wl, two_type_cluster, efficiency="flat")
    assert rep.window_s == pytest.approx(window)
    assert rep.offered_load == pytest.approx(expected, rel=1e-12)
    assert offered_load(wl, two_type_cluster, efficiency="flat") == pytest.approx(expected, rel=1e-12)
    assert rep.per_type_fits_frac == {"A100-80GB": 1.0, "V100-16GB": 0.5}
    assert rep.per_type_load["A100-80GB"] == pytest.approx(expected)
    assert rep.per_type_load["V100-16GB"] == pytest.approx(1000.0 / c0 / window)
    # an explicit window; and a homogeneous cluster gives the classic GPU-seconds / (T x GPUs)
    explicit = offered_load(wl, two_type_cluster, window_s=100.0, efficiency="flat")
    assert explicit == pytest.approx(expected * window / 100.0)
    homo = ClusterSpec.homogeneous("A100-80GB", 1, 2)
    gpu_s = 1000.0 * t(small, "A100-80GB") + 500.0 * t(large, "A100-80GB")
    assert offered_load(wl, homo, efficiency="flat") == pytest.approx(gpu_s / (window * 2))


def test_offered_load_escalates_plan_and_skips_unplaceable(two_type_cluster):
    # gpt2-large batch 16 fits no V100-16GB at 1 GPU (15.5 GB of model states) but does at 2 with tp = 2 (dp = 2
    # would keep all the states on each GPU): that plan sets its V100 speed
    med = get_model("gpt2-large")
    assert not _fits(med, 16, 1024, 1, "V100-16GB", 2) and _fits(med, 16, 1024, 2, "V100-16GB", 2)
    wl = Workload("m", (
        JobSpec(0, 0.0, med, 16, 1024, iterations=10.0, requested_gpus=1),
        JobSpec(1, 10.0, get_model("llama-2-70b"), 8, 4096, iterations=10.0, requested_gpus=1),
    ))
    rep = offered_load_detail(wl, two_type_cluster, efficiency="flat")
    x_v = 1 / (2 * iteration_time(med, batch_size=16, seq_len=1024, gpu="V100-16GB", dp=1, tp=2))
    assert rep.rate_per_gpu[0, 1] == pytest.approx(x_v)
    assert rep.unplaceable == 1 and math.isnan(rep.cluster_seconds[1])


@pytest.mark.parametrize("cluster", ["frenzy-testbed", "pai-2020"])
@pytest.mark.parametrize("seed", [0, 3])
def test_synthetic_generator_hits_its_offered_load(cluster, seed):
    for load in (0.5, 1.3):
        wl = SyntheticGenerator(num_jobs=40, load=load, cluster=cluster).generate(seed)
        assert offered_load(wl, cluster) == pytest.approx(load, rel=1e-9)
        assert wl.jobs[0].submit_time == 0.0


def test_presets_are_moderate_and_overloaded_is_named():
    for name in ("itp-default", "synthetic", "synthetic-small"):
        wl = make_generator(name).generate(0)
        assert offered_load(wl, "frenzy-testbed") == pytest.approx(0.8, rel=1e-9), name
    over = offered_load(make_generator("itp-overloaded").generate(0), "frenzy-testbed")
    assert over > 1.5  # the recorded arrival rate


def _fit_frac_at_recorded_count(wl: Workload, cluster: ClusterSpec) -> dict[str, float]:
    out = {}
    for t in cluster.gpu_types:
        pn = cluster.max_gpus_per_node(t)
        ok = [j.requested_gpus <= cluster.gpus_of_type(t) and _fits(j.model, j.batch_size, j.seq_len,
              j.requested_gpus, t, pn) for j in wl.jobs]
        out[t] = float(np.mean(ok))
    return out


def test_trace_assignment_leaves_every_type_usable_at_recorded_counts():
    cluster = ClusterSpec.preset("frenzy-testbed")
    gen = make_generator("itp-default")
    mixed = _fit_frac_at_recorded_count(gen.generate(0), cluster)
    old = _fit_frac_at_recorded_count(make_generator("itp-default", cluster=None, load=None).generate(0), cluster)
    # sized for a type drawn in proportion to the GPU mix (a third each): about a third of the jobs were sized for
    # the RTX3090s, and what fits them fits the larger types
    assert mixed["RTX3090-24GB"] >= 0.25 and mixed["V100-32GB"] >= mixed["RTX3090-24GB"]
    assert mixed["A100-80GB"] == 1.0
    assert old["RTX3090-24GB"] < mixed["RTX3090-24GB"] - 0.1


def test_fifo_keeps_every_gpu_type_busy_on_the_default_workload():
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import run_episode

    env = FrenzyEnv(workload="itp-default", queue_slots="all", running_slots="all")
    res = run_episode(env, make_policy("fifo", env), seed=0)
    a, span = res.attempts, res.metrics["makespan_h"] * 3600
    assert res.metrics["offered_load_ratio"] == pytest.approx(0.8, rel=1e-9)
    for t in env.cluster.gpu_types:
        sub = a[a.gpu_type == t]
        busy = float(((sub.end_time_s - sub.start_time_s) * sub.num_gpus).sum()) / (env.cluster.gpus_of_type(t) * span)
        assert busy >= 0.2, (t, busy)


def test_oom_attempt_holds_gpus_for_the_modelled_time(make_job, make_workload):
    model = get_model("gpt2-medium")
    cluster = ClusterSpec.homogeneous("V100-16GB", 1, 8)
    wl = make_workload(make_job(0, 0.0, 100.0, model=model, seq_len=512))  # the paper's formula misses on 1 GPU
    cfg = SimConfig(predictor="frenzy", startup_time=20.0, teardown_time=7.0)
    assert cfg.oom_delay is None
    sim = ClusterSimulator(cluster, wl, cfg)
    bad = np.flatnonzero(sim.pred_ok[0] & ~sim.true_ok[0])
    assert bad.size, "expected a plan where the paper's formula is optimistic"
    plan = int(bad[0])
    first_step = float(sim.iter_time[0, plan])
    assert sim.start(0, plan)
    sim.advance()
    load = 12.0 * model.num_params / 2.5e9  # the model states read on the plan's one node (SimConfig defaults)
    held = 20.0 + load + first_step + 7.0
    assert sim.records[0].oom_failures == 1
    assert [(a.outcome, a.start_time) for a in sim.attempts] == [("oom", 0.0)]
    assert sim.attempts[0].end_time == pytest.approx(held)
    gpus = sim.attempts[0].num_gpus
    m = sim.metrics()
    assert m["lost_gpu_hours"] == pytest.approx(gpus * held / 3600.0)
    assert m["gpu_hours"] >= m["lost_gpu_hours"]
    # an explicit oom_delay overrides the model; a job that fits loses nothing
    sim2 = ClusterSimulator(cluster, wl, SimConfig(predictor="frenzy", oom_delay=30.0))
    assert sim2.start(0, plan)
    sim2.advance()
    assert sim2.attempts[0].end_time == 30.0
    assert sim2.metrics()["lost_gpu_hours"] == pytest.approx(gpus * 30.0 / 3600.0)
    good = int(np.flatnonzero(sim.true_ok[0])[0])
    sim3 = ClusterSimulator(cluster, wl, SimConfig(predictor="oracle"))
    assert sim3.start(0, good)
    while not sim3.done:
        sim3.advance()
    assert sim3.metrics()["lost_gpu_hours"] == 0.0
