"""MARP's plan search: the (GPU type, dp, tp, pp) resource plans in which a job fits in GPU memory, ranked.

:func:`plan_resources` enumerates every legal layout (:func:`frenzy_env.world.layouts.plan_layouts`: data, tensor
and pipeline parallelism, and the micro-batch of gradient accumulation) of every power-of-two GPU count on
each GPU type, keeps those whose peak memory per GPU
(:func:`frenzy_env.world.memory.estimator.estimate_memory_layouts`) fits
the type's memory, and ranks them (:data:`RANKINGS`; Frenzy's tightest fit by default). For each (GPU type,
dp, tp, pp) it keeps one micro-batch: the largest that fits when ``pp == 1`` (gradient accumulation costs
no time in :mod:`frenzy_env.world.throughput`, and fewer steps are what a user would pick), 1 when ``pp > 1``
(the smallest 1F1B bubble); and it lists ``pp > 1`` layouts of a (GPU type, GPU count) only when no
``pp == 1`` layout of that count fits the type (pipeline stages where the job needs them). The memory
estimator itself is :mod:`frenzy_env.world.memory.estimator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from frenzy_env.errors import ConfigError, unknown_name
from frenzy_env.world.layouts import plan_layouts, powers_of_two
from frenzy_env.world.memory.estimator import (
    DEFAULT_METHOD,
    GiB,
    check_job,
    check_positive_int,
    estimate_memory,
    resolved_options,
    total_layouts,
)
from frenzy_env.world.models import ModelSpec, get_model

RANKINGS = ("min_gpus", "max_mem_util", "min_est_time", "min_gpu_hours", "min_gpus_fastest")
#: The fewest GPUs (MARP's "required number"), then the shortest predicted iteration (HAS's "training
#: efficiency"); ``"min_gpus"`` (the smallest GPU that holds the job) is the ranking of env v4's Frenzy.
DEFAULT_RANKING = "min_gpus_fastest"
#: The rankings that need predicted iteration times.
TIMED_RANKINGS = ("min_est_time", "min_gpu_hours", "min_gpus_fastest")


@dataclass(frozen=True)
class ResourcePlan:
    """One way to run a job: ``dp x tp x pp`` GPUs of ``gpu_type``.

    Attributes
    ----------
    gpu_type: GPU catalogue name.
    dp, tp: data- and tensor-parallel degrees (a tensor-parallel group stays inside one node).
    pp: pipeline stages (1F1B; 1: no pipeline).
    micro_batch: sequences per micro-batch (0: not given, the whole per-replica batch);
        ``accumulation`` micro-batches make the per-replica batch ``ceil(batch / dp)``.
    predicted_bytes_per_gpu: the estimator's peak memory of one GPU.
    capacity_bytes: memory of one GPU of the type.
    est_iter_time: predicted seconds per iteration (:func:`frenzy_env.world.throughput.iteration_time_array`,
        consolidated placement), ``nan`` when the throughput model is unavailable.
    """

    gpu_type: str
    dp: int
    tp: int
    predicted_bytes_per_gpu: float
    capacity_bytes: int
    est_iter_time: float
    pp: int = 1
    micro_batch: int = 0
    accumulation: int = 1

    @property
    def num_gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def mem_util(self) -> float:
        """Predicted fraction of the GPU's memory in use."""
        return self.predicted_bytes_per_gpu / self.capacity_bytes


class PlanList(list):
    """A ranked ``list[ResourcePlan]`` with ``reason``: why it is empty ("" when it is not)."""

    def __init__(self, plans=(), reason: str = "") -> None:
        super().__init__(plans)
        self.reason = reason


@dataclass(frozen=True)
class _GpuTable:
    gpus: tuple  # (T,) GPUType
    names: tuple[str, ...]
    caps: np.ndarray  # (T,) float64 bytes
    per_node: np.ndarray  # (T,) int64 GPUs per node
    name_rank: np.ndarray  # (T,) int64 position in name order (deterministic tie-break)
    fit_rank: np.ndarray  # (T,) int64 position in (memory, cost per hour, name) order: "smallest GPU"


