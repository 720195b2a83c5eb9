"""``frenzy evaluate``: run scheduling policies on workloads over seeds and print tables of JCT, GPU-hours and
more with 95% confidence intervals (episodes one after another here, or as Ray tasks with ``--backend ray``).
``--suite NAME`` plays a named benchmark suite instead, paired across policies (:mod:`frenzy_env.cli.suite`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from frenzy_env.cli.common import (
    CommandFailed,
    csv_list,
    env_interface,
    env_keywords,
    env_option,
    non_negative_int,
    positive_float,
    positive_int,
)
from frenzy_env.cli.policies import model_arg
from frenzy_env.cli.results_folder import EVALUATE_FILES, add_overwrite_flag, close_results_folder, open_results_folder
from frenzy_env.errors import FrenzyError
from frenzy_env.paths import atomic_write_csv, atomic_write_text
from frenzy_env.versions import ENV_VERSION

DEFAULT_POLICIES = ("frenzy", "asrpt", "doubling", "srpt_est", "fifo", "sjf")
#: the worlds a shipped ``ppo`` model plays (``--world``; None: this version's, the universal model's; "v5": env
#: v5's, frenzy-testbed's cluster-layout model): there the default policies include it
PPO_WORLDS = (None, "v5")


def default_policies(world: str | None = None) -> list[str]:
    """The papers' baselines, srpt_est, fifo and the sjf oracle: all of them fast; in a world a shipped ``ppo``
    model plays (:data:`PPO_WORLDS`: this version's and v5's), ``ppo`` too (the action-level MaskablePPO agent,
    milliseconds per decision). The integer-program policies ``sia`` and ``sia_srpt`` (minutes per episode on
    the default workload: a MILP every 60 s; ``sia_srpt:move_margin=0.2`` is the named planner baseline), the
    ``fifo_strict`` and ``sjf_greedy`` variants, masked ``random`` and ``rllib`` (an RLlib checkpoint, with
    ``--rllib-checkpoint``) run when asked for with ``--policies``."""
    return [*DEFAULT_POLICIES, *(("ppo",) if world in PPO_WORLDS else ())]


def _world_names() -> list[str]:
    from frenzy_env.registration import WORLDS

    return [name for name in WORLDS if name != ENV_VERSION]


def _suite_names() -> list[str]:
    from frenzy_env.workload.suites import SUITES

    return list(SUITES)


def add_parser(sub: Any) -> None:
    """Register ``frenzy evaluate``."""
    p = sub.add_parser(
        "evaluate",
        help="run policies on workloads over seeds; tables with 95%% confidence intervals",
        description="Run scheduling policies through the environment and summarise JCT, GPU-hours and more.",
    )
    p.add_argument(
        "--policies", type=csv_list, default=None,
        help="comma list of {frenzy,asrpt,doubling,sia,sia_srpt,srpt_est,fifo,fifo_strict,sjf,sjf_greedy,spwf,fifo_he,"
        f"sjf_he,random,ppo,rllib}}, names of --model NAME=PATH, and MODULE:ATTR "
        f"(default: {','.join(DEFAULT_POLICIES)},ppo; without ppo under --world v4); a baseline takes keywords as "
        "NAME:key=value (the planner baseline: sia_srpt:move_margin=0.2); "
        "ppo (the action-level MaskablePPO agent) plays its shipped model or the one given as --model PATH, rllib "
        "(a policy trained with frenzy train --backend rllib) needs --rllib-checkpoint. MODULE:ATTR is your own "
        "policy: ATTR(env) must return an object with stable-baselines3's predict(obs, state=None, "
        "episode_start=None, deterministic=True, action_masks=None) (reset() optional); MODULE is imported with "
        "the current directory on sys.path; the tables label it ATTR",
    )
    p.add_argument(
        "--suite", default=None, metavar="NAME",
        help="a named benchmark suite instead of --workload/--trace, --seeds and --cluster: its fixed workloads, "
        f"paired across policies, in one table with ratios to --reference ({', '.join(_suite_names())}; "
        "docs/evaluation.md, Suites)",
    )
    p.add_argument(
        "--reference", default=None, metavar="POLICY",
        help="with --suite: the policy every other is compared with, workload by workload (default: srpt_est)",
    )
    p.add_argument(
        "--results-md", type=Path, default=None, metavar="PATH",
        help="with --suite: write the suite's table into this Markdown page (e.g. docs/results.md) with the date, "
        "versions and machine, replacing that suite's previous section and keeping the rest of the page",
    )
    p.add_argument("--cluster", default=None, help="cluster preset (default: frenzy-testbed)")
    p.add_argument("--workload", type=csv_list, default=None, help="workload preset(s) (default: itp-default)")
    p.add_argument(
        "--trace", default=None, metavar="NAME|PATH",
        help="a trace instead of --workload: a cached public trace by name (`frenzy data list`) or a CSV file",
    )
    p.add_argument(
        "--trace-format", choices=("itp", "philly", "canonical"), default=None,
        help="the file's format (default: the catalogue's for a named trace, else canonical; see "
        "docs/traces.md)",
    )
    p.add_argument(
        "--max-jobs", type=positive_int, default=None,
        help="keep the first N jobs of a trace (synthetic workloads: generate N jobs)",
    )
    p.add_argument(
        "--load", type=positive_float, default=None, metavar="X",
        help="offered load X > 0 on the cluster (frenzy_env.workload.load): a --trace's arrival times are scaled so "
        "that each seed's workload offers exactly X (its models then sized for the cluster's GPU mix, as the "
        "trace presets' are); a --workload preset with a load (synthetic, itp-default) is generated at X",
    )
    p.add_argument("--seeds", type=positive_int, default=None, help="number of seeds; default 3")
    p.add_argument(
        "--seed-start", type=non_negative_int, default=None,
        help="first seed, >= 0 (seeds are SEED_START .. SEED_START+N-1); the shipped agents never saw seeds >= 1000",
    )
    p.add_argument("--predictor", choices=("frenzy", "extended", "oracle"), default="extended")
    p.add_argument(
        "--env", type=env_option, action="append", default=[], metavar="KEY=VALUE", dest="env_options",
        help="a FrenzyEnv keyword for every env of the run (repeatable), e.g. --env efficiency=microbatch --env "
        "memory_truth=residual --env layouts=no_accumulation (the world options of docs/world.md); values are "
        "read as True/False/None, numbers or text; an unknown keyword fails before any episode",
    )
    p.add_argument(
        "--world", choices=_world_names(), default=None,
        help=f"play in the world of an earlier env version (its keywords under --env's; default: this version's, "
        f"{ENV_VERSION}): ppo plays this version's world with its universal model and v5's with "
        "frenzy-testbed's env-v5 model",
    )
    p.add_argument(
        "--preemption", action="store_true",
        help="envs with preempt actions (FrenzyEnv(preemption=True)): needed by sia and sia_srpt with preempt=True "
        "(e.g. sia_srpt:preempt=True); policies that do not preempt play as without it, but the action-level "
        "PPO models of agents/models do not fit its larger action space",
    )
    p.add_argument(
        "--model", type=model_arg, action="append", default=[], metavar="[NAME=]PATH",
        help="a model file of the learned agent: PATH replaces the shipped model of the 'ppo' policy; "
        "NAME=PATH is a policy of its own called NAME, evaluated with the others (repeatable: one per model). "
        "Every model is loaded and checked against the env before any episode. Loading a model runs pickle: "
        "only load files you trust.",
    )
    p.add_argument(
        "--greedy", action="store_true",
        help="PPO models take their most likely action; by default they "
        "sample from their distribution as in training, seeded per episode (the greedy action of the shipped "
        "action-level agent loops, resizing a job back and forth)",
    )
    p.add_argument(
        "--rllib-checkpoint", type=Path, default=None, metavar="PATH",
        help="for the 'rllib' policy (required with it): the run folder of frenzy train --backend rllib, its "
        "checkpoint/ or the RLModule folder inside it; needs the [ray] extra and a checkpoint trained on the "
        "same cluster. Loading a checkpoint runs pickle: only load checkpoints you trust.",
    )
    p.add_argument(
        "--out", type=Path, default=None,
        help="directory for jobs.csv, episodes.csv, summary.* and manifest.json (what was evaluated: command, "
        "version, policies, model and trace files with their SHA-256, seeds, env configuration); a new or empty "
        "folder (else --overwrite); INCOMPLETE is there until the run has written every file",
    )
    add_overwrite_flag(p)
    p.add_argument(
        "--bounds", action="store_true",
        help="also compute a lower bound on each episode's average JCT that no scheduler can beat "
             "(frenzy_env.evaluation.bounds; a linear program per workload and seed: 10-100 s for 150-200 jobs, "
             "about 3 min "
             "for itp-default's 570) and report each episode's avg JCT over it",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--backend", choices=("local", "ray"), default="local",
        help="local: episodes one after another in this process (default); ray: each episode a Ray task "
        "(needs the [ray] extra), on a local Ray instance or the cluster at --address",
    )
    p.add_argument("--address", default=None, help="Ray cluster address for --backend ray (e.g. auto, HOST:6379)")
    p.add_argument("--num-cpus", type=positive_int, default=None,
                   help="CPUs of the local Ray instance --backend ray starts without --address (default: all)")
    p.set_defaults(func=run)


def _workload_factory(args: argparse.Namespace, cluster: Any = None) -> tuple[list[str], Any, dict | None]:
    """The workload names, ``factory(name)`` (what ``FrenzyEnv(workload=...)`` takes) and, for ``--trace``, the
    trace's record for the manifest (name, format, path, SHA-256, size)."""
    import dataclasses

    from frenzy_env.env import bind_generator
    from frenzy_env.errors import ConfigError
    from frenzy_env.workload import TraceGenerator, make_generator

    if args.trace is not None:
        from frenzy_env.workload import datasets

        try:
            path = datasets.resolve(args.trace)
        except datasets.DatasetError as exc:
            raise FrenzyError(f"--trace: {exc}") from None
        fmt = args.trace_format
        if fmt is None:
            fmt = datasets.trace_format(args.trace) if args.trace in datasets.CATALOGUE else "canonical"
        gen = TraceGenerator(str(path), format=fmt, max_jobs=args.max_jobs)
        if args.load is not None:  # sized for the cluster, arrivals scaled to the offered load asked for
            gen = dataclasses.replace(bind_generator(gen, cluster, by_name=True), load=args.load)
        gen.generate(0)  # validate the file now, before any episode runs
        names = [args.trace if args.trace in datasets.CATALOGUE else path.name]
        from frenzy_env.cli.manifest import file_record

        return names, lambda _name: gen, {"name": args.trace, "format": fmt, **file_record(path)}
    names = list(args.workload)
    gens = {name: make_generator(name) for name in names}  # unknown names fail before any episode runs
    if args.max_jobs is None and args.load is None:
        return names, lambda name: name, None
    for name, gen in gens.items():
        fields = {f.name for f in dataclasses.fields(gen)} if dataclasses.is_dataclass(gen) else set()
        overrides: dict[str, Any] = {}
        if args.max_jobs is not None:
            key = "max_jobs" if "max_jobs" in fields else "num_jobs" if "num_jobs" in fields else None
            if key is None:
                raise ConfigError(f"--max-jobs does not apply to workload {name!r} ({type(gen).__name__})")
            overrides[key] = args.max_jobs
        if args.load is not None:
            if "load" not in fields:
                raise ConfigError(f"--load does not apply to workload {name!r} ({type(gen).__name__})")
            overrides["load"] = args.load
        gens[name] = make_generator(name, **overrides)
        if cluster is not None:  # as FrenzyEnv does for a preset given by name
            gens[name] = bind_generator(gens[name], cluster, by_name=True)
    return names, lambda name: gens[name], None


