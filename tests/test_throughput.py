from __future__ import annotations

import numpy as np
import pytest

from frenzy_env.cluster import GPUType
from frenzy_env.models import custom_model, get_model
from frenzy_env.throughput import (
    DEFAULT_UTILISATION,
    SpeedModel,
    fit_speed_model,
    iteration_time,
    iteration_time_array,
    speed_model_from_throughput,
)

TOY_GPU = GPUType(
    "toy",
    16 * 1024**3,
    peak_tflops=1.0,
    intra_node_gbps=1.0,
    inter_node_gbps=0.5,
    cost_per_hour=1.0,
    source="test",
)
TINY = custom_model(vocab_size=1000, hidden=64, layers=2, heads=4, max_seq_len=16, name="tiny")


def test_tiny_configuration_by_hand():
    # Model: V=1000, h=64, l=2, a=4, ffn 4h=256, GELU, biases, tied head, learned positions (16).
    # params: embeddings 1000*64 + 16*64 = 65,024; per layer attention 4*64*64 + (64+128+64) biases = 16,640,
    #   MLP 2*64*256 + (256+64) = 33,088, two LayerNorms 2*128 = 256 -> 49,984; final LayerNorm 128.
    #   total 65,024 + 2*49,984 + 128 = 165,120
    assert TINY.num_params == 165_120
    # FLOPs/token at s=16: matmul weights per layer 2h^2 + 2h*kv + 2hf = 8,192 + 8,192 + 32,768 = 49,152;
    #   plus head 1000*64 -> 2*49,152 + 64,000 = 162,304; 6*162,304 + 12*l*s*h = 973,824 + 24,576 = 998,400
    assert TINY.flops_per_token(16) == 998_400
    # Plan: B=8, s=16, dp=2, tp=2 (4 GPUs), two nodes, utilisation 0.5, peak 1 TFLOP/s.
    # compute: 998,400 * 8*16 / (4 * 1e12 * 0.5) = 127,795,200 / 2e12 = 6.38976e-5 s
    # TP: l * 4 all-reduces * 2(t-1)/t=1 * (B/dp=4)*16*64*2 bytes = 2*4*1*8,192 B = 65,536 B over 1 GB/s
    #   = 6.5536e-5 s
    # DP: 2(d-1)/d=1 * (165,120 / tp=2) * 2 bytes = 165,120 B over the network 0.5 GB/s = 3.3024e-4 s
    expected = 6.38976e-5 + 6.5536e-5 + 3.3024e-4  # = 4.596736e-4
    t = iteration_time(
        TINY, batch_size=8, seq_len=16, gpu=TOY_GPU, dp=2, tp=2, nodes_spanned=2, utilisation=0.5
    )
    assert t == pytest.approx(expected, rel=1e-12)
    # on one node the DP all-reduce uses the 1 GB/s intra-node link: 1.6512e-4 s
    t1 = iteration_time(
        TINY, batch_size=8, seq_len=16, gpu=TOY_GPU, dp=2, tp=2, nodes_spanned=1, utilisation=0.5
    )
    assert t1 == pytest.approx(6.38976e-5 + 6.5536e-5 + 1.6512e-4, rel=1e-12)


def test_array_matches_scalar_and_marks_impossible_plans():
    dp = np.array([1, 2, 4, 8, 16, 4])
    tp = np.array([1, 1, 2, 1, 1, 0])
    span = np.array([1, 1, 1, 2, 1, 1])
    arr = iteration_time_array(
        "gpt2", batch_size=8, seq_len=1024, gpu="A100-80GB", dp=dp, tp=tp, nodes_spanned=span
    )
    assert arr.shape == (6,)
    for i in range(4):
        assert arr[i] == pytest.approx(
            iteration_time(
                "gpt2",
                batch_size=8,
                seq_len=1024,
                gpu="A100-80GB",
                dp=int(dp[i]),
                tp=int(tp[i]),
                nodes_spanned=int(span[i]),
            ),
            rel=1e-12,
        )
    assert np.isinf(arr[4]) and np.isinf(arr[5])  # dp > batch, tp = 0
    assert DEFAULT_UTILISATION == 0.4


