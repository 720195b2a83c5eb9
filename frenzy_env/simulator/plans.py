"""The simulator's plan table: :class:`PlanTable`, the plan slots and the job x plan matrices (Gavel's one
throughput/feasibility matrix), computed once per (cluster, workload, config, seed) and never changed after.

A *plan slot* ``p`` is a (GPU type, GPU count) pair, count in 1, 2, 4, ... up to ``max_plan_gpus``; the slots
form a grid of ``plan_grid`` = (type slots, count levels), slot ``t * plan_grid[1] + k`` of type slot t and
level k: the cluster's types x its levels under ``SimConfig.interface="cluster"``, the fixed
:data:`~frenzy_env.observation.contract.UNIVERSAL_TYPES` x
:data:`~frenzy_env.observation.contract.UNIVERSAL_LEVELS` grid under ``"universal"``, whose *absent* slots (a
type the cluster lacks, a count above the cluster layout's largest) have GPU count 0, GPU type 0 and are never
feasible (``plan_present`` False; every other slot has the cluster layout's tables). For each
job and plan slot the table holds the layout the predictor picks (the fastest legal (dp, tp, pp,
micro-batch) layout, :func:`frenzy_env.world.layouts.plan_layouts`, that the predictor says fits; among equally
fast ones the fewest pipeline stages, the smallest tp and the largest micro-batch; under
``SimConfig.layouts="no_accumulation"`` only those with ``pp == 1`` and no accumulation, when the predictor admits
one; ``layout_tp``, and per
distinct configuration ``_row_pp_l``, ``_row_mb_l``), whether the predictor says it fits
(``pred_ok``), whether it truly fits (``true_ok``, the "extended" estimator, times the job's ``memory_factor``
under ``memory_truth="residual"``: :mod:`frenzy_env.world.memory.truth`; under ``"published"`` the CUDA context
plus the job's ``memory_factor`` times the layout's structural peak: :mod:`frenzy_env.world.memory.published_truth`),
and its seconds per iteration on
a consolidated placement (``iter_time``). The matrices are computed once per distinct (model, batch, sequence)
and gathered for the jobs with it; per-job index tables (``_job_pl``, ``_job_tl``) turn the masks into
gathers, and Python-tuple mirrors (``_l`` suffix) serve the hot path's scalar reads. Arrays are read-only
(except ``work_estimate``, which the compiled kernels take as it is) and sequences are tuples.
"""

from __future__ import annotations

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.observation.contract import UNIVERSAL_LEVELS, UNIVERSAL_TYPES
from frenzy_env.simulator.config import SimConfig, start_up_costs
from frenzy_env.workload import Workload
from frenzy_env.world.cluster import ClusterSpec, get_gpu_type
from frenzy_env.world.layouts import plan_layouts, powers_of_two
from frenzy_env.world.memory.estimator import estimate_memory_layouts
from frenzy_env.world.memory.planning import plan_resources
from frenzy_env.world.memory.published_truth import (
    CONTEXT_BYTES,
    published_factors,
    structural_peak_layouts,
    true_peak_layouts,
)
from frenzy_env.world.memory.truth import memory_factors
from frenzy_env.world.throughput import iteration_time_array

#: :meth:`PlanTable._plan_row` results by everything they depend on, shared by every table of the process: a
#: workload's distinct (model, batch, sequence) rows recur across episodes, and each costs about 1 ms to
#: compute (MARP and the throughput model over every layout), so training's resets would otherwise rebuild
#: them every episode. Bounded: cleared when it reaches :data:`ROW_CACHE_SIZE` entries.
_ROW_CACHE: dict[tuple, tuple] = {}
ROW_CACHE_SIZE = 4096


