"""The opt-in micro-batch efficiency world option (frenzy_env.world.efficiency, SimConfig.efficiency)."""

from __future__ import annotations

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.workload.configs import reference_iteration_time
from frenzy_env.world.cluster import ClusterSpec, GPUType, get_gpu_type
from frenzy_env.world.efficiency import (
    HALF_TOKENS,
    MICROSTEP_OVERHEAD_S,
    REFERENCE_TOKENS,
    fit_half_tokens,
    fit_points,
    microbatch_efficiency,
)
from frenzy_env.world.models import custom_model, get_model
from frenzy_env.world.throughput import (
    DEFAULT_COMM_EFFICIENCY,
    DEFAULT_OVERHEAD_S,
    iteration_time,
    iteration_time_array,
)

TOY_GPU = GPUType(
    "toy", 16 * 1024**3, peak_tflops=1.0, intra_node_gbps=1.0, node_network_gbps=1.0, cost_per_hour=1.0,
    source="test", nics_per_node=2,
)
TINY = custom_model(vocab_size=1000, hidden=64, layers=2, heads=4, max_seq_len=16, name="tiny")


def test_curve_by_hand():
    assert HALF_TOKENS == 455.0 and REFERENCE_TOKENS == 16384.0
    norm = (16384 + 455) / 16384  # 1 / g(T_ref)
    assert microbatch_efficiency(16384, 0.4) == pytest.approx(0.4, rel=1e-15)  # the normalisation point
    assert microbatch_efficiency(2048, 0.4) == pytest.approx(0.4 * 2048 / 2503 * norm, rel=1e-12)  # 0.3364
    assert microbatch_efficiency(512, 0.4) == pytest.approx(0.4 * 512 / 967 * norm, rel=1e-12)  # 0.2177
    assert microbatch_efficiency(2048, 0.4) == pytest.approx(0.33638, abs=1e-5)
    assert microbatch_efficiency(512, 0.5) == pytest.approx(0.5 / 0.4 * 0.4 * 512 / 967 * norm, rel=1e-12)
    assert microbatch_efficiency(1e9, 1.0) == 1.0  # capped at the peak


def test_curve_monotone_and_saturating():
    t = np.geomspace(1, 1e7, 400)
    u = microbatch_efficiency(t, 0.4)
    assert np.all(np.diff(u) > 0)
    u_max = 0.4 * (16384 + 455) / 16384
    assert np.all(u < u_max) and u[-1] == pytest.approx(u_max, rel=1e-4)
    gains = np.diff(u) / np.diff(t)  # concave: each token adds less
    assert np.all(np.diff(gains) < 0)


def test_fit_reproduces_shipped_constant():
    conf, tokens, secs = fit_points()
    assert len(tokens) == 23 and conf.max() == 6  # 26 rows, 3 at >= 75 GB left out; 7 configurations
    half, err, rms, worst = fit_half_tokens()
    assert half == pytest.approx(HALF_TOKENS, abs=0.5) and 30 < err < 60
    assert rms < 0.025 and worst < 0.04
    assert fit_half_tokens("exp")[2] > rms  # the saturating exponential fits worse


def test_accumulation_by_hand_on_a_tiny_plan():
    # TINY at s = 16: 6 x (2 x (2*64*64 + 2*64*64 + 2*64*256) + 1000*64) + 12*2*16*64 = 998,400 FLOPs/token
    assert TINY.flops_per_token(16) == 998_400.0
    micro = 998_400.0 * 2 * 16 / (1e12 * microbatch_efficiency(32, 0.4))  # one micro-batch of 2 sequences
    # batch 8 on one GPU in micro-batches of 2: 4 micro-steps, 3 of them after the first
    want = 4 * micro + 3 * MICROSTEP_OVERHEAD_S + DEFAULT_OVERHEAD_S
    got = iteration_time(TINY, batch_size=8, seq_len=16, gpu=TOY_GPU, dp=1, tp=1, micro_batch=2,
                         efficiency="microbatch")
    assert got == pytest.approx(want, rel=1e-12)
    one = iteration_time(TINY, batch_size=8, seq_len=16, gpu=TOY_GPU, dp=1, tp=1, micro_batch=8,
                         efficiency="microbatch")
    assert one == pytest.approx(998_400.0 * 8 * 16 / (1e12 * microbatch_efficiency(128, 0.4)) + DEFAULT_OVERHEAD_S)
    assert got > one
    # flat: the micro-batch changes nothing
    flat = [iteration_time(TINY, batch_size=8, seq_len=16, gpu=TOY_GPU, dp=1, tp=1, micro_batch=m) for m in (2, 8)]
    assert flat[0] == flat[1] == pytest.approx(998_400.0 * 128 / (1e12 * 0.4) + DEFAULT_OVERHEAD_S)


def test_flat_is_the_speed_models_default_and_per_type_the_envs():
    kw = dict(batch_size=64, seq_len=1024, gpu="A100-80GB", dp=np.array([1, 2, 4, 8]), tp=np.array([1, 1, 2, 1]),
              nodes_spanned=1, pp=np.array([1, 1, 1, 2]), micro_batch=np.array([4, 8, 2, 1]))
    a = iteration_time_array("gpt2-xl", **kw)
    b = iteration_time_array("gpt2-xl", **kw, efficiency="flat")
    assert np.array_equal(a, b)
    assert SimConfig().efficiency == "per_type"  # env v6 (v5's was "microbatch")


