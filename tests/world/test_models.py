from __future__ import annotations

import dataclasses

import pytest

from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.world.models import MODELS, ModelSpec, custom_model, get_model, list_models

# Published totals (HuggingFace model cards / configs; Meta's papers).
PUBLISHED = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "llama-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "llama-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3.1-70b": 70_553_706_496,
    "bert-large": 335_141_888,
}


@pytest.mark.parametrize("name,count", sorted(PUBLISHED.items()))
def test_parameter_counts_equal_published_totals(name, count):
    assert get_model(name).num_params == count


def test_gpt2_parameter_count_by_hand():
    # wte 50257*768 + wpe 1024*768 + 12 layers * (12 h^2 + 13 h) + final LayerNorm 2h
    h = 768
    assert get_model("gpt2").num_params == 50257 * h + 1024 * h + 12 * (12 * h * h + 13 * h) + 2 * h


def test_llama_7b_count_by_hand():
    # untied: 2 * V h; per layer 4 h^2 (attention, no bias) + 3 h f (SwiGLU) + 2 h (RMSNorm); final norm h
    v, h, f = 32000, 4096, 11008
    assert get_model("llama-7b").num_params == 2 * v * h + 32 * (4 * h * h + 3 * h * f + 2 * h) + h


def test_catalogue_has_sources_and_assumption_is_stated():
    for name in (
        "gpt2",
        "gpt2-medium",
        "gpt2-large",
        "gpt2-xl",
        "gpt2-7b",
        "llama-7b",
        "llama-13b",
        "llama-2-70b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "bert-large",
    ):
        assert name in MODELS
        assert MODELS[name].source
    m = get_model("gpt2-7b")
    assert (m.hidden, m.layers, m.heads) == (4096, 32, 32)
    assert "ASSUMED" in m.source
    assert list_models() == list(MODELS)


def test_gqa_and_swiglu_fields():
    m = get_model("llama-3.1-8b")
    assert m.kv_heads == 8 and m.kv_hidden == 1024 and m.head_dim == 128
    assert m.mlp == "swiglu" and m.norm == "rmsnorm" and m.bias is False and not m.tied_embeddings
    g = get_model("gpt2")
    assert g.kv_heads == 12 and g.ffn_hidden == 3072 and g.norm == "layernorm" and g.bias is True


def test_flops_per_token_by_hand():
    # 6 * (12 layers * (2h^2 [Q,O] + 2h^2 [K,V] + 2*h*4h [MLP]) + V h [head]) + 12 * l * s * h
    h, l, v, s = 768, 12, 50257, 1024
    matmul = l * (2 * h * h + 2 * h * h + 2 * h * 4 * h) + v * h
    assert get_model("gpt2").flops_per_token(s) == 6 * matmul + 12 * l * s * h == 854_438_400
    # grows with the sequence (attention term)
    assert get_model("gpt2").flops_per_token(2048) > get_model("gpt2").flops_per_token(1024)


def test_get_model_passthrough_aliases_and_case():
    m = get_model("gpt2")
    assert get_model(m) is m
    assert get_model("GPT2-Medium") is MODELS["gpt2-medium"]
    assert get_model("gpt2-350m") is MODELS["gpt2-medium"]
    assert get_model("bert-large-uncased") is MODELS["bert-large"]


def test_unknown_model_names_known_ones():
    with pytest.raises(UnknownNameError, match="unknown model 'gpt3'.*known: .*gpt2"):
        get_model("gpt3")
    with pytest.raises(ValueError):  # UnknownNameError is a ValueError
        get_model("nope")


def test_custom_model_and_defaults():
    m = custom_model(vocab_size=1000, hidden=64, layers=2, heads=4)
    assert isinstance(m, ModelSpec) and m.ffn_hidden == 256 and m.kv_heads == 4
    # W by hand: 1000*64 + 1024*64 (positions) + 2 * (12*64^2 + 13*64) + 2*64
    assert m.num_params == 64000 + 65536 + 2 * (12 * 4096 + 13 * 64) + 128
    g = custom_model(
        vocab_size=1000,
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        mlp="swiglu",
        ffn_hidden=128,
        tied_embeddings=False,
        positions="rotary",
        name="tiny",
    )
    assert g.name == "tiny" and g.kv_hidden == 32
    # no biases, RMSNorm: per layer 2*64^2 + 2*64*32 + 3*64*128 + 2*64; embeddings 2 * 1000*64; final norm 64
    assert g.num_params == 2 * 64000 + 2 * (2 * 4096 + 2 * 64 * 32 + 3 * 64 * 128 + 128) + 64
    with pytest.raises(ConfigError, match="heads_count"):
        custom_model(vocab_size=10, hidden=8, layers=1, heads=2, heads_count=3)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(hidden=65, heads=4), "heads must divide hidden"),
        (dict(kv_heads=3), "kv_heads must divide heads"),
        (dict(layers=0), "layers must be a positive integer"),
        (dict(vocab_size=-5), "vocab_size must be a positive integer"),
        (dict(hidden=64.0), "hidden must be a positive integer"),
        (dict(heads=True), "heads must be a positive integer"),
        (dict(mlp="relu"), "mlp must be one of"),
        (dict(positions="alibi"), "positions must be one of"),
        (dict(arch="seq2seq"), "arch must be one of"),
        (dict(norm="batchnorm"), "norm must be one of"),
        (dict(tied_embeddings="yes"), "tied_embeddings must be a bool"),
        (dict(name=""), "name must be a non-empty string"),
    ],
)
def test_model_spec_validation(kw, match):
    base = dict(name="m", vocab_size=100, hidden=64, layers=2, heads=4)
    base.update(kw)
    with pytest.raises(ConfigError, match=match):
        ModelSpec(**base)


def test_model_spec_is_frozen_and_hashable():
    m = get_model("gpt2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.hidden = 1  # type: ignore[misc]
    assert hash(m) == hash(get_model("gpt2"))
    with pytest.raises(ConfigError, match="seq_len"):
        m.flops_per_token(0)
