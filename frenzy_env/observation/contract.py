"""The observation contract, named once: the columns of every block, their scales and the encoding's version.

The observation is the contract between the environment and every trained model, so every name, column
index and scale is defined here and only here (re-exported as :mod:`frenzy_env.observation`); the encoder
(:mod:`frenzy_env.observation.encoder`), the compiled kernels (``kernels.py``) and the agents read them from
there. ``tests/observation/test_golden_obs.py`` asserts every named
entry against values computed by hand, so a change to any of them fails a test; a deliberate change must
bump :data:`OBS_VERSION` (models record the version they were trained on, and ``agents.ppo.load_policy``
refuses a model of another version).

Blocks (flat float32 in the observation; ``queue`` and ``running`` reshape to (slots, features + P)):

- ``queue``: one row per queue slot, :data:`QUEUE_FEATURES` then the predicted run time on each plan slot;
- ``running``: one row per running slot, :data:`RUNNING_FEATURES` then the predicted time left on each plan
  slot: on its current plan the start-up it is still paying plus its remaining work there; on another plan
  what a resize would cost (``restart_seconds``: restart overhead, checkpoint write, start-up there) plus the
  remaining work at that plan's speed; 0 where a plan is not available;
- ``gpus``: the free fraction of each GPU type, then each type's share of the cluster's GPUs;
- ``nodes``: the free fraction of each node;
- ``globals``: :data:`GLOBAL_FEATURES`.

Times are ``log1p(seconds) / LOG_TIME_SCALE``; every float entry is clipped to [0, 2].
This module imports nothing, so that every layer (kernels included) may read it.
"""

from __future__ import annotations

OBS_VERSION = 3  # the version of this encoding; bump it with any change below
# (v2: env v1's globals; v3: a running job's time left includes its pending start-up and, on other plans, the
# restart a resize costs)

LOG_TIME_SCALE = 16.0  # times are log1p(seconds) / 16: log1p(1e7 s) ~ 16
MAX_SECONDS = 1e12  # predicted times are capped here before the log (an impossible plan's inf included)
OBS_HIGH = 2.0  # every float entry is clipped to [0, OBS_HIGH]

QUEUE_FEATURES = ("present", "wait", "best_time", "params", "batch", "seq_len", "requested_gpus")
"""A queued job's row: 1; log time waited; log predicted run time on its fastest available plan; then the
static features: log10(parameters) / 12, log2(global batch) / 12, log2(sequence length) / 16,
log2(requested GPUs + 1) / 8 (0 when none was requested)."""

RUNNING_FEATURES = ("present", "elapsed", "remaining_time", "num_gpus", "gpu_type", "restarts", "progress")
"""A running job's row: 1; log time since its first start; log predicted time left on its plan (start-up
still to pay included); log2(GPUs + 1) / 8; its GPU type's index / (types - 1); restarts / 10; the fraction
of its (estimated) work done."""

GLOBAL_FEATURES = (
    "queue_length", "running", "backlog", "arrived", "next_arrival", "busy",
    "next_event", "running_total", "running_beyond", "queued_work", "running_work", "queued_gpus",
)
"""log1p(queued jobs) / 10; running jobs / running slots; log1p(queued jobs beyond the queue window) / 10;
the fraction of the workload's jobs that has arrived; log time to the next arrival (0 when none is left);
busy GPUs / all GPUs; log time to the next event (finish, OOM failure, wake-up or arrival; 0 when none);
log1p(running jobs) / 10 and log1p(running jobs beyond the running window) / 10; the whole-system work: log of
the summed predicted seconds of every queued job on its best available plan, and of every running job's
time left on its plan (estimated work and start-up still to pay, beyond the windows included); the summed
fewest GPUs each queued job could start on, / all GPUs."""

# scales of the static and count features above
PARAMS_LOG10_SCALE = 12.0
BATCH_LOG2_SCALE = 12.0
SEQ_LOG2_SCALE = 16.0
GPUS_LOG2_SCALE = 8.0
RESTARTS_SCALE = 10.0
COUNT_LOG_SCALE = 10.0


class _Columns:
    """Attribute access to column indices: ``Q.wait == QUEUE_FEATURES.index("wait")``."""

    def __init__(self, names: tuple[str, ...]) -> None:
        for i, name in enumerate(names):
            setattr(self, name, i)
        self.count = len(names)

    def __setattr__(self, name: str, value: int) -> None:
        if name in self.__dict__:
            raise AttributeError(f"column {name!r} is fixed")
        super().__setattr__(name, value)


Q = _Columns(QUEUE_FEATURES)
R = _Columns(RUNNING_FEATURES)
G = _Columns(GLOBAL_FEATURES)

__all__ = [
    "OBS_VERSION", "LOG_TIME_SCALE", "MAX_SECONDS", "OBS_HIGH", "QUEUE_FEATURES", "RUNNING_FEATURES",
    "GLOBAL_FEATURES", "PARAMS_LOG10_SCALE", "BATCH_LOG2_SCALE", "SEQ_LOG2_SCALE", "GPUS_LOG2_SCALE",
    "RESTARTS_SCALE", "COUNT_LOG_SCALE", "Q", "R", "G",
]