def _evaluate_locally(
    args: argparse.Namespace, make_env: Any, policies: dict, workloads: list[str], seeds: range, save: Any,
    names: list[str], saved: Any, on_result: Any = None,
) -> tuple[Any, Any]:
    """The local backend; a failing episode stops the sweep with a message naming it (``saved()``: the
    number of episodes finished so far, which ``save`` wrote)."""
    from frenzy_env.evaluation.episodes import evaluate

    out: Path | None = args.out
    try:
        return evaluate(make_env, policies, workloads, seeds, progress=not args.no_progress, on_episode=save,
                        on_result=on_result)
    except KeyboardInterrupt:
        if out is not None and saved():
            print(f"frenzy: {saved()} finished episode(s) are saved in {out}", file=sys.stderr)
        raise
    except Exception as exc:
        # evaluate() runs workloads x policies x seeds in that nesting order
        done = saved()
        per_workload = len(names) * args.seeds
        w, p, seed = done // per_workload, (done // args.seeds) % len(names), args.seed_start + done % args.seeds
        where = f"episode {done + 1} ({workloads[w]}, policy {names[p]}, seed {seed})"
        kept = f"; the {done} finished episode(s) are saved in {out}" if out is not None and done else ""
        kind = "" if isinstance(exc, FrenzyError) else f"{type(exc).__name__}: "
        raise CommandFailed(
            f"{where} failed: {kind}{exc}{kept}", 2 if isinstance(exc, FrenzyError) else 1
        ) from exc


