"""Jobs and workloads as data: :class:`JobSpec` and the immutable, time-ordered :class:`Workload`.

Work
----
Synthetic jobs state their work in iterations. Trace jobs state a duration; :meth:`Workload.work_iterations`
turns it into iterations: ``recorded_duration / iteration_time`` at the recorded GPU count on the cluster's
reference GPU type, with the fastest memory-feasible layout (else the fastest layout ignoring memory) on a
consolidated placement (``ceil(g / gpus per node)`` nodes).

Traces
------
:meth:`Workload.from_csv` reads a trace file (:mod:`~frenzy_env.workload.traces`, below this module) and makes
one job per row, assigning a model and configuration where the trace records none
(:func:`~frenzy_env.workload.configs.assign_configs`). Generated workloads come from the generators
(:mod:`~frenzy_env.workload.generators`, above this module): ``SyntheticGenerator(...).generate(seed)``,
``make_generator(name).generate(seed)``.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.workload.configs import (
    DEFAULT_SIZING,
    REFERENCE_GPU_TYPE,
    NoConfigurationError,
    assign_configs,
    reference_iteration_time,
)
from frenzy_env.workload.traces import TraceTable, read_trace_cached
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.efficiency import DEFAULT_EFFICIENCY
from frenzy_env.world.models import ModelSpec, get_model
from frenzy_env.world.throughput import DEFAULT_UTILISATION


@dataclass(frozen=True)
class JobSpec:
    """One training job as submitted: a model and a training configuration, never a GPU type.

    Attributes
    ----------
    job_id: position in the workload (0, 1, ...).
    submit_time: arrival, seconds.
    model: the architecture.
    batch_size: global batch (sequences per iteration).
    seq_len: tokens per sequence.
    iterations: work in iterations; ``None`` for trace jobs (see :meth:`Workload.work_iterations`).
    requested_gpus: GPUs the user asked for (traces: the recorded count).
    group: recurring-group id (jobs of a group repeat one configuration with similar work).
    recorded_duration: trace jobs: recorded seconds at ``requested_gpus`` on the reference GPU type.
    name: original job id (trace uuid).
    assigned: names of the fields set by the assignment rule rather than recorded in the trace.
    """

    job_id: int
    submit_time: float
    model: ModelSpec
    batch_size: int
    seq_len: int
    iterations: float | None
    requested_gpus: int | None = None
    group: int | None = None
    recorded_duration: float | None = None
    name: str = ""
    assigned: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            object.__setattr__(self, "model", get_model(self.model))
        for name in ("batch_size", "seq_len"):
            object.__setattr__(self, name, self._positive_int(name, getattr(self, name)))
        if self.requested_gpus is not None:
            object.__setattr__(self, "requested_gpus", self._positive_int("requested_gpus", self.requested_gpus))
        if not _is_real(self.submit_time) or not math.isfinite(self.submit_time):
            raise ConfigError(f"job {self.job_id}: submit_time must be a finite number, got {self.submit_time!r}")
        for name in ("iterations", "recorded_duration"):
            value = getattr(self, name)
            if value is not None and not (_is_real(value) and math.isfinite(value) and value > 0):
                raise ConfigError(f"job {self.job_id}: {name} must be a finite positive number, got {value!r}")
        if self.iterations is None and (self.recorded_duration is None or self.requested_gpus is None):
            raise ConfigError(
                f"job {self.job_id}: needs iterations, or a recorded_duration with requested_gpus"
            )

    def _positive_int(self, name: str, value: object) -> int:
        """``value`` as an int if it is a positive integer (integral floats allowed), else ConfigError."""
        if _is_real(value) and math.isfinite(value) and float(value).is_integer() and value >= 1:  # type: ignore[arg-type]
            return int(value)  # type: ignore[call-overload]
        raise ConfigError(f"job {self.job_id}: {name} must be a positive integer, got {value!r}")


def _is_real(value: object) -> bool:
    """A real number (Python or numpy), not a bool or a string."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Workload:
    """An immutable, ordered collection of jobs."""

    name: str
    jobs: tuple[JobSpec, ...]
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        seen: dict[object, int] = {}
        for i, job in enumerate(self.jobs):
            if not isinstance(job, JobSpec):
                raise ConfigError(f"workload {self.name!r}: jobs[{i}] must be a JobSpec, got {type(job).__name__}")
            first = seen.setdefault(job.job_id, i)
            if first != i:
                raise ConfigError(
                    f"workload {self.name!r}: duplicate job_id {job.job_id!r} (jobs[{first}] and jobs[{i}]); "
                    "job ids must be unique"
                )

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[JobSpec]:
        return iter(self.jobs)

    def __getitem__(self, i: int) -> JobSpec:
        return self.jobs[i]

    # -------------------------------------------------------------------------------- work
    def work_iterations(
        self, cluster: ClusterSpec, *, utilisation: float = DEFAULT_UTILISATION, efficiency: str = DEFAULT_EFFICIENCY
    ) -> np.ndarray:
        """(n,) float64 work of every job in iterations.

        Synthetic jobs: their ``iterations``. Trace jobs: ``recorded_duration / iteration_time`` at
        ``requested_gpus`` GPUs of ``cluster.reference_gpu_type``, fastest memory-feasible layout (else the
        fastest layout ignoring memory), consolidated placement, at ``utilisation`` and under ``efficiency``
        (pass the simulator's, :class:`~frenzy_env.simulator.SimConfig`). Cached per (model, batch, seq_len,
        GPUs).
        """
        ref = cluster.reference_gpu_type
        per_node = cluster.max_gpus_per_node(ref)
        out = np.empty(len(self.jobs), dtype=np.float64)  # (n,)
        times: dict[tuple, float] = {}
        for i, job in enumerate(self.jobs):
            if job.iterations is not None:
                out[i] = job.iterations
                continue
            key = (id(job.model), job.batch_size, job.seq_len, job.requested_gpus)
            t = times.get(key)
            if t is None:
                t = times[key] = reference_iteration_time(
                    job.model,
                    job.batch_size,
                    job.seq_len,
                    int(job.requested_gpus),
                    gpu=ref,
                    gpus_per_node=per_node,
                    utilisation=utilisation,
                    efficiency=efficiency,
                )
            out[i] = job.recorded_duration / t  # type: ignore[operator]
        return out

    # -------------------------------------------------------------------------------- views
    def to_frame(self):
        """A pandas DataFrame, one row per job (model as its name, assigned as a comma-separated string)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "job_id": [j.job_id for j in self.jobs],
                "name": [j.name for j in self.jobs],
                "submit_time": [j.submit_time for j in self.jobs],
                "model": [j.model.name for j in self.jobs],
                "batch_size": [j.batch_size for j in self.jobs],
                "seq_len": [j.seq_len for j in self.jobs],
                "iterations": [j.iterations for j in self.jobs],
                "requested_gpus": [j.requested_gpus for j in self.jobs],
                "group": [j.group for j in self.jobs],
                "recorded_duration": [j.recorded_duration for j in self.jobs],
                "assigned": [",".join(j.assigned) for j in self.jobs],
            }
        )

    # -------------------------------------------------------------------------------- constructors
    @classmethod
    def from_csv(
        cls,
        path: str | os.PathLike,
        *,
        format: str = "canonical",
        start: float | None = None,
        end: float | None = None,
        max_jobs: int | None = None,
        load_scale: float = 1.0,
        seed: int = 0,
        name: str | None = None,
        reference_gpu_type: str = REFERENCE_GPU_TYPE,
        gpus_per_node: int = 8,
        models: Sequence[str | ModelSpec] | None = None,
        cluster: ClusterSpec | str | None = None,
        sizing: str = DEFAULT_SIZING,
    ) -> Workload:
        """Load a trace (see :mod:`~frenzy_env.workload.traces` for formats and windows,
        :mod:`~frenzy_env.workload.configs` for model assignment).

        Parameters
        ----------
        path: CSV file.
        format: ``"canonical"``, ``"itp"`` or ``"philly"``.
        start, end: keep jobs with ``start <= submit < end`` on the trace's own time axis (Philly: seconds
            after its first submission).
        max_jobs: keep at most this many (the first ones) after the window.
        load_scale: divide times by this factor after shifting the first job to 0 (> 1: denser arrivals).
        seed: seed of the model assignment.
        reference_gpu_type, gpus_per_node, models: the assignment rule's GPU type, node size and models.
        cluster: a cluster (or preset name) whose GPU mix sizes the assigned models (each job sized for a type
            drawn in proportion to the cluster's GPU counts; see :mod:`~frenzy_env.workload.configs`);
            ``None``: every job sized for ``reference_gpu_type``.
        sizing: the sizing rule of the assigned fields, ``"recorded"`` (default, env v5's rule) or ``"v4"``
            (:mod:`~frenzy_env.workload.configs`).

        Raises
        ------
        TraceFormatError: a malformed file (the message names the file, the 1-based data row, the column), or
            a row no configuration can be sized for (it names the row, the job and its GPU count).
        """
        table = read_trace_cached(path, format=format)
        table = table.window(start=start, end=end, max_jobs=max_jobs, load_scale=load_scale)
        mix = None
        if cluster is not None:
            spec = ClusterSpec.preset(cluster) if isinstance(cluster, str) else cluster
            mix = [(t, spec.gpus_of_type(t), spec.max_gpus_per_node(t)) for t in spec.gpu_types]
        return _trace_workload(
            table,
            seed=seed,
            name=name,
            reference_gpu_type=reference_gpu_type,
            gpus_per_node=gpus_per_node,
            models=models,
            gpu_mix=mix,
            sizing=sizing,
        )


def _trace_workload(
    table: TraceTable,
    *,
    seed: int,
    name: str | None,
    reference_gpu_type: str,
    gpus_per_node: int,
    models: Sequence[str | ModelSpec] | None,
    gpu_mix: Sequence[tuple[str, int, int]] | None = None,
    sizing: str = DEFAULT_SIZING,
) -> Workload:
    """The workload of a (windowed) trace table: one job per row, with a model, batch and sequence length
    assigned (:func:`~frenzy_env.workload.configs.assign_configs`, seeded) where the trace records none."""
    n = table.submit.size
    need = (
        np.ones(n, dtype=bool)
        if table.model is None
        else np.array(
            [m is None or b is None or s is None for m, b, s in zip(table.model, table.batch, table.seq)]
        )
    )
    models_out: list[ModelSpec | None] = list(table.model) if table.model is not None else [None] * n
    batch_out = list(table.batch) if table.batch is not None else [None] * n
    seq_out = list(table.seq) if table.seq is not None else [None] * n
    assigned: list[tuple[str, ...]] = [()] * n
    if need.any():
        idx = np.flatnonzero(need)
        try:
            am, ab, as_ = assign_configs(
                table.gpus[idx],
                seed=seed,
                recorded_model=[models_out[i] for i in idx],
                recorded_batch=[batch_out[i] for i in idx],
                recorded_seq=[seq_out[i] for i in idx],
                models=models,
                reference_gpu_type=reference_gpu_type,
                gpus_per_node=gpus_per_node,
                gpu_mix=gpu_mix,
                sizing=sizing,
            )
        except NoConfigurationError as exc:
            job = None if exc.index is None else int(idx[exc.index])
            who = "" if job is None else f"job {str(table.names[job])!r}: "
            raise table.gpu_count_error(job, who + str(exc)) from None
        for k, i in enumerate(idx.tolist()):
            fields_ = tuple(
                f
                for f, v in (
                    ("model", models_out[i]),
                    ("batch_size", batch_out[i]),
                    ("seq_len", seq_out[i]),
                )
                if v is None
            )
            models_out[i], batch_out[i], seq_out[i] = am[k], int(ab[k]), int(as_[k])
            assigned[i] = fields_
    groups = table.group if table.group is not None else (None,) * n
    submit = table.submit.tolist()
    gpus = table.gpus.tolist()
    duration = table.duration.tolist()
    names = table.names.tolist()
    jobs = tuple(
        JobSpec(
            job_id=i,
            submit_time=submit[i],
            model=models_out[i],
            batch_size=int(batch_out[i]),  # type: ignore[arg-type]
            seq_len=int(seq_out[i]),
            iterations=None,
            requested_gpus=gpus[i],
            group=groups[i],
            recorded_duration=duration[i],
            name=str(names[i]),
            assigned=assigned[i],
        )
        for i in range(n)
    )
    label = name or f"{Path(table.path).stem}"
    rule = "" if sizing == DEFAULT_SIZING else f", sizing {sizing}"
    return Workload(label, jobs, source=f"{table.format}:{table.path} (model assignment seed {seed}{rule})")
