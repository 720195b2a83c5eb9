"""The environments PPO trains and validates on: training workload mixtures, seed ranges and env builders.

Training (:func:`make_env` with :func:`_training_generator`) mixes synthetic workloads with real-trace
windows (:class:`MixtureGenerator`) or folds a preset's seeds into the training range (:class:`_SeedRange`);
validation (:func:`make_validation_env`) replays synthetic seeds 500-999 in a fixed cycle
(:class:`CycleSeeds`); test (held-out) workloads use seeds >= 1000 and trace windows never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.ppo.config import TRAIN_SEEDS, VALIDATION_SEEDS, TraceWindows, TrainConfig
from frenzy_env.errors import ConfigError


@dataclass(frozen=True)
class MixtureGenerator:
    """Training workloads: synthetic ones with varied size and load, and windows of real traces.

    ``generate(seed)`` draws from ``numpy.random.default_rng(seed)``: with probability ``trace_fraction``
    (when traces are given) a window of a random trace starting at a random row (windows overlapping an
    ``exclude`` range are redrawn), else a synthetic workload with ``num_jobs`` in ``jobs_range`` and load
    in ``load_range``. Every sub-seed is drawn in ``seed_range`` so training never sees validation (500-999)
    or test (>= 1000) seeds.
    """

    cluster: Any = "frenzy-testbed"
    traces: tuple[TraceWindows, ...] = ()
    trace_fraction: float = 0.3
    jobs_range: tuple[int, int] = (100, 200)
    load_range: tuple[float, float] = (0.5, 1.0)
    seed_range: tuple[int, int] = TRAIN_SEEDS
    name: str = "train-mix"

    def generate(self, seed: int) -> Any:
        from frenzy_env.workload import SyntheticGenerator, TraceGenerator, read_trace

        rng = np.random.default_rng(seed)
        sub_seed = int(rng.integers(*self.seed_range))
        if self.traces and rng.random() < self.trace_fraction:
            spec = self.traces[int(rng.integers(len(self.traces)))]
            submit = read_trace(spec.path, format=spec.format).submit
            n = submit.size
            for _ in range(100):
                i = int(rng.integers(0, max(1, n - spec.max_jobs)))
                lo, hi = submit[i], submit[min(n - 1, i + spec.max_jobs)]
                if not any(lo < e1 and hi >= s1 for s1, e1 in spec.exclude):
                    break
            else:
                raise ConfigError(f"trace {spec.path}: no window of {spec.max_jobs} jobs outside {spec.exclude}")
            gen = TraceGenerator(
                spec.path,
                format=spec.format,
                start=float(submit[i]),
                max_jobs=spec.max_jobs,
                load_scale=spec.load_scale,
                name=f"{Path(spec.path).stem}@{i}",
            )
            return gen.generate(sub_seed)
        num_jobs = int(rng.integers(self.jobs_range[0], self.jobs_range[1] + 1))
        load = float(rng.uniform(*self.load_range))
        return SyntheticGenerator(
            num_jobs=num_jobs, load=load, cluster=self.cluster, name=f"synthetic-l{load:.2f}"
        ).generate(sub_seed)



def _training_generator(cfg: TrainConfig) -> Any:
    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.workload import make_generator

    cluster = ClusterSpec.preset(cfg.cluster)
    if cfg.workload == "mix":
        return MixtureGenerator(
            cluster=cluster,
            traces=cfg.traces,
            trace_fraction=cfg.trace_fraction,
            jobs_range=cfg.jobs_range,
            load_range=cfg.load_range,
        )
    gen = make_generator(cfg.workload)
    return _SeedRange(gen, TRAIN_SEEDS)


@dataclass(frozen=True)
class _SeedRange:
    """A generator whose seeds are folded into ``seeds`` (keeps a preset's training seeds apart)."""

    inner: Any
    seeds: tuple[int, int]

    def generate(self, seed: int) -> Any:
        lo, hi = self.seeds
        return self.inner.generate(lo + int(seed) % (hi - lo))


def make_env(cfg: TrainConfig, generator: Any, rank: int = 0) -> Any:
    """One monitored training env (module-level so SubprocVecEnv can pickle it)."""
    from stable_baselines3.common.monitor import Monitor

    from frenzy_env.env import FrenzyEnv

    env = FrenzyEnv(
        cluster=cfg.cluster, workload=generator, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots
    )
    env.reset(seed=cfg.seed * 1000 + rank)
    return Monitor(env, info_keywords=())


class CycleSeeds(gym.Wrapper):
    """Reset ignores the caller's seed and cycles through fixed ``seeds``; ``rewind()`` starts over."""

    def __init__(self, env: Any, seeds: list[int]) -> None:
        super().__init__(env)
        self.seeds, self.i = list(seeds), 0

    def rewind(self) -> None:
        self.i = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        s = self.seeds[self.i % len(self.seeds)]
        self.i += 1
        return self.env.reset(seed=s, options=options)


def make_validation_env(cfg: TrainConfig) -> Any:
    """Synthetic validation workloads (seeds 500, 501, ...), never used for training or test."""
    from stable_baselines3.common.monitor import Monitor

    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.workload import SyntheticGenerator

    cluster = ClusterSpec.preset(cfg.cluster)
    gen = SyntheticGenerator(num_jobs=cfg.validation_jobs, load=cfg.validation_load, cluster=cluster, name="validation")
    env = FrenzyEnv(cluster=cluster, workload=gen, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots)
    seeds = list(range(VALIDATION_SEEDS[0], VALIDATION_SEEDS[0] + cfg.validation_episodes))
    return CycleSeeds(Monitor(env), seeds)
