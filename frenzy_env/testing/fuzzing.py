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

from frenzy_env.env import ENV_PRESETS, FrenzyEnv
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
    rng = np.random.default_rng(seed)
    drivers = ["masked-random", *policies]
    factories = env_factories(presets, custom)
    report = FuzzReport(configs=[n for n, _ in factories], drivers=drivers)
    envs: dict[str, Any] = {}
    bound: dict[tuple[str, str], Any] = {}
    warm_at = int(steps * warmup_fraction)
    seen_all_at: int | None = None
    pairs_seen: set[tuple[str, str]] = set()
    t0 = time.perf_counter()
    next_report = steps // 10 or steps
    episode = 0

    def fail(kind: str, where: str) -> None:
        if kind == "crash":
            report.crashes += 1
        else:
            report.violations += 1
        if len(report.failures) < max_failures:
            report.failures.append(f"{kind} in {where}:\n{traceback.format_exc(limit=8)}")

    def tick() -> None:
        nonlocal next_report
        if not math.isnan(report.rss_warm_mb):
            gc.collect()
            report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb, resident_mb())
        if progress:
            print(
                f"{report.steps:>10,} steps  {report.episodes:,} episodes  crashes {report.crashes}  "
                f"violations {report.violations}  RSS {resident_mb():.1f} MiB  {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        next_report += steps // 10 or steps

    while report.steps < steps:
        cname, factory = factories[episode % len(factories)]
        driver = drivers[(episode // len(factories)) % len(drivers)]
        eps = float(rng.choice(eps_choices))
        ep_seed = int(rng.integers(2**31 - 1))
        episode += 1
        where = f"{cname} driver={driver} eps={eps} seed={ep_seed}"
        try:
            if factory is None:
                cluster, workload, kwargs = random_config(np.random.default_rng(ep_seed), episode)
                env = FrenzyEnv(cluster=cluster, workload=workload, **kwargs)
                policy = None if driver == "masked-random" else policies[driver](env)
            else:
                if cname not in envs:
                    envs[cname] = factory()
                env = envs[cname]
                policy = None
                if driver != "masked-random":
                    if (cname, driver) not in bound:
                        bound[cname, driver] = policies[driver](env)
                    policy = bound[cname, driver]
        except Exception:
            fail("crash", f"building {where}")
            continue
        pairs_seen.add((cname, driver))
        checker = InvariantChecker(env, full_every=full_every)
        report.episodes += 1
        step_in_ep = 0
        stage = "reset"
        try:
            obs, info = env.reset(seed=ep_seed)
            if policy is not None and hasattr(policy, "reset"):
                policy.reset()
            checker.on_reset(obs, info)
            n = env.action_space.n
            while report.steps < steps and step_in_ep < episode_steps:
                stage = "wakeup"
                if rng.random() < wakeup_rate:  # a timer at any delay, the past included
                    env.unwrapped.request_wakeup(env.unwrapped.sim.now + float(rng.uniform(-100.0, 5000.0)))
                stage = "policy"
                mask = env.action_masks()
                if rng.random() < eps:
                    action = int(rng.integers(-3, n + 3))
                elif policy is None:
                    legal = np.flatnonzero(mask)
                    action = int(rng.choice(legal)) if legal.size else 0
                else:
                    a, _ = policy.predict(obs, action_masks=mask, deterministic=True)
                    action = int(np.asarray(a).reshape(-1)[0])
                report.illegal_actions += not (0 <= action < n and mask[action])
                stage = "step"
                checker.before_step(action)
                obs, reward, terminated, truncated, info = env.step(action)
                report.steps += 1
                step_in_ep += 1
                report.steps_by_driver[driver] = report.steps_by_driver.get(driver, 0) + 1
                checker.after_step(action, obs, reward, terminated, truncated, info)
                if report.steps >= next_report:
                    tick()
                if terminated or truncated:
                    report.episodes_finished += 1
                    break
        except InvariantViolation:
            fail("violation", f"{where} step {step_in_ep}")
        except Exception:
            fail("crash", f"{where} ({stage}) step {step_in_ep}")
        if factory is None:
            del env, policy
        if seen_all_at is None and len(pairs_seen) == len(factories) * len(drivers):
            seen_all_at = report.steps
        if math.isnan(report.rss_warm_mb) and report.steps >= warm_at and seen_all_at is not None:
            gc.collect()
            report.rss_warm_mb = report.rss_max_after_warmup_mb = resident_mb()
    gc.collect()
    report.rss_end_mb = resident_mb()
    if math.isnan(report.rss_warm_mb):  # too short a run to warm up: compare with the end itself
        report.rss_warm_mb = report.rss_max_after_warmup_mb = report.rss_end_mb
    report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb, report.rss_end_mb)
    report.seconds = time.perf_counter() - t0
    return report