@lru_cache(maxsize=256)
def _gpu_table_cached(gpu_key: tuple, per_node_key: object) -> _GpuTable:
    from frenzy_env.world.cluster import GPU_TYPES, get_gpu_type

    if gpu_key == ("__all__",):
        gpus = list(GPU_TYPES.values())
    else:
        gpus = [get_gpu_type(g.strip() if isinstance(g, str) else g) for g in gpu_key]
    if not gpus:
        raise ConfigError("gpu_types must name at least one GPU type, got an empty list")
    unique: dict[str, object] = {}
    for g in gpus:
        unique.setdefault(g.name, g)
    gpus = list(unique.values())
    if isinstance(per_node_key, tuple):  # sorted (name, count) pairs
        given = dict(per_node_key)
        missing = [g.name for g in gpus if g.name not in given]
        if missing:
            raise ConfigError(
                f"gpus_per_node has no entry for GPU type(s) {', '.join(missing)}; given: {', '.join(given)}"
            )
        per_node = [check_positive_int(f"gpus_per_node[{g.name!r}]", given[g.name]) for g in gpus]
    else:
        per_node = [check_positive_int("gpus_per_node", per_node_key)] * len(gpus)
    names = tuple(g.name for g in gpus)
    caps = np.array([g.memory_bytes for g in gpus], dtype=np.float64)
    order = sorted(range(len(gpus)), key=lambda i: (gpus[i].memory_bytes, gpus[i].cost_per_hour, names[i]))
    fit_rank = np.empty(len(gpus), dtype=np.int64)
    fit_rank[order] = np.arange(len(gpus))
    arrays = (
        caps,
        np.array(per_node, dtype=np.int64),
        np.argsort(np.argsort(names)).astype(np.int64),
        fit_rank,
    )
    for a in arrays:
        a.flags.writeable = False
    return _GpuTable(tuple(gpus), names, *arrays)


def _gpu_table(gpu_types, gpus_per_node) -> _GpuTable:
    if gpu_types is None:
        gpu_key: tuple = ("__all__",)
    elif isinstance(gpu_types, str):
        gpu_key = tuple(g for g in gpu_types.split(",") if g.strip())
    else:
        gpu_key = tuple(gpu_types)
    pn_key = tuple(sorted(gpus_per_node.items())) if isinstance(gpus_per_node, dict) else gpus_per_node
    try:
        return _gpu_table_cached(gpu_key, pn_key)
    except TypeError as exc:  # unhashable entries
        raise ConfigError(f"gpu_types must be GPU type names or GPUType objects, got {gpu_types!r}") from exc


@dataclass(frozen=True)
class _Grid:
    """Candidate layouts of one job shape: P (dp, tp, pp) triples and their C micro-batch candidates."""

    dp: np.ndarray  # (P,) float64
    tp: np.ndarray
    pp: np.ndarray
    c_dp: np.ndarray  # (C,) float64 candidates: triple by triple, micro-batch descending
    c_tp: np.ndarray
    c_pp: np.ndarray
    c_mb: np.ndarray
    starts: np.ndarray  # (P,) intp first candidate of each triple
    c_index: np.ndarray  # (C,) intp position of each candidate
    slot_pp1: np.ndarray  # (P, K) float64: triple p is a pp = 1 layout of the k-th GPU count
    slot_of: np.ndarray  # (P, K) float64: triple p is a layout of the k-th GPU count


