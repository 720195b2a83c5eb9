"""``frenzy memory``: peak memory per GPU of one job on one (dp, tp) layout (MARP from the command line)::

    frenzy memory --model gpt2-medium --batch-size 16 --seq-len 1024 --dp 2 --tp 1 [--method frenzy] [--json]
    frenzy memory --vocab 50257 --hidden 1024 --layers 24 --heads 16 --batch-size 16 --seq-len 1024
    frenzy memory --model llama-3.1-8b --batch-size 8 --seq-len 4096 --dp 8 --framework deepspeed-zero3

Also the model and job arguments ``frenzy plan`` shares (:func:`add_model_args`, :func:`add_job_args` and the
values they give). Exit codes: 0 ok, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from frenzy_env.cli.common import guarded
from frenzy_env.errors import ConfigError
from frenzy_env.world.memory.estimator import (
    DEFAULT_METHOD,
    FRAMEWORKS,
    METHODS,
    PRECISIONS,
    VALIDATED_FRAMEWORKS,
    GiB,
    estimate_memory,
)
from frenzy_env.world.models import ModelSpec, custom_model, get_model, list_models

_SHAPE_ARGS = ("vocab", "hidden", "layers", "heads")

#: The largest value of each numeric input of ``frenzy memory`` and ``frenzy plan`` a real training job can have
#: (a power of two well above every published model and run) and why: a larger value is refused, exit code 2.
#: ``tokens`` is batch x sequence length; ``gpus`` memory's dp x tp and plan's --max-gpus.
LIMITS: dict[str, tuple[int, str]] = {
    "batch_size": (2**22, "the largest published global batch is 65,536 sequences (LAMB's BERT)"),
    "seq_len": (2**24, "the longest context of any released model is 10M tokens (Llama 4 Scout)"),
    "tokens": (2**30, "the largest published global batch is about 63M tokens (DeepSeek-V3)"),
    "gpus": (2**20, "no cluster built has a million GPUs"),
    "vocab": (2**22, "the largest vocabulary of a released model is about 262K (Gemma 3)"),
    "hidden": (2**17, "the widest published model has hidden 25,600 (Megatron-LM's 1T configuration)"),
    "ffn_hidden": (2**19, "the widest published MLP is 102,400 (Megatron-LM's 1T configuration)"),
    "layers": (2**12, "the deepest trained transformer has 1,000 layers (DeepNet)"),
    "max_seq_len": (2**24, "the longest context of any released model is 10M tokens (Llama 4 Scout)"),
}


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model arguments: ``--model NAME`` or a custom shape (read back by :func:`model_from_args`)."""
    g = p.add_argument_group("model (--model NAME, or a custom shape)")
    g.add_argument("--model", help=f"catalogue model: {', '.join(list_models())}")
    g.add_argument("--vocab", type=int, help=f"vocabulary size V (custom shape; at most {limit_text('vocab')})")
    g.add_argument("--hidden", type=int, help=f"hidden size h (custom shape; at most {limit_text('hidden')})")
    g.add_argument("--layers", type=int, help=f"transformer layers l (custom shape; at most {limit_text('layers')})")
    g.add_argument("--heads", type=int, help="attention heads a (custom shape)")
    g.add_argument("--kv-heads", type=int, help="key/value heads (grouped-query attention)")
    g.add_argument("--ffn-hidden", type=int, help=f"MLP width (default 4h; at most {limit_text('ffn_hidden')})")
    g.add_argument("--mlp", choices=("gelu", "swiglu"), help="MLP kind (default gelu)")
    g.add_argument("--untied", action="store_true", help="untied output head")
    g.add_argument("--rotary", action="store_true", help="rotary positions (no position table)")
    g.add_argument(
        "--max-seq-len", type=int,
        help=f"size of the learned position table (default 1024; at most {limit_text('max_seq_len')})",
    )


def add_job_args(p: argparse.ArgumentParser) -> None:
    """Batch, sequence length, estimator, ``--json`` and the extended method's options
    (read back by :func:`options_from_args`)."""
    p.add_argument(
        "--batch-size", type=int, required=True,
        help=f"global batch (sequences per iteration; at most {limit_text('batch_size')}, and batch x sequence length "
        f"at most {limit_text('tokens')} tokens)",
    )
    p.add_argument("--seq-len", type=int, required=True, help=f"tokens per sequence (at most {limit_text('seq_len')})")
    p.add_argument(
        "--method", choices=METHODS, default=DEFAULT_METHOD, help=f"estimator (default {DEFAULT_METHOD})"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    g = p.add_argument_group("extended-method options (omit for the defaults)")
    g.add_argument(
        "--framework",
        help=f"training framework whose memory layout to model ({', '.join(FRAMEWORKS)}); "
        "default none: the estimator's own defaults",
    )
    g.add_argument(
        "--precision", choices=tuple(PRECISIONS),
        help="default fp16 (20 B/param), or the framework's default; bf16-pure: no fp32 master copy",
    )
    g.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3))
    g.add_argument("--recompute", choices=("none", "selective", "full"))
    g.add_argument("--attention", choices=("eager", "flash"))
    g.add_argument(
        "--micro-batch", type=int,
        help="micro-batch (gradient accumulation over the rest); at most the per-replica batch ceil(batch / dp)",
    )
    g.add_argument("--sequence-parallel", action="store_true", default=None)
    g.add_argument("--no-context", action="store_true", default=None, help="leave out the CUDA context")


def limit_text(field: str) -> str:
    """The limit of ``field`` (a key of :data:`LIMITS`) as text, e.g. ``2^24 = 16,777,216``."""
    value = LIMITS[field][0]
    return f"2^{value.bit_length() - 1} = {value:,}"


