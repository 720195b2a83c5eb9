"""frenzy_env.evaluation.plots: PNGs from evaluation tables (error bars clipped to their range), the busy-GPU step
function and the schedule picture."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from frenzy_env.evaluation.plots import PLOT_FILES, busy_timeline, plot_results

pytest.importorskip("matplotlib")


def test_busy_timeline_by_hand():
    jobs = pd.DataFrame(
        {
            "submit_time_s": [0.0, 0.0, 5.0, 0.0],
            "start_time_s": [0.0, 10.0, 20.0, np.nan],  # the last job never ran (rejected)
            "finish_time_s": [30.0, 20.0, 40.0, np.nan],
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
        {"submit_time_s": [0.0], "start_time_s": [0.0], "finish_time_s": [100.0], "num_gpus": [8],
         "gpu_hours": [400 / 3600]}
    )
    _, busy = busy_timeline(jobs)
    assert busy.tolist() == [4.0, 0.0]  # 400 GPU-seconds over 100 s, not the final 8 GPUs


def test_plot_results_writes_readable_pngs(tmp_path):
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import evaluate, summarise

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


def test_clipped_errors_stay_in_the_quantitys_range():
    from frenzy_env.evaluation.plots import clipped_errors

    mean = np.array([0.2, 0.9, 30.0, 5.0, 1.0])
    half = np.array([1.0, 0.3, 3.5, np.nan, 4.0])
    err = clipped_errors(mean[:2], half[:2], 0.0, 1.0)  # fractions
    np.testing.assert_allclose(err, [[0.2, 0.3], [0.8, 0.1]])
    err = clipped_errors(mean[2:], half[2:])  # times and counts: never below 0, unbounded above
    np.testing.assert_allclose(err, [[3.5, 0.0, 1.0], [3.5, 0.0, 4.0]])


def test_bars_png_error_bars_never_leave_the_range(tmp_path, monkeypatch):
    import matplotlib.axes

    summary = pd.DataFrame({
        "workload": ["w"], "policy": ["p"], "avg_jct_h": [0.5], "avg_jct_h_ci95": [2.0], "gpu_hours": [10.0],
        "gpu_hours_ci95": [1.0], "utilisation_frac": [0.2], "utilisation_frac_ci95": [1.0],
    })
    jobs = pd.DataFrame({"workload": ["w"], "policy": ["p"], "seed": [0], "submit_time_s": [0.0],
                         "start_time_s": [0.0], "finish_time_s": [3600.0], "jct_h": [1.0], "num_gpus": [1],
                         "gpu_hours": [1.0]})
    drawn = {}
    bar = matplotlib.axes.Axes.bar

    def spy(self, x, height, *args, yerr=None, **kwargs):
        drawn[self.get_ylabel() or len(drawn)] = (np.asarray(height, float), np.asarray(yerr, float))
        return bar(self, x, height, *args, yerr=yerr, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", spy)
    plot_results(jobs, summary.assign(seed=0), summary, tmp_path)
    lows = [h - e[0] for h, e in drawn.values()]
    highs = [h + e[1] for h, e in drawn.values()]
    assert len(drawn) == 3 and min(np.concatenate(lows)) >= 0.0
    np.testing.assert_allclose(lows, [[0.0], [9.0], [0.0]])  # JCT 0.5 - 2.0 and utilisation 0.2 - 1.0 clipped
    np.testing.assert_allclose(highs, [[2.5], [11.0], [1.0]])  # a fraction never above 1


def _schedule_fixture():
    from frenzy_env.world.cluster import ClusterSpec

    # node 0: four V100 GPUs (global 0-3), node 1: four A100 (global 4-7); A100 comes first (more memory)
    cluster = ClusterSpec.from_counts("two", {"V100-32GB": (1, 4), "A100-80GB": (1, 4)})
    h = 3600.0
    attempts = pd.DataFrame(
        [
            (0, 0, "A100-80GB", 2, 2, 1, (4, 5), 0.0, 30.0, 1 * h, "resized"),
            (0, 1, "A100-80GB", 4, 4, 1, (4, 5, 6, 7), 1 * h, 1 * h + 40, 3 * h, "finished"),
            (1, 0, "V100-32GB", 2, 2, 1, (0, 1), 0.5 * h, 0.5 * h + 30, 0.6 * h, "oom"),
            (1, 1, "V100-32GB", 2, 2, 1, (1, 3), 0.6 * h, 0.6 * h + 30, 2 * h, "finished"),  # scattered GPUs
        ],
        columns=["job_id", "attempt", "gpu_type", "num_gpus", "dp", "tp", "gpus", "start_time_s",
                 "progress_from_s", "end_time_s", "outcome"],
    )
    return cluster, attempts


def test_schedule_bars_one_per_attempt_and_run_of_gpus():
    from frenzy_env.evaluation.plots import gpu_lanes, schedule_bars

    cluster, attempts = _schedule_fixture()
    lanes, bands = gpu_lanes(cluster)
    assert lanes.tolist() == [4, 5, 6, 7, 0, 1, 2, 3] and bands.tolist() == [0, 4, 8]
    bars = schedule_bars(attempts, cluster)
    assert list(bars.itertuples(index=False, name=None)) == [
        (0, 0, "resized", 0, 2, 0.0, 1.0),
        (0, 1, "finished", 0, 4, 1.0, 3.0),
        (1, 0, "oom", 4, 2, 0.5, 0.6),
        (1, 1, "finished", 5, 1, 0.6, 2.0),  # GPUs 1 and 3: lanes 5 and 7, two bars
        (1, 1, "finished", 7, 1, 0.6, 2.0),
    ]


def test_schedule_picture_draws_every_attempt(tmp_path):
    from frenzy_env.evaluation.plots import plot_schedule, plot_schedules, schedule_file

    cluster, attempts = _schedule_fixture()
    svg = plot_schedule(attempts, cluster, tmp_path / "s.svg", "Schedule of p on w (seed 0)").read_text()
    gids = re.findall(r'<g id="(attempt-\d+-\d+)">', svg)
    assert sorted(gids) == ["attempt-0-0", "attempt-0-1", "attempt-1-0", "attempt-1-1", "attempt-1-1"]
    assert "Schedule of p on w (seed 0)" in svg and "time since first submission (hours)" in svg
    assert "out of memory" in svg and "resized" in svg and "A100-80GB" in svg  # legend and bands
    [png] = plot_schedules({("itp trace.csv", "sia[requested]"): (0, attempts, 0.0)}, cluster, tmp_path)
    assert png.name == schedule_file("itp trace.csv", "sia[requested]") == "schedule_itp-trace.csv_sia-requested-.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