@lru_cache(maxsize=1024)
def _grid(
    batch_size: int, heads: int, layers: int, max_tp: int, max_gpus: int, max_pp: int | None = None, accumulate=True
) -> _Grid:
    """The layouts (:func:`frenzy_env.world.layouts.plan_layouts`) of every power-of-two GPU count up to ``max_gpus``,
    ``tp`` at most ``max_tp``; triples ordered by ``tp``, then count, then ``pp``; read-only."""
    dp, tp, pp, mb = plan_layouts(heads, layers, batch_size, powers_of_two(max_gpus), max_tp, max_pp, accumulate)
    key = np.stack([dp, tp, pp]).T
    new = np.ones(dp.size, dtype=bool)
    new[1:] = (key[1:] != key[:-1]).any(axis=1)
    starts0 = np.flatnonzero(new)  # candidates of a triple are contiguous
    seg_len = np.diff(np.append(starts0, dp.size))
    order = np.lexsort((pp[starts0], dp[starts0] * tp[starts0] * pp[starts0], tp[starts0]))  # by tp, count, pp
    cand = np.concatenate([np.arange(starts0[k], starts0[k] + seg_len[k]) for k in order]).astype(np.intp)
    starts = np.concatenate([[0], np.cumsum(seg_len[order])[:-1]]).astype(np.intp)
    f = np.float64
    arrays = (
        dp[starts0][order].astype(f), tp[starts0][order].astype(f), pp[starts0][order].astype(f),
        dp[cand].astype(f), tp[cand].astype(f), pp[cand].astype(f), mb[cand].astype(f),
        starts, np.arange(cand.size, dtype=np.intp),
    )
    count = arrays[0] * arrays[1] * arrays[2]
    slot_of = (count[:, None] == np.array(powers_of_two(max_gpus), dtype=f)[None, :]).astype(f)
    arrays = (*arrays, slot_of * (arrays[2] == 1.0)[:, None], slot_of)
    for a in arrays:
        a.flags.writeable = False
    return _Grid(*arrays)


