"""The simulator's memory truth (SimConfig.memory_truth, frenzy_env.world.memory.truth) and the masks' safety margin
(SimConfig.memory_margin): the shipped residual table is its recomputation, the per-job factor depends on the
seed and the job only, and on a one-job instance whose factor is forced to 1.10 the "extended" predictor admits
a plan that truly does not fit (an OOM with its lost GPU-hours) while the oracle and a 10% margin do not."""

from __future__ import annotations

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.simulator import DONE, ClusterSimulator, SimConfig
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.memory import truth as memory_truth


def test_shipped_residual_table_is_its_recomputation():
    shipped = memory_truth.load_residuals()
    fresh = memory_truth.compute_residuals()
    assert [(r["case"], r["source_id"], r["framework"]) for r in shipped] == [
        (r["case"], r["source_id"], r["framework"]) for r in fresh
    ]
    assert len(shipped) == 20 and len({r["source_id"] for r in shipped}) == 4
    for s, f in zip(shipped, fresh):
        assert s["measured_mib"] == pytest.approx(f["measured_mib"], abs=1e-9)
        assert s["predicted_mib"] == pytest.approx(f["predicted_mib"], abs=0.051)
        assert s["ratio"] == pytest.approx(f["ratio"], abs=5.1e-7)
    # the distribution stated in the module docstring
    summary = memory_truth.residual_summary(*memory_truth.residual_table())
    assert summary["min"] == pytest.approx(0.9419, abs=1e-4) and summary["max"] == pytest.approx(1.0300, abs=1e-4)
    assert summary["p_above_1"] == pytest.approx(0.553, abs=1e-3)
    assert summary["log_mean"] == pytest.approx(-0.0016, abs=1e-4)
    assert summary["log_sd"] == pytest.approx(0.0249, abs=1e-4)


def test_factor_depends_on_seed_and_job_only():
    ids = list(range(60))
    a = memory_truth.memory_factors(7, ids)
    assert np.array_equal(a, memory_truth.memory_factors(7, ids))
    assert np.array_equal(a[[5, 40]], memory_truth.memory_factors(7, [5, 40]))  # not on the other jobs
    assert not np.array_equal(a, memory_truth.memory_factors(8, ids))
    ratios, _ = memory_truth.residual_table()
    assert set(a.tolist()) <= set(ratios.tolist()) and len(set(a.tolist())) > 3


def test_factor_is_independent_of_actions_predictor_and_margin(make_env, make_job):
    jobs = [make_job(i, 10.0 * i, 200.0, model="gpt2-medium") for i in range(4)]
    cluster = ClusterSpec.homogeneous("V100-16GB", 1, 4)
    default = make_env(cluster, jobs)
    assert default.sim_config.memory_truth == "published" and default.sim_config.memory_margin == 0.0  # env v6
    v5 = make_env(cluster, jobs, memory_truth="residual")  # env v5's truth
    v5.reset(seed=3)
    v4 = make_env(cluster, jobs, memory_truth="estimate")
    v4.reset(seed=3)
    assert (v4.sim.memory_factor == 1.0).all()  # env v4's truth: the estimate itself
    expected = memory_truth.memory_factors(3, range(4))
    assert np.array_equal(v5.sim.memory_factor, expected)
    for kw in ({}, {"predictor": "oracle"}, {"predictor": "frenzy", "memory_margin": 0.2}):
        env = make_env(cluster, jobs, memory_truth="residual", **kw)
        env.reset(seed=3)
        assert np.array_equal(env.sim.memory_factor, expected)
        rng = np.random.default_rng(0)
        for _ in range(30):  # whatever the policy does, the factors stay
            _, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            assert np.array_equal(env.sim.memory_factor, expected)
            if done:
                break
        env.reset(seed=3)
        assert np.array_equal(env.sim.memory_factor, expected)


def test_config_errors_name_field_and_value(make_env, make_job):
    with pytest.raises(ConfigError, match="memory_truth.*'measured'"):
        SimConfig(memory_truth="measured")
    for bad in (1.0, -0.1, True, "0.1", float("nan")):
        with pytest.raises(ConfigError, match="memory_margin"):
            SimConfig(memory_margin=bad)
    with pytest.raises(ConfigError, match="memory_truth"):
        make_env("frenzy-testbed", [make_job(0)], memory_truth="oracle")


@pytest.fixture
def forced_factor(monkeypatch):
    """Every job's true peak is 1.10 x the extended estimate (a one-entry residual table)."""
    monkeypatch.setattr(memory_truth, "residual_table", lambda: (np.array([1.10]), np.array([1.0])))


def _one_job_sim(make_job, make_workload, **cfg) -> ClusterSimulator:
    # gpt2-medium, batch 8, seq 1024 on V100-16GB: the fastest layout the extended estimate admits on 1 GPU
    # (the largest micro-batch that fits) is within 10% of the GPU's memory
    wl = make_workload(make_job(0, 0.0, 100.0, model="gpt2-medium"))
    return ClusterSimulator(ClusterSpec.homogeneous("V100-16GB", 1, 4), wl, SimConfig(memory_truth="residual", **cfg))


def test_extended_ooms_where_the_truth_is_larger_and_counts_lost_gpu_hours(forced_factor, make_job, make_workload):
    sim = _one_job_sim(make_job, make_workload)
    assert sim.memory_factor.tolist() == [1.10]
    plan = sim.plan_index("V100-16GB", 1)
    assert sim.pred_ok[0, plan] and not sim.true_ok[0, plan]
    held = sim.startup_seconds(0, plan) + float(sim.iter_time[0, plan]) + sim.config.teardown_time
    assert sim.start(0, plan)
    sim.advance()
    assert [a.outcome for a in sim.attempts] == ["oom"] and sim.records[0].oom_failures == 1
    assert sim.attempts[0].end_time == pytest.approx(held, abs=1e-9)
    m = sim.metrics()
    assert m["ooms"] == 1 and m["lost_gpu_hours"] == pytest.approx(held / 3600.0)
    # the same job under env v4's truth: the extended estimate is the truth, the plan fits
    v4 = ClusterSimulator(sim.cluster, sim.workload, SimConfig(memory_truth="estimate"))
    assert v4.pred_ok[0, plan] and v4.true_ok[0, plan]


@pytest.mark.parametrize("cfg", [{"predictor": "oracle"}, {"memory_margin": 0.1}])
def test_oracle_and_a_margin_never_oom(forced_factor, make_job, make_workload, cfg):
    sim = _one_job_sim(make_job, make_workload, **cfg)
    plan = sim.plan_index("V100-16GB", 1)
    assert sim.pred_ok[0][sim.plan_present].all()  # a smaller micro-batch still fits every plan (of the grid) ...
    assert sim.true_ok[0][sim.pred_ok[0]].all()  # ... and what the masks admit truly fits
    assert sim.start(0, plan)
    while not sim.done:
        sim.advance()
    assert sim.status[0] == DONE and sim.metrics()["ooms"] == 0 and sim.metrics()["lost_gpu_hours"] == 0.0
    assert [a.outcome for a in sim.attempts] == ["finished"]
