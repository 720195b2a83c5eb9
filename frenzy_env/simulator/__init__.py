"""Event-driven simulator of a heterogeneous GPU cluster running LLM training jobs.

No Gymnasium here: :class:`ClusterSimulator` is usable on its own (scripted sweeps, trace replay) and the
environment in :mod:`frenzy_env.env` is a thin layer over it.

World model
-----------
* Jobs arrive at their submit time and wait in a queue ordered by arrival.
* A *plan slot* ``p`` is a (GPU type, GPU count) pair, count in 1, 2, 4, ... up to ``max_plan_gpus``. For
  each job and plan slot the simulator precomputes, once, with numpy (Gavel's job x plan matrix):
  the data/tensor-parallel layout the predictor picks (the fastest layout the predictor says fits), whether
  the predictor says it fits (``pred_ok``), whether it truly fits (``true_ok``, the "extended" estimator;
  times the job's memory factor under ``memory_truth="residual"``; under ``"published"`` the CUDA context plus
  the job's factor times the layout's structural peak),
  and its iteration time on a consolidated placement.
* ``start(job, p)`` places the job with the configured placer and allocates GPUs. Progress begins after its
  start-up, ``startup_seconds(job, p)``: ``startup_time`` plus reading the model states (the cost model of
  :class:`SimConfig`). A plan that truly does not fit fails with out-of-memory after its start-up, its first step
  and a teardown (the OOM cost model of :class:`SimConfig`; ``oom_delay`` overrides it): the GPUs are
  released, the job returns to the queue, the failure is counted and the plan is remembered as bad for
  that job (a real scheduler learns from the crash); the GPU-hours it held are counted in the
  ``lost_gpu_hours`` metric. A job whose every predicted plan has failed is rejected.
* ``resize(job, p)`` stops the job, checkpoints, and restarts it on another plan: it makes no progress for
  ``restart_seconds(job, p)`` seconds (``restart_overhead``, writing the checkpoint, then the start-up on the
  new plan). A job still starting up cannot be resized (so a policy cannot
  keep a job restarting forever within one instant). ``preempt(job)`` checkpoints it back to the queue.
  How a preemption or a resize stops the job -- frees its GPUs at once (v5), saves on them first, or kills it
  back to its last periodic checkpoint -- is :class:`SimConfig`'s ``stop_mode`` and ``checkpoint_interval``.
* Jobs that fit nowhere (under the predictor) are rejected at arrival with a reason and counted.
* :meth:`ClusterSimulator.advance` moves time to the next event (finish, OOM, arrival) and processes every
  event due then.

Every state array is numpy; per-step work is O(queue window x plan slots) with no large allocations.

Modules, one layer each (see ``frenzy benchmark`` for what the layers buy):

* :mod:`~frenzy_env.simulator.config`: :class:`SimConfig`, the job statuses, :class:`JobRecord`,
  :class:`AttemptRecord`;
* :mod:`~frenzy_env.simulator.plans`: :class:`PlanTable`, the plan slots and job x plan matrices, built once;
* :mod:`~frenzy_env.simulator.state`: the cluster state with O(nodes touched) updates of the placeable GPUs;
* :mod:`~frenzy_env.simulator.masks`: the start and resize masks as table look-ups, and their caches;
* :mod:`~frenzy_env.simulator.core`: :class:`ClusterSimulator`, the event core (time, actions, events,
  records, metrics, invariants).

Imports go one way: config -> plans, state, masks -> core.
"""

from __future__ import annotations

from frenzy_env.simulator.config import (
    DONE,
    FUTURE,
    PREDICTORS,
    QUEUED,
    REJECTED,
    RUNNING,
    WORK_INFO,
    AttemptRecord,
    JobRecord,
    SimConfig,
)
from frenzy_env.simulator.core import _FINISH, _OOM, ClusterSimulator, _Running
from frenzy_env.simulator.masks import _NO_FIT, _MaskCache
from frenzy_env.simulator.plans import PlanTable
from frenzy_env.simulator.state import _SimState

__all__ = [
    "DONE", "FUTURE", "PREDICTORS", "QUEUED", "REJECTED", "RUNNING", "WORK_INFO", "AttemptRecord", "JobRecord",
    "SimConfig", "_FINISH", "_OOM", "ClusterSimulator", "_Running", "_NO_FIT", "_MaskCache", "PlanTable", "_SimState",
]
