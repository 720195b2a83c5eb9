"""The fuzzer: random actions, illegal ones included, across every preset and random small instances.

Episodes go round-robin over every registered environment preset (each with the "extended" and the "frenzy"
memory predictor; the latter under-estimates and so exercises out-of-memory failures) plus random small clusters
and workloads with odd settings (:func:`random_config`). Each episode is driven by masked-random play or by one
of the policies the caller passes (name -> factory, e.g. the registered baselines), with a fraction ``eps`` of
the actions replaced by a uniformly random integer in ``[-3, n + 3)`` (mostly illegal: masked out or out of
range). After every step :class:`~frenzy_env.testing.checker.InvariantChecker` checks the state; resident memory is
sampled after a warm-up and at the end. :func:`fuzz` returns a :class:`FuzzReport`; ``scripts/fuzz.py`` is its
command line.
"""

from __future__ import annotations

import gc
import math
import os
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from frenzy_env.env import FrenzyEnv
from frenzy_env.registration import ENV_PRESETS
from frenzy_env.testing.checker import InvariantChecker, InvariantViolation
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import GPU_TYPES, ClusterSpec, NodeSpec
from frenzy_env.world.models import get_model

SMALL_MODELS = ("gpt2", "gpt2-medium", "bert-large", "gpt2-large")
MEDIUM_MODELS = ("gpt2-xl", "llama-7b")
HUGE_MODELS = ("llama-2-70b", "llama-3.1-70b")  # fit nowhere on small clusters


def random_config(rng: np.random.Generator, index: int = 0) -> tuple[ClusterSpec, Workload, dict]:
    """A small random cluster (1-4 nodes of 1-8 GPUs, 1-3 types), 1-15 jobs and odd env settings."""
    types = rng.choice(sorted(GPU_TYPES), size=int(rng.integers(1, 4)), replace=False)
    nodes = tuple(NodeSpec(str(rng.choice(types)), int(rng.integers(1, 9))) for _ in range(int(rng.integers(1, 5))))
    cluster = ClusterSpec(f"fuzz-{index}", nodes)
    jobs = []
    t = 0.0
    for i in range(int(rng.integers(1, 16))):
        u = rng.random()
        pool = SMALL_MODELS if u < 0.75 else (MEDIUM_MODELS if u < 0.9 else HUGE_MODELS)
        model = get_model(str(rng.choice(pool)))
        t += float(rng.choice([0.0, rng.exponential(600.0)]))
        common = dict(
            job_id=i,
            submit_time=t,
            model=model,
            batch_size=int(rng.choice([1, 2, 4, 8, 16, 32, 64])),
            seq_len=int(rng.choice([128, 512, 1024])),
            requested_gpus=int(rng.integers(1, 17)) if rng.random() < 0.7 else None,
        )
        if common["requested_gpus"] and rng.random() < 0.3:  # a trace-like job: recorded duration
            jobs.append(JobSpec(**common, iterations=None, recorded_duration=float(rng.uniform(1.0, 5e4))))
        else:
            jobs.append(JobSpec(**common, iterations=float(10 ** rng.uniform(-1, 5))))
    kwargs = dict(
        predictor=str(rng.choice(["frenzy", "extended", "oracle"])),
        queue_slots=int(rng.integers(1, 5)),
        running_slots=int(rng.integers(1, 5)),
        startup_time=float(rng.choice([0.0, 30.0])),
        restart_overhead=float(rng.choice([0.0, 10.0])),
        oom_delay=float(rng.choice([0.0, 30.0, 90.0])),
        max_plan_gpus=int(rng.choice([1, 2, 4, 64])),
        placement=str(rng.choice(["best_fit", "spread"])),
        work_info=str(rng.choice(["exact", "noisy", "none"])),
        wait_options=((), (60.0,), (60.0, 600.0, 3600.0), (1.0, 7.5))[int(rng.integers(4))],
    )
    return cluster, Workload(f"fuzz-{index}", tuple(jobs)), kwargs


