"""Sia (Subramanya et al., SOSP 2023) as a baseline: a goodput-optimising integer program every round.

What it does, as the paper describes it, mapped onto this environment:

* **Rounds** of ``round_s`` = 60 s of simulated time, at every multiple of ``round_s`` while jobs are in the
  system: the policy sets a timer (a wake-up, ``env.request_wakeup``) at the next round boundary, so the env
  consults it there even when nothing happens in the simulator. The first round is at the first decision
  (the first arrival); after an idle gap (no job in the system: no round, no timer) the first decision with a
  job in the system again starts a round. At decision points inside a round (events) nothing is re-solved
  and the policy only carries out the round's plan. ``rounds_at`` lists the times of the rounds held.
* **Candidate configurations** per job and GPU type: 1, 2, 4 GPUs on one node, then whole nodes. The
  environment's plan slots are (GPU type, power-of-two count), so whole-node counts are 8, 16, 32, ... on
  8-GPU nodes (4, 8, 16, ... on 4-GPU nodes); Sia's non-power-of-two node counts (3 nodes = 24 GPUs) have no
  plan slot and are not offered. Only plans the configured memory predictor allows (and that have not
  crashed for the job) are candidates -- the same information every baseline gets.
* **Goodput** of a configuration = throughput, ``1 / view.iter_time`` (iterations/s, consolidated placement).
  Jobs have a fixed global batch here, so statistical efficiency is 1 and goodput equals throughput.
* The goodput matrix is **normalised per job** by the job's smallest candidate goodput (its row minimum is 1).
* **Restart factor**: for a running job, every configuration other than its current one is scaled by
  Pollux's re-allocation factor ``max(age - restarts * penalty, 0) / (age + penalty)`` (1 while
  ``age < penalty``), with ``penalty`` = the simulator's restart cost of the job (``view.restart_seconds``)
  and ``age`` = seconds since submission.
* **Utility** ``goodput ** p`` with ``p = -0.5``. With ``p < 0`` Sia minimises the summed utility; a job given
  no configuration counts as goodput ``1e-4`` (Sia's ``ZERO_ALLOC_GAIN``), so the solver prefers giving every
  job something before scaling any job up. (``p > 0`` maximises the summed utility.)
* **Integer program** (``scipy.optimize.milp``, HiGHS): binary ``x[j, c]``; at most one configuration per job;
  per GPU type the chosen GPUs fit the type's capacity (less GPUs held by running jobs outside the env's
  visible slots, which the policy cannot act on). Jobs still starting or restarting are pinned to their
  current configuration (the environment refuses to resize them, as Sia does not re-allocate a job during a
  checkpoint-restore).
* **No preemption to zero** by default: a running job always keeps one configuration (it may be shrunk or
  moved, never stopped). With ``preempt=True`` (an env made with ``preemption=True``; not ``sia``'s
  default, and not in the published tables) a running job past its start-up may get no configuration, as
  in Sia proper, and is then preempted back to the queue before the round's other steps; keeping a running
  job counts ``1 + preempt_margin`` times its value (goodput utility or completion rate) in the program,
  a hysteresis on preemptions.
* **Placement**: partial-node configurations (fewer GPUs than a node holds) are carried out only if one node
  of that type can hold them (the environment's best-fit placer then uses that node); whole-node
  configurations go to the environment's placer (fewest nodes). The plan is carried out in order: resizes that
  shrink first, then moves and growths, then starts, largest first; a step that is not legal now (GPUs still
  held, fragmentation) is retried while other steps free GPUs, and dropped at the end of the round.
* ``requested_only=True`` restricts each job to its requested GPU count (Sia's "rigid" jobs), on any type; a
  job none of whose plans at that count the predictor admits or that have not crashed gets the smallest count
  that has one (``fifo``'s rule: the user resubmits it on more GPUs), so no job is left without a configuration.
  Rigid jobs keep their global batch in Sia's own artifact too (github.com/siasosp23/artifacts,
  ``sia-simulator/cluster.py``: batch-size tuning off for the "rigid" category; ``sia.py``: "goodput =
  throughput since bsz is fixed").

``objective="completion"`` (registered as ``sia_srpt``, :class:`SiaSrptPolicy`; not in the paper) keeps all of
the above but the utility: it maximises the summed *estimated completion rate* ``1 / T[j, c]`` of the jobs,
``T[j, c] = R_j * iter_time[j, c]`` the estimated seconds job ``j`` still needs on configuration ``c`` (``R_j``
its estimated remaining iterations, from ``view.work_estimate`` and its progress, at least
:data:`REMAINING_FLOOR` of its estimate), plus the job's restart seconds when a running job would change
configuration. That replaces the restart factor, with the same cost: ``view.restart_seconds`` of the job on
its current configuration, for every target. A job without a configuration counts 0. Average JCT is the
time-integral of the number of jobs in the system, and ``1 / T`` is the rate at which a job leaves it, so this
favours jobs close to done (shortest remaining time first) and scale-out that pays for its restart. Sia's
objective uses no job length at all.

:class:`SiaTeacher` re-solves the same program at every decision instant instead of every round: the planner
that the learned agents imitate and are guided by (``agents.ppo``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy
from frenzy_env.errors import ConfigError
from frenzy_env.simulator.view import FUTURE, QUEUED

ZERO_ALLOC_GOODPUT = 1e-4  # Sia's ZERO_ALLOC_GAIN: the goodput a job with no allocation counts as
REMAINING_FLOOR = 0.1  # objective="completion": a job's estimated remaining work is at least this share of its estimate
OBJECTIVES = ("goodput", "completion")


def solve_sia_milp(
    goodput: np.ndarray,
    counts: np.ndarray,
    types: np.ndarray,
    capacity: np.ndarray,
    *,
    p: float = -0.5,
    must_allocate: np.ndarray | None = None,
    pinned: np.ndarray | None = None,
    time_limit: float = 10.0,
    fast: bool = True,
) -> np.ndarray:
    """Sia's integer program over a (normalised, restart-scaled) goodput matrix.

    Parameters
    ----------
    goodput: (J, C) goodput of each job on each configuration; 0 (or less) marks a configuration that is
        not a candidate for that job.
    counts: (C,) GPUs of each configuration. types: (C,) GPU-type index of each configuration.
    capacity: (T,) GPUs of each type available to these jobs.
    p: the utility exponent (``goodput ** p``); p < 0 minimises, p > 0 maximises.
    must_allocate: (J,) bool, jobs that must get exactly one configuration (running jobs).
    pinned: (J,) int, a configuration a job must keep (-1 for none).
    fast: True (the default) returns the same choice faster: (1) when every job's own best configuration is
        better than its others (and than none, unless it must get one) by more than :data:`FAST_MARGIN` and
        these best configurations together fit every type's capacity, the program's optimum is that choice,
        unique, and its LP relaxation is integral at it, so it is returned without calling HiGHS; (2) otherwise
        HiGHS gets the same model (same variables in the same order, same matrix, bounds and options) as
        through ``scipy.optimize.milp``, without milp's input validation and sparse conversions. False:
        ``scipy.optimize.milp`` on every call, the reference path (``tests/baselines/test_sia.py`` compares the two).

    Returns
    -------
    (J,) int: the chosen configuration of each job, -1 for none.
    """
    goodput = np.asarray(goodput, dtype=np.float64)
    n_jobs, n_cfg = goodput.shape
    if p == 0 or not math.isfinite(p):
        raise ConfigError(f"p must be a non-zero finite number, got {p!r}")
    if n_jobs == 0:
        return np.zeros(0, dtype=np.int64)
    rows, cols = np.nonzero(goodput > 0)  # one variable per candidate (job, config)
    chosen = np.full(n_jobs, -1, dtype=np.int64)
    if rows.size == 0:
        return chosen
    util = goodput[rows, cols] ** p
    c = util - ZERO_ALLOC_GOODPUT**p if p < 0 else -util  # minimise
    nvar = rows.size
    n_types = len(capacity)
    # constraint rows: one per job (sum x <= 1, or == 1), one per GPU type (sum counts * x <= capacity)
    if not fast:
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix

        a_rows = np.concatenate([rows, n_jobs + np.asarray(types)[cols]])
        a_cols = np.concatenate([np.arange(nvar), np.arange(nvar)])
        a_vals = np.concatenate([np.ones(nvar), np.asarray(counts, dtype=np.float64)[cols]])
        a = coo_matrix((a_vals, (a_rows, a_cols)), shape=(n_jobs + n_types, nvar)).tocsr()
    lb = np.zeros(n_jobs + n_types)
    ub = np.concatenate([np.ones(n_jobs), np.asarray(capacity, dtype=np.float64)])
    has_var = np.bincount(rows, minlength=n_jobs) > 0
    if must_allocate is not None:
        lb[:n_jobs][np.asarray(must_allocate, dtype=bool) & has_var] = 1.0
    var_lb = np.zeros(nvar)
    var_ub = np.ones(nvar)
    if pinned is not None:
        pinned = np.asarray(pinned)
        pin_rows = pinned[rows] >= 0
        var_ub[pin_rows & (cols != pinned[rows])] = 0.0
        var_lb[pin_rows & (cols == pinned[rows])] = 1.0
    if fast:
        quick = _separable_optimum(c, rows, cols, n_jobs, np.asarray(counts), np.asarray(types), capacity,
                                   lb[:n_jobs] > 0, pinned)
        if quick is not None:
            return quick
        x = _highs_direct(c, rows, np.asarray(types)[cols], np.asarray(counts, dtype=np.float64)[cols], n_jobs,
                          n_types, lb, ub, var_lb, var_ub, time_limit)
    else:
        x = milp(
            c,
            constraints=LinearConstraint(a, lb, ub),
            integrality=np.ones(nvar),
            bounds=Bounds(var_lb, var_ub),
            options={"time_limit": float(time_limit), "disp": False},
        ).x
    if x is None:  # infeasible or out of time without a solution: keep everything as it is
        if pinned is not None:
            return np.where(np.asarray(pinned) >= 0, pinned, -1).astype(np.int64)
        return chosen
    take = x > 0.5
    chosen[rows[take]] = cols[take]
    return chosen


FAST_MARGIN = 1e-6  # solve_sia_milp(fast=True): the objective margin by which each job's best must be unique


def _separable_optimum(
    c: np.ndarray, rows: np.ndarray, cols: np.ndarray, n_jobs: int, counts: np.ndarray, types: np.ndarray,
    capacity: np.ndarray, must: np.ndarray, pinned: np.ndarray | None,
) -> np.ndarray | None:
    """The program's optimum when it separates: each job's own best variable (least ``c``; a pinned job's pinned
    one) better than its other variables, and than no variable unless the job must get one, by more than
    :data:`FAST_MARGIN`, and the chosen GPUs within every type's capacity. That choice is then the unique optimum
    of the program and of its LP relaxation, which is what HiGHS returns; None when the test fails (solve)."""
    order = np.lexsort((c, rows))  # by job, then by objective
    r, cc = rows[order], c[order]
    first = np.ones(r.size, dtype=bool)
    first[1:] = r[1:] != r[:-1]
    best_idx = order[first]
    best_job = r[first]
    best_c = cc[first]
    # the runner-up of each job (inf where the job has one variable)
    nxt = np.flatnonzero(first) + 1
    ok_n = (nxt < r.size)
    ok_n[ok_n] = ~first[nxt[ok_n]]
    runner = np.full(best_idx.size, np.inf)
    runner[ok_n] = cc[nxt[ok_n]]
    chosen = np.full(n_jobs, -1, dtype=np.int64)
    if pinned is not None:
        pin = np.asarray(pinned)[best_job]
        is_pin = pin >= 0
        if is_pin.any():  # the pinned variable must be a candidate; then it is forced
            pin_ok = np.zeros(best_job.size, dtype=bool)
            hit = (pinned[rows] >= 0) & (cols == pinned[rows])
            pin_ok[np.searchsorted(best_job, rows[hit])] = True
            if not pin_ok[is_pin].all():
                return None
            free = ~is_pin
        else:
            free = np.ones(best_job.size, dtype=bool)
    else:
        pin, free = None, np.ones(best_job.size, dtype=bool)
    tol = FAST_MARGIN * np.maximum(1.0, np.abs(best_c))
    if not (runner[free] - best_c[free] > tol[free]).all():
        return None
    if not (must[best_job[free]] | (best_c[free] < -tol[free])).all():
        return None
    chosen[best_job[free]] = cols[best_idx[free]]
    if pin is not None:
        chosen[best_job[~free]] = pin[~free]
    taken = chosen >= 0
    used = np.bincount(types[chosen[taken]], weights=counts[chosen[taken]].astype(np.float64),
                       minlength=len(capacity))
    if (used > np.asarray(capacity, dtype=np.float64)).any():
        return None
    return chosen


def _highs_direct(
    c: np.ndarray, rows: np.ndarray, var_type: np.ndarray, var_count: np.ndarray, n_jobs: int, n_types: int,
    lb: np.ndarray, ub: np.ndarray, var_lb: np.ndarray, var_ub: np.ndarray, time_limit: float,
) -> np.ndarray | None:
    """HiGHS on the model ``scipy.optimize.milp`` would pass it: the same constraint matrix in canonical CSC form
    (each variable's column holds its job's row, then its type's row), bounds and options."""
    from scipy.optimize._highspy._highs_wrapper import _highs_wrapper

    nvar = c.size
    indptr = np.arange(0, 2 * nvar + 1, 2, dtype=np.int32)
    indices = np.empty(2 * nvar, dtype=np.int32)
    indices[0::2] = rows
    indices[1::2] = n_jobs + var_type
    data = np.empty(2 * nvar, dtype=np.float64)
    data[0::2] = 1.0
    data[1::2] = var_count
    options = {"log_to_console": False, "mip_max_nodes": None, "time_limit": float(time_limit)}
    res = _highs_wrapper(np.asarray(c, dtype=np.float64), indptr, indices, data, lb.astype(np.float64),
                         ub.astype(np.float64), var_lb, var_ub, np.ones(nvar, dtype=np.uint8), options)
    x = res.get("x", None)
    return np.array(x) if x is not None else None


class SiaPolicy(ScriptedPolicy):
    """Sia: per-round integer program over per-job normalised goodput (see the module docstring).

    Parameters
    ----------
    env: the environment. round_s: round length in simulated seconds (60). p: utility exponent (-0.5).
    requested_only: only configurations with the job's requested GPU count (False: any count).
    restart_penalty: seconds a re-allocation costs in the restart factor (default: the simulator's
        ``view.restart_seconds`` of the job on its plan). time_limit: HiGHS time limit per round, seconds.
    objective: ``"goodput"`` (Sia's normalised goodput utility, with ``p``) or ``"completion"`` (the summed
        estimated completion rates, see the module docstring; ``p`` is then unused).
    move_margin: a running job's configurations other than its current one count ``1 / (1 + move_margin)``
        of their goodput (or completion rate), so it changes configuration only for a gain above that
        margin (a hysteresis on moves; 0, the default, is the published behaviour). An attribute, so a
        controller may change it between solves.
    rate_power, efficiency_power: ``objective="completion"`` only (not in the paper; the defaults, 1 and 0,
        are ``sia_srpt``): a candidate's value is ``rate ** rate_power * efficiency ** efficiency_power``,
        ``rate`` its estimated completion rate and ``efficiency`` the job's fewest GPU-seconds per iteration
        over its candidates divided by this candidate's (1 for its most efficient one). A power above 1
        favours jobs close to done more strongly (below 1, spreading the GPUs); an efficiency power above 0
        trades a job's speed for GPUs left to others. Attributes, so a controller may change them between
        solves.
    type_power: ``objective="completion"`` only (not in the paper; 0, the default, is ``sia_srpt``): each
        job's candidates count ``k ** -type_power`` of their value, ``k`` the number of GPU types it has a
        plan the predictor admits on, so jobs that can run on fewer types go first and the flexible ones take
        what is left. A static, non-clairvoyant weight, suggested by the schedules of the JCT bounds' relaxed
        world (:func:`frenzy_env.evaluation.bounds.relaxed_schedule`). An attribute.
    move_cooldown: a running job keeps its configuration until it has held it ``move_cooldown`` times its
        restart seconds (``view.restart_seconds``): a hysteresis in time on moves (0, the default: none; not
        in the paper). An attribute.
    preempt: a running job past its start-up may get no configuration and is then preempted (needs an env
        made with ``preemption=True``; False, the default, is the published behaviour). preempt_margin:
        with ``preempt``, a running job's configurations count ``1 + preempt_margin`` times their value, so
        it is stopped only when what its GPUs give others beats that (0: no hysteresis). Attributes.
    lookahead_s: an **oracle** for measuring what anticipating arrivals is worth (``objective="completion"``
        only; not a realisable scheduler, and not in the paper): the jobs that will arrive within
        ``lookahead_s`` seconds join the program as if queued, each candidate's value weighted by ``1 -
        (arrival - now) / lookahead_s``; what the program gives them is reserved (left to no other job) but
        nothing starts before they arrive. It reads the future arrivals from the view. 0, the default: none.
    """

    name = "sia"

    def __init__(
        self,
        env: Any,
        round_s: float = 60.0,
        p: float = -0.5,
        requested_only: bool = False,
        restart_penalty: float | None = None,
        time_limit: float = 10.0,
        objective: str = "goodput",
        move_margin: float = 0.0,
        rate_power: float = 1.0,
        efficiency_power: float = 0.0,
        type_power: float = 0.0,
        move_cooldown: float = 0.0,
        preempt: bool = False,
        preempt_margin: float = 0.0,
        lookahead_s: float = 0.0,
    ) -> None:
        super().__init__(env)
        if not isinstance(preempt, (bool, np.bool_)):
            raise ConfigError(f"preempt must be True or False, got {preempt!r}")
        if preempt and not getattr(env.unwrapped, "preemption", False):
            raise ConfigError("preempt=True needs an environment made with preemption=True (it has no preempt action)")
        if not (isinstance(preempt_margin, (int, float)) and math.isfinite(preempt_margin) and preempt_margin >= 0):
            raise ConfigError(f"preempt_margin must be a finite number >= 0, got {preempt_margin!r}")
        self.preempt = bool(preempt)
        self.preempt_margin = float(preempt_margin)
        if objective not in OBJECTIVES:
            raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        if not (isinstance(round_s, (int, float)) and round_s > 0):
            raise ConfigError(f"round_s must be a positive number of seconds, got {round_s!r}")
        if not (isinstance(p, (int, float)) and p != 0 and math.isfinite(p)):
            raise ConfigError(f"p must be a non-zero finite number, got {p!r}")
        if restart_penalty is not None and not restart_penalty >= 0:
            raise ConfigError(f"restart_penalty must be >= 0 seconds, got {restart_penalty!r}")
        self.round_s = float(round_s)
        self.p = float(p)
        self.requested_only = bool(requested_only)
        if not (isinstance(move_margin, (int, float)) and math.isfinite(move_margin) and move_margin >= 0):
            raise ConfigError(f"move_margin must be a finite number >= 0, got {move_margin!r}")
        self.move_margin = float(move_margin)
        if not (isinstance(rate_power, (int, float)) and math.isfinite(rate_power) and rate_power > 0):
            raise ConfigError(f"rate_power must be a finite number > 0, got {rate_power!r}")
        if not (isinstance(efficiency_power, (int, float)) and math.isfinite(efficiency_power)
                and efficiency_power >= 0):
            raise ConfigError(f"efficiency_power must be a finite number >= 0, got {efficiency_power!r}")
        if not (isinstance(move_cooldown, (int, float)) and math.isfinite(move_cooldown) and move_cooldown >= 0):
            raise ConfigError(f"move_cooldown must be a finite number >= 0, got {move_cooldown!r}")
        if not (isinstance(type_power, (int, float)) and math.isfinite(type_power) and type_power >= 0):
            raise ConfigError(f"type_power must be a finite number >= 0, got {type_power!r}")
        if objective != "completion" and (rate_power != 1 or efficiency_power != 0 or type_power != 0):
            raise ConfigError(
                f"rate_power, efficiency_power and type_power apply to objective='completion' only, got "
                f"objective={objective!r} with rate_power={rate_power!r}, efficiency_power={efficiency_power!r}, "
                f"type_power={type_power!r}"
            )
        if not (isinstance(lookahead_s, (int, float)) and math.isfinite(lookahead_s) and lookahead_s >= 0):
            raise ConfigError(f"lookahead_s must be a finite number of seconds >= 0, got {lookahead_s!r}")
        if lookahead_s > 0 and objective != "completion":
            raise ConfigError(f"lookahead_s applies to objective='completion' only, got objective={objective!r}")
        self.lookahead_s = float(lookahead_s)
        self.move_cooldown = float(move_cooldown)
        self.rate_power = float(rate_power)
        self.efficiency_power = float(efficiency_power)
        self.type_power = float(type_power)
        self.restart_penalty = restart_penalty
        self.time_limit = float(time_limit)
        self.objective = objective
        self.rounds = 0
        self.reset()

    def reset(self) -> None:
        super().reset()
        self._next_round = -math.inf
        self._todo: list[tuple[str, int, int]] = []  # ("preempt" | "resize" | "start", job, plan)
        self.rounds = 0
        self.rounds_at: list[float] = []  # simulated times of the rounds held this episode

    # ------------------------------------------------------------------ acting
    def act(self, mask: np.ndarray) -> int:
        view = self.view
        busy = self._in_system(view)
        if view.now >= self._next_round and busy:
            self.replan()
            self.rounds += 1
            self.rounds_at.append(view.now)
            self._next_round = (math.floor(view.now / self.round_s) + 1) * self.round_s
        if busy:  # the next round happens even if nothing happens before it
            self.wake_at(self._next_round)
        action = self.next_step(mask)
        return self.wait_action(mask) if action is None else action

    def replan(self) -> None:
        """Solve the integer program for the present state (:meth:`plan_round`) and make it the plan to carry
        out, replacing what was left of the previous one."""
        self._todo = self.plan_round()

    def next_step(self, mask: np.ndarray) -> int | None:
        """The action of the plan's first step that is legal now, taken off the plan; None when no step is
        legal now, and the plan is then dropped (the rest waits for the next solve)."""
        for i, (kind, job, plan) in enumerate(self._todo):
            action = self._legal_action(kind, job, plan, mask)
            if action is not None:
                del self._todo[i]
                return action
        self._todo = []
        return None

    def _in_system(self, view: Any) -> bool:
        """Jobs are queued or running (whether or not within the env's windows)."""
        if view.running:
            return True
        return len(self.env.visible_queue) > 0 or bool((view.status == QUEUED).any())

    def _legal_action(self, kind: str, job: int, plan: int, mask: np.ndarray) -> int | None:
        env, view = self.env, self.view
        if kind == "start":
            if view.status[job] != QUEUED:
                return None
            action = env.start_action(job, plan)
            own = None
        elif kind == "preempt":
            action = env.preempt_action(job) if job in view.running else None
            return action if action is not None and mask[action] else None
        else:
            run = view.running.get(job)
            if run is None or run.plan == plan:
                return None
            action = env.resize_action(job, plan)
            own = run.counts
        if action is None or not mask[action]:
            return None
        t = int(view.plan_type[plan])
        count = int(view.plan_count[plan])
        if count < int(view.max_node_gpus[t]):  # a partial-node configuration stays on one node
            free = view.free if own is None else view.free + own
            if not (free[self.env.cluster.node_type_index == t] >= count).any():
                return None
        return action

    # ------------------------------------------------------------------ one round
    def candidates(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), P) bool: Sia's candidate configurations of each job (plan slots)."""
        view = self.view
        cand = view.available_plans(jobs).copy()
        if self.requested_only:
            levels = view.plan_counts_levels
            for row, j in enumerate(jobs.tolist()):
                want = view.jobs[j].requested_gpus
                ok = cand[row]
                if want:
                    below = levels[levels <= want]
                    target = int(below.max()) if below.size else int(levels[0])
                    if not (ok & (view.plan_count == target)).any() and ok.any():
                        target = int(view.plan_count[ok].min())  # none at the request left: fifo's rule
                else:  # no request: the smallest count the job can run on
                    target = int(view.plan_count[ok].min()) if ok.any() else 0
                cand[row] &= view.plan_count == target
        return cand

    def goodput_matrix(self, jobs: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """(len(jobs), P): normalised goodput of each candidate, restart-scaled for running jobs; 0 elsewhere."""
        view = self.view
        with np.errstate(divide="ignore"):
            raw = np.where(cand, 1.0 / view.iter_time[jobs], 0.0)  # iterations / s
        raw[~np.isfinite(raw)] = 0.0
        pos = np.where(raw > 0, raw, np.inf)
        row_min = pos.min(axis=1, keepdims=True)
        good = np.where(raw > 0, raw / np.where(np.isfinite(row_min), row_min, 1.0), 0.0)
        running_jobs, now = view.running, view.now
        for row, j in enumerate(jobs.tolist()):
            run = running_jobs.get(j)
            if run is None:
                continue
            # the simulator's restart cost of this job (restart on a plan of its current shape)
            penalty = view.restart_seconds(j, run.plan) if self.restart_penalty is None else self.restart_penalty
            age = now - float(view.submit[j])
            restarts = int(view.job_restarts[j])
            factor = 1.0 if age < penalty else max(age - restarts * penalty, 0.0) / (age + penalty)
            keep = good[row, run.plan]
            good[row] *= factor
            good[row, run.plan] = keep if keep > 0 else 1.0
        return good

    def remaining_estimate(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs),) estimated iterations each job still needs: its work estimate less its progress now
        (a running job's counted to the present), at least :data:`REMAINING_FLOOR` of the estimate."""
        view = self.view
        done = np.array([view.progress(j) for j in jobs.tolist()], dtype=np.float64)
        estimate = view.work_estimate[jobs]
        return np.maximum(estimate - done, REMAINING_FLOOR * estimate)

    def completion_rates(self, jobs: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """(len(jobs), P): ``1 / T`` per candidate, ``T`` the estimated seconds to finish on it, plus, for a
        running job that would change configuration, ``view.restart_seconds`` on its current one (the cost
        Sia's restart factor uses); 0 where not a candidate."""
        view = self.view
        with np.errstate(invalid="ignore"):
            secs = np.where(cand, view.iter_time[jobs], np.inf) * self.remaining_estimate(jobs)[:, None]
        running = view.running
        for row, j in enumerate(jobs.tolist()):
            run = running.get(j)
            if run is not None:
                keep = secs[row, run.plan]
                secs[row] += view.restart_seconds(j, run.plan)
                secs[row, run.plan] = keep
        with np.errstate(divide="ignore"):
            rate = 1.0 / secs
        return np.where(np.isfinite(rate) & (secs > 0), rate, 0.0)

    def type_counts(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs),) the number of GPU types on which each job has a plan the predictor admits (at least 1)."""
        view = self.view
        on_type = np.zeros((jobs.size, view.num_types), dtype=bool)
        rows, plans = np.nonzero(np.asarray(view.pred_ok)[jobs])
        on_type[rows, np.asarray(view.plan_type)[plans]] = True
        return np.maximum(on_type.sum(axis=1), 1).astype(np.float64)

    def plan_efficiency(self, jobs: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """(len(jobs), P): each candidate's GPU-seconds per iteration relative to the job's fewest over its
        candidates (1 for its most efficient, smaller for the others); 0 where not a candidate."""
        view = self.view
        gpu_s = np.where(cand, view.iter_time[jobs] * view.plan_count[None, :], np.inf)
        gpu_s[~np.isfinite(gpu_s) | (gpu_s <= 0)] = np.inf
        best = gpu_s.min(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):  # inf / inf in rows without a candidate, masked out
            return np.where(np.isfinite(gpu_s), best / gpu_s, 0.0)

    def plan_round(self) -> list[tuple[str, int, int]]:
        """Solve one round; returns the ordered steps (resizes then starts) that carry the choice out."""
        env, view = self.env, self.view
        running = np.asarray(env.visible_running, dtype=np.int64)
        queued = np.asarray(env.visible_queue, dtype=np.int64)
        jobs = np.concatenate([running, queued])
        if jobs.size == 0:
            return []
        nr, n_real = running.size, jobs.size
        running_jobs, now = view.running, view.now
        weight = None
        if self.lookahead_s > 0:  # the oracle: arrivals within the horizon join as queued jobs, weighted
            status, submit = np.asarray(view.status), np.asarray(view.submit, dtype=np.float64)
            future = np.flatnonzero((status == FUTURE) & (submit <= now + self.lookahead_s))
            jobs = np.concatenate([jobs, future])
            weight = np.ones(jobs.size)
            weight[n_real:] = np.clip(1.0 - (submit[future] - now) / self.lookahead_s, 0.0, 1.0)
        cand = self.candidates(jobs)
        current = np.array([running_jobs[int(j)].plan for j in running], dtype=np.int64)
        cand[np.arange(nr), current] = True  # a running job can always keep what it has
        if self.objective == "completion":
            good, p = self.completion_rates(jobs, cand), self.rate_power
            if weight is not None:
                good = good * weight[:, None]
            if self.type_power > 0:
                good = good * self.type_counts(jobs)[:, None] ** -self.type_power
            if p != 1.0 or self.efficiency_power > 0:
                if self.efficiency_power > 0:
                    good = good * self.plan_efficiency(jobs, cand) ** (self.efficiency_power / p)
                top = good.max()  # rates are 1e-6..1e-3 per second: powers of them fall below HiGHS' tolerances
                good = good / top if top > 0 else good
        else:
            good, p = self.goodput_matrix(jobs, cand), self.p
        if self.move_margin > 0 and nr:  # hysteresis: other configurations of a running job count less
            keep = good[np.arange(nr), current].copy()
            good[:nr] /= 1.0 + self.move_margin
            good[np.arange(nr), current] = keep
        pinned = np.full(jobs.size, -1, dtype=np.int64)
        warming = np.array([running_jobs[int(j)].progress_from > now for j in running], dtype=bool)
        if self.move_cooldown > 0:
            warming |= np.array([
                now - running_jobs[int(j)].held_since < self.move_cooldown * view.restart_seconds(int(j), int(c))
                for j, c in zip(running.tolist(), current.tolist())
            ], dtype=bool)
        pinned[:nr][warming] = current[warming]
        must = np.zeros(jobs.size, dtype=bool)
        must[:nr] = not self.preempt  # preempt: a running job may get nothing (pinned ones keep their plan)
        if self.preempt and self.preempt_margin > 0 and nr:  # hysteresis: keeping a running job counts more
            good[:nr] = good[:nr] * (1.0 + self.preempt_margin)  # (a larger goodput is better for p < 0 too)
        # capacity per type, less GPUs of running jobs the policy cannot see (and so cannot move)
        capacity = self.env.cluster.type_capacity.astype(np.float64).copy()
        visible = set(running.tolist())
        for j, run in running_jobs.items():
            if j not in visible:
                capacity[int(view.plan_type[run.plan])] -= float(run.counts.sum())
        choice = solve_sia_milp(
            good, view.plan_count, view.plan_type, capacity, p=p, must_allocate=must, pinned=pinned,
            time_limit=self.time_limit,
        )
        resizes, starts, stops = [], [], []
        for row, j in enumerate(jobs[:n_real].tolist()):  # the oracle's future jobs only hold their GPUs
            plan = int(choice[row])
            if plan < 0:
                if row < nr:  # only with preempt (otherwise the program gives every running job one)
                    stops.append(("preempt", j, -1))
                continue
            if row < nr:
                if plan != current[row]:
                    growth = int(view.plan_count[plan]) - int(view.plan_count[current[row]])
                    resizes.append((growth, row, ("resize", j, plan)))
            else:
                starts.append((-int(view.plan_count[plan]), row, ("start", j, plan)))
        resizes.sort()
        starts.sort()
        return stops + [step for *_, step in resizes] + [step for *_, step in starts]


class SiaSrptPolicy(SiaPolicy):
    """Sia with ``objective="completion"``: its rounds, candidates, integer program and carry-out, maximising
    the summed estimated completion rates instead of normalised goodput (see the module docstring). Takes
    :class:`SiaPolicy`'s other keywords."""

    name = "sia_srpt"

    def __init__(self, env: Any, **kwargs: Any) -> None:
        super().__init__(env, objective="completion", **kwargs)


class SiaTeacher:
    """The planner teacher: Sia's integer program (:class:`SiaPolicy`: its candidates, goodput, restart factor
    and the order it carries a plan out in) re-solved at every decision *instant* instead of every 60 s round:
    the first decision at a new simulated time solves, the later ones of that instant carry the plan out, and
    a step that is not legal is skipped. It sets no timers, so it decides exactly where the agent does (at
    events), and its states are states the agent meets.

    On four validation workloads it matched or beat round-based Sia (average JCT 3.23 vs 3.26 h, 2.62 vs
    2.63, 10.71 vs 10.74, 1.68 vs 1.97) in 4-15 s per episode instead of about a minute; on the 28 test
    workloads it is level with Sia. It is a teacher, not a registered baseline (Sia as published re-plans in
    rounds): the learned agents imitate it (``agents.ppo.warmstart``) and are guided by it (``agents.ppo.guide``). It
    drives a :class:`SiaPolicy` through its ``replan`` and ``next_step``, so both stay one implementation.
    ``objective``: :class:`SiaPolicy`'s (``"completion"`` for ``sia_srpt``'s); ``move_margin``: its move
    hysteresis (``self.sia.move_margin`` may be changed between decisions); further keywords go to
    :class:`SiaPolicy` (``rate_power``, ``efficiency_power``, ...). ``act(mask) -> action``; ``reset()`` at an
    episode's start.
    """

    def __init__(self, env: Any, objective: str = "goodput", move_margin: float = 0.0, **sia_kwargs: Any) -> None:
        self.sia = SiaPolicy(env, objective=objective, move_margin=move_margin, **sia_kwargs)
        self.env = self.sia.env
        self.reset()

    def reset(self) -> None:
        self.sia.reset()
        self._solved_at: float | None = None

    def act(self, mask: np.ndarray) -> int:
        now = self.sia.view.now
        if now != self._solved_at:
            self.sia.replan()
            self._solved_at = now
        action = self.sia.next_step(mask)
        if action is not None:
            return action
        return 0 if mask[0] else int(np.flatnonzero(mask)[0])
