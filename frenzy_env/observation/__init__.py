"""The observation: its contract (named columns, scales, :data:`OBS_VERSION`) and its encoder.

- :mod:`~frenzy_env.observation.contract`: every block's column names, every scale and the encoding's
  version, re-exported here (``from frenzy_env.observation import Q, OBS_VERSION``); it imports nothing, so
  every layer may read it;
- :mod:`~frenzy_env.observation.encoder`: :class:`~frenzy_env.observation.encoder.ObservationEncoder`, which
  fills the observation's buffers from a simulator with incremental caches (the environment owns one).

This package imports only the contract: the encoder uses the compiled kernels (:mod:`frenzy_env.kernels`),
which read the contract from here, so ``import frenzy_env.observation`` must not import the encoder.
"""

from frenzy_env.observation.contract import (
    BATCH_LOG2_SCALE,
    CAPACITY_LOG2_SCALE,
    COUNT_LOG_SCALE,
    GLOBAL_FEATURES,
    GPU_FEATURES,
    GPUS_LOG2_SCALE,
    GT,
    GU,
    INTERFACES,
    LOG_TIME_SCALE,
    MAX_SECONDS,
    MEMORY_GIB_SCALE,
    OBS_HIGH,
    OBS_VERSION,
    PARAMS_LOG10_SCALE,
    PL,
    PLAN_FEATURES,
    QUEUE_FEATURES,
    RESTARTS_SCALE,
    RU,
    RUNNING_FEATURES,
    SEQ_LOG2_SCALE,
    SPEED_LOG2_SCALE,
    UNIVERSAL_GLOBAL_FEATURES,
    UNIVERSAL_LEVELS,
    UNIVERSAL_MAX_GPUS,
    UNIVERSAL_OBS_VERSION,
    UNIVERSAL_PLANS,
    UNIVERSAL_RUNNING_FEATURES,
    UNIVERSAL_TYPES,
    G,
    Q,
    R,
)

__all__ = [
    "OBS_VERSION", "LOG_TIME_SCALE", "MAX_SECONDS", "OBS_HIGH", "QUEUE_FEATURES", "RUNNING_FEATURES",
    "GLOBAL_FEATURES", "PARAMS_LOG10_SCALE", "BATCH_LOG2_SCALE", "SEQ_LOG2_SCALE", "GPUS_LOG2_SCALE",
    "RESTARTS_SCALE", "COUNT_LOG_SCALE", "Q", "R", "G", "INTERFACES", "UNIVERSAL_OBS_VERSION", "UNIVERSAL_TYPES",
    "UNIVERSAL_MAX_GPUS", "UNIVERSAL_LEVELS", "UNIVERSAL_PLANS", "UNIVERSAL_RUNNING_FEATURES", "PLAN_FEATURES",
    "GPU_FEATURES", "UNIVERSAL_GLOBAL_FEATURES", "SPEED_LOG2_SCALE", "MEMORY_GIB_SCALE", "CAPACITY_LOG2_SCALE", "RU",
    "PL", "GT", "GU",
]
