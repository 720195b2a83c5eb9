"""scripts/planner_sweep.py: settings, a play, and the hindsight report on hand-made tables."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def sweep():
    spec = importlib.util.spec_from_file_location(
        "planner_sweep", Path(__file__).parents[1] / "scripts" / "planner_sweep.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_settings_parse_and_bad_ones_are_named(sweep):
    assert sweep.parse_setting("margin=0.2,rate_power=2") == {"move_margin": 0.2, "rate_power": 2.0}
    assert sweep.parse_setting("sia_srpt") == {}
    with pytest.raises(SystemExit, match="rate_power must be a number, got 'x'"):
        sweep.parse_setting("margin=0,rate_power=x")
    with pytest.raises(SystemExit, match="key=value"):
        sweep.parse_setting("margin")


def test_report_ratios_and_the_hindsight_best(sweep):
    rows = [  # workload, setting, avg JCT
        ("a@1", "margin=0", 2.0), ("a@1", "m", 1.0), ("a@1", "n", 3.0),
        ("synthetic#1", "margin=0", 4.0), ("synthetic#1", "m", 5.0), ("synthetic#1", "n", 2.0),
    ]
    table = pd.DataFrame([[s, w, j, 0, 0] for w, s, j in rows], columns=sweep.COLUMNS)
    text = sweep.report(table, "margin=0", [["margin=0", "m", "n"], ["margin=0", "m"]])
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    # m: ratios 0.5 and 1.25, mean 0.875, sample sd 0.530, half-width 1.96 * 0.530 / sqrt(2) = 0.735
    assert "| m | 0.875 | ± 0.735 | 0.500 | 1.250 | 2 |" in lines["m"]
    assert "| n | 1.000 | ± 0.980 | 1.500 | 0.500 | 2 |" in lines["n"]
    best = [v for k, v in lines.items() if k.startswith("hindsight")]
    assert "| 0.500 | | 0.500 | 0.500 | 2 |" in best[0]  # a@1 takes m (0.5), synthetic#1 takes n (0.5)
    assert "| 0.750 | | 0.500 | 1.000 | 2 |" in best[1]  # without n: a@1 m (0.5), synthetic#1 margin=0 (1)


def test_a_play_is_the_planner_with_that_setting(sweep, make_job, make_workload):
    from agents.knob import play_plan
    from agents.ppo.config import TrainConfig
    from agents.ppo.workloads import make_env

    cfg = TrainConfig()
    wl = make_workload(make_job(0, 0.0, 2000.0), make_job(1, 60.0, 4000.0), make_job(2, 120.0, 1000.0))
    setting, name, jct, restarts, seconds = sweep.play(("margin=0.2", "tiny", wl, 3, cfg))
    assert (setting, name) == ("margin=0.2", "tiny") and seconds >= 0 and restarts >= 0
    expect = play_plan(make_env(cfg, wl), 3, "completion", margin=0.2).avg_jct_h
    assert jct == pytest.approx(expect) and np.isfinite(jct) and jct > 0
