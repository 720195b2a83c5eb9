"""``frenzy reproduce``: every claim of the three papers beside ours, with 95% confidence intervals."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from frenzy_env.cli.common import choice_list, env_keywords, env_option, positive_int
from frenzy_env.cli.results_folder import (
    REPRODUCE_FILES,
    add_overwrite_flag,
    check_results_folder,
    close_results_folder,
    open_results_folder,
)
from frenzy_env.errors import FrenzyError


def add_parser(sub: Any) -> None:
    """Register ``frenzy reproduce``."""
    from frenzy_env.reproduce.runner import SCENARIOS

    p = sub.add_parser(
        "reproduce",
        help="reproduce the papers' claims: their number beside ours with a 95%% CI",
        description="Run the scenarios behind every claim of the Frenzy, A-SRPT and doubling papers, each in its "
        "own setting, over seeds and write a Markdown table (claim, kind, paper, ours, comparator, setting, verdict, "
        "reason) under its written verdict rule, a table of the memory predictors and plots.",
    )
    p.add_argument("--quick", action="store_true", help="reduced run for CI (fewer jobs, 3 seeds; a few minutes)")
    p.add_argument("--seeds", type=positive_int, default=None, help="seeds (default 5; 3 with --quick)")
    p.add_argument("--jobs", type=positive_int, default=None, help="override every scenario's job count")
    p.add_argument(
        "--scenarios", type=choice_list("scenario", SCENARIOS), default=SCENARIOS,
        help=f"comma list of {', '.join(SCENARIOS)} (default all)"
    )
    p.add_argument(
        "--data-dir", type=Path, default=None,
        help="shared data folder with traces/philly/philly.csv (default: $FRENZY_ENV_DATA; without either, the "
        "Philly-derived rows are skipped and the run prints a line saying so)",
    )
    p.add_argument(
        "--calibration", type=Path, default=None,
        help="more measured MARP cases (default DATA_DIR/memory/calibration.csv if present), added to the "
        "published cases shipped in frenzy_env/data/memory_cases.csv",
    )
    p.add_argument("--out", type=Path, default=Path("reproduce_out"),
                   help="output folder, new or empty (else --overwrite; default reproduce_out); INCOMPLETE is "
                   "there until the run has written every file")
    add_overwrite_flag(p)
    p.add_argument(
        "--episode-budget", type=float, default=None,
        help="wall-clock seconds one episode may take before its policy is reported as too slow "
        "(default 120 with --quick, 600 otherwise)",
    )
    p.add_argument(
        "--env", type=env_option, action="append", default=[], metavar="KEY=VALUE", dest="env_options",
        help="a FrenzyEnv keyword for every env of every scenario (repeatable), e.g. the v6 world: --env "
        "resize_cooldown=60 --env one_action_per_instant=True --env memory_truth=published --env "
        "efficiency=per_type; a scenario's own keyword of that name wins; an unknown keyword or a bad value fails "
        "before any episode",
    )
    p.add_argument("--no-progress", action="store_true", help="no per-episode lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``frenzy reproduce``: find the data, run the scenarios, print the claims table and write the outputs."""
    from frenzy_env.reproduce.report import claims_markdown, write_outputs
    from frenzy_env.reproduce.runner import ReproduceConfig, run_reproduce

    data_dir = args.data_dir
    if data_dir is None:
        from frenzy_env.paths import shared_data_dir

        data_dir = shared_data_dir()
    if args.data_dir is not None and not args.data_dir.is_dir():
        raise FrenzyError(f"--data-dir: no such folder {str(args.data_dir)!r}")
    calibration = args.calibration
    if calibration is not None and not calibration.is_file():
        raise FrenzyError(f"--calibration: no such file {str(calibration)!r}")
    if calibration is None and data_dir is not None and (data_dir / "memory" / "calibration.csv").is_file():
        calibration = data_dir / "memory" / "calibration.csv"
    env_kwargs = env_keywords(args)
    if env_kwargs:  # an unknown keyword or a bad value fails here, before any episode
        from frenzy_env.env import FrenzyEnv

        FrenzyEnv(cluster="frenzy-testbed", workload="synthetic-small", **env_kwargs).close()
    cfg = ReproduceConfig(
        quick=args.quick, seeds=args.seeds, jobs=args.jobs, scenarios=args.scenarios, data_dir=data_dir,
        calibration=calibration, progress=not args.no_progress,
        episode_budget_s=args.episode_budget, env_kwargs=env_kwargs,
    )
    check_results_folder(args, args.out)  # before the run; the folder is touched once its results are in
    result = run_reproduce(cfg)
    open_results_folder(args, args.out, REPRODUCE_FILES)
    paths = write_outputs(result, args.out)
    close_results_folder(args)
    print(claims_markdown(result))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
