"""Queue disciplines on requested GPU counts: FIFO (backfilling and strict) and shortest-job-first oracles.

* ``fifo``: the "opportunistic" baseline of the Frenzy paper: jobs in arrival order, each on its requested GPU
  count (the trace's ``num_gpus``; jobs without a request use their smallest feasible count), on the first
  GPU type (largest memory first) where that plan is legal now. ``backfill=True`` (the default): when the head
  cannot start, later jobs may (first-fit), because the paper's opportunistic scheduler takes whatever fits.
  ``backfill=False``: strict first-come first-served, nothing starts while the head of the queue waits (the
  FIFO that A-SRPT's Algorithm 1 serves its own queue like); registered as ``fifo_strict`` too.
* ``sjf``: an oracle: the same requested-count plans as ``fifo``, but the queue in order of true remaining
  run time (true remaining iterations x the iteration time of the job's fastest plan at its requested count);
  backfilling as ``fifo``. It is reported, never a target.
* ``sjf_greedy``: the oracle of env v0-v2: true shortest job first, each on its *fastest* legal plan (any GPU
  count: it takes as many free GPUs as speed up the job, far more than requested).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy
from frenzy_env.errors import ConfigError


class FifoPolicy(ScriptedPolicy):
    """Arrival order with the requested GPU count; ``backfill`` (default True) lets later jobs start when the
    head cannot, ``backfill=False`` is strict FCFS (the head blocks the queue)."""

    name = "fifo"

    def __init__(self, env: Any, backfill: bool = True) -> None:
        super().__init__(env)
        if not isinstance(backfill, bool):
            raise ConfigError(f"backfill must be True or False, got {backfill!r}")
        self.backfill = backfill

    def order(self, queue: np.ndarray) -> np.ndarray:
        """The visible queued jobs in service order (arrival order here)."""
        return queue

    def act(self, mask: np.ndarray) -> int:
        env = self.env
        queue = env.visible_queue
        if len(queue) == 0:
            return self.wait_action(mask)
        for job in self.order(queue).tolist():
            plans = self.requested_plans(int(job))
            if plans.size == 0:
                continue  # fits nowhere any more (every plan crashed): the simulator rejects it
            for plan in plans.tolist():
                action = env.start_action(int(job), plan)
                if action is not None and mask[action]:
                    return action
            if not self.backfill:
                break
        return self.wait_action(mask)

    def requested_plans(self, job: int) -> np.ndarray:
        """Plan slots with the job's requested count (or its smallest available count), by GPU type order."""
        view = self.view
        avail = view.available_plans(np.array([job]))[0]
        want = view.jobs[job].requested_gpus
        counts = view.plan_count
        if want:
            # the largest plan count not above the request (requests need not be powers of two)
            levels = view.plan_counts_levels
            target = int(levels[levels <= want].max()) if (levels <= want).any() else int(levels[0])
            plans = np.flatnonzero(avail & (counts == target))
            if plans.size:
                return plans
        cand = np.flatnonzero(avail)
        if cand.size == 0:
            return cand
        smallest = counts[cand].min()
        return cand[counts[cand] == smallest]


class StrictFifoPolicy(FifoPolicy):
    """``fifo`` with ``backfill=False``: strict first-come first-served (registered as ``fifo_strict``)."""

    name = "fifo_strict"

    def __init__(self, env: Any, backfill: bool = False) -> None:
        super().__init__(env, backfill=backfill)


class SjfPolicy(FifoPolicy):
    """Oracle shortest-job-first at requested GPU counts: the queue ordered by true remaining run time on the
    fastest plan of the requested count (:meth:`FifoPolicy.requested_plans`), each job started on that count."""

    name = "sjf"
    oracle = True

    def order(self, queue: np.ndarray) -> np.ndarray:
        view = self.view
        rem = view.work[queue] - view.done_iters[queue]  # (Q,) true remaining iterations
        best = np.array([
            view.iter_time[j, plans].min() if (plans := self.requested_plans(j)).size else np.inf
            for j in queue.tolist()
        ])  # (Q,) seconds per iteration at the requested count, fastest type
        return queue[np.argsort(rem * best, kind="stable")]


class SjfGreedyPolicy(ScriptedPolicy):
    """Oracle shortest-job-first on true remaining work, each job on its fastest legal plan (any GPU count)."""

    name = "sjf_greedy"
    oracle = True

    def act(self, mask: np.ndarray) -> int:
        env, view = self.env, self.view
        qv = env.visible_queue
        if len(qv) == 0:
            return 0
        legal = env.start_rows(mask)
        if not legal.any():
            return 0
        rem = view.work[qv] - view.done_iters[qv]
        times = np.where(legal, rem[:, None] * view.iter_time[qv], np.inf)  # (Q, P) seconds
        # shortest job by its best plan over all plans (not only the legal ones): if it cannot start now
        # on a legal plan, take its fastest legal one
        order = np.argsort(np.where(view.available_plans(qv), rem[:, None] * view.iter_time[qv], np.inf).min(1))
        for k in order:
            if np.isfinite(times[k]).any():
                return env.start_action(int(qv[k]), int(np.argmin(times[k])))
        return 0
