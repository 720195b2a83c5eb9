"""The workloads PPO trains, validates and is tested on, and the env builder.

Training (:func:`make_env` with :func:`training_generator`) mixes synthetic workloads with real-trace
windows (:class:`MixtureGenerator`) or folds a preset's seeds into the training range (:class:`_SeedRange`);
validation (:func:`validation_workloads`) is synthetic seeds 500-999 and fixed windows of the validation
clusters; test (:func:`test_workloads`) is seeds >= 1000 and fixed windows of clusters used for neither.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from agents.ppo.config import TEST_SEED_START, TRAIN_SEEDS, VALIDATION_SEEDS, TraceWindows, TrainConfig
from frenzy_env.errors import ConfigError
from frenzy_env.workload.suites import window_starts as window_starts  # (one definition, with the suites)


@dataclass(frozen=True)
class MixtureGenerator:
    """Training workloads: synthetic ones with varied size and load, and windows of real traces.

    ``generate(seed)`` draws from ``numpy.random.default_rng(seed)``: with probability ``trace_fraction``
    (when traces are given) a window of a random trace starting at a random row (windows overlapping an
    ``exclude`` range are redrawn), else a synthetic workload with ``num_jobs`` in ``jobs_range`` and load
    in ``load_range``. Every sub-seed is drawn in ``seed_range`` so training never sees validation (500-999)
    or test (>= 1000) seeds. ``load_mode`` (:mod:`frenzy_env.workload.load`): "fluid" (the default) reads
    ``load_range`` as offered loads and replays trace windows at their ``load_scale``; "busy" or "wait" (the
    v6 suites' measure) reads it in that measure for both, a window's arrival times stretched to a load drawn
    from ``load_range`` on ``cluster`` (a load FIFO cannot reach on those jobs is lowered by 15% at a time, up to
    six times; then a window is replayed at its ``load_scale`` and a synthetic workload made at that fluid load).
    """

    cluster: Any = "frenzy-testbed"
    traces: tuple[TraceWindows, ...] = ()
    trace_fraction: float = 0.3
    jobs_range: tuple[int, int] = (100, 200)
    load_range: tuple[float, float] = (0.5, 1.0)
    seed_range: tuple[int, int] = TRAIN_SEEDS
    name: str = "train-mix"
    load_mode: str = "fluid"

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
            if self.load_mode != "fluid":
                load = float(rng.uniform(*self.load_range))
                stretched = _reachable(
                    lambda x: replace(gen, load=x, load_mode=self.load_mode, cluster=self.cluster), load, sub_seed
                )
                if stretched is not None:
                    return stretched
            return gen.generate(sub_seed)  # its recorded times, scaled
        num_jobs = int(rng.integers(self.jobs_range[0], self.jobs_range[1] + 1))
        load = float(rng.uniform(*self.load_range))
        synthetic = lambda x: SyntheticGenerator(  # noqa: E731
            num_jobs=num_jobs, load=x, cluster=self.cluster, name=f"synthetic-l{x:.2f}", load_mode=self.load_mode,
        )
        if self.load_mode == "fluid":
            return synthetic(load).generate(sub_seed)
        workload = _reachable(synthetic, load, sub_seed)
        return workload if workload is not None else replace(synthetic(load), load_mode="fluid").generate(sub_seed)


def _reachable(make: Any, load: float, seed: int, tries: int = 6) -> Any:
    """``make(load).generate(seed)``, the load lowered by 15% while FIFO cannot reach it (a "busy" or "wait" load
    above what the jobs allow even arriving together raises ConfigError); None after ``tries`` failures."""
    for _ in range(tries):
        try:
            return make(load).generate(seed)
        except ConfigError:
            load *= 0.85
    return None



def training_generator(cfg: TrainConfig, world: int = 0) -> Any:
    """The generator of training workloads of world ``world`` (:meth:`TrainConfig.world_keywords`; its cluster
    sizes the synthetic ones): a :class:`MixtureGenerator` ("mix") or a preset's, seeds folded into the training
    range."""
    from frenzy_env.workload import make_generator
    from frenzy_env.world.cluster import ClusterSpec

    cluster = ClusterSpec.preset(cfg.world_keywords(world)["cluster"])
    if cfg.workload == "mix":
        return MixtureGenerator(
            cluster=cluster,
            traces=cfg.traces,
            trace_fraction=cfg.trace_fraction,
            jobs_range=cfg.jobs_range,
            load_range=cfg.load_range,
            load_mode=cfg.load_mode,
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


def make_env(cfg: TrainConfig, workload: Any, world: int | None = None, **options: Any) -> Any:
    """A bare :class:`~frenzy_env.env.FrenzyEnv` of the configured cluster (or training world ``world``'s
    cluster and keywords, :meth:`TrainConfig.world_keywords`), interface and windows for ``workload`` (a
    generator or a fixed Workload), with any other env keyword in ``options`` (``preemption=True``); the
    trainer steps it directly (no Monitor)."""
    from frenzy_env.env import FrenzyEnv

    keywords = {"cluster": cfg.cluster} if world is None else cfg.world_keywords(world)
    return FrenzyEnv(
        workload=workload, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots,
        **{"interface": cfg.interface, **keywords, **options},
    )


def trace_windows(specs: tuple[TraceWindows, ...], count: int, seed: int,
                  load: tuple[float, str, Any] | None = None) -> list[tuple[str, Any, int]]:
    """``count`` fixed windows of every trace in ``specs``: ``(name, Workload, seed)`` triples; with ``load``
    = ``(load, load_mode, cluster)`` of a mode other than "fluid", each window's arrival times are stretched
    to that load on that cluster, lowered as :class:`MixtureGenerator` does where FIFO cannot reach it (else
    replayed at its ``load_scale``)."""
    from frenzy_env.workload import TraceGenerator, read_trace

    out = []
    for spec in specs:
        submit = read_trace(spec.path, format=spec.format).submit
        for i in window_starts(submit.size, spec.max_jobs, count):
            name = f"{Path(spec.path).stem}@{i}"
            gen = TraceGenerator(
                spec.path, format=spec.format, start=float(submit[i]), max_jobs=spec.max_jobs,
                load_scale=spec.load_scale, name=name,
            )
            workload = None
            if load is not None and load[1] != "fluid":
                workload = _reachable(lambda x, g=gen: replace(g, load=x, load_mode=load[1], cluster=load[2]),
                                      load[0], seed)
            out.append((name, gen.generate(seed) if workload is None else workload, seed))
    return out


def _synthetic(cfg: TrainConfig, seeds: range) -> list[tuple[str, Any, int]]:
    from frenzy_env.workload import SyntheticGenerator
    from frenzy_env.world.cluster import ClusterSpec

    gen = SyntheticGenerator(
        num_jobs=cfg.validation_jobs, load=cfg.validation_load, cluster=ClusterSpec.preset(cfg.cluster),
        name="synthetic", load_mode=cfg.load_mode,
    )
    return [(f"synthetic#{s}", gen.generate(s), s) for s in seeds]


def _held_out_windows(cfg: TrainConfig, specs: tuple[TraceWindows, ...], count: int, seed: int) -> list:
    from frenzy_env.world.cluster import ClusterSpec

    return trace_windows(specs, count, seed, (cfg.validation_load, cfg.load_mode, ClusterSpec.preset(cfg.cluster)))


def validation_workloads(cfg: TrainConfig) -> list[tuple[str, Any, int]]:
    """The validation split: synthetic seeds 500, 501, ... (``validation_episodes``) and ``validation_windows``
    fixed windows of each of ``validation_traces`` (at ``validation_load`` in ``load_mode`` unless that is
    "fluid"); ``(name, Workload, seed)`` triples."""
    lo = VALIDATION_SEEDS[0]
    return _synthetic(cfg, range(lo, lo + cfg.validation_episodes)) + _held_out_windows(
        cfg, cfg.validation_traces, cfg.validation_windows, lo
    )


def test_workloads(cfg: TrainConfig) -> list[tuple[str, Any, int]]:
    """The test split, never trained or validated on: synthetic seeds 1000, ... (``test_seeds``) and
    ``test_windows`` fixed windows of each of ``test_traces``; ``(name, Workload, seed)`` triples."""
    return _synthetic(cfg, range(TEST_SEED_START, TEST_SEED_START + cfg.test_seeds)) + _held_out_windows(
        cfg, cfg.test_traces, cfg.test_windows, TEST_SEED_START
    )
