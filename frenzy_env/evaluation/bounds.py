"""Lower bounds on the average job completion time (JCT) of an episode: how far any scheduler is from optimal.

No scheduler, scripted or learnt, can finish a workload's jobs sooner on average than these bounds, so
``avg JCT / bound`` is an optimality gap that needs no oracle policy. Each bound relaxes the simulator's
world (:mod:`frenzy_env.simulator`) and so holds for every policy the environment allows:

* **isolated** (:func:`isolated_bound`): every job alone on the cluster, started at its arrival on its fastest
  plan that fits in memory (the predictor admits it and it truly fits): ``C_j >= r_j + s_j + e_j``, with
  ``s_j`` its shortest start-up and ``e_j`` its work times its shortest seconds per iteration (consolidated
  placement; a spread placement, a restart or an out-of-memory attempt only add time). No contention.
* **fluid** (:func:`fluid_bound`): contention, no parallelism limit. Each GPU type ``t`` becomes a pool of
  ``C_t`` GPUs that every job can use at its best GPU-seconds per unit of work ``g_jt`` (its most efficient
  plan of that type). Weighting the types by any ``sigma_t > 0`` turns the pools into one machine of speed
  ``sum_t sigma_t C_t`` on which job ``j`` needs ``min_t sigma_t g_jt`` units; shortest remaining processing
  time first is optimal for the mean flow time of a preemptive single machine with release dates, so its
  mean flow time is a bound for every ``sigma`` (several are tried, the largest result kept).
* **lp** (:func:`lp_bound`): both at once, as a time-indexed linear program (``scipy.optimize.linprog``,
  HiGHS). Variables ``y[j, t, k]``: the share of job ``j`` done on type ``t`` in interval ``k``. Each job is
  done once, not before ``r_j + s_j``; on type ``t`` it progresses no faster than its fastest plan of that
  type allows (``1 / e_jt``) and it is on one type at a time (``sum_t y[j, t, k] e_jt`` is at most the
  interval's length); the jobs' GPU-seconds on a type fit its ``C_t`` GPUs. A job's mean busy time is at least
  ``sum_k y[j, k] max(tau_k, r_j + s_j)`` (``tau_k`` the interval's start), and a job that progresses at
  most ``1 / e_j`` finishes at least ``e_j / 2`` after its mean busy time, so
  ``C_j >= sum_k y[j, k] max(tau_k, r_j + s_j) + e_j / 2`` and ``C_j >= r_j + s_j + e_j``; the program
  minimises ``sum_j C_j``. Each job has variables in a window after its arrival only; work left after it
  counts as finishing at the window's end with no capacity limit, which only loosens the bound, as coarser
  intervals do.

``lp_bound(..., plans=True)`` tightens the LP: a job pays the GPU-seconds of the plans whose speed it gets
(one variable per plan on its speed-GPU envelope) instead of running fast at its most efficient plan's cost.

All three ignore placement on nodes, power-of-two counts, fragmentation, start-up GPU time and the env's
decision windows, so they are loose where those bind. The LP is usually the tightest, but its intervals
cost it some accuracy; :attr:`JctBound.best_h` keeps the largest. Jobs with no plan that both the predictor
admits and truly fits are left out (the simulator rejects them or they never finish).

How loose, seen from above: :func:`relaxed_schedule` plays an allocation rule (:func:`list_allocation`, or
any callable) in the world the LP relaxes (GPU pools, one plan at a time, free re-planning at every arrival
and completion). Its mean JCT is at least that world's optimum, which is at least the LP bound, so the ratio
of the two caps the LP's slack as a bound on that world.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from frenzy_env.errors import ConfigError

HOUR = 3600.0


@dataclass(frozen=True)
class BoundInputs:
    """What the bounds need of an episode's jobs (seconds; ``J`` jobs kept, ``P`` plans, ``T`` GPU types).

    Attributes
    ----------
    release: (J,) arrival times. startup: (J,) each job's shortest start-up.
    plan_exec: (J, P) seconds the job's whole work takes on each plan (consolidated placement), ``inf``
        where the plan is not usable (not admitted, or does not truly fit).
    plan_count: (P,) GPUs of each plan. plan_type: (P,) GPU-type index of each plan.
    capacity: (T,) GPUs of each type.
    """

    release: np.ndarray
    startup: np.ndarray
    plan_exec: np.ndarray
    plan_count: np.ndarray
    plan_type: np.ndarray
    capacity: np.ndarray

    def __post_init__(self) -> None:
        n, p = self.release.shape[0], self.plan_count.shape[0]
        if self.startup.shape != (n,) or not (np.isfinite(self.startup).all() and (self.startup >= 0).all()):
            raise ConfigError(f"startup must be ({n},) finite seconds >= 0, got {self.startup!r}")
        if self.plan_exec.shape != (n, p) or (self.plan_exec <= 0).any():
            raise ConfigError(f"plan_exec must be ({n}, {p}) positive seconds (inf: not usable), "
                              f"got shape {self.plan_exec.shape}")
        if n and not np.isfinite(self.plan_exec).any(axis=1).all():
            bad = int(np.flatnonzero(~np.isfinite(self.plan_exec).any(axis=1))[0])
            raise ConfigError(f"plan_exec: job {bad} has no usable plan")
        if self.plan_type.shape != (p,) or not ((self.plan_type >= 0) & (self.plan_type < self.capacity.size)).all():
            raise ConfigError(f"plan_type must be ({p},) type indices below {self.capacity.size}, "
                              f"got {self.plan_type!r}")
        if not ((self.plan_count >= 1).all() and (self.capacity > 0).all()):
            raise ConfigError(f"plan_count and capacity must be positive GPU counts, got {self.plan_count!r}, "
                              f"{self.capacity!r}")

    @property
    def num_jobs(self) -> int:
        return int(self.release.shape[0])

    @cached_property
    def exec_s(self) -> np.ndarray:
        """(J,) ``e_j``: the job's work on its fastest plan, seconds."""
        return self.plan_exec.min(axis=1)

    @cached_property
    def type_exec(self) -> np.ndarray:
        """(J, T) ``e_jt``: the job's work on its fastest plan of each type, seconds (``inf``: none fits)."""
        return self._per_type_min(self.plan_exec)

    @cached_property
    def gpu_s(self) -> np.ndarray:
        """(J, T) ``g_jt``: the least GPU-seconds the job's work takes on each type (``inf``: none fits)."""
        return self._per_type_min(self.plan_exec * self.plan_count[None, :])

    def _per_type_min(self, per_plan: np.ndarray) -> np.ndarray:
        """(J, T): the row minimum of a (J, P) per-plan array over each type's plans (``inf``: no plan)."""
        out = np.full((self.num_jobs, self.capacity.size), np.inf)
        for t in range(self.capacity.size):
            if (self.plan_type == t).any():
                out[:, t] = per_plan[:, self.plan_type == t].min(axis=1)
        return out

    @cached_property
    def plan_modes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The plans that matter to a job's speed and GPU cost: per (job, type), the vertices of the upper
        concave envelope of its usable plans' (GPUs, speed) points and the origin (idle), up to its fastest
        plan. Any other plan is dominated: a mix of two vertices (or of a vertex and idling) for the same
        seconds does at least its work with no more GPU-seconds. Returns ``(job, type, exec_s, gpu_s)``
        arrays, one entry per vertex: the job's whole work on it in seconds and in GPU-seconds."""
        jobs, types, execs, gpus = [], [], [], []
        for t in range(self.capacity.size):
            cols = np.flatnonzero(self.plan_type == t)
            for j in range(self.num_jobs):
                ex = self.plan_exec[j, cols]
                ok = np.isfinite(ex)
                for c, e in _upper_envelope(self.plan_count[cols][ok], ex[ok]):
                    jobs.append(j)
                    types.append(t)
                    execs.append(e)
                    gpus.append(c * e)
        return (np.asarray(jobs, dtype=np.int64), np.asarray(types, dtype=np.int64),
                np.asarray(execs, dtype=np.float64), np.asarray(gpus, dtype=np.float64))


