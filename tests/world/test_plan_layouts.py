"""Plans with pipeline stages and gradient accumulation: hand-computed bubble and iteration
time, memory monotonicity, 70B plans on A100-80GB, and the (dp, tp) plans kept where neither is needed."""

from __future__ import annotations

import numpy as np
import pytest

from frenzy_env.world.cluster import get_gpu_type
from frenzy_env.world.layouts import micro_batches, pipeline_depths, plan_layouts
from frenzy_env.world.memory.estimator import estimate_memory, estimate_memory_layouts
from frenzy_env.world.memory.planning import plan_resources
from frenzy_env.world.models import get_model
from frenzy_env.world.throughput import (
    DEFAULT_COMM_EFFICIENCY,
    DEFAULT_OVERHEAD_S,
    DEFAULT_UTILISATION,
    bubble_fraction,
    iteration_time,
)


def test_layout_rule_by_hand():
    assert pipeline_depths(12, 64) == [1, 2, 4] and pipeline_depths(80, 8) == [1, 2, 4, 8]
    assert micro_batches(12) == [12, 4, 2, 1] and micro_batches(8) == [8, 4, 2, 1] and micro_batches(3) == [3, 1]
    # 4 GPUs, 4 heads, 2 layers, batch 4, tp <= 2: (dp, tp, pp, mb)
    rows = list(zip(*(a.tolist() for a in plan_layouts(4, 2, 4, [4], 2))))
    assert rows == [(4, 1, 1, 1), (2, 2, 1, 2), (2, 2, 1, 1), (2, 1, 2, 1), (1, 2, 2, 1)]


def test_bubble_fraction_and_tiny_pipeline_time_by_hand():
    assert bubble_fraction(1, 5) == 0.0 and bubble_fraction(4, 1) == 0.75 and bubble_fraction(2, 3) == 0.25
    # gpt2 (h = 768), B = 4, s = 128, A100-80GB on one node, dp = 1, tp = 1, pp = 2, micro-batch 1 -> m = 4
    m, g = get_model("gpt2"), get_gpu_type("A100-80GB")
    flops = m.flops_per_token(128) * 4 * 128
    t_work = flops / (2 * g.peak_tflops * 1e12 * DEFAULT_UTILISATION)  # compute of a stage, whole batch
    p2p = 2 * 1 * 128 * 768 * 2 / (g.intra_node_gbps * 1e9 * DEFAULT_COMM_EFFICIENCY)  # one micro-batch
    expect = (t_work + 4 * p2p) * (4 + 2 - 1) / 4 + DEFAULT_OVERHEAD_S  # / (1 - bubble 1/5); no dp all-reduce
    got = iteration_time("gpt2", batch_size=4, seq_len=128, gpu=g, dp=1, tp=1, pp=2, micro_batch=1)
    assert got == pytest.approx(expect, rel=1e-12)
    # accumulation alone costs nothing: same compute, one all-reduce
    kw = dict(batch_size=64, seq_len=128, gpu=g, dp=2, tp=1)
    assert iteration_time("gpt2", micro_batch=4, **kw) == pytest.approx(iteration_time("gpt2", **kw), rel=1e-12)


def test_memory_falls_with_smaller_micro_batch_and_more_stages():
    kw = dict(batch_size=64, seq_len=2048, dp=2, tp=2)
    mbs = [estimate_memory("llama-7b", micro_batch=mb, **kw).total_bytes for mb in (32, 16, 8, 4, 2, 1)]
    assert all(a > b for a, b in zip(mbs, mbs[1:]))
    pps = [estimate_memory("llama-7b", micro_batch=1, pp=p, **kw).total_bytes for p in (1, 2, 4, 8)]
    assert all(a > b for a, b in zip(pps, pps[1:]))
    # the vectorised layouts agree with the scalar estimator
    arr = estimate_memory_layouts("llama-7b", batch_size=64, seq_len=2048, dp=2, tp=2, pp=[1, 2, 4, 8], micro_batch=1)
    assert np.allclose(arr, pps, rtol=1e-12)


@pytest.mark.parametrize("model,batch,seq", [("llama-2-70b", 1024, 2048), ("llama-3.1-70b", 1024, 2048)])
def test_70b_gets_pipeline_and_accumulation_on_a100(model, batch, seq):  # 2M tokens a batch
    plans = plan_resources(model, batch_size=batch, seq_len=seq, gpu_types=["A100-80GB"], with_times=True)
    assert plans and all(p.num_gpus <= 64 for p in plans)
    best = plans[0]
    assert best.pp > 1 and best.accumulation > 1 and best.predicted_bytes_per_gpu <= best.capacity_bytes
    assert best.dp * best.micro_batch * best.accumulation >= batch
    # without pipeline stages and accumulation nothing fits
    assert not plan_resources(model, batch_size=batch, seq_len=seq, gpu_types=["A100-80GB"], max_pp=1, accumulate=False)


def test_70b_at_4k_tokens_needs_flash_or_selective():
    kw = dict(batch_size=512, seq_len=4096, gpu_types=["A100-80GB"])
    assert not plan_resources("llama-2-70b", **kw)  # eager scores: 5 a s bytes per token and layer
    assert plan_resources("llama-2-70b", attention="flash", **kw)[0].pp > 1


def test_llama_13b_plans_and_dp_tp_plans_keep_their_layout():
    assert plan_resources("llama-13b", batch_size=512, seq_len=4096, gpu_types=["A100-80GB"])
    for model, b, s in [("gpt2", 32, 1024), ("gpt2-medium", 64, 1024), ("llama-7b", 8, 2048)]:
        flat = plan_resources(model, batch_size=b, seq_len=s, max_pp=1, accumulate=False)
        full = {(p.gpu_type, p.dp, p.tp, p.pp): p for p in plan_resources(model, batch_size=b, seq_len=s)}
        for p in flat:  # every (dp, tp) plan that fits is in the full search, with the whole per-replica batch
            q = full[(p.gpu_type, p.dp, p.tp, 1)]
            assert q.accumulation == 1 and q.predicted_bytes_per_gpu == p.predicted_bytes_per_gpu
