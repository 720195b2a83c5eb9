"""The observation's encoder: :class:`ObservationEncoder` fills the observation's buffers from a simulator.

It lays the observation out as the contract (:mod:`frenzy_env.observation.contract`) names it: the float32
entries one after the other in one buffer, the int8 action mask in another, and ``observe()`` returns fresh
copies of both. Everything is incremental, keyed on the simulator's versions: the job indices shown in the
queue and running windows, a static per-job table of the queue rows (only the wait column moves with time),
the running rows (what is fixed per attempt gathered once, the time-dependent columns recomputed when time
moves, rows of unchanged attempts kept when the set changes at one instant), the free fractions and the
whole-system totals. The compiled kernels (:mod:`frenzy_env.kernels`) replace the numpy code where numba is
available, with the same numbers. ``tests/test_env_fast.py`` compares every cache against a from-scratch
encoding after every step, ``tests/observation/test_golden_obs.py`` the values against hand-computed ones.

The environment (:class:`~frenzy_env.env.FrenzyEnv`) owns one encoder, binds it to each new simulator
(:meth:`ObservationEncoder.bind`), writes the action mask through :attr:`ObservationEncoder.mask` and reads
the windows (:attr:`ObservationEncoder.visible_queue`, :attr:`ObservationEncoder.visible_running`) to map
actions to jobs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from frenzy_env import kernels
from frenzy_env.observation.contract import (
    BATCH_LOG2_SCALE,
    CAPACITY_LOG2_SCALE,
    COUNT_LOG_SCALE,
    GPU_FEATURES,
    GPUS_LOG2_SCALE,
    GT,
    LOG_TIME_SCALE,
    MAX_SECONDS,
    MEMORY_GIB_SCALE,
    PARAMS_LOG10_SCALE,
    PL,
    PLAN_FEATURES,
    QUEUE_FEATURES,
    RESTARTS_SCALE,
    RU,
    RUNNING_FEATURES,
    SEQ_LOG2_SCALE,
    SPEED_LOG2_SCALE,
    UNIVERSAL_RUNNING_FEATURES,
    UNIVERSAL_TYPES,
    Q,
    R,
)
from frenzy_env.simulator import ClusterSimulator
from frenzy_env.world.cluster import ClusterSpec, get_gpu_type

try:  # the clip ufunc itself: ndarray.clip adds a Python wrapper around it (same results)
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover  (numpy < 2, or a numpy that moved it)
    try:
        from numpy.core.umath import clip as _clip
    except ImportError:
        _clip = np.clip


class ObservationEncoder:
    """The observation of a simulator's state, in reusable buffers with incremental caches.

    ``sizes``: the flat length of each observation entry, in the observation's key order (``"action_mask"``
    included: the int8 mask's buffer, which the environment writes through :attr:`mask`); ``sim``: the first
    simulator (it fixes the plan slots); ``cluster``; ``queue_slots`` and ``running_slots``: the windows.

    Attributes the environment uses: :attr:`mask` ((A,) bool view of :attr:`mask8`, the observation's
    ``action_mask``), :attr:`visible_queue` and :attr:`visible_running` (the job indices in the queue and
    running slots, refreshed by :meth:`update_visible`), :meth:`bind` and :meth:`observe`.
    """

    # views of _fbuf, mask8 and _rbuf: copies and pickles would make them separate arrays
    _VIEWS = ("_obs", "mask", "_gpus_free", "_rrows", "_row_scratch", "_gpu_rows", "_plan_rows")

    def __init__(
        self,
        sizes: Mapping[str, int],
        sim: ClusterSimulator,
        cluster: ClusterSpec,
        queue_slots: int,
        running_slots: int,
    ) -> None:
        self.sim = sim
        self.cluster = cluster
        self.queue_slots = q = queue_slots
        self.running_slots = r = running_slots
        self.num_plans = p = sim.num_plans
        t = sim.num_types
        # SimConfig.interface: the cluster layout, or the universal one (observation.contract)
        self.universal = sim.config.interface == "universal"
        self._rf = UNIVERSAL_RUNNING_FEATURES if self.universal else RUNNING_FEATURES  # the running row's features
        self._rc = RU if self.universal else R  # and their columns
        self.queue_shape = (q, len(QUEUE_FEATURES) + p)  # the flat "queue" entry reshapes to this
        self.running_shape = (r, len(self._rf) + p)
        self.gpus_shape = (UNIVERSAL_TYPES, len(GPU_FEATURES)) if self.universal else (2 * t,)
        self.plans_shape = (p, len(PLAN_FEATURES)) if self.universal else None  # the "plans" entry (universal)
        # the observation's buffers: the float32 entries one after the other in ``_fbuf``, the mask in
        # ``mask8``; observe() returns copies (one of each buffer, the float entries as parts of the copy)
        float_keys = [k for k in sizes if k != "action_mask"]
        ends = np.cumsum([sizes[k] for k in float_keys]).tolist()
        self._float_parts = [(k, slice(e - sizes[k], e)) for k, e in zip(float_keys, ends)]
        parts = dict(self._float_parts)
        self._out_parts = [(k, parts.get(k)) for k in sizes]  # (key, part of _fbuf or None: the mask)
        self._fbuf = np.zeros(ends[-1], dtype=np.float32)
        self.mask8 = np.zeros(sizes["action_mask"], dtype=np.int8)
        self._rbuf = np.zeros((r, 1 + p))  # (R, 1 + P) float64 scratch of the running rows
        self._row_extra = np.zeros(p)  # (P,) scratch: one running row's restart costs (_running_row)
        self._bind_views()
        self.visible_queue = np.zeros(0, dtype=np.int64)
        self.visible_running = np.zeros(0, dtype=np.int64)
        # per-type and per-plan constants of the observation
        cap_t = cluster.type_capacity
        self._gpu_share = cap_t / cap_t.sum()  # (T,)
        if self.universal:  # (P, 3): the num_gpus, gpu_speed and gpu_memory features of a running job's plan
            self._universal_constants(sim, cluster)
        else:  # (P, 2): the num_gpus and gpu_type features of a running job's plan
            self._plan_feats = np.stack(
                [np.log2(sim.plan_count + 1) / GPUS_LOG2_SCALE, sim.plan_type / max(1, sim.num_types - 1)],
                axis=1,
            )
            self._obs["gpus"][t:] = self._gpu_share  # the free fraction of each type, then these
        self._plan_feats_l = self._plan_feats.tolist()
        self._arange = np.arange(max(q, r))
        # float32 free / capacity of each type and node for every free count: tables and each one's offset
        self._type_frac, self._type_base = _fraction_table(cap_t)
        self._node_frac, self._node_base = _fraction_table(cluster.node_capacity)
        self._invalidate()

    def _universal_constants(self, sim: ClusterSimulator, cluster: ClusterSpec) -> None:
        """The universal layout's constants: the running rows' plan features, the static columns of the
        ``gpus`` and ``plans`` blocks (written once into the buffer), and what their dynamic columns read."""
        t = sim.num_types
        gpus = [get_gpu_type(name) for name in sim.gpu_types]
        speed = np.array([math.log2(1.0 + g.peak_tflops) / SPEED_LOG2_SCALE for g in gpus])  # (T,)
        memory = np.array([g.memory_bytes / 2**30 / MEMORY_GIB_SCALE for g in gpus])  # (T,)
        # the slots shown present: on the cluster's grid, and no more GPUs than the type has
        present = sim.plan_present & (sim.plan_count <= cluster.type_capacity[sim.plan_type])
        feats = np.zeros((self.num_plans, 3))  # absent slots: 0 (no job ever holds one)
        feats[present, 0] = np.log2(sim.plan_count[present] + 1) / GPUS_LOG2_SCALE
        feats[present, 1] = speed[sim.plan_type[present]]
        feats[present, 2] = memory[sim.plan_type[present]]
        self._plan_feats = feats
        plans = self._plan_rows
        plans[:] = 0.0
        plans[:, PL.present] = present
        plans[:, PL.num_gpus : PL.gpu_memory + 1] = feats
        self._type_cap = cluster.type_capacity.astype(np.int64)  # (T,) GPUs of each type
        self._type_nodes = np.bincount(cluster.node_type_index, minlength=t).astype(np.int64)  # (T,) nodes
        self._type_node_size = sim.max_node_gpus.astype(np.int64)  # (T,) GPUs of the largest node
        rows = self._gpu_rows
        rows[:] = 0.0
        rows[:t, GT.present] = 1.0
        rows[:t, GT.capacity] = np.log2(1.0 + self._type_cap) / CAPACITY_LOG2_SCALE
        rows[:t, GT.gpu_speed] = speed
        rows[:t, GT.gpu_memory] = memory
        rows[:t, GT.gpus_per_node] = np.log2(1.0 + self._type_node_size) / GPUS_LOG2_SCALE
        rows[:t, GT.nodes] = np.log1p(self._type_nodes) / COUNT_LOG_SCALE
        _clip(rows, 0.0, 2.0, out=rows)
        # the dynamic columns' inputs: node order by type (the numpy code's segments), per-type scratch
        self._node_type = cluster.node_type_index.astype(np.int64)
        self._node_cap = cluster.node_capacity.astype(np.int64)
        self._node_order = np.argsort(self._node_type, kind="stable")
        self._type_starts = np.searchsorted(self._node_type[self._node_order], np.arange(t))
        self._type_full = np.zeros(t, dtype=np.int64)
        self._type_largest = np.zeros(t, dtype=np.int64)
        self._plan_type = sim.plan_type.astype(np.int64)
        self._plan_count = sim.plan_count.astype(np.int64)
        self._plan_present = np.asarray(present, dtype=np.bool_)
        self._cost_globals = [  # the world's cost knobs (UNIVERSAL_GLOBAL_FEATURES' last two)
            min(math.log1p(sim.config.startup_time) / LOG_TIME_SCALE, 2.0),
            min(math.log1p(sim.config.restart_overhead) / LOG_TIME_SCALE, 2.0),
        ]

    def _fill_types(self) -> None:
        """The universal layout's dynamic columns: each type's free fraction, wholly free nodes and largest free
        block, and each plan slot's ``fits_free`` (compiled, or the same numbers by numpy)."""
        state = self.sim.state
        kernel = kernels.get("type_state")
        if kernel is not None:
            kernel(state.free, self._node_type, self._node_cap, self._type_cap, self._type_nodes,
                   self._type_node_size, state.free_t, self._type_full, self._type_largest, self._plan_type,
                   self._plan_count, self._plan_present, self._gpu_rows, self._plan_rows)
            return
        free = state.free
        t = len(self._type_cap)
        full = np.bincount(self._node_type, weights=free == self._node_cap, minlength=t)  # (T,) wholly free nodes
        largest = np.maximum.reduceat(free[self._node_order], self._type_starts)  # (T,) most free on one node
        rows = self._gpu_rows
        rows[:t, GT.free] = state.free_t / self._type_cap
        rows[:t, GT.free_nodes] = full / self._type_nodes
        rows[:t, GT.largest_free] = largest / self._type_node_size
        fits = state.free_t[self._plan_type] >= self._plan_count
        fits &= self._plan_present
        self._plan_rows[:, PL.fits_free] = fits

    def _bind_views(self) -> None:
        """(Re)create the views of the observation buffers ``_fbuf`` and ``mask8`` (and of the scratch
        ``_rbuf``) that the fill methods write through."""
        flat = {k: self._fbuf[part] for k, part in self._float_parts}  # flat entries
        flat["action_mask"] = self.mask8
        self._obs = dict(flat)  # the same buffers, queue and running as 2-D views
        self._obs["queue"] = flat["queue"].reshape(self.queue_shape)
        self._obs["running"] = flat["running"].reshape(self.running_shape)
        self.mask = flat["action_mask"].view(bool)  # (A,) the legal actions, in the observation's buffer
        self._gpus_free = flat["gpus"][: self.sim.num_types]  # (T,) free fraction of each GPU type (cluster layout)
        self._gpu_rows = flat["gpus"].reshape(self.gpus_shape)  # (T_MAX, F) rows of the type slots (universal)
        self._plan_rows = flat["plans"].reshape(self.plans_shape) if "plans" in flat else None  # (P, F) (universal)
        self._rrows = list(self._obs["running"])  # (R,) views of the rows of the running block
        self._row_scratch = (self._rbuf[-1], self._rbuf[-1, 1:])  # a (1 + P,) scratch row and its (P,) tail

    def __getstate__(self) -> dict:
        # copies and pickles would turn the views into separate arrays: leave them out, rebuild them
        return {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind_views()

    def bind(self, sim: ClusterSimulator) -> None:
        """Encode ``sim`` from now on (a new or reset simulator with the same plan slots): forget every cache."""
        self.sim = sim
        self._invalidate()

    def _invalidate(self) -> None:
        """Forget every view cached on the simulator's state."""
        self._queue_key: Any = None  # (sim, queue_version) the visible queue was read at
        self._running_key: Any = None
        self._all_running: np.ndarray | None = None  # every running job (when more than the window shows)
        self._qtable: np.ndarray | None = None  # (J, F + P) float32 static queue rows, built lazily
        self._qtable_requeued = 0  # how many of sim.requeued the table has absorbed
        self._qtable_key: Any = None  # changes whenever the table's rows do (the whole-queue totals follow)
        self._qtotals_key: Any = None
        self._qtotals = (0.0, 0.0)
        self._rwork_key: Any = None
        self._rwork = 0.0
        self._qblock_key: Any = None  # queue block filled for (table, queue_version)
        self._qtime: float | None = None  # time the wait column was computed at
        self._qsubmit = np.zeros(0)  # submit times of the jobs in the queue block
        self._rsim: ClusterSimulator | None = None  # the simulator the running block was filled from
        self._rattempts: list[int] = []  # the attempts (sim.run_version) of the jobs in the running block
        self._rversion = -1  # sim.running_version when they were read
        self._rstatic: tuple | None = None  # what is fixed for those attempts (None: not gathered yet)
        self._rtime: float | None = None  # time the running block was filled at
        self._free_key: Any = None  # gpus / nodes filled for this state version
        self._nq_shown = self.queue_slots  # rows of the blocks that may hold stale values
        self._nr_shown = self.running_slots

    def update_visible(self) -> None:
        """The job indices in the queue and running slots (rebuilt when the simulator's sets change)."""
        sim = self.sim
        q = self.queue_slots
        if self._queue_key != (sim, sim.queue_version):
            self.visible_queue = np.fromiter(
                itertools.islice(sim.queue, q), dtype=np.int64, count=min(q, len(sim.queue))
            )
            self._queue_key = (sim, sim.queue_version)
        if self._running_key != (sim, sim.running_order_version):  # (a resize keeps the order)
            self.visible_running = np.fromiter(  # count: numpy allocates once
                itertools.islice(sim.running, self.running_slots), dtype=np.int64,
                count=min(self.running_slots, len(sim.running)),
            )
            self._running_key = (sim, sim.running_order_version)
            self._all_running = None  # every running job, built when asked for

    def _queue_rows(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), F + P) float32 rows of queued ``jobs`` without the wait column (it depends on time).

        Everything else in a queued job's row is fixed while it waits: its remaining work, its available
        plans and its static features change only when it runs, which puts it back through the queue.
        """
        sim = self.sim
        rem = np.maximum(0.0, sim.work_estimate[jobs] - sim.done_iters[jobs])  # (n,)
        rows = np.zeros((len(jobs), len(QUEUE_FEATURES) + self.num_plans), dtype=np.float32)
        avail = sim.available_plans(jobs)
        with np.errstate(invalid="ignore"):
            times = rem[:, None] * sim.iter_time[jobs]  # (n, P) seconds
        best = np.where(avail, times, np.inf).min(axis=1)
        # for the whole-queue aggregates: predicted seconds on the best plan, fewest GPUs of an available plan
        self._qbest_s[jobs] = np.minimum(best, MAX_SECONDS)
        fewest = np.where(avail, sim.plan_count, 1 << 30).min(axis=1, initial=1 << 30)
        self._qmin_gpus[jobs] = np.where(fewest == 1 << 30, 0, fewest)
        plan_t = np.log1p(np.minimum(times, MAX_SECONDS)) / LOG_TIME_SCALE
        plan_t[~avail] = 0.0
        rows[:, Q.present] = 1.0
        rows[:, Q.best_time] = np.log1p(np.minimum(best, MAX_SECONDS)) / LOG_TIME_SCALE
        rows[:, Q.params : Q.requested_gpus + 1] = self._static_features[jobs]
        rows[:, len(QUEUE_FEATURES) :] = plan_t
        np.clip(rows, 0.0, 2.0, out=rows)
        return rows

    def _fill_queue(self) -> None:
        sim = self.sim
        table = self._qtable
        if table is None:
            table = np.empty((sim.num_jobs, len(QUEUE_FEATURES) + self.num_plans), dtype=np.float32)
            self._qbest_s = np.zeros(sim.num_jobs)  # (J,) written by _queue_rows with the table
            self._qmin_gpus = np.zeros(sim.num_jobs, dtype=np.int64)
            for lo in range(0, sim.num_jobs, 8192):  # in chunks: few large temporaries on huge workloads
                table[lo : lo + 8192] = self._queue_rows(np.arange(lo, min(lo + 8192, sim.num_jobs)))
            self._qtable = table
            self._qtable_requeued = len(sim.requeued)
            self._qblock_key = None
            self._qtable_key = (sim, 0)
        elif self._qtable_requeued != len(sim.requeued):
            again = np.unique(np.array(sim.requeued[self._qtable_requeued :], dtype=np.int64))
            table[again] = self._queue_rows(again)
            self._qtable_requeued = len(sim.requeued)
            self._qblock_key = None
            self._qtable_key = (sim, self._qtable_requeued)
        qv = self.visible_queue
        nq = len(qv)
        block = self._obs["queue"]
        if self._qblock_key != self._queue_key:
            if self._nq_shown > nq:
                block[nq : self._nq_shown] = 0.0
            if nq:
                block[:nq] = table[qv]
            self._nq_shown = nq
            self._qblock_key = self._queue_key
            self._qtime = None
            self._qsubmit = sim.submit[qv]  # (nq,) submit times of the visible queue
        if nq and self._qtime != sim.now:
            wait = block[:nq, Q.wait]
            wait[:] = np.log1p(np.maximum(0.0, sim.now - self._qsubmit)) / LOG_TIME_SCALE
            _clip(wait, 0.0, 2.0, out=wait)
            self._qtime = sim.now

    def _fill_running(self) -> None:
        """Rows of the visible running jobs.

        What is fixed while a job keeps its attempt (plan, restarts, speed) is gathered once per visible set
        (``_rstatic``); the time-dependent columns are recomputed when time moves. When the set changes at
        the same instant (a start or a resize), the rows of jobs that kept their attempt still hold and only
        new rows are computed. The simulator's attempt ids (``run_version``) are unique per attempt, so the
        list of them (``_rattempts``) identifies the jobs and attempts the block shows.
        """
        sim = self.sim
        now = sim.now
        rv = self.visible_running
        nr = len(rv)
        same_set = self._rsim is sim and self._rversion == sim.running_version  # no start or stop since
        attempts = self._rattempts if same_set else sim.run_version[rv].tolist()  # the visible jobs' attempts
        self._rversion = sim.running_version
        if self._rsim is sim:
            if same_set or attempts == self._rattempts:
                if self._rtime != now and nr:
                    self._rows_now(rv, now)
                return
            if self._rtime == now and nr and self._reuse_rows(rv, attempts):
                self._rstatic = None  # rows hold for now; the static part is gathered when time moves
                return
        block = self._obs["running"]
        if self._nr_shown > nr:
            block[nr : self._nr_shown] = 0.0
        self._nr_shown = nr
        self._rsim = sim
        self._rattempts = attempts
        self._rtime = now
        self._rstatic = None
        if nr:
            self._rows_now(rv, now)

    def _rows_now(self, rv: np.ndarray, now: float) -> None:
        """Every row of the running block at ``now`` (compiled, or :meth:`_running_static` once per visible
        set and :meth:`_running_times`)."""
        kernel = kernels.get("running_rows")
        if kernel is None:
            if self._rstatic is None:
                self._rstatic = self._running_static(rv)
            self._running_times(self._rstatic, now)
            return
        self._rtime = now
        self._kernel_rows(kernel, 0, rv, now)

    def _kernel_rows(self, kernel: Any, first: int, jobs: np.ndarray, now: float) -> None:
        """Rows ``first ..`` of the running block for ``jobs`` by the compiled ``running_rows`` kernel."""
        sim = self.sim
        kernel(self._obs["running"], first, jobs, sim.run_plan, sim.run_floats, sim.restart_count,
               sim.work_estimate, sim.avail_iter_time, sim.config_row, sim.config_start_s, sim.config_save_s,
               self._plan_feats, now, LOG_TIME_SCALE)

    def _running_static(self, rv: np.ndarray) -> tuple:
        """Write the fixed columns of the running rows; return what the time-dependent ones need."""
        sim = self.sim
        nr = len(rv)
        cur = sim.run_plan[rv]  # (R,)
        rows = self._obs["running"][:nr]
        rc = self._rc
        rows[:, rc.present] = 1.0
        rows[:, rc.num_gpus : rc.num_gpus + self._plan_feats.shape[1]] = self._plan_feats[cur]
        rows[:, rc.restarts] = np.minimum(sim.restart_count[rv] / RESTARTS_SCALE, 2.0)
        floats = sim.run_floats[rv].T.copy()  # (4, R) done_base, progress_from, rate, first start
        estimate = sim.work_estimate[rv]
        cur_cells = cur + 1 + self._arange[:nr] * (1 + self.num_plans)  # cells of the current plans in _rbuf
        iter_time = sim.avail_iter_time[rv]
        # the restart cost of moving to each plan (start-up there, restart overhead and checkpoint write here);
        # the current plan's column is the start-up still to pay, written at each time by _running_times
        k = sim.config_row[rv]
        extra = sim.config_start_s[k] + sim.config_save_s[k, cur][:, None]  # (R, P)
        cur_flat = cur + self._arange[:nr] * self.num_plans  # the current plans' cells in ``extra``
        return (cur_cells, *floats, estimate, np.maximum(estimate, 1e-9), iter_time, extra, cur_flat,
                iter_time > 0.0)

    def _running_times(self, static: tuple, now: float) -> None:
        """The time-dependent columns of the running rows (elapsed, time left, progress)."""
        self._rtime = now
        cur_cells, done_base, progress_from, rate, started, estimate, estimate_pos, iter_time, extra, cur_flat, \
            avail = static
        nr = len(cur_cells)
        progress = done_base + np.maximum(0.0, now - progress_from) * rate
        rem = np.maximum(0.0, estimate - progress)  # (R,) iterations left (estimate)
        extra.ravel()[cur_flat] = np.maximum(0.0, progress_from - now)  # start-up still to pay on the current plan
        # one log scale for [elapsed | predicted seconds left on each plan] (0 where a plan is not available)
        scaled = self._rbuf[:nr]  # (R, 1 + P) float64
        times = scaled[:, 1:]
        np.multiply(iter_time, rem[:, None], out=times)
        np.add(times, extra, out=times, where=avail)
        np.minimum(times, MAX_SECONDS, out=times)
        np.maximum(0.0, now - started, out=scaled[:, 0])
        np.log1p(scaled, out=scaled)
        scaled /= LOG_TIME_SCALE
        rows = self._obs["running"][:nr]
        rc = self._rc
        rows[:, rc.elapsed] = scaled[:, 0]
        rows[:, rc.remaining_time] = scaled.take(cur_cells)  # the current plan is always available
        rows[:, rc.progress] = 1.0 - rem / estimate_pos
        rows[:, len(self._rf) :] = times
        _clip(rows, 0.0, 2.0, out=rows)

    def _reuse_rows(self, rv: np.ndarray, attempts: list[int]) -> bool:
        """Same instant, new visible set: move the rows of unchanged attempts, compute at most two new rows.

        Returns False (nothing changed) when more rows are new; the caller then recomputes them all.
        """
        old = self._rattempts
        n_old, nr = len(old), len(attempts)
        block = self._obs["running"]
        k = 0  # the first row that changed
        m = min(n_old, nr)
        while k < m and old[k] == attempts[k]:
            k += 1
        if k < nr == n_old and attempts[k + 1 :] == old[k + 1 :]:  # a resize: one job's row, in its place
            fresh = (k,)
        elif k < n_old and attempts[k : n_old - 1] == old[k + 1 :]:
            # the usual change: row k left (stopped or restarted), rows after it move up, new rows at the end
            if len(attempts) - n_old + 1 > 2:
                return False
            if k < n_old - 1:
                block[k : n_old - 1] = block[k + 1 : n_old]
            fresh = range(n_old - 1, nr)
        elif k == n_old:  # rows appended
            if nr - n_old > 2:
                return False
            fresh = range(n_old, nr)
        else:
            where = {a: i for i, a in enumerate(old)}
            src = [where.get(a, -1) for a in attempts]
            fresh = [i for i, j in enumerate(src) if j < 0]
            if len(fresh) > 2:
                return False
            if n_old:
                block[:nr] = block[:n_old][src]  # rows of new jobs get a placeholder, overwritten below
        if self._nr_shown > nr:
            block[nr : self._nr_shown] = 0.0
        self._nr_shown = nr
        self._rattempts = attempts
        kernel = kernels.get("running_rows")
        if kernel is None:
            for i in fresh:
                self._running_row(i, int(rv[i]))
        else:
            for i in fresh:
                self._kernel_rows(kernel, i, rv[i : i + 1], self.sim.now)
        return True

    def _running_row(self, k: int, job: int) -> None:
        """Row ``k`` of the running block for ``job``: :meth:`_running_static` and :meth:`_running_times` for
        one job (the same operations element by element, so the same numbers)."""
        sim = self.sim
        now = sim.now
        run, record = sim.running[job], sim.records[job]  # (the values of run_plan, run_floats, restart_count)
        plan, started = run.plan, record.start_time
        estimate = float(sim.work_estimate[job])
        progress = run.done_base + max(0.0, now - run.progress_from) * run.rate
        rem = max(0.0, estimate - progress)
        scaled, times = self._row_scratch  # (1 + P,) and its (P,) tail; the block's rows are computed already
        iter_time = sim.avail_iter_time[job]
        c = sim.config_row[job]
        extra = self._row_extra  # (P,) restart costs (see _running_static), no allocation per row
        np.add(sim.config_start_s[c], sim.config_save_s[c, plan], out=extra)
        extra[plan] = max(0.0, run.progress_from - now)
        np.multiply(iter_time, rem, out=times)
        np.add(times, extra, out=times, where=iter_time > 0.0)
        np.minimum(times, MAX_SECONDS, out=times)
        scaled[0] = max(0.0, now - started)
        np.log1p(scaled, out=scaled)
        scaled /= LOG_TIME_SCALE
        row = self._rrows[k]
        feats = self._plan_feats_l[plan]
        # the clip to [0, 2] of the other path, where it can change something: every value is >= 0, the
        # times are at most log1p(1e12) / 16 < 2, the plan features and the progress at most 1
        row[: len(self._rf)] = [  # in RUNNING_FEATURES (UNIVERSAL_RUNNING_FEATURES) order
            1.0,
            min(float(scaled[0]), 2.0),
            scaled[plan + 1],
            *feats,  # the plan's GPU count and type features
            min(record.restarts / RESTARTS_SCALE, 2.0),
            1.0 - rem / max(estimate, 1e-9),
        ]
        row[len(self._rf) :] = times

    def observe(self) -> dict[str, np.ndarray]:
        """The observation now, as fresh arrays (the windows as :meth:`update_visible` last read them, the
        mask as last written through :attr:`mask`)."""
        sim = self.sim
        obs = self._obs
        self._fill_queue()
        self._fill_running()
        state = sim.state
        if self._free_key != (sim, state.version) and self.universal:
            self._fill_types()
            self._free_key = (sim, state.version)
        elif self._free_key != (sim, state.version):
            # free / capacity, looked up (the capacity shares after the free fractions never change)
            kernel = kernels.get("free_fractions")
            if kernel is None:
                self._type_frac.take(self._type_base + state.free_t, out=self._gpus_free, mode="clip")
                self._node_frac.take(self._node_base + state.free, out=obs["nodes"], mode="clip")
            else:
                kernel(self._type_frac, self._type_base, state.free_t, self._gpus_free, self._node_frac,
                       self._node_base, state.free, obs["nodes"])
            self._free_key = (sim, state.version)
        g = obs["globals"]
        nq, nrun = len(sim.queue), len(sim.running)
        nxt = float(sim.submit[sim._next_arrival]) - sim.now if sim._next_arrival < sim.num_jobs else 0.0
        to_event = sim.next_event_time() - sim.now
        queued_work, queued_gpus = self._queue_totals()
        values = [  # in GLOBAL_FEATURES order
            math.log1p(nq) / COUNT_LOG_SCALE,
            min(nrun / self.running_slots, 2.0),
            math.log1p(max(0, nq - self.queue_slots)) / COUNT_LOG_SCALE,
            sim._next_arrival / sim.num_jobs,
            math.log1p(max(0.0, nxt)) / LOG_TIME_SCALE,
            sim.busy_gpus / self.cluster.num_gpus,
            math.log1p(to_event) / LOG_TIME_SCALE if to_event < math.inf else 0.0,
            math.log1p(nrun) / COUNT_LOG_SCALE,
            math.log1p(max(0, nrun - self.running_slots)) / COUNT_LOG_SCALE,
            math.log1p(queued_work) / LOG_TIME_SCALE,
            math.log1p(self._running_work()) / LOG_TIME_SCALE,
            min(queued_gpus / self.cluster.num_gpus, 2.0),
        ]
        if self.universal:  # UNIVERSAL_GLOBAL_FEATURES: then the world's cost knobs
            values += self._cost_globals
        g[:] = values
        if max(values) > 2.0:  # (all are >= 0; within [0, 2] the clip changes nothing)
            _clip(g, 0.0, 2.0, out=g)
        # fresh arrays: one copy of each buffer, the float entries as parts of theirs (nothing of the
        # environment's, nor of an earlier observation); the mask is already in its buffer (self.mask)
        floats, mask = self._fbuf.copy(), self.mask8.copy()
        return {k: mask if part is None else floats[part] for k, part in self._out_parts}

    def _queue_totals(self) -> tuple[float, float]:
        """Over every queued job (beyond the window too): the predicted seconds on each one's best plan, and
        the fewest GPUs each could start on, summed; recomputed when the queue changes."""
        sim = self.sim
        key = (self._qtable_key, sim.queue_version)
        if self._qtotals_key != key:
            q = sim.queue
            self._qtotals = (float(self._qbest_s[q].sum()), float(self._qmin_gpus[q].sum())) if q else (0.0, 0.0)
            self._qtotals_key = key
        return self._qtotals

    def _running_work(self) -> float:
        """Predicted seconds left of every running job on its plan, summed (estimated work); the running window
        already holds the jobs when none is beyond it."""
        sim = self.sim
        key = (sim, sim.running_version, sim.now)
        if self._rwork_key != key:
            self.update_visible()
            if len(sim.running) <= self.running_slots:
                jobs = self.visible_running
            else:
                jobs = self._all_running
                if jobs is None:
                    jobs = self._all_running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
            self._rwork = kernels.running_work(jobs, sim.run_plan, sim.run_floats, sim.work_estimate, sim.iter_time,
                                               sim.now)
            self._rwork_key = key
        return self._rwork

    @property
    def _static_features(self) -> np.ndarray:
        """(J, 4) per-job features that never change: params, batch, seq_len, requested GPUs."""
        sim = self.sim
        cached = getattr(sim, "_env_static_features", None)
        if cached is None:
            memo: dict[tuple, int] = {}
            rows: list[list[float]] = []
            index = np.empty(sim.num_jobs, dtype=np.int64)  # (J,) row of each job in ``rows``
            for i, j in enumerate(sim.jobs):
                key = (id(j.model), j.batch_size, j.seq_len, j.requested_gpus)
                k = memo.get(key)
                if k is None:
                    k = memo[key] = len(rows)
                    rows.append(
                        [
                            math.log10(max(j.model.num_params, 1)) / PARAMS_LOG10_SCALE,
                            math.log2(max(j.batch_size, 1)) / BATCH_LOG2_SCALE,
                            math.log2(max(j.seq_len, 1)) / SEQ_LOG2_SCALE,
                            math.log2((j.requested_gpus or 0) + 1) / GPUS_LOG2_SCALE,
                        ]
                    )
                index[i] = k
            cached = np.array(rows, dtype=np.float32)[index]  # (J, 4)
            sim._env_static_features = cached
        return cached


def _fraction_table(capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``f / capacity[i]`` for f in 0..capacity[i], every i one after the other, and (len,) the
    position of each i's ``f = 0``: ``table[base + free]`` is ``free / capacity`` as float32."""
    capacity = np.asarray(capacity, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        table = np.concatenate([np.arange(c + 1, dtype=np.int64) / c for c in capacity.tolist()] or [np.zeros(0)])
    base = np.concatenate([[0], np.cumsum(capacity + 1)[:-1]]).astype(np.int64)
    return table.astype(np.float32), base


__all__ = ["ObservationEncoder"]