def _upper_envelope(count: np.ndarray, exec_s: np.ndarray) -> list[tuple[float, float]]:
    """``(GPUs, exec seconds)`` of the plans on the upper concave envelope of the points ``(GPUs, 1 / exec)``
    and the origin, from the most efficient plan (the steepest ray from the origin) to the fastest, in
    increasing GPUs (:attr:`BoundInputs.plan_modes`)."""
    if count.size == 0:
        return []
    speed = 1.0 / exec_s
    order = np.lexsort((-speed, count))  # by GPUs, the fastest first among equal counts
    hull: list[tuple[float, float]] = [(0.0, 0.0)]
    for i in order.tolist():
        c, v = float(count[i]), float(speed[i])
        if v <= hull[-1][1]:  # no faster than a vertex with no more GPUs: dominated
            continue
        while len(hull) >= 2:  # drop the last vertex while it lies on or below the chord to this point
            (c0, v0), (c1, v1) = hull[-2], hull[-1]
            if (v1 - v0) * (c - c0) <= (v - v0) * (c1 - c0):
                hull.pop()
            else:
                break
        hull.append((c, v))
    return [(c, 1.0 / v) for c, v in hull[1:]]


def bound_inputs(sim) -> BoundInputs:
    """The jobs of a :class:`~frenzy_env.simulator.ClusterSimulator` (its whole workload, whatever its
    clock): release times, shortest start-ups and each plan's run time, over the plans the predictor admits
    that truly fit in memory (the absent slots of ``SimConfig.interface="universal"``'s grid left out)."""
    cols = np.flatnonzero(np.asarray(sim.plan_present))  # (P',) the cluster's plan slots
    ok = (np.asarray(sim.pred_ok) & np.asarray(sim.true_ok))[:, cols]
    jobs = np.flatnonzero(ok.any(axis=1))
    iter_time = np.where(ok, np.asarray(sim.iter_time, dtype=np.float64)[:, cols], np.inf)[jobs]
    work = np.asarray(sim.work, dtype=np.float64)[jobs]
    start = np.array([[sim.startup_seconds(int(j), p) for p in cols.tolist()] for j in jobs.tolist()])
    start = np.where(ok[jobs], start, np.inf).reshape(jobs.size, cols.size)
    return BoundInputs(
        release=np.asarray(sim.submit, dtype=np.float64)[jobs],
        startup=start.min(axis=1) if jobs.size else np.zeros(0),
        plan_exec=iter_time * work[:, None],
        plan_count=np.asarray(sim.plan_count, dtype=np.float64)[cols],
        plan_type=np.asarray(sim.plan_type, dtype=np.int64)[cols],
        capacity=np.asarray(sim.cluster.type_capacity, dtype=np.float64),
    )


