"""research/scripts/knob_plays_report.py: each play of a knob run over its workload's fixed plan."""

from __future__ import annotations

import importlib

import pandas as pd
import pytest


def test_plays_report_divides_each_play_by_its_workloads_plan(tmp_path, capsys):
    """Two updates: workload 0 (plan 2.0 h) played at 2.2 and 1.8 h, then workload 1 (plan 4.0 h, at margin 0.2;
    the margin-0 row is another plan) at 4.0 and 5.0 h; workload 7 has no plan and is left out."""
    mod = importlib.import_module("knob_plays_report")  # research/scripts is on sys.path (conftest.py)
    run = tmp_path / "run"
    run.mkdir()
    rows = [(1, 0, 0, 2.2), (1, 0, 1, 1.8), (2, 1, 0, 4.0), (2, 1, 1, 5.0), (2, 7, 0, 9.0)]
    pd.DataFrame([dict(update=u, workload=w, play=k, decisions=10, instants=20, avg_jct_h=j, cost=0.0, seconds=1.0,
                       level0=0.5, level1=0.5) for u, w, k, j in rows]).to_csv(run / "plays.csv", index=False)
    pd.DataFrame({"seed": [0, 1, 1], "margin": [0.2, 0.2, 0.0], "avg_jct_h": [2.0, 4.0, 3.0]}).to_csv(
        tmp_path / "plans.csv", index=False)
    r = mod.play_ratios(pd.read_csv(run / "plays.csv"), pd.read_csv(tmp_path / "plans.csv"), 0.2)
    assert r.ratio.tolist() == pytest.approx([1.1, 0.9, 1.0, 1.25]) and 7 not in set(r.workload)
    assert mod.main(["--run", str(run), "--plans", str(tmp_path / "plans.csv"), "--margin", "0.2",
                     "--out", str(tmp_path)]) == 0
    assert "4 plays over 2 updates" in capsys.readouterr().out and (tmp_path / "training_plays_knob.png").is_file()
    with pytest.raises(SystemExit, match="margin 0.5"):
        mod.main(["--run", str(run), "--plans", str(tmp_path / "plans.csv"), "--margin", "0.5"])
