"""Which data/tensor-parallel layouts of a job are legal: the one rule behind MARP's plan grid
(:func:`frenzy_env.memory.feasible_plans`), the trace assignment's fit test (:mod:`frenzy_env.workload`) and the
simulator's plan table (:mod:`frenzy_env.simulator.plans`).

A layout of ``count`` GPUs is ``dp`` data-parallel replicas of a ``tp``-way tensor-parallel group, ``dp * tp ==
count``, where ``tp`` is a power of two, at most ``max_tp`` (a tensor-parallel group never spans nodes, so
callers pass a node's GPU count) and dividing the model's attention heads, and ``dp`` is at most the global
batch (every replica gets at least one sample). Callers differ only in what they pass: MARP enumerates every
power-of-two count up to ``max_gpus`` with the largest node size of its GPU types as ``max_tp`` and lists the
layouts by ``tp`` first; the simulator the power-of-two counts of its plan slots with each GPU type's node
size; the workload one count (any integer, so ``dp`` need not be a power of two) with ``max_tp`` the node
size capped at 8.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit`` (empty when ``limit < 1``)."""
    out = []
    p = 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def layouts(heads: int, batch: int, counts: Iterable[int], max_tp: int) -> tuple[np.ndarray, np.ndarray]:
    """(n,) int64 ``dp`` and ``tp`` of every legal layout of each GPU count in ``counts`` (in the order of
    ``counts``, ``tp`` ascending within a count); see the module docstring for the rule."""
    tps = powers_of_two(max_tp)
    pairs = [(c // t, t) for c in counts for t in tps if c % t == 0 and heads % t == 0 and c // t <= batch]
    dp = np.array([d for d, _ in pairs], dtype=np.int64)
    tp = np.array([t for _, t in pairs], dtype=np.int64)
    return dp, tp
