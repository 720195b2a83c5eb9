"""Offered load: how much of a heterogeneous cluster's capacity a workload asks for, per unit of time.

Definition
----------
A workload of jobs ``j = 1..n`` arrives over a window of ``T`` seconds on a cluster with ``N_k`` GPUs of
each type ``k``. Job ``j`` has work ``W_j`` iterations (:meth:`Workload.work_iterations`) and a GPU count
``g_j`` (its requested count; without one, the smallest power of two that fits the reference type). On each
type ``k`` it runs on its *plan* ``n_jk``: the first of ``g_j, 2 g_j, 4 g_j, ...`` (at most ``max_gpus`` and
at most ``N_k``) at which some layout fits the type's memory ("extended" estimator, tensor parallelism
within one node of the type); no such count: the job cannot use type ``k``. On that plan one iteration
takes ``t_jk`` seconds (the throughput model, :func:`~frenzy_env.workload.configs.reference_iteration_time`:
fastest memory-feasible layout, consolidated placement), so one GPU of type ``k`` does

    x_jk = 1 / (n_jk * t_jk)          iterations per GPU-second   (x_jk = 0 where the job does not fit)

The cluster's capacity *for job j* is ``C_j = sum_k N_k x_jk`` iterations per second, and the offered load is

    rho = (1 / T) * sum_j  W_j / C_j

``W_j / C_j`` is how long the whole cluster would take to do job ``j`` if every GPU that can hold it worked
on it at the per-GPU speed of its plan. Equivalently, in reference-GPU units: with ``r`` the reference type,
``D_j = W_j n_jr t_jr`` the job's reference GPU-seconds and ``s_jk = x_jk / x_jr`` each type's speed relative
to the reference for this job, ``rho = sum_j D_j / (T * sum_k N_k s_jk)``: each job's GPU-seconds on its
reference plan over the window times the cluster's capacity in reference GPUs *for that job* (types it does
not fit count zero). On a homogeneous cluster of the reference type where every job fits it is the usual
``sum_j g_j d_j / (T N)`` (``d_j`` the job's duration), so the reference-GPU load is the special case.

``T`` is the arrival window: ``(last submit - first submit) * n / (n - 1)`` (the mean gap times ``n``, so a
Poisson stream of rate ``lambda`` has ``T ~ n / lambda``), or ``window_s`` when given. Jobs that fit no type
(the simulator rejects them) are left out and counted in :attr:`LoadReport.unplaceable`.

What it means: ``rho`` is a fluid bound. ``rho >= 1`` means the cluster cannot keep up even if every job could
be spread over every GPU that holds it at no loss; ``rho < 1`` is necessary for a stable queue, not
sufficient (jobs are not divisible, and a job sized for one type waits for that type). ``per_type_load``
is the load each type would carry if every job were split over the types in proportion to their capacity
for it (type ``k`` gets ``N_k x_jk / C_j`` of job ``j``'s iterations, i.e. ``N_k W_j / C_j`` GPU-seconds):
``rho_k = (1 / T) * sum over jobs that fit k of W_j / C_j``; ``rho_k = rho`` for every type only if every job
fits every type, and a type few jobs fit carries less.

Busy load
---------
The fluid load counts all of a job's work, also the part that runs after the arrival window: on env v5's default
week at ``rho = 0.8`` FIFO keeps the GPUs busy about 53% of the window, one 32-GPU job of 710 h holds 48% of the
GPU-hours, and on the ``v5-test`` suite 4% of the jobs wait over a minute under FIFO (issue 52). The *busy load*
is instead what a reference scheduler measures: the share of the cluster's GPUs that FIFO keeps busy over the
arrival window ``[t0, t0 + T]`` (:func:`busy_fraction`: GPU-seconds held inside the window over ``N T``, ``N`` the
cluster's GPUs). For a stable queue the long-run busy share of the servers is the load (the Utilization Law,
``U = X E[S]``: Harchol-Balter, "Performance Modeling and Design of Computer Systems", 2013, ch. 6); Gavel
(Narayanan et al., OSDI 2020) and Sia (Jayaram Subramanya et al., SOSP 2023) likewise state load as an arrival
rate on a fixed cluster and read what it does from a simulated schedule. A generator with ``load_mode="busy"``
multiplies its arrival times by the factor :func:`busy_stretch` finds, so that the *FIFO model* keeps a share
``load`` of the GPUs busy over the window:

* the model (:func:`fifo_plans`, :func:`fifo_schedule`) is the ``fifo`` baseline at requested counts without the
  simulator: each job asks for ``g_j``, its requested count rounded down to a power of two (at most ``max_gpus``),
  or, where no type holds that count, the smallest of its plans ``n_jk``; it may run on the types whose plan has
  that count, for ``W_j t_jk`` seconds (the throughput model's iteration time above); jobs in arrival order, each
  on the first of its types (largest memory first) with ``g_j`` free GPUs, later jobs passing one that cannot
  start (backfilling, first fit). GPUs are counted per type, not per node; start-up costs and memory failures
  are left out. On the 28 workloads of ``v5-test`` its busy fraction averages 0.40 against the simulator's
  ``fifo`` 0.43 at the fluid load, and 0.74 against 0.73 on the 15 that reach the busy load of
  ``scripts/queue_order_load.py``;
* the factor: bisection on its logarithm from a bracket found by doubling or halving (ends within
  :data:`BUSY_RTOL`), deterministic and cached on the inputs; about 0.01-0.06 s for 150-570 jobs;
* a target the model cannot reach raises :class:`~frenzy_env.errors.ConfigError` with the most it reaches: the
  cluster starts empty, so even jobs that all arrive at once fill it only as they come; windows of traces whose
  jobs come in a burst at the window's end reach little (0.41-0.97 over the 18 ``v5-test`` windows; 200
  synthetic jobs on frenzy-testbed 0.78-0.91).

Near the cluster's saturation the busy share flattens (on frenzy-testbed's synthetic workloads the fluid loads 3
and 6 give FIFO busy shares of 0.79 and 0.83). :func:`wait_share` gives the other side of the pressure: the share
of jobs that start more than :data:`WAIT_S` seconds after their submission.

Wait load
---------
A busy target cannot say how hard jobs compete for GPUs: the busy share over the arrival window saturates near
0.8-0.9 while the queue still grows, and several 150-job trace windows never reach 0.8. A generator with
``load_mode="wait"`` instead stretches its arrivals (:func:`pressure_stretch` with ``measure="wait"``, the same
bisection as the busy load's) until a share ``load`` of the jobs some type holds start more than :data:`WAIT_S`
seconds after their submission in the FIFO model (:func:`wait_share`):

* the share is a step function of the stretch and not monotone (a list schedule's anomalies: a job that starts a
  little later can hold GPUs that a burst of later jobs then waits for, Graham, "Bounds on multiprocessing timing
  anomalies", SIAM J. Appl. Math. 17(2), 1969); the bisection returns one crossing, deterministically, at which the
  share is at least ``load``, and where the share jumps it lands above (``v5-test``'s 28 workloads at 0.3: 0.30-0.54);
* the most it reaches is the share of jobs that cannot start when all arrive together, since the cluster starts
  empty: 0.64-0.76 for 200 synthetic jobs on frenzy-testbed, 0.36 for the 150-job ITP windows of clusters 01 and 09
  (almost every job asks for 1 GPU, and 96 start at once), 0.68-0.89 for windows of 300 jobs;
* queue order can only matter as far as jobs wait: :func:`delay_share`, the share of the jobs' time in the system
  spent waiting, is what an order can shorten. Measured by ``scripts/queue_order_load.py`` on ``v5-test``'s ten
  synthetic workloads (oracle ``sjf`` against ``fifo``, paired geometric mean and 95% interval of the per-workload
  average JCT): wait load 0.3, 0.981 (0.929-1.03); 0.5, 1.00 (0.932-1.07); 0.6, 0.917 (0.879-0.956).
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.workload.configs import _fits, _min_pow2, reference_iteration_time
from frenzy_env.workload.spec import Workload
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.efficiency import DEFAULT_EFFICIENCY
from frenzy_env.world.models import ModelSpec
from frenzy_env.world.throughput import DEFAULT_UTILISATION

DEFAULT_MAX_GPUS = 64  # the simulator's default largest plan (SimConfig.max_plan_gpus)


@dataclass(frozen=True)
class LoadReport:
    """The offered load of a workload on a cluster and its parts (see the module docstring).

    Attributes
    ----------
    offered_load: ``rho``.
    window_s: the arrival window ``T``, seconds.
    cluster_seconds: (n,) ``W_j / C_j`` per job (``nan`` for a job that fits no type).
    rate_per_gpu: (n, K) ``x_jk`` iterations per GPU-second, 0 where job ``j`` does not fit type ``k``.
    gpu_types: (K,) the cluster's GPU types (columns of ``rate_per_gpu``).
    per_type_fits_frac: fraction of the jobs whose plan fits each type.
    per_type_load: the load each type carries under a capacity-proportional split of every job.
    unplaceable: jobs that fit no type (left out of ``offered_load``).
    """

    offered_load: float
    window_s: float
    cluster_seconds: np.ndarray
    rate_per_gpu: np.ndarray
    gpu_types: tuple[str, ...]
    per_type_fits_frac: dict[str, float]
    per_type_load: dict[str, float]
    unplaceable: int


def _job_count(model: ModelSpec, b: int, s: int, g: int | None, cluster: ClusterSpec, max_gpus: int) -> int:
    if g:
        return int(g)
    ref = cluster.reference_gpu_type
    return _min_pow2(model, b, s, ref, cluster.max_gpus_per_node(ref), max_gpus) or 1


def rates_per_gpu(
    configs: Iterable[tuple[ModelSpec, int, int, int | None]],
    cluster: ClusterSpec,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> np.ndarray:
    """(n, K) ``x_jk``: iterations per GPU-second of each ``(model, batch, seq_len, gpus)`` on each GPU type of
    ``cluster`` on its plan ``n_jk`` (module docstring); 0 where it fits no plan of the type. ``efficiency``: the
    speed model's option (:class:`~frenzy_env.simulator.SimConfig`)."""
    types = cluster.gpu_types
    counts = [cluster.gpus_of_type(t) for t in types]
    per_node = [cluster.max_gpus_per_node(t) for t in types]
    cache: dict[tuple, tuple[float, ...]] = {}
    rows = []
    for model, b, s, g in configs:
        g0 = _job_count(model, int(b), int(s), g, cluster, max_gpus)
        key = (id(model), int(b), int(s), g0)
        row = cache.get(key)
        if row is None:
            vals = []
            for t, nk, pn in zip(types, counts, per_node):
                c, it = _plan_on_type(model, int(b), int(s), g0, t, min(max_gpus, nk), pn, utilisation, efficiency)
                vals.append(1.0 / (c * it) if c else 0.0)
            row = cache[key] = tuple(vals)
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(types))  # (n, K)


