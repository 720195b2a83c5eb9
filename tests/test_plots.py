"""frenzy_env.plots: PNGs from evaluation tables, and the busy-GPU step function."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frenzy_env.plots import PLOT_FILES, busy_timeline, plot_results

pytest.importorskip("matplotlib")


def test_busy_timeline_by_hand():
    jobs = pd.DataFrame(
        {
            "submit_time": [0.0, 0.0, 5.0, 0.0],
            "start_time": [0.0, 10.0, 20.0, np.nan],  # the last job never ran (rejected)
            "finish_time": [30.0, 20.0, 40.0, np.nan],
            "num_gpus": [2, 4, 8, 0],
            "gpu_hours": [60 / 3600, 40 / 3600, 8 * 20 / 3600, 0.0],
        }
    )
    times, busy = busy_timeline(jobs)
    # [0,10): 2; [10,20): 6; at 20 job 1 ends and job 2 starts: 10; [30,40): 8; after 40: 0
    assert times.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert busy.tolist() == [2.0, 6.0, 10.0, 8.0, 0.0]


def test_busy_timeline_uses_average_gpus_of_resized_jobs():
    jobs = pd.DataFrame(
        {"submit_time": [0.0], "start_time": [0.0], "finish_time": [100.0], "num_gpus": [8], "gpu_hours": [400 / 3600]}
    )
    _, busy = busy_timeline(jobs)
    assert busy.tolist() == [4.0, 0.0]  # 400 GPU-seconds over 100 s, not the final 8 GPUs


def test_plot_results_writes_readable_pngs(tmp_path):
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation import evaluate, summarise

    policies = {name: (lambda env, n=name: make_policy(n, env)) for name in ("fifo", "frenzy")}
    jobs, episodes = evaluate(
        lambda wl: FrenzyEnv(workload=wl), policies, ["synthetic-small"], [0, 1], progress=False
    )
    summary = summarise(episodes)
    paths = plot_results(jobs, episodes, summary, tmp_path / "plots")
    assert [p.name for p in paths] == list(PLOT_FILES)
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
