"""The orchestration of ``frenzy reproduce``: what to run (:class:`ReproduceConfig`), the episodes, each run
once per (workload, policy, seed) with a wall-clock budget (:class:`Runner`), the table of the scenarios
(:func:`register_scenario`) and :func:`run_reproduce`, which runs the selected ones in order."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.reproduce.verdicts import ClaimRow, claim_kind

SCENARIOS = ("frenzy_sia", "rankings", "asrpt", "doubling", "predictors", "marp")
#: a job "waited" when it first started more than this many seconds after it arrived (the contention check)
WAIT_THRESHOLD_S = 60.0


@dataclass(frozen=True)
class ReproduceConfig:
    """What to run. ``jobs`` overrides every scenario's job count (tests); ``seeds`` the number of seeds.

    ``env_kwargs`` (default empty: every scenario's envs as the scenario makes them): FrenzyEnv keywords for
    every env of the run, e.g. the v6 world (``resize_cooldown=60``, ``one_action_per_instant=True``,
    ``memory_truth="published"``, ``efficiency="per_type"``); a mapping or ``(key, value)`` pairs, kept as sorted
    pairs. A scenario's own keyword of the same name (the ``predictors`` scenario's ``predictor``) wins; ``cluster``
    and ``workload`` are the scenarios' and raise :class:`~frenzy_env.errors.ConfigError`."""

    quick: bool = False
    seeds: int | None = None
    jobs: int | None = None
    scenarios: tuple[str, ...] = SCENARIOS
    data_dir: Path | None = None
    calibration: Path | None = None
    progress: bool = True
    episode_budget_s: float | None = None  # wall-clock limit of one episode (default 120 s quick, 600 s full)
    env_kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        pairs = self.env_kwargs.items() if isinstance(self.env_kwargs, dict) else self.env_kwargs
        pairs = tuple((k, v) for k, v in pairs)
        for key, _ in pairs:
            if not isinstance(key, str) or key in ("cluster", "workload"):
                raise ConfigError(f"env_kwargs: {key!r} is not a keyword a run may set for every env "
                                  "(cluster and workload are the scenarios')")
        object.__setattr__(self, "env_kwargs", tuple(sorted(dict(pairs).items())))
        for s in self.scenarios:
            if s not in SCENARIOS:
                from frenzy_env.errors import unknown_name

                raise unknown_name("scenario", s, SCENARIOS)
        if self.seeds is not None and self.seeds < 1:
            raise ConfigError(f"seeds must be a positive integer, got {self.seeds!r}")
        if self.jobs is not None and self.jobs < 2:
            raise ConfigError(f"jobs must be an integer >= 2, got {self.jobs!r}")

    @property
    def budget_s(self) -> float:
        if self.episode_budget_s is not None:
            return float(self.episode_budget_s)
        return 120.0 if self.quick else 600.0

    @property
    def num_seeds(self) -> int:
        return self.seeds if self.seeds is not None else (3 if self.quick else 5)

    def n_jobs(self, full: int, quick: int) -> int:
        return self.jobs if self.jobs is not None else (quick if self.quick else full)


@dataclass
class Runner:
    """Runs (workload, policy, seed) episodes once each and keeps their metrics."""

    config: ReproduceConfig
    log: Callable[[str], None] = print
    episodes: list[dict[str, Any]] = field(default_factory=list)
    _cache: dict[tuple, dict[str, float] | None] = field(default_factory=dict)
    _missing: dict[str, str] = field(default_factory=dict)
    _envs: dict[tuple, Any] = field(default_factory=dict)
    tables: dict[str, list[str]] = field(default_factory=dict)
    marp: list[dict[str, Any]] = field(default_factory=list)  # the marp scenario's cases

    def env(self, key: str, cluster: str, workload: Any, **env_kwargs: Any) -> Any:
        """The env of workload ``key`` (one per key and ``env_kwargs``, e.g. ``predictor``, over the run's
        :attr:`ReproduceConfig.env_kwargs`)."""
        from frenzy_env.env import FrenzyEnv

        env_kwargs = {**dict(self.config.env_kwargs), **env_kwargs}
        ekey = (key, tuple(sorted(env_kwargs.items())))
        if ekey not in self._envs:
            # scripted policies only: every job in the system within reach (frenzy_env.evaluation.episodes.WIDE_WINDOWS)
            self._envs[ekey] = FrenzyEnv(
                cluster=cluster, workload=workload, queue_slots="all", running_slots="all", **env_kwargs
            )
        return self._envs[ekey]

    def missing(self, label: str) -> str | None:
        return self._missing.get(label)

    def run(
        self, wl_key: str, cluster: str, workload: Any, label: str, policy: str,
        kwargs: dict | Callable[[int], dict], seeds: Iterable[int], env_kwargs: dict | None = None,
    ) -> list[dict[str, float] | None]:
        """Metrics of ``policy`` on each seed (None for each when the policy is not available).

        ``kwargs``: the policy's keywords, or a function of the seed giving them (a history drawn per seed);
        ``env_kwargs``: keywords of the env (``label`` must differ between env settings of one workload)."""
        from frenzy_env.evaluation.episodes import run_episode

        out = []
        for seed in seeds:
            key = (wl_key, label, seed)
            if key not in self._cache:
                if label in self._missing:
                    self._cache[key] = None
                else:
                    env = self.env(wl_key, cluster, workload, **(env_kwargs or {}))
                    pol = _make_policy(policy, env, kwargs(seed) if callable(kwargs) else kwargs)
                    if isinstance(pol, str):
                        self._missing[label] = pol
                        self.log(f"  {label}: not available ({pol})")
                        self._cache[key] = None
                    else:
                        t0 = time.perf_counter()
                        try:
                            res = _timed_episode(run_episode, env, pol, seed, self.config.budget_s)
                        except TimeoutError:
                            why = f"{label} did not finish an episode within {self.config.budget_s:.0f} s"
                            self._missing[label] = why
                            self.log(f"  {label}: {why}")
                            self._cache[key] = None
                            out.append(None)
                            continue
                        m = dict(res.metrics)
                        m["total_jct_h"] = float(np.nansum(res.jobs["jct_h"].to_numpy()))
                        m["latency_mean_ms"] = float(res.latencies.mean() * 1e3) if res.latencies.size else 0.0
                        m["policy_seconds"] = float(res.latencies.sum())
                        wait = (res.jobs["start_time_s"] - res.jobs["submit_time_s"]).to_numpy(dtype=float)
                        started = wait[np.isfinite(wait)]
                        m["waited_frac"] = float(np.mean(started > WAIT_THRESHOLD_S)) if started.size else 0.0
                        m["mean_wait_h"] = float(started.mean()) / 3600.0 if started.size else 0.0
                        m["wall_s"] = time.perf_counter() - t0
                        if m.get("finished", 0) + m.get("rejected", 0) < m.get("jobs", 0):
                            self._missing[label] = f"{label} stopped before every job finished"
                            self._cache[key] = None
                            out.append(None)
                            continue
                        self._cache[key] = m
                        self.episodes.append({"workload": wl_key, "policy": label, "seed": seed, **m})
                        if self.config.progress:
                            self.log(
                                f"  {wl_key:<22} {label:<24} seed {seed}: avg JCT {m['avg_jct_h']:8.2f} h, "
                                f"{m['wall_s']:.1f} s"
                            )
            out.append(self._cache[key])
        return out