def _evaluate_on_ray(
    args: argparse.Namespace, make_env: Any, policies: dict, workloads: list[str], seeds: range, save: Any,
    modules: list[Any],
    on_result: Any = None,
) -> tuple[Any, Any, list]:
    """The Ray backend: one task per episode; failed tasks are retried once and reported. ``modules``: those
    of MODULE:ATTR policies, sent to the workers by value (they may not import them)."""
    from frenzy_env.evaluation.distributed import connect, evaluate_ray, import_ray

    ray = import_ray()
    for module in modules:
        ray.cloudpickle.register_pickle_by_value(module)
    started = connect(args.address, args.num_cpus)
    try:
        return evaluate_ray(make_env, policies, workloads, seeds, progress=not args.no_progress, on_episode=save,
                            on_result=on_result)
    finally:
        if started:
            ray.shutdown()


def run(args: argparse.Namespace) -> int:
    """``frenzy evaluate``: check the arguments, run every episode, print (and with ``--out`` write) the tables."""
    from frenzy_env.cli import policies as policy_specs
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import interval_note, summarise, summary_markdown
    from frenzy_env.world.cluster import ClusterSpec

    if args.backend != "ray":
        for flag in ("address", "num_cpus"):
            if getattr(args, flag) is not None:
                raise FrenzyError(f"--{flag.replace('_', '-')} applies to --backend ray only")
    if args.overwrite and args.out is None:
        raise FrenzyError("--overwrite applies to --out only")
    if args.suite is not None:
        from frenzy_env.cli.suite import run_suite

        return run_suite(args, args.policies or default_policies(args.world))
    _check_without_suite(args)
    cluster = ClusterSpec.preset(args.cluster)
    specs = policy_specs.resolve(
        args.policies or default_policies(args.world), args.model, args.rllib_checkpoint, greedy=args.greedy,
        interface=env_interface(args),
    )
    workloads, factory, trace = _workload_factory(args, cluster)

    def make_env(workload: str, **overrides: Any) -> FrenzyEnv:
        return FrenzyEnv(cluster=cluster, workload=factory(workload), predictor=args.predictor,
                         preemption=args.preemption, **{**env_keywords(args), **overrides})

    first_env = make_env(workloads[0])
    policy_specs.check(specs, first_env)  # every model file and MODULE:ATTR, before any episode
    seeds = range(args.seed_start, args.seed_start + args.seeds)
    out = None if args.out is None else open_results_folder(args, args.out, EVALUATE_FILES)
    if out is not None:
        from frenzy_env.cli.manifest import build_manifest, write_manifest

        write_manifest(out, build_manifest(
            getattr(args, "command_line", None), specs, workloads, trace, seeds, first_env,
            backend=args.backend, max_jobs=args.max_jobs, **({"load": args.load} if args.load is not None else {}),
        ))
    jobs, episodes, failures, schedules = _play_all(args, make_env, specs, workloads, seeds, out)
    if failures and episodes.empty:
        _report_failures(failures)
        return 1
    if args.bounds:
        episodes = _with_bounds(args, make_env, workloads, seeds, episodes, out)
    summary = summarise(episodes)
    md = summary_markdown(summary)
    note = interval_note(summary)
    if note is not None:
        print(f"frenzy: warning: {note}", file=sys.stderr)
    if out is not None:
        _write_summary(out, jobs, episodes, summary, md, schedules, cluster)
        close_results_folder(args)
    if args.json:
        print(json.dumps(json.loads(summary.to_json(orient="records")), indent=2))
    else:
        load = f", offered load {args.load:g}" if args.load is not None else ""
        print(f"cluster {cluster.name} ({cluster.num_gpus} GPUs), {args.seeds} seed(s){load}")
        print(md)
        if out is not None:
            print(f"wrote {out}: jobs.csv, episodes.csv, {'bounds.csv, ' * args.bounds}summary.csv, summary.md, "
                  "manifest.json, the plots and a schedule picture per policy (PNG)")
    if failures:
        _report_failures(failures)
        return 1
    return 0


