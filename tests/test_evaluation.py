"""The evaluation loop: step limits, time budgets, episode records and confidence intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation import confidence_interval, episode_record, play, run_episode
from frenzy_env.workload import make_generator


@pytest.fixture
def env() -> FrenzyEnv:
    return FrenzyEnv(cluster="frenzy-testbed", workload=make_generator("synthetic", num_jobs=400, load=1.5))


def test_play_stops_after_max_steps(env):
    info, terminated, lat = play(env, make_policy("random", env), seed=0, max_steps=7)
    assert lat.size == 7 and not terminated
    assert env.unwrapped._steps == 7


def test_play_time_budget_checked_every_1024_decisions(env):
    _, terminated, lat = play(env, make_policy("random", env), seed=0, time_budget_s=0.0)
    assert not terminated and lat.size == 1024


def test_run_episode_metrics_and_record(env):
    result = run_episode(env, make_policy("fifo", env), seed=3)
    assert result.metrics["decisions"] == result.latencies.size > 0
    assert result.metrics["latency_median_ms"] == pytest.approx(np.median(result.latencies) * 1e3)
    jobs, row = episode_record(result, "w", "fifo", 3)
    assert len(jobs) == 400 and set(jobs[["workload", "policy", "seed"]].drop_duplicates().itertuples(index=False)) == {
        ("w", "fifo", 3)
    }
    assert row["avg_jct"] == result.metrics["avg_jct"] and (row["workload"], row["seed"]) == ("w", 3)


def test_confidence_interval_by_hand():
    mean, half = confidence_interval([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))  # t(0.975, df=2) * s / sqrt(n)
    assert math.isnan(confidence_interval([5.0])[1]) and confidence_interval([5.0])[0] == 5.0
    assert all(math.isnan(v) for v in confidence_interval([]))