def test_bad_efficiency_is_named():
    with pytest.raises(ConfigError, match=r"efficiency must be one of 'flat', 'microbatch', 'per_type', got 'fast'"):
        SimConfig(efficiency="fast")
    with pytest.raises(ValueError, match="efficiency"):
        iteration_time("gpt2", batch_size=8, seq_len=64, gpu="A100-80GB", dp=1, tp=1, efficiency="Flat")
    from frenzy_env.env import FrenzyEnv

    with pytest.raises(ConfigError, match="efficiency"):
        FrenzyEnv(cluster=ClusterSpec.homogeneous("A100-80GB", 1, 8), workload=_one_job("gpt2", 8, 64, 10.0),
                  efficiency=None)


def _one_job(model, batch, seq, iterations=None, **kw):
    job = JobSpec(job_id=0, submit_time=0.0, model=model, batch_size=batch, seq_len=seq, iterations=iterations, **kw)
    return Workload("one", (job,))


def _plan(sim, count):
    t = sim.plan_table
    return next(p for p in range(t.num_plans) if int(t.plan_count[p]) == count)


def test_plan_table_fewer_gpus_with_accumulation_is_slower_per_gpu():
    """llama-7b, batch 32, sequence 2048 on one 8 x A100-80GB node: the table's layouts on 2 and 4 GPUs are both
    one replica (dp = 1, so no gradient all-reduce); on 2 GPUs memory allows only small micro-batches, so the
    replica accumulates more steps of smaller micro-batches and each GPU does its share more slowly."""
    spec = ClusterSpec.homogeneous("A100-80GB", 1, 8)
    m = get_model("llama-7b")
    g = get_gpu_type("A100-80GB")
    sim = ClusterSimulator(spec, _one_job(m, 32, 2048, iterations=10.0), SimConfig(efficiency="microbatch"))
    t = sim.plan_table
    row = t._row_key_l[0]
    per_gpu = {}
    for count in (2, 4):
        p = _plan(sim, count)
        tp, pp, mb = t._row_tp_l[row][p], t._row_pp_l[row][p], t._row_mb_l[row][p]
        assert pp == 1 and tp == count  # one replica: dp = 1
        steps = 32 // mb
        # by hand: compute at the micro-batch's efficiency + Megatron's 4 all-reduces per layer over NVLink
        compute = m.flops_per_token(2048) * 32 * 2048 / (count * g.peak_tflops * 1e12 * microbatch_efficiency(
            mb * 2048, 0.4))
        t_tp = m.layers * 4 * 2 * (tp - 1) / tp * (32 * 2048 * m.hidden * 2) / (
            g.intra_node_gbps * 1e9 * DEFAULT_COMM_EFFICIENCY)
        want = compute + t_tp + (steps - 1) * MICROSTEP_OVERHEAD_S + DEFAULT_OVERHEAD_S
        assert t.iter_time[0, p] == pytest.approx(want, rel=1e-12)
        per_gpu[count] = (t.iter_time[0, p] * count, mb, steps)
    (gs2, mb2, steps2), (gs4, mb4, steps4) = per_gpu[2], per_gpu[4]
    assert mb2 < mb4 and steps2 > steps4  # fewer GPUs: smaller micro-batches, more accumulation steps
    assert gs2 / gs4 > 1.05  # and more GPU-seconds per iteration (1.099 with today's memory model)
    # the compute part alone scales with 1 / u: the hand ratio of the two layouts' efficiencies
    ratio = microbatch_efficiency(mb4 * 2048, 0.4) / microbatch_efficiency(mb2 * 2048, 0.4)
    assert ratio == pytest.approx((mb4 * 2048 / (mb4 * 2048 + 455)) / (mb2 * 2048 / (mb2 * 2048 + 455)), rel=1e-12)
    assert ratio > 1.0


@pytest.mark.parametrize("efficiency", ["flat", "microbatch"])
def test_trace_job_keeps_its_recorded_duration(efficiency):
    """A trace job's work comes from its duration under the simulator's option, so it runs for its recorded
    duration at its recorded GPU count on the reference type (consolidated)."""
    spec = ClusterSpec.homogeneous("A100-80GB", 2, 8)
    cases = (("llama-7b", 64, 2048, 4), ("gpt2-large", 128, 1024, 2), ("llama-13b", 32, 2048, 8))
    for model, batch, seq, gpus in cases:
        wl = _one_job(model, batch, seq, requested_gpus=gpus, recorded_duration=3600.0)
        sim = ClusterSimulator(spec, wl, SimConfig(efficiency=efficiency))
        t = sim.plan_table
        ref = reference_iteration_time(get_model(model), batch, seq, gpus, gpu="A100-80GB", efficiency=efficiency)
        assert t.work[0] == pytest.approx(3600.0 / ref, rel=1e-12)
        assert t.iter_time[0, _plan(sim, gpus)] * t.work[0] == pytest.approx(3600.0, rel=1e-9)


def test_env_accepts_the_option():
    from frenzy_env.env import FrenzyEnv

    env = FrenzyEnv(cluster=ClusterSpec.homogeneous("A100-80GB", 1, 8), workload=_one_job("gpt2", 64, 1024,
                    iterations=100.0), efficiency="microbatch")
    env.reset(seed=0)
    assert env.sim_config.efficiency == "microbatch"


def test_pipelines_get_every_micro_batch_only_when_asked():
    from frenzy_env.world.layouts import plan_layouts

    base = plan_layouts(32, 32, 64, (8,), 8)
    more = plan_layouts(32, 32, 64, (8,), 8, pipeline_micro_batches=True)
    assert set(base[3][base[2] > 1].tolist()) == {1}
    assert set(more[3][more[2] > 1].tolist()) > {1}
    keep = more[2] == 1
    assert all(np.array_equal(a, b[keep]) for a, b in zip((x[base[2] == 1] for x in base), more))
