"""The simulator's mask layer: what makes ``start_mask``, ``resize_mask`` and ``legal_masks`` table look-ups.

Each running attempt has a *slot* (the lowest free one first) whose rows are written once, at its launch
(:meth:`_MaskLayer._slot_row`): per plan, the cell of (the plan's GPU type, the layout's tensor-parallel level)
in the state's ``cap`` table, the GPUs the plan needs (a count no capacity reaches where resizing to it is not
allowed), the GPUs placeable in the nodes the job holds whole, and the (node, GPUs held) pairs of the nodes it
shares, plus its ``progress_from``. The masks of a set of jobs gather those rows and compare once. The caches
and when they are invalidated:

* ``_ok`` (:meth:`_MaskLayer._placeable`): plan x tp level fits the free GPUs; recomputed when
  ``state.version`` (any change of ``free``) differs from ``_ok_version``.
* ``_start_cache`` (``start_mask``), ``_resize_cache`` (``resize_mask``) and ``_mask_cache`` (``legal_masks``,
  :class:`_MaskCache`): the gathered rows of the jobs last asked for, keyed by the job indices and a change
  counter: ``_avail_version`` (a plan crashed) for queued jobs, ``running_version`` (any start, stop or
  resize) for running ones; every call compares them with the capacities of the moment.
* ``_resize_rows`` and ``_slot_heads``: slot rows per (configuration, plan[, GPUs of whole nodes held]),
  pure functions of the plan table kept across resets (created by the simulator's ``__init__``); recomputed
  for jobs whose ``avail`` row differs from ``pred_ok`` (``_oom_jobs``). ``_offsets``: index offsets per
  number of running jobs.

The pacing rules (``SimConfig.resize_cooldown``, ``one_action_per_instant``) are not cached: every call compares
the jobs' ``last_action`` with the clock (:meth:`_MaskLayer.resize_ready`).

Copies and pickles leave ``_CACHES`` out (they may hold views, which a copy would turn into separate arrays);
the next call rebuilds them. The caches live on the simulator itself (this is
a mixin of :class:`~frenzy_env.simulator.ClusterSimulator`), so the hot path reads them in one look-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frenzy_env import kernels

_NO_FIT = np.iinfo(np.int64).max  # sentinel free count of nodes that cannot hold a job


@dataclass
class _MaskCache:
    """What :meth:`_MaskLayer.legal_masks` keeps between calls for an (rows, P) output whose first
    ``q_rows`` rows are start rows: ``plans`` (4, rows, P) laid out as ``_slot_plans`` (see
    :meth:`_MaskLayer._slot_row`; start rows hold the cells and the GPUs needed, a count no capacity
    reaches on rows without a job, and no gain); the keys of the queue and running jobs it holds, their
    numbers; the running jobs' progress_from and what :meth:`_MaskLayer._shared_gain` needs of them."""

    q_rows: int
    plans: np.ndarray  # (4, rows, P) intp
    views: tuple = ()  # its 4 planes (not kept by copies: see _MaskLayer.__getstate__)
    queue_key: tuple | None = None
    running_key: tuple | None = None
    nq: int = 0
    nr: int = 0
    progress_from: np.ndarray | None = None  # (nr,)
    shared: tuple | None = None
    slots_key: tuple | None = None  # the compiled path's: the running jobs its ``slots`` (nr,) are of
    slots: np.ndarray | None = None