def isolated_bound(inp: BoundInputs) -> np.ndarray:
    """(J,) per-job lower bounds on the JCT, seconds: each job alone, on its fastest plan from its arrival."""
    return inp.startup + inp.exec_s


def srpt_flow_times(release: np.ndarray, proc: np.ndarray) -> np.ndarray:
    """(J,) flow times (completion - release) of preemptive shortest-remaining-processing-time on one
    machine of speed 1, in the jobs' order; optimal for the sum of flow times (Schrage, 1968)."""
    release = np.asarray(release, dtype=np.float64)
    proc = np.asarray(proc, dtype=np.float64)
    order = np.argsort(release, kind="stable").tolist()
    flows = np.zeros(release.size)
    heap: list[tuple[float, int]] = []
    t, i, n = 0.0, 0, len(order)
    while i < n or heap:
        if not heap:
            t = max(t, float(release[order[i]]))
        while i < n and release[order[i]] <= t:
            heapq.heappush(heap, (float(proc[order[i]]), order[i]))
            i += 1
        rem, j = heapq.heappop(heap)
        nxt = float(release[order[i]]) if i < n else math.inf
        if t + rem <= nxt:
            t += rem
            flows[j] = t - release[j]
        else:  # the next arrival comes first: it may preempt
            heapq.heappush(heap, (rem - (nxt - t), j))
            t = nxt
    return flows