def _check_without_suite(args: argparse.Namespace) -> None:
    """Without ``--suite``: its own flags are an error, and the workloads, seeds and cluster left out take
    their defaults."""
    for flag in ("reference", "results_md"):
        if getattr(args, flag) is not None:
            raise FrenzyError(f"--{flag.replace('_', '-')} applies to --suite only")
    for flag, default in (("cluster", "frenzy-testbed"), ("workload", ["itp-default"]), ("seeds", 3),
                          ("seed_start", 0)):
        if getattr(args, flag) is None:
            setattr(args, flag, default)


def _play_all(
    args: argparse.Namespace, make_env: Any, specs: list, workloads: list[str], seeds: range, out: Path | None,
) -> tuple[Any, Any, list, dict]:
    """Every policy on every workload and seed, on the backend asked for; returns the jobs and episodes tables,
    the episodes that failed on Ray, and the schedule of each (workload, policy) on the first seed: (seed,
    attempts, first submission). With ``out``, the tables are rewritten after every episode."""
    import pandas as pd

    from frenzy_env.cli import policies as policy_specs

    saved = 0  # episodes finished (and, with --out, written)

    def save(jobs: pd.DataFrame, episodes: pd.DataFrame) -> None:
        nonlocal saved
        saved = len(episodes)
        if out is not None:  # written after every episode: nothing computed is lost on a later failure
            atomic_write_csv(out / "jobs.csv", jobs)
            atomic_write_csv(out / "episodes.csv", episodes)

    policies = {spec.name: spec.factory for spec in specs}
    failures: list[Any] = []
    schedules: dict = {}  # (workload, policy) -> (seed, attempts, first submission) of the first seed

    def keep_schedule(workload: str, policy: str, seed: int, result: Any) -> None:
        if seed == seeds[0]:
            schedules[(workload, policy)] = (seed, result.attempts, float(result.jobs["submit_time_s"].min()))

    if args.backend == "ray":
        modules = [policy_specs.module_of(spec) for spec in specs if spec.kind == "module"]
        jobs, episodes, failures = _evaluate_on_ray(
            args, make_env, policies, workloads, seeds, save, modules, keep_schedule
        )
    else:
        names = [spec.name for spec in specs]
        jobs, episodes = _evaluate_locally(
            args, make_env, policies, workloads, seeds, save, names, lambda: saved, keep_schedule
        )
    return jobs, episodes, failures, schedules


