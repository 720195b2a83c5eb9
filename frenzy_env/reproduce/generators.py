"""The workloads of ``frenzy reproduce``'s scenarios: a window of the Philly trace rescaled to the testbed
(:func:`philly_generator`), A-SRPT's recurring distributed jobs cut into a history and the evaluated rest
(:func:`asrpt_generator`, :class:`HistorySplit`), and Capes et al.'s copies of one job (:class:`CopiesGenerator`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.workload.generators import DEFAULT_LOAD, GPU_DEMAND_COUNTS, HISTORY_FRACTION

#: the cluster of the Frenzy-versus-Sia workloads: three GPU types, as in the Frenzy paper's testbed
FRENZY_SIA_CLUSTER = "frenzy-testbed"
#: offered load of every Frenzy-versus-Sia workload on :data:`FRENZY_SIA_CLUSTER`, by the env's own measure
#: (:mod:`frenzy_env.workload.load`: speed- and memory-aware, 1.0 the cluster's capacity over the arrival window):
#: the shipped ITP week's (``itp-default``, :data:`~frenzy_env.workload.generators.DEFAULT_LOAD`), so that the
#: Philly window and the week are compared at one load. The Frenzy paper (arXiv 2412.14479) states none.
FRENZY_SIA_LOAD = DEFAULT_LOAD
ASRPT_CLUSTER = "doubling-64"  # homogeneous 64 GPUs: A-SRPT's model has identical GPUs
ASRPT_LOAD = 1.2  # A-SRPT's setting: load >= 1, so order matters
#: GPU counts A-SRPT's jobs request: the ITP week's recorded counts of its distributed jobs (2-8 GPUs), in their
#: recorded proportions. A-SRPT schedules distributed jobs with mixed parallelism; the week's 1-GPU jobs (80% of
#: its jobs of at most 8 GPUs) form no queue on 64 GPUs at requested counts (see ``docs/reproduce.md``).
ASRPT_GPU_DEMAND = tuple((g, float(c)) for g, c in GPU_DEMAND_COUNTS.items() if 2 <= g <= 8)


def philly_generator(
    path: Path, n_jobs: int, start_day: float = 40.0, load: float = FRENZY_SIA_LOAD,
    cluster: str = FRENZY_SIA_CLUSTER,
) -> tuple[Any, float]:
    """A window of ``n_jobs`` Philly jobs from ``start_day`` as the ITP week is built (``itp-default``): models
    sized for ``cluster``'s GPU mix, arrival times stretched per seed so that the offered load on ``cluster``
    (:mod:`frenzy_env.workload.load`, the env's own measure, under the env's speed model) is ``load``.

    Returns the generator and the window's raw load, its recorded GPU-time over 96 GPUs times its span (Philly ran
    on a far larger cluster: 5.3 for 300 jobs from day 40, 6.0 for 40)."""
    from frenzy_env.workload import TraceGenerator, read_trace

    table = read_trace(str(path), format="philly")
    start = start_day * 86400.0
    i = int(np.searchsorted(table.submit, start))
    sl = slice(i, i + n_jobs)
    span = float(table.submit[sl][-1] - table.submit[sl][0]) or 1.0
    raw = float((table.gpus[sl] * table.duration[sl]).sum()) / (96.0 * span)
    return TraceGenerator(
        str(path), format="philly", start=start, max_jobs=n_jobs, name="philly-window", cluster=cluster, load=load,
    ), raw


@dataclass(frozen=True)
class HistorySplit:
    """A workload generator cut in two: of each draw of ``base`` (its ``num_jobs`` jobs), the first
    ``fraction`` are the history (:meth:`history`) and the rest the evaluated workload (:meth:`generate`,
    renumbered from 0 and shifted to arrive from time 0). A-SRPT's paper trains its predictor on the first 80%
    of a trace and evaluates on the rest."""

    base: Any
    fraction: float = HISTORY_FRACTION
    name: str = "split"

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction < 1.0:
            raise ConfigError(f"fraction must be in (0, 1), got {self.fraction!r}")

    @property
    def num_jobs(self) -> int:
        """Jobs of the evaluated part."""
        return self.base.num_jobs - self._cut

    @property
    def _cut(self) -> int:
        return int(round(self.base.num_jobs * self.fraction))

    def history(self, seed: int) -> Any:
        """The first ``fraction`` of the draw of ``seed`` (a Workload)."""
        from frenzy_env.workload import Workload

        wl = self.base.generate(seed)
        return Workload(f"{self.name}-history", wl.jobs[: self._cut], source=wl.source)

    def generate(self, seed: int) -> Any:
        """The rest of the draw of ``seed`` (a Workload), job ids 0.. and first arrival at 0."""
        from dataclasses import replace

        from frenzy_env.workload import Workload

        wl = self.base.generate(seed)
        tail = wl.jobs[self._cut:]
        t0 = tail[0].submit_time
        jobs = tuple(replace(job, job_id=i, submit_time=job.submit_time - t0) for i, job in enumerate(tail))
        return Workload(self.name, jobs, source=f"{wl.source}; jobs {self._cut}- of {len(wl.jobs)}")


def asrpt_generator(setting: str, n: int) -> HistorySplit:
    """A-SRPT's setting: identical GPUs (:data:`ASRPT_CLUSTER`, 8 x 8 V100), recurring distributed jobs of 2-8
    GPUs (:data:`ASRPT_GPU_DEMAND`; 80% in recurring groups of mean size 10) at offered load
    :data:`ASRPT_LOAD`; ``n`` evaluated jobs after a history of ``n / (1 - HISTORY_FRACTION) - n`` jobs."""
    from frenzy_env.workload import SyntheticGenerator

    total = int(math.ceil(n / (1.0 - HISTORY_FRACTION)))
    base = SyntheticGenerator(num_jobs=total, load=ASRPT_LOAD, cluster=ASRPT_CLUSTER, recurring_fraction=0.8,
                              mean_group_size=10.0, max_gpus=8, name=f"asrpt-{setting}", gpu_demand=ASRPT_GPU_DEMAND)
    return HistorySplit(base, name=f"asrpt-{setting}")


@dataclass(frozen=True)
class CopiesGenerator:
    """Copies of one job under Poisson arrivals: Capes et al.'s setting (one training job that fits one GPU,
    submitted again and again). Each job: ``model``, ``batch_size``, ``seq_len`` and the iterations that take
    ``hours_on_one`` hours on one GPU of the cluster's reference type; ``requested_gpus`` 1. Arrivals: a Poisson
    process (first at 0) of rate ``load * G / hours_on_one`` per hour, ``G`` the cluster's GPUs -- the offered
    load at one GPU per job (:mod:`frenzy_env.workload.load`), the most GPU-efficient size."""

    num_jobs: int
    load: float
    cluster: str = "doubling-64"
    model: str = "gpt2-large"
    batch_size: int = 32
    seq_len: int = 1024
    hours_on_one: float = 8.0
    name: str = "copies"

    def __post_init__(self) -> None:
        if not (isinstance(self.num_jobs, int) and self.num_jobs >= 1):
            raise ConfigError(f"num_jobs must be a positive integer, got {self.num_jobs!r}")
        for field_name in ("load", "hours_on_one"):
            value = getattr(self, field_name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ConfigError(f"{field_name} must be a positive number, got {value!r}")

    def generate(self, seed: int) -> Any:
        """The workload of ``seed`` (only the arrival times depend on it)."""
        from frenzy_env.workload import JobSpec, Workload
        from frenzy_env.workload.configs import reference_iteration_time
        from frenzy_env.world.cluster import ClusterSpec
        from frenzy_env.world.models import get_model

        spec = ClusterSpec.preset(self.cluster)
        ref = spec.reference_gpu_type
        it = reference_iteration_time(get_model(self.model), self.batch_size, self.seq_len, 1, gpu=ref,
                                      gpus_per_node=spec.max_gpus_per_node(ref))
        iterations = self.hours_on_one * 3600.0 / it
        rate = self.load * spec.num_gpus / (self.hours_on_one * 3600.0)  # arrivals per second
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, self.num_jobs - 1)
        submit = np.concatenate([[0.0], np.cumsum(gaps)])
        jobs = tuple(
            JobSpec(job_id=i, submit_time=float(t), model=self.model, batch_size=self.batch_size,
                    seq_len=self.seq_len, iterations=iterations, requested_gpus=1, group=0)
            for i, t in enumerate(submit.tolist())
        )
        return Workload(self.name, jobs, source=f"{self.num_jobs} copies of {self.model}, load {self.load:g}")


__all__ = [
    "FRENZY_SIA_CLUSTER", "FRENZY_SIA_LOAD", "ASRPT_CLUSTER", "ASRPT_LOAD", "ASRPT_GPU_DEMAND", "HISTORY_FRACTION",
    "philly_generator", "HistorySplit", "asrpt_generator", "CopiesGenerator",
]
