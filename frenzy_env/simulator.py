"""Event-driven simulator of a heterogeneous GPU cluster running LLM training jobs.

No Gymnasium here: :class:`ClusterSimulator` is usable on its own (scripted sweeps, trace replay) and the
environment in :mod:`frenzy_env.env` is a thin layer over it.

World model
-----------
* Jobs arrive at their submit time and wait in a queue ordered by arrival.
* A *plan slot* ``p`` is a (GPU type, GPU count) pair, count in 1, 2, 4, ... up to ``max_plan_gpus``. For
  each job and plan slot the simulator precomputes, once, with numpy (Gavel's job x plan matrix):
  the data/tensor-parallel layout the predictor picks (the fastest layout the predictor says fits), whether
  the predictor says it fits (``pred_ok``), whether it truly fits (``true_ok``, the "extended" estimator),
  and its iteration time on a consolidated placement.
* ``start(job, p)`` places the job with the configured placer and allocates GPUs. Progress begins after
  ``startup_time``. A plan that truly does not fit fails with out-of-memory ``oom_delay`` seconds after the
  start: the GPUs are released, the job returns to the queue, the failure is counted and the plan is
  remembered as bad for that job (a real scheduler learns from the crash). A job whose every predicted
  plan has failed is rejected.
* ``resize(job, p)`` stops the job, checkpoints, and restarts it on another plan: it makes no progress for
  ``restart_overhead + startup_time`` seconds. A job still starting up cannot be resized (so a policy cannot
  keep a job restarting forever within one instant). ``preempt(job)`` checkpoints it back to the queue.
* Jobs that fit nowhere (under the predictor) are rejected at arrival with a reason and counted.
* :meth:`advance` moves time to the next event (finish, OOM, arrival) and processes every event due then.

Every state array is numpy; per-step work is O(queue window x plan slots) with no large allocations.

Performance (see ``frenzy benchmark``): the job x plan matrices are computed once per distinct (model, batch,
sequence); the cluster state keeps the GPUs placeable per (type, tensor-parallel level) up to date in
O(nodes touched); masks are table look-ups; per-job mirrors of the running book-keeping (``run_plan``,
``run_version``, ``run_floats``, ``restart_count``, ``avail``, ``avail_iter_time``) and change counters
(``queue_version``, ``running_version``, ``requeued``) let views (the environment's observation) update
only what changed. They are maintained by the simulator; callers read them, never write them.
"""

from __future__ import annotations

import bisect
import heapq
import math
from array import array
from dataclasses import asdict, dataclass, fields

import numpy as np

from frenzy_env.cluster import ClusterSpec, ClusterState, get_gpu_type
from frenzy_env.errors import ConfigError, check_keys
from frenzy_env.memory import estimate_memory_array, plan_resources
from frenzy_env.placement import capacity_by_tp, place
from frenzy_env.throughput import DEFAULT_UTILISATION, iteration_time, iteration_time_array
from frenzy_env.workload import Workload

