"""Jobs and workloads: job specs, a seeded synthetic generator, trace loaders and workload presets.

This package holds all randomness about jobs. A :class:`Workload` is an immutable, time-ordered tuple of
:class:`JobSpec`; a *generator* (:class:`WorkloadGenerator`: ``generate(seed) -> Workload``) makes one per
seed; :data:`WORKLOAD_PRESETS` names a few and :func:`make_generator` builds one from a name. It re-exports
the public names of its modules (``from frenzy_env.workload import X``), which import one another in this
order:

- :mod:`~frenzy_env.workload.configs`: layouts and memory fit, :func:`reference_iteration_time` and the
  seeded model-assignment rules (:func:`assign_configs`, sizing ``"recorded"``, the default, or env v4's ``"v4"``) for
  jobs that record no model;
- :mod:`~frenzy_env.workload.traces`: the trace formats, :func:`read_trace` (a validated
  :class:`~frenzy_env.workload.traces.TraceTable`) and :func:`data_path` (the shipped extract
  :data:`ITP_EXTRACT`);
- :mod:`~frenzy_env.workload.spec`: :class:`JobSpec` and :class:`Workload` (its work in iterations, and
  :meth:`Workload.from_csv`, a trace file as a workload);
- :mod:`~frenzy_env.workload.load`: the offered load of a workload on a cluster (:func:`offered_load`,
  speed- and memory-aware capacity; its definition is that module's docstring) and the busy load (the share of
  the GPUs a FIFO model keeps busy over the arrival window, the generators' ``load_mode="busy"``);
- :mod:`~frenzy_env.workload.generators`: :class:`SyntheticGenerator`, :class:`TraceGenerator`,
  :class:`FixedGenerator`, :data:`WORKLOAD_PRESETS` and :func:`make_generator`.

:mod:`~frenzy_env.workload.suites` (the named benchmark suites and the train/validation/test split) builds on
them and is imported as itself (``from frenzy_env.workload.suites import get_suite``), not re-exported.
"""

from frenzy_env.workload.configs import (
    ACCUMULATION_STEPS,
    ASSIGN_BATCH_SIZES,
    DEFAULT_SIZING,
    MAX_ACCUMULATION,
    MAX_ASSIGN_SEQ_LEN,
    MICRO_BATCH_SOURCES,
    MICRO_BATCH_WEIGHTS,
    REFERENCE_GPU_TYPE,
    SIZING_RULES,
    TP_LEVELS,
    NoConfigurationError,
    assign_configs,
    default_seq_len,
    fits_unaccumulated,
    recorded_layout,
    recorded_options,
    reference_iteration_time,
)
from frenzy_env.workload.generators import (
    DURATION_QUANTILE_LEVELS,
    DURATION_QUANTILES,
    GPU_DEMAND_COUNTS,
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
    "ACCUMULATION_STEPS",
    "ASSIGN_BATCH_SIZES",
    "CANONICAL_OPTIONAL",
    "DURATION_QUANTILES",
    "DURATION_QUANTILE_LEVELS",
    "DEFAULT_SIZING",
    "GPU_DEMAND_COUNTS",
    "MAX_ACCUMULATION",
    "MICRO_BATCH_SOURCES",
    "MICRO_BATCH_WEIGHTS",
    "SIZING_RULES",
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
    "fits_unaccumulated",
    "make_generator",
    "offered_load",
    "offered_load_detail",
    "read_trace",
    "recorded_layout",
    "recorded_options",
    "reference_iteration_time",
]