def fluid_bound(inp: BoundInputs) -> float:
    """Mean JCT lower bound, seconds, of the single-machine relaxation (module docstring): the largest over
    type weightings ``sigma`` (all ones, inverse median GPU-seconds per type, and each type alone)."""
    if inp.num_jobs == 0:
        return math.nan
    g, cap, num_types = inp.gpu_s, inp.capacity, inp.capacity.shape[0]
    med = np.array([np.median(g[np.isfinite(g[:, t]), t]) if np.isfinite(g[:, t]).any() else np.inf
                    for t in range(num_types)])
    sigmas = [np.ones(num_types), np.where(np.isfinite(med), 1.0 / med, 1e-12)]
    sigmas += [np.where(np.arange(num_types) == t, 1.0, 1e-9) for t in range(num_types)]
    start = inp.release + inp.startup  # no progress before the first start-up ends
    best = 0.0
    for sigma in sigmas:
        need = np.min(g * sigma[None, :], axis=1) / float((cap * sigma).sum())
        best = max(best, float((srpt_flow_times(start, need) + inp.startup).mean()))
    return best


def lp_bound(inp: BoundInputs, step_s: float | None = None, window: float = 4.0, max_intervals: int = 4000,
             time_limit: float = 300.0, widen: int = 3, plans: bool = False) -> float:
    """Mean JCT lower bound, seconds, of the time-indexed linear program (module docstring); the first value
    of :func:`lp_solution`, which takes the same arguments."""
    return lp_solution(inp, step_s, window, max_intervals, time_limit, widen, plans)[0]


def lp_solution(inp: BoundInputs, step_s: float | None = None, window: float = 4.0, max_intervals: int = 4000,
                time_limit: float = 300.0, widen: int = 3, plans: bool = False) -> tuple[float, np.ndarray]:
    """The time-indexed linear program of :func:`lp_bound` (module docstring): ``(bound, completions)``, the
    mean JCT lower bound in seconds and the (J,) completion times ``C_j`` of the program that gave it
    (seconds; a job's fractional completion, an ordering hint for :func:`relaxed_schedule`, not a bound on
    that job alone).

    The grid is uniform, intervals of ``step_s`` seconds (default: half the median isolated JCT, widened so
    that the grid has at most ``max_intervals``). Job ``j`` has variables in the intervals of its window,
    from its earliest progress time ``r_j + s_j`` for ``window`` x (its flow time in the pooled-cluster SRPT
    schedule of :func:`fluid_bound`, all types weighted alike, plus ``e_j``), at least ``2 e_j``; work after
    the window counts as finishing at its end, with no capacity limit, which only loosens the bound (a wider
    window tightens it, and costs variables). Up to ``widen`` times, the windows of the jobs the optimum
    leaves work after are doubled and the program solved again (once no job has, the windows do not bind:
    the value is that of unlimited windows); the largest optimum is returned. ``time_limit``: HiGHS seconds
    per program; a program not solved to optimality raises :class:`ConfigError` (only optima are bounds).

    ``plans=False`` (the default) gives each job one variable per type and interval: it progresses at its
    fastest plan's speed there while it pays its most efficient plan's GPU-seconds. ``plans=True`` gives it
    one per plan on its speed-GPU envelope of each type (:attr:`BoundInputs.plan_modes`), so it pays the
    GPU-seconds of the plans whose speed it gets: every feasible point of that program maps to one of the
    first, so its optimum is never lower (a 150-job ITP window: 5.7% higher), but it has about six times the
    variables and is solved by dual simplex (HiGHS' interior point did not finish one program in 5 minutes);
    on that window its four programs took 25 minutes where the default took 12 seconds.
    """
    if step_s is not None and not (isinstance(step_s, (int, float)) and step_s > 0):
        raise ConfigError(f"step_s must be a positive number of seconds, got {step_s!r}")
    if not (isinstance(window, (int, float)) and window > 0):
        raise ConfigError(f"window must be a positive factor, got {window!r}")
    if not (isinstance(max_intervals, int) and max_intervals >= 1):
        raise ConfigError(f"max_intervals must be an integer >= 1, got {max_intervals!r}")
    if not (isinstance(widen, int) and widen >= 0):
        raise ConfigError(f"widen must be an integer >= 0, got {widen!r}")
    n = inp.num_jobs
    if n == 0:
        return math.nan, np.zeros(0)
    early = inp.release + inp.startup  # earliest progress
    e = inp.exec_s
    flow = srpt_flow_times(early, np.min(inp.gpu_s, axis=1) / inp.capacity.sum())
    width = np.maximum(window * (flow + e), 2.0 * e)
    best, completions = -math.inf, np.zeros(n)
    for _ in range(widen + 1):
        value, late, comp = _solve_lp(inp, early + width, step_s, max_intervals, time_limit, plans)
        if value > best:  # every program's optimum is a bound
            best, completions = value, comp
        spill = late > 1e-6
        if not spill.any():
            break
        width = np.where(spill, 2.0 * width, width)
    return best, completions


