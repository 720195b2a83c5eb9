"""Which data/tensor-parallel layouts of a job are legal: the one rule behind MARP's plan grid
(:func:`frenzy_env.world.memory.planning.feasible_plans`), the trace assignment's fit test
(:mod:`frenzy_env.workload`) and the simulator's plan table (:mod:`frenzy_env.simulator.plans`).

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


def pipeline_depths(layers: int, limit: int) -> list[int]:
    """Pipeline-stage counts a model allows: the powers of two up to ``limit`` that divide ``layers`` (every
    stage holds the same number of layers)."""
    return [p for p in powers_of_two(min(limit, layers)) if layers % p == 0]


def per_replica_batch(batch: int, dp: int) -> int:
    """Sequences one of ``dp`` data-parallel replicas takes of a global ``batch``: ``ceil(batch / dp)``. A
    micro-batch is a slice of it: at most this many sequences (:func:`micro_batches`)."""
    return -(-batch // dp)


def micro_batches(per_replica: int) -> list[int]:
    """Micro-batch sizes of a per-replica batch, largest first: the batch itself (no gradient accumulation),
    then the powers of two that divide it (``per_replica / micro`` accumulation steps)."""
    low = per_replica & -per_replica  # largest power of two dividing it
    return [per_replica] + [m for m in reversed(powers_of_two(low)) if m != per_replica]


def plan_layouts(
    heads: int,
    layers: int,
    batch: int,
    counts: Iterable[int],
    max_tp: int,
    max_pp: int | None = None,
    accumulate: bool = True,
    pipeline_micro_batches: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(n,) int64 ``dp``, ``tp``, ``pp`` and micro-batch of every candidate plan layout of each count.

    The (dp, tp) rule of :func:`layouts` with ``pp`` pipeline stages (:func:`pipeline_depths`, at most ``max_pp``,
    default the count): ``dp * tp * pp == count``. Micro-batches (gradient accumulation: the per-replica batch
    ``ceil(batch / dp)`` = micro-batch x steps): every size of :func:`micro_batches` when ``pp == 1``; micro-batch 1
    when ``pp > 1`` -- for a fixed (dp, tp, pp) more micro-batches only shrink the 1F1B bubble
    (:mod:`frenzy_env.world.throughput`) and the first stage's in-flight activations
    (:mod:`frenzy_env.world.memory.estimator`), so the smallest micro-batch is both the fastest and the most
    frugal there. ``pipeline_micro_batches=True`` (what
    ``efficiency="microbatch"`` uses, :mod:`frenzy_env.world.efficiency`, where a larger micro-batch computes more
    efficiently and the bubble trades against it) gives pipelines every size of :func:`micro_batches` too. ``max_pp=1,
    accumulate=False`` give the (dp, tp) layouts of :func:`layouts` with the whole per-replica batch as the micro-batch.
    Order: by count (as given), then ``pp``, then ``tp``, then micro-batch descending.
    """
    tps = powers_of_two(max_tp)
    out = []
    for c in counts:
        for p in pipeline_depths(layers, c if max_pp is None else min(c, max_pp)):
            if c % p:
                continue
            for t in tps:
                if (c // p) % t or heads % t:
                    continue
                d = c // (p * t)
                if d > batch:
                    continue
                rep = per_replica_batch(batch, d)
                pipe = micro_batches(rep) if pipeline_micro_batches else (1,)
                for m in (micro_batches(rep) if accumulate else [rep]) if p == 1 else pipe:
                    out.append((d, t, p, m))
    if not out:
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), e.copy(), e.copy()
    a = np.array(out, dtype=np.int64)
    return a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy(), a[:, 3].copy()
