"""The simulator's event core: :class:`ClusterSimulator`, the one public class, with the dynamic state of an
episode and what changes it (arrivals, start, resize, preempt, finishes, out-of-memory failures, requeues),
the per-job records, the attempt log (``attempts``), metrics and invariants; the world model it implements is
in the package docstring (:mod:`frenzy_env.simulator`).

It holds the fields of its :class:`~frenzy_env.simulator.plans.PlanTable` as its own attributes, inherits the
masks and their caches from :class:`~frenzy_env.simulator.masks._MaskLayer` and keeps its GPUs in a
:class:`~frenzy_env.simulator.state._SimState`. Per-job mirrors of the running book-keeping (``run_plan``,
``run_version``, ``run_floats``, ``restart_count``, ``avail``, ``avail_iter_time``) and change counters
(``queue_version``, ``running_version``, ``running_order_version``, ``requeued``) let views (the environment's
observation) update only what changed. The simulator maintains them; callers read them, never write them.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import math
from array import array
from dataclasses import dataclass

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.simulator.config import DONE, QUEUED, REJECTED, RUNNING, AttemptRecord, JobRecord, SimConfig
from frenzy_env.simulator.masks import _MaskLayer
from frenzy_env.simulator.plans import PlanTable
from frenzy_env.simulator.state import _SimState
from frenzy_env.workload import Workload
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.placement import place
from frenzy_env.world.throughput import iteration_time

# event kinds, processed in this order at equal times: finishes, OOM failures, wake-ups, then the ends of the
# saves of preempted jobs (SimConfig.stop_mode "save_first")
_FINISH, _OOM, _WAKE, _RELEASE = 0, 1, 2, 3
MIN_WAKEUP_INTERVAL = 1.0  # seconds: a wake-up is never sooner than this after the time it was asked at
MAX_WAKEUPS_PER_INSTANT = 16  # wake-ups accepted at one simulated instant; later requests are refused


@dataclass(slots=True)
class _Running:
    """Book-keeping of a job that holds GPUs."""

    plan: int
    tp: int
    nodes: list[int]  # nodes it holds GPUs on (ascending)
    want: list[int]  # GPUs it holds on each of them
    num_nodes: int  # nodes in the cluster (the length of ``counts``)
    held_since: float  # start of this allocation (GPU-seconds accounting)
    progress_from: float  # time the first iteration of this attempt starts
    done_base: float  # iterations done before progress_from
    rate: float  # iterations per second on this placement
    will_oom: bool
    version: int = 0
    _counts: np.ndarray | None = None

    @property
    def counts(self) -> np.ndarray:
        """(num_nodes,) GPUs held per node (built on first use, then kept)."""
        if self._counts is None:
            self._counts = np.zeros(self.num_nodes, dtype=np.int64)
            self._counts[self.nodes] = self.want
        return self._counts


class ClusterSimulator(_MaskLayer):
    """Discrete-event simulator; see the package docstring (:mod:`frenzy_env.simulator`) for the world model.

    Parameters
    ----------
    cluster: the cluster.
    workload: the jobs (their order defines job indices; they are sorted by submit time, stably).
    config: :class:`SimConfig`.
    seed: seeds the work-estimate noise (``work_info="noisy"``).
    """

    def __init__(self, cluster: ClusterSpec, workload: Workload, config: SimConfig | None = None, seed: int = 0):
        self.cluster = cluster
        self.config = config or SimConfig()
        jobs = sorted(workload.jobs, key=lambda j: j.submit_time)
        self.workload = workload
        self.jobs = tuple(jobs)
        self.num_jobs = len(jobs)
        if self.num_jobs == 0:
            raise ConfigError(f"workload {workload.name!r} has no jobs")
        self.plan_table = PlanTable(cluster, self.jobs, workload, self.config, seed)
        # the pacing rules (SimConfig.resize_cooldown, one_action_per_instant), read with ``last_action``
        self._cooldown = float(self.config.resize_cooldown or 0.0)  # seconds
        self._one_action = bool(self.config.one_action_per_instant)
        self._paced = self._cooldown > 0 or self._one_action  # either rule is on
        # how a preemption or a resize stops a job (SimConfig.stop_mode, checkpoint_interval)
        self._save_first = self.config.stop_mode == "save_first"
        self._kill = self.config.stop_mode == "kill"
        self._ckpt = self.config.checkpoint_interval
        vars(self).update(self.plan_table.fields())  # its fields as attributes: one look-up on the hot path
        self._spread_iter_time: dict[tuple[int, int, int], float] = {}  # (row, plan, nodes) -> s/iteration
        self._resize_rows: dict[tuple[int, int], np.ndarray] = {}  # (row key, plan) -> (3P,) see _resize_row
        self._slot_heads: dict[tuple, np.ndarray] = {}  # (row key, plan, GPUs of whole nodes) -> see _slot_row
        self.reset_state()

    # ------------------------------------------------------------------ dynamic state
    def reset_state(self) -> None:
        """Back to time 0 with every job in the future."""
        n = self.num_jobs
        self.now = float(self.submit[0])
        self.state = _SimState(self.cluster, self.tp_levels)
        self.status = np.zeros(n, dtype=np.int8)  # (J,)
        self.done_iters = np.zeros(n, dtype=np.float64)
        self.oom_known = np.zeros((n, self.num_plans), dtype=bool)  # (J, P) plans that crashed
        self.records = [JobRecord(job_id=j.job_id, submit_time=float(j.submit_time)) for j in self.jobs]
        self.attempts: list[AttemptRecord] = []  # every allocation of GPUs, in start order
        self._attempt_of: dict[int, AttemptRecord] = {}  # running job -> its open attempt
        self.queue: list[int] = []  # job indices, sorted (arrival order)
        self.running: dict[int, _Running] = {}  # insertion order = start order (a resize keeps the job's place)
        self._events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job, version)
        self._seq = 0
        self._wake_times: set[float] = set()  # times of the pending wake-ups (one event per time)
        self._wake_asked = (math.nan, 0)  # (instant, wake-ups accepted at it): the per-instant cap
        self.woke = False  # the last move of time reached a wake-up
        self._next_arrival = 0
        self.finished = 0
        self.rejected = 0
        self.oom_failures = 0
        self.lost_gpu_seconds = 0.0  # GPU-seconds held by attempts that failed with out-of-memory
        self.restarts = 0
        self.busy_gpus = 0
        self.util_times = array("d", [self.now])
        self.util_busy = array("d", [0.0])
        # per-job mirrors of the running book-keeping, for vectorised reads (observations, masks)
        self.run_plan = np.full(n, -1, dtype=np.int64)  # (J,) current plan slot, -1 when not running
        self._oom_jobs: set[int] = set()  # jobs with a crashed plan (their avail row differs from pred_ok)
        self.avail = self.pred_ok.copy()  # (J, P) pred_ok & ~oom_known, kept up to date
        self.avail_iter_time = np.where(self.avail, self.iter_time, 0.0)  # (J, P) 0 where not available
        self.run_floats = np.zeros((n, 4))  # (J, 4) done_base, progress_from, rate, first start time
        self.run_floats[:, 3] = math.nan
        self.restart_count = np.zeros(n, dtype=np.int64)  # (J,) records[j].restarts
        # (J,) seconds a preempted job's next start adds to its start-up: restart_overhead + writing the
        # checkpoint on the plan it was preempted from (0 for a job never preempted since its last start)
        self.resume_extra = np.zeros(n, dtype=np.float64)
        # (J,) time of each job's last start, resize or preemption (-inf before its first): what the rules of
        # SimConfig.resize_cooldown and one_action_per_instant read (resize_ready, the masks, the actions)
        self.last_action = np.full(n, -math.inf)
        # (J,) stop_mode "save_first": when a preempted job that is saving frees its GPUs and returns to the queue
        # (nan for every other job); it stays RUNNING, makes no progress and may not be resized or preempted
        self.saving_until = np.full(n, math.nan)
        self.rolled_back_gpu_seconds = 0.0  # stop_mode "kill": GPU-seconds of run lost to stops without a save
        # change counters: views built on the queue / the running set can tell when to rebuild
        self.queue_version = 0
        self.running_version = 0  # any start, resize or stop
        self.running_order_version = 0  # a start or a stop: the running jobs or their order changed
        self.requeued: list[int] = []  # jobs put back in the queue (preempted or out of memory), in order
        self._avail_version = 0  # changes whenever ``avail`` does
        self.run_version = np.full(n, -1, dtype=np.int64)  # (J,) attempt id of running jobs, -1 otherwise
        self._reset_masks()  # the running jobs' slots and the mask caches
        self._arrive_due()

    # ------------------------------------------------------------------ queries
    @property
    def run_done_base(self) -> np.ndarray:
        """(J,) ``_Running.done_base`` of running jobs (a view of ``run_floats``)."""
        return self.run_floats[:, 0]

    @property
    def run_progress_from(self) -> np.ndarray:
        """(J,) ``_Running.progress_from`` of running jobs: no progress (and no resize) before it."""
        return self.run_floats[:, 1]

    @property
    def run_rate(self) -> np.ndarray:
        """(J,) iterations per second of running jobs."""
        return self.run_floats[:, 2]

    @property
    def start_time(self) -> np.ndarray:
        """(J,) first start of each job (nan before), as ``records[j].start_time``."""
        return self.run_floats[:, 3]

    @property
    def done(self) -> bool:
        """Every job finished or rejected."""
        return self.finished + self.rejected == self.num_jobs

    @property
    def jobs_in_system(self) -> int:
        return len(self.queue) + len(self.running)

    def next_event_time(self) -> float:
        """Time of the next finish, OOM, wake-up or arrival (inf when none is pending)."""
        t = self._events[0][0] if self._events else math.inf
        if self._next_arrival < self.num_jobs:
            t = min(t, float(self.submit[self._next_arrival]))
        return t

    def has_pending_events(self) -> bool:
        """Something will happen: a finish, an OOM failure, a wake-up or an arrival is pending."""
        return bool(self._events) or self._next_arrival < self.num_jobs

    @property
    def pending_wakeups(self) -> tuple[float, ...]:
        """Times of the wake-ups not yet reached, ascending."""
        return tuple(sorted(self._wake_times))

    def request_wakeup(self, t: float) -> float | None:
        """Ask for a no-op event at time ``t``: :meth:`advance` stops there, so a policy is consulted again.

        A wake-up is ordered after the finishes and OOM failures of the same instant. It is never sooner than
        :data:`MIN_WAKEUP_INTERVAL` after now (an earlier ``t`` is moved there), so a policy that asks again
        at every wake-up still moves time forward; a wake-up at an already pending time is the same event,
        and at most :data:`MAX_WAKEUPS_PER_INSTANT` are accepted at one simulated instant. Returns the time
        of the wake-up, or None when it was refused (the cap, or the episode is over). ``t`` must be a finite
        number (``ValueError`` otherwise). Wake-ups are cleared by :meth:`reset_state`.
        """
        if not (isinstance(t, (int, float, np.integer, np.floating)) and math.isfinite(t)):
            raise ValueError(f"request_wakeup: t must be a finite number of seconds, got {t!r}")
        if self.done:
            return None
        instant, count = self._wake_asked
        if instant != self.now:
            count = 0
        if count >= MAX_WAKEUPS_PER_INSTANT:
            return None
        self._wake_asked = (self.now, count + 1)
        t = max(float(t), self.now + MIN_WAKEUP_INTERVAL)
        if t not in self._wake_times:
            self._wake_times.add(t)
            self._push(t, _WAKE, -1, -1)
        return t

    def available_plans(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), P) bool: plans the predictor allows and that have not crashed for the job."""
        return self.avail[jobs]

    def remaining_work(self, job: int, estimate: bool = True) -> float:
        """Iterations left (from the estimate schedulers see, or the truth)."""
        total = self.work_estimate[job] if estimate else self.work[job]
        return max(0.0, float(total) - self.progress(job))

    def progress(self, job: int) -> float:
        """Iterations done so far."""
        run = self.running.get(job)
        if run is None:
            return float(self.done_iters[job])
        return run.done_base + max(0.0, self.now - run.progress_from) * run.rate

    def plan_label(self, plan: int) -> str:
        """``"A100-80GBx8"``; ``"absent"`` for an absent slot of the universal grid (``SimConfig.interface``)."""
        if not self.plan_present[plan]:
            return "absent"
        return f"{self.gpu_types[self.plan_type[plan]]}x{int(self.plan_count[plan])}"

    def plan_index(self, gpu_type: str, num_gpus: int) -> int:
        """Plan slot of (gpu_type, num_gpus); ValueError when the cluster has no such slot."""
        if gpu_type not in self.gpu_types:
            raise ValueError(f"GPU type {gpu_type!r} is not in cluster {self.cluster.name!r}")
        hits = np.flatnonzero(self.plan_counts_levels == num_gpus)
        if hits.size == 0:
            raise ValueError(f"num_gpus must be one of {self.plan_counts_levels.tolist()}, got {num_gpus}")
        return self.gpu_types.index(gpu_type) * self.plan_grid[1] + int(hits[0])

    # ------------------------------------------------------------------ actions
    def startup_seconds(self, job: int, plan: int) -> float:
        """Seconds from a start of ``job`` on plan slot ``plan`` to its first iteration (the start-up model of
        :class:`SimConfig`: ``startup_time`` + loading the model states; for a preempted job, plus what its
        preemption deferred, ``resume_extra[job]``)."""
        return self._row_start_l[self._row_key_l[job]][plan] + float(self.resume_extra[job])

    def restart_seconds(self, job: int, plan: int) -> float:
        """Seconds from a resize of running ``job`` onto plan slot ``plan`` to its first iteration there:
        ``restart_overhead`` + writing the checkpoint on its current plan + :meth:`startup_seconds`. Raises
        ``KeyError`` naming the job if it is not running."""
        run = self.running.get(job)
        if run is None:
            raise KeyError(f"job {job} is not running: only a running job can be resized")
        row = self._row_start_l[self._row_key_l[job]]
        return row[plan] + self._row_save_l[self._row_key_l[job]][run.plan]

    def start(self, job: int, plan: int) -> bool:
        """Start queued ``job`` on plan slot ``plan``. Returns False (and changes nothing) if illegal (with
        ``one_action_per_instant``, also when the job was acted on at this instant: preempted)."""
        if not (0 <= plan < self.num_plans) or not (0 <= job < self.num_jobs) or self.status[job] != QUEUED:
            return False
        if not self.avail[job, plan]:  # pred_ok and not oom_known
            return False
        if self._one_action and self.last_action[job] >= self.now:  # acted on at this instant (a preemption)
            return False
        placed = self._placement(job, plan, self.state.free_l)
        if placed is None:
            return False
        pos = bisect.bisect_left(self.queue, job)
        del self.queue[pos]
        self.queue_version += 1
        extra = float(self.resume_extra[job])  # a preempted job pays the stop and checkpoint write now
        self.resume_extra[job] = 0.0
        self._launch(job, plan, placed, done_base=float(self.done_iters[job]), extra_delay=extra)
        return True

    def resize(self, job: int, plan: int) -> bool:
        """Restart running ``job`` on another plan slot, paying the restart overhead. False if illegal: during its
        start-up (or its save, ``stop_mode="save_first"``), and with the pacing rules within ``resize_cooldown``
        of its last start or resize or when acted on at this instant (:meth:`resize_ready`). Under
        ``stop_mode="kill"`` the job restarts from its last periodic checkpoint, paying only the start-up on
        ``plan`` (:class:`SimConfig`)."""
        run = self.running.get(job)
        if run is None or not (0 <= plan < self.num_plans) or plan == run.plan or run.progress_from > self.now:
            return False
        if not self.avail[job, plan]:  # pred_ok and not oom_known
            return False
        if self._paced and not self._rested(job):  # within its cooldown, or acted on at this instant
            return False
        free = self.state.free_l.copy()  # the job's own GPUs count as free
        for node, k in zip(run.nodes, run.want):
            free[node] += k
        placed = self._placement(job, plan, free)
        if placed is None:
            return False
        # _stop then _launch, the job keeping its slot: the same state, with fewer steps in between
        now = self.now
        self.running_version += 1  # (the job keeps its place in ``running``: _launch replaces its entry)
        done = self._kept(job, run)
        self.state._move(job, *placed)
        held = self._plan_count_l[run.plan]
        rec = self.records[job]
        rec.gpu_seconds += held * (now - run.held_since)
        self.busy_gpus -= held  # (_launch records the utilisation once, at the final count)
        self._end_attempt(job, "resized")
        self.restarts += 1
        rec.restarts += 1
        self.restart_count[job] += 1
        extra = self._row_save_l[self._row_key_l[job]][run.plan]  # restart_overhead + writing the checkpoint
        self._launch(job, plan, placed, done, extra, int(self._slot_of[job]))
        return True

    def _kept(self, job: int, run: _Running) -> float:
        """Iterations a stop of running ``job`` (attempt ``run``) keeps now: all its progress, or under
        ``stop_mode="kill"`` that of the attempt's last periodic checkpoint (``SimConfig.checkpoint_interval``),
        the lost run counted in the attempt's ``rolled_back_s`` and ``rolled_back_gpu_seconds``."""
        ran = max(0.0, self.now - run.progress_from)  # seconds of run of this attempt
        if self._kill and run.rate > 0.0:
            saved = math.floor(ran / self._ckpt + 1e-9) * self._ckpt  # run seconds at the last checkpoint
            lost = max(0.0, ran - saved)
            if lost > 0.0:
                self._attempt_of[job].rolled_back_s = lost
                self.rolled_back_gpu_seconds += self._plan_count_l[run.plan] * lost
            ran = min(ran, saved)
        return min(float(self.work[job]), run.done_base + ran * run.rate)

    def preempt(self, job: int) -> bool:
        """Checkpoint running ``job`` and put it back in the queue (keeps its progress). False if illegal (also
        for a job already saving under ``stop_mode="save_first"``).

        Under ``stop_mode="v5"`` (env v5's) its GPUs are free at once; what a resize pays for stopping the
        job (``restart_overhead`` + writing the checkpoint on its current plan) is added to the start-up of its
        next start (:meth:`startup_seconds` + ``resume_extra[job]``), so a preemption and the later restart
        together cost the job what a resize does. (The checkpoint write is charged to the job's time, not to the
        GPUs it frees: they are free for others at once.) Under ``"save_first"`` the job keeps its GPUs, making
        no progress, for those seconds (``saving_until[job]``; it stays RUNNING, neither resizable nor
        preemptible), then frees them and returns to the queue, and its next start pays only its start-up; a
        save of 0 s returns it at once. Under ``"kill"`` its GPUs are free at once and it keeps the progress of
        its last periodic checkpoint; its next start pays only its start-up. With ``resize_cooldown`` or
        ``one_action_per_instant``
        set, illegal where a resize would be for those rules (:meth:`resize_ready`; the start-up itself is the
        environment's rule, its mask's). With ``one_action_per_instant`` the job may not start again before the
        clock moves, so a preemption (as an out-of-memory failure at the instant of the job's start) sets a
        wake-up :data:`MIN_WAKEUP_INTERVAL` later (outside the per-instant cap of :meth:`request_wakeup`): the
        first instant a wake-up may take, at which the job may start again and the environment consults its
        policy (else the clock would move on only at the next finish, OOM or arrival, however far, or, with
        nothing else pending, not at all)."""
        run = self.running.get(job)
        if run is None or (self._paced and not self._rested(job)) or self.saving_until[job] >= self.now:
            return False
        self.last_action[job] = self.now
        save = self._row_save_l[self._row_key_l[job]][run.plan]  # restart_overhead + the write (0 under kill)
        self.restarts += 1
        self.records[job].restarts += 1
        self.restart_count[job] += 1
        if self._save_first and save > 0.0:
            self._begin_save(job, run, save)
            return True
        if self._save_first:
            save = 0.0
        done = self._kept(job, run)  # (before _stop closes the attempt)
        self.resume_extra[job] = save
        self._stop(job, "preempted")
        self.done_iters[job] = done
        self._requeue(job)
        return True

    def _begin_save(self, job: int, run: _Running, save: float) -> None:
        """``stop_mode="save_first"``: preempted ``job`` keeps its GPUs, without progress, for ``save`` seconds
        (a new version of its attempt whose start-up ends then, so no resize or preemption is legal meanwhile);
        a release event then frees them (:meth:`_release`)."""
        now = self.now
        done = min(float(self.work[job]), run.done_base + max(0.0, now - run.progress_from) * run.rate)
        self._seq += 1
        run.version = self._seq  # its finish or OOM event is stale from now
        run.done_base, run.progress_from, run.rate = done, now + save, 0.0
        floats = self.run_floats
        floats[job, 0], floats[job, 1], floats[job, 2] = done, now + save, 0.0
        self._slot_pf[self._slot_of[job]] = now + save  # (the masks read it: not ready before the save ends)
        self.run_version[job] = run.version
        self.running_version += 1
        self.saving_until[job] = now + save
        self._attempt_of[job].saving_from = now
        self._push(now + save, _RELEASE, job, run.version)

    def _release(self, job: int) -> None:
        """The save of a preempted job ends: free its GPUs and put it back in the queue with its progress."""
        self.saving_until[job] = math.nan
        self.done_iters[job] = self._stop(job, "preempted")  # (rate 0: the progress at the preemption)
        self._requeue(job)

    def advance(self) -> float:
        """Move to the next event time and process every event due then; returns the time elapsed."""
        t = self.next_event_time()
        if t == math.inf:
            return 0.0
        return self._move_to(t)

    def advance_to(self, t: float) -> float:
        """Move to time ``t``, no later than the next event (``ValueError`` otherwise, or for a ``t`` before
        now), and process every event due then; returns the time elapsed. A timed wait of the environment."""
        if not (self.now <= t <= self.next_event_time()):
            raise ValueError(
                f"advance_to({t!r}): must lie between now ({self.now}) and the next event ({self.next_event_time()})"
            )
        return self._move_to(float(t))

    def _move_to(self, t: float) -> float:
        dt = t - self.now
        self.now = t
        self.woke = False
        events = self._events
        while events and events[0][0] <= t:
            te, kind, _, job, version = heapq.heappop(events)
            if kind == _WAKE:
                self._wake_times.discard(te)
                self.woke = True
                continue
            run = self.running.get(job)
            if run is None or run.version != version:
                continue  # stale: the job was resized or preempted since
            if kind == _FINISH:
                self._finish(job)
            elif kind == _OOM:
                self._oom(job)
            else:
                self._release(job)
        self._arrive_due()
        return dt

    # ------------------------------------------------------------------ internals
    def _place(self, job: int, plan: int, free: np.ndarray) -> np.ndarray | None:
        """(N,) GPUs per node for ``job`` on ``plan`` given ``free``, or None (the configured placer)."""
        placed = self._placement(job, plan, np.asarray(free).tolist())
        if placed is None:
            return None
        counts = np.zeros(len(free), dtype=np.int64)
        counts[placed[0]] = placed[1]
        return counts

    def _placement(self, job: int, plan: int, free: list[int]) -> tuple[list[int], list[int]] | None:
        """(nodes (ascending), GPUs on each) of the configured placer given ``free`` (a list of N counts),
        or None."""
        t = self._plan_type_l[plan]
        num = self._plan_count_l[plan]
        if self._best_fit:
            # placement.place(strategy="best_fit") on the type's nodes, without its O(cluster) set-up
            nodes = self._type_nodes_l[t]
            sel = self._type_sel[t]
            f = free[sel] if isinstance(sel, slice) else [free[n] for n in nodes]
            size = self._type_node_size_l[t]
            if num <= size or not size:  # (no node holds more GPUs than its size)
                tightest = min(filter(num.__le__, f), default=-1)  # fewest free GPUs that still hold the job
                if tightest >= 0:  # one node holds the job: the tightest, lowest index on ties
                    return [nodes[f.index(tightest)]], [num]
            usable = self.state.units_l[self._row_tpi_l[self._row_key_l[job]][plan]]  # free -> whole tp groups
            if size and num % size == 0 and usable[size] == size:
                # whole nodes of one size, each whole tp groups: what follows picks the first empty ones
                empty, i = [], -1
                with contextlib.suppress(ValueError):  # (fewer empty nodes than needed: the general case)
                    for _ in range(num // size):
                        i = f.index(size, i + 1)
                        empty.append(i)
                    return [nodes[i] for i in empty], [size] * len(empty)
            units = [usable[v] for v in f]  # (K,) GPUs usable on each of the type's nodes
            if sum(units) < num:
                return None
            # fewest nodes: largest first (ties to the lowest index), the last chunk on the tightest node
            order = sorted(range(len(units)), key=units.__getitem__, reverse=True)  # stable
            taken: dict[int, int] = {}  # position among the type's nodes -> GPUs taken there
            placed = k = 0
            while placed + units[order[k]] < num:  # whole nodes while the job needs more than the next
                taken[order[k]] = units[order[k]]
                placed += units[order[k]]
                k += 1
            remainder = num - placed
            taken[min((f[i], i) for i in order[k:] if units[i] >= remainder)[1]] = remainder
            held = sorted(taken)
            return [nodes[i] for i in held], [taken[i] for i in held]
        counts = place(
            np.array(free, dtype=np.int64), self.cluster.node_type_index, t, num, int(self.layout_tp[job, plan]),
            strategy=self.config.placement,
        )
        if counts is None:
            return None
        nodes = np.flatnonzero(counts)
        return nodes.tolist(), counts[nodes].tolist()

    def spread_iter_time(self, job: int, plan: int, nodes_spanned: int) -> float:
        """Seconds per iteration of ``job`` on ``plan``'s layout (tensor, pipeline, micro-batch) when its GPUs
        span ``nodes_spanned`` nodes (``iter_time[job, plan]`` is the consolidated placement's); cached per job
        configuration. Policies read it as ``env.view.spread_iter_time``."""
        row = self._row_key_l[job]
        key = (row, plan, nodes_spanned)
        it = self._spread_iter_time.get(key)
        if it is None:
            j = self.jobs[job]
            tp, pp = self._row_tp_l[row][plan], self._row_pp_l[row][plan]  # = layout_tp / layout_pp[job, plan]
            it = self._spread_iter_time[key] = iteration_time(
                j.model, batch_size=int(j.batch_size), seq_len=int(j.seq_len),
                gpu=self.gpu_types[self._plan_type_l[plan]], dp=self._plan_count_l[plan] // (tp * pp), tp=tp,
                nodes_spanned=nodes_spanned, utilisation=self.config.utilisation, pp=pp,
                micro_batch=self._row_mb_l[row][plan], efficiency=self.config.efficiency,
            )
        return it

    def _launch(
        self, job: int, plan: int, placed: tuple, done_base: float, extra_delay: float, slot: int = -1
    ) -> None:
        """Start an attempt of ``job`` on ``plan`` at ``placed`` (nodes, GPUs on each); ``slot`` >= 0: a
        restart, the job already holds these GPUs and keeps its slot."""
        cfg = self.config
        held, want = placed
        rec = self.records[job]
        now = self.now
        self.last_action[job] = now
        if slot < 0:  # (a restart keeps the job's status, slot and first start time)
            self.state._take(job, held, want)
            self.status[job] = RUNNING
            if math.isnan(rec.start_time):
                rec.start_time = now
                self.run_floats[job, 3] = now
            slot = self._free_slots.pop()
            self._slot_of[job] = slot
            self.running_order_version += 1
            if slot == len(self._slot_pf):  # more jobs run at once than ever
                self._grow_slots(slot)
        row = self._row_key_l[job]
        tp = self._row_tp_l[row][plan]  # = layout_tp[job, plan]
        num = self._plan_count_l[plan]
        t = self._plan_type_l[plan]
        spanned = len(held)
        self._slot_row(slot, job, plan, held, want)
        if spanned == self._plan_span_l[plan]:
            it = self._row_it_l[row][plan]  # = iter_time[job, plan] (consolidated)
        else:
            it = self._spread_iter_time.get((row, plan, spanned))
            if it is None:
                it = self.spread_iter_time(job, plan, spanned)
        will_oom = not self._row_true_l[row][plan]  # = not true_ok[job, plan]
        delay = self._row_start_l[row][plan] + extra_delay  # (startup_seconds / restart_seconds: the same sum)
        progress_from = now + delay
        self._seq += 1
        version = self._seq  # unique per attempt: events of earlier attempts are recognised as stale
        rate = 0.0 if will_oom else 1.0 / it  # an attempt that does not fit in memory makes no progress
        run = _Running(plan, tp, held, want, self._num_nodes, now, progress_from, done_base, rate, will_oom, version)
        self.running[job] = run
        self.running_version += 1
        self.run_plan[job] = plan
        self.run_version[job] = version
        floats = self.run_floats
        floats[job, 0] = done_base
        floats[job, 1] = progress_from
        self._slot_pf[slot] = progress_from
        floats[job, 2] = rate
        rec.gpu_type = self.gpu_types[t]
        rec.num_gpus, rec.dp, rec.tp = num, num // tp, tp
        self._attempt_of[job] = attempt = AttemptRecord(
            rec.job_id, rec.gpu_type, num, num // tp, tp, tuple(map(int, self.state._held[job])), now, progress_from
        )
        self.attempts.append(attempt)
        self._set_busy(self.busy_gpus + num)
        if will_oom:
            if cfg.oom_delay is None:  # the OOM cost model of SimConfig: start-up, the first step, teardown
                delay = delay + float(it) + cfg.teardown_time
            else:
                delay = cfg.oom_delay
            self._push(now + delay, _OOM, job, version)
        else:
            remaining = max(0.0, float(self.work[job]) - done_base)
            self._push(progress_from + remaining * it, _FINISH, job, version)

    def _stop(self, job: int, outcome: str) -> float:
        """Release the job's GPUs, account GPU-seconds and end the attempt with ``outcome``; returns iterations
        done."""
        run = self.running.pop(job)
        self._end_attempt(job, outcome)
        self.running_version += 1
        self.running_order_version += 1
        self.run_plan[job] = -1
        self.run_version[job] = -1
        self._free_slots.append(int(self._slot_of[job]))
        self._slot_of[job] = -1
        done = min(float(self.work[job]), run.done_base + max(0.0, self.now - run.progress_from) * run.rate)
        self.state._give(job)
        held = self._plan_count_l[run.plan]  # = run.counts.sum()
        self.records[job].gpu_seconds += held * (self.now - run.held_since)
        self._set_busy(self.busy_gpus - held)
        return done

    def _end_attempt(self, job: int, outcome: str) -> None:
        attempt = self._attempt_of.pop(job)
        attempt.end_time, attempt.outcome = self.now, outcome

    def _finish(self, job: int) -> None:
        self._stop(job, "finished")
        self.done_iters[job] = self.work[job]
        self.status[job] = DONE
        self.records[job].finish_time = self.now
        self.finished += 1

    def _oom(self, job: int) -> None:
        run = self.running[job]
        self.lost_gpu_seconds += self._plan_count_l[run.plan] * (self.now - run.held_since)
        self._stop(job, "oom")
        self.oom_known[job, run.plan] = True
        self.avail[job, run.plan] = False
        self._avail_version += 1
        self._oom_jobs.add(job)
        self.avail_iter_time[job, run.plan] = 0.0
        self.oom_failures += 1
        self.records[job].oom_failures += 1
        if not self.avail[job].any():
            self.status[job] = REJECTED
            self.rejected += 1
            self.records[job].rejected_reason = (
                "out of memory on every plan the predictor allowed "
                f"({self.records[job].oom_failures} failures); the {self.config.predictor!r} predictor "
                "underestimates this job"
            )
            return
        self._requeue(job)

    def _requeue(self, job: int) -> None:
        self.status[job] = QUEUED
        bisect.insort(self.queue, job)
        self.queue_version += 1
        self.requeued.append(job)
        if self._one_action and self.last_action[job] >= self.now:  # (preempted, or out of memory at its start)
            # it may not start before the clock moves: a wake-up at the first instant one may take (outside the
            # per-instant cap), so the policy is consulted then and time can always move on
            t = self.now + MIN_WAKEUP_INTERVAL
            if t not in self._wake_times:
                self._wake_times.add(t)
                self._push(t, _WAKE, -1, -1)

    def _arrive_due(self) -> None:
        n = self.num_jobs
        submit, now, fits = self.submit, self.now, self._fits_somewhere
        while self._next_arrival < n and submit[self._next_arrival] <= now:
            job = self._next_arrival
            self._next_arrival += 1
            if not fits[job]:
                self.status[job] = REJECTED
                self.rejected += 1
                self.records[job].rejected_reason = self._row_reason[self._row_key[job]]
            else:
                self.status[job] = QUEUED
                self.queue.append(job)  # arrivals come in index order: the list stays sorted
                self.queue_version += 1

    def _push(self, t: float, kind: int, job: int, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, kind, self._seq, job, version))

    def _set_busy(self, busy: int) -> None:
        self.busy_gpus = busy
        if self.util_times[-1] == self.now:
            self.util_busy[-1] = busy
        else:
            self.util_times.append(self.now)
            self.util_busy.append(busy)

    # ------------------------------------------------------------------ checks and results
    def check_invariants(self) -> None:
        """Assert every invariant of the state (tests and the fuzzer call this after each step)."""
        self.state.check()
        st = self.status
        assert len(self.queue) == int((st == QUEUED).sum()), "queue and status disagree"
        assert self.queue == sorted(self.queue), "queue not in arrival order"
        assert len(self.running) == int((st == RUNNING).sum()), "running set and status disagree"
        assert self.finished == int((st == DONE).sum()) and self.rejected == int((st == REJECTED).sum())
        assert self.busy_gpus == self.cluster.num_gpus - self.state.num_free, "busy GPU count drifted"
        for job, run in self.running.items():
            assert (self.state.allocation(job) == run.counts).all(), f"job {job} allocation drifted"
        assert (self.done_iters <= self.work + 1e-9).all(), "work done exceeds work asked"
        assert self._attempt_of.keys() == self.running.keys(), "open attempts and running jobs disagree"
        saving = np.flatnonzero(~np.isnan(self.saving_until))
        for job in saving.tolist():  # stop_mode "save_first": a saving job holds its GPUs without progress
            run = self.running.get(job)
            assert run is not None and run.rate == 0.0 and run.progress_from == self.saving_until[job], (
                f"job {job} saving without holding its GPUs or while progressing"
            )

    def metrics(self) -> dict[str, float]:
        """Episode metrics computed from the per-job records; each name ends in its unit (``_h`` hours,
        ``_frac`` a fraction in [0, 1]; ``gpu_hours`` GPU-hours, all attempts; ``lost_gpu_hours`` GPU-hours of the
        attempts that failed with out-of-memory, included in ``gpu_hours``; ``overhead_gpu_hours`` GPU-hours of the
        other attempts before their first iteration (start-up, checkpoint write and load) and, under
        ``stop_mode="save_first"``, while a preempted job saves, also included; under ``stop_mode="kill"``,
        ``rolled_back_gpu_hours``: GPU-hours of run lost to stops without a save, included in ``gpu_hours``; the
        others are counts)."""
        fin = [r for r in self.records if not math.isnan(r.finish_time)]
        jct = np.array([r.finish_time - r.submit_time for r in fin]) if fin else np.zeros(0)
        first = float(self.submit[0])
        last = max((r.finish_time for r in fin), default=first)
        makespan = last - first
        gpu_seconds = sum(r.gpu_seconds for r in self.records)
        gpu_seconds += sum(int(r.counts.sum()) * (self.now - r.held_since) for r in self.running.values())
        util = gpu_seconds / (self.cluster.num_gpus * makespan) if makespan > 0 else 0.0
        overhead = 0.0  # GPU-seconds before the first iteration of the attempts that did not fail
        for a in self.attempts:
            if a.outcome != "oom":
                end = self.now if a.outcome == "running" else a.end_time
                overhead += a.num_gpus * max(0.0, min(end, a.progress_from) - a.start_time)
                if a.saving_from == a.saving_from:  # (not nan) a save_first preemption's save, after any start-up
                    overhead += a.num_gpus * max(0.0, end - max(a.saving_from, a.progress_from))
        out = {
            "jobs": float(self.num_jobs),
            "finished": float(self.finished),
            "rejected": float(self.rejected),
            "avg_jct_h": float(jct.mean()) / 3600.0 if jct.size else math.nan,
            "p95_jct_h": float(np.percentile(jct, 95)) / 3600.0 if jct.size else math.nan,
            "makespan_h": float(makespan) / 3600.0,
            "gpu_hours": gpu_seconds / 3600.0,
            "utilisation_frac": float(util),
            "ooms": float(self.oom_failures),
            "lost_gpu_hours": self.lost_gpu_seconds / 3600.0,
            "overhead_gpu_hours": overhead / 3600.0,
            "restarts": float(self.restarts),
        }
        if self._kill:
            out["rolled_back_gpu_hours"] = self.rolled_back_gpu_seconds / 3600.0
        return out

    def utilisation_timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, busy GPUs) change points."""
        return np.frombuffer(self.util_times, dtype=np.float64), np.frombuffer(self.util_busy, dtype=np.float64)
