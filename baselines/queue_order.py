"""Comparators of A-SRPT's paper (Luo et al., arXiv 2501.05563), all on A-SRPT's placement.

The paper compares A-SRPT against list schedulers that all use its communication-aware ("Heavy-Edge")
placement, Tiresias' shortest-pending-work-first (SPWF) among them. Only the paper's abstract could be read
here (the stored copies of arxiv.org/abs and /html/2501.05563v1 return its abstract and introduction, not its
evaluation section), so the comparators below are the ones definable from what is stated -- SPWF and the
FIFO/SJF queue orders -- and the rules the paper leaves open are stated as choices.

One class, :class:`QueueOrderPolicy`, three registered orders:

``fifo_he``
    First-in first-out: visible queued jobs in arrival order (ties: job id).
``spwf``
    Shortest pending work first (Tiresias, NSDI'19, in its two-dimensional form: a job's work is GPUs x time):
    ascending ``g_i * (n_i - done_i) * alpha_i`` -- the job's GPU count times its predicted remaining
    iterations times its iteration time at its best plan of that count (GPU-seconds). Tiresias' own 2D-LAS
    orders by *attained* service because it assumes no job lengths; the A-SRPT paper's SPWF orders by the
    pending (remaining) work, which needs a prediction: here the same predictor A-SRPT is given (below).
``sjf_he``
    Shortest (predicted) job first: ascending ``(n_i - done_i) * alpha_i`` seconds, GPU count ignored.

Shared by all three (and chosen, where the paper says nothing):

* GPU count ``g_i`` and plans: A-SRPT's rule -- the requested count rounded down to a plan slot count (1, 2,
  4, ...), or the count of the job's top-ranked MARP plan (ranking ``"min_gpus"``) when it requested none or
  no plan of that count fits in memory; of those plans the fastest GPU type that can place the job now. If
  every plan of ``g_i`` GPUs has crashed with out-of-memory, its other plans in ranked order.
* Non-preemptive, like A-SRPT: a started job runs to completion (or to an OOM failure, then it queues again).
* ``backfill=True`` (default): list scheduling -- when a job cannot start, later jobs in the order may (the
  usual reading of FIFO/SJF/SPWF comparators; A-SRPT itself serves its queue strictly). ``backfill=False``:
  the first job in the order blocks the others.
* Predictor (``predictor``): ``"forest"`` (default) -- A-SRPT's online random forest
  (:class:`~baselines.asrpt.IterationForest`, the same features, ``unseen`` rule and ``history`` warm-up), so the
  comparators and A-SRPT know exactly as much; ``"perfect"`` (true iterations, an oracle); ``"estimate"``
  (the env's ``work_estimate``). A job's iterations are predicted once, when the policy first sees it queued.
* Placement (``placement``, ``comm_heavy``, ``tau``): the rule of :mod:`baselines.heavy_edge`, the one A-SRPT
  uses -- a communication-heavy job waits for a placement on the fewest nodes for at most ``tau`` x its
  predicted run time counted from its arrival (A-SRPT counts from its virtual-SRPT release, which is when it
  enters A-SRPT's queue); the policy asks the env for a wake-up at that deadline.
  ``placement="any"``: no wait.

Only jobs in the env's visible queue window are seen, as for every policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from baselines.asrpt import (
    ASRPT_PREDICTORS,
    UNSEEN,
    _history_workload,
    count_and_candidates,
    history_forest,
    predicted_iterations,
)
from baselines.base import ScriptedPolicy
from baselines.frenzy import PlanRanker
from baselines.heavy_edge import COMM_HEAVY, DEFAULT_TAU, HeavyEdge, check_placement, start_action
from frenzy_env.errors import ConfigError, unknown_name
from frenzy_env.simulator.view import DONE, SimView
from frenzy_env.workload import JobSpec, Workload

ORDERS = ("arrival", "pending_work", "run_time")


class QueueOrderPolicy(ScriptedPolicy):
    """A non-preemptive list scheduler of A-SRPT's comparators (module docstring), on the shared placement.

    Parameters
    ----------
    env: the (possibly wrapped) FrenzyEnv.
    order: ``"arrival"`` (FIFO), ``"pending_work"`` (SPWF: predicted remaining GPU-seconds) or ``"run_time"``
        (SJF: predicted remaining seconds).
    predictor: ``"forest"`` (default; A-SRPT's), ``"perfect"`` (oracle) or ``"estimate"``.
    backfill: later jobs may start when an earlier one cannot (default True).
    placement: ``"heavy_edge"`` (default) or ``"any"``; comm_heavy, tau: as A-SRPT's (1.5, 1.0).
    unseen, seed, history: the forest's, as A-SRPT's.
    """

    name = "queue_order"

    def __init__(
        self,
        env: Any,
        order: str = "arrival",
        predictor: str = "forest",
        backfill: bool = True,
        placement: str = "heavy_edge",
        comm_heavy: float = COMM_HEAVY,
        tau: float = DEFAULT_TAU,
        unseen: str = "zero",
        seed: int = 0,
        history: Workload | Sequence[JobSpec] | str | None = "auto",
    ) -> None:
        super().__init__(env)
        if order not in ORDERS:
            raise unknown_name("order", order, ORDERS)
        if predictor not in ASRPT_PREDICTORS:
            raise unknown_name("predictor", predictor, ASRPT_PREDICTORS)
        if unseen not in UNSEEN:
            raise unknown_name("unseen", unseen, UNSEEN)
        if not isinstance(backfill, bool):
            raise ConfigError(f"backfill must be True or False, got {backfill!r}")
        check_placement(placement, comm_heavy, tau)
        self.order = order
        self.predictor = predictor
        self.backfill = backfill
        self.placement = placement
        self.comm_heavy = float(comm_heavy)
        self.tau = float(tau)
        self.unseen = unseen
        self.seed = seed
        self.history = _history_workload(history, predictor)
        self.oracle = predictor == "perfect"

    # ------------------------------------------------------------------ episode state
    def setup(self, view: SimView) -> None:
        n = view.num_jobs
        self.ranker = PlanRanker(view)
        self.he = HeavyEdge(view, self.placement, self.comm_heavy)
        self.forest = history_forest(view, self.predictor, self.unseen, self.seed, self.history, self.env)
        self.known = np.zeros(n, dtype=bool)  # (J,) per-job quantities computed
        self.gpus = np.zeros(n, dtype=np.int64)  # (J,) g_i
        self.pred_iters = np.zeros(n)  # (J,) n_i
        self.alpha = np.full(n, np.inf)  # (J,) alpha_i
        self.heavy = np.zeros(n, dtype=bool)  # (J,)
        self.deadline = np.full(n, np.inf)  # (J,) arrival + tau * n_i * alpha_i for heavy jobs
        self._cands: dict[int, np.ndarray] = {}
        self._started: set[int] = set()
        self._seen_finished = view.finished

    def _job_info(self, j: int) -> None:
        """g_i, candidate plans (fastest first), alpha_i, n_i, heaviness and deadline of a newly seen job."""
        view = self.view
        g, cand = count_and_candidates(view, self.ranker, j)
        self._cands[j] = cand
        self.gpus[j] = g
        self.alpha[j] = float(view.iter_time[j, cand[0]])
        self.pred_iters[j] = predicted_iterations(view, self.predictor, self.forest, j)
        self.heavy[j] = self.he.is_heavy(j, int(cand[0]))
        if self.heavy[j]:
            self.deadline[j] = float(view.submit[j]) + self.tau * self.pred_iters[j] * self.alpha[j]
        self.known[j] = True

    def _sync(self, view: SimView) -> None:
        """Teach the forest the true iterations of the jobs this policy started that have finished."""
        if view.finished == self._seen_finished:
            return
        self._seen_finished = view.finished
        status = view.status
        for j in [j for j in self._started if status[j] == DONE]:
            self._started.discard(j)
            if self.forest is not None:
                self.forest.observe(view.jobs[j], float(view.work[j]))

    def keys(self, jobs: np.ndarray) -> np.ndarray:
        """Sort keys of ``jobs`` (smaller first): arrival time, predicted remaining GPU-seconds or seconds."""
        view = self.view
        if self.order == "arrival":
            return view.submit[jobs].astype(float)
        rem = np.maximum(self.pred_iters[jobs] - view.done_iters[jobs], 0.0) * self.alpha[jobs]  # (Q,) seconds
        return rem * self.gpus[jobs] if self.order == "pending_work" else rem

    # ------------------------------------------------------------------ acting
    def act(self, mask: np.ndarray) -> int:
        view = self.ensure_setup()
        self._sync(view)
        env = self.env
        qv = np.asarray(env.visible_queue, dtype=np.int64)
        if qv.size == 0:
            return self.wait_action(mask)
        for j in qv.tolist():
            if not self.known[j] and view.pred_ok[j].any():
                self._job_info(j)
        qv = qv[self.known[qv]]
        slot = {int(j): k for k, j in enumerate(np.asarray(env.visible_queue).tolist())}
        order = np.lexsort((qv, view.submit[qv], self.keys(qv)))  # key, then arrival, then job id
        now = view.now
        for j in qv[order].tolist():
            action = self._try_start(j, slot[j], mask, now)
            if action is not None:
                self._started.add(j)
                return action
            if not self.backfill:
                break
        waiting = self.deadline[qv][self.heavy[qv]]
        waiting = waiting[waiting > now]
        if waiting.size:
            self.wake_at(float(waiting.min()))  # a heavy job takes any placement at its deadline
        return self.wait_action(mask)

    def _try_start(self, j: int, k: int, mask: np.ndarray, now: float) -> int | None:
        return start_action(self, self.he, j, k, mask, self._cands[j], now >= self.deadline[j])


class FifoHeavyEdgePolicy(QueueOrderPolicy):
    """``fifo_he``: arrival order on A-SRPT's placement (:class:`QueueOrderPolicy` with ``order="arrival"``)."""

    name = "fifo_he"

    def __init__(self, env: Any, **kwargs: Any) -> None:
        super().__init__(env, **{"order": "arrival", **kwargs})


class SpwfPolicy(QueueOrderPolicy):
    """``spwf``: Tiresias' shortest pending work first (predicted remaining GPU-seconds) on A-SRPT's placement."""

    name = "spwf"

    def __init__(self, env: Any, **kwargs: Any) -> None:
        super().__init__(env, **{"order": "pending_work", **kwargs})


class SjfHeavyEdgePolicy(QueueOrderPolicy):
    """``sjf_he``: shortest predicted remaining run time first on A-SRPT's placement."""

    name = "sjf_he"

    def __init__(self, env: Any, **kwargs: Any) -> None:
        super().__init__(env, **{"order": "run_time", **kwargs})


__all__ = ["ORDERS", "FifoHeavyEdgePolicy", "QueueOrderPolicy", "SjfHeavyEdgePolicy", "SpwfPolicy"]