class PlanTable:
    """Plan slots and job x plan matrices of ``jobs`` (sorted by submit time) on ``cluster`` under ``config``;
    ``seed`` seeds the work-estimate noise (``work_info="noisy"``). Immutable once built.

    :class:`~frenzy_env.simulator.ClusterSimulator` binds every field (:meth:`fields`) as its own attribute,
    so ``sim.pred_ok`` is ``sim.plan_table.pred_ok`` and hot-path reads stay one attribute look-up.
    """

    def __init__(self, cluster: ClusterSpec, jobs: tuple, workload: Workload, config: SimConfig, seed: int):
        self._build_plan_slots(cluster, config)
        self._build_job_matrices(cluster, jobs, workload, config, seed)
        for value in vars(self).values():
            if isinstance(value, np.ndarray) and value is not self.work_estimate:
                value.flags.writeable = False
        self._built = True

    def __setattr__(self, name: str, value: object) -> None:
        if "_built" in vars(self):
            raise AttributeError(f"a PlanTable is immutable (setting {name!r})")
        super().__setattr__(name, value)

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state)  # (copies of read-only arrays are writeable: make them read-only again)
        for value in state.values():
            if isinstance(value, np.ndarray) and value is not self.work_estimate:
                value.flags.writeable = False

    def fields(self) -> dict:
        """Every field of the table by name."""
        return {k: v for k, v in vars(self).items() if k != "_built"}

    def _build_plan_slots(self, spec: ClusterSpec, config: SimConfig) -> None:
        self.gpu_types = spec.gpu_types
        self.num_types = len(self.gpu_types)
        largest = int(spec.type_capacity.max())
        counts = powers_of_two(min(config.max_plan_gpus, largest))
        self.plan_counts_levels = np.array(counts, dtype=np.int64)  # (K,) the counts of the cluster's slots
        k = len(counts)
        if config.interface == "universal":
            if self.num_types > UNIVERSAL_TYPES:
                raise ConfigError(
                    f"interface='universal' holds at most {UNIVERSAL_TYPES} GPU types; cluster {spec.name!r} has "
                    f"{self.num_types} ({', '.join(self.gpu_types)})"
                )
            self.plan_grid = (UNIVERSAL_TYPES, UNIVERSAL_LEVELS)  # (type slots, count levels) of the slot grid
        else:
            self.plan_grid = (self.num_types, k)
        grid_t, grid_k = self.plan_grid
        self.num_plans = grid_t * grid_k
        slot_t = np.repeat(np.arange(grid_t), grid_k)  # (P,) type slot and level of each plan slot
        slot_k = np.tile(np.arange(grid_k), grid_t)
        self.plan_present = (slot_t < self.num_types) & (slot_k < k)  # (P,) the cluster layout's slots
        # absent slots: type 0 (a valid index for per-type arrays) and 0 GPUs, never feasible
        self.plan_type = np.where(self.plan_present, slot_t, 0)  # (P,)
        self.plan_count = np.where(self.plan_present, self.plan_counts_levels[np.minimum(slot_k, k - 1)], 0)  # (P,)
        self.max_node_gpus = np.array([spec.max_gpus_per_node(t) for t in self.gpu_types], dtype=np.int64)
        self.tp_levels = np.array(powers_of_two(int(self.max_node_gpus.max())), dtype=np.int64)  # (L,)
        onehot = np.zeros((spec.num_nodes, self.num_types), dtype=np.int64)
        onehot[np.arange(spec.num_nodes), spec.node_type_index] = 1
        self._type_onehot = onehot  # (N, T)
        # GPUs placeable in tp-groups on an empty cluster: plans beyond it can never run
        self._empty_cap = self._capacity(spec.node_capacity[None, :])[0]  # (T, L)
        self._type_nodes = tuple(np.flatnonzero(spec.node_type_index == t) for t in range(self.num_types))
        self._type_nodes_l = tuple(tuple(nodes.tolist()) for nodes in self._type_nodes)
        # the GPUs of every node of a type when they all have as many (0 if not), see _placement
        sizes = [set(spec.node_capacity[nodes].tolist()) for nodes in self._type_nodes]
        self._type_node_size_l = tuple(next(iter(s)) if len(s) == 1 else 0 for s in sizes)
        self._num_nodes = spec.num_nodes
        # index of each type's nodes into (N,) arrays: a slice (a view, no gather) when they are contiguous
        self._type_sel = tuple(
            slice(int(nodes[0]), int(nodes[-1]) + 1) if len(nodes) and (np.diff(nodes) == 1).all() else nodes
            for nodes in self._type_nodes
        )
        self._plan_need = self.plan_count[:, None]  # (P, 1)

    def _capacity(self, free: np.ndarray) -> np.ndarray:
        """free (B, N) -> (B, T, L): GPUs placeable per type in tensor-parallel groups of each level."""
        groups = (free[:, None, :] // self.tp_levels[None, :, None]) * self.tp_levels[None, :, None]  # (B,L,N)
        return np.matmul(groups, self._type_onehot).transpose(0, 2, 1)  # (B, T, L)

    def _build_job_matrices(
        self, cluster: ClusterSpec, jobs: tuple, workload: Workload, cfg: SimConfig, seed: int
    ) -> None:
        n, p = len(jobs), self.num_plans
        self.submit = np.array([j.submit_time for j in jobs], dtype=np.float64)  # (J,)
        sorted_wl = Workload(name=workload.name, jobs=jobs, source=workload.source)
        work = sorted_wl.work_iterations(cluster, utilisation=cfg.utilisation, efficiency=cfg.efficiency)
        self.work = np.asarray(work, dtype=np.float64)  # (J,)
        if not np.all(np.isfinite(self.work)) or (self.work <= 0).any():
            bad = int(np.flatnonzero(~np.isfinite(self.work) | (self.work <= 0))[0])
            raise ConfigError(f"job {jobs[bad].job_id} has non-positive work {self.work[bad]!r}")
        rng = np.random.default_rng(seed)
        if cfg.work_info == "exact":
            self.work_estimate = self.work.copy()
        elif cfg.work_info == "noisy":
            self.work_estimate = self.work * rng.lognormal(0.0, cfg.work_noise, size=n)
        else:
            self.work_estimate = np.full(n, float(np.median(self.work)))
        self.reject_reason = ("",) * n
        cache: dict[tuple, int] = {}
        rows: list[tuple] = []
        # what every row of this table shares in the process-wide cache's key (see _cached_row)
        shared = (
            cfg.predictor, cfg.utilisation, cfg.efficiency, cfg.layouts, tuple(get_gpu_type(t) for t in self.gpu_types),
            self.max_node_gpus.tobytes(), self.plan_counts_levels.tobytes(), self._empty_cap.tobytes(),
            self.plan_grid,
        )
        # memory_truth="residual": each job's true peak is the estimate x its factor (frenzy_env.world.memory.truth),
        # so its row is its own (keyed by the factor too); "estimate": factor 1, rows shared as before
        if cfg.memory_truth == "residual":
            self.memory_factor = memory_factors(seed, [int(j.job_id) for j in jobs])  # (J,)
        elif cfg.memory_truth == "published":  # true peak = context + factor x structural peak
            self.memory_factor = published_factors(seed, [int(j.job_id) for j in jobs])  # (J,)
        else:
            self.memory_factor = np.ones(n, dtype=np.float64)
        factors = self.memory_factor.tolist()
        # the masks' safety margin decides pred_ok, the memory truth (with the factor) true_ok
        shared = (*shared, cfg.memory_margin, cfg.memory_truth)
        key_of_job = np.empty(n, dtype=np.int64)
        row_params: list[int] = []
        # a row's layouts, speeds and predicted fit do not depend on the job's memory factor (unless the predictor
        # is the oracle, which reads the truth): the cached row keeps the chosen layout's memory before the factor,
        # and each job's true fit is computed from it here (the same arithmetic as on the whole layout array)
        oracle = cfg.predictor == "oracle"
        for i, job in enumerate(jobs):
            key = (id(job.model), int(job.batch_size), int(job.seq_len), factors[i])
            idx = cache.get(key)
            if idx is None:
                idx = cache[key] = len(rows)
                row = self._cached_row(job.model, key[1], key[2], cfg, shared, key[3] if oracle else None)
                rows.append((row[0], _true_fit(row, key[3], cfg), *row[2:7]))
                row_params.append(int(job.model.num_params))
            key_of_job[i] = idx
        pred = np.stack([r[0] for r in rows])
        true = np.stack([r[1] for r in rows])
        tp = np.stack([r[2] for r in rows])
        it = np.stack([r[3] for r in rows])
        pp = np.stack([r[5] for r in rows])
        mbs = np.stack([r[6] for r in rows])
        # per distinct configuration (K rows) and plan: pipeline stages and micro-batch of the chosen layout
        # (job j's are ``_row_pp_l[_row_key_l[j]][p]``); no (J, P) copies, to keep the table small
        self._row_pp_l, self._row_mb_l = (tuple(map(tuple, a.tolist())) for a in (pp, mbs))
        self.pred_ok = pred[key_of_job]  # (J, P)
        self.true_ok = true[key_of_job]
        self.layout_tp = tp[key_of_job]
        self.iter_time = it[key_of_job]  # consolidated placement, chosen layout
        self.layout_tp_idx = np.log2(self.layout_tp).astype(np.int64)  # (J, P) index into tp_levels
        self._row_key = key_of_job
        self._row_key_l = tuple(key_of_job.tolist())
        # per distinct configuration (K rows) and plan, as Python tuples for scalar reads: layout tp,
        # seconds per iteration, truly fits
        self._row_tp_l, self._row_it_l, self._row_true_l = (tuple(map(tuple, a.tolist())) for a in (tp, it, true))
        self._row_tpi_l = tuple(map(tuple, np.log2(tp).astype(np.int64).tolist()))  # tp level index in tp_levels
        self._row_reason = tuple(r[4] for r in rows)
        # per distinct configuration (K rows), flat indices for the masks: plan p with its layout's tp level
        # into a (P, L) table, and GPU type with that level into a (T, L) table
        levels = len(self.tp_levels)
        tp_idx = np.log2(tp).astype(np.intp)  # (K, P)
        row_pl = np.arange(p)[None, :] * levels + tp_idx  # (K, P)
        row_tl = self.plan_type[None, :] * levels + tp_idx  # (K, P)
        self._job_pl = row_pl.astype(np.int32)[key_of_job]  # (J, P) cell of each plan in a (P, L) table
        self._job_tl = row_tl.astype(np.int32)[key_of_job]  # (J, P) cell of each plan in a (T, L) table
        self._fits_somewhere = tuple(self.pred_ok.any(axis=1).tolist())  # (J,) arrival-time rejection test
        self._plan_type_l = tuple(self.plan_type.tolist())  # Python ints for scalar look-ups in the hot path
        self._plan_count_l = tuple(self.plan_count.tolist())
        self._max_node_gpus_l = tuple(self.max_node_gpus.tolist())
        # nodes a plan spans when consolidated (iter_time assumes that placement)
        self._plan_span_l = tuple(
            max(1, -(-c // self._max_node_gpus_l[t])) for c, t in zip(self._plan_count_l, self._plan_type_l)
        )
        # per distinct configuration (K rows) and plan: seconds from a start to the first iteration, and the
        # extra seconds a resize away from the plan costs (the restart cost model of SimConfig)
        start, save = start_up_costs(np.array(row_params, dtype=np.float64), np.array(self._plan_span_l), cfg)
        self._row_start_l, self._row_save_l = (tuple(map(tuple, a.tolist())) for a in (start, save))
        # the same tables as arrays, for vectorised readers (the observation's restart costs): job j's are
        # row ``config_row[j]``
        self.config_row = key_of_job  # (J,) the distinct configuration of each job
        self.config_start_s = start  # (K, P) startup_seconds per configuration and plan
        self.config_save_s = save  # (K, P) restart_overhead + checkpoint write, a resize away from the plan
        self._best_fit = cfg.placement == "best_fit"
        self._plan_of_type = self.plan_type[None, :] == np.arange(self.num_types)[:, None]  # (T, P)
        self._max_span = max(  # most nodes one job can span (one GPU per node at worst)
            min(len(nodes), int(self.plan_counts_levels[-1])) for nodes in self._type_nodes
        )
        self._node_cap_l = tuple(cluster.node_capacity.tolist())

    def _cached_row(
        self, model, batch: int, seq: int, cfg: SimConfig, shared: tuple, factor: float | None = None
    ) -> tuple:
        """:meth:`_plan_row` through the process-wide cache (:data:`_ROW_CACHE`), keyed by the model's full
        specification (a frozen dataclass, compared by value), the batch, the sequence, the job's memory
        ``factor`` (None but under the oracle predictor, whose predicted fit reads the truth: every other row is
        shared by every factor) and ``shared``: what the table's rows have in common (predictor, utilisation,
        efficiency, the GPU types' specifications, the cluster's plan slots and placeable capacity, the memory
        margin, the memory truth). The row's arrays are read-only."""
        key = (model, batch, seq, factor, *shared)
        row = _ROW_CACHE.get(key)
        if row is None:
            row = self._plan_row(model, batch, seq, cfg, factor)
            for part in row:
                if isinstance(part, np.ndarray):
                    part.flags.writeable = False
            if len(_ROW_CACHE) >= ROW_CACHE_SIZE:
                _ROW_CACHE.clear()
            _ROW_CACHE[key] = row
        return row

    def _plan_row(self, model, batch: int, seq: int, cfg: SimConfig, factor: float | None = None) -> tuple:
        """Feasibility, layout and speed of one (model, batch, seq) on every plan slot: ``(pred_ok, true_base,
        layout tp, seconds per iteration, reason, layout pp, micro-batch, memory)`` per slot, ``true_base`` the
        chosen layout's true peak before the job's factor (the structural peak under ``memory_truth=
        "published"``, the extended estimate otherwise; NaN on a slot without a layout) and ``memory`` its GPU
        type's bytes (:func:`_true_fit` applies a factor). ``factor``: the job's true-memory factor, read only by
        the oracle predictor (None otherwise)."""
        p = self.num_plans
        pred_ok = np.zeros(p, dtype=bool)
        true_base = np.full(p, np.nan)
        memory = np.zeros(p)
        best_tp = np.ones(p, dtype=np.int64)
        best_pp = np.ones(p, dtype=np.int64)
        best_mb = np.full(p, int(batch), dtype=np.int64)
        best_it = np.full(p, np.inf)
        pred_method = "extended" if cfg.predictor == "oracle" else cfg.predictor
        no_acc = cfg.layouts == "no_accumulation"
        counts = self.plan_counts_levels.tolist()
        stride = self.plan_grid[1]  # count levels per type slot
        for t_idx, t_name in enumerate(self.gpu_types):
            gpu = get_gpu_type(t_name)
            per_node = int(self.max_node_gpus[t_idx])
            # by count, then pp, tp, micro-batch descending
            pipe_mb = cfg.efficiency != "flat"  # pipelines try every micro-batch where the micro-batch matters
            dp_a, tp_a, pp_a, mb_a = plan_layouts(
                model.heads, model.layers, batch, counts, per_node, pipeline_micro_batches=pipe_mb
            )
            if not dp_a.size:
                continue
            cnt_a = dp_a * tp_a * pp_a
            cap = gpu.memory_bytes
            lay = {"dp": dp_a, "tp": tp_a, "pp": pp_a, "micro_batch": mb_a}
            est = estimate_memory_layouts(model, batch_size=batch, seq_len=seq, **lay)
            published = cfg.memory_truth == "published"
            base = structural_peak_layouts(model, batch_size=batch, seq_len=seq, **lay) if published else est
            budget = cap if cfg.memory_margin == 0 else cap * (1.0 - cfg.memory_margin)  # what the masks allow
            if cfg.predictor == "oracle":  # the truth itself, factor included
                if published:
                    true_mem = true_peak_layouts(model, batch_size=batch, seq_len=seq, factor=factor, **lay)
                else:
                    true_mem = est if factor == 1.0 else est * factor
                pred_fit = true_mem <= budget
            elif pred_method == "extended":
                pred_fit = est <= budget
            else:
                pred_mem = estimate_memory_layouts(model, batch_size=batch, seq_len=seq, method=pred_method, **lay)
                pred_fit = pred_mem <= budget
            spanned = np.maximum(1, -(-cnt_a // per_node))
            it = iteration_time_array(
                model, batch_size=batch, seq_len=seq, gpu=gpu, dp=dp_a, tp=tp_a,
                nodes_spanned=spanned, utilisation=cfg.utilisation, pp=pp_a, micro_batch=mb_a,
                efficiency=cfg.efficiency,
            )
            tp_pos = np.log2(tp_a).astype(np.int64)
            placeable = self._empty_cap[t_idx, tp_pos] >= cnt_a
            for k_idx, c in enumerate(counts):
                slot = t_idx * stride + k_idx
                sel = np.flatnonzero((cnt_a == c) & placeable)
                if sel.size == 0:
                    continue
                ok = sel[pred_fit[sel]]
                choose = ok if ok.size else sel  # fastest predicted-feasible layout, else fastest
                if no_acc and ok.size:  # layouts="no_accumulation": MARP's (d, t) plans where the predictor admits one
                    plain = ok[(pp_a[ok] == 1) & (mb_a[ok] == -(-batch // dp_a[ok]))]
                    if plain.size:
                        choose = plain
                best = choose[np.argmin(it[choose])]
                pred_ok[slot] = bool(ok.size)
                true_base[slot] = base[best]
                memory[slot] = cap
                best_tp[slot] = tp_a[best]
                best_pp[slot] = pp_a[best]
                best_mb[slot] = mb_a[best]
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
        return pred_ok, true_base, best_tp, best_it, reason, best_pp, best_mb, memory


def _true_fit(row: tuple, factor: float, cfg: SimConfig) -> np.ndarray:
    """(P,) whether each slot's chosen layout of a :meth:`PlanTable._plan_row` truly fits for a job of memory
    ``factor``: ``CONTEXT_BYTES + factor x structural peak`` (``memory_truth="published"``) or ``estimate x
    factor`` (otherwise; the estimate itself at factor 1) at most its GPU's memory; False where no layout."""
    base, memory = row[1], row[7]
    if cfg.memory_truth == "published":
        mem = CONTEXT_BYTES + float(factor) * base
    else:
        mem = base if factor == 1.0 else base * factor
    with np.errstate(invalid="ignore"):
        return ~np.isnan(base) & (mem <= memory)
