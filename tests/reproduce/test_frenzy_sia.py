"""The frenzy_sia scenario's workloads at one offered load by the env's own measure, and a run's env keywords."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from frenzy_env.cli import main
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import episode_offered_load
from frenzy_env.reproduce.generators import FRENZY_SIA_CLUSTER, FRENZY_SIA_LOAD, philly_generator
from frenzy_env.reproduce.runner import ReproduceConfig, Runner, run_reproduce
from frenzy_env.reproduce.scenarios.frenzy_sia import frenzy_sia_workloads
from frenzy_env.workload import offered_load

#: the v6 world keywords (issue 53): the run passes them to every env
V6_WORLD = {"resize_cooldown": 60, "one_action_per_instant": True, "memory_truth": "published",
            "efficiency": "per_type"}
# a Philly-format trace: one job on day 0, then ten from day 40 (durations s, GPUs, gaps s before each)
DURATIONS = (3600, 7200, 1800, 14400, 3600, 600, 36000, 5400, 900, 7200)
GPUS = (1, 2, 1, 4, 8, 1, 2, 1, 16, 4)
GAPS = (0, 1800, 3600, 600, 1200, 2400, 300, 4800, 900, 1500)


@pytest.fixture
def philly_dir(tmp_path):
    """A data folder whose traces/philly/philly.csv is the hand-made trace above."""
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-01 00:00:00,600.0,1,600.0,c1"]
    t = dt.datetime(2017, 11, 10)  # day 40 of the trace
    for d, g, gap in zip(DURATIONS, GPUS, GAPS):
        t += dt.timedelta(seconds=gap)
        rows.append(f"{t:%Y-%m-%d %H:%M:%S},{float(d)},{g},{float(d * g)},c1")
    path = tmp_path / "traces" / "philly" / "philly.csv"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(rows) + "\n")
    return tmp_path


def test_philly_window_keeps_its_recorded_order_and_is_stretched_to_the_load(philly_dir):
    gen, raw = philly_generator(philly_dir / "traces" / "philly" / "philly.csv", 8)
    # recorded load of the 8-job window: GPU-seconds 184,200 over 96 GPUs x its span of 14,700 s
    assert raw == pytest.approx(184_200 / (96 * 14_700))
    recorded = np.cumsum(GAPS[:8])  # seconds after the window's first job
    for seed in range(3):
        wl = gen.generate(seed)
        assert [j.requested_gpus for j in wl.jobs] == list(GPUS[:8])
        submit = np.array([j.submit_time for j in wl.jobs])
        # one stretch factor per seed: every gap scaled alike
        assert submit[0] == 0.0
        np.testing.assert_allclose(submit[1:] / recorded[1:], submit[1] / recorded[1], rtol=1e-9)
        assert offered_load(wl, FRENZY_SIA_CLUSTER) == pytest.approx(FRENZY_SIA_LOAD, rel=1e-9)


def test_every_workload_compared_is_at_one_offered_load(philly_dir):
    logged: list[str] = []
    workloads = frenzy_sia_workloads(ReproduceConfig(jobs=8, data_dir=philly_dir), log=logged.append)
    assert [key for key, _, _ in workloads] == ["philly-window-8", "itp-default-8"] and not logged
    assert FRENZY_SIA_LOAD == 0.8  # the shipped ITP week's (itp-default)
    for key, gen, _ in workloads:
        for seed in range(3):
            wl = gen.generate(seed)
            assert len(wl.jobs) == 8
            assert offered_load(wl, FRENZY_SIA_CLUSTER) == pytest.approx(FRENZY_SIA_LOAD, rel=1e-9), (key, seed)
    assert "offered load 0.8 on frenzy-testbed" in workloads[0][2]
    # without the trace only the ITP week is run, and the log says why
    only = frenzy_sia_workloads(ReproduceConfig(jobs=8, data_dir=None), log=logged.append)
    assert [key for key, _, _ in only] == ["itp-default-8"] and "Philly trace not found" in logged[0]


@pytest.mark.parametrize("efficiency", ["microbatch", "per_type"])
def test_the_env_measures_the_load_it_was_stretched_to(philly_dir, efficiency):
    """The env binds a generator to its speed model, so the episode's own measure gives the stated load under
    either efficiency option."""
    for _, gen, _ in frenzy_sia_workloads(ReproduceConfig(jobs=8, data_dir=philly_dir)):
        env = FrenzyEnv(cluster=FRENZY_SIA_CLUSTER, workload=gen, efficiency=efficiency)
        for seed in (0, 1):
            env.reset(seed=seed)
            assert episode_offered_load(env.unwrapped.sim) == pytest.approx(FRENZY_SIA_LOAD, rel=1e-9)


def test_run_env_keywords_reach_every_env():
    cfg = ReproduceConfig(env_kwargs=V6_WORLD)
    assert cfg.env_kwargs == tuple(sorted(V6_WORLD.items()))  # kept as sorted pairs
    runner = Runner(cfg, log=lambda _msg: None)
    sim_cfg = runner.env("w", "frenzy-testbed", "synthetic-small").unwrapped.sim.config
    assert (sim_cfg.resize_cooldown, sim_cfg.one_action_per_instant) == (60, True)
    assert (sim_cfg.memory_truth, sim_cfg.efficiency) == ("published", "per_type")
    # a scenario's own keyword of that name wins
    own = runner.env("w", "frenzy-testbed", "synthetic-small", resize_cooldown=30).unwrapped.sim.config
    assert own.resize_cooldown == 30 and own.memory_truth == "published"
    # the default leaves every env as FrenzyEnv makes it
    default = Runner(ReproduceConfig(), log=lambda _msg: None).env("w", "frenzy-testbed", "synthetic-small")
    plain = FrenzyEnv(cluster="frenzy-testbed", workload="synthetic-small", queue_slots="all", running_slots="all")
    assert default.unwrapped.sim.config == plain.unwrapped.sim.config
    assert ReproduceConfig(env_kwargs=[("b", 1), ("a", 2)]).env_kwargs == (("a", 2), ("b", 1))
    for key in ("cluster", "workload"):
        with pytest.raises(ConfigError, match=key):
            ReproduceConfig(env_kwargs={key: "x"})


def test_cli_env_keywords_are_checked_before_any_episode(tmp_path):
    out = tmp_path / "out"
    code = main(["reproduce", "--scenarios", "frenzy_sia", "--jobs", "4", "--seeds", "1", "--env", "bogus=1",
                 "--out", str(out)])
    assert code != 0 and not (out / "claims.md").exists()
    code = main(["reproduce", "--scenarios", "frenzy_sia", "--jobs", "4", "--seeds", "1", "--env",
                 "resize_cooldown=-5", "--out", str(out)])
    assert code != 0 and not (out / "claims.md").exists()


def test_tiny_frenzy_sia_run_in_the_v6_world(philly_dir):
    cfg = ReproduceConfig(quick=True, seeds=1, jobs=5, scenarios=("frenzy_sia",), data_dir=philly_dir,
                          progress=False, episode_budget_s=60, env_kwargs=V6_WORLD)
    result = run_reproduce(cfg, log=lambda _msg: None)
    ran = {(e["workload"], e["policy"]) for e in result.episodes}
    for wl in ("philly-window-5", "itp-default-5"):
        assert {(wl, p) for p in ("sia[requested]", "sia", "fifo", "frenzy")} <= ran
    # every episode at the stated load, measured by the env under its own (per-type) speed model
    assert all(e["offered_load_ratio"] == pytest.approx(FRENZY_SIA_LOAD, rel=1e-9) for e in result.episodes)
    headline = [r for r in result.rows if r.claim == "Frenzy avg JCT lower than Sia (requested GPU counts)"]
    assert [r.scenario for r in headline] == ["philly-window-5", "itp-default-5"]
    assert all(r.n == 1 and "rigid" in r.reason for r in headline)
