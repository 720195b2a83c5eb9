"""LLM architecture catalogue: :class:`ModelSpec`, exact parameter counts and training FLOPs per token.

A job is submitted as a model and a training configuration; everything the memory predictor (MARP,
:mod:`frenzy_env.world.memory.estimator`) and the throughput model (:mod:`frenzy_env.world.throughput`) need to know
about the model is in a :class:`ModelSpec`.

Parameter counts are exact (every weight and bias of the reference implementation) and equal the published
totals: GPT-2 as in HuggingFace ``GPT2LMHeadModel`` (tied input/output embedding, learned positions,
LayerNorm with bias), LLaMA as in Meta's reference code (untied output head, rotary positions, RMSNorm,
no biases, SwiGLU MLP), BERT as in HuggingFace ``BertModel`` (token-type embeddings, embedding LayerNorm,
post-LN layers, pooler).

Training FLOPs per token follow Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM" (SC 2021, arXiv 2104.04473): forward = 2 FLOPs per weight of every matrix
multiply (the output head included) plus ``4 * s * h`` per layer for the attention scores ``Q K^T`` and the
weighted values ``A V``; backward = twice the forward; no activation recomputation counted.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from frenzy_env.errors import ConfigError, check_keys, unknown_name

MLP_KINDS = ("gelu", "swiglu")
POSITION_KINDS = ("learned", "rotary")
ARCH_KINDS = ("decoder", "encoder")
NORM_KINDS = ("layernorm", "rmsnorm")


def _check_pos_int(field_name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{field_name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a transformer language model.

    Attributes
    ----------
    name: catalogue or user name.
    vocab_size: V, tokens in the vocabulary.
    hidden: h, model width.
    layers: l, transformer layers.
    heads: a, attention (query) heads; must divide ``hidden``.
    kv_heads: key/value heads; ``None`` means ``heads`` (multi-head attention), fewer means grouped-query
        attention (must divide ``heads``).
    ffn_hidden: width of the MLP; ``None`` means ``4 * hidden``.
    mlp: ``"gelu"`` (two matrices) or ``"swiglu"`` (three matrices, gate * up).
    tied_embeddings: the output head shares the input embedding matrix.
    positions: ``"learned"`` (a ``max_seq_len x hidden`` table) or ``"rotary"`` (no parameters).
    max_seq_len: longest sequence (size of the learned position table).
    arch: ``"decoder"`` (GPT/LLaMA: final norm, LM head) or ``"encoder"`` (BERT: token-type embeddings,
        embedding norm, pooler, no final norm).
    source: where the shape comes from.
    norm: ``"layernorm"`` (weight and bias) or ``"rmsnorm"`` (weight only); ``None`` means layernorm for a
        GELU model and rmsnorm for a SwiGLU model.
    bias: linear layers have biases; ``None`` means True for GELU models and False for SwiGLU models.
    """

    name: str
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    mlp: str = "gelu"
    tied_embeddings: bool = True
    positions: str = "learned"
    max_seq_len: int = 1024
    arch: str = "decoder"
    source: str = ""
    norm: str | None = None
    bias: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"name must be a non-empty string, got {self.name!r}")
        for f in ("vocab_size", "hidden", "layers", "heads", "max_seq_len"):
            _check_pos_int(f, getattr(self, f))
        if self.hidden % self.heads:
            raise ConfigError(
                f"heads must divide hidden: hidden={self.hidden} is not a multiple of heads={self.heads}"
            )
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _check_pos_int("kv_heads", self.kv_heads)
        if self.heads % self.kv_heads:
            raise ConfigError(f"kv_heads must divide heads: heads={self.heads}, kv_heads={self.kv_heads}")
        if self.ffn_hidden is None:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        _check_pos_int("ffn_hidden", self.ffn_hidden)
        if self.mlp not in MLP_KINDS:
            raise ConfigError(f"mlp must be one of {', '.join(MLP_KINDS)}, got {self.mlp!r}")
        if self.positions not in POSITION_KINDS:
            raise ConfigError(f"positions must be one of {', '.join(POSITION_KINDS)}, got {self.positions!r}")
        if self.arch not in ARCH_KINDS:
            raise ConfigError(f"arch must be one of {', '.join(ARCH_KINDS)}, got {self.arch!r}")
        if self.norm is None:
            object.__setattr__(self, "norm", "layernorm" if self.mlp == "gelu" else "rmsnorm")
        if self.norm not in NORM_KINDS:
            raise ConfigError(f"norm must be one of {', '.join(NORM_KINDS)}, got {self.norm!r}")
        if self.bias is None:
            object.__setattr__(self, "bias", self.mlp == "gelu")
        for f in ("tied_embeddings", "bias"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"{f} must be a bool, got {getattr(self, f)!r}")

    # ------------------------------------------------------------------ derived sizes
    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``hidden / heads``."""
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of the key (and of the value) projection, ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim  # type: ignore[operator]

    @property
    def norm_params(self) -> int:
        """Parameters of one normalisation layer."""
        return 2 * self.hidden if self.norm == "layernorm" else self.hidden

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer layer (attention, MLP, two norms)."""
        h, kv, f = self.hidden, self.kv_hidden, self.ffn_hidden
        b = 1 if self.bias else 0
        attn = h * h + 2 * h * kv + h * h + b * (h + 2 * kv + h)  # Q, K, V, output projection
        if self.mlp == "gelu":
            mlp = 2 * h * f + b * (f + h)  # up, down
        else:
            mlp = 3 * h * f + b * (2 * f + h)  # gate, up, down
        return attn + mlp + 2 * self.norm_params  # type: ignore[operator]

    @property
    def embedding_params(self) -> int:
        """Input embedding parameters (tokens, learned positions; for encoders token types and the norm)."""
        n = self.vocab_size * self.hidden
        if self.positions == "learned":
            n += self.max_seq_len * self.hidden
        if self.arch == "encoder":
            n += 2 * self.hidden + self.norm_params  # token-type table (2 types) + embedding norm
        return n

    @property
    def head_params(self) -> int:
        """Parameters after the last layer: final norm (decoder) or pooler (encoder), untied output head."""
        if self.arch == "encoder":
            n = self.hidden * self.hidden + self.hidden  # BERT pooler
        else:
            n = self.norm_params
        if not self.tied_embeddings:
            n += self.vocab_size * self.hidden
        return n

    @property
    def num_params(self) -> int:
        """Exact number of trainable parameters."""
        return self.embedding_params + self.layers * self.layer_params + self.head_params

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs (forward + backward) per token at sequence length ``seq_len``.

        ``6 * (matmul weights per token) + 12 * layers * seq_len * hidden`` (Narayanan et al. 2021,
        arXiv 2104.04473, without recomputation): the matrix-multiply weights are every layer's
        projections and the output head ``V * h``; the second term is ``Q K^T`` and ``A V``.
        """
        _check_pos_int("seq_len", seq_len)
        h, kv, f = self.hidden, self.kv_hidden, self.ffn_hidden
        per_layer = 2 * h * h + 2 * h * kv + (2 if self.mlp == "gelu" else 3) * h * f  # type: ignore[operator]
        matmul = self.layers * per_layer + self.vocab_size * h
        return float(6 * matmul + 12 * self.layers * seq_len * h)


# fmt: off
_CATALOGUE = (
    # Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"; shapes and totals from the
    # HuggingFace configs openai-community/gpt2{,-medium,-large,-xl} (GPT2LMHeadModel, tied head).
    ModelSpec("gpt2", 50257, 768, 12, 12, source="Radford et al. 2019; HF openai-community/gpt2 (124,439,808)"),
    ModelSpec("gpt2-medium", 50257, 1024, 24, 16,
              source="Radford et al. 2019; HF openai-community/gpt2-medium (354,823,168)"),
    ModelSpec("gpt2-large", 50257, 1280, 36, 20,
              source="Radford et al. 2019; HF openai-community/gpt2-large (774,030,080)"),
    ModelSpec("gpt2-xl", 50257, 1600, 48, 25,
              source="Radford et al. 2019; HF openai-community/gpt2-xl (1,557,611,200)"),
    # Frenzy (Chang et al., arXiv 2412.14479) evaluates a "GPT2-7B" without giving its shape. ASSUMED here:
    # the GPT-2 architecture at h=4096, l=32, a=32 (the LLaMA-7B width/depth), V=50257, 1024 positions.
    ModelSpec("gpt2-7b", 50257, 4096, 32, 32,
              source="Frenzy arXiv 2412.14479 'GPT2-7B'; shape not published: ASSUMED h=4096, l=32, a=32"),
    # Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models", arXiv 2302.13971, Table 2.
    ModelSpec("llama-7b", 32000, 4096, 32, 32, ffn_hidden=11008, mlp="swiglu", tied_embeddings=False,
              positions="rotary", max_seq_len=2048, source="Touvron et al. 2023, arXiv 2302.13971 (6,738,415,616)"),
    ModelSpec("llama-13b", 32000, 5120, 40, 40, ffn_hidden=13824, mlp="swiglu", tied_embeddings=False,
              positions="rotary", max_seq_len=2048, source="Touvron et al. 2023, arXiv 2302.13971 (13,015,864,320)"),
    # Touvron et al. 2023, "Llama 2", arXiv 2307.09288; HF meta-llama/Llama-2-70b-hf config (GQA, 8 KV heads).
    ModelSpec("llama-2-70b", 32000, 8192, 80, 64, kv_heads=8, ffn_hidden=28672, mlp="swiglu",
              tied_embeddings=False, positions="rotary", max_seq_len=4096,
              source="Touvron et al. 2023, arXiv 2307.09288; HF Llama-2-70b-hf (68,976,648,192)"),
    # Llama Team 2024, "The Llama 3 Herd of Models", arXiv 2407.21783, Table 3; HF meta-llama/Llama-3.1-*.
    ModelSpec("llama-3.1-8b", 128256, 4096, 32, 32, kv_heads=8, ffn_hidden=14336, mlp="swiglu",
              tied_embeddings=False, positions="rotary", max_seq_len=131072,
              source="Llama Team 2024, arXiv 2407.21783; HF Llama-3.1-8B (8,030,261,248)"),
    ModelSpec("llama-3.1-70b", 128256, 8192, 80, 64, kv_heads=8, ffn_hidden=28672, mlp="swiglu",
              tied_embeddings=False, positions="rotary", max_seq_len=131072,
              source="Llama Team 2024, arXiv 2407.21783; HF Llama-3.1-70B (70,553,706,496)"),
    # Devlin et al. 2019, "BERT", arXiv 1810.04805 (BERT-large: L=24, H=1024, A=16); count as HuggingFace
    # BertModel google-bert/bert-large-uncased with pooler (335,141,888; the paper rounds to 340M).
    ModelSpec("bert-large", 30522, 1024, 24, 16, max_seq_len=512, arch="encoder",
              source="Devlin et al. 2019, arXiv 1810.04805; HF bert-large-uncased BertModel (335,141,888)"),
)
# fmt: on

MODELS: dict[str, ModelSpec] = {m.name: m for m in _CATALOGUE}

# Other common spellings of catalogue entries (looked up case-insensitively).
ALIASES: dict[str, str] = {
    "gpt2-small": "gpt2",
    "gpt2-124m": "gpt2",
    "gpt2-350m": "gpt2-medium",
    "gpt2-774m": "gpt2-large",
    "gpt2-1558m": "gpt2-xl",
    "gpt2-1.5b": "gpt2-xl",
    "bert-large-uncased": "bert-large",
}

_MODEL_FIELDS = tuple(f.name for f in fields(ModelSpec))


def list_models() -> list[str]:
    """Names of the catalogue models, in catalogue order."""
    return list(MODELS)


def get_model(name: str | ModelSpec) -> ModelSpec:
    """Return the catalogue model ``name`` (case-insensitive; a :class:`ModelSpec` passes through).

    Raises
    ------
    UnknownNameError: ``name`` is not in the catalogue (the message lists the known names).
    """
    if isinstance(name, ModelSpec):
        return name
    if isinstance(name, str):
        key = name.strip().lower()
        key = ALIASES.get(key, key)
        if key in MODELS:
            return MODELS[key]
    raise unknown_name("model", name, MODELS)


def custom_model(*, vocab_size: int, hidden: int, layers: int, heads: int, **kw: object) -> ModelSpec:
    """A model of any shape, e.g. ``custom_model(vocab_size=32000, hidden=2048, layers=16, heads=16)``.

    Further keywords are :class:`ModelSpec` fields (``kv_heads``, ``ffn_hidden``, ``mlp``, ``tied_embeddings``,
    ``positions``, ``max_seq_len``, ``arch``, ``norm``, ``bias``, ``name``, ``source``); an unknown keyword
    raises :class:`~frenzy_env.errors.ConfigError` naming it.
    """
    check_keys("model field", kw, _MODEL_FIELDS)
    name = kw.pop("name", None) or f"custom-v{vocab_size}-h{hidden}-l{layers}-a{heads}"
    shape = {"vocab_size": vocab_size, "hidden": hidden, "layers": layers, "heads": heads}
    return ModelSpec(name=name, **shape, **kw)  # type: ignore[arg-type]