def _timed_episode(run_episode: Callable, env: Any, policy: Any, seed: int, budget_s: float) -> Any:
    """run_episode with a wall-clock budget (SIGALRM, main thread on POSIX only; otherwise no budget).

    A policy that never lets the episode end (or is far too slow) is reported, not waited for forever."""
    import signal
    import threading

    from frenzy_env.evaluation.episodes import step_limit

    steps = step_limit(env.unwrapped.sim.num_jobs)  # a step limit as well: the env never hangs
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return run_episode(env, policy, seed=seed, max_steps=steps)

    def _alarm(signum: int, frame: Any) -> None:
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    try:
        return run_episode(env, policy, seed=seed, max_steps=steps)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _make_policy(name: str, env: Any, kwargs: dict) -> Any:
    """The policy, or a string saying why it is not available."""
    import baselines
    from frenzy_env.errors import UnknownNameError

    try:
        return baselines.make_policy(name, env, **kwargs)
    except UnknownNameError:
        return f"policy {name!r} is not registered"
    except (ConfigError, TypeError, ValueError) as exc:
        return f"{name} refused {kwargs}: {exc}"


#: a scenario: its claim rows from the run's config and runner (whose ``tables`` and ``marp`` it may fill)
Scenario = Callable[[ReproduceConfig, Runner], list[ClaimRow]]
#: the function of each scenario name: each module of :mod:`frenzy_env.reproduce.scenarios` registers its own,
#: and :mod:`frenzy_env.reproduce` imports them all
_SCENARIO_RUNS: dict[str, Scenario] = {}


def register_scenario(name: str) -> Callable[[Scenario], Scenario]:
    """Decorator: the decorated function runs scenario ``name`` (one of :data:`SCENARIOS`) in :func:`run_reproduce`."""
    if name not in SCENARIOS:
        from frenzy_env.errors import unknown_name

        raise unknown_name("scenario", name, SCENARIOS)

    def register(fn: Scenario) -> Scenario:
        _SCENARIO_RUNS[name] = fn
        return fn

    return register


@dataclass
class ReproduceResult:
    """Claim rows, every episode's metrics, MARP cases, wall seconds, the config and extra Markdown tables
    (``tables``: name -> lines, e.g. ``"predictors"``)."""

    rows: list[ClaimRow]
    episodes: list[dict[str, Any]]
    marp: list[dict[str, Any]]
    seconds: float
    config: ReproduceConfig
    tables: dict[str, list[str]] = field(default_factory=dict)


def run_reproduce(cfg: ReproduceConfig, log: Callable[[str], None] = print) -> ReproduceResult:
    """Run the selected scenarios; returns the claim rows and every episode's metrics."""
    t0 = time.perf_counter()
    runner = Runner(cfg, log=log)
    rows: list[ClaimRow] = []
    for name in cfg.scenarios:
        rows += _SCENARIO_RUNS[name](cfg, runner)
    missing = "; ".join(sorted(set(runner._missing.values())))
    for row in rows:
        if row.verdict == "not tested" and missing:
            row.detail = f"{missing}. {row.detail}".strip()
            row.reason = row.reason or f"no measurement: {missing}"
        row.kind = row.kind or claim_kind(row)
    return ReproduceResult(rows, runner.episodes, runner.marp, time.perf_counter() - t0, cfg, runner.tables)


__all__ = [
    "SCENARIOS", "WAIT_THRESHOLD_S", "ReproduceConfig", "Runner", "Scenario", "register_scenario", "ReproduceResult",
    "run_reproduce",
]
