"""Training over several worlds (``TrainConfig.worlds``): clusters, stop costs and any env keyword per env, each
world with its own workload pool and reference runs."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch as th

from agents.ppo import PPOConfig, TrainConfig, train
from agents.ppo.config import WORLD_SEED_STRIDE
from agents.ppo.reference_reward import ReferenceCache, WorldReferenceCache, run_reference
from agents.ppo.workloads import make_env, training_generator
from frenzy_env.errors import ConfigError
from frenzy_env.simulator import SimConfig
from frenzy_env.simulator.config import stop_cost_keywords
from frenzy_env.versions import ENV_VERSION

th.set_num_threads(1)

WORLDS = ({"cluster": "frenzy-testbed"}, {"cluster": "doubling-64", "cost_scale": 5.0, "checkpoint_interval": 600.0})


def _cfg(tmp_path, **kw) -> TrainConfig:
    base = dict(
        timesteps=256, n_envs=4, jobs_range=(4, 6), validation_jobs=4, validation_episodes=1, validation_samples=1,
        validation_windows=0, train_workloads=3, eval_freq=10**6, checkpoint_minutes=60.0, threads=1,
        out_dir=str(tmp_path / "w"), progress=False, seed=3, worlds=WORLDS,
        ppo=PPOConfig(n_steps=32, batch_size=64, bc_episodes=0),
    )
    return TrainConfig(**{**base, **kw})


def test_stop_cost_keywords_scale_every_start_and_stop():
    d = SimConfig()
    k = stop_cost_keywords(5.0)
    assert k == {"startup_time": 5 * d.startup_time, "restart_overhead": 5 * d.restart_overhead,
                 "load_bandwidth": d.load_bandwidth / 5, "checkpoint_bandwidth": d.checkpoint_bandwidth / 5}
    for bad in (0, -1.0, float("nan"), True, "5"):
        with pytest.raises(ConfigError, match="cost_scale"):
            stop_cost_keywords(bad)


def test_world_keywords_and_their_errors(tmp_path):
    cfg = _cfg(tmp_path)
    assert cfg.num_worlds == 2 and TrainConfig().num_worlds == 1
    assert TrainConfig().world_keywords(0) == {"cluster": "frenzy-testbed"}
    assert cfg.world_keywords(0) == {"cluster": "frenzy-testbed"}
    w1 = cfg.world_keywords(1)
    assert w1["cluster"] == "doubling-64" and w1["checkpoint_interval"] == 600.0
    assert w1["startup_time"] == 5 * SimConfig().startup_time and "cost_scale" not in w1
    back = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back.worlds == cfg.worlds and back.world_keywords(1) == w1
    with pytest.raises(ConfigError, match="interface='universal'"):
        _cfg(tmp_path, interface="cluster")
    with pytest.raises(ConfigError, match="may not set 'workload'"):
        _cfg(tmp_path, worlds=({"workload": "synthetic"},))
    with pytest.raises(ConfigError, match=r"worlds\[0\] must be a dict"):
        _cfg(tmp_path, worlds=(["doubling-64"],))
    with pytest.raises(ConfigError, match="at least as many envs"):
        _cfg(tmp_path, n_envs=1)
    with pytest.raises(ConfigError, match="both cost_scale and 'startup_time'"):
        _cfg(tmp_path, worlds=({"cost_scale": 2.0, "startup_time": 1.0},)).world_keywords(0)


def test_world_reference_cache_plays_each_seed_in_its_world(tmp_path):
    """Seed ``w * WORLD_SEED_STRIDE + k`` is played by world w's reference env: the same curve as playing the
    reference there directly, and world 1's (costs x5, another cluster) differs from world 0's."""
    cfg = _cfg(tmp_path, workload="synthetic-small")
    gens = [training_generator(cfg, w) for w in range(2)]
    caches = [ReferenceCache(lambda w=w: make_env(cfg, gens[w], world=w), "doubling") for w in range(2)]
    cache = WorldReferenceCache(caches)
    seed1 = WORLD_SEED_STRIDE + 2
    curve = cache.get(seed1)
    direct = run_reference(make_env(cfg, gens[1], world=1), "doubling", seed1)
    assert np.array_equal(curve.cost, direct.cost) and cache.runs == 1 and caches[1].runs == 1
    other = run_reference(make_env(cfg, gens[0], world=0), "doubling", seed1)
    assert not np.array_equal(other.cost, direct.cost)
    with pytest.raises(ConfigError, match="names world 2"):
        cache.get(2 * WORLD_SEED_STRIDE)


def test_training_over_two_worlds_steps_each_env_in_its_world_and_resumes(tmp_path):
    cfg = _cfg(tmp_path)
    out = train(cfg, stop_after_updates=2)
    state = th.load(out / "checkpoint.pt", weights_only=False)
    envs = pickle.loads(state["envs"])
    assert [e.cluster.name for e in envs] == ["frenzy-testbed", "doubling-64"] * 2
    for i, e in enumerate(envs):
        scaled = i % 2 == 1
        assert e.sim.config.startup_time == SimConfig().startup_time * (5 if scaled else 1)
        assert e.sim.config.checkpoint_interval == (600.0 if scaled else SimConfig().checkpoint_interval)
        assert e.episode_seed // WORLD_SEED_STRIDE == i % 2  # each world draws from its own pool
        assert e.episode_seed % WORLD_SEED_STRIDE < cfg.train_workloads
    lines = [json.loads(x) for x in (out / "updates.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and lines[-1]["reference_runs"] >= 4
    train(None, resume=out)  # the resumed run rebuilds each env's reference in its world
    lines = [json.loads(x) for x in (out / "updates.jsonl").read_text().splitlines()]
    assert lines[-1]["decisions"] == cfg.timesteps


def test_mixture_generates_at_wait_loads_and_lowers_a_load_fifo_cannot_reach():
    from agents.ppo.workloads import MixtureGenerator
    from frenzy_env.world.cluster import ClusterSpec

    cluster = ClusterSpec.preset("frenzy-testbed")
    w = MixtureGenerator(cluster=cluster, load_mode="wait", load_range=(0.5, 0.5), jobs_range=(150, 150)).generate(1)
    assert "load mode wait" in w.source and len(w.jobs) == 150
    # 0.99 of 12 jobs cannot wait under FIFO: the load is lowered until it can (or made fluid), never an error
    hard = MixtureGenerator(cluster=cluster, load_mode="wait", load_range=(0.99, 0.99), jobs_range=(12, 12))
    assert len(hard.generate(2).jobs) == 12
    fluid = MixtureGenerator(cluster=cluster, load_range=(0.5, 0.5), jobs_range=(60, 60)).generate(1)
    assert "load mode" not in fluid.source
    with pytest.raises(ConfigError, match="load_mode"):
        TrainConfig(load_mode="queue")


@pytest.mark.slow
def test_profile_training_script_accounts_for_the_loop():
    """scripts/profile_training.py (run apart: it wraps library functions) prints each part; the rollouts and the
    updates make up the loop, and every inner part is at most its outer one."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "scripts/profile_training.py", "--updates", "2", "--n-steps", "32"],
                         cwd=root, capture_output=True, text=True, timeout=600, check=True).stdout
    row = re.compile(r"^(\s*[a-zA-Z][^\d\n]+?)\s+([\d.]+)\s+([\d.]+)%$", re.M)
    shares = {m[1].strip(): (float(m[2]), float(m[3])) for m in row.finditer(out)}
    assert abs(shares["rollouts"][1] + shares["updates"][1] - 100.0) < 0.2, out
    for part in ("env steps (observation included)", "network forward (rollout)"):
        assert 0 < shares[part][0] <= shares["rollouts"][0], out
    for part in ("network forward (update)", "backward passes"):
        assert 0 < shares[part][0] <= shares["updates"][0], out
    assert "decisions/s" in out


@pytest.mark.slow
def test_standard_learner_script_writes_its_curve(tmp_path):
    """scripts/standard_learner.py: stock MaskablePPO with ActionMasker on a registered id, a curve row per
    evaluation against FIFO on the same seeds, the model, a plot and a summary."""
    import csv
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "scripts/standard_learner.py", "--minutes", "0.05", "--eval-every-min", "0.02",
                    "--eval-seeds", "1", "--n-envs", "2", "--n-steps", "64", "--out", str(tmp_path)],
                   cwd=root, capture_output=True, text=True, timeout=600, check=True)
    rows = list(csv.DictReader((tmp_path / "curve.csv").read_text().splitlines()))
    assert len(rows) >= 2 and int(rows[-1]["decisions"]) > int(rows[0]["decisions"])
    assert len({r["fifo_avg_jct_h"] for r in rows}) == 1  # FIFO played once, the same seeds every time
    for r in rows:
        assert abs(float(r["ratio_to_fifo"]) - float(r["ppo_avg_jct_h"]) / float(r["fifo_avg_jct_h"])) < 1e-3
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_id"] == f"frenzy/HeteroClusterSmall-{ENV_VERSION}"
    assert (tmp_path / "model.zip").is_file() and (tmp_path / "curve.png").is_file()
