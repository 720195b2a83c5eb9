"""The doubling heuristic of Capes et al. (arXiv 1908.08082) and its comparators, acting by start/resize actions.

Allocation rule (:func:`greedy_allocation`), recomputed from scratch on every arrival and completion (and
OOM failure), detected through the simulator's counters:

1. Admission: every job gets its smallest memory-feasible size (1 GPU whenever 1 GPU holds it) in
   first-come order while GPUs remain. Running jobs come first (the env has no preemption action, so a
   running job is never evicted), then the queued jobs of the env's visible queue window in arrival order
   (only those can be started). A job that does not fit is skipped; later, smaller jobs may still enter.
2. Doubling: repeatedly double the allocation of the job with the largest
   ``(Q_j / f_j(w_j) - Q_j / f_j(w'_j)) / (w'_j - w_j)`` -- ``Q_j`` its remaining work (the env's
   ``work_estimate`` minus progress), ``f_j`` its speed in iterations/s, ``w'_j = 2 w_j`` its next size
   (sizes whose plans do not fit in memory are skipped, so ``w'_j`` is the next feasible size) -- while the
   free GPUs of its pool suffice and the gain is positive; a job whose step does not fit is passed over and
   the others continue. Ties: earlier arrival.
3. The allocation is realised through actions: shrinking resizes first (they free GPUs), then starts of
   admitted queued jobs (at the largest size <= the target that can be placed now), then growing resizes.
   A resized job pays the restart overhead (the simulator charges it). The env refuses to resize a job still
   starting up, or within ``SimConfig.resize_cooldown`` of its last start or resize (env v6's pacing): the
   policy sets a timer (a wake-up, ``env.request_wakeup``) at the first time the env allows the resize (the end
   of that job's start-up, ``view.running[j].progress_from``, or of its cooldown, whichever is later) and
   resizes it then. Resizes that cannot be placed yet are retried at later decisions (GPUs are freed only at
   events).

Heterogeneous clusters (the paper has one GPU type): each GPU type is a separate pool. A running job keeps
its GPU type; an admitted queued job takes the type where its smallest size is fastest among the pools
with room (``"exploratory"``, which does not know ``f_j`` yet: the type with the highest peak TFLOP/s).

Strategies (``strategy``)
-------------------------
``"precompute"`` (default): ``f_j(w)`` from the environment's throughput model (``1 / view.iter_time`` of
    the plan of ``w`` GPUs of the job's type, consolidated placement).
``"exploratory"``: a new job first runs for ``explore_time`` seconds (default 60) of progress at each of
    1, 2, 4 and 8 GPUs (sizes that do not fit in memory or cannot be placed are skipped) and records the
    speed it reaches; ``f_j`` is then the Capes et al. model fitted by non-negative least squares
    (:func:`frenzy_env.world.throughput.fit_speed_model`) and the job joins the doubling. Each step lasts exactly
    its ``explore_time`` of progress: the policy sets a timer (a wake-up) at its end, ``progress_from +
    explore_time``, and resizes the job to its next size then (which starts the next step after the restart).
``"eight"``: every job on a fixed 8 GPUs (or its smallest feasible size above 8), first-come first-fit on
    the fastest GPU type that can place it; no resizing.
``"unit_step"``: the greedy comparator (Optimus-style): +1 GPU at a time to the job with the largest
    ``Q_j / f_j(w) - Q_j / f_j(w + 1)``; ``f_j`` over every integer ``w`` is the NNLS fit of the throughput
    model at the job's feasible plan sizes. Plans exist only for 1, 2, 4, ... GPUs, so a job allotted ``w``
    runs on the largest feasible plan size ``<= w``.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy
from frenzy_env.errors import ConfigError, unknown_name
from frenzy_env.simulator.view import QUEUED, RUNNING, SimView
from frenzy_env.world.cluster import get_gpu_type
from frenzy_env.world.throughput import fit_speed_model

STRATEGIES = ("precompute", "exploratory", "eight", "unit_step")
EXPLORE_SIZES = (1, 2, 4, 8)


def greedy_allocation(
    remaining: np.ndarray,
    speed: np.ndarray,
    sizes: np.ndarray,
    pool: np.ndarray,
    capacity: np.ndarray,
) -> np.ndarray:
    """Admission at the smallest feasible size, then greedy growth by the best gain per added GPU.

    Parameters
    ----------
    remaining: (n,) remaining work ``Q_j`` (iterations); jobs in priority (admission) order.
    speed: (n, K) ``f_j(sizes[k])`` in iterations/s; a non-positive or non-finite entry marks a size that is
        not feasible (skipped).
    sizes: (K,) ascending GPU counts a job may hold (1, 2, 4, ... for doubling; 1, 2, 3, ... for unit steps).
    pool: (n,) pool (GPU type) index of each job; capacity: (T,) GPUs of each pool.

    Returns
    -------
    (n,) int64 GPUs allotted to each job (0: not admitted). Each step moves a job from ``w`` to its next
    feasible size ``w'`` when ``(Q/f(w) - Q/f(w')) / (w' - w) > 0`` is the largest gain and ``w' - w`` GPUs are
    free in its pool; a job whose step does not fit is passed over. Ties: the earlier job in the order.
    """
    remaining = np.asarray(remaining, dtype=np.float64)  # (n,)
    speed = np.asarray(speed, dtype=np.float64)  # (n, K)
    sizes = np.asarray(sizes, dtype=np.int64)  # (K,)
    n, k_n = speed.shape
    ok = np.isfinite(speed) & (speed > 0)  # (n, K)
    inv = np.where(ok, 1.0 / np.where(ok, speed, 1.0), np.inf)  # (n, K) seconds per iteration
    # nxt[j, k]: the first feasible size index > k (k_n when none), by a reverse running minimum
    idx = np.where(ok, np.arange(k_n)[None, :], k_n)  # (n, K)
    after = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1]  # (n, K) first feasible index >= k
    nxt = np.concatenate([after[:, 1:], np.full((n, 1), k_n)], axis=1).tolist()
    first = after[:, 0].tolist() if k_n else [k_n] * n
    free = [int(c) for c in np.asarray(capacity).tolist()]
    pool_l = [int(p) for p in np.asarray(pool).tolist()]
    size_l = sizes.tolist()
    inv_l = inv.tolist()
    rem_l = remaining.tolist()
    level = [-1] * n
    heap: list[tuple[float, int, int]] = []
    for j in range(n):  # admission in order at the smallest feasible size
        k = first[j]
        if k < k_n and size_l[k] <= free[pool_l[j]]:
            level[j] = k
            free[pool_l[j]] -= size_l[k]
            k2 = nxt[j][k]
            if k2 < k_n:
                gain = rem_l[j] * (inv_l[j][k] - inv_l[j][k2]) / (size_l[k2] - size_l[k])
                if gain > 0:
                    heap.append((-gain, j, k2))
    heapq.heapify(heap)
    while heap:
        _, j, k2 = heapq.heappop(heap)
        k = level[j]
        extra = size_l[k2] - size_l[k]
        if extra > free[pool_l[j]]:
            continue  # does not fit: pass over this job, others may still grow
        free[pool_l[j]] -= extra
        level[j] = k = k2
        k2 = nxt[j][k]
        if k2 < k_n:
            gain = rem_l[j] * (inv_l[j][k] - inv_l[j][k2]) / (size_l[k2] - size_l[k])
            if gain > 0:
                heapq.heappush(heap, (-gain, j, k2))
    return np.array([size_l[k] if k >= 0 else 0 for k in level], dtype=np.int64)


class DoublingPolicy(ScriptedPolicy):
    """Capes et al.'s doubling heuristic (and comparators) through start and resize actions.

    Parameters
    ----------
    env: the (possibly wrapped) FrenzyEnv.
    strategy: ``"precompute"`` | ``"exploratory"`` | ``"eight"`` | ``"unit_step"`` (module docstring).
    explore_time: seconds of progress measured at each exploration size (``"exploratory"``).
    fixed_gpus: the fixed size of ``"eight"`` (default 8).
    """

    name = "doubling"
    grow = True  # doubling steps after admission (subclasses may turn them off)

    def __init__(
        self, env: Any, strategy: str = "precompute", explore_time: float = 60.0, fixed_gpus: int = 8
    ) -> None:
        super().__init__(env)
        if strategy not in STRATEGIES:
            raise unknown_name("strategy", strategy, STRATEGIES)
        if not (isinstance(explore_time, (int, float)) and explore_time >= 0):
            raise ConfigError(f"explore_time must be a number >= 0, got {explore_time!r}")
        if not (isinstance(fixed_gpus, int) and fixed_gpus >= 1):
            raise ConfigError(f"fixed_gpus must be a positive integer, got {fixed_gpus!r}")
        self.strategy = strategy
        self.explore_time = float(explore_time)
        self.fixed_gpus = fixed_gpus
        self._unit_cache: dict[tuple, np.ndarray] = {}

    # ------------------------------------------------------------------ episode state
    def setup(self, view: SimView) -> None:
        self.levels = view.plan_counts_levels  # (K,)
        self.k = len(self.levels)
        self._stride = int(view.plan_grid[1])  # plan slot of (type t, level k): t * stride + k (stride >= k)
        self._arange_k = np.arange(self.k)
        self.capacity = view.cluster.type_capacity.astype(np.int64)  # (T,)
        self._peak = np.array([get_gpu_type(t).peak_tflops for t in view.gpu_types])  # (T,)
        self.target: dict[int, tuple[int, int]] = {}  # job -> (type, GPUs) it should hold
        self._todo: set[int] = set()  # jobs whose target differs from what they hold
        self.exploring: dict[int, list[int]] = {}  # job -> exploration sizes still to visit (current first)
        self.observed: dict[int, list[tuple[int, float]]] = {}  # job -> [(GPUs, iterations/s)]
        self.fitted: dict[int, np.ndarray] = {}  # job -> (K,) f_j at the plan sizes, from its own measurements
        self._unit_rows: dict[tuple[int, int], np.ndarray] = {}
        self.recomputes = 0
        self._counters: tuple = ()
        self._cooldown = float(view.config.resize_cooldown or 0.0)  # SimConfig.resize_cooldown (None: 0)

    def _plan(self, t: int, count: int) -> int:
        return t * self._stride + int(np.searchsorted(self.levels, count))

    def _feasible(self, jobs: np.ndarray, pools: np.ndarray) -> np.ndarray:
        """(n, K) bool: plan sizes of each job's pool it may use (predictor fits, never crashed)."""
        plans = pools[:, None] * self._stride + self._arange_k[None, :]  # (n, K)
        rows = jobs[:, None]
        return self.view.pred_ok[rows, plans] & ~self.view.oom_known[rows, plans]

    def _speed_levels(self, jobs: np.ndarray, pools: np.ndarray) -> np.ndarray:
        """(n, K) f_j at the plan sizes of each job's pool (0 where infeasible)."""
        plans = pools[:, None] * self._stride + self._arange_k[None, :]  # (n, K)
        with np.errstate(divide="ignore"):
            sp = 1.0 / self.view.iter_time[jobs[:, None], plans]
        if self.fitted:
            for i, j in enumerate(jobs.tolist()):
                row = self.fitted.get(j)
                if row is not None:
                    sp[i] = row
        ok = self._feasible(jobs, pools)
        return np.where(ok & np.isfinite(sp), sp, 0.0)

    def _speed_units(self, jobs: np.ndarray, pools: np.ndarray) -> np.ndarray:
        """(n, W) f_j at 1..W GPUs: the NNLS fit of the throughput model (0 below the smallest feasible)."""
        view = self.view
        ok = self._feasible(jobs, pools)  # (n, K)
        levels = self.levels
        out = np.empty((len(jobs), int(levels[-1])))
        speeds = None
        for i, (j, t) in enumerate(zip(jobs.tolist(), pools.tolist())):
            row = self._unit_rows.get((j, t))
            if row is None:
                spec = view.jobs[j]
                key = (spec.model, int(spec.batch_size), int(spec.seq_len), t, ok[i].tobytes())
                row = self._unit_cache.get(key)
                if row is None:
                    if speeds is None:
                        speeds = self._speed_levels(jobs, pools)
                    good = speeds[i] > 0
                    model = fit_speed_model(levels[good], speeds[i][good], m=float(spec.batch_size),
                                            n=float(spec.model.num_params))
                    w_all = np.arange(1, int(levels[-1]) + 1, dtype=np.float64)
                    row = np.asarray(model(w_all), dtype=np.float64)
                    row[w_all < levels[good][0]] = 0.0
                    self._unit_cache[key] = row
                self._unit_rows[(j, t)] = row
            out[i] = row
        smallest = levels[np.argmax(ok, axis=1)]  # (n,) plans that crashed since raise the floor
        out[np.arange(1, out.shape[1] + 1)[None, :] < smallest[:, None]] = 0.0
        return out

    # ------------------------------------------------------------------ allocation
    def _recompute(self) -> None:
        view = self.view
        self.recomputes += 1
        cap = self.capacity.copy()
        now = view.now
        jobs: list[int] = []
        pools: list[int] = []
        rem: list[float] = []
        fixed: dict[int, tuple[int, int]] = {}
        running = view.running
        for j in sorted(running):
            run = running[j]
            t, c = int(view.plan_type[run.plan]), int(view.plan_count[run.plan])
            if j in self.exploring:
                fixed[j] = (t, self.target.get(j, (t, c))[1])
                cap[t] -= fixed[j][1]
            else:
                jobs.append(j)
                pools.append(t)
                done = run.done_base + max(0.0, now - run.progress_from) * run.rate
                rem.append(max(float(view.work_estimate[j]) - done, 1e-9))
        room = cap.copy()
        if jobs:
            ok = self._feasible(np.array(jobs), np.array(pools))
            np.subtract.at(room, pools, self.levels[np.argmax(ok, axis=1)])
        qv = np.asarray(self.env.visible_queue, dtype=np.int64)
        if qv.size:
            self._admit(self.admission_order(qv), room, cap, fixed, jobs, pools, rem)
        new_target = dict(fixed)
        if jobs:
            j_a, p_a = np.array(jobs), np.array(pools, dtype=np.int64)
            if self.strategy == "unit_step":
                speed = self._speed_units(j_a, p_a)
                sizes = np.arange(1, speed.shape[1] + 1)
            else:
                speed = self._speed_levels(j_a, p_a)
                sizes = self.levels
            if not self.grow:  # admission only: every size above the smallest feasible one is dropped
                first = np.argmax(speed > 0, axis=1)
                speed = np.where(np.arange(speed.shape[1])[None, :] == first[:, None], speed, 0.0)
            alloc = greedy_allocation(self.growth_weights(np.array(rem), speed), speed, sizes, p_a, cap)
            if self.strategy == "unit_step":  # run on the largest feasible plan size <= the allotment
                ok = self._feasible(j_a, p_a) & (self.levels[None, :] <= alloc[:, None])
                last = self.k - 1 - np.argmax(ok[:, ::-1], axis=1)
                alloc = np.where(alloc > 0, self.levels[last], 0)
            for j, t, w in zip(jobs, pools, alloc.tolist()):
                if w:
                    new_target[j] = (t, int(w))
        self.target = new_target
        self._todo = set(new_target)

    def growth_weights(self, remaining: np.ndarray, speed: np.ndarray) -> np.ndarray:
        """The ``Q_j`` of the doubling gain: each job's remaining iterations (Capes et al.); ``speed`` (n, K) is
        ``f_j`` at the sizes (subclasses may weigh the gain differently)."""
        return remaining

    def admission_order(self, queue: np.ndarray) -> np.ndarray:
        """The visible queued jobs in admission order: arrival order (Capes et al.'s first come)."""
        return queue

    def _admit(self, qv, room, cap, fixed, jobs, pools, rem) -> None:
        """Admission of the visible queued jobs (in :meth:`admission_order`) at their smallest size, each on
        its best pool."""
        view = self.view
        t_n, k_n = view.num_types, self.k
        grid = (len(qv), -1, self._stride)  # the slot grid: the cluster's types and levels come first
        ok = (view.pred_ok[qv] & ~view.oom_known[qv]).reshape(grid)[:, :t_n, :k_n]  # (Q, T, K)
        has = ok.any(axis=2)  # (Q, T)
        first = np.argmax(ok, axis=2)  # (Q, T) smallest feasible size index
        if self.strategy == "exploratory":
            speed = np.broadcast_to(self._peak[None, :], has.shape)  # f_j unknown: the GPU's peak
        else:
            it = view.iter_time[qv].reshape(grid)[:, :t_n, :k_n]
            speed = 1.0 / np.take_along_axis(it, first[:, :, None], axis=2)[:, :, 0]  # (Q, T)
        order = np.argsort(-np.where(has, speed, -np.inf), axis=1, kind="stable").tolist()  # (Q, T)
        size = self.levels[first].tolist()
        has_l = has.tolist()
        room_l = room.tolist()
        for i, j in enumerate(qv.tolist()):
            for t in order[i]:
                if not has_l[i][t]:
                    break
                w = size[i][t]
                if self.strategy == "exploratory":
                    sizes = self._explore_sizes(ok[i, t])
                    w = sizes[0]
                if w > room_l[t]:
                    continue
                room_l[t] -= w
                if self.strategy == "exploratory":
                    self.exploring[j] = sizes
                    fixed[j] = (t, w)
                    cap[t] -= w
                else:
                    jobs.append(j)
                    pools.append(t)
                    rem.append(max(float(view.work_estimate[j] - view.done_iters[j]), 1e-9))
                break

    def _explore_sizes(self, ok: np.ndarray) -> list[int]:
        levels = self.levels.tolist()
        sizes = [s for s in EXPLORE_SIZES if s in levels and ok[levels.index(s)]]
        return sizes or [int(self.levels[np.argmax(ok)])]

    def _explore_step(self) -> bool:
        """Advance exploring jobs past their measuring time; returns True when one finished exploring."""
        view = self.view
        running, now = view.running, view.now
        done_any = False
        free = None
        for j in list(self.exploring):
            run = running.get(j)
            if run is None:
                if view.status[j] != QUEUED:
                    self.exploring.pop(j)
                continue
            if now < run.progress_from + self.explore_time:
                continue
            count, t = int(view.plan_count[run.plan]), int(view.plan_type[run.plan])
            obs = self.observed.setdefault(j, [])
            if run.rate > 0 and (not obs or obs[-1][0] != count):  # rate 0: an attempt doomed to OOM
                obs.append((count, float(run.rate)))
            if free is None:
                free = view.free_by_type()
            sizes = [s for s in self.exploring[j] if count < s <= count + free[t]]  # others cannot be placed
            if sizes:
                self.exploring[j] = sizes
                self.target[j] = (t, sizes[0])
                self._todo.add(j)
                continue
            spec = view.jobs[j]
            w = np.array([o[0] for o in obs], dtype=np.float64)
            f = np.array([o[1] for o in obs], dtype=np.float64)
            model = fit_speed_model(w, f, m=float(spec.batch_size), n=float(spec.model.num_params))
            self.fitted[j] = np.asarray(model(self.levels.astype(np.float64)), dtype=np.float64)
            self.observed.pop(j)
            self.exploring.pop(j)
            done_any = True
        return done_any

    # ------------------------------------------------------------------ acting
    def act(self, mask: np.ndarray) -> int:
        view = self.ensure_setup()
        if self.strategy == "eight":
            return self._act_fixed(mask)
        counters = (view.arrived, view.finished, view.rejected, view.oom_failures)
        explored = self.strategy == "exploratory" and bool(self.exploring) and self._explore_step()
        if counters != self._counters or explored:
            self._counters = counters
            self._recompute()
        action = self._realise(mask)
        # the timer is set before the action is taken: after a start or resize the env may advance by itself
        self.wake_at(self.next_due(action))
        return action

    def next_due(self, action: int | None = None) -> float:
        """When the policy must act although nothing happens in the simulator (inf: never): the earliest end
        of an exploration step, or the time the env first allows the resize a job is waiting for (the end of its
        start-up, or of its ``resize_cooldown`` after its last start or resize, ``view.last_action``). ``action``, about
        to be taken: a start or resize of an exploring job begins a step, which ends ``explore_time`` after its
        start-up (``view.startup_seconds``, ``view.restart_seconds`` for a resize)."""
        view, env = self.view, self.env
        running, now = view.running, view.now
        due = float("inf")
        if self.exploring and action is not None and action >= env.first_start:
            if action < env.first_resize:
                j, plan = divmod(action - env.first_start, view.num_plans)
                j = int(env.visible_queue[j])
                delay = view.startup_seconds(j, plan)
            else:
                j, plan = divmod(action - env.first_resize, view.num_plans)
                j = int(env.visible_running[j])
                delay = view.restart_seconds(j, plan)
            if j in self.exploring:  # the simulator's own sum: the wake-up falls exactly on the step's end
                due = now + delay + self.explore_time
        for j in self.exploring:
            run = running.get(j)
            if run is not None and run.progress_from + self.explore_time > now:  # (not ended: just acted on)
                due = min(due, run.progress_from + self.explore_time)
        for j in self._todo:
            run = running.get(j)
            if run is None or run.plan == self._plan(*self.target[j]):
                continue
            ready = max(run.progress_from, float(view.last_action[j]) + self._cooldown)
            if ready > now:
                due = min(due, ready)
        return due

    def _realise(self, mask: np.ndarray) -> int:
        """One action towards the targets: shrinks first, then starts, then grows."""
        if not self._todo:
            return self.wait_action(mask)
        view, env = self.view, self.env
        status, running = view.status, view.running
        grows: list[int] = []
        starts: list[tuple[int, int, int]] = []
        for j in sorted(self._todo):
            t, w = self.target[j]
            st = status[j]
            if st == RUNNING:
                plan = running[j].plan
                if plan == self._plan(t, w):
                    self._todo.discard(j)
                    continue
                a = env.resize_action(j, self._plan(t, w))
                if a is None:
                    continue
                if w < int(view.plan_count[plan]):
                    if mask[a]:
                        return a
                else:
                    grows.append(a)
            elif st == QUEUED:
                starts.append((j, t, w))
            else:
                self._todo.discard(j)
        for j, t, w in starts:
            ok = self._feasible(np.array([j]), np.array([t]))[0] & (self.levels <= w)
            for k in np.flatnonzero(ok)[::-1].tolist():
                a = env.start_action(j, t * self._stride + k)
                if a is not None and mask[a]:
                    return a
        for a in grows:
            if mask[a]:
                return a
        return self.wait_action(mask)

    def _act_fixed(self, mask: np.ndarray) -> int:
        """``"eight"``: visible queued jobs in arrival order, ``fixed_gpus`` GPUs on the fastest legal type."""
        view, env = self.view, self.env
        qv = env.visible_queue
        if len(qv) == 0:
            return self.wait_action(mask)
        p_n = view.num_plans
        legal = env.start_rows(mask)  # (Q, P)
        if not legal.any():
            return self.wait_action(mask)
        avail = view.pred_ok[qv] & ~view.oom_known[qv]  # (Q, P)
        counts = view.plan_count[None, :]
        want = min(self.fixed_gpus, int(self.levels[-1]))
        big = avail & (counts >= want)
        big = np.where(big.any(axis=1, keepdims=True), big, avail)
        size = np.where(big, counts, np.iinfo(np.int64).max).min(axis=1)  # (Q,) smallest size >= want
        at_size = avail & (counts == size[:, None]) & legal  # (Q, P)
        rows = np.flatnonzero(at_size.any(axis=1))
        if rows.size == 0:
            return self.wait_action(mask)
        k = int(rows[0])
        times = np.where(at_size[k], view.iter_time[qv[k]], np.inf)
        return env.first_start + k * p_n + int(np.argmin(times))


__all__ = ["DoublingPolicy", "greedy_allocation", "STRATEGIES"]
