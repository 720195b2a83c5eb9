"""``frenzy evaluate --suite NAME``: every policy on a named benchmark suite's workloads (:mod:`frenzy_env.workload.
suites`), paired workload by workload, summarised in one table (:mod:`frenzy_env.evaluation.results`) and, with
``--results-md``, written into a results page.

A suite's workloads are run in groups that share their seeds (its synthetic workloads over their seeds, then
its trace windows, each with its seed), through the same evaluation loop as any other ``frenzy evaluate``.
Each workload is also played once by ``fifo`` (:func:`fifo_pressure`): the table's notes give the share of its
jobs that wait over a minute and the GPUs' busy fraction over the arrival window, the pressure the suite's load
puts on the cluster.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from frenzy_env.cli.common import CommandFailed, env_interface, env_keywords
from frenzy_env.cli.results_folder import EVALUATE_FILES, close_results_folder, open_results_folder
from frenzy_env.errors import FrenzyError
from frenzy_env.paths import atomic_write_csv, atomic_write_text

DEFAULT_REFERENCE = "srpt_est"
_FIXED_BY_SUITE = ("workload", "trace", "trace_format", "max_jobs", "load", "seeds", "seed_start", "cluster")


def seed_groups(items: list[Any]) -> list[tuple[list[str], list[int]]]:
    """The suite's workloads (:class:`~frenzy_env.workload.suites.SuiteWorkload`) as ``(workload names, seeds)``
    groups whose every pair is one of them: a name with several seeds (the synthetic one) is a group of its own;
    names with one seed are grouped by it. Episodes are then keyed by (workload, seed)."""
    by_name: dict[str, list[int]] = {}
    for item in items:
        by_name.setdefault(item.name, []).append(item.seed)
    groups: list[tuple[list[str], list[int]]] = []
    single: dict[int, list[str]] = {}
    for name, seeds in by_name.items():
        if len(seeds) > 1:
            groups.append(([name], seeds))
        else:
            if seeds[0] not in single:
                single[seeds[0]] = []
                groups.append((single[seeds[0]], [seeds[0]]))
            single[seeds[0]].append(name)
    return groups


def run_suite(args: argparse.Namespace, policy_names: list[str]) -> int:
    """Run ``args.suite`` (see the module) with the policies ``policy_names`` (``--policies`` or the defaults);
    returns the exit code."""
    from frenzy_env.cli import policies as policy_specs
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import FEW_SEEDS
    from frenzy_env.evaluation.results import pooled_latencies, suite_markdown, suite_table
    from frenzy_env.workload.suites import get_suite, suite_workloads
    from frenzy_env.world.cluster import ClusterSpec

    given = [f"--{flag.replace('_', '-')}" for flag in _FIXED_BY_SUITE if getattr(args, flag, None) is not None]
    if given:
        raise FrenzyError(f"--suite fixes the workloads, seeds and cluster: drop {', '.join(given)}")
    suite = get_suite(args.suite)
    items = suite_workloads(suite)  # a trace not downloaded: one line naming `frenzy data fetch ...`
    cluster = ClusterSpec.preset(suite.cluster)
    specs = policy_specs.resolve(policy_names, args.model, args.rllib_checkpoint, greedy=args.greedy,
                                 interface=env_interface(args))
    names = [spec.name for spec in specs]
    reference = args.reference or DEFAULT_REFERENCE
    if reference not in names:
        raise FrenzyError(f"--reference {reference}: not among the policies ({', '.join(names)}); add it to "
                          "--policies or choose another --reference")
    generators = {item.name: item.generator for item in items}

    def make_env(workload: str, **overrides: Any) -> FrenzyEnv:
        return FrenzyEnv(cluster=cluster, workload=generators[workload], predictor=args.predictor,
                         preemption=args.preemption, **{**env_keywords(args), **overrides})

    first_env = make_env(items[0].name)
    policy_specs.check(specs, first_env)  # every model file and MODULE:ATTR, before any episode
    groups = seed_groups(items)
    out = None if args.out is None else open_results_folder(args, args.out, EVALUATE_FILES)
    if out is not None:
        _write_suite_manifest(args, out, suite, specs, list(generators), first_env, reference)
    episodes, latencies, failures = _run_groups(args, make_env, specs, groups, out)
    if episodes.empty:
        _report_failures(failures)
        return 1
    if args.bounds:  # once per workload, whatever the number of policies
        episodes = _with_bounds(args, make_env, groups, episodes, out)
    table = suite_table(episodes, reference, pooled_latencies(latencies))
    pressure = fifo_pressure(make_env, items, cluster.num_gpus)
    md = suite_markdown(table, reference, suite.describe(), pressure)
    if len(items) < FEW_SEEDS:
        print(f"frenzy: warning: n={len(items)}: intervals over fewer than {FEW_SEEDS} workloads are missing or "
              "unreliable", file=sys.stderr)
    written = _write_suite_files(args, out, suite, table, md, pressure)
    close_results_folder(args)
    if args.json:
        print(json.dumps({"suite": suite.name, "reference": reference,
                          "policies": json.loads(table.to_json(orient="records")),
                          "fifo_pressure": json.loads(pressure.to_json(orient="records"))}, indent=2))
    else:
        print(f"suite {suite.name}: {suite.size} workloads on {cluster.name} ({cluster.num_gpus} GPUs)")
        print(md)
        for line in written:
            print(f"wrote {line}")
    if failures:
        _report_failures(failures)
        return 1
    return 0


def fifo_pressure(make_env: Any, items: list[Any], num_gpus: int) -> Any:
    """FIFO's pressure on every workload of a suite (:class:`~frenzy_env.workload.suites.SuiteWorkload`): one
    ``fifo`` episode each, made by ``make_env(name)``; a DataFrame with columns workload, seed, wait_frac (the share
    of jobs that wait over a minute) and busy_frac (GPU-seconds held over ``num_gpus`` times the arrival window),
    from :func:`~frenzy_env.evaluation.results.queue_pressure`."""
    import pandas as pd

    from baselines import make_policy
    from frenzy_env.evaluation.episodes import run_episode
    from frenzy_env.evaluation.results import queue_pressure

    rows = []
    for item in items:
        env = make_env(item.name)
        result = run_episode(env, make_policy("fifo", env), seed=item.seed)
        wait, busy = queue_pressure(result.jobs, result.attempts, num_gpus)
        rows.append({"workload": item.name, "seed": item.seed, "wait_frac": wait, "busy_frac": busy})
    return pd.DataFrame(rows, columns=["workload", "seed", "wait_frac", "busy_frac"])


def _write_suite_manifest(
    args: argparse.Namespace, out: Path, suite: Any, specs: list, workloads: list[str], first_env: Any,
    reference: str,
) -> None:
    """``manifest.json`` in ``out``, before any episode: the command, the policies, the suite and its
    definition, the reference."""
    from frenzy_env.cli.manifest import build_manifest, write_manifest
    from frenzy_env.workload.suites import SUITES

    write_manifest(out, build_manifest(
        getattr(args, "command_line", None), specs, workloads, None, suite.seeds, first_env,
        backend=args.backend, suite=suite.name, suite_definition=repr(SUITES[suite.name]),
        reference=reference,
    ))


def _run_groups(
    args: argparse.Namespace, make_env: Any, specs: list, groups: list[tuple[list[str], list[int]]],
    out: Path | None,
) -> tuple[Any, list[tuple[str, Any]], list]:
    """Every group of the suite in turn (:func:`_run_group`; on Ray, started or joined here); returns the
    episodes table, each episode's (policy, decision times in seconds) and the episodes that failed on Ray.
    With ``out``, ``jobs.csv`` and ``episodes.csv`` are rewritten after every episode."""
    import pandas as pd

    from frenzy_env.cli import policies as policy_specs

    policies = {spec.name: spec.factory for spec in specs}
    done_jobs: list[pd.DataFrame] = []
    done_episodes: list[pd.DataFrame] = []
    latencies: list[tuple[str, Any]] = []  # (policy, one episode's decision times in seconds)
    failures: list[Any] = []

    def keep(workload: str, policy: str, seed: int, result: Any) -> None:
        latencies.append((policy, result.latencies))

    def save(jobs: pd.DataFrame, episodes: pd.DataFrame) -> None:
        if out is not None:
            atomic_write_csv(out / "jobs.csv", pd.concat([*done_jobs, jobs], ignore_index=True))
            atomic_write_csv(out / "episodes.csv", pd.concat([*done_episodes, episodes], ignore_index=True))

    ray = started = None
    if args.backend == "ray":
        from frenzy_env.evaluation.distributed import connect, import_ray

        ray = import_ray()
        for spec in specs:
            if spec.kind == "module":
                ray.cloudpickle.register_pickle_by_value(policy_specs.module_of(spec))
        started = connect(args.address, args.num_cpus)
    try:
        for workloads, seeds in groups:
            jobs, episodes, failed = _run_group(args, make_env, policies, workloads, seeds, save, keep,
                                                len(pd.concat(done_episodes)) if done_episodes else 0, out)
            done_jobs.append(jobs)
            done_episodes.append(episodes)
            failures += failed
    finally:
        if started:
            ray.shutdown()
    return pd.concat(done_episodes, ignore_index=True), latencies, failures


def _with_bounds(
    args: argparse.Namespace, make_env: Any, groups: list[tuple[list[str], list[int]]], episodes: Any,
    out: Path | None,
) -> Any:
    """``episodes`` with the JCT lower bounds of their workloads; with ``out``, ``bounds.csv`` written and
    ``episodes.csv`` rewritten."""
    import pandas as pd

    from frenzy_env.evaluation.episodes import add_jct_bounds, jct_bounds

    bounds = pd.concat([jct_bounds(make_env, w, s, progress=not args.no_progress) for w, s in groups],
                       ignore_index=True)
    episodes = add_jct_bounds(episodes, bounds)
    if out is not None:
        atomic_write_csv(out / "bounds.csv", bounds)
        atomic_write_csv(out / "episodes.csv", episodes)
    return episodes


def _write_suite_files(
    args: argparse.Namespace, out: Path | None, suite: Any, table: Any, md: str, pressure: Any
) -> list[str]:
    """``suite.csv``, ``suite.md`` and ``pressure.csv`` (:func:`fifo_pressure`) in ``out`` and, with
    ``--results-md``, the suite's section of that page; returns the lines naming what was written."""
    from frenzy_env import __version__
    from frenzy_env.evaluation.results import results_section, update_results_page
    from frenzy_env.versions import ENV_VERSION

    written = []
    if out is not None:
        atomic_write_csv(out / "suite.csv", table)
        atomic_write_text(out / "suite.md", md)
        atomic_write_csv(out / "pressure.csv", pressure)
        written.append(f"{out}: jobs.csv, episodes.csv, {'bounds.csv, ' * args.bounds}suite.csv, suite.md, "
                       "pressure.csv, manifest.json")
    if args.results_md is not None:
        page_path: Path = args.results_md
        command = shlex.join(getattr(args, "command_line", None) or ["frenzy", "evaluate", "--suite", suite.name])
        section = results_section(
            suite.name, md, command, date=datetime.date.today().isoformat(), env_version=ENV_VERSION,
            package_version=__version__,
        )
        page = page_path.read_text() if page_path.is_file() else None
        page_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(page_path, update_results_page(page, suite.name, section))
        written.append(f"{page_path} (section {suite.name})")
    return written


