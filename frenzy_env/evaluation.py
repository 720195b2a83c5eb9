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
    "job_id", "name", "submit_time", "start_time", "finish_time", "jct", "gpu_type", "num_gpus", "dp", "tp",
    "restarts", "oom_failures", "gpu_hours", "rejected_reason",
)
SUMMARY_METRICS = (
    "avg_jct", "p95_jct", "makespan", "gpu_hours", "utilisation", "ooms", "restarts", "rejected",
    "invalid_actions", "latency_median_ms", "latency_p99_ms",
)


@dataclass
class EpisodeResult:
    """One episode: ``jobs`` (one row per job), ``metrics`` and the utilisation timeline."""

    jobs: pd.DataFrame
    metrics: dict[str, float]
    utilisation: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0), np.zeros(0)))
    latencies: np.ndarray = field(default_factory=lambda: np.zeros(0))


def jobs_table(sim: Any) -> pd.DataFrame:
    """Per-job records of a simulator as a DataFrame with :data:`JOB_COLUMNS`."""
    recs = sim.records
    df = pd.DataFrame(
        {
            "job_id": [r.job_id for r in recs],
            "name": [j.name for j in sim.jobs],  # the trace's own job id (empty for synthetic jobs)
            "submit_time": [r.submit_time for r in recs],
            "start_time": [r.start_time for r in recs],
            "finish_time": [r.finish_time for r in recs],
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
    df.insert(4, "jct", df["finish_time"] - df["submit_time"])
    return df[list(JOB_COLUMNS)]


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
    Decision latency is the wall time of each ``predict`` call.
    """
    base = env.unwrapped
    info, _, lat = play(env, policy, seed, deterministic=deterministic, max_steps=max_steps)
    metrics = dict(info.get("metrics") or base.episode_metrics())
    metrics["latency_median_ms"] = float(np.median(lat) * 1e3) if lat.size else 0.0
    metrics["latency_p99_ms"] = float(np.percentile(lat, 99) * 1e3) if lat.size else 0.0
    metrics["decisions"] = float(lat.size)
    return EpisodeResult(jobs_table(base.sim), metrics, base.sim.utilisation_timeline(), lat)


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


def summarise(episodes: pd.DataFrame, by: tuple[str, ...] = ("workload", "policy")) -> pd.DataFrame:
    """Mean and 95% CI half-width over seeds of each metric, per ``by`` group."""
    rows = []
    for key, group in episodes.groupby(list(by), sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row["episodes"] = len(group)
        for metric in SUMMARY_METRICS:
            if metric in group:
                mean, half = confidence_interval(group[metric].tolist())
                row[metric] = mean
                row[f"{metric}_ci95"] = half
        rows.append(row)
    return pd.DataFrame(rows)


def summary_markdown(summary: pd.DataFrame, metrics: tuple[str, ...] = SUMMARY_METRICS) -> str:
    """A Markdown table ``mean ± ci`` of the summary (hours for JCT and makespan)."""
    keys = [c for c in ("workload", "policy") if c in summary]
    shown = [m for m in metrics if m in summary]
    head = "| " + " | ".join(keys + shown) + " |"
    sep = "|" + "---|" * (len(keys) + len(shown))
    lines = [head, sep]
    hours = {"avg_jct", "p95_jct", "makespan"}
    for _, row in summary.iterrows():
        cells = [str(row[k]) for k in keys]
        for m in shown:
            scale = 1 / 3600 if m in hours else 1.0
            mean, half = row[m] * scale, row.get(f"{m}_ci95", math.nan) * scale
            cell = f"{mean:.3g}" if math.isnan(half) else f"{mean:.3g} ± {half:.2g}"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    note = "JCT and makespan in hours; ± is the 95% CI half-width (t distribution over seeds)."
    return "\n".join(lines) + "\n\n" + note + "\n"


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


def evaluate(
    make_env: Callable[[str], Any],
    policies: dict[str, Callable[[Any], Policy]],
    workloads: Iterable[str],
    seeds: Iterable[int],
    *,
    progress: bool = True,
    on_episode: Callable[[pd.DataFrame, pd.DataFrame], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every policy on every workload and seed.

    ``make_env(workload, **overrides)`` builds an env (overrides: a factory's ``env_overrides``, see
    :func:`wide_window`); ``policies[name](env)`` builds a policy bound to it. Returns
    ``(jobs, episodes)`` DataFrames; ``on_episode(jobs, episodes)`` is called after each episode (the CLI
    uses it to write partial results, so nothing computed is lost if a later episode fails).
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
                jobs, row = episode_record(run_episode(env, policy, seed=seed), workload, name, seed)
                job_frames.append(jobs)
                episode_rows.append(row)
                bar.update(1)
                if on_episode is not None:
                    on_episode(pd.concat(job_frames, ignore_index=True), pd.DataFrame(episode_rows))
    bar.close()
    return pd.concat(job_frames, ignore_index=True), pd.DataFrame(episode_rows)
