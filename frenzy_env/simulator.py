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
O(nodes touched), with Python-list mirrors (``free_l``) for the placer's scalar reads; masks are table
look-ups: each running attempt has a slot whose rows (cells, GPUs needed, the gains of the nodes it holds
whole, the nodes it shares) are written once at its launch, so the masks of a set of jobs gather them and
compare once (:meth:`ClusterSimulator.legal_masks` computes the start and resize masks of the environment
in one pass); a resize is one fused stop-and-launch. Per-job mirrors of the running book-keeping
(``run_plan``, ``run_version``, ``run_floats``, ``restart_count``, ``avail``, ``avail_iter_time``) and
change counters (``queue_version``, ``running_version``, ``requeued``) let views (the environment's
observation) update only what changed. The simulator maintains them, and the static tables (``pred_ok``,
``true_ok``, ``layout_tp``, ``iter_time``, ``work``, ...); callers read them, never write them.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import math
from array import array
from dataclasses import asdict, dataclass, fields

import numpy as np

from frenzy_env import kernels
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


@dataclass(slots=True)
class _Running:
    """Book-keeping of a job that holds GPUs."""

    plan: int
    tp: int
    nodes: list[int]  # nodes it holds GPUs on (ascending)
    want: list[int]  # GPUs it holds on each of them
    num_nodes: int  # nodes in the cluster (the length of ``counts``)
    held_since: float  # start of this allocation (GPU-seconds accounting)
    progress_from: float  # time the first iteration of this attempt starts
    done_base: float  # iterations done before progress_from
    rate: float  # iterations per second on this placement
    will_oom: bool
    version: int = 0
    _counts: np.ndarray | None = None

    @property
    def counts(self) -> np.ndarray:
        """(num_nodes,) GPUs held per node (built on first use, then kept)."""
        if self._counts is None:
            self._counts = np.zeros(self.num_nodes, dtype=np.int64)
            self._counts[self.nodes] = self.want
        return self._counts