def _above(what: str, field: str) -> ConfigError:
    return ConfigError(f"{what} is above {limit_text(field)}, more than any real training job: {LIMITS[field][1]}")


def check_limits(args: argparse.Namespace, gpus: tuple[str, int] | None = None) -> None:
    """ConfigError naming the flag and its value when a numeric input is above its :data:`LIMITS`; ``gpus``:
    the GPU count the command is asked about, as (the flags that give it, the count)."""
    for field in ("batch_size", "seq_len", "vocab", "hidden", "ffn_hidden", "layers", "max_seq_len"):
        value = getattr(args, field)
        if value is not None and value > LIMITS[field][0]:
            raise _above(f"--{field.replace('_', '-')} {value}", field)
    b, s = args.batch_size, args.seq_len
    if b > 0 and s > 0 and b * s > LIMITS["tokens"][0]:
        raise _above(f"--batch-size {b} x --seq-len {s} = {b * s:,} tokens per iteration", "tokens")
    if gpus is not None and gpus[1] > LIMITS["gpus"][0]:
        raise _above(gpus[0], "gpus")


def model_from_args(args: argparse.Namespace) -> ModelSpec:
    """The :class:`ModelSpec` the model arguments name or describe."""
    shape = {k: getattr(args, k) for k in _SHAPE_ARGS}
    extra = {
        "kv_heads": args.kv_heads,
        "ffn_hidden": args.ffn_hidden,
        "mlp": args.mlp,
        "max_seq_len": args.max_seq_len,
    }
    extra = {k: v for k, v in extra.items() if v is not None}
    if args.untied:
        extra["tied_embeddings"] = False
    if args.rotary:
        extra["positions"] = "rotary"
    if args.model:
        if any(v is not None for v in shape.values()) or extra:
            raise ConfigError(
                "give either --model NAME or a custom shape (--vocab --hidden --layers --heads), not both"
            )
        return get_model(args.model)
    missing = [f"--{k}" for k, v in shape.items() if v is None]
    if missing:
        raise ConfigError(f"give --model NAME or a full custom shape; missing {', '.join(missing)}")
    return custom_model(
        vocab_size=shape["vocab"],
        hidden=shape["hidden"],
        layers=shape["layers"],
        heads=shape["heads"],
        **extra,
    )


def options_from_args(args: argparse.Namespace) -> dict[str, object]:
    """The extended method's options that were given, as keyword arguments of the estimators."""
    opts = {
        "precision": args.precision,
        "zero_stage": args.zero_stage,
        "recompute": args.recompute,
        "attention": args.attention,
        "micro_batch": args.micro_batch,
        "sequence_parallel": args.sequence_parallel,
        "framework": getattr(args, "framework", None),
    }
    out: dict[str, object] = {k: v for k, v in opts.items() if v is not None}
    if args.no_context:
        out["include_context"] = False
    return out


def _gib(x: float) -> str:
    return f"{x / GiB:.2f} GiB"


def add_parser(subparsers: Any) -> None:
    """Register ``frenzy memory`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    pm = subparsers.add_parser(
        "memory",
        help="peak GPU memory of a training job (MARP)",
        description="Peak memory per GPU of one training job on a dp x tp layout.",
    )
    add_model_args(pm)
    add_job_args(pm)
    pm.add_argument("--dp", type=int, default=1, help="data-parallel degree (default 1)")
    pm.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    pm.add_argument("--gpus-per-node", type=int, default=8, help="tp may not exceed this (default 8)")
    pm.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``frenzy memory``: print the estimate (exit code 0, or 2 for bad input)."""
    return guarded("memory", _memory, args)


def _memory(args: argparse.Namespace) -> int:
    check_limits(args, (f"--dp {args.dp} x --tp {args.tp} = {args.dp * args.tp:,} GPUs", args.dp * args.tp))
    model = model_from_args(args)
    if args.tp is not None and args.gpus_per_node is not None and args.tp > args.gpus_per_node:
        raise ConfigError(
            f"tp={args.tp} exceeds --gpus-per-node={args.gpus_per_node}: a tensor-parallel group stays in one node"
        )
    est = estimate_memory(
        model,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        dp=args.dp,
        tp=args.tp,
        method=args.method,
        **options_from_args(args),
    )
    if args.json:
        out = {
            "model": model.name,
            "method": est.method,
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "dp": args.dp,
            "tp": args.tp,
            "framework": args.framework,
            "framework_validated": None if args.framework is None else args.framework in VALIDATED_FRAMEWORKS,
            "total_bytes": est.total_bytes,
            "static_bytes": est.static_bytes,
            "activation_bytes": est.activation_bytes,
            "overhead_bytes": est.overhead_bytes,
            "breakdown": est.breakdown,
        }
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"{model.name} ({model.num_params:,} parameters), batch {args.batch_size}, seq {args.seq_len}, "
        f"dp={args.dp}, tp={args.tp}, method {est.method}"
        + (f", framework {args.framework}" if args.framework else "")
    )
    for k, v in est.breakdown.items():
        if k == "paper_params_W":
            print(f"  {k:<22}{v:>16,.0f}")
        else:
            print(f"  {k:<22}{_gib(v):>16}")
    print(f"  {'= static':<22}{_gib(est.static_bytes):>16}")
    print(f"  {'= activation':<22}{_gib(est.activation_bytes):>16}")
    print(f"  {'= overhead':<22}{_gib(est.overhead_bytes):>16}")
    print(f"  {'TOTAL per GPU':<22}{_gib(est.total_bytes):>16}")
    if args.framework and args.framework not in VALIDATED_FRAMEWORKS:
        why = ("its published cases are up to 29% under" if args.framework.startswith("deepspeed")
               else "no published measurement checks it")
        print(f"note: framework {args.framework} is not validated ({why}; docs/world.md, 'Memory across frameworks')")
    return 0