def _plan_on_type(
    model: ModelSpec, b: int, s: int, g0: int, gpu: str, limit: int, per_node: int, utilisation: float,
    efficiency: str,
) -> tuple[int, float]:
    """``(n_jk, t_jk)``: the first of ``g0, 2 g0, 4 g0, ...`` (at most ``limit``) at which the configuration fits
    ``gpu`` and its iteration time there; ``(0, nan)`` where none fits."""
    c = g0
    while c <= limit:
        if _fits(model, b, s, c, gpu, per_node):
            it = reference_iteration_time(
                model, b, s, c, gpu=gpu, gpus_per_node=per_node, utilisation=utilisation, efficiency=efficiency,
            )
            return c, it
        c *= 2
    return 0, float("nan")


def cluster_seconds(
    configs: Iterable[tuple[ModelSpec, int, int, int | None]],
    work: np.ndarray,
    cluster: ClusterSpec,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> tuple[np.ndarray, np.ndarray]:
    """((n,) ``W_j / C_j`` seconds, ``nan`` where no type fits; (n, K) ``x_jk``) for jobs of the given
    configurations and ``work`` iterations."""
    x = rates_per_gpu(configs, cluster, utilisation=utilisation, max_gpus=max_gpus, efficiency=efficiency)  # (n, K)
    cap = x @ cluster.type_capacity.astype(np.float64)  # (n,) iterations per second, C_j
    with np.errstate(divide="ignore", invalid="ignore"):
        secs = np.where(cap > 0, np.asarray(work, dtype=np.float64) / cap, np.nan)
    return secs, x


def arrival_window(submit: np.ndarray) -> float:
    """``T = (last - first) * n / (n - 1)`` seconds; ``nan`` for fewer than two jobs or one instant."""
    submit = np.asarray(submit, dtype=np.float64)
    n = submit.size
    if n < 2:
        return float("nan")
    span = float(submit.max() - submit.min())
    return span * n / (n - 1) if span > 0 else float("nan")


def offered_load_detail(
    workload: Workload,
    cluster: ClusterSpec | str,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    window_s: float | None = None,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> LoadReport:
    """The offered load of ``workload`` on ``cluster`` with its parts (:class:`LoadReport`); ``efficiency``: the
    speed model's option (:class:`~frenzy_env.simulator.SimConfig`)."""
    spec = ClusterSpec.preset(cluster) if isinstance(cluster, str) else cluster
    work = workload.work_iterations(spec, utilisation=utilisation, efficiency=efficiency)  # (n,)
    configs = [(j.model, j.batch_size, j.seq_len, j.requested_gpus) for j in workload.jobs]
    secs, x = cluster_seconds(configs, work, spec, utilisation=utilisation, max_gpus=max_gpus, efficiency=efficiency)
    window = float(window_s) if window_s is not None else arrival_window([j.submit_time for j in workload.jobs])
    ok = np.isfinite(secs)
    rho = float(secs[ok].sum()) / window if ok.any() else 0.0
    secs0 = np.where(ok, secs, 0.0)  # (n,)
    # a job split over the types in proportion to N_k x_jk gives type k N_k W_j / C_j GPU-seconds
    per_type_s = ((x > 0) * secs0[:, None]).sum(0)  # (K,) seconds of every GPU of each type
    types = spec.gpu_types
    return LoadReport(
        offered_load=rho,
        window_s=window,
        cluster_seconds=secs,
        rate_per_gpu=x,
        gpu_types=types,
        per_type_fits_frac={t: float((x[:, k] > 0).mean()) for k, t in enumerate(types)},
        per_type_load={t: float(per_type_s[k] / window) for k, t in enumerate(types)},
        unplaceable=int((~ok).sum()),
    )


def offered_load(
    workload: Workload,
    cluster: ClusterSpec | str,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    window_s: float | None = None,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> float:
    """``rho``, the offered load of ``workload`` on ``cluster`` (module docstring): 1.0 asks for the whole
    cluster's speed- and memory-aware capacity over the arrival window."""
    return offered_load_detail(
        workload, cluster, utilisation=utilisation, max_gpus=max_gpus, window_s=window_s, efficiency=efficiency
    ).offered_load


# --------------------------------------------------------------------------------------------- busy load
LOAD_MODES: tuple[str, ...] = ("fluid", "busy", "wait")
"""What a generator's ``load`` means (module docstring, "Busy load" and "Wait load"): ``"fluid"`` the offered load
``rho``, ``"busy"`` the share of the cluster's GPUs FIFO keeps busy over the arrival window, ``"wait"`` the share
of the jobs that wait over :data:`WAIT_S` seconds to start under FIFO."""
PRESSURE_MEASURES: tuple[str, ...] = ("busy", "wait")
"""The FIFO model's measures a load mode other than ``"fluid"`` calibrates the arrival stretch on
(:func:`pressure_stretch`)."""
DEFAULT_LOAD_MODE = "fluid"
WAIT_S = 60.0
"""A job "waits" when it starts more than this many seconds after its submission: one scheduling round of Pollux
(Qiao et al., OSDI 2021) and Sia (Jayaram Subramanya et al., SOSP 2023), which reallocate every 60 s."""
BUSY_RTOL = 1e-3
"""Relative width of the stretch interval at which the busy load's bisection stops (:func:`busy_stretch`)."""
_STRETCH_LIMIT = 2.0**30  # the bisection's bracket: stretches in [2^-30, 2^30] of the given arrival times
_BUSY_CACHE: OrderedDict[bytes, float] = OrderedDict()
_BUSY_CACHE_SIZE = 4096


def check_load_mode(value: object, name: str = "load_mode") -> str:
    """``value`` if it is one of :data:`LOAD_MODES`, else a :class:`~frenzy_env.errors.ConfigError` naming ``name``
    and the value."""
    if not isinstance(value, str) or value not in LOAD_MODES:
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, LOAD_MODES))}, got {value!r}")
    return value


