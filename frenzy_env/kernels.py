"""Compiled kernels of the simulator's and the environment's hot paths (numba), and the switch back to numpy.

A masked environment step is a few dozen small array operations; in numpy each costs a microsecond of call
overhead whatever its size. The functions here do the same work as the numpy code they replace in one
compiled loop each. numba compiles a kernel on its first use and caches the machine code in a user cache
folder, never in the package's source tree (:func:`cache_dir`: ``$NUMBA_CACHE_DIR``, else
``frenzy-env/numba`` in the platform's user cache; where that folder cannot be written the kernels are
compiled in every process instead): compiling all three takes about a second once per machine, loading them
about 0.4 s per process (most of it importing numba), plus about 135 MiB of resident memory for numba's
compiler.

The numpy code stays, as the reference and the fallback: it runs when numba cannot be imported, or when the
environment variable ``FRENZY_ENV_JIT=0`` is set (read once, at the first call of :func:`enabled`). Both
paths give the same masks, observations, rewards and infos (``tests/test_kernels.py`` compares them step by
step).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.observation import GT, MAX_SECONDS, PL, RESTARTS_SCALE, R

_STATE: dict[str, bool] = {}  # "enabled", once decided
_COMPILED: dict[str, Any] = {}  # name -> compiled kernel
_ACTIVE: dict[str, Any] = {}  # the same while the kernels are in use, else empty (one look-up in get())


def enabled() -> bool:
    """True when the compiled kernels are in use (numba importable and ``FRENZY_ENV_JIT`` not ``0``)."""
    on = _STATE.get("enabled")
    if on is None:
        on = set_enabled(os.environ.get("FRENZY_ENV_JIT", "1").strip() != "0")
    return on


def set_enabled(on: bool) -> bool:
    """Use the compiled kernels (``True``, if numba can be imported) or the numpy code (``False``) from now
    on, in every simulator (they choose the path at each call); returns whether the kernels are in use."""
    if on:
        try:
            import numba  # noqa: F401
        except ImportError:  # (numba is a dependency; a platform without its wheels runs the numpy code)
            on = False
    _STATE["enabled"] = on
    if not on:
        _ACTIVE.clear()
    return on


def get(name: str) -> Any:
    """The compiled kernel ``name`` (compiled on first use, cached on disk), or None when the numpy code is
    in use (see :func:`enabled`). Kernels: ``legal_masks``, ``running_rows``, ``free_fractions``,
    ``type_state`` (the functions of those names call them) and ``running_work``."""
    kernel = _ACTIVE.get(name)
    if kernel is None and enabled():
        kernel = _COMPILED.get(name)
        if kernel is None:
            kernel = _COMPILED[name] = _compile(_SOURCES[name])
        _ACTIVE[name] = kernel
    return kernel


def cache_dir() -> Path:
    """The folder numba caches the kernels in: ``$NUMBA_CACHE_DIR`` when set (numba's own variable), else
    ``frenzy-env/numba`` in the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``; ``~/Library/Caches`` on
    macOS, ``%LOCALAPPDATA%`` on Windows). Never a folder of the package itself."""
    value = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    if value:
        return Path(value).expanduser()
    if sys.platform == "win32":
        root = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches"
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "frenzy-env" / "numba"


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _compile(func: Any) -> Any:
    """``func`` compiled by numba, cached in :func:`cache_dir` when that folder can be written, else uncached.

    numba picks a kernel's cache folder once, when it is decorated: ``numba.config.CACHE_DIR`` is set to ours
    for that moment only (with it unset, or unwritable, numba would write beside this file)."""
    from numba import config, njit

    folder = cache_dir()
    if _writable(folder):
        saved = config.CACHE_DIR
        config.CACHE_DIR = str(folder)
        try:
            with contextlib.suppress(RuntimeError):  # no usable cache locator after all: compiled uncached below
                return njit(cache=True, nogil=True)(func)
        finally:
            config.CACHE_DIR = saved
    return njit(nogil=True)(func)


# The kernels' Python sources: numba compiles them (run as plain Python they give the same results, slowly).
def _legal_masks(cap, tl, thr, nq, q_rows, slots, plans, pairs, pf, now, free, gain, out, queue, running, last,
                 cooldown, one_action):
    rows, p = out.shape
    nr = slots.shape[0]
    for i in range(nr):
        if slots[i] < 0:
            return -1 - i  # not running: the caller raises
    paced = cooldown > 0.0 or one_action
    capf = cap.ravel()
    count = 0
    for i in range(nq):  # start rows: the plan's GPUs placeable now
        if one_action and last[queue[i]] >= now:  # acted on at this instant: no start before time moves
            for j in range(p):
                out[i, j] = False
            continue
        for j in range(p):
            ok = capf[tl[i, j]] >= thr[i, j]
            out[i, j] = ok
            count += ok
    for i in range(nq, rows):
        if q_rows <= i < q_rows + nr:
            continue
        for j in range(p):
            out[i, j] = False
    width = gain.shape[1]
    g = np.zeros(width, dtype=gain.dtype)
    for i in range(nr):  # resize rows: placeable once the job's own GPUs are freed
        s = slots[i]
        row = q_rows + i
        held = pf[s] > now  # still starting: no resize
        if paced and not held:  # within its cooldown, or acted on at this instant
            t = last[running[i]]
            held = t + cooldown > now or (one_action and t >= now)
        if held:
            for j in range(p):
                out[row, j] = False
            continue
        for v in range(width):
            g[v] = 0
        for w in range(pairs.shape[1] // 2):  # the nodes it shares with other jobs (padded with node -1)
            node = pairs[s, 2 * w]
            if node < 0:
                break
            cell = pairs[s, 2 * w + 1] + free[node]
            for v in range(width):
                g[v] += gain[cell, v]
        for j in range(p):
            ok = capf[plans[0, s, j]] + plans[3, s, j] + g[plans[1, s, j]] >= plans[2, s, j]
            out[row, j] = ok
            count += ok
    return count


# the running block's columns (module constants: numba compiles them in as literals); the plan's features
# (``plan_feats``' F columns: 2 in the cluster layout, 3 in the universal one) follow num_gpus, then restarts,
# progress and the plan slots' times (observation.RUNNING_FEATURES and UNIVERSAL_RUNNING_FEATURES both)
_R_PRESENT, _R_ELAPSED, _R_REMAINING, _R_NUM_GPUS = R.present, R.elapsed, R.remaining_time, R.num_gpus
_MAX_SECONDS = MAX_SECONDS
_RESTARTS_SCALE = RESTARTS_SCALE


def _running_rows(out, first, jobs, run_plan, run_floats, restart_count, estimate, iter_time, config_row, start_s,
                  save_s, plan_feats, now, log_t):
    # columns as observation.RUNNING_FEATURES, then one per plan; the numpy code's operations in its order, for
    # the same numbers; every value is >= 0 (times, counts, progress <= estimate), so of its clip to [0, 2]
    # only the upper bound can act (and NaN stays NaN). The time left on a plan: the start-up still to pay on
    # the current plan, the restart (start-up there + restart_overhead and checkpoint write here) on another
    # one, then the remaining work at that plan's speed (0 where the plan is not available)
    p = iter_time.shape[1]
    nf = plan_feats.shape[1]
    c_restarts = _R_NUM_GPUS + nf
    c_progress = c_restarts + 1
    c_times = c_progress + 1
    for i in range(jobs.shape[0]):
        j = jobs[i]
        row = first + i
        plan = run_plan[j]
        k = config_row[j]
        since = now - run_floats[j, 1]
        pending = -since
        if since < 0.0:
            since = 0.0
        if pending < 0.0:
            pending = 0.0
        rem = estimate[j] - (run_floats[j, 0] + since * run_floats[j, 2])
        if rem < 0.0:
            rem = 0.0
        elapsed = now - run_floats[j, 3]
        if elapsed < 0.0:
            elapsed = 0.0
        v = math.log1p(elapsed) / log_t
        out[row, _R_PRESENT] = 1.0
        out[row, _R_ELAPSED] = 2.0 if v > 2.0 else v
        for q in range(p):
            it = iter_time[j, q]
            t = it * rem
            if it > 0.0:
                t += pending if q == plan else start_s[k, q] + save_s[k, plan]
            if t > _MAX_SECONDS:
                t = _MAX_SECONDS
            v = math.log1p(t) / log_t  # < 2: log1p(1e12) / 16 = 1.73
            out[row, c_times + q] = v
            if q == plan:
                out[row, _R_REMAINING] = v
        for f in range(nf):
            out[row, _R_NUM_GPUS + f] = plan_feats[plan, f]  # in [0, 1]
        v = restart_count[j] / _RESTARTS_SCALE
        out[row, c_restarts] = 2.0 if v > 2.0 else v
        v = 1.0 - rem / max(estimate[j], 1e-9)
        out[row, c_progress] = 0.0 if v < 0.0 else v


def _free_fractions(type_frac, type_base, free_t, out_t, node_frac, node_base, free, out_n):
    for i in range(free_t.shape[0]):
        out_t[i] = type_frac[type_base[i] + free_t[i]]
    for i in range(free.shape[0]):
        out_n[i] = node_frac[node_base[i] + free[i]]


# the universal layout's dynamic GPU-type and plan columns (observation.GPU_FEATURES, PLAN_FEATURES)
_GT_FREE, _GT_FREE_NODES, _GT_LARGEST = GT.free, GT.free_nodes, GT.largest_free
_PL_FITS = PL.fits_free


def _type_state(free, node_type, node_cap, type_cap, type_nodes, type_node_size, free_t, full, largest, plan_type,
                plan_count, plan_present, gpus, plans):
    # per GPU type: free GPUs (free_t, the state's own), wholly free nodes and the most free GPUs on one node,
    # then the rows' fractions (float64 divisions stored as float32, as the numpy code does) and each plan
    # slot's fits_free
    t_n = type_cap.shape[0]
    for t in range(t_n):
        full[t] = 0
        largest[t] = 0
    for i in range(free.shape[0]):
        t = node_type[i]
        f = free[i]
        if f == node_cap[i]:
            full[t] += 1
        if f > largest[t]:
            largest[t] = f
    for t in range(t_n):
        gpus[t, _GT_FREE] = free_t[t] / type_cap[t]
        gpus[t, _GT_FREE_NODES] = full[t] / type_nodes[t]
        gpus[t, _GT_LARGEST] = largest[t] / type_node_size[t]
    for q in range(plan_type.shape[0]):
        plans[q, _PL_FITS] = 1.0 if plan_present[q] and free_t[plan_type[q]] >= plan_count[q] else 0.0


def _running_work(jobs, run_plan, run_floats, estimate, iter_time, now):
    # predicted seconds left of the running ``jobs`` on their plans, summed in order (the same arithmetic as
    # _running_rows: remaining estimated iterations x seconds per iteration plus the start-up still to pay,
    # clamped at 0 and at MAX_SECONDS)
    total = 0.0
    for i in range(jobs.shape[0]):
        j = jobs[i]
        since = now - run_floats[j, 1]
        pending = -since
        if since < 0.0:
            since = 0.0
        if pending < 0.0:
            pending = 0.0
        rem = estimate[j] - (run_floats[j, 0] + since * run_floats[j, 2])
        if rem < 0.0:
            rem = 0.0
        t = iter_time[j, run_plan[j]] * rem + pending
        total += _MAX_SECONDS if t > _MAX_SECONDS else t
    return total


def running_work(
    jobs: np.ndarray, run_plan: np.ndarray, run_floats: np.ndarray, estimate: np.ndarray, iter_time: np.ndarray,
    now: float,
) -> float:
    """Seconds of predicted work left of the running ``jobs`` on their current plans, summed: the
    environment's ``running_work`` global feature. Compiled when the kernels are on, else this same loop in
    Python (identical sums: the same operations in the same order)."""
    kernel = get("running_work") or _running_work
    return float(kernel(jobs, run_plan, run_floats, estimate, iter_time, now))


def _require(name: str) -> Any:
    """:func:`get`, or ValueError when the numpy code is in use."""
    kernel = get(name)
    if kernel is None:
        raise ValueError("the compiled kernels are off (numba missing or FRENZY_ENV_JIT=0)")
    return kernel


def legal_masks(
    cap: np.ndarray,
    tl: np.ndarray,
    thr: np.ndarray,
    nq: int,
    q_rows: int,
    slots: np.ndarray,
    plans: np.ndarray,
    pairs: np.ndarray,
    pf: np.ndarray,
    now: float,
    free: np.ndarray,
    gain: np.ndarray,
    out: np.ndarray,
    queue: np.ndarray,
    running: np.ndarray,
    last: np.ndarray,
    cooldown: float,
    one_action: bool,
) -> int:
    """Fill ``out`` (rows, P) bool with :meth:`ClusterSimulator.legal_masks` from the simulator's arrays
    (compiled; ValueError when the numpy code is in use). Returns the number of True cells, or ``-1 - i``
    for the first i whose ``slots[i]`` is negative (a job that is not running; ``out`` is then unchanged).

    Start rows ``i < nq``: ``cap.ravel()[tl[i, p]] >= thr[i, p]``. Resize rows ``q_rows + i`` for the running
    job in slot ``s = slots[i]``: False while it starts (``pf[s] > now``), else ``cap.ravel()[plans[0, s, p]]
    + plans[3, s, p] + g[plans[1, s, p]] >= plans[2, s, p]`` with ``g`` (L + 1,) the sum over the (node,
    cell) ``pairs[s]`` of the nodes it shares (padded with node -1) of ``gain[cell + free[node]]``. Every
    other row is False.

    The pacing rules (``SimConfig.resize_cooldown``, ``one_action_per_instant``), from ``last`` (J,) the time
    of each job's last action and the job indices ``queue`` (>= nq) and ``running`` (the jobs of ``slots``):
    with ``one_action``, start row i is False where ``last[queue[i]] >= now``; resize row i is False where
    ``last[running[i]] + cooldown > now`` or, with ``one_action``, ``last[running[i]] >= now``. With
    ``cooldown`` 0 and ``one_action`` False neither array is read.
    """
    return _require("legal_masks")(cap, tl, thr, nq, q_rows, slots, plans, pairs, pf, now, free, gain, out, queue,
                                   running, last, cooldown, one_action)


def running_rows(
    out: np.ndarray,
    first: int,
    jobs: np.ndarray,
    run_plan: np.ndarray,
    run_floats: np.ndarray,
    restart_count: np.ndarray,
    estimate: np.ndarray,
    iter_time: np.ndarray,
    config_row: np.ndarray,
    start_s: np.ndarray,
    save_s: np.ndarray,
    plan_feats: np.ndarray,
    now: float,
    log_t: float,
) -> None:
    """Rows ``first .. first + len(jobs)`` of the environment's running block ``out`` (R, 5 + F + P) float32 for
    the running ``jobs`` at time ``now`` (see ``ObservationEncoder._running_times``): present, elapsed, time left on
    the current plan, its plan's F features ``plan_feats[plan]`` (P, F) (GPU count and type: F = 2 in the cluster
    layout, 3 in the universal one), restarts, progress, time left on each plan (with the
    start-up still to pay on the current plan and the restart cost on the others: ``config_row`` (J,), and
    ``start_s``, ``save_s`` (K, P) are the simulator's start-up tables), times as ``log1p(seconds) / log_t``;
    from the simulator's per-job arrays (compiled; ValueError when the numpy code is in use)."""
    kernel = _require("running_rows")
    kernel(out, first, jobs, run_plan, run_floats, restart_count, estimate, iter_time, config_row, start_s, save_s,
           plan_feats, now, log_t)


def free_fractions(
    type_frac: np.ndarray,
    type_base: np.ndarray,
    free_t: np.ndarray,
    out_t: np.ndarray,
    node_frac: np.ndarray,
    node_base: np.ndarray,
    free: np.ndarray,
    out_n: np.ndarray,
) -> None:
    """``out_t[i] = type_frac[type_base[i] + free_t[i]]`` and ``out_n[i] = node_frac[node_base[i] + free[i]]``:
    the free fraction of each GPU type and node, looked up in the environment's tables (compiled; ValueError
    when the numpy code is in use)."""
    _require("free_fractions")(type_frac, type_base, free_t, out_t, node_frac, node_base, free, out_n)


def type_state(
    free: np.ndarray,
    node_type: np.ndarray,
    node_cap: np.ndarray,
    type_cap: np.ndarray,
    type_nodes: np.ndarray,
    type_node_size: np.ndarray,
    free_t: np.ndarray,
    full: np.ndarray,
    largest: np.ndarray,
    plan_type: np.ndarray,
    plan_count: np.ndarray,
    plan_present: np.ndarray,
    gpus: np.ndarray,
    plans: np.ndarray,
) -> None:
    """The dynamic columns of the universal layout's ``gpus`` (T_MAX, F) and ``plans`` (P, F) blocks from the
    free GPUs per node ``free`` (N,) (compiled; ValueError when the numpy code is in use): for each of the T
    cluster types (``node_type`` (N,) the type of each node, ``node_cap`` (N,) its GPUs; ``type_cap``,
    ``type_nodes``, ``type_node_size`` (T,) GPUs, nodes and GPUs of the largest node of each type; ``free_t``
    (T,) its free GPUs) ``gpus[t, free] = free_t / type_cap``, ``gpus[t, free_nodes]`` = its wholly free nodes
    (written to ``full`` (T,)) over its nodes, ``gpus[t, largest_free]`` = the most free GPUs on one of its
    nodes (``largest`` (T,)) over ``type_node_size``; for each plan slot ``plans[q, fits_free]`` = 1 where it is
    present and its type has at least ``plan_count[q]`` GPUs free, else 0."""
    _require("type_state")(free, node_type, node_cap, type_cap, type_nodes, type_node_size, free_t, full, largest,
                           plan_type, plan_count, plan_present, gpus, plans)


_SOURCES = {
    "legal_masks": _legal_masks, "running_rows": _running_rows, "free_fractions": _free_fractions,
    "running_work": _running_work, "type_state": _type_state,
}