def _solve_lp(inp: BoundInputs, end: np.ndarray, step_s: float | None, max_intervals: int,
              time_limit: float, plans: bool) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`lp_bound`'s program with job windows ending at ``end``: (mean JCT bound in seconds, each job's
    share done after its window, each job's completion time ``C_j``)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n = inp.num_jobs
    early = inp.release + inp.startup
    e = inp.exec_s
    if plans:
        mode_job, mode_type, mode_exec, mode_gpu = inp.plan_modes
    else:  # one mode per usable type: its fastest plan's seconds, its most efficient plan's GPU-seconds
        mode_job, mode_type = np.nonzero(np.isfinite(inp.gpu_s))
        mode_exec, mode_gpu = inp.type_exec[mode_job, mode_type], inp.gpu_s[mode_job, mode_type]
    t0 = float(early.min())
    step = float(step_s) if step_s is not None else float(np.median(inp.startup + e)) / 2.0
    step = max(step, (float(end.max()) - t0) / max_intervals, 1e-9)
    num = int(math.ceil((float(end.max()) - t0) / step))
    tau = t0 + step * np.arange(num)
    tau_end = tau + step
    # variables y[j, m, k]: the share of job j done in mode m (a plan, or a type) in interval k (intervals of
    # its window), then one late share per job (after its window), then the completion times C_j
    first = np.floor((early - t0) / step).astype(np.int64)
    last = np.minimum(np.ceil((end - t0) / step).astype(np.int64), num)  # exclusive
    per_mode = last[mode_job] - first[mode_job]
    vm = np.repeat(np.arange(mode_job.size), per_mode)
    vk = first[mode_job][vm] + np.arange(vm.size) - np.repeat(np.cumsum(per_mode) - per_mode, per_mode)
    vj, vt = mode_job[vm], mode_type[vm]
    ny = vj.size
    busy = np.maximum(tau[vk], early[vj])  # the share's busy time is at least this
    span = np.minimum(tau_end[vk], end[vj]) - busy  # the part of the interval inside the job's window
    jobs = np.arange(n)
    late, cvar, nvar = ny + jobs, ny + n + jobs, ny + 2 * n
    ys = np.arange(ny)
    # equalities: each job done once (sum y + late = 1)
    a_eq = coo_matrix((np.ones(ny + n), (np.concatenate([vj, jobs]), np.concatenate([ys, late]))), shape=(n, nvar))
    # inequalities (<=): seconds per (job, interval), GPU-seconds per (type, interval), completion times
    pair, pair_row = np.unique(vj * num + vk, return_inverse=True)
    rate_hi = np.zeros(pair.size)
    rate_hi[pair_row] = span  # seconds of the interval in the job's window, shared among the modes it uses
    cap_key, cap_row = np.unique(vt * num + vk, return_inverse=True)
    cap_hi = inp.capacity[cap_key // num] * step
    r_cap, r_c = pair.size, pair.size + cap_key.size
    rows = np.concatenate([pair_row, r_cap + cap_row, r_c + vj, r_c + jobs, r_c + jobs])
    cols = np.concatenate([ys, ys, ys, late, cvar])
    # C_j >= sum busy * y + end_j * late + e_j / 2, as  busy * y + end_j * late - C_j <= -e_j / 2
    vals = np.concatenate([mode_exec[vm], mode_gpu[vm], busy, end, -np.ones(n)])
    a_ub = coo_matrix((vals, (rows, cols)), shape=(r_c + n, nvar))
    b_ub = np.concatenate([rate_hi, cap_hi, -e / 2.0])
    cost = np.zeros(nvar)
    cost[cvar] = 1.0
    bounds = np.zeros((nvar, 2))
    bounds[:, 1] = np.inf
    bounds[cvar, 0] = early + e  # C_j >= r_j + s_j + e_j
    res = linprog(cost, A_ub=a_ub.tocsr(), b_ub=b_ub, A_eq=a_eq.tocsr(), b_eq=np.ones(n), bounds=bounds,
                  method="highs-ds" if plans else "highs-ipm", options={"time_limit": float(time_limit)})
    if res.status != 0:
        raise ConfigError(f"the JCT bound's linear program was not solved to optimality: {res.message}")
    return float(res.fun) / n - float(inp.release.mean()), res.x[late], res.x[cvar]


def list_allocation(inp: BoundInputs, by: str = "time", order: np.ndarray | None = None):
    """An allocation rule for :func:`relaxed_schedule`: list scheduling. The ready jobs in priority order each
    take their fastest usable plan that still fits in its type's free GPUs (a job that finds none waits).
    Priority ``by="time"``: least remaining seconds on the job's fastest plan first (SRPT); ``"work"``: least
    remaining GPU-seconds on its most efficient plan first; or ``order``, a (J,) static priority (the smallest
    first, such as the LP's completion times of :func:`lp_solution`)."""
    if by not in ("time", "work"):
        raise ConfigError(f"by must be 'time' or 'work', got {by!r}")
    if order is not None and (np.shape(order) != (inp.num_jobs,) or not np.isfinite(order).all()):
        raise ConfigError(f"order must be ({inp.num_jobs},) finite priorities, got shape {np.shape(order)}")
    usable = np.isfinite(inp.plan_exec)
    size = inp.exec_s if by == "time" else inp.gpu_s.min(axis=1)
    prefs = [np.argsort(inp.plan_exec[j], kind="stable")[: int(usable[j].sum())] for j in range(inp.num_jobs)]

    def allocate(t: float, ready: np.ndarray, rem: np.ndarray) -> np.ndarray:
        prio = rem[ready] * size[ready] if order is None else np.asarray(order, dtype=np.float64)[ready]
        free = inp.capacity.astype(np.float64).copy()
        plan = np.full(ready.size, -1, dtype=np.int64)
        for i in np.argsort(prio, kind="stable").tolist():
            for q in prefs[int(ready[i])].tolist():
                if inp.plan_count[q] <= free[inp.plan_type[q]]:
                    free[inp.plan_type[q]] -= inp.plan_count[q]
                    plan[i] = q
                    break
        return plan

    return allocate


def relaxed_schedule(inp: BoundInputs, allocate=None) -> np.ndarray:
    """(J,) completion times, seconds, of a schedule in the bounds' relaxed world, made by ``allocate``.

    That world is the one the LP of :func:`lp_bound` relaxes further: each GPU type a pool of ``C_t`` GPUs
    with no nodes, a job progressing from ``r_j + s_j`` on one usable plan at a time, at that plan's speed,
    and changing plans, pausing and resuming free. Its optimum lies between the LP bound and the mean JCT of
    any schedule of it, so ``schedule / lp_bound`` caps how loose the LP is as a bound on that world; what
    separates the schedule from the environment's policies is node placement, restart and start-up costs,
    discrete decision instants, and the policies' own choices.

    At every arrival (``r_j + s_j``) and completion, ``allocate(t, ready, rem)`` re-allocates the GPUs from
    scratch: ``ready`` the (R,) available unfinished jobs, ``rem`` the (J,) share of each job's work left; it
    returns (R,) plan indices, -1 for a job that waits. A plan a job cannot use, or GPUs over a type's
    capacity, raise :class:`ConfigError`. Default: :func:`list_allocation` (SRPT).
    """
    allocate = list_allocation(inp) if allocate is None else allocate
    n = inp.num_jobs
    early = inp.release + inp.startup
    rem = np.ones(n)  # the share of each job's work left
    done = np.full(n, np.nan)
    t = float(early.min()) if n else 0.0
    while np.isnan(done).any():
        open_ = np.isnan(done)
        ready = np.flatnonzero(open_ & (early <= t + 1e-9))
        waiting = early[open_ & (early > t + 1e-9)]
        nxt = float(waiting.min()) if waiting.size else math.inf
        if ready.size == 0:
            t = nxt
            continue
        plan = np.asarray(allocate(t, ready, rem), dtype=np.int64)
        if plan.shape != ready.shape:
            raise ConfigError(f"allocate must return one plan per ready job, {ready.shape}, got {plan.shape}")
        run, plan = ready[plan >= 0], plan[plan >= 0]
        if plan.size and not np.isfinite(inp.plan_exec[run, plan]).all():
            bad = int(np.flatnonzero(~np.isfinite(inp.plan_exec[run, plan]))[0])
            raise ConfigError(f"allocate gave job {int(run[bad])} plan {int(plan[bad])}, which it cannot use")
        used = np.bincount(inp.plan_type[plan], weights=inp.plan_count[plan], minlength=inp.capacity.size)
        if (used > inp.capacity + 1e-9).any():
            raise ConfigError(f"allocate used {used.tolist()} GPUs per type, over the capacity "
                              f"{inp.capacity.tolist()}")
        if run.size == 0 and nxt == math.inf:
            raise ConfigError(f"relaxed_schedule: at t={t:.0f} s allocate ran no job and none is to come")
        speed = 1.0 / inp.plan_exec[run, plan]  # share of the work per second
        step = min(nxt, t + float((rem[run] / speed).min())) - t if run.size else nxt - t
        rem[run] = np.maximum(rem[run] - speed * step, 0.0)
        t += step
        fin = run[rem[run] <= 1e-9]
        done[fin] = t
        rem[fin] = 0.0
    return done


@dataclass(frozen=True)
class JctBound:
    """Lower bounds on an episode's average JCT, hours (:func:`jct_lower_bound`); ``best_h`` is the largest."""

    jobs: int
    isolated_h: float
    fluid_h: float
    lp_h: float

    @property
    def best_h(self) -> float:
        return float(np.nanmax([self.isolated_h, self.fluid_h, self.lp_h]))

    def as_row(self) -> dict[str, float]:
        """The table columns of these bounds (``bound_jobs``, ``isolated_h``, ``fluid_h``, ``lp_h`` and the
        largest, ``jct_bound_h``), as :func:`frenzy_env.evaluation.episodes.jct_bounds` writes them."""
        return {"bound_jobs": self.jobs, "isolated_h": self.isolated_h, "fluid_h": self.fluid_h, "lp_h": self.lp_h,
                "jct_bound_h": self.best_h}


def jct_lower_bound(sim, lp: bool = True, **lp_kwargs) -> JctBound:
    """The isolated, fluid and (``lp=True``) LP lower bounds on the average JCT of ``sim``'s workload
    (a :class:`~frenzy_env.simulator.ClusterSimulator`; from an env, ``env.unwrapped.sim`` after ``reset``),
    hours. ``lp_kwargs`` go to :func:`lp_bound`."""
    inp = bound_inputs(sim)
    if inp.num_jobs == 0:
        return JctBound(0, math.nan, math.nan, math.nan)
    iso = float(isolated_bound(inp).mean())
    return JctBound(
        jobs=inp.num_jobs,
        isolated_h=iso / HOUR,
        fluid_h=fluid_bound(inp) / HOUR,
        lp_h=lp_bound(inp, **lp_kwargs) / HOUR if lp else math.nan,
    )
