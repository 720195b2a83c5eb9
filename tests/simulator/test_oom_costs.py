"""The start-up, restart and out-of-memory cost model of SimConfig, on a 1.3B and a 70B job worked out by hand.

Formula (SimConfig docstring): start = startup_time + 12 B x params / (load_bandwidth x nodes); a resize adds
restart_overhead + 12 B x params / (checkpoint_bandwidth x nodes of the old plan); an OOM holds the GPUs for
start + the first step + teardown_time. Defaults: 30 s, 10 s, 2.5e9 B/s per node, 10 s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.registration import V4_WORLD
from frenzy_env.simulator import DONE, ClusterSimulator, SimConfig
from frenzy_env.simulator.config import start_up_costs
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.models import ModelSpec, get_model

GPT3_1B3 = ModelSpec(name="gpt3-1.3b", vocab_size=50257, hidden=2048, layers=24, heads=16, max_seq_len=2048)
# parameters: 1_315_723_264 (GPT-3 XL shape) and 68_976_648_192 (llama-2-70b)
# 12 B x 1_315_723_264 / 2.5e9 B/s = 6.3154716672 s on one node
# 12 B x 68_976_648_192 / 2.5e9 B/s = 331.0879109 s on one node; / 8 nodes = 41.3859889152 s; / 4 = 82.7719778304 s


def _sim(gpu: str | ClusterSpec, config: SimConfig, *models: ModelSpec, batch: int = 64) -> ClusterSimulator:
    jobs = tuple(
        JobSpec(job_id=i, submit_time=0.0, model=m, batch_size=batch, seq_len=1024, iterations=1000.0)
        for i, m in enumerate(models)
    )
    cluster = gpu if isinstance(gpu, ClusterSpec) else ClusterSpec.homogeneous(gpu, 8, 8)
    return ClusterSimulator(cluster, Workload(name="costs", jobs=jobs), config)


def test_parameter_counts_behind_the_hand_numbers():
    assert GPT3_1B3.num_params == 1_315_723_264
    assert get_model("llama-2-70b").num_params == 68_976_648_192


def test_start_and_restart_seconds_by_hand():
    sim = _sim("A100-80GB", SimConfig(predictor="oracle"), GPT3_1B3, get_model("llama-2-70b"))
    p8, p32, p64 = (sim.plan_index("A100-80GB", n) for n in (8, 32, 64))
    assert sim.startup_seconds(0, p8) == pytest.approx(30.0 + 6.3154716672, abs=1e-9)  # 1 node
    assert sim.startup_seconds(1, p64) == pytest.approx(30.0 + 41.3859889152, abs=1e-9)  # 8 nodes
    assert sim.startup_seconds(1, p32) == pytest.approx(30.0 + 82.7719778304, abs=1e-9)  # 4 nodes
    with pytest.raises(KeyError, match="job 1 is not running"):
        sim.restart_seconds(1, p32)
    assert sim.start(1, p64) and sim.start(0, sim.plan_index("A100-80GB", 1)) is False  # no GPU left
    # a resize from 64 GPUs (8 nodes) to 32 (4 nodes): 10 s + writing on 8 nodes + start-up on 4 nodes
    resize = 10.0 + 41.3859889152 + 30.0 + 82.7719778304
    assert sim.restart_seconds(1, p32) == pytest.approx(resize, abs=1e-9)
    assert not sim.resize(1, p32)  # still starting up: no resize
    sim.request_wakeup(sim.running[1].progress_from)
    sim.advance()
    assert sim.now == sim.running[1].progress_from == 30.0 + 41.3859889152
    t, before = sim.now, sim.restart_seconds(1, p32)
    assert sim.resize(1, p32)
    assert sim.attempts[-1].progress_from == t + before == pytest.approx(t + resize)  # the simulator's own sum
    # the view policies read gives the same numbers
    from frenzy_env.simulator.view import SimView

    view = SimView(sim)
    assert view.startup_seconds(0, p8) == sim.startup_seconds(0, p8)
    assert view.restart_seconds(1, p64) == sim.restart_seconds(1, p64)


def test_oom_seconds_by_hand_1b3():
    # the paper's formula admits the 1.3B job (batch 8, seq 1024) on 8 V100-16GB GPUs where it does not fit
    # (in env v4's world, V4_WORLD: its slot layout, the fastest one the formula admits, accumulates)
    sim = _sim("V100-16GB", SimConfig(predictor="frenzy", **V4_WORLD), GPT3_1B3, batch=8)
    plan = sim.plan_index("V100-16GB", 8)
    assert sim.pred_ok[0, plan] and not sim.true_ok[0, plan]
    first_step = float(sim.iter_time[0, plan])
    assert sim.start(0, plan)
    sim.advance()
    held = 30.0 + 6.3154716672 + first_step + 10.0  # start-up (one node), the first step, tear-down
    assert [a.outcome for a in sim.attempts] == ["oom"]
    assert sim.attempts[0].end_time == pytest.approx(held, abs=1e-9)
    assert sim.metrics()["lost_gpu_hours"] == pytest.approx(8 * held / 3600.0)
    assert sim.metrics()["overhead_gpu_hours"] == 0.0  # a failed attempt's time is all lost, counted once


def test_oom_seconds_by_hand_70b():
    sim = _sim("A100-80GB", SimConfig(predictor="oracle"), get_model("llama-2-70b"))
    plan = sim.plan_index("A100-80GB", 64)
    row = sim._row_key_l[0]
    # force a misprediction on the 64-GPU plan (the oracle's table says it fits): the run fails at its first step
    sim._row_true_l = tuple(
        tuple(False if (k == row and p == plan) else v for p, v in enumerate(r)) for k, r in enumerate(sim._row_true_l)
    )
    first_step = float(sim.iter_time[0, plan])
    assert sim.start(0, plan)
    sim.advance()
    held = 30.0 + 41.3859889152 + first_step + 10.0
    assert sim.attempts[0].outcome == "oom" and sim.attempts[0].end_time == pytest.approx(held, abs=1e-9)
    assert sim.metrics()["lost_gpu_hours"] == pytest.approx(64 * held / 3600.0)


def test_costs_grow_with_model_size_and_shrink_with_nodes():
    cfg = SimConfig()
    params = np.array([1.25e8, 1.3e9, 7e9, 7e10])
    start, save = start_up_costs(params, np.array([1, 2, 8]), cfg)
    assert (np.diff(start, axis=0) > 0).all() and (np.diff(save, axis=0) > 0).all()  # bigger model: slower
    assert (np.diff(start, axis=1) < 0).all() and (np.diff(save, axis=1) < 0).all()  # more nodes: faster
    assert start[1, 0] == pytest.approx(30.0 + 12 * 1.3e9 / 2.5e9)
    assert save[3, 2] == pytest.approx(10.0 + 12 * 7e10 / (2.5e9 * 8))
    models = [get_model(n) for n in ("gpt2", "gpt2-xl", "llama-7b", "llama-13b", "llama-2-70b")]
    sim = _sim("A100-80GB", SimConfig(predictor="oracle"), *models, batch=8)
    p64 = sim.plan_index("A100-80GB", 64)
    seconds = [sim.startup_seconds(j, p64) for j in range(len(models))]
    assert seconds == sorted(seconds) and len(set(seconds)) == len(seconds)


def test_flat_model_recovered_with_infinite_bandwidth():
    cfg = SimConfig(startup_time=30.0, restart_overhead=10.0, checkpoint_bandwidth=math.inf, load_bandwidth=math.inf)
    sim = _sim("A100-80GB", cfg, GPT3_1B3, get_model("llama-2-70b"))
    for j in range(2):
        for p in range(sim.num_plans):
            assert sim.startup_seconds(j, p) == 30.0
    p32, p64 = sim.plan_index("A100-80GB", 32), sim.plan_index("A100-80GB", 64)
    assert sim.start(1, p64)
    assert sim.restart_seconds(1, p32) == 40.0
    assert sim.attempts[0].progress_from == 30.0


@pytest.mark.parametrize("field", ["checkpoint_bandwidth", "load_bandwidth"])
@pytest.mark.parametrize("value", [0, -1.0, "fast", None, True, math.nan])
def test_bad_bandwidth_names_its_field(field, value):
    with pytest.raises(ConfigError, match=f"{field} must be a number of bytes/s > 0.*got {value!r}"):
        SimConfig(**{field: value})


def test_lost_and_overhead_gpu_hours_by_hand():
    """Job 0 (1.3B) starts on 1 A100, is resized to 2 and finishes; job 1 (1.3B) crashes on 8 V100-16GB (OOM)."""
    cluster = ClusterSpec.from_counts("mixed", {"V100-16GB": (1, 8), "A100-80GB": (1, 8)})
    sim = _sim(cluster, SimConfig(predictor="frenzy", **V4_WORLD), GPT3_1B3, GPT3_1B3, batch=8)
    a1, a2, v8 = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2), sim.plan_index("V100-16GB", 8)
    assert sim.true_ok[0, [a1, a2]].all() and sim.pred_ok[1, v8] and not sim.true_ok[1, v8]
    load = 6.3154716672  # one node
    assert sim.start(0, a1) and sim.start(1, v8)
    oom_end = 30.0 + load + float(sim.iter_time[1, v8]) + 10.0
    sim.request_wakeup(30.0 + load)
    sim.advance()  # job 0 starts iterating at 36.3 s; job 1 fails later, at oom_end
    t = sim.now
    assert t == 30.0 + load < oom_end
    assert sim.resize(0, a2)
    restart = 10.0 + load + 30.0 + load
    while sim.status[0] != DONE:  # (job 1 waits in the queue after its crash: nobody starts it again)
        sim.advance()
    m = sim.metrics()
    assert [a.outcome for a in sim.attempts] == ["resized", "oom", "finished"]
    assert m["lost_gpu_hours"] == pytest.approx(8 * oom_end / 3600.0)
    # overhead: 1 GPU for the first start-up; 2 GPUs for the resize's checkpoint write, restart and load
    assert m["overhead_gpu_hours"] == pytest.approx((1 * (30.0 + load) + 2 * restart) / 3600.0)
    assert sim.attempts[-1].progress_from == pytest.approx(t + restart)
    productive = 1 * 0.0 + 2 * (sim.attempts[-1].end_time - sim.attempts[-1].progress_from)
    assert m["gpu_hours"] == pytest.approx(m["lost_gpu_hours"] + m["overhead_gpu_hours"] + productive / 3600.0)
