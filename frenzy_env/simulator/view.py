"""What a policy may read of the simulator: :class:`SimView`, a read-only view of one
:class:`~frenzy_env.simulator.ClusterSimulator`, and :class:`RunningJob`, what it shows of a running job.

A policy decides through the environment's actions only (``env.start_action``, ``env.resize_action``, the
action mask); everything else it knows about the cluster it reads from ``env.view``, a :class:`SimView` of the
current simulator. The view is the one place that knows the simulator's attribute names: scripted baselines
read nothing else, and a policy written against it keeps working when the simulator's internals change. The
job statuses (:data:`FUTURE`, :data:`QUEUED`, :data:`RUNNING`, :data:`DONE`, :data:`REJECTED`) are importable
from here too, so a policy needs this one module.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from frenzy_env.simulator.config import DONE, FUTURE, QUEUED, REJECTED, RUNNING

if TYPE_CHECKING:
    from frenzy_env.simulator.config import SimConfig
    from frenzy_env.simulator.core import ClusterSimulator
    from frenzy_env.workload import JobSpec
    from frenzy_env.world.cluster import ClusterSpec





class RunningJob(Protocol):
    """What a policy may read of a running job (the values of :attr:`SimView.running`); read-only."""

    @property
    def plan(self) -> int:
        """Plan slot it runs on."""

    @property
    def counts(self) -> np.ndarray:
        """(N,) GPUs it holds on each node (the simulator's array: do not mutate)."""

    @property
    def progress_from(self) -> float:
        """Time its first iteration of this attempt starts (start-up and restarts come before)."""

    @property
    def done_base(self) -> float:
        """Iterations done before ``progress_from``."""

    @property
    def rate(self) -> float:
        """Iterations per second on its placement (0 for an attempt that will crash with out-of-memory)."""


def _frozen(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the simulator's own array stays writable for the simulator)."""
    out = array.view()
    out.flags.writeable = False
    return out


class SimView:
    """Read-only view of one :class:`~frenzy_env.simulator.ClusterSimulator`: everything a policy may read.

    Get it as ``env.unwrapped.view`` (one view per simulator: the env builds a new simulator on most resets,
    and a new view with it, so ``view is not old_view`` tells a policy that a new episode's simulator is in
    place). Attributes cannot be set.

    Constant over the simulator's life (per job: ``J`` rows; per plan slot: ``P`` columns); the arrays are
    read-only views:

    * ``num_jobs``, ``num_plans``, ``num_types``; ``jobs`` (J,) tuple of :class:`~frenzy_env.workload.JobSpec`
      in arrival order (job index = position); ``cluster`` (ClusterSpec), ``config`` (SimConfig),
      ``gpu_types`` (T,) names;
    * ``plan_type``, ``plan_count`` (P,) GPU-type index and GPU count of each plan slot;
      ``plan_counts_levels`` (K,) the counts 1, 2, 4, ...; ``max_node_gpus`` (T,) GPUs of the largest node
      of each type; ``plan_grid`` (type slots, count levels) of the slot grid (slot ``t * plan_grid[1] + k``
      is type t with ``plan_counts_levels[k]`` GPUs) and ``plan_present`` (P,) the slots the cluster has
      (all of them unless ``SimConfig.interface="universal"``, whose absent slots have 0 GPUs, type 0, and
      are never feasible);
    * ``submit`` (J,) arrival times; ``work`` (J,) true iterations (oracles only); ``work_estimate`` (J,)
      what schedulers may know of it;
    * ``pred_ok``, ``layout_tp``, ``iter_time`` (J, P): the predictor admits the plan, its tensor-parallel
      degree, seconds per iteration (consolidated placement; inf where no layout exists);
    * ``startup_seconds(job, plan)``: seconds from a start on the plan to the first iteration;
      ``restart_seconds(job, plan)``: the same for a resize of a running job onto the plan (restart overhead,
      checkpoint write on its current plan, then start-up); the cost model of
      :class:`~frenzy_env.simulator.SimConfig`; ``spread_iter_time(job, plan, nodes_spanned)``: seconds per
      iteration on the plan's layout when its GPUs span that many nodes.

    The state now (read through to the simulator at each access). The arrays are the simulator's own, which
    it updates in place: **do not mutate** ``status``, ``done_iters``, ``oom_known``, ``job_restarts``, ``last_action``,
    ``free`` nor the values of ``running``:

    * ``now``; ``arrived`` (jobs whose submit time has passed: job indices ``< arrived``), ``finished``,
      ``rejected``, ``oom_failures`` (counters);
    * ``status`` (J,) int8: :data:`FUTURE`, :data:`QUEUED`, :data:`RUNNING`, :data:`DONE`, :data:`REJECTED`;
      ``done_iters`` (J,) iterations done (running jobs: as of their last event); ``progress(job)`` the
      iterations a job has done by now (a running job's counted to the present); ``oom_known`` (J, P)
      plans that crashed with out-of-memory; ``job_restarts`` (J,) restarts of each job; ``last_action`` (J,)
      the time of each job's last start, resize or preemption (the pacing rules' origin);
    * ``running``: a read-only mapping job index -> :class:`RunningJob`, in start order (a resize keeps a
      job's place);
    * ``free`` (N,) free GPUs per node; ``free_by_type()`` (T,) a fresh array;
    * ``available_plans(jobs)`` (n, P) predictor-admitted plans that have not crashed (a fresh array);
      ``next_event_time()`` (inf when none is pending), ``has_pending_events()``; ``pending_wakeups``
      (ascending tuple) the wake-ups asked with ``env.request_wakeup`` and not yet reached.
    """

    __slots__ = (
        "_sim", "num_jobs", "num_plans", "num_types", "jobs", "cluster", "config", "gpu_types", "plan_type",
        "plan_count", "plan_counts_levels", "max_node_gpus", "submit", "work", "work_estimate", "pred_ok",
        "layout_tp", "iter_time", "available_plans", "next_event_time", "has_pending_events", "startup_seconds",
        "restart_seconds", "spread_iter_time", "progress", "plan_grid", "plan_present",
    )

    if TYPE_CHECKING:
        num_jobs: int
        num_plans: int
        num_types: int
        jobs: tuple[JobSpec, ...]
        cluster: ClusterSpec
        config: SimConfig
        gpu_types: tuple[str, ...]
        plan_type: np.ndarray
        plan_count: np.ndarray
        plan_counts_levels: np.ndarray
        plan_grid: tuple[int, int]
        plan_present: np.ndarray
        max_node_gpus: np.ndarray
        submit: np.ndarray
        work: np.ndarray
        work_estimate: np.ndarray
        pred_ok: np.ndarray
        layout_tp: np.ndarray
        iter_time: np.ndarray

        def available_plans(self, jobs: np.ndarray) -> np.ndarray: ...
        def next_event_time(self) -> float: ...
        def has_pending_events(self) -> bool: ...
        def startup_seconds(self, job: int, plan: int) -> float: ...
        def restart_seconds(self, job: int, plan: int) -> float: ...
        def spread_iter_time(self, job: int, plan: int, nodes_spanned: int) -> float: ...
        def progress(self, job: int) -> float: ...

    def __init__(self, sim: ClusterSimulator) -> None:
        put = object.__setattr__
        put(self, "_sim", sim)
        # constants, and the simulator's bound methods themselves (a method of the view would cost a frame)
        for name in (
            "num_jobs", "num_plans", "num_types", "jobs", "cluster", "config", "gpu_types", "available_plans",
            "next_event_time", "has_pending_events", "startup_seconds", "restart_seconds", "spread_iter_time",
            "progress", "plan_grid",
        ):
            put(self, name, getattr(sim, name))
        for name in (
            "plan_type", "plan_count", "plan_counts_levels", "max_node_gpus", "submit", "work", "work_estimate",
            "pred_ok", "layout_tp", "iter_time", "plan_present",
        ):
            put(self, name, _frozen(getattr(sim, name)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"SimView is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"SimView is read-only: cannot delete {name!r}")

    def __reduce__(self) -> tuple:
        return SimView, (self._sim,)

    # ------------------------------------------------------------------ the state now
    @property
    def now(self) -> float:
        """Simulated time, seconds."""
        return self._sim.now

    @property
    def arrived(self) -> int:
        """Jobs arrived so far: job indices below it (arrival order)."""
        return self._sim._next_arrival

    @property
    def finished(self) -> int:
        """Jobs finished so far."""
        return self._sim.finished

    @property
    def rejected(self) -> int:
        """Jobs rejected so far (no plan fits)."""
        return self._sim.rejected

    @property
    def oom_failures(self) -> int:
        """Attempts that crashed with out-of-memory so far."""
        return self._sim.oom_failures

    @property
    def status(self) -> np.ndarray:
        """(J,) int8 status of each job: FUTURE, QUEUED, RUNNING, DONE or REJECTED."""
        return self._sim.status

    @property
    def done_iters(self) -> np.ndarray:
        """(J,) iterations done (a running job's: as of its last event)."""
        return self._sim.done_iters

    @property
    def oom_known(self) -> np.ndarray:
        """(J, P) plans that crashed with out-of-memory for the job."""
        return self._sim.oom_known

    @property
    def last_action(self) -> np.ndarray:
        """(J,) time of each job's last start, resize or preemption (-inf before its first): the origin of its
        ``resize_cooldown`` and of ``one_action_per_instant``'s hold (:meth:`ClusterSimulator.resize_ready`)."""
        return self._sim.last_action

    @property
    def job_restarts(self) -> np.ndarray:
        """(J,) restarts (resizes, preemptions) of each job."""
        return self._sim.restart_count

    @property
    def free(self) -> np.ndarray:
        """(N,) free GPUs per node."""
        return self._sim.state.free

    @property
    def running(self) -> Mapping[int, RunningJob]:
        """Running jobs (a read-only mapping job index -> :class:`RunningJob`, start order)."""
        return MappingProxyType(self._sim.running)

    def free_by_type(self) -> np.ndarray:
        """(T,) free GPUs per GPU type (a fresh array)."""
        return self._sim.state.free_by_type()

    @property
    def pending_wakeups(self) -> tuple[float, ...]:
        """Times of the wake-ups (``env.request_wakeup``) not yet reached, ascending (a fresh tuple)."""
        return self._sim.pending_wakeups


__all__ = ["DONE", "FUTURE", "QUEUED", "REJECTED", "RUNNING", "RunningJob", "SimView"]
