"""The extended estimator's kinds of number (device / reserved / allocated), op-level recomputation and a
framework's extra stored activations: values by hand on a tiny model, and invariants."""

from __future__ import annotations

import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.world.memory.estimator import CONTEXT_BYTES, FRAGMENTATION, KINDS, estimate_memory
from frenzy_env.world.models import custom_model, get_model, list_models

# h = 8, two KV heads of width 4 (kv_hidden 8), SwiGLU with f = 16, no dropout, bf16: 2-byte activations
TINY = custom_model(vocab_size=100, hidden=8, layers=2, heads=2, kv_heads=2, ffn_hidden=16, mlp="swiglu",
                    positions="rotary", tied_embeddings=False)
JOB = dict(batch_size=2, seq_len=16, precision="bf16", attention="flash")  # 32 tokens per micro-batch
TOK = 32


def test_kinds_by_hand():
    dev = estimate_memory(TINY, **JOB)
    res = estimate_memory(TINY, **JOB, kind="reserved")
    alloc = estimate_memory(TINY, **JOB, kind="allocated")
    assert dev.breakdown["cuda_context"] == CONTEXT_BYTES
    assert res.breakdown["cuda_context"] == 0.0 and alloc.breakdown["cuda_context"] == 0.0
    # device = reserved + context; reserved = allocated + fragmentation x (activations + working set + logits)
    assert dev.total_bytes == pytest.approx(res.total_bytes + CONTEXT_BYTES)
    assert res.total_bytes == pytest.approx(alloc.total_bytes + FRAGMENTATION * alloc.activation_bytes)
    assert alloc.breakdown["fragmentation"] == 0.0
    # the default is the device total, as before the kinds existed
    assert estimate_memory(TINY, **JOB, kind="device").total_bytes == dev.total_bytes


def test_op_recompute_by_hand():
    # per token and layer, nothing recomputed: norm inputs 2x(2*8) + norm outputs 2x(2*8) = 64 (replicated);
    # Q, K, V 2*(8+8+8) + attention out 2*8 + SwiGLU 4*2*16 + flash statistics 4*2 = 48+16+128+8 = 200
    # op-level ("selective op"): the layer input 2*8 = 16, every second matmul output of (q 8, k 8, v 8,
    # out 8, gate 16, up 16, down 8) = q + v + gate + down = 40 elements, the attention output 8: 2*48 = 96,
    # + flash statistics 8 = 120
    none = estimate_memory(TINY, **JOB, kind="allocated")
    op = estimate_memory(TINY, **JOB, kind="allocated", recompute="op")
    layers = 2
    assert none.breakdown["activations"] - op.breakdown["activations"] == layers * TOK * (264 - 120)
    assert none.breakdown["backward_working_set"] == TOK * 264
    assert op.breakdown["backward_working_set"] == 2 * TOK * 264  # the layer is rebuilt, as under "full"
    full = estimate_memory(TINY, **JOB, kind="allocated", recompute="full")
    assert full.breakdown["activations"] < op.breakdown["activations"] < none.breakdown["activations"]


def test_extra_layer_bytes_by_hand():
    base = estimate_memory(TINY, **JOB, kind="allocated")
    more = estimate_memory(TINY, **JOB, kind="allocated", extra_layer_bytes=4)
    # 4 bytes per hidden unit, per token, per layer: 2 layers x 32 tokens x 4 x 8 = 2048 stored; the working
    # set (one layer) grows by 32 x 4 x 8 = 1024
    assert more.breakdown["activations"] - base.breakdown["activations"] == 2048
    assert more.breakdown["backward_working_set"] - base.breakdown["backward_working_set"] == 1024
    assert more.static_bytes == base.static_bytes


def test_flash_drops_the_score_terms_by_hand():
    # eager, bf16, no dropout: softmax output 2 bytes x a x s per token and layer; flash keeps 4 x a instead
    eager = estimate_memory(TINY, **{**JOB, "attention": "eager"}, kind="allocated")
    flash = estimate_memory(TINY, **JOB, kind="allocated")
    per_tok_layer = 2 * 2 * 16 - 4 * 2
    assert eager.breakdown["activations"] - flash.breakdown["activations"] == 2 * TOK * per_tok_layer


@pytest.mark.parametrize("model", list_models())
def test_more_sharding_never_increases_memory(model):
    spec = get_model(model)
    for kind in KINDS:
        for dp in (2, 4, 8):
            totals = [
                estimate_memory(spec, batch_size=8 * dp, seq_len=512, dp=dp, micro_batch=1, zero_stage=z,
                                kind=kind).total_bytes
                for z in range(4)
            ]
            assert totals == sorted(totals, reverse=True), (model, kind, dp, totals)
        for z in (1, 2, 3):  # the same micro-batch on more replicas: each holds a smaller shard
            by_dp = [
                estimate_memory(spec, batch_size=8 * dp, seq_len=512, dp=dp, micro_batch=1, zero_stage=z,
                                kind=kind).total_bytes
                for dp in (1, 2, 4, 8)
            ]
            assert by_dp == sorted(by_dp, reverse=True), (model, kind, z, by_dp)


@pytest.mark.parametrize("recompute", ["none", "selective", "op", "full"])
@pytest.mark.parametrize("attention", ["eager", "flash"])
def test_device_at_least_reserved_at_least_allocated(recompute, attention):
    for model in ("gpt2", "llama-3.1-8b", "bert-large"):
        for tp in (1, 2):
            kw = dict(batch_size=8, seq_len=1024 if model != "bert-large" else 512, dp=2, tp=tp,
                      recompute=recompute, attention=attention, zero_stage=1)
            dev, res, alloc = (estimate_memory(model, **kw, kind=k).total_bytes for k in KINDS)
            assert dev > res >= alloc > 0, (model, tp, dev, res, alloc)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(kind="peak"), "kind must be one of device, reserved, allocated"),
        (dict(kind="reserved", include_context=True), "include_context=True contradicts kind='reserved'"),
        (dict(recompute="ops"), "recompute must be one of none, selective, op, full"),
        (dict(extra_layer_bytes=-1), "extra_layer_bytes must be a non-negative number"),
    ],
)
def test_bad_options_name_field_and_value(kw, match):
    with pytest.raises(ConfigError, match=match):
        estimate_memory("gpt2", batch_size=2, seq_len=128, **kw)
