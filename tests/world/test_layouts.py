"""The one rule of legal (dp, tp) layouts, on hand-worked cases, and the three callers that use it."""

from __future__ import annotations

from frenzy_env.workload import configs as workload
from frenzy_env.world.layouts import layouts, powers_of_two
from frenzy_env.world.memory import planning


def test_powers_of_two():
    assert powers_of_two(0) == []
    assert powers_of_two(1) == [1]
    assert powers_of_two(12) == [1, 2, 4, 8]


def test_layouts_hand_worked():
    # 8 GPUs, 12 heads (tp 8 does not divide them), nodes of 8 GPUs, batch 4 (dp 8 is too many replicas)
    dp, tp = layouts(12, 4, [8], 8)
    assert dp.tolist() == [4, 2] and tp.tolist() == [2, 4]
    # counts in the order given, tp ascending within each; a count need not be a power of two
    dp, tp = layouts(16, 64, [1, 6, 4], 4)
    assert list(zip(dp.tolist(), tp.tolist())) == [(1, 1), (6, 1), (3, 2), (4, 1), (2, 2), (1, 4)]
    assert layouts(1, 1, [2], 8)[0].size == 0  # 2 replicas of batch 1, and no tp divides 1 head but 1
    assert layouts(16, 64, [4], 0)[0].size == 0


def test_callers_get_their_own_enumeration():
    # MARP: every power-of-two count up to max_gpus, listed by tp then dp, float64
    # (a one-layer model: no pipeline stages; its micro-batch candidates are checked in test_plan_layouts.py)
    g = planning._grid(4, 8, 1, 2, 4)
    assert list(zip(g.dp.tolist(), g.tp.tolist())) == [(1, 1), (2, 1), (4, 1), (1, 2), (2, 2)]
    assert g.pp.tolist() == [1.0] * 5
    # the workload caps tp at 8 whatever the node size
    dp, tp = workload._layouts(32, 64, 32, 16)
    assert tp.tolist() == [1, 2, 4, 8] and dp.tolist() == [32, 16, 8, 4]
