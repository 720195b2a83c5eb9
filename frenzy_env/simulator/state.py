"""The simulator's cluster state: :class:`_SimState`, a :class:`~frenzy_env.world.cluster.ClusterState` whose
allocate and release cost O(nodes touched) and that keeps the aggregates the masks read (GPUs placeable per
GPU type and tensor-parallel level, free GPUs per type) up to date, with Python-list mirrors (``free_l``) for
the placer's scalar reads."""

from __future__ import annotations

import numpy as np

from frenzy_env.world.cluster import ClusterSpec, ClusterState
from frenzy_env.world.placement import capacity_by_tp


class _SimState(ClusterState):
    """:class:`ClusterState` with fast allocate/release and incrementally maintained aggregates.

    Besides ``free`` and ``owner`` it keeps ``cap`` (num_types, L): GPUs placeable per type in
    tensor-parallel groups of each level (what :func:`~frenzy_env.world.placement.capacity_by_tp` returns for
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