def test_single_gpu_is_pure_compute_and_crossing_nodes_is_slower():
    t = iteration_time("gpt2", batch_size=16, seq_len=1024, gpu="A100-80GB", dp=1, tp=1)
    flops = 16 * 1024 * get_model("gpt2").flops_per_token(1024)
    assert t == pytest.approx(flops / (312e12 * 0.4))
    one = iteration_time("gpt2", batch_size=16, seq_len=1024, gpu="A100-80GB", dp=8, tp=1, nodes_spanned=1)
    two = iteration_time("gpt2", batch_size=16, seq_len=1024, gpu="A100-80GB", dp=8, tp=1, nodes_spanned=2)
    assert two > one


def test_bad_scalar_arguments():
    with pytest.raises(ValueError, match="dp must not exceed batch_size"):
        iteration_time("gpt2", batch_size=4, seq_len=128, gpu="A100-80GB", dp=8, tp=1)
    with pytest.raises(ValueError, match="tp must be"):
        iteration_time("gpt2", batch_size=4, seq_len=128, gpu="A100-80GB", dp=1, tp=0)
    with pytest.raises(ValueError, match="batch_size"):
        iteration_time("gpt2", batch_size=0, seq_len=128, gpu="A100-80GB", dp=1, tp=1)
    with pytest.raises(ValueError, match="utilisation"):
        iteration_time("gpt2", batch_size=4, seq_len=128, gpu="A100-80GB", dp=1, tp=1, utilisation=1.5)


def test_nnls_recovers_known_theta():
    m, n = 256.0, 1.2e8
    w = np.arange(1, 65)
    theta = (2e-3, 5e-4, 0.0, 0.03)
    truth = SpeedModel(theta, m, n)
    fit = fit_speed_model(w, truth(w), m=m, n=n)
    np.testing.assert_allclose(fit.theta, theta, rtol=1e-6, atol=1e-15)
    assert min(fit.theta) >= 0
    assert fit(4) == pytest.approx(truth(4))
    # (w-1) n/w = n - (n/m) (m/w) lies in the span of the m/w and constant columns, so th2 trades off against
    # th0 and th3: the curve is recovered exactly, theta up to that direction.
    truth2 = SpeedModel((2e-3, 5e-4, 3e-10, 0.03), m, n)
    fit2 = fit_speed_model(w, truth2(w), m=m, n=n)
    np.testing.assert_allclose(fit2(w), truth2(w), rtol=1e-9)
    th = np.array(fit2.theta)
    assert th[0] - th[2] * n / m == pytest.approx(2e-3 - 3e-10 * n / m, rel=1e-6)
    assert th[3] + th[2] * n == pytest.approx(0.03 + 3e-10 * n, rel=1e-6)
    # noisy measurements: still close
    rng = np.random.default_rng(0)
    noisy = truth(w) * rng.normal(1.0, 0.01, size=w.size)
    fit3 = fit_speed_model(w, noisy, m=m, n=n)
    np.testing.assert_allclose(fit3(w), truth(w), rtol=0.03)


def test_fit_rejects_bad_input():
    with pytest.raises(ValueError):
        fit_speed_model([1, 2], [1.0], m=1, n=1)
    with pytest.raises(ValueError):
        fit_speed_model([1, 2], [1.0, -1.0], m=1, n=1)


def test_speed_model_from_throughput_follows_analytic_model():
    sm = speed_model_from_throughput("gpt2", batch_size=64, seq_len=1024, gpu="A100-80GB", max_workers=32)
    w = np.array([1, 2, 4, 8, 16, 32])
    t = iteration_time_array(
        "gpt2",
        batch_size=64,
        seq_len=1024,
        gpu="A100-80GB",
        dp=w,
        tp=np.ones_like(w),
        nodes_spanned=-(-w // 8),
    )
    # f(w) is smooth; the analytic curve steps down where the job leaves its node (w > 8)
    np.testing.assert_allclose(sm(w), 1.0 / t, rtol=0.2)
    assert sm.m == 64 and sm.n > 1e8
