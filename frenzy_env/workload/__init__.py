"""Jobs and workloads: job specs, a seeded synthetic generator, trace loaders and workload presets.

This package holds all randomness about jobs. A :class:`Workload` is an immutable, time-ordered tuple of
:class:`JobSpec`; a *generator* (:class:`WorkloadGenerator`: ``generate(seed) -> Workload``) makes one per
seed; :data:`WORKLOAD_PRESETS` names a few and :func:`make_generator` builds one from a name. It re-exports
the public names of its modules (``from frenzy_env.workload import X``), which import one another in this
order:

- :mod:`~frenzy_env.workload.configs`: layouts and memory fit, :func:`reference_iteration_time` and the
  seeded model-assignment rule (:func:`assign_configs`) for jobs that record no model;
- :mod:`~frenzy_env.workload.traces`: the trace formats, :func:`read_trace` (a validated
  :class:`~frenzy_env.workload.traces.TraceTable`) and :func:`data_path` (the shipped extract
  :data:`ITP_EXTRACT`);
- :mod:`~frenzy_env.workload.spec`: :class:`JobSpec` and :class:`Workload` (its work in iterations, and
  :meth:`Workload.from_csv`, a trace file as a workload);
- :mod:`~frenzy_env.workload.load`: the offered load of a workload on a cluster (:func:`offered_load`,
  speed- and memory-aware capacity; its definition is that module's docstring);
- :mod:`~frenzy_env.workload.generators`: :class:`SyntheticGenerator`, :class:`TraceGenerator`,
  :class:`FixedGenerator`, :data:`WORKLOAD_PRESETS` and :func:`make_generator`.
"""

from frenzy_env.workload.configs import (
    ASSIGN_BATCH_SIZES,
    MAX_ASSIGN_SEQ_LEN,
    REFERENCE_GPU_TYPE,
    TP_LEVELS,
    NoConfigurationError,
    assign_configs,
    default_seq_len,
    reference_iteration_time,
)
from frenzy_env.workload.generators import (
    DURATION_QUANTILE_LEVELS,
    DURATION_QUANTILES,
    WORKLOAD_PRESETS,
    FixedGenerator,
    SyntheticGenerator,
    TraceGenerator,
    WorkloadGenerator,
    make_generator,
)
from frenzy_env.workload.load import LoadReport, arrival_window, offered_load, offered_load_detail
from frenzy_env.workload.spec import JobSpec, Workload
from frenzy_env.workload.traces import (
    CANONICAL_OPTIONAL,
    FORMATS,
    ITP_EXTRACT,
    MAX_GPUS_PER_JOB,
    data_path,
    read_trace,
)

__all__ = [
    "ASSIGN_BATCH_SIZES",
    "CANONICAL_OPTIONAL",
    "DURATION_QUANTILES",
    "DURATION_QUANTILE_LEVELS",
    "FORMATS",
    "ITP_EXTRACT",
    "MAX_ASSIGN_SEQ_LEN",
    "MAX_GPUS_PER_JOB",
    "REFERENCE_GPU_TYPE",
    "TP_LEVELS",
    "WORKLOAD_PRESETS",
    "FixedGenerator",
    "JobSpec",
    "LoadReport",
    "NoConfigurationError",
    "SyntheticGenerator",
    "TraceGenerator",
    "Workload",
    "WorkloadGenerator",
    "arrival_window",
    "assign_configs",
    "data_path",
    "default_seq_len",
    "make_generator",
    "offered_load",
    "offered_load_detail",
    "read_trace",
    "reference_iteration_time",
]
