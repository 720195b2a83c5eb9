"""Run policies through the environment and summarise the results with confidence intervals.

A policy is a :class:`~frenzy_env.policy.Policy`: the stable-baselines3 ``predict`` signature plus ``reset``::

    predict(observation, state=None, episode_start=None, deterministic=True, action_masks=None)
        -> (action, state)
    reset()  # after each env.reset(), before the episode's first predict

so trained agents (``agents.ppo.PPOPolicy``, ``agents.rllib.RLlibPolicy``) and the scripted baselines run
through exactly the same loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from frenzy_env.policy import Policy

JOB_COLUMNS = (
    "job_id", "name", "submit_time_s", "start_time_s", "finish_time_s", "jct_h", "gpu_type", "num_gpus", "dp", "tp",
    "restarts", "oom_failures", "gpu_hours", "rejected_reason",
)
"""Columns of the per-job table (``jobs.csv``): times on the simulator's clock in seconds (``_s``), the job
completion time in hours (``_h``), GPU-hours; the others are counts or labels."""
ATTEMPT_COLUMNS = (
    "job_id", "attempt", "gpu_type", "num_gpus", "dp", "tp", "gpus", "start_time_s", "progress_from_s",
    "end_time_s", "outcome",
)
"""Columns of the per-attempt table (:func:`attempts_table`): one row per allocation of GPUs to a job, from
its start or resize (``start_time_s``; iterations from ``progress_from_s``) to its end (``end_time_s``, nan
while running) with its ``outcome`` ("finished", "oom", "resized", "preempted" or "running"); ``gpus`` is the
tuple of the cluster's GPU indices it held, ``attempt`` its number among the job's attempts (0, 1, ...)."""
SUMMARY_METRICS = (
    "offered_load_ratio", "avg_jct_h", "jct_bound_h", "jct_over_bound_ratio", "p95_jct_h", "makespan_h", "gpu_hours",
    "lost_gpu_hours", "overhead_gpu_hours",
    "utilisation_frac", "ooms", "restarts", "rejected",
    "invalid_actions", "latency_median_ms", "latency_p99_ms",
)
"""Episode metrics summarised over seeds. Every name says its unit: ``_h`` hours, ``_frac`` a fraction in
[0, 1], ``_ms`` milliseconds, ``gpu_hours`` GPU-hours (``lost_gpu_hours``: those held by attempts that failed
with out-of-memory; ``overhead_gpu_hours``: those the other attempts held before their first iteration, in
start-up, checkpoint write and load); ``offered_load_ratio`` is the episode workload's offered load on the
cluster, a ratio (:mod:`frenzy_env.workload.load`); ``jct_bound_h`` a lower bound on the episode's average
JCT that no scheduler can beat and ``jct_over_bound_ratio`` the average JCT over it (only with bounds asked
for: :func:`add_jct_bounds`); ``ooms``, ``restarts``, ``rejected`` and ``invalid_actions``
are counts."""
FEW_SEEDS = 3
"""Below this many seeds a t-interval is reported with a warning (:func:`interval_note`)."""


@dataclass
class EpisodeResult:
    """One episode: ``jobs`` (one row per job, :data:`JOB_COLUMNS`), ``metrics``, the utilisation timeline,
    the decision latencies (seconds) and ``attempts`` (one row per attempt, :data:`ATTEMPT_COLUMNS`)."""

    jobs: pd.DataFrame
    metrics: dict[str, float]
    utilisation: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0), np.zeros(0)))
    latencies: np.ndarray = field(default_factory=lambda: np.zeros(0))
    attempts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(ATTEMPT_COLUMNS)))


def jobs_table(sim: Any) -> pd.DataFrame:
    """Per-job records of a simulator as a DataFrame with :data:`JOB_COLUMNS`."""
    recs = sim.records
    df = pd.DataFrame(
        {
            "job_id": [r.job_id for r in recs],
            "name": [j.name for j in sim.jobs],  # the trace's own job id (empty for synthetic jobs)
            "submit_time_s": [r.submit_time for r in recs],
            "start_time_s": [r.start_time for r in recs],
            "finish_time_s": [r.finish_time for r in recs],
            "gpu_type": [r.gpu_type for r in recs],
            "num_gpus": [r.num_gpus for r in recs],
            "dp": [r.dp for r in recs],
            "tp": [r.tp for r in recs],
            "restarts": [r.restarts for r in recs],
            "oom_failures": [r.oom_failures for r in recs],
            "gpu_hours": [r.gpu_seconds / 3600.0 for r in recs],
            "rejected_reason": [r.rejected_reason for r in recs],
        }
    )
    df.insert(4, "jct_h", (df["finish_time_s"] - df["submit_time_s"]) / 3600.0)
    return df[list(JOB_COLUMNS)]


def attempts_table(sim: Any) -> pd.DataFrame:
    """The attempt log of a simulator (``sim.attempts``) as a DataFrame with :data:`ATTEMPT_COLUMNS`."""
    seen: dict[int, int] = {}
    rows = []
    for a in sim.attempts:
        number = seen[a.job_id] = seen.get(a.job_id, -1) + 1
        rows.append((
            a.job_id, number, a.gpu_type, a.num_gpus, a.dp, a.tp, a.gpus, a.start_time, a.progress_from,
            a.end_time, a.outcome,
        ))
    return pd.DataFrame(rows, columns=list(ATTEMPT_COLUMNS))


def step_limit(num_jobs: int) -> int:
    """A generous decision limit for one scripted episode of ``num_jobs`` jobs (200 per job plus 10,000), so
    that a policy that never lets the episode end is cut instead of running forever."""
    return 200 * int(num_jobs) + 10_000


def play(
    env: Any,
    policy: Policy,
    seed: int | None = None,
    *,
    deterministic: bool = True,
    max_steps: int | None = None,
    time_budget_s: float | None = None,
) -> tuple[dict, bool, np.ndarray]:
    """The evaluation loop: reset ``env`` with ``seed``, then ``policy``; let ``policy`` act until the episode
    ends, after ``max_steps`` decisions, or once ``time_budget_s`` wall seconds have passed (checked every
    1,024 decisions). Returns the last ``info``, whether the episode terminated, and the wall time in seconds of
    each ``predict`` call (the decision latencies)."""
    base = env.unwrapped
    clock = time.perf_counter
    deadline = math.inf if time_budget_s is None else clock() + time_budget_s
    obs, info = env.reset(seed=seed)
    policy.reset()
    latencies: list[float] = []
    state = None
    episode_start = np.ones((1,), dtype=bool)
    terminated = truncated = False
    while not (terminated or truncated):
        mask = base.action_masks()
        t0 = clock()
        action, state = policy.predict(
            obs, state=state, episode_start=episode_start, deterministic=deterministic, action_masks=mask
        )
        latencies.append(clock() - t0)
        episode_start = np.zeros((1,), dtype=bool)
        obs, _, terminated, truncated, info = env.step(int(np.asarray(action).reshape(-1)[0]))
        if max_steps is not None and len(latencies) >= max_steps:
            break
        if len(latencies) % 1024 == 0 and clock() > deadline:
            break
    return info, bool(terminated), np.array(latencies)


def episode_offered_load(sim: Any) -> float:
    """The offered load (:func:`frenzy_env.workload.offered_load`) of a simulator's workload on its cluster, at its
    utilisation, efficiency and largest plan."""
    from frenzy_env.workload import offered_load

    cfg = sim.config
    return offered_load(
        sim.workload, sim.cluster, utilisation=cfg.utilisation, max_gpus=cfg.max_plan_gpus, efficiency=cfg.efficiency
    )


def run_episode(
    env: Any,
    policy: Policy,
    seed: int | None = None,
    *,
    deterministic: bool = True,
    max_steps: int | None = None,
) -> EpisodeResult:
    """Play one episode of ``env`` with ``policy`` (:func:`play`); returns per-job records and metrics.

    ``env`` may be wrapped (``gymnasium.make``); the simulator is read from ``env.unwrapped``.
    Decision latency is the wall time of each ``predict`` call. An episode that ``max_steps`` stops before it
    ends is reported as truncated (``episode_metrics(truncated=True)``: ``truncated``, ``unfinished``,
    ``avg_time_in_system_h``, ``avg_jct_h`` over every job not rejected and the rest), as the env reports one
    its own budgets cut.
    """
    base = env.unwrapped
    info, terminated, lat = play(env, policy, seed, deterministic=deterministic, max_steps=max_steps)
    metrics = dict(info.get("metrics") or base.episode_metrics(truncated=not terminated))
    metrics["latency_median_ms"] = float(np.median(lat) * 1e3) if lat.size else 0.0
    metrics["latency_p99_ms"] = float(np.percentile(lat, 99) * 1e3) if lat.size else 0.0
    metrics["decisions"] = float(lat.size)
    sim = base.sim
    metrics["offered_load_ratio"] = episode_offered_load(sim)
    return EpisodeResult(jobs_table(sim), metrics, sim.utilisation_timeline(), lat, attempts_table(sim))


def confidence_interval(values: Iterable[float], level: float = 0.95) -> tuple[float, float]:
    """(mean, half-width) of a t-distribution confidence interval; half-width is nan for one value."""
    from scipy import stats

    x = np.asarray([v for v in values if not (isinstance(v, float) and math.isnan(v))], dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(x[0]), math.nan
    half = stats.t.ppf(0.5 + level / 2, df=x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(half)


def cut_counts(episodes: pd.DataFrame) -> tuple[pd.Series, pd.Series] | None:
    """Per episode, whether a budget cut it (1 or 0) and its jobs neither finished nor rejected at the end
    (queued, running or not yet arrived); None when no episode of ``episodes`` was cut."""
    if "truncated" not in episodes or not (episodes["truncated"].fillna(0) > 0).any():
        return None
    cut = (episodes["truncated"].fillna(0) > 0).astype(int)
    return cut, (episodes["jobs"] - episodes["finished"] - episodes["rejected"]).astype(int)


def summarise(episodes: pd.DataFrame, by: tuple[str, ...] = ("workload", "policy")) -> pd.DataFrame:
    """Mean and 95% CI half-width over seeds of each metric, per ``by`` group; where a budget cut an episode,
    also ``truncated`` (the cut episodes) and ``unfinished`` (their jobs neither finished nor rejected, in all),
    per group."""
    counts = cut_counts(episodes)
    rows = []
    for key, group in episodes.groupby(list(by), sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row["episodes"] = len(group)
        if counts is not None:
            row["truncated"] = int(counts[0].loc[group.index].sum())
            row["unfinished"] = int(counts[1].loc[group.index].sum())
        for metric in SUMMARY_METRICS:
            if metric in group:
                mean, half = confidence_interval(group[metric].tolist())
                row[metric] = mean
                row[f"{metric}_ci95"] = half
        rows.append(row)
    return pd.DataFrame(rows)


def format_number(x: float) -> str:
    """A value for a table: three significant digits but every digit of the integer part (none after the point
    for a whole number), thousands separators, never scientific notation (``30,412``, ``22.6``, ``0.213``,
    ``5``); "n/a" for nan."""
    if not math.isfinite(x):
        return "n/a"
    decimals = 0 if float(x).is_integer() else max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{round(x, decimals) + 0.0:,.{decimals}f}"  # (+ 0.0: no "-0")


def format_ci(mean: float, half: float) -> str:
    """``mean ± half`` for a table: the half-width rounded to two significant digits when its first three are
    100-354, else to one (the Particle Data Group's rule), the mean to the same decimal place; thousands
    separators, never scientific notation (``30,400 ± 3,500``, ``22.6 ± 0.8``, ``0.21 ± 0.04``). Without an
    interval (``half`` nan: one seed) the mean alone, as :func:`format_number`; a half-width below a billionth
    of the mean (floating-point noise around a value the workload fixes) is shown as ``± 0``."""
    if not math.isfinite(mean) or not math.isfinite(half):
        return format_number(mean)
    if half == 0 or half <= 1e-9 * abs(mean):  # no spread, or only rounding noise (a load set exactly)
        return f"{format_number(mean)} ± 0"
    exp = math.floor(math.log10(abs(half)))
    lead = abs(half) / 10.0 ** (exp - 2)  # the first three digits, 100 <= lead < 1000
    if lead >= 949.5:  # rounds up to 1,000...: two digits of the next power
        exp, digits = exp + 1, 2
    else:
        digits = 2 if lead < 354.5 else 1
    decimals = digits - 1 - exp
    shown = max(decimals, 0)
    return f"{round(mean, decimals) + 0.0:,.{shown}f} ± {round(half, decimals) + 0.0:,.{shown}f}"


def interval_note(summary: pd.DataFrame) -> str | None:
    """One line saying that the intervals of ``summary`` are missing (one seed: n=1) or unreliable (fewer
    than :data:`FEW_SEEDS` seeds); None when every row has enough seeds."""
    if "episodes" not in summary or summary.empty:
        return None
    n = int(summary["episodes"].min())
    if n == 1:
        return "n=1: one seed, so no confidence interval is shown; use 3 or more seeds for one"
    if n < FEW_SEEDS:
        return (f"n={n}: a 95% t-interval from {n} seeds is unreliable (t={_t95(n):.1f} times the standard "
                "error, and the spread of so few values is itself a guess); use 3 or more seeds")
    return None


def _t95(n: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df=n - 1))


CUT_NOTE = (
    "truncated: the episodes a step or time budget cut; unfinished: their jobs neither finished nor rejected at the "
    "cut (queued, running or not yet arrived). A cut episode's avg_jct_h and p95_jct_h count every job not "
    "rejected: a finished one at its JCT, an unfinished one at its time in the system so far plus the episode's "
    "length at the cut (avg_jct_finished_h: over its finished jobs alone); they are not the JCT the episode would "
    "have had, so compare only rows with truncated 0 as finished episodes."
)
"""The note of a summary or suite table with cut episodes."""


def summary_markdown(summary: pd.DataFrame, metrics: tuple[str, ...] = SUMMARY_METRICS) -> str:
    """A Markdown table ``mean ± ci`` (:func:`format_ci`) of the summary, with a column ``n`` (seeds), the
    units, the columns ``truncated`` and ``unfinished`` with :data:`CUT_NOTE` when a budget cut an episode and,
    with fewer than :data:`FEW_SEEDS` seeds, the warning of :func:`interval_note`."""
    keys = [c for c in ("workload", "policy") if c in summary]
    counted = "episodes" in summary
    cuts = [c for c in ("truncated", "unfinished") if c in summary]
    shown = [m for m in metrics if m in summary]
    head = "| " + " | ".join(keys + ["n"] * counted + cuts + shown) + " |"
    sep = "|" + "---|" * (len(keys) + counted + len(cuts) + len(shown))
    lines = [head, sep]
    for _, row in summary.iterrows():
        cells = [str(row[k]) for k in keys] + [str(int(row["episodes"]))] * counted
        cells += [f"{int(row[c]):,}" for c in cuts]
        cells += [format_ci(float(row[m]), float(row.get(f"{m}_ci95", math.nan))) for m in shown]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        "Units in the names: _h hours, _frac a fraction of 1, _ms milliseconds, gpu_hours GPU-hours (lost_gpu_hours: "
        "held by out-of-memory attempts; overhead_gpu_hours: in start-up and restarts); _ratio a ratio "
        "(offered_load_ratio: of the cluster's capacity; jct_over_bound_ratio: avg_jct_h over jct_bound_h, a lower "
        "bound no scheduler beats); the others "
        "are counts. ± is the 95% CI half-width (t distribution over the n seeds).",
    ]
    if cuts:
        notes.append(CUT_NOTE)
    note = interval_note(summary)
    if note is not None:
        notes.append(f"**Warning:** {note}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(notes) + "\n"


def episode_record(result: EpisodeResult, workload: str, policy: str, seed: int) -> tuple[pd.DataFrame, dict]:
    """The rows :func:`evaluate` keeps of one episode: its jobs tagged with (workload, policy, seed), and
    one row of ``episodes`` (those keys and the metrics)."""
    jobs = result.jobs.assign(workload=workload, policy=policy, seed=seed)
    return jobs, {"workload": workload, "policy": policy, "seed": seed, **result.metrics}


TIMING_METRICS = ("latency_median_ms", "latency_p99_ms")
"""Episode metrics measured with a clock: they differ between runs of the same episode."""


WIDE_WINDOWS = {"queue_slots": "all", "running_slots": "all"}
"""The env overrides of scripted policies in evaluations: every job in the system within reach."""


def wide_window(factory: Callable[[Any], Policy]) -> Callable[[Any], Policy]:
    """Mark a policy factory as wanting :data:`WIDE_WINDOWS` (scripted baselines: they read the simulator and
    may start or resize any job; a learned agent keeps the env's default windows, its spaces)."""
    factory.env_overrides = WIDE_WINDOWS  # type: ignore[attr-defined]
    return factory


def env_for(make_env: Callable[..., Any], workload: str, factory: Any, cache: dict | None = None) -> Any:
    """``make_env(workload)``, with the factory's ``env_overrides`` (see :func:`wide_window`) when it has them;
    envs are reused through ``cache`` per (workload, overrides)."""
    overrides = getattr(factory, "env_overrides", None) or {}
    key = (workload, tuple(sorted(overrides.items())))
    if cache is not None and key in cache:
        return cache[key]
    env = make_env(workload, **overrides) if overrides else make_env(workload)
    if cache is not None:
        cache[key] = env
    return env


def jct_bounds(make_env: Callable[[str], Any], workloads: Iterable[str], seeds: Iterable[int], *,
               progress: bool = True, **lp_kwargs: Any) -> pd.DataFrame:
    """One row per (workload, seed): the lower bounds of :func:`frenzy_env.evaluation.bounds.jct_lower_bound` on the
    average JCT of that episode's jobs (``isolated_h``, ``fluid_h``, ``lp_h`` and the largest, ``jct_bound_h``;
    ``bound_jobs`` the jobs they cover). The jobs depend on the workload and seed only, not on the policy."""
    from frenzy_env.evaluation.bounds import jct_lower_bound
    from frenzy_env.progress import progress_bar

    workloads, seeds = list(workloads), list(seeds)
    bar = progress_bar(len(workloads) * len(seeds), show=progress, desc="JCT bounds", unit="episode")
    rows = []
    for workload in workloads:
        env = make_env(workload)  # one env per workload, reset per seed
        for seed in seeds:
            env.reset(seed=seed)
            rows.append({"workload": workload, "seed": seed,
                         **jct_lower_bound(env.unwrapped.sim, **lp_kwargs).as_row()})
            bar.update(1)
    bar.close()
    return pd.DataFrame(rows)


def add_jct_bounds(episodes: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """``episodes`` with ``jct_bound_h`` (from ``bounds``, :func:`jct_bounds`, matched on workload and seed)
    and ``jct_over_bound_ratio`` = ``avg_jct_h / jct_bound_h``: how far each episode is from any
    scheduler's best (1 would be optimal and is out of reach: the bounds relax the cluster)."""
    out = episodes.drop(columns=["jct_bound_h", "jct_over_bound_ratio"], errors="ignore").merge(
        bounds[["workload", "seed", "jct_bound_h"]], on=["workload", "seed"], how="left")
    out["jct_over_bound_ratio"] = out["avg_jct_h"] / out["jct_bound_h"]
    return out


def evaluate(
    make_env: Callable[[str], Any],
    policies: dict[str, Callable[[Any], Policy]],
    workloads: Iterable[str],
    seeds: Iterable[int],
    *,
    progress: bool = True,
    on_episode: Callable[[pd.DataFrame, pd.DataFrame], None] | None = None,
    on_result: Callable[[str, str, int, EpisodeResult], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every policy on every workload and seed.

    ``make_env(workload, **overrides)`` builds an env (overrides: a factory's ``env_overrides``, see
    :func:`wide_window`); ``policies[name](env)`` builds a policy bound to it. Returns
    ``(jobs, episodes)`` DataFrames; ``on_episode(jobs, episodes)`` is called after each episode (the CLI
    uses it to write partial results, so nothing computed is lost if a later episode fails), and
    ``on_result(workload, policy, seed, result)`` with each episode's whole :class:`EpisodeResult` (the CLI
    keeps the attempts of the first seed for the schedule pictures).
    """
    from frenzy_env.progress import progress_bar

    workloads, seeds = list(workloads), list(seeds)
    total = len(workloads) * len(policies) * len(seeds)
    job_frames: list[pd.DataFrame] = []
    episode_rows: list[dict] = []
    bar = progress_bar(total, show=progress, desc="episodes", unit="ep")
    for workload in workloads:
        envs: dict = {}
        for name, factory in policies.items():
            env = env_for(make_env, workload, factory, envs)
            policy = factory(env)
            for seed in seeds:
                bar.set_postfix_str(f"{workload} {name} seed={seed}")
                result = run_episode(env, policy, seed=seed)
                if on_result is not None:
                    on_result(workload, name, seed, result)
                jobs, row = episode_record(result, workload, name, seed)
                job_frames.append(jobs)
                episode_rows.append(row)
                bar.update(1)
                if on_episode is not None:
                    on_episode(pd.concat(job_frames, ignore_index=True), pd.DataFrame(episode_rows))
    bar.close()
    return pd.concat(job_frames, ignore_index=True), pd.DataFrame(episode_rows)
