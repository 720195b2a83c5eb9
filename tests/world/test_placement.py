from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frenzy_env.world.placement import STRATEGIES, capacity_by_tp, nodes_spanned, place

TP_LEVELS = np.array([1, 2, 4, 8])


def test_capacity_by_tp_hand_computed():
    free = np.array([3, 8, 5, 2])
    types = np.array([0, 0, 1, 1])
    cap = capacity_by_tp(free, types, 2, TP_LEVELS)
    # type 0: tp1 3+8=11, tp2 2+8=10, tp4 0+8=8, tp8 0+8=8; type 1: tp1 7, tp2 4+2=6, tp4 4, tp8 0
    assert cap.tolist() == [[11, 10, 8, 8], [7, 6, 4, 0]]
    assert cap.shape == (2, 4)


def test_best_fit_prefers_tightest_single_node():
    free = np.array([8, 3, 4, 6, 4])
    types = np.zeros(5, dtype=int)
    counts = place(free, types, 0, 4, 1)
    # nodes with >= 4 free: 0 (8), 2 (4), 3 (6), 4 (4): tightest is 4 free, lowest index -> node 2
    assert counts.tolist() == [0, 0, 4, 0, 0]
    counts = place(free, types, 0, 3, 1)  # node 1 has exactly 3: an exact fit wins
    assert counts.tolist() == [0, 3, 0, 0, 0]


def test_exact_fit_size_terminates():
    # Only nodes with exactly fitSz free GPUs: Frenzy's Algorithm 1 (size > fitSz) would loop forever.
    free = np.array([4, 4, 4])
    types = np.zeros(3, dtype=int)
    assert place(free, types, 0, 4, 4).tolist() == [4, 0, 0]
    assert place(free, types, 0, 12, 4).tolist() == [4, 4, 4]
    assert place(free, types, 0, 8, 2).tolist() == [4, 4, 0]
    assert place(free, types, 0, 16, 4) is None


def test_only_nodes_of_the_requested_type():
    free = np.array([8, 8, 2])
    types = np.array([1, 0, 0])
    assert place(free, types, 0, 8, 1).tolist() == [0, 8, 0]
    assert place(free, types, 0, 10, 1).tolist() == [0, 8, 2]
    assert place(free, types, 1, 10, 1) is None
    assert place(free, types, 2, 1, 1) is None  # no node of that type


def test_spread_fewest_nodes_and_tightest_last_chunk():
    free = np.array([6, 2, 7, 3, 5])
    types = np.zeros(5, dtype=int)
    counts = place(free, types, 0, 10, 1)
    # largest first: 7 (node 2), then remainder 3 goes to the tightest node with >= 3 free: node 3
    assert counts.tolist() == [0, 0, 7, 3, 0]
    assert nodes_spanned(counts) == 2


def test_tensor_parallel_group_never_spans_nodes():
    free = np.array([3, 3, 3, 6])
    types = np.zeros(4, dtype=int)
    counts = place(free, types, 0, 8, 2)
    assert counts.sum() == 8 and (counts % 2 == 0).all()
    assert counts.tolist() == [2, 0, 0, 6]
    # 3 free on three nodes: only 2 usable each in pairs; tp=4 only fits on node 3
    assert place(free, types, 0, 8, 4) is None
    assert place(free, types, 0, 4, 4).tolist() == [0, 0, 0, 4]


def test_first_fit():
    free = np.array([2, 8, 3])
    types = np.zeros(3, dtype=int)
    assert place(free, types, 0, 5, 1, strategy="first_fit").tolist() == [2, 3, 0]
    assert place(free, types, 0, 4, 2, strategy="first_fit").tolist() == [2, 2, 0]


def test_bad_arguments():
    free = np.array([8])
    types = np.array([0])
    with pytest.raises(ValueError, match="multiple of tp"):
        place(free, types, 0, 3, 2)
    with pytest.raises(ValueError, match="tp must be"):
        place(free, types, 0, 2, 0)
    with pytest.raises(ValueError, match="strategy"):
        place(free, types, 0, 2, 1, strategy="worst")


@settings(max_examples=300, deadline=None)
@given(
    free=st.lists(st.integers(0, 8), min_size=1, max_size=12),
    data=st.data(),
)
def test_place_agrees_with_capacity(free, data):
    free = np.array(free)
    n = free.size
    types = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    cap = capacity_by_tp(free, types, 3, TP_LEVELS)
    type_index = data.draw(st.integers(0, 2))
    level = data.draw(st.integers(0, len(TP_LEVELS) - 1))
    tp = int(TP_LEVELS[level])
    num_gpus = tp * data.draw(st.integers(1, 12))
    for strategy in STRATEGIES:
        counts = place(free, types, type_index, num_gpus, tp, strategy=strategy)
        assert (counts is not None) == (cap[type_index, level] >= num_gpus)
        if counts is not None:
            assert counts.sum() == num_gpus
            assert (counts % tp == 0).all()
            assert (counts <= free).all() and (counts >= 0).all()
            assert (counts[types != type_index] == 0).all()
            if strategy in ("best_fit", "spread"):
                # one node whenever some node holds the whole job; fewest nodes in general
                fits = (free >= num_gpus) & (types == type_index)
                assert (nodes_spanned(counts) == 1) == fits.any()
                # fewest nodes: no placement can use fewer than the largest-first greedy count
                units = np.sort(((free // tp) * tp)[types == type_index])[::-1]
                assert nodes_spanned(counts) == int(np.searchsorted(np.cumsum(units), num_gpus)) + 1


def test_spread_largest_first():
    free = np.array([6, 2, 7, 3, 5])
    types = np.zeros(5, dtype=int)
    assert place(free, types, 0, 4, 1, strategy="spread").tolist() == [0, 0, 4, 0, 0]
    assert place(free, types, 0, 10, 1, strategy="spread").tolist() == [3, 0, 7, 0, 0]