def fifo_plans(
    configs: Iterable[tuple[ModelSpec, int, int, int | None]],
    work: np.ndarray,
    cluster: ClusterSpec,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> tuple[np.ndarray, np.ndarray]:
    """The plans of the FIFO model (module docstring, "Busy load"): ((n,) GPU count ``g_j``, (n, K) run seconds of
    job ``j`` on ``g_j`` GPUs of each type, ``inf`` where the type is not one of the job's FIFO types; a job no type
    holds has ``g_j = 0`` and no finite entry). ``g_j`` is the requested count rounded down to a power of two (at
    most ``max_gpus``) where some type holds it, else the smallest count of the job's plans ``n_jk``."""
    types = cluster.gpu_types
    counts = [cluster.gpus_of_type(t) for t in types]
    per_node = [cluster.max_gpus_per_node(t) for t in types]
    top = 1 << (int(max_gpus).bit_length() - 1)
    work = np.asarray(work, dtype=np.float64)
    cache: dict[tuple, tuple[int, tuple[float, ...]]] = {}
    gpus, run = [], []
    for j, (model, b, s, g) in enumerate(configs):
        want = _job_count(model, int(b), int(s), g, cluster, max_gpus)
        g0 = min(1 << (int(want).bit_length() - 1), top)
        key = (id(model), int(b), int(s), g0)
        if key not in cache:
            plans = [
                _plan_on_type(model, int(b), int(s), g0, t, min(max_gpus, nk), pn, utilisation, efficiency)
                for t, nk, pn in zip(types, counts, per_node)
            ]
            fitting = [c for c, _ in plans if c]
            target = g0 if g0 in fitting else min(fitting, default=0)
            cache[key] = (target, tuple(it if c == target and c else np.inf for c, it in plans))
        target, its = cache[key]
        gpus.append(target)
        run.append([work[j] * it for it in its])
    return np.array(gpus, dtype=np.int64), np.array(run, dtype=np.float64).reshape(len(gpus), len(types))


def fifo_schedule(
    submit: np.ndarray, gpus: np.ndarray, run_s: np.ndarray, capacity: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The FIFO model's schedule (module docstring, "Busy load"): ((n,) start, (n,) finish seconds, (n,) type index)
    of jobs submitted at ``submit`` needing ``gpus[j]`` GPUs for ``run_s[j, k]`` seconds on type ``k`` (``inf``:
    not on ``k``), on ``capacity[k]`` GPUs of each type. Jobs in arrival order; each starts on the first of its
    types with enough free GPUs; when a job cannot start, later ones may (backfilling, first fit). A job with no
    finite ``run_s`` never starts (nan, nan, -1)."""
    submit = np.asarray(submit, dtype=np.float64)
    n, k_types = run_s.shape
    order = np.argsort(submit, kind="stable").tolist()
    sub = submit.tolist()
    g = np.asarray(gpus, dtype=np.int64).tolist()
    cand = [[(k, float(run_s[j, k])) for k in range(k_types) if np.isfinite(run_s[j, k])] for j in range(n)]
    free = [int(c) for c in capacity]
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    typ = np.full(n, -1, dtype=np.int64)
    heap: list[tuple[float, int, int]] = []  # (finish time, job, type) of running jobs
    queue: list[int] = []  # waiting jobs in arrival order
    i = 0
    inf = float("inf")
    while i < n or heap:
        t = min(sub[order[i]] if i < n else inf, heap[0][0] if heap else inf)
        freed = False
        while heap and heap[0][0] <= t:
            _, j, k = heapq.heappop(heap)
            free[k] += g[j]
            freed = True
        first_new = len(queue)
        while i < n and sub[order[i]] <= t:
            if cand[order[i]]:
                queue.append(order[i])
            i += 1
        # a job that could not start before cannot start now unless GPUs were freed
        scan = range(len(queue)) if freed else range(first_new, len(queue))
        started = []
        for q in scan:
            j = queue[q]
            for k, r in cand[j]:
                if free[k] >= g[j]:
                    free[k] -= g[j]
                    start[j], finish[j], typ[j] = t, t + r, k
                    heapq.heappush(heap, (t + r, j, k))
                    started.append(q)
                    break
        if started:
            gone = set(started)
            queue = [j for q, j in enumerate(queue) if q not in gone]
    return start, finish, typ


def busy_fraction(
    submit: np.ndarray, start: np.ndarray, end: np.ndarray, gpus: np.ndarray, num_gpus: int
) -> float:
    """GPU-seconds held inside the arrival window ``[t0, t0 + T]`` (``t0`` the first submission, ``T`` the
    :func:`arrival_window` of ``submit``) over ``num_gpus x T``: intervals ``[start, end)`` holding ``gpus`` each
    (an ``end`` of nan: still held at the end; a ``start`` of nan: never held)."""
    submit = np.asarray(submit, dtype=np.float64)
    window = arrival_window(submit)
    if not np.isfinite(window) or num_gpus <= 0:
        return float("nan")
    t0 = float(submit.min())
    start = np.asarray(start, dtype=np.float64)
    end = np.where(np.isnan(np.asarray(end, dtype=np.float64)), np.inf, end)
    held = np.clip(np.minimum(end, t0 + window) - np.maximum(start, t0), 0.0, None)  # (m,) nan where never held
    return float(np.nansum(held * np.asarray(gpus, dtype=np.float64)) / (num_gpus * window))


def delay_share(submit: np.ndarray, start: np.ndarray, finish: np.ndarray) -> float:
    """The share of the jobs' time in the system spent waiting: ``sum_j (start_j - submit_j) / sum_j (finish_j -
    submit_j)`` (jobs that never start or never finish, nan, are left out); nan for no job or no time."""
    submit, start, finish = (np.asarray(a, dtype=np.float64) for a in (submit, start, finish))
    ok = np.isfinite(start) & np.isfinite(finish)
    total = float((finish[ok] - submit[ok]).sum())
    return float((start[ok] - submit[ok]).sum()) / total if total > 0 else float("nan")


def wait_share(submit: np.ndarray, start: np.ndarray, wait_s: float = WAIT_S) -> float:
    """Share of the jobs that start more than ``wait_s`` seconds after their submission (a job never started: it
    waits); nan for no job."""
    submit = np.asarray(submit, dtype=np.float64)
    if submit.size == 0:
        return float("nan")
    start = np.asarray(start, dtype=np.float64)
    return float(np.mean(np.isnan(start) | (start - submit > wait_s)))


@dataclass(frozen=True)
class FifoReport:
    """The FIFO model's schedule of a workload (module docstring, "Busy load") and its pressure.

    Attributes
    ----------
    start, finish: (n,) seconds (nan for a job no type holds).
    gpu_type: (n,) index into ``gpu_types`` (-1 for a job no type holds).
    gpus: (n,) the job's FIFO GPU count (0 for a job no type holds).
    gpu_types: the cluster's GPU types.
    busy_frac: :func:`busy_fraction` of the schedule on the cluster's GPUs.
    wait_frac: :func:`wait_share` of the jobs some type holds.
    """

    start: np.ndarray
    finish: np.ndarray
    gpu_type: np.ndarray
    gpus: np.ndarray
    gpu_types: tuple[str, ...]
    busy_frac: float
    wait_frac: float


def _fifo_inputs(
    workload: Workload, spec: ClusterSpec, utilisation: float, max_gpus: int, efficiency: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    work = workload.work_iterations(spec, utilisation=utilisation, efficiency=efficiency)  # (n,)
    configs = [(j.model, j.batch_size, j.seq_len, j.requested_gpus) for j in workload.jobs]
    gpus, run_s = fifo_plans(configs, work, spec, utilisation=utilisation, max_gpus=max_gpus, efficiency=efficiency)
    return np.array([j.submit_time for j in workload.jobs], dtype=np.float64), gpus, run_s


def fifo_report(
    workload: Workload,
    cluster: ClusterSpec | str,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    efficiency: str = DEFAULT_EFFICIENCY,
) -> FifoReport:
    """The FIFO model's schedule of ``workload`` on ``cluster`` (:class:`FifoReport`)."""
    spec = ClusterSpec.preset(cluster) if isinstance(cluster, str) else cluster
    submit, gpus, run_s = _fifo_inputs(workload, spec, utilisation, max_gpus, efficiency)
    start, finish, typ = fifo_schedule(submit, gpus, run_s, spec.type_capacity)
    held = gpus > 0
    return FifoReport(
        start=start, finish=finish, gpu_type=typ, gpus=gpus, gpu_types=spec.gpu_types,
        busy_frac=busy_fraction(submit, start, finish, gpus, spec.num_gpus),
        wait_frac=wait_share(submit[held], start[held]),
    )


def pressure_stretch(
    submit: np.ndarray, gpus: np.ndarray, run_s: np.ndarray, capacity: np.ndarray, load: float, *,
    measure: str = "busy", rtol: float = BUSY_RTOL,
) -> float:
    """The factor ``s`` by which to multiply the arrival times ``submit`` so that the FIFO model
    (:func:`fifo_schedule`) reaches ``load`` on ``measure``: ``"busy"``, the share of the ``sum(capacity)`` GPUs it
    keeps busy over the arrival window (:func:`busy_fraction`), or ``"wait"``, the share of the jobs some type
    holds that start more than :data:`WAIT_S` seconds after their submission (:func:`wait_share`). Bisection on
    ``log s`` from a bracket found by doubling or halving from 1, stopped when the bracket's ends are within
    ``rtol`` of each other; the end whose measure is at least ``load`` is returned. Neither measure is monotone in
    ``s`` for every workload (a list schedule's anomalies), so the result is one crossing: the measure is at least
    ``load`` at ``s`` and below it at a stretch at most ``1 + rtol`` times larger. Deterministic, and cached on the
    inputs. A load FIFO cannot reach even when the jobs arrive within ``2^-30`` of their window raises
    :class:`~frenzy_env.errors.ConfigError` naming the most it reaches there."""
    if measure not in PRESSURE_MEASURES:
        raise ConfigError(f"measure must be one of {', '.join(map(repr, PRESSURE_MEASURES))}, got {measure!r}")
    submit = np.asarray(submit, dtype=np.float64)
    gpus = np.asarray(gpus, dtype=np.int64)
    run_s = np.asarray(run_s, dtype=np.float64)
    capacity = np.asarray(capacity, dtype=np.int64)
    sub0 = submit - submit.min()
    num_gpus = int(capacity.sum())
    key = hashlib.sha1(measure.encode() + b"".join(
        a.tobytes() for a in (sub0, gpus, run_s, capacity, np.array([load, rtol], dtype=np.float64))
    )).digest()
    if key in _BUSY_CACHE:
        _BUSY_CACHE.move_to_end(key)
        return _BUSY_CACHE[key]
    if not np.isfinite(arrival_window(sub0)):
        raise ConfigError(f"load_mode {measure!r} needs at least two jobs submitted at different times")
    held = (gpus > 0) & np.isfinite(run_s).any(axis=1)  # (n,) jobs some type holds

    def value(s: float) -> float:
        start, finish, _ = fifo_schedule(sub0 * s, gpus, run_s, capacity)
        if measure == "wait":
            return wait_share(sub0[held] * s, start[held])
        return busy_fraction(sub0 * s, start, finish, gpus, num_gpus)

    lo = hi = 1.0
    b = value(1.0)
    if b >= load:
        while b >= load and hi < _STRETCH_LIMIT:
            lo, hi = hi, hi * 2.0
            b = value(hi)
    else:
        while b < load:
            if lo <= 1.0 / _STRETCH_LIMIT:
                what = {
                    "busy": f"keeps at most {b:.3g} of the {num_gpus} GPUs busy over the arrival window",
                    "wait": f"makes at most {b:.3g} of the jobs wait over {WAIT_S:g} s",
                }[measure]
                raise ConfigError(
                    f"load {load:g} with load_mode {measure!r}: FIFO {what} of these {gpus.size} jobs, even when they "
                    "arrive together; lower the load or add jobs"
                )
            lo, hi = lo / 2.0, lo
            b = value(lo)
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if value(mid) >= load:
            lo = mid
        else:
            hi = mid
    _BUSY_CACHE[key] = lo
    if len(_BUSY_CACHE) > _BUSY_CACHE_SIZE:
        _BUSY_CACHE.popitem(last=False)
    return lo


def busy_stretch(
    submit: np.ndarray, gpus: np.ndarray, run_s: np.ndarray, capacity: np.ndarray, load: float, *,
    rtol: float = BUSY_RTOL,
) -> float:
    """:func:`pressure_stretch` on the busy fraction: the factor on the arrival times ``submit`` at which the FIFO
    model keeps a share ``load`` of the ``sum(capacity)`` GPUs busy over the arrival window."""
    return pressure_stretch(submit, gpus, run_s, capacity, load, measure="busy", rtol=rtol)


def busy_load_stretch(
    workload: Workload,
    cluster: ClusterSpec | str,
    load: float,
    *,
    utilisation: float = DEFAULT_UTILISATION,
    max_gpus: int = DEFAULT_MAX_GPUS,
    efficiency: str = DEFAULT_EFFICIENCY,
    measure: str = "busy",
) -> float:
    """:func:`pressure_stretch` of ``workload`` on ``cluster``: the factor on its arrival times (counted from its
    first submission) at which the FIFO model reaches ``load`` on ``measure`` (default ``"busy"``: keeps a share
    ``load`` of the cluster's GPUs busy over the arrival window; ``"wait"``: makes a share ``load`` of the jobs wait
    over :data:`WAIT_S` seconds)."""
    spec = ClusterSpec.preset(cluster) if isinstance(cluster, str) else cluster
    submit, gpus, run_s = _fifo_inputs(workload, spec, utilisation, max_gpus, efficiency)
    return pressure_stretch(submit, gpus, run_s, spec.type_capacity, load, measure=measure)
