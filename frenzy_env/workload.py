"""Jobs and workloads: job specs, a seeded synthetic generator, trace loaders and workload presets.

This module holds all randomness about jobs. A :class:`Workload` is an immutable, time-ordered tuple of
:class:`JobSpec`; a *generator* (:class:`WorkloadGenerator`: ``generate(seed) -> Workload``) makes one per
seed; :data:`WORKLOAD_PRESETS` names a few and :func:`make_generator` builds one from a name.

Traces
------
:meth:`Workload.from_csv` reads three formats (pandas; loading is never in a hot path):

- ``"itp"``: Microsoft ITP traces (microsoft/elasticflow-traces): ``job_id, submission_time, duration,
  num_gpu``, sorted by submission time;
- ``"philly"``: the flattened Philly trace (Jeon et al., ATC 2019): ``timestamp, duration, num_gpus[,
  gpu_time, cluster]``; wall-clock timestamps in any order, converted to seconds after the first submission
  and sorted stably; job names are ``"<cluster>-<row>"`` (the trace has no job id);
- ``"canonical"``: ``job_id, submit_time, num_gpus, duration`` plus optional ``model, batch_size, seq_len,
  group``, sorted by submit time.

``duration`` is the recorded run time in seconds at the recorded GPU count. Job ids become ``name``;
``job_id`` is the position in the loaded workload (0, 1, ...). Times are shifted so that the first loaded
job arrives at 0 and then divided by ``load_scale`` (2 halves every inter-arrival time, doubling the load).

Model assignment (traces record no model)
-----------------------------------------
A job that records no model gets a training configuration by this seeded rule (:func:`assign_configs`):

1. Candidates: every catalogue model (or those given) x global batch in :data:`ASSIGN_BATCH_SIZES`, at
   sequence length ``min(model.max_seq_len, 2048)`` (recorded batch or sequence values are kept).
2. A candidate *fits* g GPUs when some layout ``dp x tp = g`` (``tp`` a power of two dividing g and the
   heads, at most ``gpus_per_node``; ``dp <= batch``) has an "extended" MARP estimate within the memory of
   the reference GPU type (default A100-80GB). Its *minimum* is the smallest power of two it fits.
3. For a job that asked for g GPUs, keep the candidates that fit g and are *right-sized*: minimum <= g <
   2 x minimum (the job asked for about what its configuration needs). None right-sized: every candidate
   that fits g. None at all: a :class:`ValueError` (for a recorded model: all its candidates).
4. Draw two uniforms per job, in job order, from ``numpy.random.default_rng(seed)``: the first picks the
   model among the kept ones (catalogue order), the second the batch among that model's kept batches.

Assigned fields are listed in :attr:`JobSpec.assigned`; recorded ones never change with the seed.

Work
----
Synthetic jobs state their work in iterations. Trace jobs state a duration; :meth:`Workload.work_iterations`
turns it into iterations: ``recorded_duration / iteration_time`` at the recorded GPU count on the cluster's
reference GPU type, with the fastest memory-feasible layout (else the fastest layout ignoring memory) on a
consolidated placement (``ceil(g / gpus per node)`` nodes).
"""

from __future__ import annotations

import dataclasses
import io
import math
import numbers
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from frenzy_env.cluster import ClusterSpec, get_gpu_type
from frenzy_env.errors import ConfigError, TraceFormatError, check_keys, unknown_name
from frenzy_env.layouts import layouts
from frenzy_env.memory import estimate_memory_array
from frenzy_env.models import MODELS, ModelSpec, get_model
from frenzy_env.throughput import DEFAULT_UTILISATION, iteration_time_array

REFERENCE_GPU_TYPE = "A100-80GB"
ASSIGN_BATCH_SIZES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024)
MAX_ASSIGN_SEQ_LEN = 2048
TP_LEVELS: tuple[int, ...] = (1, 2, 4, 8)
MAX_GPUS_PER_JOB = 100_000  # larger recorded GPU counts are rejected as absurd

# Job duration quantiles in seconds, computed from the real traces in shared/data (pandas
# ``Series.quantile``, linear interpolation) at the levels below:
#   "itp":    all 65,462 jobs of the 8 ITP cluster CSVs (traces/itp/cluster*.csv, column ``duration``;
#             the ITP traces only keep jobs of at least 600 s);
#   "philly": all 82,247 jobs of traces/philly/philly.csv (column ``duration``).
# The synthetic generator samples log-linearly between these knots, so its durations stop at the 99.9th
# percentile (the traces' maxima are 18 days for ITP and 54 days for Philly).
DURATION_QUANTILE_LEVELS: tuple[float, ...] = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
DURATION_QUANTILES: dict[str, tuple[float, ...]] = {
    "itp": (600.0, 672.0, 983.0, 1418.0, 3814.0, 10619.0, 16374.0, 28838.0, 58818.0, 221342.0, 677826.0),
    "philly": (1.0, 17.0, 48.0, 61.0, 115.0, 1144.0, 2932.0, 11265.0, 43646.0, 254758.0, 1186277.0),
}

