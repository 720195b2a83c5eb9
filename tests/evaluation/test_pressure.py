"""A suite's pressure (frenzy_env.evaluation.results.queue_pressure, pressure_note): the share of jobs that wait
over a minute and the GPUs' busy fraction over the arrival window, from an episode's tables, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frenzy_env.evaluation.results import pressure_note, queue_pressure, suite_markdown


def test_queue_pressure_by_hand():
    # three jobs submitted at 0, 30 and 60 s: the arrival window is T = 60 x 3 / 2 = 90 s from t = 0
    jobs = pd.DataFrame({
        "job_id": [0, 1, 2], "submit_time_s": [0.0, 30.0, 60.0], "start_time_s": [0.0, 100.0, np.nan],
        "rejected_reason": [None, None, "fits no GPU type"],
    })
    # job 0 on 2 GPUs for [0, 50) (an OOM), then on 1 GPU from 50 to 200; job 1 from 100 s, still running
    attempts = pd.DataFrame({
        "job_id": [0, 0, 1], "start_time_s": [0.0, 50.0, 100.0], "end_time_s": [50.0, 200.0, np.nan],
        "num_gpus": [2, 1, 1],
    })
    wait, busy = queue_pressure(jobs, attempts, num_gpus=4)
    assert wait == pytest.approx(1 / 2)  # job 1 waits 70 s > 60 s; job 2 is rejected: left out
    assert busy == pytest.approx((2 * 50 + 1 * 40) / (4 * 90))  # job 1 starts after the window
    assert queue_pressure(jobs, attempts, num_gpus=4, wait_s=80.0)[0] == 0.0


def test_pressure_note_gives_mean_and_range_and_the_suite_table_carries_it():
    pressure = pd.DataFrame({"workload": ["a", "b"], "seed": [0, 0], "wait_frac": [0.1, 0.3],
                             "busy_frac": [0.5, 0.7]})
    note = pressure_note(pressure)
    assert note == ("Pressure under `fifo` (mean over the 2 workloads, smallest - largest): 20% (10% - 30%) of the "
                    "jobs wait over 60 s to start; the GPUs are busy 60% (50% - 70%) of the arrival window.")
    table = pd.DataFrame([{
        "policy": "ref", "n": 2, "avg_jct_h": 1.0, "avg_jct_h_ci95": 0.1, "ref_ratio": 1.0, "ref_ratio_low": np.nan,
        "ref_ratio_high": np.nan, "bound_ratio": np.nan, "bound_ratio_low": np.nan, "bound_ratio_high": np.nan,
        "gpu_hours": 1.0, "gpu_hours_ci95": 0.1, "ooms": 0, "restarts": 0, "latency_median_ms": 1.0,
        "latency_p99_ms": 2.0, "truncated": 0, "unfinished": 0}])
    assert note in suite_markdown(table, "ref", "two workloads", pressure)
    assert "Pressure under" not in suite_markdown(table, "ref", "two workloads")
