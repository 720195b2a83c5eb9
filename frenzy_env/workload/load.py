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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

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
                x, c = 0.0, g0
                while c <= min(max_gpus, nk):
                    if _fits(model, int(b), int(s), c, t, pn):
                        it = reference_iteration_time(
                            model, int(b), int(s), c, gpu=t, gpus_per_node=pn, utilisation=utilisation,
                            efficiency=efficiency,
                        )
                        x = 1.0 / (c * it)
                        break
                    c *= 2
                vals.append(x)
            row = cache[key] = tuple(vals)
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(types))  # (n, K)


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
