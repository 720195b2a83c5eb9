"""The placement rule A-SRPT and its comparators share: "Heavy-Edge" as this environment can express it.

A-SRPT (Luo et al., arXiv 2501.05563) models a job as a graph whose edges carry its communication and places
it so that the heavy edges stay inside a server (the fewest servers), and runs its comparators on the same
placement. In this environment a policy chooses *what* to start and on which plan (GPU type, count, layout);
*where* its GPUs go is the simulator's placer (``SimConfig.placement``, best fit by default), which already
keeps every tensor-parallel group -- the per-layer all-reduce, the heaviest edges -- inside one node and puts
the job on the fewest nodes its count can take *now*. What a policy adds is *when*:

``placement="heavy_edge"`` (default)
    A job is communication-heavy when ``alpha_max / alpha_min >= comm_heavy``: its iteration time on its most
    spread placement (one tensor-parallel group per node, on as many nodes of the type as there are) over its
    consolidated one. A heavy job starts only on a placement spanning the fewest nodes its count needs (what
    the placer would give on an idle cluster), for at most ``tau`` times its predicted run time after it
    became eligible; then on any placement. Light jobs start at once on any placement.
``placement="any"``
    Every job starts on whatever the placer gives now (no consolidation wait).

:class:`HeavyEdge` holds the per-episode state of that rule; :class:`~baselines.asrpt.AsrptPolicy` and the
comparators of :mod:`baselines.queue_order` call the same methods, so they run on the same placement.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError, unknown_name
from frenzy_env.world.placement import place

PLACEMENTS = ("heavy_edge", "any")
COMM_HEAVY = 1.5
DEFAULT_TAU = 1.0


def check_placement(placement: str, comm_heavy: float, tau: float) -> None:
    """Raise ConfigError (naming the field) for a bad ``placement``, ``comm_heavy`` or ``tau``."""
    if placement not in PLACEMENTS:
        raise unknown_name("placement", placement, PLACEMENTS)
    if not (isinstance(comm_heavy, (int, float)) and comm_heavy >= 1.0):
        raise ConfigError(f"comm_heavy must be a number >= 1, got {comm_heavy!r}")
    if not (isinstance(tau, (int, float)) and tau >= 0 and math.isfinite(tau)):
        raise ConfigError(f"tau must be a finite number >= 0, got {tau!r}")


class HeavyEdge:
    """Per-episode state of the shared placement rule (module docstring): the fewest nodes each plan needs,
    the communication ratio of (model, batch, sequence, plan), and the consolidation test."""

    def __init__(self, view: Any, placement: str = "heavy_edge", comm_heavy: float = COMM_HEAVY) -> None:
        self.view = view
        self.placement = placement
        self.comm_heavy = float(comm_heavy)
        self.min_span = np.maximum(1, -(-view.plan_count // view.max_node_gpus[view.plan_type]))  # (P,)
        self._ratio_cache: dict[tuple, float] = {}

    def comm_ratio(self, j: int, plan: int) -> float:
        """alpha_max / alpha_min: most spread over consolidated iteration time of job ``j`` on ``plan``."""
        view = self.view
        spec = view.jobs[j]
        key = (spec.model, int(spec.batch_size), int(spec.seq_len), plan)
        ratio = self._ratio_cache.get(key)
        if ratio is None:
            t = int(view.plan_type[plan])
            g, tp = int(view.plan_count[plan]), int(view.layout_tp[j, plan])
            nodes_of_type = int((view.cluster.node_type_index == t).sum())
            widest = min(g // tp, nodes_of_type)
            if widest <= int(self.min_span[plan]):
                ratio = 1.0
            else:
                ratio = view.spread_iter_time(j, plan, widest) / float(view.iter_time[j, plan])
            self._ratio_cache[key] = ratio
        return ratio

    def is_heavy(self, j: int, plan: int) -> bool:
        """Whether job ``j`` on ``plan`` waits for a consolidated placement (never with ``placement="any"``)."""
        return self.placement == "heavy_edge" and self.comm_ratio(j, plan) >= self.comm_heavy

    def consolidated(self, j: int, plan: int) -> bool:
        """Whether the env's placer would put job ``j``'s ``plan`` on the fewest nodes it needs, now."""
        view = self.view
        counts = place(view.free, view.cluster.node_type_index, int(view.plan_type[plan]), int(view.plan_count[plan]),
                       int(view.layout_tp[j, plan]), strategy=view.config.placement)
        return counts is not None and np.count_nonzero(counts) <= self.min_span[plan]


__all__ = ["HeavyEdge", "PLACEMENTS", "COMM_HEAVY", "DEFAULT_TAU", "check_placement"]


def candidate_plans(policy: Any, j: int, cand: np.ndarray) -> np.ndarray:
    """The plans :func:`start_action` chooses among for job ``j``: those of ``cand`` (plans of its GPU count,
    fastest first) that have not run out of memory before, or else all of its ranked plans (``policy.ranker``)."""
    cand = cand[~policy.view.oom_known[j, cand]]
    return cand if cand.size else policy.ranker.ranked(j)  # every plan of g_i GPUs crashed: its others, ranked


def start_action(
    policy: Any, he: HeavyEdge, j: int, k: int, mask: np.ndarray, cand: np.ndarray, deadline_passed: bool,
    types_ok: np.ndarray | None = None,
) -> int | None:
    """The start action of queued job ``j`` (queue slot ``k``) on the first legal plan of its
    :func:`candidate_plans` (``cand``: plans of its GPU count, fastest first) whose GPU type ``types_ok`` (T,)
    allows (None: any type); a heavy job (``policy.heavy[j]``) takes only a consolidated placement until
    ``deadline_passed``. None: no such plan can start now."""
    view, env = policy.view, policy.env
    p_n = view.num_plans
    cand = candidate_plans(policy, j, cand)
    if types_ok is not None:
        cand = cand[types_ok[view.plan_type[cand]]]
    row = mask[env.first_start + k * p_n : env.first_start + (k + 1) * p_n]
    legal = cand[row[cand]]
    if legal.size == 0:
        return None
    if not policy.heavy[j] or deadline_passed:
        return env.first_start + k * p_n + int(legal[0])
    for p in legal.tolist():
        if he.consolidated(j, p):
            return env.first_start + k * p_n + p
    return None  # heavy: wait for a consolidated placement