@dataclass
class _MaskCache:
    """What :meth:`ClusterSimulator.legal_masks` keeps between calls for an (rows, P) output whose first
    ``q_rows`` rows are start rows: ``plans`` (4, rows, P) laid out as ``_slot_plans`` (see
    :meth:`ClusterSimulator._slot_row`; start rows hold the cells and the GPUs needed, a count no capacity
    reaches on rows without a job, and no gain); the keys of the queue and running jobs it holds, their
    numbers; the running jobs' progress_from and what :meth:`ClusterSimulator._shared_gain` needs of them."""

    q_rows: int
    plans: np.ndarray  # (4, rows, P) intp
    views: tuple = ()  # its 4 planes (not kept by copies: see ClusterSimulator.__getstate__)
    queue_key: tuple | None = None
    running_key: tuple | None = None
    nq: int = 0
    nr: int = 0
    progress_from: np.ndarray | None = None  # (nr,)
    shared: tuple | None = None
    slots_key: tuple | None = None  # the compiled path's: the running jobs its ``slots`` (nr,) are of
    slots: np.ndarray | None = None


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
        self._unit_delta_rows = [list(row) for row in self._unit_delta]  # [old][new] (L,) rows, read-only
        self._deltas_n: dict[tuple[int, int, int], np.ndarray] = {}  # (old, new, n) -> n * that row
        self.units_l = self.units.T.tolist()  # [level][free]: ``units`` for Python scalar reads
        c = len(levels)
        self.gain_stride = c
        # row held * (C+1) + free: GPUs a job holding ``held`` on a node with ``free`` more would place
        self.gain_table = self._unit_delta[
            levels[None, :], np.minimum(levels[:, None] + levels[None, :], c - 1)
        ].reshape(c * c, -1)  # ((C+1)^2, L)
        # the same with a last column of zeros ((C+1)^2, L + 1): the "no gain" cell of other GPU types
        self.gain_table_z = np.concatenate([self.gain_table, np.zeros((c * c, 1), dtype=self.gain_table.dtype)], 1)
        self._types_l = self._types.tolist()
        self.free_l = self.free.tolist()  # ``free`` as a Python list (scalar reads in the placer's hot path)
        self.cap = capacity_by_tp(self.free, self._types, num_types, self._tpl)  # (T, L)
        self._cap_rows = list(self.cap)  # (T,) views of its rows (rebuilt by copies, see __setstate__)
        self.free_t = np.bincount(self._types, weights=self.free, minlength=num_types).astype(np.int64)  # (T,)
        # job -> (nodes, counts on them, global GPU indices taken), Python lists
        self._nodes: dict[int, tuple[list[int], list[int], list[int]]] = {}
        self.version = 0

    def free_by_type(self) -> np.ndarray:
        """(num_types,) free GPUs per type."""
        return self.free_t.copy()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_cap_rows"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cap_rows = list(self.cap)

    def held_nodes(self, job_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, counts) of the allocation of ``job_id``."""
        nodes, want, _ = self._nodes[job_id]
        return np.array(nodes, dtype=np.int64), np.array(want, dtype=np.int64)

    def allocate(self, job_id: int, counts: np.ndarray) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != self.free.shape:
            raise ValueError(f"counts must have shape {self.free.shape}, got {counts.shape}")
        nodes = np.flatnonzero(counts)  # (k,)
        if job_id in self._held:
            raise ValueError(f"job {job_id} already holds GPUs; release them before allocating again")
        bad = np.flatnonzero((counts < 0) | (counts > self.free))
        if bad.size:
            node = int(bad[0])
            raise ValueError(f"cannot allocate {int(counts[node])} GPUs on node {node} to job {job_id}: "
                             f"{int(self.free[node])} free")
        if len(set(self._types[nodes].tolist())) > 1:  # several GPU types: the general update
            idx = self._book(job_id, nodes.tolist(), counts[nodes].tolist())
            self._update(nodes, self.free[nodes], self.free[nodes] - counts[nodes])
            return np.asarray(idx)
        return np.asarray(self._take(job_id, nodes.tolist(), counts[nodes].tolist()))

    def _take(self, job_id: int, nodes: list[int], want: list[int]) -> np.ndarray | range:
        """Allocate ``want[i]`` GPUs on ``nodes[i]`` (ascending nodes of one GPU type, counts in 1..free; Python
        ints); returns the GPU indices taken (a range when consecutive; ``_held`` keeps them so)."""
        idx = self._book(job_id, nodes, want)
        free_l = self.free_l
        self._set_free(nodes, [free_l[n] - k for n, k in zip(nodes, want)])
        return idx

    def _book(self, job_id: int, nodes: list[int], want: list[int]) -> np.ndarray | range:
        """:meth:`_take` without updating ``free`` and what follows it (the caller does). The counts are the
        caller's to check (:meth:`allocate` does; the simulator's placements are made from ``free``)."""
        free_gpus = self._free_gpus
        if len(nodes) == 1:
            node, k = nodes[0], want[0]
            gpus = free_gpus[node]
            taken = gpus[:k]
            del gpus[:k]
        else:
            taken = []
            for node, k in zip(nodes, want):
                gpus = free_gpus[node]
                taken += gpus[:k]
                del gpus[:k]
        first, count = taken[0], len(taken)
        if taken[-1] - first == count - 1:  # consecutive GPUs (taken is ascending): a slice
            idx = range(first, first + count)
            self.owner[first : first + count] = job_id
        else:
            idx = np.array(taken, dtype=np.int64)
            self.owner[idx] = job_id
        self._held[job_id] = idx
        self._nodes[job_id] = (nodes, want, taken)
        return idx

    def release(self, job_id: int) -> np.ndarray:
        held = self._nodes.get(job_id)
        if held is not None and len({self._types_l[n] for n in held[0]}) > 1:  # from allocate(): several types
            nodes, want = self._unbook(job_id)
            nodes_a, want_a = np.array(nodes, dtype=np.int64), np.array(want, dtype=np.int64)
            self._update(nodes_a, self.free[nodes_a], self.free[nodes_a] + want_a)
        else:
            nodes, want = self._give(job_id)
        counts = np.zeros(self.free.shape[0], dtype=np.int64)
        counts[nodes] = want
        return counts

    def _give(self, job_id: int) -> tuple[list[int], list[int]]:
        """:meth:`release` returning the (nodes, counts) freed (Python lists), for an allocation on one GPU
        type (the simulator's)."""
        nodes, want = self._unbook(job_id)
        free_l = self.free_l
        self._set_free(nodes, [free_l[n] + k for n, k in zip(nodes, want)])
        return nodes, want

    def _move(self, job_id: int, nodes: list[int], want: list[int]) -> None:
        """:meth:`_give` then :meth:`_take` (``want[i]`` GPUs on ``nodes[i]``), with one update of ``free``
        and what follows it when both allocations are of one GPU type."""
        old_nodes, old_want = self._unbook(job_id)
        self._book(job_id, nodes, want)
        free_l, types = self.free_l, self._types_l
        if types[old_nodes[0]] != types[nodes[0]]:
            self._set_free(old_nodes, [free_l[n] + k for n, k in zip(old_nodes, old_want)])
            self._set_free(nodes, [free_l[n] - k for n, k in zip(nodes, want)])
            return
        new = {n: free_l[n] + k for n, k in zip(old_nodes, old_want)}
        for n, k in zip(nodes, want):
            new[n] = new.get(n, free_l[n]) - k
        self._set_free(list(new), list(new.values()))

    def _unbook(self, job_id: int) -> tuple[list[int], list[int]]:
        """:meth:`_give` without updating ``free`` and what follows it (the caller does)."""
        idx = self._held.pop(job_id, None)
        if idx is None:
            raise ValueError(f"job {job_id} holds no GPUs")
        nodes, want, gpus_back = self._nodes.pop(job_id)
        first, count = gpus_back[0], len(gpus_back)
        if gpus_back[-1] - first == count - 1:  # consecutive GPUs: a slice
            self.owner[first : first + count] = -1
        else:
            self.owner[idx] = -1
        free_gpus = self._free_gpus
        if len(nodes) == 1:
            gpus = free_gpus[nodes[0]]
            gpus += gpus_back
            gpus.sort()
        else:
            pos = 0
            for node, k in zip(nodes, want):
                gpus = free_gpus[node]
                gpus += gpus_back[pos : pos + k]
                gpus.sort()
                pos += k
        return nodes, want

    def _update(self, nodes: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        """Free GPUs of ``nodes`` go from ``old`` to ``new``: update ``free``, ``cap``, ``free_t``."""
        self.free[nodes] = new
        for node, value in zip(nodes.tolist(), new.tolist()):
            self.free_l[node] = value
        types = self._types[nodes]
        np.add.at(self.cap, types, self.units[new] - self.units[old])  # (k, L)
        np.add.at(self.free_t, types, new - old)
        self.version += 1

    def _set_free(self, nodes: list[int], new: list[int]) -> None:
        """Free GPUs of ``nodes`` (of one GPU type) become ``new`` (Python lists): update ``free``, ``cap``,
        ``free_t``."""
        t = self._types_l[nodes[0]]
        if len(nodes) == 1:
            node, value = nodes[0], new[0]
            old = self.free_l[node]
            self.free[node] = value
            self.free_l[node] = value
            self._cap_rows[t] += self._unit_delta_rows[old][value]
            self.free_t[t] += value - old
            self.version += 1
            return
        free, free_l = self.free, self.free_l
        olds = [free_l[n] for n in nodes]
        for node, value in zip(nodes, new):
            free[node] = value
            free_l[node] = value
        row = self._cap_rows[t]
        old, value, n = olds[0], new[0], len(nodes)
        if olds.count(old) == n and new.count(value) == n:  # one change on every node (whole nodes, say)
            delta = self._deltas_n.get((old, value, n))
            if delta is None:
                delta = self._deltas_n[(old, value, n)] = self._unit_delta_rows[old][value] * n
            row += delta
            self.free_t[t] += (value - old) * n
        else:
            changes: dict[tuple[int, int], int] = {}  # (old, new) free counts -> nodes
            for change in zip(olds, new):
                changes[change] = changes.get(change, 0) + 1
            total = 0
            for (old, value), n in changes.items():
                row += self._unit_delta_rows[old][value] * n
                total += (value - old) * n
            self.free_t[t] += total
        self.version += 1

    def check(self) -> None:
        super().check()
        spec = self.spec
        offsets = spec.node_offsets
        for node, gpus in enumerate(self._free_gpus):
            lo, hi = offsets[node], offsets[node + 1]
            assert gpus == (lo + np.flatnonzero(self.owner[lo:hi] < 0)).tolist(), f"free list of node {node}"
        assert self.free_l == self.free.tolist(), "free list mirror drifted"
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
        self._type_nodes_l = [nodes.tolist() for nodes in self._type_nodes]
        # the GPUs of every node of a type when they all have as many (0 if not), see _placement
        sizes = [set(spec.node_capacity[nodes].tolist()) for nodes in self._type_nodes]
        self._type_node_size_l = [next(iter(s)) if len(s) == 1 else 0 for s in sizes]
        self._num_nodes = spec.num_nodes
        # index of each type's nodes into (N,) arrays: a slice (a view, no gather) when they are contiguous
        self._type_sel = [
            slice(int(nodes[0]), int(nodes[-1]) + 1) if len(nodes) and (np.diff(nodes) == 1).all() else nodes
            for nodes in self._type_nodes
        ]
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
        self._row_key_l = key_of_job.tolist()
        # per distinct configuration (K rows) and plan, as Python lists for scalar reads: layout tp,
        # seconds per iteration, truly fits
        self._row_tp_l, self._row_it_l, self._row_true_l = tp.tolist(), it.tolist(), true.tolist()
        self._row_tpi_l = np.log2(tp).astype(np.int64).tolist()  # the tp level's index in tp_levels
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
        self._plan_type_l = self.plan_type.tolist()  # Python ints for scalar look-ups in the hot path
        self._plan_count_l = self.plan_count.tolist()
        self._max_node_gpus_l = self.max_node_gpus.tolist()
        # nodes a plan spans when consolidated (iter_time assumes that placement)
        self._plan_span_l = [
            max(1, -(-c // self._max_node_gpus_l[t])) for c, t in zip(self._plan_count_l, self._plan_type_l)
        ]
        self._best_fit = self.config.placement == "best_fit"
        self._plan_of_type = self.plan_type[None, :] == np.arange(self.num_types)[:, None]  # (T, P)
        self._resize_rows: dict[tuple[int, int], np.ndarray] = {}  # (row key, plan) -> (3P,) see _resize_row
        self._slot_heads: dict[tuple, np.ndarray] = {}  # (row key, plan, GPUs of whole nodes) -> see _slot_row
        self._max_span = max(  # most nodes one job can span (one GPU per node at worst)
            min(len(nodes), int(self.plan_counts_levels[-1])) for nodes in self._type_nodes
        )
        self._node_cap_l = self.cluster.node_capacity.tolist()

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

    _CACHES = ("_mask_cache", "_resize_cache", "_start_cache")  # derived from the state; they may hold views

    def __getstate__(self) -> dict:
        # copies and pickles leave the caches out (views of their arrays would become separate arrays)
        state = dict(self.__dict__)
        for name in self._CACHES:
            state[name] = None
        return state

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
        self._oom_jobs: set[int] = set()  # jobs with a crashed plan (their avail row differs from pred_ok)
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
        self._ok_version = -1  # state.version that _ok was computed for
        # (P * L + 1,) bool: plan p with tensor-parallel level l fits the free GPUs; the last cell is False
        self._ok = np.zeros(self.num_plans * len(self.tp_levels) + 1, dtype=bool)
        self._avail_version = 0  # changes whenever ``avail`` does
        self._start_cache: tuple | None = None  # (key, (n, P) cells of the jobs' plans in _ok)
        self._resize_cache: tuple | None = None  # (key, rows of the jobs, see _running_rows)
        self._mask_cache: _MaskCache | None = None  # what legal_masks keeps
        self._offsets: dict[int, np.ndarray] = {}  # R -> see _gain_offsets
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
        return self._placeable().take(cached[1], out=out, mode="clip")

    def resize_mask(self, jobs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(len(jobs), P) bool: ``resize(job, p)`` would succeed now (jobs must be running).

        ``out`` (len(jobs), P) bool receives the mask if given. A resize of job r to plan p succeeds when
        plan p's GPU type has ``plan_count[p]`` GPUs placeable in groups of the layout's tensor-parallel
        level once the job's own GPUs are freed: ``cap`` plus, on the job's own type, what its nodes give
        back (fixed on nodes it holds whole, looked up in ``gain_table_z`` on nodes it shares); and the job
        is past its start-up.
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
        out &= ready[:, None]
        return out

    def legal_masks(self, queue: np.ndarray, running: np.ndarray, q_rows: int, out: np.ndarray) -> int:
        """Both masks in one (rows, P) bool array ``out``: row i < len(queue) is ``start_mask(queue)[i]``,
        row q_rows + i (i < len(running)) is ``resize_mask(running)[i]``, every other row is False. Returns
        the number of True cells (legal starts and resizes).

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
                           self.now, st.free, st.gain_table_z, out)
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
            out[q_rows : q_rows + nr] &= ready[:, None]
        else:
            np.greater_equal(have, thr, out=out)
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
        placed = self._placement(job, plan, self.state.free_l)
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
        free = self.state.free_l.copy()  # the job's own GPUs count as free
        for node, k in zip(run.nodes, run.want):
            free[node] += k
        placed = self._placement(job, plan, free)
        if placed is None:
            return False
        # _stop then _launch, the job keeping its slot: the same state, with fewer steps in between
        now = self.now
        self.running_version += 1
        del self.running[job]
        done = min(float(self.work[job]), run.done_base + max(0.0, now - run.progress_from) * run.rate)
        self.state._move(job, *placed)
        held = self._plan_count_l[run.plan]
        rec = self.records[job]
        rec.gpu_seconds += held * (now - run.held_since)
        self.busy_gpus -= held  # (_launch records the utilisation once, at the final count)
        self.restarts += 1
        rec.restarts += 1
        self.restart_count[job] += 1
        self._launch(job, plan, placed, done, self.config.restart_overhead, int(self._slot_of[job]))
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
        placed = self._placement(job, plan, np.asarray(free).tolist())
        if placed is None:
            return None
        counts = np.zeros(len(free), dtype=np.int64)
        counts[placed[0]] = placed[1]
        return counts

    def _placement(self, job: int, plan: int, free: list[int]) -> tuple[list[int], list[int]] | None:
        """(nodes (ascending), GPUs on each) of the configured placer given ``free`` (a list of N counts),
        or None."""
        t = self._plan_type_l[plan]
        num = self._plan_count_l[plan]
        if self._best_fit:
            # placement.place(strategy="best_fit") on the type's nodes, without its O(cluster) set-up
            nodes = self._type_nodes_l[t]
            sel = self._type_sel[t]
            f = free[sel] if isinstance(sel, slice) else [free[n] for n in nodes]
            size = self._type_node_size_l[t]
            if num <= size or not size:  # (no node holds more GPUs than its size)
                tightest = min(filter(num.__le__, f), default=-1)  # fewest free GPUs that still hold the job
                if tightest >= 0:  # one node holds the job: the tightest, lowest index on ties
                    return [nodes[f.index(tightest)]], [num]
            usable = self.state.units_l[self._row_tpi_l[self._row_key_l[job]][plan]]  # free -> whole tp groups
            if size and num % size == 0 and usable[size] == size:
                # whole nodes of one size, each whole tp groups: what follows picks the first empty ones
                empty, i = [], -1
                with contextlib.suppress(ValueError):  # (fewer empty nodes than needed: the general case)
                    for _ in range(num // size):
                        i = f.index(size, i + 1)
                        empty.append(i)
                    return [nodes[i] for i in empty], [size] * len(empty)
            units = [usable[v] for v in f]  # (K,) GPUs usable on each of the type's nodes
            if sum(units) < num:
                return None
            # fewest nodes: largest first (ties to the lowest index), the last chunk on the tightest node
            order = sorted(range(len(units)), key=units.__getitem__, reverse=True)  # stable
            taken: dict[int, int] = {}  # position among the type's nodes -> GPUs taken there
            placed = k = 0
            while placed + units[order[k]] < num:  # whole nodes while the job needs more than the next
                taken[order[k]] = units[order[k]]
                placed += units[order[k]]
                k += 1
            remainder = num - placed
            taken[min((f[i], i) for i in order[k:] if units[i] >= remainder)[1]] = remainder
            held = sorted(taken)
            return [nodes[i] for i in held], [taken[i] for i in held]
        counts = place(
            np.array(free, dtype=np.int64), self.cluster.node_type_index, t, num, int(self.layout_tp[job, plan]),
            strategy=self.config.placement,
        )
        if counts is None:
            return None
        nodes = np.flatnonzero(counts)
        return nodes.tolist(), counts[nodes].tolist()

    def _launch(
        self, job: int, plan: int, placed: tuple, done_base: float, extra_delay: float, slot: int = -1
    ) -> None:
        """Start an attempt of ``job`` on ``plan`` at ``placed`` (nodes, GPUs on each); ``slot`` >= 0: a
        restart, the job already holds these GPUs and keeps its slot."""
        cfg = self.config
        held, want = placed
        rec = self.records[job]
        now = self.now
        if slot < 0:  # (a restart keeps the job's status, slot and first start time)
            self.state._take(job, held, want)
            self.status[job] = RUNNING
            if math.isnan(rec.start_time):
                rec.start_time = now
                self.run_floats[job, 3] = now
            slot = self._free_slots.pop()
            self._slot_of[job] = slot
            if slot == len(self._slot_pf):  # more jobs run at once than ever: more slot rows
                grow = min(slot, len(self._slot_shared_l) - slot)
                self._slot_plans = np.concatenate([self._slot_plans, np.zeros_like(self._slot_plans[:, :grow])], 1)
                pairs = np.zeros_like(self._slot_pairs[:grow])
                pairs[:, 0::2] = -1
                self._slot_pairs = np.concatenate([self._slot_pairs, pairs])
                self._slot_pf = np.concatenate([self._slot_pf, np.zeros(grow)])
        row = self._row_key_l[job]
        tp = self._row_tp_l[row][plan]  # = layout_tp[job, plan]
        num = self._plan_count_l[plan]
        t = self._plan_type_l[plan]
        spanned = len(held)
        self._slot_row(slot, job, plan, held, want)
        if spanned == self._plan_span_l[plan]:
            it = self._row_it_l[row][plan]  # = iter_time[job, plan] (consolidated)
        else:
            key = (row, plan, spanned)
            it = self._spread_iter_time.get(key)
            if it is None:
                j = self.jobs[job]
                it = self._spread_iter_time[key] = iteration_time(
                    j.model, batch_size=int(j.batch_size), seq_len=int(j.seq_len),
                    gpu=self.gpu_types[t], dp=num // tp, tp=tp, nodes_spanned=spanned,
                    utilisation=cfg.utilisation,
                )
        will_oom = not self._row_true_l[row][plan]  # = not true_ok[job, plan]
        progress_from = now + cfg.startup_time + extra_delay
        self._seq += 1
        version = self._seq  # unique per attempt: events of earlier attempts are recognised as stale
        rate = 0.0 if will_oom else 1.0 / it  # an attempt that does not fit in memory makes no progress
        run = _Running(plan, tp, held, want, self._num_nodes, now, progress_from, done_base, rate, will_oom, version)
        self.running[job] = run
        self.running_version += 1
        self.run_plan[job] = plan
        self.run_version[job] = version
        floats = self.run_floats
        floats[job, 0] = done_base
        floats[job, 1] = progress_from
        self._slot_pf[slot] = progress_from
        floats[job, 2] = rate
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
        self._avail_version += 1
        self._oom_jobs.add(job)
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