class _MaskLayer:
    """The mask and slot-row methods of :class:`~frenzy_env.simulator.ClusterSimulator` (see the module
    docstring); they read the plan table's fields, ``state``, ``avail``, ``now`` and the change counters."""

    _CACHES = ("_mask_cache", "_resize_cache", "_start_cache")  # derived from the state; they may hold views

    def __getstate__(self) -> dict:
        # copies and pickles leave the caches out (views of their arrays would become separate arrays)
        state = dict(self.__dict__)
        for name in self._CACHES:
            state[name] = None
        return state

    def _reset_masks(self) -> None:
        """Empty slots and caches (part of ``reset_state``)."""
        n = self.num_jobs
        # each running job has a slot (the lowest free first) holding what the masks need of its attempt
        slots = self.cluster.num_gpus  # every running job holds a GPU
        self._slot_of = np.full(n, -1, dtype=np.int64)  # (J,) slot of a running job
        # of the slots used so far (see _slot_row; grown as more jobs run at once): (4, S', P) per plan,
        # (S', 2M) (node, cell) pairs of shared nodes, (S',) progress_from; the number of pairs (S,)
        self._slot_plans = np.zeros((4, min(slots, 16), self.num_plans), dtype=np.intp)
        self._slot_pairs = np.zeros((self._slot_plans.shape[1], 2 * self._max_span), dtype=np.intp)
        self._slot_pairs[:, 0::2] = -1
        self._slot_pf = np.zeros(self._slot_plans.shape[1])
        self._slot_shared_l = [0] * slots
        self._free_slots = list(range(slots - 1, -1, -1))
        self._ok_version = -1  # state.version that _ok was computed for
        # (P * L + 1,) bool: plan p with tensor-parallel level l fits the free GPUs; the last cell is False
        self._ok = np.zeros(self.num_plans * len(self.tp_levels) + 1, dtype=bool)
        self._start_cache: tuple | None = None  # (key, (n, P) cells of the jobs' plans in _ok)
        self._resize_cache: tuple | None = None  # (key, rows of the jobs, see _running_rows)
        self._mask_cache: _MaskCache | None = None  # what legal_masks keeps
        self._offsets: dict[int, np.ndarray] = {}  # R -> see _gain_offsets

    def _grow_slots(self, slot: int) -> None:
        """More jobs run at once than ever (``slot`` is one past the slot rows): more slot rows."""
        grow = min(slot, len(self._slot_shared_l) - slot)
        self._slot_plans = np.concatenate([self._slot_plans, np.zeros_like(self._slot_plans[:, :grow])], 1)
        pairs = np.zeros_like(self._slot_pairs[:grow])
        pairs[:, 0::2] = -1
        self._slot_pairs = np.concatenate([self._slot_pairs, pairs])
        self._slot_pf = np.concatenate([self._slot_pf, np.zeros(grow)])

    def _placeable(self) -> np.ndarray:
        """(P * L + 1,) bool: plan p with tensor-parallel level l fits the free GPUs now (cached per state);
        the last cell, False, stands for plans that are not available."""
        st = self.state
        if self._ok_version != st.version:
            ok_pl = self._ok[:-1].reshape(self._plan_need.shape[0], -1)  # (P, L) view (not kept: copies and
            np.greater_equal(st.cap[self.plan_type], self._plan_need, out=ok_pl)  # pickles would break it)
            self._ok_version = st.version
        return self._ok

    def start_mask(self, jobs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(len(jobs), P) bool: ``start(job, p)`` would succeed now (jobs must be queued).

        ``out`` (len(jobs), P) bool receives the mask if given. The cells of the jobs' plans in the table of
        :meth:`_placeable` (the last, False one where a plan is not available) are kept for the same jobs.
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        key = (self._avail_version, jobs.tobytes())
        cached = self._start_cache
        if cached is None or cached[0] != key:
            cells = self._job_pl[jobs].astype(np.intp)  # (n, P)
            cells[~self.avail[jobs]] = len(self._ok) - 1
            cached = self._start_cache = (key, cells)
        mask = self._placeable().take(cached[1], out=out, mode="clip")
        if self._one_action:  # a job acted on at this instant (preempted) is not started again before time moves
            mask[self.last_action[jobs] >= self.now] = False
        return mask

    def resize_mask(self, jobs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(len(jobs), P) bool: ``resize(job, p)`` would succeed now (jobs must be running).

        ``out`` (len(jobs), P) bool receives the mask if given. A resize of job r to plan p succeeds when
        plan p's GPU type has ``plan_count[p]`` GPUs placeable in groups of the layout's tensor-parallel
        level once the job's own GPUs are freed: ``cap`` plus, on the job's own type, what its nodes give
        back (fixed on nodes it holds whole, looked up in ``gain_table_z`` on nodes it shares); and the job
        is past its start-up and not held by the pacing rules (:meth:`resize_ready`).
        """
        jobs = np.asarray(jobs, dtype=np.int64)
        r = len(jobs)
        if out is None:
            out = np.empty((r, self.num_plans), dtype=bool)
        if r == 0:
            return out
        key = (self.running_version, jobs.tobytes())  # no start or stop since: the same attempts
        cached = self._resize_cache
        if cached is None or cached[0] != key:
            plans = np.empty((4, r, self.num_plans), dtype=np.intp)
            cached = self._resize_cache = (key, plans, *self._running_rows(jobs, plans))
        _, (tl, _, thr, base), progress_from, shared = cached
        have = self.state.cap.ravel().take(tl)  # (R, P) GPUs placeable for the plan's type and tp level
        have += base
        if shared is not None:
            have += self._shared_gain(*shared)
        np.greater_equal(have, thr, out=out)
        ready = progress_from <= self.now  # (R,) past its start-up (a job still starting cannot be resized)
        if self._paced:
            ready &= self._rested(jobs)
        out &= ready[:, None]
        return out

    def resize_ready(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs),) bool: running ``jobs`` that time allows to resize now (to a plan that can be placed) and,
        in the environment, to preempt: past their start-up (``progress_from <= now``) and not held by the
        pacing rules: ``resize_cooldown`` seconds have passed since their last start or resize and, with
        ``one_action_per_instant``, that was before this instant (``last_action < now``)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        ready = self.run_floats[jobs, 1] <= self.now
        if self._paced:
            ready &= self._rested(jobs)
        return ready

    def _rested(self, jobs: np.ndarray | int) -> np.ndarray | bool:
        """The pacing rules allow an action on ``jobs`` (running ones, or one job) now: ``last_action +
        resize_cooldown <= now`` and, with ``one_action_per_instant``, ``last_action < now``."""
        last = self.last_action[jobs]
        ok = last + self._cooldown <= self.now
        if self._one_action:
            ok &= last < self.now
        return ok

    def legal_masks(self, queue: np.ndarray, running: np.ndarray, q_rows: int, out: np.ndarray) -> int:
        """Both masks in one (rows, P) bool array ``out``: row i < len(queue) is ``start_mask(queue)[i]``,
        row q_rows + i (i < len(running)) is ``resize_mask(running)[i]``, every other row is False. Returns
        the number of True cells (legal starts and resizes). Start rows of jobs acted on at this instant
        (``one_action_per_instant``) and resize rows of jobs :meth:`resize_ready` holds back are False.

        The same values as :meth:`start_mask` and :meth:`resize_mask`, with one look-up and one comparison
        for both (see :class:`_MaskCache`) for a caller that needs both after every action (the environment);
        with the compiled kernels on (:mod:`frenzy_env.kernels`), in one compiled call.
        """
        rows, p = out.shape
        c = self._mask_cache
        if c is None or c.q_rows != q_rows or c.plans.shape[1] != rows:
            plans = np.zeros((4, rows, p), dtype=np.intp)
            plans[2] = _NO_FIT
            c = self._mask_cache = _MaskCache(q_rows, plans, tuple(plans))
        tl, _, thr, base = c.views
        nq, nr = len(queue), len(running)
        key = (self._avail_version, queue.tobytes())
        if c.queue_key != key:  # start rows: cell and GPUs needed (none reached if not available), no gain
            c.queue_key = key
            if nq:
                tl[:nq] = self._job_tl[queue]
                thr[:nq] = np.where(self.avail[queue], self.plan_count, _NO_FIT)
            if c.nq > nq:
                thr[nq : c.nq] = _NO_FIT
            c.nq = nq
        kernel = kernels.get("legal_masks")
        if kernel is not None:  # compiled: reads the running jobs' slots directly
            key = (self.running_version, running.tobytes())
            if c.slots_key != key:
                c.slots_key = key
                c.slots = self._slot_of[running]
            st = self.state
            count = kernel(st.cap, tl, thr, nq, q_rows, c.slots, self._slot_plans, self._slot_pairs, self._slot_pf,
                           self.now, st.free, st.gain_table_z, out, queue, running, self.last_action, self._cooldown,
                           self._one_action)
            if count < 0:
                c.slots_key = None
                raise KeyError(int(running[-1 - count]))  # not running
            return count
        key = (self.running_version, running.tobytes())
        if c.running_key != key:
            c.running_key = key
            end = q_rows + nr
            if nr:
                c.progress_from, c.shared = self._running_rows(running, c.plans[:, q_rows:end])
            if c.nr > nr:
                thr[end : q_rows + c.nr] = _NO_FIT
            c.nr = nr
        have = self.state.cap.ravel().take(tl)  # (rows, P)
        have += base
        if nr:
            if c.shared is not None:
                have[q_rows : q_rows + nr] += self._shared_gain(*c.shared)
            np.greater_equal(have, thr, out=out)
            ready = c.progress_from <= self.now  # (R,) past its start-up
            if self._paced:
                ready &= self._rested(running)
            out[q_rows : q_rows + nr] &= ready[:, None]
        else:
            np.greater_equal(have, thr, out=out)
        if self._one_action and nq:  # jobs acted on at this instant (preempted) are not started again
            out[:nq][self.last_action[queue] >= self.now] = False
        return int(np.count_nonzero(out))

    def _running_rows(self, jobs: np.ndarray, out: np.ndarray) -> tuple:
        """Gather the ``_slot_plans`` rows of running ``jobs`` into ``out`` (4, R, P); return their
        progress_from (R,) and, when some share nodes with other jobs, what :meth:`_shared_gain` needs of
        those nodes (else None)."""
        slots = self._slot_of[jobs]  # (R,)
        slots_l = slots.tolist()
        if -1 in slots_l:
            raise KeyError(int(jobs[slots_l.index(-1)]))  # not running
        self._slot_plans.take(slots, axis=1, out=out)
        shared = self._slot_shared_l
        width = max([shared[s] for s in slots_l])  # most nodes one of the jobs shares
        if width == 0:
            return self._slot_pf.take(slots), None
        pairs = self._slot_pairs.take(slots, axis=0)  # (R, 2M)
        cells = out[1] + self._gain_offsets(len(slots_l))  # the jobs' tp levels as cells of (R, L + 1) gains
        if width == 1:
            return self._slot_pf.take(slots), (pairs[:, 0], pairs[:, 1], cells)
        return self._slot_pf.take(slots), (pairs[:, 0 : 2 * width : 2], pairs[:, 1 : 2 * width : 2], cells)

    def _shared_gain(self, nodes: np.ndarray, cells: np.ndarray, gain_cells: np.ndarray) -> np.ndarray:
        """(R, P): GPUs placeable on each plan once the jobs' GPUs on the nodes they share are freed (0 for
        plans of other types), from the (node, GPUs held * gain_stride) pairs and ``gain_cells`` of
        :meth:`_running_rows`."""
        st = self.state
        gain = st.gain_table_z[cells + st.free[nodes]]  # (R, L + 1) or (R, W, L + 1)
        if gain.ndim == 3:  # the sum over the W nodes
            total = gain[:, 0] + gain[:, 1]
            for w in range(2, gain.shape[1]):
                total += gain[:, w]
            gain = total
        return gain.take(gain_cells)

    def _gain_offsets(self, r: int) -> np.ndarray:
        """(r, 1) intp r * (L + 1): offsets that make tp levels cells of an (R, L + 1) table of gains."""
        cached = self._offsets.get(r)
        if cached is None:
            cached = self._offsets[r] = np.arange(r, dtype=np.intp)[:, None] * (len(self.tp_levels) + 1)
        return cached

    def _resize_row(self, job: int, plan: int) -> np.ndarray:
        """(3P,) intp: for an attempt of ``job`` on ``plan``, per plan slot p: [0, P) the cell of (p's GPU type,
        the layout's tp level) in a flat (T, L) table; [P, 2P) the layout's tp level if p is of the job's own
        type, else L (a column of zeros in ``gain_table_z``); [2P, 3P) the GPUs p needs if resizing to it is
        allowed (available, not the current plan), else a count no capacity reaches."""
        key = (self._row_key_l[job], plan)
        row = self._resize_rows.get(key)
        p = self.num_plans
        if row is None:
            t = self._plan_type_l[plan]
            row = np.empty(3 * p, dtype=np.intp)
            row[:p] = self._job_tl[job]
            row[p : 2 * p] = np.where(self._plan_of_type[t], self.layout_tp_idx[job], len(self.tp_levels))
            row[2 * p :] = np.where(self.pred_ok[job], self.plan_count, _NO_FIT)
            row[2 * p + plan] = _NO_FIT
            self._resize_rows[key] = row
        if job in self._oom_jobs:  # some plans crashed: availability is the job's own
            row = row.copy()
            row[2 * p :] = np.where(self.avail[job], self.plan_count, _NO_FIT)
            row[2 * p + plan] = _NO_FIT
        return row

    def _slot_row(self, slot: int, job: int, plan: int, nodes: list[int], want: list[int]) -> None:
        """Fill slot ``slot`` for an attempt of ``job`` on ``plan`` holding ``want[i]`` GPUs on ``nodes[i]``:
        ``_slot_plans[:3, slot]`` :meth:`_resize_row`; ``_slot_plans[3, slot]`` per plan the GPUs placeable at
        its tp level in the nodes the job holds whole (their free count is 0 while it runs; 0 for plans of
        other types); ``_slot_pairs[slot]`` the (node, GPUs held * gain_stride) pairs of the nodes it shares,
        padded with (-1, 0), and ``_slot_shared_l[slot]`` their number."""
        stride = self.state.gain_stride
        caps = self._node_cap_l
        pairs: list[int] = []
        whole: list[int] = []  # GPUs held on each node held whole
        for node, k in zip(nodes, want):
            if k == caps[node]:
                whole.append(k)
            else:
                pairs += (node, k * stride)
        key = (self._row_key_l[job], plan, *whole)
        head = None if job in self._oom_jobs else self._slot_heads.get(key)
        if head is None:
            p = self.num_plans
            head = np.empty((4, p), dtype=np.intp)
            head[:3] = self._resize_row(job, plan).reshape(3, p)
            gain = np.zeros(len(self.tp_levels) + 1, dtype=np.intp)  # (L + 1,) the last one 0
            for k in whole:
                gain += self.state.gain_table_z[k * stride]  # held k, 0 free
            head[3] = gain.take(head[1])
            if job not in self._oom_jobs:
                self._slot_heads[key] = head
        self._slot_plans[:, slot] = head
        shared = len(pairs) // 2
        before = self._slot_shared_l[slot]
        row = self._slot_pairs[slot]
        if shared == 1 and before <= 1:
            row[0] = pairs[0]
            row[1] = pairs[1]
        else:
            if before > shared:
                pairs += [-1, 0] * (before - shared)
            if pairs:
                row[: len(pairs)] = pairs
        self._slot_shared_l[slot] = shared