FORMATS: dict[str, tuple[str, ...]] = {  # required columns per trace format
    "itp": ("job_id", "submission_time", "duration", "num_gpu"),
    "philly": ("timestamp", "duration", "num_gpus"),
    "canonical": ("job_id", "submit_time", "num_gpus", "duration"),
}
CANONICAL_OPTIONAL: tuple[str, ...] = ("model", "batch_size", "seq_len", "group")
_TIME_COL = {"itp": "submission_time", "philly": "timestamp", "canonical": "submit_time"}
_GPU_COL = {"itp": "num_gpu", "philly": "num_gpus", "canonical": "num_gpus"}

#: Shipped default trace (inside the package; see frenzy_env/data/ATTRIBUTION.md).
ITP_EXTRACT = "itp_cluster02_extract.csv"


def data_path(name: str) -> Path:
    """Path of a data file shipped in ``frenzy_env/data``."""
    return Path(__file__).resolve().parent / "data" / name


# ---------------------------------------------------------------------------------------------- specs
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
        self, cluster: ClusterSpec, *, utilisation: float = DEFAULT_UTILISATION
    ) -> np.ndarray:
        """(n,) float64 work of every job in iterations.

        Synthetic jobs: their ``iterations``. Trace jobs: ``recorded_duration / iteration_time`` at
        ``requested_gpus`` GPUs of ``cluster.reference_gpu_type``, fastest memory-feasible layout (else the
        fastest layout ignoring memory), consolidated placement, at ``utilisation`` (pass the simulator's).
        Cached per (model, batch, seq_len, GPUs).
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
    ) -> Workload:
        """Load a trace (see the module docstring for formats, windows and model assignment).

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

        Raises
        ------
        TraceFormatError: a malformed file (the message names the file, the 1-based data row, the column).
        """
        table = _read_trace_cached(*_file_key(path), format)
        table = table.window(start=start, end=end, max_jobs=max_jobs, load_scale=load_scale)
        return table.to_workload(
            seed=seed,
            name=name,
            reference_gpu_type=reference_gpu_type,
            gpus_per_node=gpus_per_node,
            models=models,
        )

    @classmethod
    def synthetic(
        cls, *, num_jobs: int, load: float, cluster: ClusterSpec | str, seed: int, **kw
    ) -> Workload:
        """A synthetic workload; keywords as :class:`SyntheticGenerator`."""
        return SyntheticGenerator(num_jobs=num_jobs, load=load, cluster=cluster, **kw).generate(seed)

    @classmethod
    def preset(cls, name: str, seed: int = 0) -> Workload:
        """The workload of preset ``name`` (see :data:`WORKLOAD_PRESETS`) for ``seed``."""
        return make_generator(name).generate(seed)


# ------------------------------------------------------------------------------------ layouts and fit
def _layouts(heads: int, batch: int, count: int, per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(L,) dp and tp of every legal layout of ``count`` GPUs (:mod:`frenzy_env.layouts`), tp in TP_LEVELS."""
    return layouts(heads, batch, (count,), min(per_node, TP_LEVELS[-1]))


