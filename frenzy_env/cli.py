"""The ``frenzy`` command: memory, plan, evaluate (and more as they land).

Every handler returns an exit code. Errors a user can fix (bad names, bad files, bad values) are printed as
one line ``frenzy: error: ...`` with exit code 2 and no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from frenzy_env.errors import FrenzyError


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _csv_list(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def default_policies() -> list[str]:
    """Every registered policy except masked random (reported only when asked for)."""
    from baselines import POLICIES

    return [p for p in POLICIES if p != "random"]


def _add_evaluate(sub: Any) -> None:
    p = sub.add_parser(
        "evaluate",
        help="run policies on workloads over seeds; tables with 95%% confidence intervals",
        description="Run scheduling policies through the environment and summarise JCT, GPU-hours and more.",
    )
    p.add_argument("--policies", type=_csv_list, default=None, help="comma list (default: all but random)")
    p.add_argument("--cluster", default="frenzy-testbed", help="cluster preset (default: frenzy-testbed)")
    p.add_argument("--workload", type=_csv_list, default=["itp-default"], help="workload preset(s)")
    p.add_argument("--trace", type=Path, default=None, help="a trace CSV instead of --workload")
    p.add_argument("--trace-format", choices=("itp", "philly", "canonical"), default="canonical")
    p.add_argument("--max-jobs", type=_positive_int, default=None, help="keep the first N jobs")
    p.add_argument("--seeds", type=_positive_int, default=3, help="number of seeds (0..N-1); default 3")
    p.add_argument("--predictor", choices=("frenzy", "extended", "oracle"), default="extended")
    p.add_argument(
        "--model", type=Path, default=None,
        help="MaskablePPO zip for the 'ppo' policy (default: the model shipped in agents/models). "
        "Loading a model runs pickle: only load files you trust.",
    )
    p.add_argument("--out", type=Path, default=None, help="directory for jobs.csv, episodes.csv, summary.*")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)


def _workload_factory(args: argparse.Namespace) -> tuple[list[str], Any]:
    from frenzy_env.workload import TraceGenerator, make_generator

    if args.trace is not None:
        if not args.trace.is_file():
            raise FrenzyError(f"--trace: no such file {str(args.trace)!r}")
        gen = TraceGenerator(str(args.trace), format=args.trace_format, max_jobs=args.max_jobs)
        gen.generate(0)  # validate the file now, before any episode runs
        names = [args.trace.name]
        return names, lambda _name: gen
    names = list(args.workload)
    for name in names:
        make_generator(name)  # unknown names fail before any episode runs
    if args.max_jobs is not None:
        return names, lambda name: make_generator(name, max_jobs=args.max_jobs)
    return names, lambda name: name


def cmd_evaluate(args: argparse.Namespace) -> int:
    import pandas as pd

    from baselines import POLICIES, make_policy
    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation import evaluate, summarise, summary_markdown

    cluster = ClusterSpec.preset(args.cluster)
    names = args.policies or default_policies()
    for name in names:
        if name not in POLICIES and name != "ppo":
            from frenzy_env.errors import unknown_name

            raise unknown_name("policy (--policies)", name, [*POLICIES, "ppo"])
    if args.model is not None and "ppo" not in names:
        raise FrenzyError("--model is only used by the 'ppo' policy; add ppo to --policies")
    workloads, factory = _workload_factory(args)

    def make_env(workload: str) -> FrenzyEnv:
        return FrenzyEnv(cluster=cluster, workload=factory(workload), predictor=args.predictor)

    out: Path | None = args.out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    def save(jobs: pd.DataFrame, episodes: pd.DataFrame) -> None:
        if out is not None:  # written after every episode: nothing computed is lost on a later failure
            jobs.to_csv(out / "jobs.csv", index=False)
            episodes.to_csv(out / "episodes.csv", index=False)

    def policy_factory(name: str) -> Any:
        if name == "ppo":
            from agents.ppo import load_policy

            return lambda env: load_policy(env, args.model)
        return lambda env: make_policy(name, env)

    policies = {name: policy_factory(name) for name in names}
    jobs, episodes = evaluate(
        make_env, policies, workloads, range(args.seeds), progress=not args.no_progress, on_episode=save
    )
    summary = summarise(episodes)
    md = summary_markdown(summary)
    if out is not None:
        summary.to_csv(out / "summary.csv", index=False)
        (out / "summary.md").write_text(md)
        try:
            from frenzy_env.plots import plot_results

            plot_results(jobs, episodes, summary, out)
        except ImportError:  # plots arrive with the baselines issue
            pass
    if args.json:
        print(json.dumps(json.loads(summary.to_json(orient="records")), indent=2))
    else:
        print(f"cluster {cluster.name} ({cluster.num_gpus} GPUs), {args.seeds} seed(s)")
        print(md)
        if out is not None:
            print(f"wrote {out}/jobs.csv, episodes.csv, summary.csv, summary.md")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="frenzy", description="frenzy-env: GPU-cluster scheduling for LLM training, as a Gymnasium env."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from frenzy_env.cli_memory import add_memory_parsers

    add_memory_parsers(sub)
    _add_evaluate(sub)
    import importlib

    for module in _EXTRA_COMMANDS:
        try:
            mod = importlib.import_module(f"frenzy_env.{module}")
        except ModuleNotFoundError as exc:  # a command module not written yet
            if exc.name != f"frenzy_env.{module}":
                raise
            continue
        mod.add_parsers(sub)
    return parser


# further subcommands, each in its own module with ``add_parsers(subparsers)``
_EXTRA_COMMANDS = ("cli_benchmark", "cli_train", "cli_reproduce")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FrenzyError as exc:
        print(f"frenzy: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"frenzy: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("frenzy: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