def _with_bounds(
    args: argparse.Namespace, make_env: Any, workloads: list[str], seeds: range, episodes: Any, out: Path | None,
) -> Any:
    """``episodes`` with the JCT lower bounds of their workloads; with ``out``, ``bounds.csv`` written and
    ``episodes.csv`` rewritten."""
    from frenzy_env.evaluation.episodes import add_jct_bounds, jct_bounds

    bounds = jct_bounds(make_env, workloads, seeds, progress=not args.no_progress)
    episodes = add_jct_bounds(episodes, bounds)
    if out is not None:
        atomic_write_csv(out / "bounds.csv", bounds)
        atomic_write_csv(out / "episodes.csv", episodes)
    return episodes


def _write_summary(
    out: Path, jobs: Any, episodes: Any, summary: Any, md: str, schedules: dict, cluster: Any
) -> None:
    """``summary.csv``, ``summary.md``, the plots of the results and a schedule picture per policy in ``out``."""
    from frenzy_env.evaluation.plots import plot_results, plot_schedules

    atomic_write_csv(out / "summary.csv", summary)
    atomic_write_text(out / "summary.md", md)
    plot_results(jobs, episodes, summary, out)
    plot_schedules(schedules, cluster, out)


def _report_failures(failures: list) -> None:
    lines = "\n".join(f"  {f.describe()}" for f in failures)
    print(f"frenzy: {len(failures)} episode(s) failed on every attempt and are left out of the tables:\n{lines}",
          file=sys.stderr)