@lru_cache(maxsize=65536)
def reference_iteration_time(
    model: ModelSpec,
    batch_size: int,
    seq_len: int,
    gpus: int,
    *,
    gpu: str = REFERENCE_GPU_TYPE,
    gpus_per_node: int = 8,
    utilisation: float = DEFAULT_UTILISATION,
) -> float:
    """Seconds per iteration of a job on ``gpus`` GPUs of ``gpu``, consolidated (what trace durations mean).

    The fastest memory-feasible ("extended") layout; if none fits, the fastest layout ignoring memory; if
    no layout exists (``gpus`` exceeds the batch and no tensor parallelism helps), ``dp = min(gpus, batch)``.
    """
    g = get_gpu_type(gpu)
    dp, tp = _layouts(model.heads, batch_size, gpus, gpus_per_node)
    if dp.size == 0:
        dp, tp = np.array([min(gpus, batch_size)]), np.array([1])
    span = max(1, -(-gpus // gpus_per_node))
    it = iteration_time_array(
        model,
        batch_size=batch_size,
        seq_len=seq_len,
        gpu=g,
        dp=dp,
        tp=tp,
        nodes_spanned=span,
        utilisation=utilisation,
    )  # (L,)
    mem = estimate_memory_array(model, batch_size=batch_size, seq_len=seq_len, dp=dp, tp=tp)  # (L,)
    ok = mem <= g.memory_bytes
    return float(it[ok].min() if ok.any() else it.min())


@lru_cache(maxsize=65536)
def _fits(model: ModelSpec, batch: int, seq: int, count: int, gpu: str, per_node: int) -> bool:
    dp, tp = _layouts(model.heads, batch, count, per_node)
    if dp.size == 0:
        return False
    mem = estimate_memory_array(model, batch_size=batch, seq_len=seq, dp=dp, tp=tp)
    return bool((mem <= get_gpu_type(gpu).memory_bytes).any())


@lru_cache(maxsize=16384)
def _min_pow2(model: ModelSpec, batch: int, seq: int, gpu: str, per_node: int, limit: int) -> int:
    """Smallest power-of-two GPU count (<= limit) the configuration fits; 0 if none."""
    c = 1
    while c <= limit:
        if _fits(model, batch, seq, c, gpu, per_node):
            return c
        c *= 2
    return 0


def default_seq_len(model: ModelSpec) -> int:
    """Sequence length the assignment rule gives a model: ``min(max_seq_len, 2048)``."""
    return min(model.max_seq_len, MAX_ASSIGN_SEQ_LEN)


class NoConfigurationError(ConfigError):
    """No catalogue configuration fits a job's GPU count; ``index`` is the job's position (if known)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


def _candidates(
    count: int,
    model: ModelSpec | None,
    batch: int | None,
    seq: int | None,
    models: tuple[ModelSpec, ...],
    gpu: str,
    per_node: int,
) -> list[tuple[ModelSpec, int, int]]:
    """Kept candidate configurations for one job (rule steps 1-3), in (catalogue, batch) order."""
    limit = 1 << max(0, (count - 1).bit_length())
    pool = [
        (m, b, seq if seq is not None else default_seq_len(m))
        for m in ((model,) if model is not None else models)
        for b in ((batch,) if batch is not None else ASSIGN_BATCH_SIZES)
    ]
    fit = [c for c in pool if _fits(c[0], c[1], c[2], count, gpu, per_node)]
    right = [
        c for c in fit if (mn := _min_pow2(c[0], c[1], c[2], gpu, per_node, limit)) and mn <= count < 2 * mn
    ]
    if right:
        return right
    if fit:
        return fit
    if model is not None:
        return pool
    raise NoConfigurationError(
        f"no configuration of models {', '.join(m.name for m in models)} fits {count} GPUs of {gpu} "
        f"(gpus_per_node={per_node}); pass other models"
    )


def assign_configs(
    counts: np.ndarray,
    *,
    seed: int,
    recorded_model: Sequence[ModelSpec | None] | None = None,
    recorded_batch: Sequence[int | None] | None = None,
    recorded_seq: Sequence[int | None] | None = None,
    models: Sequence[str | ModelSpec] | None = None,
    reference_gpu_type: str = REFERENCE_GPU_TYPE,
    gpus_per_node: int = 8,
) -> tuple[list[ModelSpec], np.ndarray, np.ndarray]:
    """Training configurations for jobs that asked for ``counts`` GPUs (the rule in the module docstring).

    Returns (models list, (n,) batch sizes, (n,) sequence lengths); recorded values are kept as given.
    """
    counts = np.asarray(counts, dtype=np.int64)  # (n,)
    n = counts.size
    get_gpu_type(reference_gpu_type)
    model_pool = tuple(get_model(m) for m in (models if models is not None else MODELS))
    if not model_pool:
        raise ConfigError("models must name at least one model")
    rec_m = list(recorded_model) if recorded_model is not None else [None] * n
    rec_b = list(recorded_batch) if recorded_batch is not None else [None] * n
    rec_s = list(recorded_seq) if recorded_seq is not None else [None] * n
    u = np.random.default_rng(seed).random((n, 2))  # (n, 2): model draw, batch draw
    out_m: list[ModelSpec] = [None] * n  # type: ignore[list-item]
    out_b = np.empty(n, dtype=np.int64)
    out_s = np.empty(n, dtype=np.int64)
    groups: dict[tuple, list[int]] = {}
    for i in range(n):
        groups.setdefault((int(counts[i]), rec_m[i], rec_b[i], rec_s[i]), []).append(i)
    for (count, m, b, s), rows in groups.items():
        try:
            cands = _candidates(count, m, b, s, model_pool, reference_gpu_type, gpus_per_node)
        except NoConfigurationError as exc:
            raise NoConfigurationError(str(exc), index=rows[0]) from None
        kept_models = list(dict.fromkeys(c[0] for c in cands))  # catalogue order, distinct
        per_model = {km: [c for c in cands if c[0] is km] for km in kept_models}
        idx = np.asarray(rows)
        mi = np.minimum((u[idx, 0] * len(kept_models)).astype(np.int64), len(kept_models) - 1)
        for r, k, ub in zip(rows, mi.tolist(), u[idx, 1].tolist()):
            opts = per_model[kept_models[k]]
            c = opts[min(int(ub * len(opts)), len(opts) - 1)]
            out_m[r], out_b[r], out_s[r] = c
    return out_m, out_b, out_s


# ------------------------------------------------------------------------------------------- traces
@dataclass(frozen=True)
class _TraceTable:
    """Validated trace columns (numpy), before windowing and model assignment."""

    path: str
    format: str
    names: np.ndarray  # (n,) object: original ids
    submit: np.ndarray  # (n,) float64 seconds, non-decreasing
    gpus: np.ndarray  # (n,) int64
    duration: np.ndarray  # (n,) float64 seconds
    model: tuple | None = None  # (n,) ModelSpec | None (canonical only)
    batch: tuple | None = None  # (n,) int | None
    seq: tuple | None = None  # (n,) int | None
    group: tuple | None = None  # (n,) int | None
    rows: np.ndarray | None = None  # (n,) 1-based data row of each job in the file (error messages)

    def take(self, idx: np.ndarray) -> _TraceTable:
        def pick(col):
            return None if col is None else tuple(col[i] for i in idx.tolist())

        return dataclasses.replace(
            self,
            names=self.names[idx],
            submit=self.submit[idx],
            gpus=self.gpus[idx],
            duration=self.duration[idx],
            model=pick(self.model),
            batch=pick(self.batch),
            seq=pick(self.seq),
            group=pick(self.group),
            rows=None if self.rows is None else self.rows[idx],
        )

    def window(
        self, *, start: float | None, end: float | None, max_jobs: int | None, load_scale: float
    ) -> _TraceTable:
        if not (isinstance(load_scale, (int, float)) and math.isfinite(load_scale) and load_scale > 0):
            raise ConfigError(f"load_scale must be a positive number, got {load_scale!r}")
        if max_jobs is not None and (int(max_jobs) != max_jobs or max_jobs < 1):
            raise ConfigError(f"max_jobs must be a positive integer, got {max_jobs!r}")
        if start is not None and end is not None and not start < end:
            raise ConfigError(f"start must be before end, got start={start}, end={end}")
        keep = np.ones(self.submit.size, dtype=bool)
        if start is not None:
            keep &= self.submit >= start
        if end is not None:
            keep &= self.submit < end
        idx = np.flatnonzero(keep)
        if max_jobs is not None:
            idx = idx[: int(max_jobs)]
        if idx.size == 0:
            raise ConfigError(
                f"{self.path}: no jobs in the window start={start}, end={end} "
                f"(the trace spans {self.submit[0]:.0f} to {self.submit[-1]:.0f} s)"
            )
        out = self.take(idx)
        submit = (out.submit - out.submit[0]) / float(load_scale)
        return dataclasses.replace(out, submit=submit)

    def to_workload(
        self,
        *,
        seed: int,
        name: str | None,
        reference_gpu_type: str,
        gpus_per_node: int,
        models: Sequence[str | ModelSpec] | None,
    ) -> Workload:
        n = self.submit.size
        need = (
            np.ones(n, dtype=bool)
            if self.model is None
            else np.array(
                [m is None or b is None or s is None for m, b, s in zip(self.model, self.batch, self.seq)]
            )
        )
        models_out: list[ModelSpec | None] = list(self.model) if self.model is not None else [None] * n
        batch_out = list(self.batch) if self.batch is not None else [None] * n
        seq_out = list(self.seq) if self.seq is not None else [None] * n
        assigned: list[tuple[str, ...]] = [()] * n
        if need.any():
            idx = np.flatnonzero(need)
            try:
                am, ab, as_ = assign_configs(
                    self.gpus[idx],
                    seed=seed,
                    recorded_model=[models_out[i] for i in idx],
                    recorded_batch=[batch_out[i] for i in idx],
                    recorded_seq=[seq_out[i] for i in idx],
                    models=models,
                    reference_gpu_type=reference_gpu_type,
                    gpus_per_node=gpus_per_node,
                )
            except NoConfigurationError as exc:
                row = None
                if exc.index is not None and self.rows is not None:
                    row = int(self.rows[idx[exc.index]])
                raise _bad(self.path, row, _GPU_COL[self.format], str(exc)) from None
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
        groups = self.group if self.group is not None else (None,) * n
        submit = self.submit.tolist()
        gpus = self.gpus.tolist()
        duration = self.duration.tolist()
        names = self.names.tolist()
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
        label = name or f"{Path(self.path).stem}"
        return Workload(label, jobs, source=f"{self.format}:{self.path} (model assignment seed {seed})")


def _file_key(path: str | os.PathLike) -> tuple[str, int, int]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"trace file not found: {p}")
    st = p.stat()
    return str(p), st.st_mtime_ns, st.st_size


@lru_cache(maxsize=16)
def _read_trace_cached(path: str, mtime_ns: int, size: int, format: str) -> _TraceTable:
    return read_trace(path, format=format)


def _bad(path: str, row: int | None, column: str | None, what: str) -> TraceFormatError:
    where = ", ".join(
        x for x in (f"row {row}" if row is not None else "", f"column {column!r}" if column else "") if x
    )
    return TraceFormatError(f"{path}: {where + ': ' if where else ''}{what}")


def _parser_error(path: str, message: str) -> TraceFormatError:
    """A pandas tokenizer error as a :class:`TraceFormatError` naming the row."""
    import re

    fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message)
    if fields:  # pandas counts file lines from 1, the header included
        expected, line, saw = (int(x) for x in fields.groups())
        return _bad(path, line - 1, None, f"{saw} comma-separated fields, the header has {expected}")
    quote = re.search(r"EOF inside string starting at row (\d+)", message)
    if quote:  # pandas counts rows from 0, the header included
        return _bad(path, int(quote.group(1)), None, "a quoted field is never closed (unbalanced '\"')")
    return _bad(path, None, None, f"cannot parse as CSV: {message.strip()}")


def _numeric(df, col: str, path: str):
    """Column ``col`` as float64; a non-numeric or missing value raises naming its row."""
    import pandas as pd

    raw = df[col]
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        v = str(raw.iloc[r]).strip()
        if v == "" or v.lower() in ("nan", "na", "n/a", "null", "none"):
            raise _bad(path, r + 1, col, f"missing value ({v or 'empty'})")
        raise _bad(path, r + 1, col, f"not a finite number: {v!r}")
    return vals


def _positive_int(df, col: str, path: str, upper: int | None = None) -> np.ndarray:
    vals = _numeric(df, col, path)
    bad = (vals < 1) | (vals != np.floor(vals))
    if upper is not None:
        bad |= vals > upper
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        limit = f" and at most {upper:,}" if upper is not None else ""
        raise _bad(path, r + 1, col, f"must be a positive integer{limit}, got {df[col].iloc[r]!r}")
    return vals.astype(np.int64)


def _optional(df, col: str, path: str, kind: str) -> tuple | None:
    if col not in df.columns:
        return None
    out: list = []
    for r, v in enumerate(df[col].tolist()):
        v = v.strip()
        if v == "" or v.lower() == "nan":
            out.append(None)
            continue
        if kind == "model":
            try:
                out.append(get_model(v))
            except ValueError as exc:
                raise _bad(path, r + 1, col, str(exc)) from None
            continue
        try:
            x = float(v)
        except ValueError:
            raise _bad(path, r + 1, col, f"not a number: {v!r}") from None
        if not math.isfinite(x) or x != int(x) or (x < 0 if kind == "group" else x < 1):
            need = "a non-negative integer" if kind == "group" else "a positive integer"
            raise _bad(path, r + 1, col, f"must be {need}, got {v!r}")
        out.append(int(x))
    return tuple(out)


def read_trace(path: str | os.PathLike, *, format: str = "canonical") -> _TraceTable:
    """Read and validate a whole trace file (no window, no assignment). See :meth:`Workload.from_csv`."""
    import pandas as pd

    path = str(path)
    if format not in FORMATS:
        raise unknown_name("trace format", format, FORMATS)
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Excel's "CSV UTF-8") is dropped
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n")  # 0: the header
        raise _bad(
            path,
            line or None,
            None,
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}"
            + (" (in the header)" if line == 0 else ""),
        ) from None
    lines = text.splitlines()
    header = lines[0] if lines else ""
    second = next((ln for ln in lines[1:] if ln.strip()), "")
    if not header.strip():
        raise _bad(path, None, None, "empty file: no header row")
    for delim, label in ((";", "';'"), ("\t", "a tab")):
        if delim in header and header.count(delim) >= header.count(","):
            raise _bad(path, None, None, f"uses {label} as the delimiter; expected comma-separated values")
    if not second.strip():
        raise _bad(path, None, None, "empty file: a header but no data rows")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.ParserError as exc:
        raise _parser_error(path, str(exc)) from None
    df.columns = [str(c).strip() for c in df.columns]
    required = FORMATS[format]
    for col in required:
        if col not in df.columns:
            raise _bad(
                path,
                None,
                col,
                f"missing column (format {format!r} needs {', '.join(required)}; "
                f"found {', '.join(df.columns)})",
            )
    if len(df) == 0:
        raise _bad(path, None, None, "empty file: a header but no data rows")
    rows = np.arange(1, len(df) + 1)  # (n,) 1-based data rows
    duration = _numeric(df, "duration", path)
    nonpos = duration <= 0
    if nonpos.any():
        r = int(np.flatnonzero(nonpos)[0])
        raise _bad(
            path, r + 1, "duration", f"must be a positive number of seconds, got {df['duration'].iloc[r]!r}"
        )
    gcol = _GPU_COL[format]
    gpus = _positive_int(df, gcol, path, upper=MAX_GPUS_PER_JOB)
    tcol = _TIME_COL[format]
    if format == "philly":
        raw = df[tcol].str.strip()
        ts = pd.to_datetime(raw, errors="coerce", format="%Y-%m-%d %H:%M:%S")
        if ts.isna().any():
            ts = pd.to_datetime(raw, errors="coerce", format="mixed")
        if ts.isna().any():
            r = int(np.flatnonzero(ts.isna().to_numpy())[0])
            raise _bad(path, r + 1, tcol, f"not a date-time: {df[tcol].iloc[r]!r}")
        secs = (ts - ts.min()).dt.total_seconds().to_numpy(dtype=np.float64)
        order = np.argsort(secs, kind="stable")
        cl = df["cluster"].str.strip().tolist() if "cluster" in df.columns else ["philly"] * len(df)
        names = np.array([f"{c}-{r + 1}" for r, c in enumerate(cl)], dtype=object)
        return _TraceTable(
            path, format, names[order], secs[order], gpus[order], duration[order], rows=rows[order]
        )
    submit = _numeric(df, tcol, path)
    back = np.flatnonzero(np.diff(submit) < 0)
    if back.size:
        r = int(back[0]) + 1  # 0-based index of the first row earlier than its predecessor
        raise _bad(
            path,
            r + 1,
            tcol,
            f"times must be sorted; {submit[r]:g} is earlier than row {r}'s {submit[r - 1]:g}",
        )
    ids = df["job_id"].str.strip()
    empty = (ids == "").to_numpy()
    if empty.any():
        raise _bad(path, int(np.flatnonzero(empty)[0]) + 1, "job_id", "missing job id")
    dup = ids.duplicated(keep="first").to_numpy()
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((ids == ids.iloc[r]).to_numpy())[0])
        raise _bad(path, r + 1, "job_id", f"duplicate job id {ids.iloc[r]!r} (first at row {first + 1})")
    names = ids.to_numpy(dtype=object)
    if format == "itp":
        return _TraceTable(path, format, names, submit, gpus, duration, rows=rows)
    return _TraceTable(
        path,
        format,
        names,
        submit,
        gpus,
        duration,
        model=_optional(df, "model", path, "model") or (None,) * len(df),
        batch=_optional(df, "batch_size", path, "int") or (None,) * len(df),
        seq=_optional(df, "seq_len", path, "int") or (None,) * len(df),
        group=_optional(df, "group", path, "group"),
        rows=rows,
    )


# --------------------------------------------------------------------------------------- generators
@runtime_checkable
class WorkloadGenerator(Protocol):
    """Anything with ``generate(seed) -> Workload``."""

    def generate(self, seed: int) -> Workload: ...


def _quantile_sample(profile: str, u: np.ndarray) -> np.ndarray:
    """Durations at uniform draws ``u``: log-linear interpolation of :data:`DURATION_QUANTILES`."""
    if profile not in DURATION_QUANTILES:
        raise unknown_name("duration profile", profile, DURATION_QUANTILES)
    levels = np.array(DURATION_QUANTILE_LEVELS)
    logq = np.log(np.array(DURATION_QUANTILES[profile]))
    return np.exp(np.interp(u * levels[-1], levels, logq))


@dataclass(frozen=True)
class SyntheticGenerator:
    """Seeded synthetic workload: Poisson arrivals at a given load, catalogue models, trace-like durations.

    Each job: a model drawn uniformly from ``models`` (default: catalogue models with a configuration that
    fits ``max_gpus`` reference GPUs), a batch uniformly from the model's batches in
    :data:`ASSIGN_BATCH_SIZES` that fit, ``seq_len = min(max_seq_len, 2048)``; it asks for its minimum
    power-of-two GPU count times 1, 2 or 4 (probabilities 0.5, 0.3, 0.2; capped at ``max_gpus``); its
    duration at that count on the reference GPU type is drawn from the ``duration_profile`` quantiles
    (:data:`DURATION_QUANTILES`, log-linear between knots) and turned into iterations with
    :func:`reference_iteration_time`. A fraction ``recurring_fraction`` of jobs belongs to one of
    ``round(num_jobs * recurring_fraction / mean_group_size)`` recurring groups: same configuration and GPU
    count as the group, duration = the group's base duration x lognormal(0, ``group_sigma``).

    Arrivals are a Poisson process of rate ``load * cluster GPUs / mean(duration * requested GPUs)`` (GPU-
    seconds on the reference type), so ``load`` 1.0 offers as much work as the cluster holds; the first
    job arrives at 0.
    """

    num_jobs: int = 200
    load: float = 0.7
    cluster: ClusterSpec | str = "frenzy-testbed"
    models: tuple[str, ...] | None = None
    duration_profile: str = "itp"
    recurring_fraction: float = 0.3
    mean_group_size: float = 5.0
    group_sigma: float = 0.1
    max_gpus: int = 64
    name: str = "synthetic"
    utilisation: float = DEFAULT_UTILISATION

    def __post_init__(self) -> None:
        if int(self.num_jobs) != self.num_jobs or self.num_jobs < 1:
            raise ConfigError(f"num_jobs must be a positive integer, got {self.num_jobs!r}")
        if not self.load > 0:
            raise ConfigError(f"load must be positive, got {self.load!r}")
        if not 0.0 <= self.recurring_fraction <= 1.0:
            raise ConfigError(f"recurring_fraction must be in [0, 1], got {self.recurring_fraction!r}")
        if not self.mean_group_size >= 1:
            raise ConfigError(f"mean_group_size must be >= 1, got {self.mean_group_size!r}")
        if self.group_sigma < 0:
            raise ConfigError(f"group_sigma must be >= 0, got {self.group_sigma!r}")
        if int(self.max_gpus) != self.max_gpus or self.max_gpus < 1:
            raise ConfigError(f"max_gpus must be a positive integer, got {self.max_gpus!r}")
        if self.duration_profile not in DURATION_QUANTILES:
            raise unknown_name("duration profile", self.duration_profile, DURATION_QUANTILES)
        if self.models is not None:
            object.__setattr__(
                self,
                "models",
                tuple(get_model(m).name if isinstance(m, ModelSpec) else m for m in self.models),
            )
            for m in self.models:  # type: ignore[union-attr]
                get_model(m)

    def _configs(self, cluster: ClusterSpec) -> tuple[str, int, int, list]:
        ref = cluster.reference_gpu_type
        per_node = cluster.max_gpus_per_node(ref)
        cap = min(int(self.max_gpus), cluster.gpus_of_type(ref))
        cap = 1 << (cap.bit_length() - 1)  # largest power of two <= cap
        pool = [get_model(m) for m in (self.models if self.models is not None else MODELS)]
        table = []  # (model, [(batch, seq, min_gpus)])
        for m in pool:
            s = default_seq_len(m)
            opts = [(b, s, mn) for b in ASSIGN_BATCH_SIZES if (mn := _min_pow2(m, b, s, ref, per_node, cap))]
            if opts:
                table.append((m, opts))
        if not table:
            raise ConfigError(
                f"no model of {', '.join(m.name for m in pool)} fits {cap} GPUs of {ref} "
                f"on cluster {cluster.name!r}"
            )
        return ref, per_node, cap, table

    def generate(self, seed: int) -> Workload:
        cluster = ClusterSpec.preset(self.cluster) if isinstance(self.cluster, str) else self.cluster
        ref, per_node, cap, table = self._configs(cluster)
        n = int(self.num_jobs)
        rng = np.random.default_rng(seed)
        n_groups = (
            max(1, round(n * self.recurring_fraction / self.mean_group_size))
            if self.recurring_fraction
            else 0
        )
        # draws, all up front and in a fixed order: templates for groups then jobs, durations, noise, gaps
        u_cfg = rng.random((n_groups + n, 3))  # model, batch, size multiplier
        u_dur = rng.random(n_groups + n)
        in_group = rng.random(n) < self.recurring_fraction if n_groups else np.zeros(n, dtype=bool)
        group_of = rng.integers(0, max(n_groups, 1), size=n)
        noise = rng.lognormal(0.0, self.group_sigma, size=n) if self.group_sigma > 0 else np.ones(n)
        gaps = rng.exponential(1.0, size=n)
        base_dur = _quantile_sample(self.duration_profile, u_dur)  # (G + n,)

        def config(k: int) -> tuple[ModelSpec, int, int, int]:
            m, opts = table[min(int(u_cfg[k, 0] * len(table)), len(table) - 1)]
            b, s, mn = opts[min(int(u_cfg[k, 1] * len(opts)), len(opts) - 1)]
            mult = 1 if u_cfg[k, 2] < 0.5 else (2 if u_cfg[k, 2] < 0.8 else 4)
            g = mn * mult
            while g > mn and (g > cap or not _fits(m, b, s, g, ref, per_node)):
                g //= 2
            return m, b, s, g

        templates = [config(k) for k in range(n_groups)]
        rows = []
        for i in range(n):
            if in_group[i]:
                gid = int(group_of[i])
                m, b, s, g = templates[gid]
                dur = float(base_dur[gid] * noise[i])
            else:
                gid = None
                m, b, s, g = config(n_groups + i)
                dur = float(base_dur[n_groups + i])
            rows.append((m, b, s, g, dur, gid))
        gpu_seconds = np.array([r[4] * r[3] for r in rows])
        rate = self.load * cluster.num_gpus / float(gpu_seconds.mean())  # arrivals per second
        submit = np.concatenate([[0.0], np.cumsum(gaps[:-1] / rate)])  # (n,)
        jobs = []
        for i, (m, b, s, g, dur, gid) in enumerate(rows):
            t = reference_iteration_time(
                m, b, s, g, gpu=ref, gpus_per_node=per_node, utilisation=self.utilisation
            )
            jobs.append(
                JobSpec(
                    job_id=i,
                    submit_time=float(submit[i]),
                    model=m,
                    batch_size=b,
                    seq_len=s,
                    iterations=dur / t,
                    requested_gpus=g,
                    group=gid,
                    name=f"syn-{i}",
                )
            )
        return Workload(
            self.name,
            tuple(jobs),
            source=f"synthetic: seed {seed}, load {self.load}, cluster {cluster.name}, "
            f"durations {self.duration_profile}",
        )


@dataclass(frozen=True)
class TraceGenerator:
    """A trace replayed as recorded; only the assigned fields (model, batch, sequence) change per seed."""

    path: str
    format: str = "itp"
    start: float | None = None
    end: float | None = None
    max_jobs: int | None = None
    load_scale: float = 1.0
    reference_gpu_type: str = REFERENCE_GPU_TYPE
    gpus_per_node: int = 8
    models: tuple[str, ...] | None = None
    name: str | None = None

    def generate(self, seed: int) -> Workload:
        return Workload.from_csv(
            self.path,
            format=self.format,
            start=self.start,
            end=self.end,
            max_jobs=self.max_jobs,
            load_scale=self.load_scale,
            seed=seed,
            name=self.name,
            reference_gpu_type=self.reference_gpu_type,
            gpus_per_node=self.gpus_per_node,
            models=self.models,
        )


@dataclass(frozen=True)
class FixedGenerator:
    """Always the same workload, whatever the seed."""

    workload: Workload = field(repr=False)

    def generate(self, seed: int) -> Workload:
        return self.workload


WORKLOAD_PRESETS: dict[str, WorkloadGenerator] = {
    # one week of ITP cluster02 (570 jobs, frenzy_env/data/ATTRIBUTION.md); models re-drawn per seed
    "itp-default": TraceGenerator(str(data_path(ITP_EXTRACT)), format="itp", name="itp-default"),
    "synthetic": SyntheticGenerator(num_jobs=200, load=0.7, name="synthetic"),
    "synthetic-small": SyntheticGenerator(num_jobs=30, load=0.7, name="synthetic-small"),
}


def make_generator(name_or_obj: str | WorkloadGenerator | Workload, **overrides: object) -> WorkloadGenerator:
    """A generator from a preset name, a generator, or a fixed :class:`Workload`.

    ``overrides`` replace fields of a dataclass generator (e.g. ``make_generator("synthetic",
    cluster=spec, num_jobs=50)``); an unknown field raises :class:`~frenzy_env.errors.ConfigError`.
    """
    if isinstance(name_or_obj, str):
        if name_or_obj not in WORKLOAD_PRESETS:
            raise unknown_name("workload preset", name_or_obj, WORKLOAD_PRESETS)
        gen: WorkloadGenerator = WORKLOAD_PRESETS[name_or_obj]
    elif isinstance(name_or_obj, Workload):
        gen = FixedGenerator(name_or_obj)
    elif isinstance(name_or_obj, WorkloadGenerator):
        gen = name_or_obj
    else:
        raise ConfigError(
            "workload must be a preset name, a Workload or an object with generate(seed), "
            f"got {name_or_obj!r}"
        )
    if overrides:
        if not dataclasses.is_dataclass(gen):
            raise ConfigError(f"cannot override fields of {type(gen).__name__}: it is not a dataclass")
        check_keys(f"{type(gen).__name__} field", overrides, [f.name for f in dataclasses.fields(gen)])
        gen = dataclasses.replace(gen, **overrides)  # type: ignore[type-var]
    return gen
