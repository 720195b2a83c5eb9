"""research/scripts/planner_sweep.py (settings, a play, the hindsight report on hand-made tables) and
research/scripts/srpt_violations.py (blocked queueing worked by hand on one GPU)."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest


def _script(name: str):
    """research/scripts/<name>.py as a module (conftest.py puts research/scripts on sys.path)."""
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def sweep():
    return _script("planner_sweep")


def test_settings_parse_and_bad_ones_are_named(sweep):
    assert sweep.parse_setting("margin=0.2,rate_power=2") == {"move_margin": 0.2, "rate_power": 2.0}
    assert sweep.parse_setting("sia_srpt") == {}
    with pytest.raises(SystemExit, match="rate_power must be a number, got 'x'"):
        sweep.parse_setting("margin=0,rate_power=x")
    with pytest.raises(SystemExit, match="key=value"):
        sweep.parse_setting("margin")
    assert sweep.parse_setting("margin=0.2,preempt=1,preempt_margin=1") == {
        "move_margin": 0.2, "preempt": True, "preempt_margin": 1.0}
    assert sweep.parse_setting("preempt=0") == {"preempt": False}
    assert sweep.parse_setting("sia_srpt,margin=0.2,preempt=1") == {"move_margin": 0.2, "preempt": True}
    with pytest.raises(SystemExit, match="preempt must be 0 or 1, got 'yes'"):
        sweep.parse_setting("preempt=yes")


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
    from agents.ppo.config import TrainConfig
    from agents.ppo.workloads import make_env
    from research.knob import play_plan

    cfg = TrainConfig()
    wl = make_workload(make_job(0, 0.0, 2000.0), make_job(1, 60.0, 4000.0), make_job(2, 120.0, 1000.0))
    setting, name, jct, restarts, seconds = sweep.play(("margin=0.2", "tiny", wl, 3, cfg))
    assert (setting, name) == ("margin=0.2", "tiny") and seconds >= 0 and restarts >= 0
    expect = play_plan(make_env(cfg, wl), 3, "completion", margin=0.2).avg_jct_h
    assert jct == pytest.approx(expect) and np.isfinite(jct) and jct > 0
    # the round-based baseline with keywords: frenzy evaluate's sia_srpt:preempt=True:move_margin=0.2
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import WIDE_WINDOWS, run_episode

    *_, jct, restarts, _ = sweep.play(("sia_srpt,margin=0.2,preempt=1", "tiny", wl, 3, cfg))
    env = FrenzyEnv(cluster=cfg.cluster, workload=wl, preemption=True, **WIDE_WINDOWS)
    metrics = run_episode(env, make_policy("sia_srpt", env, move_margin=0.2, preempt=True), seed=3).metrics
    assert (jct, restarts) == (metrics["avg_jct_h"], metrics["restarts"])
    # preempt=1: the play's env has the preempt actions and the planner uses them
    *_, jct, restarts, _ = sweep.play(("margin=0.2,preempt=1", "tiny", wl, 3, cfg))
    expect = play_plan(make_env(cfg, wl, preemption=True), 3, "completion", margin=0.2, preempt=True).avg_jct_h
    assert jct == pytest.approx(expect) and np.isfinite(jct) and jct > 0


@pytest.fixture(scope="module")
def violations():
    return _script("srpt_violations")


@pytest.mark.parametrize("second_iterations", [1e3, 1e6])
def test_srpt_violations_on_one_gpu(violations, make_job, make_env, second_iterations):
    """One GPU; job 0 (1e5 iterations) starts at 0, job 1 arrives at 100 s and waits (fifo) until job 0 is
    done. Its whole wait is queued time; it is blocked by the longer job 0 until job 0 has less left than job
    1's whole run on the GPU needs (never, when job 1 is the longer one)."""
    from baselines import make_policy
    from frenzy_env.world.cluster import ClusterSpec

    one = ClusterSpec.from_counts("one", {"A100-80GB": (1, 1)}, reference_gpu_type="A100-80GB")
    env = make_env(one, [make_job(0, 0.0, 1e5), make_job(1, 100.0, second_iterations)], queue_slots="all",
                   running_slots="all")
    policy = make_policy("fifo", env)
    policy.reset()
    out = violations.srpt_violations(env, policy.act, seed=0)
    sim = env.sim
    first, second = sim.records
    assert second.start_time >= first.finish_time > 100.0
    plan = int(np.flatnonzero(sim.available_plans(np.array([1]))[0])[0])  # the one plan: 1 GPU
    need = second_iterations * float(sim.iter_time[1, plan])
    assert out["queued_h"] == pytest.approx((second.start_time - 100.0) / 3600.0, rel=1e-12)
    assert out["blocked_h"] == pytest.approx(max(first.finish_time - need - 100.0, 0.0) / 3600.0, rel=1e-12)
    assert (out["blocked_h"] > 0) == (second_iterations < 1e5)
    assert out["jobs"] == 2 and out["avg_jct_h"] > 0


def test_union_of_intervals(violations):
    assert violations._measure([(0, 2), (1, 3), (5, 6), (4, 4), (7, 6)]) == 4.0
    assert violations._measure([]) == 0.0
