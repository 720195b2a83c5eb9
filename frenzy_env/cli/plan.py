"""``frenzy plan``: every feasible (GPU type, dp, tp) plan of a job, ranked (MARP from the command line)::

    frenzy plan --model llama-7b --batch-size 64 --seq-len 2048 --gpus A100-80GB,RTX3090-24GB [--ranking min_gpus]

Exit codes: 0 ok, 1 no plan fits, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from frenzy_env.cli.common import guarded, non_negative_int
from frenzy_env.cli.memory import (
    add_job_args,
    add_model_args,
    check_limits,
    limit_text,
    model_from_args,
    options_from_args,
)
from frenzy_env.world.memory.estimator import GiB
from frenzy_env.world.memory.planning import DEFAULT_RANKING, RANKINGS, plan_resources


def add_parser(subparsers: Any) -> None:
    """Register ``frenzy plan`` on ``subparsers`` (from ``ArgumentParser.add_subparsers``)."""
    pp = subparsers.add_parser(
        "plan",
        help="feasible (GPU type, dp, tp) plans of a job, ranked",
        description="Every (GPU type, dp, tp) plan that fits in memory, best first.",
    )
    add_model_args(pp)
    add_job_args(pp)
    pp.add_argument("--gpus", help="comma-separated GPU types (default: the whole catalogue)")
    pp.add_argument(
        "--ranking",
        choices=RANKINGS,
        default=DEFAULT_RANKING,
        help=f"plan order (default {DEFAULT_RANKING}: fewest GPUs, then the shortest predicted iteration)",
    )
    pp.add_argument(
        "--max-gpus", type=int, default=64, help=f"largest dp*tp considered (default 64; at most {limit_text('gpus')})"
    )
    pp.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node: the tp limit (default 8)")
    pp.add_argument("--top", type=non_negative_int, default=0, help="show only the first N plans (default 0: all)")
    pp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``frenzy plan``: print the plans (exit code 0; 1 when none fits; 2 for bad input)."""
    return guarded("plan", _plan, args)


def _plan(args: argparse.Namespace) -> int:
    check_limits(args, (f"--max-gpus {args.max_gpus}", args.max_gpus))
    model = model_from_args(args)
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
        **options_from_args(args),
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
                "pp": p.pp,
                "micro_batch": p.micro_batch,
                "accumulation": p.accumulation,
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
                f"{'rank':>4}  {'gpu_type':<14}{'gpus':>5}{'dp':>5}{'tp':>4}{'pp':>4}{'mb x acc':>10}{'pred/GPU':>12}"
                f"{'capacity':>11}"
                f"{'util':>7}{'iter (s)':>10}"
            )
            for i, p in enumerate(shown):
                print(
                    f"{i + 1:>4}  {p.gpu_type:<14}{p.num_gpus:>5}{p.dp:>5}{p.tp:>4}{p.pp:>4}"
                    f"{f'{p.micro_batch}x{p.accumulation}':>10}"
                    f"{p.predicted_bytes_per_gpu / GiB:>8.2f} GiB{p.capacity_bytes / GiB:>7.0f} GiB"
                    f"{p.mem_util:>7.0%}{p.est_iter_time:>10.3f}"
                )
    if not plans:
        print(f"frenzy plan: {plans.reason}", file=sys.stderr)
        return 1
    return 0