FUTURE, QUEUED, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4
_FINISH, _OOM = 0, 1  # event kinds; at equal times finishes are processed before OOM failures
_NO_FIT = np.iinfo(np.int64).max  # sentinel free count of nodes that cannot hold a job
PREDICTORS = ("frenzy", "extended", "oracle")
WORK_INFO = ("exact", "noisy", "none")


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings (all times in seconds).

    Attributes
    ----------
    predictor: memory predictor behind ``pred_ok`` (what policies see): "frenzy" (the paper's formula),
        "extended" (our calibrated estimator) or "oracle" (the ground truth itself).
    startup_time: seconds between a start and the first iteration (container, data loader, compile).
    restart_overhead: extra seconds a resize costs (stop and checkpoint), on top of ``startup_time``;
        Capes et al. (arXiv 1908.08082) measured about 10 s.
    oom_delay: seconds after a start at which a plan that does not fit fails with out-of-memory.
    max_plan_gpus: largest GPU count of a plan slot (powers of two up to it).
    placement: "best_fit" (Frenzy's HAS) or "spread" (locality-aware, largest free nodes first).
    work_info: what schedulers know of a job's work: "exact" (the configured iterations; the default, since
        a training configuration states them), "noisy" (multiplied by a per-job log-normal factor with
        sigma ``work_noise``), "none" (nothing; estimates are the workload's median).
    work_noise: sigma of the log-normal error for ``work_info="noisy"``.
    utilisation: fraction of peak FLOP/s that dense compute reaches (see :mod:`frenzy_env.throughput`).
    """

    predictor: str = "extended"
    startup_time: float = 30.0
    restart_overhead: float = 10.0
    oom_delay: float = 30.0
    max_plan_gpus: int = 64
    placement: str = "best_fit"
    work_info: str = "exact"
    work_noise: float = 0.5
    utilisation: float = DEFAULT_UTILISATION

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ConfigError(f"predictor must be one of {', '.join(PREDICTORS)}, got {self.predictor!r}")
        if self.work_info not in WORK_INFO:
            raise ConfigError(f"work_info must be one of {', '.join(WORK_INFO)}, got {self.work_info!r}")
        if self.placement not in ("best_fit", "spread"):
            raise ConfigError(f"placement must be 'best_fit' or 'spread', got {self.placement!r}")
        for name in ("startup_time", "restart_overhead", "oom_delay", "work_noise"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (isinstance(self.max_plan_gpus, int) and self.max_plan_gpus >= 1):
            raise ConfigError(f"max_plan_gpus must be an integer >= 1, got {self.max_plan_gpus!r}")
        if not (0 < self.utilisation <= 1):
            raise ConfigError(f"utilisation must be in (0, 1], got {self.utilisation!r}")

    @classmethod
    def from_dict(cls, values: dict) -> SimConfig:
        """Build from a dict; a misspelt key raises :class:`ConfigError` naming it."""
        check_keys("simulator config", values, [f.name for f in fields(cls)])
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class JobRecord:
    """What happened to one job (one row of the per-job table)."""

    job_id: int
    submit_time: float
    start_time: float = math.nan
    finish_time: float = math.nan
    gpu_type: str = ""
    num_gpus: int = 0
    dp: int = 0
    tp: int = 0
    restarts: int = 0
    oom_failures: int = 0
    gpu_seconds: float = 0.0
    rejected_reason: str = ""


@dataclass
class _Running:
    """Book-keeping of a job that holds GPUs."""

    plan: int
    tp: int
    counts: np.ndarray  # (num_nodes,) GPUs held per node
    held_since: float  # start of this allocation (GPU-seconds accounting)
    progress_from: float  # time the first iteration of this attempt starts
    done_base: float  # iterations done before progress_from
    rate: float  # iterations per second on this placement
    will_oom: bool
    version: int = 0


class _SimState(ClusterState):
    """:class:`ClusterState` with fast allocate/release and incrementally maintained aggregates.

    Besides ``free`` and ``owner`` it keeps ``cap`` (num_types, L): GPUs placeable per type in
    tensor-parallel groups of each level (what :func:`~frenzy_env.placement.capacity_by_tp` returns for
    ``free``), ``free_t`` (num_types,) free GPUs per type, each node's free GPU indices (ascending, so an
    allocation takes a node's first free GPUs, as :class:`ClusterState` does), the (nodes, counts) of
    every allocation and a ``version`` that changes whenever ``free`` does. Updates cost O(nodes touched).
    """

    def __init__(self, spec: ClusterSpec, tp_levels: np.ndarray) -> None:
        super().__init__(spec)
        self._tpl = np.asarray(tp_levels, dtype=np.int64)  # (L,)
        self._types = spec.node_type_index  # (N,)
        offsets = spec.node_offsets.tolist()
        self._free_gpus = [list(range(offsets[i], offsets[i + 1])) for i in range(spec.num_nodes)]
        num_types = len(spec.gpu_types)
        levels = np.arange(int(spec.node_capacity.max()) + 1)
        self.units = (levels[:, None] // self._tpl) * self._tpl  # (max node GPUs + 1, L): whole tp groups
        self._unit_delta = self.units[None, :, :] - self.units[:, None, :]  # (C+1, C+1, L): [old, new]
        c = len(levels)
        self.gain_stride = c
        # row held * (C+1) + free: GPUs a job holding ``held`` on a node with ``free`` more would place
        self.gain_table = self._unit_delta[
            levels[None, :], np.minimum(levels[:, None] + levels[None, :], c - 1)
        ].reshape(c * c, -1)  # ((C+1)^2, L)
        self.cap = capacity_by_tp(self.free, self._types, num_types, self._tpl)  # (T, L)
        self.free_t = np.bincount(self._types, weights=self.free, minlength=num_types).astype(np.int64)  # (T,)
        self._nodes: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # job -> (nodes, counts) held
        self.version = 0

    def free_by_type(self) -> np.ndarray:
        """(num_types,) free GPUs per type."""
        return self.free_t.copy()

    def held_nodes(self, job_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, counts) of the allocation of ``job_id``."""
        return self._nodes[job_id]

    def allocate(self, job_id: int, counts: np.ndarray) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != self.free.shape:
            raise ValueError(f"counts must have shape {self.free.shape}, got {counts.shape}")
        nodes = np.flatnonzero(counts)  # (k,)
        return self._take(job_id, nodes, counts[nodes])

    def _take(self, job_id: int, nodes: np.ndarray, want: np.ndarray) -> np.ndarray:
        """Allocate ``want[i]`` GPUs on ``nodes[i]`` (ascending, non-zero counts)."""
        if job_id in self._held:
            raise ValueError(f"job {job_id} already holds GPUs; release them before allocating again")
        free_gpus = self._free_gpus
        pairs = list(zip(nodes.tolist(), want.tolist()))
        for node, k in pairs:
            if not 0 <= k <= len(free_gpus[node]):
                raise ValueError(
                    f"cannot allocate {k} GPUs on node {node} to job {job_id}: {int(self.free[node])} free"
                )
        taken: list[int] = []
        for node, k in pairs:
            gpus = free_gpus[node]
            taken += gpus[:k]
            del gpus[:k]
        idx = np.array(taken, dtype=np.int64)
        self.owner[idx] = job_id
        if len(pairs) == 1:
            node, k = pairs[0]
            self._set_one(node, len(free_gpus[node]) + k, len(free_gpus[node]))
        else:
            old = self.free[nodes]
            self._update(nodes, old, old - want)
        self._held[job_id] = idx
        self._nodes[job_id] = (nodes, want)
        return idx

    def release(self, job_id: int) -> np.ndarray:
        nodes, want = self._give(job_id)
        counts = np.zeros(self.free.shape[0], dtype=np.int64)
        counts[nodes] = want
        return counts

    def _give(self, job_id: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`release` returning the (nodes, counts) freed."""
        idx = self._held.pop(job_id, None)
        if idx is None:
            raise ValueError(f"job {job_id} holds no GPUs")
        nodes, want = self._nodes.pop(job_id)
        self.owner[idx] = -1
        free_gpus = self._free_gpus
        gpus_back = idx.tolist()
        pos = 0
        pairs = list(zip(nodes.tolist(), want.tolist()))
        for node, k in pairs:
            gpus = free_gpus[node]
            gpus += gpus_back[pos : pos + k]
            gpus.sort()
            pos += k
        if len(pairs) == 1:
            node, k = pairs[0]
            self._set_one(node, len(free_gpus[node]) - k, len(free_gpus[node]))
        else:
            old = self.free[nodes]
            self._update(nodes, old, old + want)
        return nodes, want

    def _update(self, nodes: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        """Free GPUs of ``nodes`` go from ``old`` to ``new``: update ``free``, ``cap``, ``free_t``."""
        self.free[nodes] = new
        types = self._types[nodes]
        np.add.at(self.cap, types, self.units[new] - self.units[old])  # (k, L)
        np.add.at(self.free_t, types, new - old)
        self.version += 1

    def _set_one(self, node: int, old: int, new: int) -> None:
        """:meth:`_update` for one node."""
        self.free[node] = new
        t = int(self._types[node])
        self.cap[t] += self._unit_delta[old, new]
        self.free_t[t] += new - old
        self.version += 1

    def check(self) -> None:
        super().check()
        spec = self.spec
        offsets = spec.node_offsets
        for node, gpus in enumerate(self._free_gpus):
            lo, hi = offsets[node], offsets[node + 1]
            assert gpus == (lo + np.flatnonzero(self.owner[lo:hi] < 0)).tolist(), f"free list of node {node}"
        cap = capacity_by_tp(self.free, self._types, len(spec.gpu_types), self._tpl)
        assert (self.cap == cap).all(), "placeable capacity drifted"
        assert (self.free_t == np.bincount(self._types, weights=self.free, minlength=len(cap))).all()


class ClusterSimulator:
    """Discrete-event simulator; see the module docstring for the world model.

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
        self._build_plan_slots()
        self._build_job_matrices(workload, seed)
        self.reset_state()

    # ------------------------------------------------------------------ static precomputation
    def _build_plan_slots(self) -> None:
        spec = self.cluster
        self.gpu_types = spec.gpu_types
        self.num_types = len(self.gpu_types)
        largest = int(spec.type_capacity.max())
        limit = min(self.config.max_plan_gpus, largest)
        counts = [1]
        while counts[-1] * 2 <= limit:
            counts.append(counts[-1] * 2)
        self.plan_counts_levels = np.array(counts, dtype=np.int64)  # (K,)
        k = len(counts)
        self.num_plans = self.num_types * k
        self.plan_type = np.repeat(np.arange(self.num_types), k)  # (P,)
        self.plan_count = np.tile(self.plan_counts_levels, self.num_types)  # (P,)
        self.max_node_gpus = np.array([spec.max_gpus_per_node(t) for t in self.gpu_types], dtype=np.int64)
        tp_levels = [1]
        while tp_levels[-1] * 2 <= int(self.max_node_gpus.max()):
            tp_levels.append(tp_levels[-1] * 2)
        self.tp_levels = np.array(tp_levels, dtype=np.int64)  # (L,)
        onehot = np.zeros((spec.num_nodes, self.num_types), dtype=np.int64)
        onehot[np.arange(spec.num_nodes), spec.node_type_index] = 1
        self._type_onehot = onehot  # (N, T)
        # GPUs placeable in tp-groups on an empty cluster: plans beyond it can never run
        self._empty_cap = self._capacity(spec.node_capacity[None, :])[0]  # (T, L)
        self._type_nodes = [np.flatnonzero(spec.node_type_index == t) for t in range(self.num_types)]
        self._plan_need = self.plan_count[:, None]  # (P, 1)

    def _capacity(self, free: np.ndarray) -> np.ndarray:
        """free (B, N) -> (B, T, L): GPUs placeable per type in tensor-parallel groups of each level."""
        groups = (free[:, None, :] // self.tp_levels[None, :, None]) * self.tp_levels[None, :, None]  # (B,L,N)
        return np.matmul(groups, self._type_onehot).transpose(0, 2, 1)  # (B, T, L)

    def _build_job_matrices(self, workload: Workload, seed: int) -> None:
        n, p = self.num_jobs, self.num_plans
        cfg = self.config
        self.submit = np.array([j.submit_time for j in self.jobs], dtype=np.float64)  # (J,)
        sorted_wl = Workload(name=workload.name, jobs=self.jobs, source=workload.source)
        work = sorted_wl.work_iterations(self.cluster, utilisation=cfg.utilisation)
        self.work = np.asarray(work, dtype=np.float64)  # (J,)
        if not np.all(np.isfinite(self.work)) or (self.work <= 0).any():
            bad = int(np.flatnonzero(~np.isfinite(self.work) | (self.work <= 0))[0])
            raise ConfigError(f"job {self.jobs[bad].job_id} has non-positive work {self.work[bad]!r}")
        rng = np.random.default_rng(seed)
        if cfg.work_info == "exact":
            self.work_estimate = self.work.copy()
        elif cfg.work_info == "noisy":
            self.work_estimate = self.work * rng.lognormal(0.0, cfg.work_noise, size=n)
        else:
            self.work_estimate = np.full(n, float(np.median(self.work)))
        self.pred_ok = np.zeros((n, p), dtype=bool)  # (J, P)
        self.true_ok = np.zeros((n, p), dtype=bool)
        self.layout_tp = np.ones((n, p), dtype=np.int64)
        self.iter_time = np.full((n, p), np.inf)  # consolidated placement, chosen layout
        self.reject_reason = [""] * n
        cache: dict[tuple, int] = {}
        rows: list[tuple] = []
        key_of_job = np.empty(n, dtype=np.int64)
        for i, job in enumerate(self.jobs):
            key = (id(job.model), int(job.batch_size), int(job.seq_len))
            idx = cache.get(key)
            if idx is None:
                idx = cache[key] = len(rows)
                rows.append(self._plan_row(job.model, key[1], key[2]))
            key_of_job[i] = idx
        pred = np.stack([r[0] for r in rows])
        true = np.stack([r[1] for r in rows])
        tp = np.stack([r[2] for r in rows])
        it = np.stack([r[3] for r in rows])
        self.pred_ok[:] = pred[key_of_job]
        self.true_ok[:] = true[key_of_job]
        self.layout_tp[:] = tp[key_of_job]
        self.iter_time[:] = it[key_of_job]
        self.layout_tp_idx = np.log2(self.layout_tp).astype(np.int64)  # (J, P) index into tp_levels
        self._row_key = key_of_job
        self._row_reason = [r[4] for r in rows]
        self._spread_iter_time: dict[tuple[int, int, int], float] = {}  # (row, plan, nodes) -> s/iteration
        # per distinct configuration (K rows), flat indices for the masks: plan p with its layout's tp level
        # into a (P, L) table, and GPU type with that level into a (T, L) table
        levels = len(self.tp_levels)
        tp_idx = np.log2(tp).astype(np.intp)  # (K, P)
        row_pl = np.arange(p)[None, :] * levels + tp_idx  # (K, P)
        row_tl = self.plan_type[None, :] * levels + tp_idx  # (K, P)
        self._job_pl = row_pl.astype(np.int32)[key_of_job]  # (J, P) cell of each plan in a (P, L) table
        self._job_tl = row_tl.astype(np.int32)[key_of_job]  # (J, P) cell of each plan in a (T, L) table
        self._fits_somewhere = self.pred_ok.any(axis=1).tolist()  # (J,) arrival-time rejection test
        self._num_tl = self.num_types * levels
        self._type_onehot_plan = (self.plan_type[:, None] == np.arange(self.num_types)).astype(np.int64)  # (P, T)
        self._plan_type_l = self.plan_type.tolist()  # Python ints for scalar look-ups in the hot path
        self._plan_count_l = self.plan_count.tolist()
        self._max_node_gpus_l = self.max_node_gpus.tolist()
        self._best_fit = self.config.placement == "best_fit"
        self._row_range = np.zeros(0, dtype=np.int64)
        self._row_cells = np.zeros((0, 1), dtype=np.int32)
        self._max_span = max(  # most nodes one job can span (one GPU per node at worst)
            min(len(nodes), int(self.plan_counts_levels[-1])) for nodes in self._type_nodes
        )

    def _plan_row(self, model, batch: int, seq: int) -> tuple:
        """Feasibility, layout and speed of one (model, batch, seq) on every plan slot."""
        p = self.num_plans
        pred_ok = np.zeros(p, dtype=bool)
        true_ok = np.zeros(p, dtype=bool)
        best_tp = np.ones(p, dtype=np.int64)
        best_it = np.full(p, np.inf)
        cfg = self.config
        pred_method = "extended" if cfg.predictor == "oracle" else cfg.predictor
        for t_idx, t_name in enumerate(self.gpu_types):
            gpu = get_gpu_type(t_name)
            per_node = int(self.max_node_gpus[t_idx])
            cnt, tps = [], []
            for c in self.plan_counts_levels:
                for tp in self.tp_levels:
                    if tp <= c and tp <= per_node and c // tp <= batch and model.heads % tp == 0:
                        cnt.append(int(c))
                        tps.append(int(tp))
            if not cnt:
                continue
            cnt_a = np.array(cnt, dtype=np.int64)
            tp_a = np.array(tps, dtype=np.int64)
            dp_a = cnt_a // tp_a
            cap = gpu.memory_bytes
            true_fit = estimate_memory_array(model, batch_size=batch, seq_len=seq, dp=dp_a, tp=tp_a) <= cap
            if pred_method == "extended":
                pred_fit = true_fit
            else:
                pred_fit = (
                    estimate_memory_array(model, batch_size=batch, seq_len=seq, dp=dp_a, tp=tp_a, method=pred_method)
                    <= cap
                )
            spanned = np.maximum(1, -(-cnt_a // per_node))
            it = iteration_time_array(
                model, batch_size=batch, seq_len=seq, gpu=gpu, dp=dp_a, tp=tp_a,
                nodes_spanned=spanned, utilisation=cfg.utilisation,
            )
            tp_pos = np.log2(tp_a).astype(np.int64)
            placeable = self._empty_cap[t_idx, tp_pos] >= cnt_a
            for k_idx, c in enumerate(self.plan_counts_levels):
                slot = t_idx * len(self.plan_counts_levels) + k_idx
                sel = np.flatnonzero((cnt_a == c) & placeable)
                if sel.size == 0:
                    continue
                ok = sel[pred_fit[sel]]
                choose = ok if ok.size else sel  # fastest predicted-feasible layout, else fastest
                best = choose[np.argmin(it[choose])]
                pred_ok[slot] = bool(ok.size)
                true_ok[slot] = bool(true_fit[best])
                best_tp[slot] = tp_a[best]
                best_it[slot] = it[best]
        reason = ""
        if not pred_ok.any():
            types = [get_gpu_type(t) for t in self.gpu_types]
            plans = plan_resources(
                model, batch_size=batch, seq_len=seq, gpu_types=types, method=pred_method,
                max_gpus=int(self.plan_counts_levels[-1]),
                gpus_per_node={t: int(g) for t, g in zip(self.gpu_types, self.max_node_gpus)},
            )
            reason = getattr(plans, "reason", "") or (
                f"no plan of up to {int(self.plan_counts_levels[-1])} GPUs fits in memory on this cluster"
            )
        return pred_ok, true_ok, best_tp, best_it, reason

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
        self.queue: list[int] = []  # job indices, sorted (arrival order)
        self.running: dict[int, _Running] = {}  # insertion order = start order
        self._events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job, version)
        self._seq = 0
        self._next_arrival = 0
        self.finished = 0
        self.rejected = 0
        self.oom_failures = 0
        self.restarts = 0
        self.busy_gpus = 0
        self.util_times = array("d", [self.now])
        self.util_busy = array("d", [0.0])
        # per-job mirrors of the running book-keeping, for vectorised reads (observations, masks)
        self.run_plan = np.full(n, -1, dtype=np.int64)  # (J,) current plan slot, -1 when not running
        # GPUs held per node by each running job: a slot of up to M (node, count) pairs, unused (-1, 0)
        slots = self.cluster.num_gpus  # every running job holds a GPU
        self._slot_of = np.full(n, -1, dtype=np.int64)  # (J,) slot of a running job
        self._slot_nodes = np.full((slots, self._max_span), -1, dtype=np.int64)  # (S, M)
        self._slot_cells = np.zeros((slots, self._max_span), dtype=np.int64)  # (S, M) count * gain_stride
        self._slot_span = np.zeros(slots, dtype=np.int64)  # (S,) nodes used
        self._free_slots = list(range(slots - 1, -1, -1))
        self.avail = self.pred_ok.copy()  # (J, P) pred_ok & ~oom_known, kept up to date
        self.avail_iter_time = np.where(self.avail, self.iter_time, 0.0)  # (J, P) 0 where not available
        self.run_floats = np.zeros((n, 4))  # (J, 4) done_base, progress_from, rate, first start time
        self.run_floats[:, 3] = math.nan
        self.restart_count = np.zeros(n, dtype=np.int64)  # (J,) records[j].restarts
        # change counters: views built on the queue / the running set can tell when to rebuild
        self.queue_version = 0
        self.running_version = 0
        self.requeued: list[int] = []  # jobs put back in the queue (preempted or out of memory), in order
        self._ok_version = -1
        self._ok = np.zeros(0, dtype=bool)
        self._resize_cache: tuple | None = None
        self.run_version = np.full(n, -1, dtype=np.int64)  # (J,) attempt id of running jobs, -1 otherwise
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
        """Time of the next finish, OOM or arrival (inf when none is pending)."""
        t = self._events[0][0] if self._events else math.inf
        if self._next_arrival < self.num_jobs:
            t = min(t, float(self.submit[self._next_arrival]))
        return t

    def has_pending_events(self) -> bool:
        return bool(self._events) or self._next_arrival < self.num_jobs

    def available_plans(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), P) bool: plans the predictor allows and that have not crashed for the job."""
        return self.avail[jobs]

    def _placeable(self) -> np.ndarray:
        """(P * L,) bool: plan p with tensor-parallel level l fits the free GPUs now (cached per state)."""
        st = self.state
        if self._ok_version != st.version:
            self._ok = (st.cap[self.plan_type] >= self._plan_need).ravel()  # (P, L) -> flat
            self._ok_version = st.version
        return self._ok

    def start_mask(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), P) bool: ``start(job, p)`` would succeed now (jobs must be queued)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        placeable = self._placeable()[self._job_pl[jobs]]  # (len, P)
        placeable &= self.avail[jobs]
        return placeable

    def resize_mask(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), P) bool: ``resize(job, p)`` would succeed now (jobs must be running)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        r = len(jobs)
        if r == 0:
            return np.zeros((0, self.num_plans), dtype=bool)
        attempts = self.run_version[jobs]  # (R,) changes whenever one of the jobs stops or starts
        key = (jobs.tobytes(), attempts.tobytes())
        cached = self._resize_cache
        if cached is None or cached[0] != key:
            cached = self._resize_cache = (key, *self._resize_static(jobs, attempts))
        _, progress_from, nodes, cells, onehot, index, avail = cached
        warming = progress_from > self.now  # (R,) still starting up (or restarting): no resize yet
        n_warming = np.count_nonzero(warming)  # (count_nonzero: cheaper than .all()/.any() on tiny arrays)
        if n_warming == r:
            return np.zeros((r, self.num_plans), dtype=bool)
        st = self.state
        gain = st.gain_table[cells + st.free[nodes]]  # GPUs placeable once the job's own are freed
        if gain.ndim == 3:
            gain = gain.sum(axis=1)  # (R, W, L) -> (R, L)
        cap = st.cap + onehot * gain[:, None, :]  # (R, T, L): only the job's own type changes
        placeable = cap.ravel()[index] >= self.plan_count  # (R, P)
        placeable &= avail
        if n_warming:
            placeable[warming] = False
        return placeable

    def _rows(self, r: int) -> np.ndarray:
        """np.arange(r), and (R, 1) offsets of row blocks of T * L cells, kept for reuse."""
        if len(self._row_range) < r:
            self._row_range = np.arange(2 * r)
            self._row_cells = (self._row_range * self._num_tl).astype(np.int32)[:, None]
        return self._row_range[:r]

    def _resize_static(self, jobs: np.ndarray, attempts: np.ndarray) -> tuple:
        """What :meth:`resize_mask` needs of ``jobs`` that is fixed while each keeps its attempt."""
        if np.count_nonzero(attempts < 0):
            raise KeyError(int(jobs[int(np.argmin(attempts))]))  # not running
        r = len(jobs)
        rows = self._rows(r)  # (R,) 0..R-1
        plans = self.run_plan[jobs]  # (R,)
        slots = self._slot_of[jobs]  # (R,)
        width = max(self._slot_span[slots].tolist())  # most nodes one of the jobs holds
        if width == 1:
            nodes = self._slot_nodes[slots, 0]  # (R,)
            cells = self._slot_cells[slots, 0]  # (R,) count held * gain_stride
        else:
            nodes = self._slot_nodes[slots, :width]  # (R, W), unused entries -1 with count 0
            cells = self._slot_cells[slots, :width]
        onehot = self._type_onehot_plan[plans][:, :, None]  # (R, T, 1)
        index = self._job_tl[jobs] + self._row_cells[:r]  # (R, P) cell in (R, T * L)
        avail = self.avail[jobs]
        avail[rows, plans] = False  # resizing to the current plan changes nothing
        return self.run_floats[jobs, 1], nodes, cells, onehot, index, avail

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
        return f"{self.gpu_types[self.plan_type[plan]]}x{int(self.plan_count[plan])}"

    def plan_index(self, gpu_type: str, num_gpus: int) -> int:
        """Plan slot of (gpu_type, num_gpus); ValueError when the cluster has no such slot."""
        if gpu_type not in self.gpu_types:
            raise ValueError(f"GPU type {gpu_type!r} is not in cluster {self.cluster.name!r}")
        hits = np.flatnonzero(self.plan_counts_levels == num_gpus)
        if hits.size == 0:
            raise ValueError(f"num_gpus must be one of {self.plan_counts_levels.tolist()}, got {num_gpus}")
        return self.gpu_types.index(gpu_type) * len(self.plan_counts_levels) + int(hits[0])

    # ------------------------------------------------------------------ actions
    def start(self, job: int, plan: int) -> bool:
        """Start queued ``job`` on plan slot ``plan``. Returns False (and changes nothing) if illegal."""
        if not (0 <= plan < self.num_plans) or not (0 <= job < self.num_jobs) or self.status[job] != QUEUED:
            return False
        if not self.avail[job, plan]:  # pred_ok and not oom_known
            return False
        placed = self._placement(job, plan, self.state.free)
        if placed is None:
            return False
        pos = bisect.bisect_left(self.queue, job)
        del self.queue[pos]
        self.queue_version += 1
        self._launch(job, plan, placed, done_base=float(self.done_iters[job]), extra_delay=0.0)
        return True

    def resize(self, job: int, plan: int) -> bool:
        """Restart running ``job`` on another plan slot, paying the restart overhead. False if illegal."""
        run = self.running.get(job)
        if run is None or not (0 <= plan < self.num_plans) or plan == run.plan or run.progress_from > self.now:
            return False
        if not self.avail[job, plan]:  # pred_ok and not oom_known
            return False
        placed = self._placement(job, plan, self.state.free + run.counts)
        if placed is None:
            return False
        done = self._stop(job)
        self.restarts += 1
        self.records[job].restarts += 1
        self.restart_count[job] += 1
        self._launch(job, plan, placed, done_base=done, extra_delay=self.config.restart_overhead)
        return True

    def preempt(self, job: int) -> bool:
        """Checkpoint running ``job`` and put it back in the queue (keeps its progress). False if illegal."""
        if job not in self.running:
            return False
        self.done_iters[job] = self._stop(job)
        self.restarts += 1
        self.records[job].restarts += 1
        self.restart_count[job] += 1
        self._requeue(job)
        return True

    def advance(self) -> float:
        """Move to the next event time and process every event due then; returns the time elapsed."""
        t = self.next_event_time()
        if t == math.inf:
            return 0.0
        dt = t - self.now
        self.now = t
        events = self._events
        while events and events[0][0] <= t:
            _, kind, _, job, version = heapq.heappop(events)
            run = self.running.get(job)
            if run is None or run.version != version:
                continue  # stale: the job was resized or preempted since
            if kind == _FINISH:
                self._finish(job)
            else:
                self._oom(job)
        self._arrive_due()
        return dt

    # ------------------------------------------------------------------ internals
    def _place(self, job: int, plan: int, free: np.ndarray) -> np.ndarray | None:
        """(N,) GPUs per node for ``job`` on ``plan`` given ``free``, or None (the configured placer)."""
        placed = self._placement(job, plan, free)
        return None if placed is None else placed[0]

    def _placement(self, job: int, plan: int, free: np.ndarray) -> tuple | None:
        """(counts (N,), nodes (k,), counts on them (k,)) of the configured placer, or None."""
        t = self._plan_type_l[plan]
        num = self._plan_count_l[plan]
        if self._best_fit:
            # placement.place(strategy="best_fit") on the type's nodes, without its O(cluster) set-up
            nodes = self._type_nodes[t]
            f = free[nodes]
            i = int(np.argmin(np.where(f >= num, f, _NO_FIT)))
            if f[i] >= num:  # one node holds the job: the tightest, lowest index on ties
                node = nodes[i : i + 1]
                counts = np.zeros(free.shape[0], dtype=np.int64)
                counts[node] = num
                return counts, node, np.array([num], dtype=np.int64)
            units = self.state.units[f, self.layout_tp_idx[job, plan]]  # (K,) GPUs usable in whole tp groups
            if int(units.sum()) < num:
                return None
            # fewest nodes: largest first (ties to the lowest index), the last chunk on the tightest node
            order = np.argsort(-units, kind="stable")
            ranked = units[order]
            cum = np.cumsum(ranked)
            k = int(np.searchsorted(cum, num))
            counts = np.zeros(free.shape[0], dtype=np.int64)
            counts[nodes[order[:k]]] = ranked[:k]
            remainder = num - (int(cum[k - 1]) if k > 0 else 0)
            rest = order[k:]
            ok = rest[units[rest] >= remainder]
            counts[nodes[ok[np.lexsort((ok, f[ok]))[0]]]] = remainder
            held = np.flatnonzero(counts)
            return counts, held, counts[held]
        counts = place(
            free, self.cluster.node_type_index, t, num, int(self.layout_tp[job, plan]),
            strategy=self.config.placement,
        )
        if counts is None:
            return None
        nodes = np.flatnonzero(counts)
        return counts, nodes, counts[nodes]

    def _launch(self, job: int, plan: int, placed: tuple, done_base: float, extra_delay: float) -> None:
        cfg = self.config
        counts, held, want = placed
        self.state._take(job, held, want)
        tp = int(self.layout_tp[job, plan])
        num = self._plan_count_l[plan]
        t = self._plan_type_l[plan]
        spanned = held.size
        slot = self._free_slots.pop()
        self._slot_of[job] = slot
        before = self._slot_span[slot]
        if before > spanned:  # clear what an earlier, wider job left in this slot
            self._slot_nodes[slot, spanned:before] = -1
            self._slot_cells[slot, spanned:before] = 0
        self._slot_nodes[slot, :spanned] = held
        self._slot_cells[slot, :spanned] = want * self.state.gain_stride
        self._slot_span[slot] = spanned
        if spanned == max(1, -(-num // self._max_node_gpus_l[t])):
            it = float(self.iter_time[job, plan])
        else:
            key = (int(self._row_key[job]), plan, spanned)
            it = self._spread_iter_time.get(key)
            if it is None:
                j = self.jobs[job]
                it = self._spread_iter_time[key] = iteration_time(
                    j.model, batch_size=int(j.batch_size), seq_len=int(j.seq_len),
                    gpu=self.gpu_types[t], dp=num // tp, tp=tp, nodes_spanned=spanned,
                    utilisation=cfg.utilisation,
                )
        will_oom = not self.true_ok[job, plan]
        now = self.now
        progress_from = now + cfg.startup_time + extra_delay
        self._seq += 1
        version = self._seq  # unique per attempt: events of earlier attempts are recognised as stale
        rate = 0.0 if will_oom else 1.0 / it  # an attempt that does not fit in memory makes no progress
        run = _Running(plan, tp, counts, now, progress_from, done_base, rate, will_oom, version)
        self.running[job] = run
        self.running_version += 1
        self.status[job] = RUNNING
        self.run_plan[job] = plan
        self.run_version[job] = version
        floats = self.run_floats
        floats[job, 0] = done_base
        floats[job, 1] = progress_from
        floats[job, 2] = rate
        rec = self.records[job]
        if math.isnan(rec.start_time):
            rec.start_time = now
            floats[job, 3] = now
        rec.gpu_type = self.gpu_types[t]
        rec.num_gpus, rec.dp, rec.tp = num, num // tp, tp
        self._set_busy(self.busy_gpus + num)
        if will_oom:
            self._push(now + cfg.oom_delay, _OOM, job, version)
        else:
            remaining = max(0.0, float(self.work[job]) - done_base)
            self._push(progress_from + remaining * it, _FINISH, job, version)

    def _stop(self, job: int) -> float:
        """Release the job's GPUs and account GPU-seconds; returns iterations done."""
        run = self.running.pop(job)
        self.running_version += 1
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

    def _finish(self, job: int) -> None:
        self._stop(job)
        self.done_iters[job] = self.work[job]
        self.status[job] = DONE
        self.records[job].finish_time = self.now
        self.finished += 1

    def _oom(self, job: int) -> None:
        run = self.running[job]
        self._stop(job)
        self.oom_known[job, run.plan] = True
        self.avail[job, run.plan] = False
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

    def metrics(self) -> dict[str, float]:
        """Episode metrics computed from the per-job records (see DESIGN.md, Metrics)."""
        fin = [r for r in self.records if not math.isnan(r.finish_time)]
        jct = np.array([r.finish_time - r.submit_time for r in fin]) if fin else np.zeros(0)
        first = float(self.submit[0])
        last = max((r.finish_time for r in fin), default=first)
        makespan = last - first
        gpu_seconds = sum(r.gpu_seconds for r in self.records)
        gpu_seconds += sum(int(r.counts.sum()) * (self.now - r.held_since) for r in self.running.values())
        util = gpu_seconds / (self.cluster.num_gpus * makespan) if makespan > 0 else 0.0
        return {
            "jobs": float(self.num_jobs),
            "finished": float(self.finished),
            "rejected": float(self.rejected),
            "avg_jct": float(jct.mean()) if jct.size else math.nan,
            "p95_jct": float(np.percentile(jct, 95)) if jct.size else math.nan,
            "makespan": float(makespan),
            "gpu_hours": gpu_seconds / 3600.0,
            "utilisation": float(util),
            "ooms": float(self.oom_failures),
            "restarts": float(self.restarts),
        }

    def utilisation_timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, busy GPUs) change points."""
        return np.frombuffer(self.util_times, dtype=np.float64), np.frombuffer(self.util_busy, dtype=np.float64)