def feasible_plans(
    model: str | ModelSpec,
    *,
    batch_size: int,
    seq_len: int,
    gpu_types=None,
    method: str = DEFAULT_METHOD,
    max_gpus: int = 64,
    gpus_per_node: int | dict[str, int] = 8,
    max_pp: int | None = None,
    accumulate: bool = True,
    **options: object,
) -> tuple[tuple, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The numpy core of :func:`plan_resources`: no Python object per plan.

    Returns
    -------
    gpus: (T,) the resolved :class:`~frenzy_env.world.cluster.GPUType` objects.
    dp, tp, pp: (P,) float64 candidate layouts: the legal layouts (:func:`frenzy_env.world.layouts.plan_layouts`)
        of every power-of-two GPU count up to ``max_gpus``, ``tp`` at most the largest ``gpus_per_node``.
    micro_batch: (T, P) float64 the micro-batch MARP keeps on each type (see the module docstring; nan where
        none fits).
    mem: (T, P) float64 predicted bytes per GPU at that micro-batch (``inf`` where none fits).
    ok: (T, P) bool: the plan fits the type's memory and its ``tp`` fits in one node of the type.
    """
    table, grid, mb, mem, ok, _ = _feasible(
        model, batch_size, seq_len, gpu_types, method, max_gpus, gpus_per_node, options, max_pp, accumulate
    )
    return table.gpus, grid.dp, grid.tp, grid.pp, mb, mem, ok


def _feasible(
    model, batch_size, seq_len, gpu_types, method, max_gpus, gpus_per_node, options, max_pp=None, accumulate=True
):
    spec = model if isinstance(model, ModelSpec) else get_model(model)
    b, s = check_job(batch_size, seq_len)
    opts, key = resolved_options(method, options)
    if method == "extended" and (opts["pp"] != 1 or opts["micro_batch"] is not None):
        raise ConfigError(
            "plan_resources chooses pp and the micro-batch itself; do not pass them as options "
            f"(got pp={opts['pp']}, micro_batch={opts['micro_batch']})"
        )
    mg = check_positive_int("max_gpus", max_gpus)
    table = _gpu_table(gpu_types, gpus_per_node)
    mp = None if max_pp is None else check_positive_int("max_pp", max_pp)
    g = _grid(b, spec.heads, spec.layers, int(table.per_node.max()), mg, mp, bool(accumulate))
    mem_c = total_layouts(spec, b, s, g.c_dp, g.c_tp, g.c_pp, g.c_mb, method, opts, key)  # (C,)
    n_c = mem_c.size
    if n_c == 0:
        empty = np.zeros((len(table.names), 0))
        return table, g, empty, empty, empty.astype(bool), mem_c
    fit_c = mem_c <= table.caps[:, None]  # (T, C)
    first = np.minimum.reduceat(np.where(fit_c, g.c_index, n_c), g.starts, axis=1)  # (T, P) largest mb that fits
    ok = (first < n_c) & (g.tp <= table.per_node[:, None])
    # pipeline stages only where the job needs them: on a (type, count) slot with no pp = 1 layout that fits
    pp1_fits = (ok.astype(np.float64) @ g.slot_pp1) > 0.0  # (T, K)
    ok &= (g.pp == 1.0) | ~((pp1_fits.astype(np.float64) @ g.slot_of.T) > 0.0)
    pick = np.minimum(first, n_c - 1)
    mb = np.where(ok, g.c_mb[pick], np.nan)
    mem = np.where(ok, mem_c[pick], np.inf)
    return table, g, mb, mem, ok, mem_c


def _iter_times(spec, b, s, table: _GpuTable, t_idx, dp_f, tp_f, pp_f, mb_f, speed=None) -> np.ndarray:
    """Estimated seconds per iteration of the given plans (consolidated placement); nan without a model.
    ``speed``: extra keywords of :func:`frenzy_env.world.throughput.iteration_time_array` (utilisation, efficiency)."""
    out = np.full(t_idx.shape, np.nan)
    try:
        from frenzy_env.world.throughput import iteration_time_array
    except ImportError:  # pragma: no cover - throughput.py ships with the package
        return out
    for ti in np.unique(t_idx).tolist():
        sel = t_idx == ti
        n = dp_f[sel] * tp_f[sel] * pp_f[sel]
        span = np.maximum(1.0, np.ceil(n / table.per_node[ti]))
        out[sel] = iteration_time_array(
            spec, batch_size=b, seq_len=s, gpu=table.gpus[ti], dp=dp_f[sel], tp=tp_f[sel], nodes_spanned=span,
            pp=pp_f[sel], micro_batch=mb_f[sel], **(speed or {}),
        )
    return out


def _no_fit_reason(spec, b, s, table: _GpuTable, g: _Grid, mem_c, max_gpus) -> str:
    big = int(np.argmax(table.caps))
    if mem_c.size == 0:
        return f"{spec.name} with batch_size={b} has no legal layout on up to max_gpus={max_gpus} GPUs"
    allowed = g.c_tp <= table.per_node[big]
    k = int(np.argmin(np.where(allowed, mem_c, np.inf)))
    tp_note = ""
    if spec.heads % 2:
        tp_note = f"; tp must divide heads={spec.heads}, so only tp=1"
    layout = f"dp={int(g.c_dp[k])}, tp={int(g.c_tp[k])}, pp={int(g.c_pp[k])}, micro-batch {int(g.c_mb[k])}"
    return (
        f"{spec.name} with batch_size={b}, seq_len={s} fits on no GPU: it needs {mem_c[k] / GiB:.1f} GiB per GPU "
        f"even at its most frugal plan {layout} (max_gpus={max_gpus}{tp_note}); the "
        f"largest GPU, {table.names[big]}, has {table.caps[big] / GiB:.0f} GiB. Reduce the batch or sequence "
        f"length, use activation recomputation or ZeRO, or allow more GPUs."
    )


def _rank(ranking, table: _GpuTable, t_idx, n_f, tp_f, pp_f, mem_f, cap_f, times) -> np.ndarray:
    """Order of the feasible plans (np.lexsort: the last key is the primary one)."""
    if ranking == "min_gpus":  # fit_rank already orders types by (memory, cost per hour, name)
        return np.lexsort((tp_f, pp_f, table.fit_rank[t_idx], n_f))
    name_rank = table.name_rank[t_idx]
    if ranking == "max_mem_util":
        return np.lexsort((name_rank, tp_f, pp_f, n_f, -(mem_f / cap_f)))
    t_safe = np.nan_to_num(times, nan=np.inf)
    if ranking == "min_est_time":
        return np.lexsort((name_rank, tp_f, pp_f, cap_f, n_f, t_safe))
    if ranking == "min_gpus_fastest":
        return np.lexsort((name_rank, tp_f, pp_f, cap_f, t_safe, n_f))
    return np.lexsort((name_rank, tp_f, pp_f, cap_f, t_safe, n_f * t_safe))  # min_gpu_hours


def plan_resources(
    model: str | ModelSpec,
    *,
    batch_size: int,
    seq_len: int,
    gpu_types=None,
    method: str = DEFAULT_METHOD,
    ranking: str = DEFAULT_RANKING,
    max_gpus: int = 64,
    gpus_per_node: int | dict[str, int] = 8,
    with_times: bool | None = None,
    max_pp: int | None = None,
    accumulate: bool = True,
    utilisation: float | None = None,
    efficiency: str | None = None,
    **options: object,
) -> PlanList:
    """Every feasible (gpu_type, dp, tp, pp) plan of a job, best first (MARP, Frenzy arXiv 2412.14479).

    Candidates: the legal layouts (:func:`frenzy_env.world.layouts.plan_layouts`) of every power-of-two GPU count up
    to ``max_gpus`` (``dp <= batch_size``; ``tp`` at most the GPUs of one node of the type and dividing the
    attention heads, as Megatron-LM splits heads evenly; ``pp`` a power of two dividing the layers), each
    with the micro-batch MARP keeps (the largest that fits at ``pp == 1``, 1 at ``pp > 1``).
    A plan is feasible when the predicted peak bytes per GPU are at most the GPU's memory. Within equal
    ranking keys, fewer pipeline stages come first, then smaller ``tp``.

    Rankings (the paper never defines one; later keys break ties, the GPU name last):

    - ``"min_gpus"`` (env v4's Frenzy ranking; a "tightest fit"): fewest GPUs, then the
      smallest GPU memory that fits (equal memory: the cheaper GPU per hour), then the smaller ``tp``;
    - ``"max_mem_util"``: highest predicted memory utilisation, then fewest GPUs, then smaller ``tp``;
    - ``"min_est_time"``: shortest predicted iteration time, then fewest GPUs, then smaller memory;
    - ``"min_gpu_hours"``: smallest GPUs x iteration time, then the shorter time, then smaller memory;
    - ``"min_gpus_fastest"`` (the default, :data:`DEFAULT_RANKING`): fewest GPUs (MARP's "required number" of
      GPUs), then the shortest predicted iteration (HAS's "optimize training efficiency", arXiv 2412.14479's
      abstract), then smaller memory: the tightest fit in GPUs without ``"min_gpus"``'s preference for the
      smallest (slowest) GPU.

    Parameters
    ----------
    gpu_types: names or :class:`~frenzy_env.world.cluster.GPUType` objects (a comma-separated string works too);
        ``None`` means the whole catalogue.
    gpus_per_node: one count for every type, or ``{type name: count}``.
    with_times: fill ``est_iter_time`` (one throughput-model call per GPU type). ``None`` (default): only
        when the ranking needs it ("min_est_time", "min_gpu_hours"); otherwise it is ``nan``.
    max_pp: most pipeline stages (``None``: as many as the GPU count and the layers allow; 1: no pipeline).
    accumulate: allow gradient accumulation (``False``: the micro-batch is the whole per-replica batch).
        ``max_pp=1, accumulate=False`` is the plan search without either (the (dp, tp) plans of before).
    utilisation, efficiency: the throughput model's settings for ``est_iter_time``
        (:func:`frenzy_env.world.throughput.iteration_time_array`; ``None``: its defaults), e.g. a simulator's
        ``SimConfig.utilisation`` and ``SimConfig.efficiency`` so the times are the ones it charges.
    options: estimator options (see :func:`estimate_memory`); not ``pp`` or ``micro_batch``, which the
        search chooses.

    Returns
    -------
    :class:`PlanList`; when nothing fits it is empty and ``.reason`` says what the job would need.
    """
    if ranking not in RANKINGS:
        raise unknown_name("ranking", ranking, RANKINGS)
    spec = model if isinstance(model, ModelSpec) else get_model(model)
    table, g, mb, mem, ok, mem_c = _feasible(
        spec, batch_size, seq_len, gpu_types, method, max_gpus, gpus_per_node, options, max_pp, accumulate
    )
    b, s = int(batch_size), int(seq_len)
    t_idx, p_idx = np.nonzero(ok)  # (F,) each
    if t_idx.size == 0:
        return PlanList([], _no_fit_reason(spec, b, s, table, g, mem_c, max_gpus))
    dp_f, tp_f, pp_f = g.dp[p_idx], g.tp[p_idx], g.pp[p_idx]
    mem_f, mb_f = mem[t_idx, p_idx], mb[t_idx, p_idx]
    cap_f = table.caps[t_idx]
    need_times = ranking in TIMED_RANKINGS
    if with_times or (with_times is None and need_times):
        speed = {k: v for k, v in (("utilisation", utilisation), ("efficiency", efficiency)) if v is not None}
        times = _iter_times(spec, b, s, table, t_idx, dp_f, tp_f, pp_f, mb_f, speed)
    else:
        times = np.full(t_idx.shape, np.nan)
    n_f = dp_f * tp_f * pp_f
    order = _rank(ranking, table, t_idx, n_f, tp_f, pp_f, mem_f, cap_f, times)
    names = table.names
    acc_f = np.ceil(np.ceil(b / dp_f) / mb_f)
    ti_l = t_idx[order].tolist()
    dp_l, tp_l, pp_l, mb_l, acc_l = (a[order].astype(np.int64).tolist() for a in (dp_f, tp_f, pp_f, mb_f, acc_f))
    mem_l, cap_l, time_l = mem_f[order].tolist(), cap_f[order].astype(np.int64).tolist(), times[order].tolist()
    new, cls = object.__new__, ResourcePlan
    out = []
    for i in range(len(ti_l)):  # a frozen dataclass's __init__ sets fields one by one: fill __dict__ at once
        plan = new(cls)
        plan.__dict__.update(
            gpu_type=names[ti_l[i]], dp=dp_l[i], tp=tp_l[i], predicted_bytes_per_gpu=mem_l[i],
            capacity_bytes=cap_l[i], est_iter_time=time_l[i], pp=pp_l[i], micro_batch=mb_l[i], accumulation=acc_l[i],
        )
        out.append(plan)
    return PlanList(out, "")


def fits(
    model: str | ModelSpec,
    *,
    batch_size: int,
    seq_len: int,
    gpu,
    dp: int,
    tp: int,
    method: str = DEFAULT_METHOD,
    gpus_per_node: int = 8,
    **options: object,
) -> bool:
    """Whether the plan ``dp x tp`` GPUs of type ``gpu`` holds the job in memory.

    Raises ``ConfigError`` when ``tp`` exceeds ``gpus_per_node`` (a tensor-parallel group never spans
    nodes) and for the bad inputs :func:`estimate_memory` rejects.
    """
    from frenzy_env.world.cluster import get_gpu_type

    g = get_gpu_type(gpu)
    t, n = check_positive_int("tp", tp), check_positive_int("gpus_per_node", gpus_per_node)
    if t > n:
        raise ConfigError(
            f"tp={t} exceeds gpus_per_node={n}: a tensor-parallel group must stay inside one node"
        )
    est = estimate_memory(
        model, batch_size=batch_size, seq_len=seq_len, dp=dp, tp=t, method=method, **options
    )
    return est.total_bytes <= g.memory_bytes
