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

The layout above is ``SimConfig.interface="cluster"`` (the default): its plan slots, ``gpus`` and ``nodes`` have
the cluster's own shape. Under ``interface="universal"`` every cluster of at most :data:`UNIVERSAL_TYPES` GPU
types has the same layout (:data:`UNIVERSAL_OBS_VERSION`): the plan slots are a fixed grid of
:data:`UNIVERSAL_TYPES` type slots (the cluster's types in its canonical order, memory first, then speed; the
rest absent) x :data:`UNIVERSAL_LEVELS` GPU counts (1, 2, ..., :data:`UNIVERSAL_MAX_GPUS`), and

- ``queue``: as above, with the grid's P = :data:`UNIVERSAL_PLANS` plan slots (0 on an absent slot);
- ``running``: :data:`UNIVERSAL_RUNNING_FEATURES` (the held GPU type by its speed and memory, not its index)
  then the time left on each plan slot of the grid;
- ``plans``: one row of :data:`PLAN_FEATURES` per plan slot of the grid (all 0 on an absent slot);
- ``gpus``: one row of :data:`GPU_FEATURES` per type slot (all 0 on an absent one); no ``nodes`` entry;
- ``globals``: :data:`UNIVERSAL_GLOBAL_FEATURES` (the cluster layout's, then the world's cost knobs).
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

# the universal interface (SimConfig.interface="universal"): the plan-slot grid
INTERFACES = ("cluster", "universal")
UNIVERSAL_OBS_VERSION = 1  # the version of the universal layout; bump it with any change to it
UNIVERSAL_TYPES = 4
"""Type slots of the universal grid: the most GPU types of any cluster preset (``pai-2020`` and ``large-1024``
have 4). A cluster with more types is refused under ``interface="universal"``."""
UNIVERSAL_MAX_GPUS = 64
"""The largest GPU count of the universal grid: ``SimConfig.max_plan_gpus``' default (64), so every registered id
keeps its plan counts. ``max_plan_gpus`` above it is refused under the universal interface."""
UNIVERSAL_LEVELS = 7
"""GPU counts of the universal grid: 1, 2, 4, ..., :data:`UNIVERSAL_MAX_GPUS` (log2(64) + 1 = 7)."""
UNIVERSAL_PLANS = UNIVERSAL_TYPES * UNIVERSAL_LEVELS
"""Plan slots of the universal grid; slot ``t * UNIVERSAL_LEVELS + k`` is type slot t with 2**k GPUs."""

UNIVERSAL_RUNNING_FEATURES = (
    "present", "elapsed", "remaining_time", "num_gpus", "gpu_speed", "gpu_memory", "restarts", "progress",
)
"""A running job's row under the universal interface: as :data:`RUNNING_FEATURES`, with its GPU type described by
its peak speed (log2(1 + peak TFLOP/s) / :data:`SPEED_LOG2_SCALE`) and memory (GiB / :data:`MEMORY_GIB_SCALE`)
in place of the type's index."""

PLAN_FEATURES = ("present", "num_gpus", "gpu_speed", "gpu_memory", "fits_free")
"""A plan slot's row (universal interface): 1 when the slot exists on this cluster (its type is there and its
count at most the type's GPUs and ``max_plan_gpus``); log2(GPUs + 1) / :data:`GPUS_LOG2_SCALE`; its type's peak
speed and memory (as in :data:`UNIVERSAL_RUNNING_FEATURES`); 1 when the type has at least that many GPUs free
now (whether a job's layout can be placed on them is the action mask's). All 0 on an absent slot."""

GPU_FEATURES = (
    "present", "free", "capacity", "gpu_speed", "gpu_memory", "gpus_per_node", "nodes", "free_nodes",
    "largest_free",
)
"""A type slot's row (universal interface): 1 when the cluster has the type; the fraction of its GPUs that is
free; log2(1 + its GPUs) / :data:`CAPACITY_LOG2_SCALE`; its peak speed and memory (as in
:data:`UNIVERSAL_RUNNING_FEATURES`); log2(1 + GPUs of its largest node) / :data:`GPUS_LOG2_SCALE`; log1p(its
nodes) / :data:`COUNT_LOG_SCALE`; the fraction of its nodes that is wholly free; the most free GPUs on one of
its nodes over the GPUs of its largest node. All 0 on an absent slot."""

UNIVERSAL_GLOBAL_FEATURES = (*GLOBAL_FEATURES, "startup_time", "restart_overhead")
"""The globals under the universal interface: :data:`GLOBAL_FEATURES`, then the world's cost knobs
``SimConfig.startup_time`` and ``SimConfig.restart_overhead`` as log times (``log1p(seconds) /
LOG_TIME_SCALE``), so one network can respond to them."""

# scales of the static and count features above
PARAMS_LOG10_SCALE = 12.0
BATCH_LOG2_SCALE = 12.0
SEQ_LOG2_SCALE = 16.0
GPUS_LOG2_SCALE = 8.0
RESTARTS_SCALE = 10.0
COUNT_LOG_SCALE = 10.0
#: the universal interface's GPU-type scales: log2(1 + peak TFLOP/s) / 10 and GiB / 128 put the catalogue
#: (P100's 9.3 to H100's 989 TFLOP/s, 16 GiB to H200's 141 GB; frenzy_env.world.cluster) within [0.3, 1] and
#: [0.125, 1.03], leaving room below the clip at 2 for larger parts
SPEED_LOG2_SCALE = 10.0
MEMORY_GIB_SCALE = 128.0
CAPACITY_LOG2_SCALE = 16.0  # log2(1 + a type's GPUs) / 16: 1.0 at 65,535 GPUs


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
RU = _Columns(UNIVERSAL_RUNNING_FEATURES)
PL = _Columns(PLAN_FEATURES)
GT = _Columns(GPU_FEATURES)
GU = _Columns(UNIVERSAL_GLOBAL_FEATURES)

__all__ = [
    "OBS_VERSION", "LOG_TIME_SCALE", "MAX_SECONDS", "OBS_HIGH", "QUEUE_FEATURES", "RUNNING_FEATURES",
    "GLOBAL_FEATURES", "PARAMS_LOG10_SCALE", "BATCH_LOG2_SCALE", "SEQ_LOG2_SCALE", "GPUS_LOG2_SCALE",
    "RESTARTS_SCALE", "COUNT_LOG_SCALE", "Q", "R", "G", "INTERFACES", "UNIVERSAL_OBS_VERSION", "UNIVERSAL_TYPES",
    "UNIVERSAL_MAX_GPUS", "UNIVERSAL_LEVELS", "UNIVERSAL_PLANS", "UNIVERSAL_RUNNING_FEATURES", "PLAN_FEATURES",
    "GPU_FEATURES", "UNIVERSAL_GLOBAL_FEATURES", "SPEED_LOG2_SCALE", "MEMORY_GIB_SCALE", "CAPACITY_LOG2_SCALE", "RU",
    "PL", "GT", "GU",
]
