"""The ``frenzy memory`` and ``frenzy plan`` subcommands (MARP from the command line).

``frenzy memory``: peak memory per GPU of one job on one (dp, tp) layout::

    frenzy memory --model gpt2-medium --batch-size 16 --seq-len 1024 --dp 2 --tp 1 [--method frenzy] [--json]
    frenzy memory --vocab 50257 --hidden 1024 --layers 24 --heads 16 --batch-size 16 --seq-len 1024

``frenzy plan``: every feasible (GPU type, dp, tp) plan, ranked::

    frenzy plan --model llama-7b --batch-size 64 --seq-len 2048 --gpus A100-80GB,RTX3090-24GB [--ranking min_gpus]

:func:`add_memory_parsers` registers both on an ``argparse`` subparsers object; each handler returns an exit
code (0 ok, 1 no plan fits, 2 bad input).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from frenzy_env.errors import ConfigError, FrenzyError
from frenzy_env.memory import (
    DEFAULT_METHOD,
    DEFAULT_RANKING,
    METHODS,
    PRECISIONS,
    RANKINGS,
    GiB,
    estimate_memory,
    plan_resources,
)
from frenzy_env.models import ModelSpec, custom_model, get_model, list_models

_SHAPE_ARGS = ("vocab", "hidden", "layers", "heads")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (--model NAME, or a custom shape)")
    g.add_argument("--model", help=f"catalogue model: {', '.join(list_models())}")
    g.add_argument("--vocab", type=int, help="vocabulary size V (custom shape)")
    g.add_argument("--hidden", type=int, help="hidden size h (custom shape)")
    g.add_argument("--layers", type=int, help="transformer layers l (custom shape)")
    g.add_argument("--heads", type=int, help="attention heads a (custom shape)")
    g.add_argument("--kv-heads", type=int, help="key/value heads (grouped-query attention)")
    g.add_argument("--ffn-hidden", type=int, help="MLP width (default 4h)")
    g.add_argument("--mlp", choices=("gelu", "swiglu"), help="MLP kind (default gelu)")
    g.add_argument("--untied", action="store_true", help="untied output head")
    g.add_argument("--rotary", action="store_true", help="rotary positions (no position table)")
    g.add_argument("--max-seq-len", type=int, help="size of the learned position table (default 1024)")


def _add_job_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=int, required=True, help="global batch (sequences per iteration)")
    p.add_argument("--seq-len", type=int, required=True, help="tokens per sequence")
    p.add_argument(
        "--method", choices=METHODS, default=DEFAULT_METHOD, help=f"estimator (default {DEFAULT_METHOD})"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    g = p.add_argument_group("extended-method options (omit for the defaults)")
    g.add_argument("--precision", choices=tuple(PRECISIONS), help="default fp16 (20 B/param)")
    g.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3))
    g.add_argument("--recompute", choices=("none", "selective", "full"))
    g.add_argument("--attention", choices=("eager", "flash"))
    g.add_argument("--micro-batch", type=int, help="micro-batch (gradient accumulation over the rest)")
    g.add_argument("--sequence-parallel", action="store_true", default=None)
    g.add_argument("--no-context", action="store_true", default=None, help="leave out the CUDA context")


def _model_from_args(args: argparse.Namespace) -> ModelSpec:
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


def _options_from_args(args: argparse.Namespace) -> dict[str, object]:
    opts = {
        "precision": args.precision,
        "zero_stage": args.zero_stage,
        "recompute": args.recompute,
        "attention": args.attention,
        "micro_batch": args.micro_batch,
        "sequence_parallel": args.sequence_parallel,
    }
    out: dict[str, object] = {k: v for k, v in opts.items() if v is not None}
    if args.no_context:
        out["include_context"] = False
    return out


def _gib(x: float) -> str:
    return f"{x / GiB:.2f} GiB"


def _run_guarded(cmd: str, fn, args: argparse.Namespace) -> int:
    try:
        return fn(args)
    except (FrenzyError, ValueError) as exc:
        print(f"frenzy {cmd}: error: {exc}", file=sys.stderr)
        return 2


def _memory(args: argparse.Namespace) -> int:
    model = _model_from_args(args)
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
        **_options_from_args(args),
    )
    if args.json:
        out = {
            "model": model.name,
            "method": est.method,
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "dp": args.dp,
            "tp": args.tp,
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
    return 0


def _plan(args: argparse.Namespace) -> int:
    model = _model_from_args(args)
    plans = plan_resources(
        model,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        gpu_types=args.gpus,
        method=args.method,
        ranking=args.ranking,
        max_gpus=args.max_gpus,
        gpus_per_node=args.gpus_per_node,
        with_times=True,
        **_options_from_args(args),
    )
    shown = plans[: args.top] if args.top else list(plans)
    if args.json:
        rows = [
            {
                "rank": i + 1,
                "gpu_type": p.gpu_type,
                "num_gpus": p.num_gpus,
                "dp": p.dp,
                "tp": p.tp,
                "predicted_bytes_per_gpu": p.predicted_bytes_per_gpu,
                "capacity_bytes": p.capacity_bytes,
                "est_iter_time": None if math.isnan(p.est_iter_time) else p.est_iter_time,
            }
            for i, p in enumerate(shown)
        ]
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{model.name}, batch {args.batch_size}, seq {args.seq_len}, method {args.method}, "
            f"ranking {args.ranking}: {len(plans)} feasible plan(s)"
        )
        if shown:
            print(
                f"{'rank':>4}  {'gpu_type':<14}{'gpus':>5}{'dp':>5}{'tp':>4}{'pred/GPU':>12}{'capacity':>11}"
                f"{'util':>7}{'iter (s)':>10}"
            )
            for i, p in enumerate(shown):
                print(
                    f"{i + 1:>4}  {p.gpu_type:<14}{p.num_gpus:>5}{p.dp:>5}{p.tp:>4}"
                    f"{p.predicted_bytes_per_gpu / GiB:>8.2f} GiB{p.capacity_bytes / GiB:>7.0f} GiB"
                    f"{p.mem_util:>7.0%}{p.est_iter_time:>10.3f}"
                )
    if not plans:
        print(f"frenzy plan: {plans.reason}", file=sys.stderr)
        return 1
    return 0


def add_memory_parsers(subparsers) -> None:
    """Register ``memory`` and ``plan`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``).

    Each subcommand sets ``func(args) -> int`` (exit code: 0 ok, 1 no feasible plan, 2 bad input).
    """
    pm = subparsers.add_parser(
        "memory",
        help="peak GPU memory of a training job (MARP)",
        description="Peak memory per GPU of one training job on a dp x tp layout.",
    )
    _add_model_args(pm)
    _add_job_args(pm)
    pm.add_argument("--dp", type=int, default=1, help="data-parallel degree (default 1)")
    pm.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (default 1)")
    pm.add_argument("--gpus-per-node", type=int, default=8, help="tp may not exceed this (default 8)")
    pm.set_defaults(func=lambda a: _run_guarded("memory", _memory, a))

    pp = subparsers.add_parser(
        "plan",
        help="feasible (GPU type, dp, tp) plans of a job, ranked",
        description="Every (GPU type, dp, tp) plan that fits in memory, best first.",
    )
    _add_model_args(pp)
    _add_job_args(pp)
    pp.add_argument("--gpus", help="comma-separated GPU types (default: the whole catalogue)")
    pp.add_argument(
        "--ranking",
        choices=RANKINGS,
        default=DEFAULT_RANKING,
        help=f"plan order (default {DEFAULT_RANKING}: fewest GPUs, then the smallest GPU that fits)",
    )
    pp.add_argument("--max-gpus", type=int, default=64, help="largest dp*tp considered (default 64)")
    pp.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node: the tp limit (default 8)")
    pp.add_argument("--top", type=int, default=0, help="show only the first N plans (default all)")
    pp.set_defaults(func=lambda a: _run_guarded("plan", _plan, a))


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (the package's ``frenzy`` command calls :func:`add_memory_parsers`)."""
    parser = argparse.ArgumentParser(prog="frenzy")
    sub = parser.add_subparsers(dest="command", required=True)
    add_memory_parsers(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