# --------------------------------------------------------------------------------------------- fuzzer
def resident_mb() -> float:
    """Resident set size of this process in MiB (Linux /proc; else peak RSS from getrusage)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class FuzzReport:
    steps: int = 0
    episodes: int = 0
    episodes_finished: int = 0
    illegal_actions: int = 0
    crashes: int = 0
    violations: int = 0
    configs: list[str] = field(default_factory=list)
    drivers: list[str] = field(default_factory=list)
    steps_by_driver: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    rss_warm_mb: float = math.nan
    rss_end_mb: float = math.nan
    rss_max_after_warmup_mb: float = math.nan
    seconds: float = 0.0

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_warm_mb

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rss_growth_mb"] = self.rss_growth_mb
        return d

    def summary(self) -> str:
        return (
            f"steps {self.steps:,}  episodes {self.episodes:,} ({self.episodes_finished:,} to the end)  "
            f"illegal actions {self.illegal_actions:,}  crashes {self.crashes}  violations {self.violations}  "
            f"RSS {self.rss_warm_mb:.1f} MiB after warm-up -> {self.rss_end_mb:.1f} MiB at the end "
            f"(growth {self.rss_growth_mb:+.1f} MiB, max {self.rss_max_after_warmup_mb:.1f})  "
            f"{self.seconds:.0f} s"
        )


def env_factories(presets: list[str] | None, custom: bool) -> list[tuple[str, Any]]:
    """(name, factory) of every registered preset (or those whose env id is in ``presets``) under each memory
    predictor, plus ("custom", None) for the random small instances when ``custom``."""
    out = []
    for preset in ENV_PRESETS:
        if presets is not None and preset.env_id not in presets:
            continue
        for predictor in ("extended", "frenzy"):
            out.append(
                (
                    f"{preset.env_id}/{predictor}",
                    lambda p=preset, pr=predictor: FrenzyEnv(cluster=p.cluster, workload=p.workload, predictor=pr),
                )
            )
    if custom:
        out.append(("custom", None))
    return out


def fuzz(
    steps: int,
    *,
    seed: int = 0,
    presets: list[str] | None = None,
    policies: Mapping[str, Callable[[Any], Any]] | None = None,
    custom: bool = True,
    episode_steps: int = 30_000,
    warmup_fraction: float = 0.1,
    eps_choices: tuple[float, ...] = (0.0, 0.1, 0.5, 0.95),
    full_every: int = 50,
    progress: bool = False,
    max_failures: int = 20,
    wakeup_rate: float = 0.05,
) -> FuzzReport:
    """Play ``steps`` env steps (see the module docstring); returns a :class:`FuzzReport`.

    Before a fraction ``wakeup_rate`` of the steps a wake-up is requested at a random delay (the past
    included), and the random instances draw their timed waits, so timers and timed waits are fuzzed too.

    ``policies`` maps a driver name to a factory ``env -> policy`` (a policy has ``predict(obs, action_masks=,
    deterministic=)`` and optionally ``reset()``, as the baselines do); masked-random play is always a driver.
    ``presets`` restricts the registered presets by env id; ``custom`` adds the random small instances.
    """
    policies = dict(policies or {})
    drivers = ["masked-random", *policies]
    factories = env_factories(presets, custom)
    run = _FuzzRun(
        steps=steps, rng=np.random.default_rng(seed), policies=policies, drivers=drivers, factories=factories,
        report=FuzzReport(configs=[n for n, _ in factories], drivers=drivers), episode_steps=episode_steps,
        warm_at=int(steps * warmup_fraction), eps_choices=eps_choices, full_every=full_every, progress=progress,
        max_failures=max_failures, wakeup_rate=wakeup_rate, next_report=steps // 10 or steps,
    )
    while run.report.steps < steps:
        run.next_episode()
        run.note_warm_up()
    return run.finish()


@dataclass
class _FuzzRun:
    """The state of one :func:`fuzz` call: its settings, the draws, the envs and policies kept per preset, the
    report being filled, and when every (config, driver) pair was first seen."""

    steps: int
    rng: np.random.Generator
    policies: dict[str, Callable[[Any], Any]]
    drivers: list[str]
    factories: list[tuple[str, Any]]
    report: FuzzReport
    episode_steps: int
    warm_at: int  # steps after which (every pair seen) the warm RSS is taken
    eps_choices: tuple[float, ...]
    full_every: int
    progress: bool
    max_failures: int
    wakeup_rate: float
    next_report: int  # the step count of the next progress line and RSS sample
    envs: dict[str, Any] = field(default_factory=dict)  # preset config -> its env, made once
    bound: dict[tuple[str, str], Any] = field(default_factory=dict)  # (preset config, driver) -> policy
    pairs_seen: set[tuple[str, str]] = field(default_factory=set)
    seen_all_at: int | None = None
    episode: int = 0
    t0: float = field(default_factory=time.perf_counter)

    def next_episode(self) -> None:
        """The next episode: its config and driver in turn, its ``eps`` and seed drawn, then played (a failure
        to build it is recorded as a crash)."""
        cname, factory = self.factories[self.episode % len(self.factories)]
        driver = self.drivers[(self.episode // len(self.factories)) % len(self.drivers)]
        eps = float(self.rng.choice(self.eps_choices))
        ep_seed = int(self.rng.integers(2**31 - 1))
        self.episode += 1
        where = f"{cname} driver={driver} eps={eps} seed={ep_seed}"
        try:
            env, policy = self.build(cname, factory, driver, ep_seed)
        except Exception:
            self.fail("crash", f"building {where}")
            return
        self.pairs_seen.add((cname, driver))
        self.play(env, policy, driver, eps, ep_seed, where)

    def build(self, cname: str, factory: Any, driver: str, ep_seed: int) -> tuple[Any, Any]:
        """The episode's env and policy (None: masked-random play): a random small instance drawn from
        ``ep_seed``, or the preset's env and the driver's policy on it, each made once and kept."""
        if factory is None:
            cluster, workload, kwargs = random_config(np.random.default_rng(ep_seed), self.episode)
            env = FrenzyEnv(cluster=cluster, workload=workload, **kwargs)
            return env, (None if driver == "masked-random" else self.policies[driver](env))
        if cname not in self.envs:
            self.envs[cname] = factory()
        env = self.envs[cname]
        if driver == "masked-random":
            return env, None
        if (cname, driver) not in self.bound:
            self.bound[cname, driver] = self.policies[driver](env)
        return env, self.bound[cname, driver]

    def play(self, env: Any, policy: Any, driver: str, eps: float, ep_seed: int, where: str) -> None:
        """One episode under the invariant checker, until it ends, after ``episode_steps`` steps or when the
        run's steps are spent; a violation or a crash is recorded and ends it."""
        report = self.report
        checker = InvariantChecker(env, full_every=self.full_every)
        report.episodes += 1
        step_in_ep = 0
        stage = "reset"
        try:
            obs, info = env.reset(seed=ep_seed)
            if policy is not None and hasattr(policy, "reset"):
                policy.reset()
            checker.on_reset(obs, info)
            while report.steps < self.steps and step_in_ep < self.episode_steps:
                stage = "wakeup"
                if self.rng.random() < self.wakeup_rate:  # a timer at any delay, the past included
                    env.unwrapped.request_wakeup(env.unwrapped.sim.now + float(self.rng.uniform(-100.0, 5000.0)))
                stage = "policy"
                action = self.choose(env, policy, obs, eps)
                stage = "step"
                checker.before_step(action)
                obs, reward, terminated, truncated, info = env.step(action)
                report.steps += 1
                step_in_ep += 1
                report.steps_by_driver[driver] = report.steps_by_driver.get(driver, 0) + 1
                checker.after_step(action, obs, reward, terminated, truncated, info)
                if report.steps >= self.next_report:
                    self.tick()
                if terminated or truncated:
                    report.episodes_finished += 1
                    break
        except InvariantViolation:
            self.fail("violation", f"{where} step {step_in_ep}")
        except Exception:
            self.fail("crash", f"{where} ({stage}) step {step_in_ep}")

    def choose(self, env: Any, policy: Any, obs: Any, eps: float) -> int:
        """The action: with probability ``eps`` a uniformly random integer in ``[-3, n + 3)``, else the
        policy's (masked-random: a uniformly random legal one); counts it when illegal."""
        n = env.action_space.n
        mask = env.action_masks()
        if self.rng.random() < eps:
            action = int(self.rng.integers(-3, n + 3))
        elif policy is None:
            legal = np.flatnonzero(mask)
            action = int(self.rng.choice(legal)) if legal.size else 0
        else:
            a, _ = policy.predict(obs, action_masks=mask, deterministic=True)
            action = int(np.asarray(a).reshape(-1)[0])
        self.report.illegal_actions += not (0 <= action < n and mask[action])
        return action

    def fail(self, kind: str, where: str) -> None:
        """Count a crash or a violation; keep its traceback among the first ``max_failures``."""
        report = self.report
        if kind == "crash":
            report.crashes += 1
        else:
            report.violations += 1
        if len(report.failures) < self.max_failures:
            report.failures.append(f"{kind} in {where}:\n{traceback.format_exc(limit=8)}")

    def tick(self) -> None:
        """Every tenth of the run: the RSS after warm-up sampled, a progress line with ``progress``."""
        report = self.report
        if not math.isnan(report.rss_warm_mb):
            gc.collect()
            report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb, resident_mb())
        if self.progress:
            print(
                f"{report.steps:>10,} steps  {report.episodes:,} episodes  crashes {report.crashes}  "
                f"violations {report.violations}  RSS {resident_mb():.1f} MiB  "
                f"{time.perf_counter() - self.t0:.0f} s",
                flush=True,
            )
        self.next_report += self.steps // 10 or self.steps

    def note_warm_up(self) -> None:
        """Once every (config, driver) pair has played and ``warm_at`` steps are done: the warm RSS."""
        report = self.report
        if self.seen_all_at is None and len(self.pairs_seen) == len(self.factories) * len(self.drivers):
            self.seen_all_at = report.steps
        if math.isnan(report.rss_warm_mb) and report.steps >= self.warm_at and self.seen_all_at is not None:
            gc.collect()
            report.rss_warm_mb = report.rss_max_after_warmup_mb = resident_mb()

    def finish(self) -> FuzzReport:
        """The report with the RSS at the end and the run's seconds."""
        report = self.report
        gc.collect()
        report.rss_end_mb = resident_mb()
        if math.isnan(report.rss_warm_mb):  # too short a run to warm up: compare with the end itself
            report.rss_warm_mb = report.rss_max_after_warmup_mb = report.rss_end_mb
        report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb, report.rss_end_mb)
        report.seconds = time.perf_counter() - self.t0
        return report