def _run_group(
    args: argparse.Namespace, make_env: Any, policies: dict, workloads: list[str], seeds: list[int], save: Any,
    keep: Any, before: int, out: Path | None,
) -> tuple[Any, Any, list]:
    """One group of a suite: every policy on ``workloads`` x ``seeds`` (locally or on Ray); a failing local
    episode stops the run with a message naming it."""
    from frenzy_env.evaluation.episodes import evaluate

    progress = not args.no_progress
    if args.backend == "ray":
        from frenzy_env.evaluation.distributed import evaluate_ray

        return evaluate_ray(make_env, policies, workloads, seeds, progress=progress, on_episode=save,
                            on_result=keep)
    finished = 0

    def count(jobs: Any, episodes: Any) -> None:
        nonlocal finished
        finished = len(episodes)
        save(jobs, episodes)

    try:
        jobs, episodes = evaluate(make_env, policies, workloads, seeds, progress=progress, on_episode=count,
                                  on_result=keep)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        names, n = list(policies), len(seeds)
        w, p, s = finished // (len(names) * n), (finished // n) % len(names), seeds[finished % n]
        done = before + finished
        kept = f"; the {done} finished episode(s) are saved in {out}" if out is not None and done else ""
        kind = "" if isinstance(exc, FrenzyError) else f"{type(exc).__name__}: "
        raise CommandFailed(
            f"suite episode ({workloads[w]}, policy {names[p]}, seed {s}) failed: {kind}{exc}{kept}",
            2 if isinstance(exc, FrenzyError) else 1,
        ) from exc
    return jobs, episodes, []


def _report_failures(failures: list) -> None:
    lines = "\n".join(f"  {f.describe()}" for f in failures)
    print(f"frenzy: {len(failures)} episode(s) failed on every attempt and are left out of the table:\n{lines}",
          file=sys.stderr)
