"""research/scripts/relaxed_gap.py: the relaxed world's completion-rate rule worked by hand, and its tables."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from frenzy_env.evaluation.bounds import BoundInputs, relaxed_schedule


@pytest.fixture(scope="module")
def gap():
    return importlib.import_module("relaxed_gap")  # research/scripts is on sys.path (conftest.py)


def _two_jobs(exec_1, exec_2) -> BoundInputs:
    """Two jobs at t = 0 on one type of 2 GPUs, plans of 1 and 2 GPUs."""
    return BoundInputs(np.zeros(2), np.zeros(2), np.array([exec_1, exec_2], dtype=float), np.array([1.0, 2.0]),
                       np.array([0, 0]), np.array([2.0]))


def test_rate_rule_shares_where_speed_up_is_poor_and_srpt_does_not(gap):
    # 100 s on 1 GPU, 90 s on 2: SRPT gives A both GPUs (0-90 s), B then runs 90-180 s (mean 135); the
    # summed completion rate is higher with one GPU each (1/100 + 1/100 > 1/90): both end at 100 s
    inp = _two_jobs([100.0, 90.0], [100.0, 90.0])
    assert relaxed_schedule(inp).tolist() == [90.0, 180.0]
    assert relaxed_schedule(inp, gap.rate_allocation(inp)).tolist() == pytest.approx([100.0, 100.0])
    # good speed-up (60 s on 2 GPUs, 1/60 > 1/100 + 1/1000): A takes both, as in SRPT
    inp = _two_jobs([100.0, 60.0], [1000.0, 600.0])
    assert relaxed_schedule(inp, gap.rate_allocation(inp)).tolist() == pytest.approx([60.0, 660.0])


def test_weights_change_the_rate_rule_and_the_search_never_worsens_it(gap):
    inp = _two_jobs([100.0, 90.0], [100.0, 90.0])
    # A weighted 100: 100 / 90 on both GPUs beats 100 / 100 + 1 / 100 on one each, so A runs alone first
    heavy = gap.rate_allocation(inp, weights=np.array([100.0, 1.0]))
    assert relaxed_schedule(inp, heavy).tolist() == pytest.approx([90.0, 180.0])
    start, best, weights, plays = gap.weight_search(inp, seconds=0.2, subset=1)
    assert start == pytest.approx(100.0) and best <= start and weights.shape == (2,) and plays >= 2


def test_relaxed_row_and_tables(gap):
    inp = _two_jobs([100.0, 90.0], [100.0, 90.0])
    row = gap.relaxed_row(inp, plans=True)
    assert row["rate_h"] == pytest.approx(100.0 / 3600) and row["srpt_h"] == pytest.approx(135.0 / 3600)
    assert row["relaxed_h"] == min(row[f"{r}_h"] for r in gap.RULES)
    assert row["lp_h"] <= row["relaxed_h"] + 1e-12
    table = pd.DataFrame([
        {"split": "validation", "workload": "synthetic#1", "lp_h": 1.0, "srpt_h": 1.5, "work_h": 1.6,
         "lp_order_h": 1.4, "rate_h": 1.2, "relaxed_h": 1.2},
        {"split": "validation", "workload": "cluster07@1", "lp_h": 2.0, "srpt_h": 2.2, "work_h": 2.4,
         "lp_order_h": 2.6, "rate_h": 2.8, "relaxed_h": 2.2},
    ])
    md = gap.rule_table(table)
    assert "| validation synthetic | 1 | 1.500 | 1.600 | 1.400 | 1.200 | 1.200 |" in md
    assert "| validation trace windows | 1 | 1.100 | 1.200 | 1.300 | 1.400 | 1.100 |" in md
    table["search_h"] = [1.1, 2.1]
    assert "| validation synthetic | 1 | 1.500 | 1.600 | 1.400 | 1.200 | 1.200 | 1.100 |" in gap.rule_table(table)
    episodes = pd.DataFrame({"workload": ["synthetic#1", "synthetic#1", "cluster07@1", "elsewhere"],
                             "policy": ["p", "p", "p", "p"], "avg_jct_h": [1.4, 1.6, 3.3, 9.0]})
    # p: 1.5 / 1.0 and 3.3 / 2.0 over the LP (mean 1.575), 1.5 / 1.2 and 3.3 / 2.2 over the relaxed (1.375)
    assert "| p | 2 | 1.575 | 1.375 |" in gap.policy_table(table, episodes)

