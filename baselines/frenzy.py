"""Frenzy (Chang et al., arXiv 2412.14479): MARP memory-aware plans + HAS best-fit placement.

What the policy does, at every decision (it acts only through the environment's start actions):

1. Jobs are taken in arrival order (the env's visible queue window, ``queue_slots`` jobs, is already in
   arrival order; a job beyond the window cannot be started by any policy until it enters the window).
2. For each job, MARP's resource plans -- the env's plan slots (GPU type, GPU count) with the layout the
   predictor picks for that count -- are taken in the order of ``ranking``; the first plan that can be
   placed *now* (the action mask says so) is started. The simulator places it best-fit (Frenzy's HAS, the
   env's default ``placement="best_fit"``): one node if any node of that type can hold it, the node whose
   free GPUs fit tightest; otherwise the fewest nodes.
3. A job none of whose plans can be placed now waits; later jobs may still start (the paper's HAS walks
   the whole queue; there is no head-of-line blocking). No preemption, no resizing.

Options (keyword names are public API)
--------------------------------------
``ranking``: how MARP orders a job's plans (:data:`frenzy_env.world.memory.planning.RANKINGS`; the paper defines none).
    Default :data:`frenzy_env.world.memory.planning.DEFAULT_RANKING` = ``"min_gpus_fastest"`` -- fewest GPUs (the
    paper's "required number" of GPUs), then the shortest predicted iteration (HAS's "training efficiency"), then the
    smaller GPU memory. ``"min_gpus"`` (env v4's: fewest GPUs, then the smallest GPU memory that
    holds the job, equal memory the cheaper GPU per hour, then the smaller ``tp``; a "tightest fit" that
    prefers the smallest, slowest GPU), ``"max_mem_util"`` (highest predicted memory utilisation),
    ``"min_est_time"`` (shortest predicted iteration time), ``"min_gpu_hours"`` (fewest GPUs x iteration time),
    as in :func:`frenzy_env.world.memory.planning.plan_resources`.
``plans``: where the policy's plans come from. ``"env"`` (env v4's): the env's plan
    slots with the layout the env runs at each (above). ``"paper"`` (the default): MARP as the paper plans -- every
    (GPU type, d, t) plan with ``d * t`` a power-of-two count up to the env's largest slot, ``t`` dividing the
    attention heads and within one node of the type, no pipeline and no gradient accumulation (per-GPU batch
    ``B / d``), that fits by the paper's formula (predictor ``"frenzy"``, unless ``predictor`` names
    another), ranked by ``ranking`` with iteration times from the env's own throughput settings
    (:func:`frenzy_env.world.memory.planning.plan_resources` with ``max_pp=1, accumulate=False``). A plan is
    taken through its (GPU type, d x t) slot; a slot's rank is that of the paper plan with the layout the env runs there
    (``layout_tp``), else (the env runs another layout) of its best paper plan. Under the env option
    ``layouts="no_accumulation"`` (the default) with ``predictor="frenzy"`` every slot runs the fastest paper
    plan of its count, so with a time-breaking ranking (``"min_gpus_fastest"``, ``"min_est_time"``, ``"min_gpu_hours"``)
    the env runs exactly the (d, t) the ranked plan names.
``predictor``: the MARP estimator that decides which plans the *policy* believes fit and ranks memory
    utilisation: ``None`` (default: the env's configured predictor, so policy and mask agree), ``"frenzy"``
    (the paper's closed form), ``"extended"`` or ``"oracle"`` (= "extended", the simulator's ground truth);
    under ``plans="paper"``, ``None`` means ``"frenzy"``.
    The policy can only take actions the env allows, so its plan set is the intersection of its own
    predictor and the env's mask; when its predictor admits no plan of a job, the env's plans are used (so
    a job is never stranded).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy
from frenzy_env.errors import unknown_name
from frenzy_env.simulator.view import SimView
from frenzy_env.world.cluster import get_gpu_type
from frenzy_env.world.memory.estimator import estimate_memory_array
from frenzy_env.world.memory.planning import DEFAULT_RANKING, RANKINGS, plan_resources

PREDICTORS = (None, "frenzy", "extended", "oracle")
PLANS = ("env", "paper")
_UNRANKED = np.iinfo(np.int64).max // 2  # rank position of a plan the policy never uses


class PlanRanker:
    """Per-job plan ranking over a simulator's plan slots, cached per (model, batch, seq_len) configuration.

    ``positions(jobs)`` is a (len(jobs), P) int64 matrix: the position of each plan slot in the job's ranked
    plan list (0 = best), :data:`_UNRANKED` for plans outside it. Computed once per job per episode.
    """

    def __init__(
        self, view: SimView, ranking: str = DEFAULT_RANKING, predictor: str | None = None, plans: str = "paper"
    ) -> None:
        if ranking not in RANKINGS:
            raise unknown_name("ranking", ranking, RANKINGS)
        if predictor not in PREDICTORS:
            raise unknown_name("predictor", predictor, [p for p in PREDICTORS if p])
        if plans not in PLANS:
            raise unknown_name("plans", plans, PLANS)
        self.view = view
        self.ranking = ranking
        self.plans = plans
        method = predictor or ("frenzy" if plans == "paper" else view.config.predictor)
        self.method = "extended" if method == "oracle" else method
        types = [get_gpu_type(t) for t in view.gpu_types]
        self._caps = np.array([g.memory_bytes for g in types], dtype=np.float64)  # (T,)
        order = sorted(range(len(types)), key=lambda i: (types[i].memory_bytes, types[i].cost_per_hour, types[i].name))
        fit_rank = np.empty(len(types), dtype=np.int64)
        fit_rank[order] = np.arange(len(types))
        self._fit_rank = fit_rank  # (T,) smallest GPU first
        names = [g.name for g in types]
        self._name_rank = np.argsort(np.argsort(names)).astype(np.int64)  # (T,)
        self._by_config: dict[tuple, np.ndarray] = {}
        self._pos = np.full((view.num_jobs, view.num_plans), -1, dtype=np.int64)  # (J, P); -1 = not computed
        self._top = np.full(view.num_jobs, -2, dtype=np.int64)  # (J,) best plan; -2 = not computed

    def positions(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), P) rank position of each plan slot (0 = first choice)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        todo = jobs[self._pos[jobs, 0] < 0]
        for j in todo.tolist():
            self._pos[j] = self._row(j)
        return self._pos[jobs]

    def ranked(self, job: int) -> np.ndarray:
        """Plan slots of ``job`` in ranked order (only those the policy's predictor and the env allow)."""
        pos = self.positions(np.array([job]))[0]
        keep = np.flatnonzero(pos < _UNRANKED)
        return keep[np.argsort(pos[keep], kind="stable")]

    def top_plan(self, job: int) -> int:
        """The first-ranked plan slot of ``job`` (-1 when it has none)."""
        if self._top[job] == -2:
            r = self.ranked(job)
            self._top[job] = int(r[0]) if r.size else -1
        return int(self._top[job])

    def _row(self, j: int) -> np.ndarray:
        view = self.view
        spec = view.jobs[j]
        key = (spec.model, int(spec.batch_size), int(spec.seq_len))  # the layouts follow from these
        cached = self._by_config.get(key)
        if cached is None:
            cached = self._by_config[key] = self._rank_config(j)
        pos_row, own_ok = cached
        ok = view.pred_ok[j] & own_ok
        if not ok.any():
            ok = view.pred_ok[j]  # the policy's predictor admits nothing: fall back to the env's plans
        return np.where(ok, pos_row, _UNRANKED)

    def _rank_config(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """(P,) rank position of every plan slot and (P,) whether the policy's predictor says it fits."""
        if self.plans == "paper":
            return self._rank_paper(j)
        return self._rank_env(j)

    def _rank_env(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``plans="env"``: the env's slots with the layouts it runs, checked by the policy's predictor."""
        view = self.view
        spec = view.jobs[j]
        tp = view.layout_tp[j]  # (P,) the layout the env runs at each plan slot
        counts = view.plan_count  # (P,)
        mem = estimate_memory_array(
            spec.model, batch_size=int(spec.batch_size), seq_len=int(spec.seq_len),
            dp=np.maximum(counts // tp, 1), tp=tp, method=self.method,
        )  # (P,) bytes per GPU
        t_idx = view.plan_type
        cap = self._caps[t_idx]  # (P,)
        times = np.nan_to_num(view.iter_time[j], nan=np.inf, posinf=np.inf)  # (P,)
        name_rank = self._name_rank[t_idx]
        if self.ranking == "min_gpus":
            order = np.lexsort((tp, self._fit_rank[t_idx], counts))
        elif self.ranking == "max_mem_util":
            order = np.lexsort((name_rank, tp, counts, -(mem / cap)))
        elif self.ranking == "min_est_time":
            order = np.lexsort((name_rank, tp, cap, counts, times))
        elif self.ranking == "min_gpus_fastest":
            order = np.lexsort((name_rank, tp, cap, times, counts))
        else:  # min_gpu_hours
            order = np.lexsort((name_rank, tp, cap, times, counts * times))
        pos_row = np.empty(view.num_plans, dtype=np.int64)
        pos_row[order] = np.arange(view.num_plans)
        return pos_row, mem <= cap


    def paper_plans(self, j: int) -> list:
        """The paper's ranked (GPU type, d, t) plans of job ``j``
        (:class:`~frenzy_env.world.memory.planning.ResourcePlan`s, best first): no pipeline, no accumulation, the
        policy's predictor, the env's plan counts, node sizes and throughput settings."""
        view = self.view
        spec = view.jobs[j]
        cfg = view.config
        return plan_resources(
            spec.model, batch_size=int(spec.batch_size), seq_len=int(spec.seq_len), gpu_types=list(view.gpu_types),
            method=self.method, ranking=self.ranking, max_gpus=int(view.plan_count.max()),
            gpus_per_node={t: int(view.cluster.max_gpus_per_node(t)) for t in view.gpu_types},
            with_times=True, max_pp=1, accumulate=False, utilisation=cfg.utilisation, efficiency=cfg.efficiency,
        )

    def _rank_paper(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``plans="paper"``: each slot ranked by the paper plan on it that the env runs (else its best one)."""
        view = self.view
        slot = {
            (view.gpu_types[t], c): p
            for p, (t, c) in enumerate(zip(view.plan_type.tolist(), view.plan_count.tolist()))
        }
        env_tp = view.layout_tp[j]  # (P,) the tp the env runs at each slot
        best = np.full(view.num_plans, _UNRANKED, dtype=np.int64)  # best paper plan of each slot
        exact = np.full(view.num_plans, _UNRANKED, dtype=np.int64)  # the paper plan with the env's layout
        for pos, plan in enumerate(self.paper_plans(j)):
            p = slot.get((plan.gpu_type, plan.num_gpus))
            if p is None:
                continue
            best[p] = min(best[p], pos)
            if plan.tp == int(env_tp[p]):
                exact[p] = min(exact[p], pos)
        key = np.where(exact < _UNRANKED, exact, best)
        if not (key < _UNRANKED).any():  # the paper admits no plan: rank the env's slots as plans="env" does
            return self._rank_env(j)[0], np.zeros(view.num_plans, dtype=bool)
        order = np.lexsort((np.arange(view.num_plans), key))
        pos_row = np.empty(view.num_plans, dtype=np.int64)
        pos_row[order] = np.arange(view.num_plans)
        return pos_row, key < _UNRANKED


class FrenzyPolicy(ScriptedPolicy):
    """Frenzy's HAS: arrival order, MARP plans in ``ranking`` order, first placeable plan, best-fit nodes.

    Parameters
    ----------
    env: the (possibly wrapped) FrenzyEnv.
    ranking: MARP plan ranking (see the module docstring); default ``"min_gpus"``.
    predictor: MARP estimator of the policy (``None``: the env's; under ``plans="paper"``, ``"frenzy"``).
    plans: ``"env"`` (default: the env's plan slots and layouts) or ``"paper"`` (the paper's (type, d, t)
        plans without accumulation; see the module docstring).
    """

    name = "frenzy"

    def __init__(
        self, env: Any, ranking: str = DEFAULT_RANKING, predictor: str | None = None, plans: str = "paper"
    ) -> None:
        super().__init__(env)
        if ranking not in RANKINGS:
            raise unknown_name("ranking", ranking, RANKINGS)
        if predictor not in PREDICTORS:
            raise unknown_name("predictor", predictor, [p for p in PREDICTORS if p])
        if plans not in PLANS:
            raise unknown_name("plans", plans, PLANS)
        self.ranking = ranking
        self.predictor = predictor
        self.plans = plans
        self._ranker: PlanRanker | None = None

    def reset(self) -> None:
        super().reset()
        self._ranker = None

    @property
    def ranker(self) -> PlanRanker:
        """The plan ranker of the current simulator (rebuilt when the env builds a new one)."""
        if self._ranker is None or self._ranker.view is not self.view:
            self._ranker = PlanRanker(self.view, self.ranking, self.predictor, self.plans)
        return self._ranker

    def act(self, mask: np.ndarray) -> int:
        env = self.env
        qv = env.visible_queue
        if len(qv) == 0:
            return self.wait_action(mask)
        p = env.num_plans
        legal = env.start_rows(mask)  # (Q, P)
        score = np.where(legal, self.ranker.positions(qv), _UNRANKED)  # (Q, P)
        best = score.min(axis=1)  # (Q,)
        rows = np.flatnonzero(best < _UNRANKED)
        if rows.size == 0:
            return self.wait_action(mask)
        k = int(rows[0])  # the earliest-arrived job that can start now
        return env.first_start + k * p + int(np.argmin(score[k]))


__all__ = ["FrenzyPolicy", "PlanRanker", "PLANS", "PREDICTORS"]
