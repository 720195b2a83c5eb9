"""Placers: map a resource plan (GPU type, GPU count, tensor-parallel degree) to concrete nodes.

No policy lives here: a placer only decides *where* a plan's GPUs go, never *whether* or *which plan*.

Rules every placer follows

- all GPUs of a job are of one type (the nodes of ``type_index``);
- a tensor-parallel group never spans nodes, so every node receives a multiple of ``tp`` GPUs;
- it succeeds exactly when :func:`capacity_by_tp` says there is room:
  ``place(...) is not None  <=>  capacity_by_tp(...)[type_index, tp] >= num_gpus``;
- it always terminates (no search loops).

Strategies

``"best_fit"`` (Frenzy's heterogeneity-aware scheduler, HAS): if one node can hold the whole job, use the
node with the fewest free GPUs that still fits (tightest fit, ties to the lowest node index). Frenzy's
Algorithm 1 keeps only nodes with ``size > fitSz`` and can loop forever when the only free nodes have
exactly ``fitSz`` GPUs; here nodes with exactly as many free GPUs as needed are accepted (``>=``).
Otherwise a locality-aware spread: the fewest nodes possible, filling the nodes with the most free GPUs
first; the last (partial) chunk goes to the tightest node that holds it, which keeps the node count minimal.

``"spread"``: locality-aware without the tight single-node preference: nodes with the most free GPUs
first (ties to the lowest index), each filled as far as it goes; again the fewest nodes possible.

``"first_fit"``: nodes in index order, each filled as far as it goes (the "opportunistic" baseline).
"""

from __future__ import annotations

import numpy as np

STRATEGIES: tuple[str, ...] = ("best_fit", "spread", "first_fit")


def capacity_by_tp(
    free: np.ndarray, node_type_index: np.ndarray, num_types: int, tp_levels: np.ndarray
) -> np.ndarray:
    """GPUs of each type placeable in tensor-parallel groups of each size.

    Parameters
    ----------
    free: (num_nodes,) free GPUs per node.
    node_type_index: (num_nodes,) GPU-type index of each node, in ``[0, num_types)``.
    num_types: number of GPU types.
    tp_levels: (L,) positive tensor-parallel degrees.

    Returns
    -------
    (num_types, L) int64: ``sum over nodes i of that type of floor(free_i / tp) * tp``.
    """
    free = np.asarray(free, dtype=np.int64)  # (N,)
    tp = np.asarray(tp_levels, dtype=np.int64).reshape(-1)  # (L,)
    placeable = (free[:, None] // tp[None, :]) * tp[None, :]  # (N, L)
    onehot = np.asarray(node_type_index)[None, :] == np.arange(num_types)[:, None]  # (T, N)
    return onehot.astype(np.int64) @ placeable  # (T, L)


def place(
    free: np.ndarray,
    node_type_index: np.ndarray,
    type_index: int,
    num_gpus: int,
    tp: int,
    strategy: str = "best_fit",
) -> np.ndarray | None:
    """Choose nodes for ``num_gpus`` GPUs of type ``type_index`` in groups of ``tp`` GPUs.

    Parameters
    ----------
    free: (num_nodes,) free GPUs per node.
    node_type_index: (num_nodes,) GPU-type index of each node.
    type_index: the GPU type to place on.
    num_gpus: GPUs wanted, a positive multiple of ``tp``.
    tp: tensor-parallel degree (GPUs of one group stay on one node).
    strategy: ``"best_fit"``, ``"spread"`` or ``"first_fit"`` (see the module docstring).

    Returns
    -------
    (num_nodes,) int64 GPUs taken per node (each a multiple of ``tp``, summing to ``num_gpus``), or ``None``
    when the free GPUs of that type cannot hold the job.
    """
    if tp < 1:
        raise ValueError(f"tp must be a positive integer, got {tp}")
    if num_gpus < 1 or num_gpus % tp:
        raise ValueError(f"num_gpus must be a positive multiple of tp={tp}, got {num_gpus}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    free = np.asarray(free, dtype=np.int64)  # (N,)
    nodes = np.flatnonzero(np.asarray(node_type_index) == type_index)  # (K,) ascending node indices
    units = (free[nodes] // tp) * tp  # (K,) GPUs usable in whole tp groups
    if int(units.sum()) < num_gpus:
        return None
    counts = np.zeros(free.shape[0], dtype=np.int64)
    if strategy != "best_fit":
        order = np.argsort(-units, kind="stable") if strategy == "spread" else np.arange(units.size)  # (K,)
        u = units[order]
        counts[nodes[order]] = np.minimum(u, np.maximum(num_gpus - (np.cumsum(u) - u), 0))
        return counts
    # best_fit. units >= num_gpus <=> free >= num_gpus, since num_gpus is a multiple of tp.
    fits = units >= num_gpus
    if fits.any():
        cand = np.flatnonzero(fits)
        best = cand[np.argmin(free[nodes[cand]])]  # argmin: first (lowest index) among ties
        counts[nodes[best]] = num_gpus
        return counts
    # Locality-aware spread: largest first (stable: ties to the lowest index) gives the fewest nodes.
    order = np.argsort(-units, kind="stable")  # (K,)
    sorted_units = units[order]
    cum = np.cumsum(sorted_units)
    k = int(np.searchsorted(cum, num_gpus))  # index of the last node needed (cum[k] >= num_gpus)
    counts[nodes[order[:k]]] = sorted_units[:k]
    remainder = num_gpus - (int(cum[k - 1]) if k > 0 else 0)
    # tightest remaining node that holds the remainder (order[k] always does)
    rest = order[k:]
    ok = rest[units[rest] >= remainder]
    last = ok[np.lexsort((ok, free[nodes[ok]]))[0]]  # fewest free, then lowest index
    counts[nodes[last]] = remainder
    return counts


def nodes_spanned(counts: np.ndarray) -> int:
    """Number of nodes a placement touches."""
    return int(np.count_nonzero(counts))
