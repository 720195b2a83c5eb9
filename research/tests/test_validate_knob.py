"""research/scripts/validate_knob.py: a re-run plays only the draws its csv lacks."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd


def test_validate_knob_adds_only_the_missing_draws():
    """A re-run of validate_knob.py with a larger --samples plays the draws the csv lacks, per model and
    workload, and nothing twice."""
    mod = importlib.import_module("validate_knob")  # research/scripts is on sys.path (conftest.py)
    table = pd.DataFrame(
        [["m.zip", 10.0, "w1", 0, 1.0], ["m.zip", 10.0, "w1", 2, 1.1], ["m.zip", 10.0, "w2", 0, 1.2],
         ["other.zip", 5.0, "w1", 1, 1.3], ["plan", np.nan, "w1", 0, 1.0]],
        columns=["model", "decisions", "workload", "draw", "avg_jct_h"],
    )
    assert mod.missing_draws(table, "m.zip", "w1", 3) == [1]
    assert mod.missing_draws(table, "m.zip", "w2", 3) == [1, 2]
    assert mod.missing_draws(table, "m.zip", "w3", 2) == [0, 1]
    assert mod.missing_draws(table, "other.zip", "w1", 2) == [0]
    assert mod.missing_draws(table, "m.zip", "w1", 1) == []
