"""``frenzy benchmark``: parse the flags, run :func:`frenzy_env.benchmark.run_benchmark` on the chosen mode
and sections, print the summary table and write the files (the measurements are :mod:`frenzy_env.benchmark`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from frenzy_env.benchmark import MODES, SECTIONS, machine_info, run_benchmark, summary_table, write_outputs
from frenzy_env.cli.common import choice_list
from frenzy_env.cli.results_folder import (
    BENCHMARK_FILES,
    add_overwrite_flag,
    check_results_folder,
    close_results_folder,
    open_results_folder,
)
from frenzy_env.errors import FrenzyError


def add_parser(sub: Any) -> None:
    """Register ``frenzy benchmark``."""
    p = sub.add_parser(
        "benchmark",
        help="measure env steps/s (vs CartPole), trace replay, decision latency, MARP, scaling, memory",
        description="Benchmark the environment and the baselines; print a table and write CSV, JSON, "
        "Markdown and a PNG. The default run takes a few minutes; --quick takes seconds, --full much longer.",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny run (seconds): a smoke test of every section")
    size.add_argument("--full", action="store_true", help="every baseline on every whole trace; long")
    p.add_argument(
        "--sections", type=choice_list("section", SECTIONS), default=SECTIONS,
        help=f"comma list of {', '.join(SECTIONS)}",
    )
    p.add_argument("--policies", default=None, help="comma list of baselines (default: every registered one "
                   "except random for replays; all for latency)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="shared data folder holding traces/philly/philly.csv and traces/itp/*.csv (without it "
                   "the replay uses the shipped ITP extract)")
    p.add_argument("--out", type=Path, default=Path("benchmark_out"),
                   help="output folder, new or empty (else --overwrite; default benchmark_out); INCOMPLETE is "
                   "there until the run has written every file")
    add_overwrite_flag(p)
    p.add_argument("--no-plot", action="store_true", help="no PNG")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``frenzy benchmark``: run the chosen sections, print the summary table and write the files."""
    if args.data_dir is not None and not args.data_dir.is_dir():
        raise FrenzyError(f"--data-dir: no such folder {str(args.data_dir)!r}")
    mode = "quick" if args.quick else "full" if args.full else "default"
    cfg = MODES[mode]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()] if args.policies else None
    machine = machine_info()
    log = (lambda _msg: None) if args.quiet else (lambda msg: print(msg, flush=True))
    check_results_folder(args, args.out)  # before the run; the folder is touched once its results are in
    res = run_benchmark(cfg, args.sections, data_dir=args.data_dir, policies=policies, log=log)
    open_results_folder(args, args.out, BENCHMARK_FILES)
    paths = write_outputs(res, machine, args.out, mode, plot=not args.no_plot)
    close_results_folder(args)
    print()
    print(summary_table(res, machine, mode))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
