"""The simulator's vocabulary: its settings (:class:`SimConfig`), the job statuses and the per-job record of what
happened (:class:`JobRecord`, one row of the per-job table; :class:`AttemptRecord`, one allocation of GPUs to
a job)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from frenzy_env.errors import ConfigError, check_keys
from frenzy_env.throughput import DEFAULT_UTILISATION

FUTURE, QUEUED, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4
PREDICTORS = ("frenzy", "extended", "oracle")
WORK_INFO = ("exact", "noisy", "none")


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings (all times in seconds).

    Attributes
    ----------
    predictor: memory predictor behind ``pred_ok`` (what policies see): "frenzy" (the paper's formula),
        "extended" (our calibrated estimator) or "oracle" (the ground truth itself).
    startup_time: seconds between a start and the first iteration (container, data loader, compile).
    restart_overhead: extra seconds a resize costs (stop and checkpoint), on top of ``startup_time``;
        Capes et al. (arXiv 1908.08082) measured about 10 s.
    oom_delay: seconds after a start at which a plan that does not fit fails with out-of-memory and releases
        its GPUs; ``None`` (the default): the OOM cost model below. A number overrides it (the flat 30 s of
        earlier versions: ``oom_delay=30``).
    teardown_time: seconds from an out-of-memory error to the GPUs being free again (process exit, CUDA
        context and NCCL communicator destruction, the scheduler noticing the failed container).

    OOM cost model (``oom_delay=None``): an attempt on a plan that does not fit holds its GPUs for

        startup_time (+ restart_overhead after a resize) + first_step + teardown_time

    ``startup_time`` (container start, framework import, model build and load, data loader workers, NCCL
    set-up; the simulator's start-up estimate, default 30 s) comes before any iteration, as for a job that
    fits; peak memory is reached in the first training step's backward pass (Frenzy/MARP: the peak is model
    states + activations of one step), so the job runs one step, ``first_step`` = the plan's modelled
    iteration time (:mod:`frenzy_env.throughput`; a lower bound, since a first step also pays CUDA/cuDNN
    warm-up), before the error; then ``teardown_time``. Sources and assumptions: the 30 s start-up is this
    project's default (DESIGN.md), consistent with the restart costs Capes et al. (arXiv 1908.08082) measured
    for ring-allreduce jobs (~10 s stop/checkpoint on top of a start); the 10 s teardown is an ASSUMPTION
    of the same order as their stop overhead (no checkpoint is written after an OOM), not a measurement.
    The GPU time of every failed attempt is counted in the ``lost_gpu_hours`` metric.
    max_plan_gpus: largest GPU count of a plan slot (powers of two up to it).
    placement: "best_fit" (Frenzy's HAS) or "spread" (locality-aware, largest free nodes first).
    work_info: what schedulers know of a job's work: "exact" (the configured iterations; the default, since
        a training configuration states them), "noisy" (multiplied by a per-job log-normal factor with
        sigma ``work_noise``), "none" (nothing; estimates are the workload's median).
    work_noise: sigma of the log-normal error for ``work_info="noisy"``.
    utilisation: fraction of peak FLOP/s that dense compute reaches (see :mod:`frenzy_env.throughput`).
    """

    predictor: str = "extended"
    startup_time: float = 30.0
    restart_overhead: float = 10.0
    oom_delay: float | None = None
    teardown_time: float = 10.0
    max_plan_gpus: int = 64
    placement: str = "best_fit"
    work_info: str = "exact"
    work_noise: float = 0.5
    utilisation: float = DEFAULT_UTILISATION

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ConfigError(f"predictor must be one of {', '.join(PREDICTORS)}, got {self.predictor!r}")
        if self.work_info not in WORK_INFO:
            raise ConfigError(f"work_info must be one of {', '.join(WORK_INFO)}, got {self.work_info!r}")
        if self.placement not in ("best_fit", "spread"):
            raise ConfigError(f"placement must be 'best_fit' or 'spread', got {self.placement!r}")
        for name in ("startup_time", "restart_overhead", "oom_delay", "teardown_time", "work_noise"):
            value = getattr(self, name)
            if value is None and name == "oom_delay":
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (isinstance(self.max_plan_gpus, int) and self.max_plan_gpus >= 1):
            raise ConfigError(f"max_plan_gpus must be an integer >= 1, got {self.max_plan_gpus!r}")
        if not (0 < self.utilisation <= 1):
            raise ConfigError(f"utilisation must be in (0, 1], got {self.utilisation!r}")

    @classmethod
    def from_dict(cls, values: dict) -> SimConfig:
        """Build from a dict; a misspelt key raises :class:`ConfigError` naming it."""
        check_keys("simulator config", values, [f.name for f in fields(cls)])
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class JobRecord:
    """What happened to one job (one row of the per-job table)."""

    job_id: int
    submit_time: float
    start_time: float = math.nan
    finish_time: float = math.nan
    gpu_type: str = ""
    num_gpus: int = 0
    dp: int = 0
    tp: int = 0
    restarts: int = 0
    oom_failures: int = 0
    gpu_seconds: float = 0.0
    rejected_reason: str = ""



@dataclass(slots=True)
class AttemptRecord:
    """One attempt of a job: an allocation of GPUs from a start or resize to the stop that ended it (times in
    seconds of the simulator's clock)."""

    job_id: int
    gpu_type: str
    num_gpus: int
    dp: int
    tp: int
    gpus: tuple[int, ...]  # the cluster's GPU indices it held (ascending; node by node)
    start_time: float  # GPUs taken
    progress_from: float  # first iteration (after start-up and any restart overhead)
    end_time: float = math.nan  # GPUs released (nan while running)
    outcome: str = "running"  # "finished", "oom", "resized", "preempted" or "running"
