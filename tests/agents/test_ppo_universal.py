"""agents/ppo/ under ``interface="universal"`` (env v6's default): one network for every cluster (the cluster
layout, env v5's, ``interface="cluster"``: here where a test compares the two, and test_ppo.py)."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch as th

from agents.ppo import (
    PPOConfig,
    SlotPlanPolicy,
    SlotSetExtractor,
    TrainConfig,
    load_policy,
    policy_kwargs_for,
    train,
)
from agents.ppo.distribution import ILLEGAL_LOGP, action_types, factored_log_probs
from agents.ppo.network import grid_plans
from agents.ppo.rollout import OBS_KEYS, UNIVERSAL_OBS_KEYS, obs_keys
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.observation import UNIVERSAL_OBS_VERSION
from frenzy_env.versions import ENV_VERSION

th.set_num_threads(1)

#: every cluster preset of at most 4 GPU types (all of them: tests/observation/test_universal.py)
PRESETS = ("frenzy-testbed", "pai-2020", "doubling-64", "large-1024", "cloud-mixed")


def _tensor(obs: dict[str, np.ndarray]) -> dict[str, th.Tensor]:
    return {k: th.as_tensor(v, dtype=th.float32)[None] for k, v in obs.items()}


def _play_random(env: FrenzyEnv, steps: int, seed: int = 0, start_share: float = 0.7) -> dict[str, np.ndarray]:
    """The observation after ``steps`` masked-random decisions (starts and resizes with ``start_share``)."""
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        legal = np.flatnonzero(env.action_masks()[1:]) + 1
        a = int(rng.choice(legal)) if legal.size and rng.random() < start_share else 0
        obs, _, term, _, _ = env.step(a)
        assert not term, "the test needs an episode still running"
    return obs


def test_a_universal_model_trains_on_one_cluster_and_plays_on_every_preset(tmp_path):
    """A tiny universal run on frenzy-testbed (warm start, type_demand and critic_pool included) saves a model that
    loads and plays legal actions on all five presets; the cluster layout's spaces refuse it."""
    cfg = TrainConfig(
        timesteps=64, n_envs=2, jobs_range=(4, 6), validation_jobs=4, validation_episodes=1, validation_samples=1,
        train_workloads=2, eval_freq=64, checkpoint_minutes=60.0, threads=1, out_dir=str(tmp_path / "u"),
        progress=False, seed=5, interface="universal", workload="synthetic-small",
        ppo=PPOConfig(n_steps=32, batch_size=64, bc_episodes=1, bc_epochs=1, type_demand=True, critic_pool=True),
    )
    out = train(cfg)
    record = json.loads((out / "config.json").read_text())
    assert record["interface"] == "universal" and record["universal_obs_version"] == UNIVERSAL_OBS_VERSION
    assert TrainConfig.from_dict(record).interface == "universal"
    kinds = set()
    for name in PRESETS:
        env = FrenzyEnv(cluster=name, workload="synthetic-small", interface="universal", max_steps=40)
        policy = load_policy(env, out / "model.zip")
        result = run_episode(env, policy, seed=1000)
        assert result.metrics["invalid_actions"] == 0, name  # absent slots are masked: never chosen
        assert len(result.attempts) > 0, name  # it started jobs there
        kinds.add(env.sim.num_types)
    assert kinds == {1, 3, 4}  # one, three and four GPU types, one network
    with pytest.raises(ConfigError, match="observation shapes"):
        load_policy(FrenzyEnv(workload="synthetic-small", interface="cluster"), out / "model.zip")
    # a model of another universal layout version is refused (a copy whose record says version 0)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(out / "model.zip", other / "model.zip")
    (other / "config.json").write_text(json.dumps({**record, "universal_obs_version": 0}))
    with pytest.raises(ConfigError, match="universal layout version 0"):
        load_policy(FrenzyEnv(workload="synthetic-small", interface="universal"), other / "model.zip")


def test_the_network_holds_nothing_of_the_cluster():
    """Under the universal layout the policy's keyword arguments (its plan types and counts included) are the same
    on every preset: the fixed grid's; under the cluster layout (``interface="cluster"``) they are the cluster's."""
    kwargs = [policy_kwargs_for(FrenzyEnv(cluster=c, workload="synthetic-small", interface="universal"), PPOConfig())
              for c in PRESETS]
    assert all(k == kwargs[0] for k in kwargs)
    plan_type, plan_count = grid_plans((4, 7))
    fe = kwargs[0]["features_extractor_kwargs"]
    assert fe["plan_type"] == plan_type == [t for t in range(4) for _ in range(7)]
    assert fe["plan_count"] == plan_count == [1, 2, 4, 8, 16, 32, 64] * 4
    cluster = policy_kwargs_for(FrenzyEnv(workload="synthetic-small", interface="cluster"),
                                PPOConfig())["features_extractor_kwargs"]
    assert len(cluster["plan_type"]) == 18 and cluster["plan_count"][:6] == [1, 2, 4, 8, 16, 32]  # frenzy-testbed


def test_obs_keys_follow_the_layout():
    """The universal layout's keys (the default's, env v6's) and the cluster layout's (``interface="cluster"``)."""
    universal = FrenzyEnv(workload="synthetic-small", interface="universal")
    cluster = FrenzyEnv(workload="synthetic-small", interface="cluster")
    assert obs_keys(universal.observation_space.spaces) == UNIVERSAL_OBS_KEYS
    assert obs_keys(FrenzyEnv(workload="synthetic-small").observation_space.spaces) == UNIVERSAL_OBS_KEYS
    assert obs_keys(cluster.reset(seed=0)[0]) == OBS_KEYS == ("queue", "running", "gpus", "nodes", "globals")
    assert set(UNIVERSAL_OBS_KEYS) == set(universal.observation_space.spaces) - {"action_mask"}


def test_held_type_slot_is_the_simulators_type():
    """pai-2020 has V100-32GB and V100-16GB (the same speed) and T4-16GB and P100-16GB (the same memory): the type
    slot read from a running row's speed and memory is the type of the job's plan."""
    env = FrenzyEnv(cluster="pai-2020", workload="synthetic-small", interface="universal")
    obs = _play_random(env, 60, seed=2, start_share=1.0)
    running = th.as_tensor(obs["running"]).reshape(1, *env.running_shape)
    gpus = th.as_tensor(obs["gpus"]).reshape(1, *env.gpus_shape)
    slots = SlotSetExtractor.held_type_slot(running, gpus)[0]
    jobs = env.visible_running
    truth = [int(env.view.plan_type[env.view.running[int(j)].plan]) for j in jobs]
    assert len(truth) >= 4 and len(set(truth)) >= 3, "the test needs jobs on several types"
    assert slots[: len(jobs)].tolist() == truth


def test_type_demand_reads_the_same_in_both_layouts():
    """The same decisions on frenzy-testbed in both layouts (mapped by GPU type and count): type_demand's per-type
    features are equal on the cluster's types (0 on the absent type slot) and its per-plan demand on each slot."""
    envs = {i: FrenzyEnv(workload="synthetic-small", interface=i) for i in ("cluster", "universal")}
    ext = {}
    for i, env in envs.items():
        th.manual_seed(0)
        ext[i] = SlotPlanPolicy(env.observation_space, env.action_space, lambda _: 1e-3,
                                **policy_kwargs_for(env, PPOConfig(type_demand=True))).features_extractor
    obs = {i: e.reset(seed=4)[0] for i, e in envs.items()}
    cl, un = envs["cluster"], envs["universal"]
    to_universal = np.array([un.sim.plan_index(cl.sim.gpu_types[t], int(c))
                             for t, c in zip(cl.view.plan_type, cl.view.plan_count)])
    rng = np.random.default_rng(4)
    for _ in range(50):
        legal = np.flatnonzero(cl.action_masks()[1:]) + 1
        a = int(rng.choice(legal)) if legal.size and rng.random() < 0.6 else 0
        if a >= cl.first_resize:
            r, p = divmod(a - cl.first_resize, cl.num_plans)
            b = un.first_resize + r * un.num_plans + int(to_universal[p])
        elif a >= cl.first_start:
            k, p = divmod(a - cl.first_start, cl.num_plans)
            b = un.first_start + k * un.num_plans + int(to_universal[p])
        else:
            b = a
        assert un.action_masks()[b]
        obs = {"cluster": cl.step(a)[0], "universal": un.step(b)[0]}
    assert obs["universal"]["running"].reshape(un.running_shape)[:, 0].sum() >= 3
    assert obs["universal"]["queue"].reshape(un.queue_shape)[:, 0].sum() >= 1
    t = cl.sim.num_types
    with th.no_grad():
        e = {i: ext[i].encode(_tensor(obs[i])) for i in envs}
        dem = {i: ext[i].type_demand_features(
            _tensor(obs[i])["queue"].reshape(1, *envs[i].queue_shape),
            _tensor(obs[i])["running"].reshape(1, *envs[i].running_shape),
            None if i == "cluster" else _tensor(obs[i])["gpus"].reshape(1, *envs[i].gpus_shape),
        )[0] for i in envs}
    d_cl, d_un = dem["cluster"].reshape(4, t), dem["universal"].reshape(4, 4)
    assert d_cl.abs().sum() > 0
    th.testing.assert_close(d_un[:, :t], d_cl)
    assert not d_un[:, t:].any()
    th.testing.assert_close(e["universal"]["plan_demand"][0, to_universal], e["cluster"]["plan_demand"][0])
    th.testing.assert_close(e["universal"]["plan_free"][0, to_universal], e["cluster"]["plan_free"][0])


def test_a_row_without_a_legal_action_is_wait_only():
    """factored_log_probs on a row whose mask is all False (no start or resize slot present, as absent slots give)
    puts all probability on "wait"; a row with legal starts is unaffected by it."""
    types = action_types(6, 2, 4)
    mask = th.tensor([[False] * 6, [True, False, True, False, False, True]])
    logp, type_logp, ent = factored_log_probs(th.randn(2, 6), th.zeros(2, 4), mask, types, floor=0.04)
    assert logp[0, 0] == 0.0 and (logp[0, 1:] == ILLEGAL_LOGP).all() and ent[0] == 0.0
    assert th.isfinite(logp).all() and th.isclose(th.exp(logp[1]).sum(), th.tensor(1.0))


def test_train_config_interface():
    """The default is the universal layout (env v6's); a record without the field trained on the cluster one."""
    assert TrainConfig().interface == "universal"
    assert TrainConfig(interface="cluster").interface == "cluster"
    with pytest.raises(ConfigError, match="interface"):
        TrainConfig(interface="grid")
    assert TrainConfig.from_dict({"cluster": "pai-2020"}).interface == "cluster"  # records older than the field


CURRENT_IDS = sorted(k for k in gym.registry if k.startswith("frenzy/") and k.endswith(f"-{ENV_VERSION}"))


def test_shipped_model_is_picked_by_the_envs_layout():
    from agents.ppo import DEFAULT_MODEL_PATH, UNIVERSAL_MODEL_PATH, shipped_model_path

    assert shipped_model_path() == UNIVERSAL_MODEL_PATH == shipped_model_path(interface="universal")
    assert shipped_model_path(interface="cluster") == DEFAULT_MODEL_PATH
    assert shipped_model_path(gym.make(f"frenzy/HeteroClusterSmall-{ENV_VERSION}")) == UNIVERSAL_MODEL_PATH
    assert shipped_model_path(gym.make("frenzy/HeteroClusterSmall-v5")) == DEFAULT_MODEL_PATH
    record = json.loads(UNIVERSAL_MODEL_PATH.with_suffix(".json").read_text())
    assert record["agent"] == "ppo" and record["env_version"] == ENV_VERSION
    assert record["universal_obs_version"] == UNIVERSAL_OBS_VERSION
    assert UNIVERSAL_MODEL_PATH.stat().st_size < 5_000_000


@pytest.mark.parametrize("env_id", CURRENT_IDS)
def test_shipped_universal_model_plays_every_registered_id(env_id):
    """One model file for every id of this version (every cluster preset): ``load_policy(env)`` picks it, and its
    sampled actions are legal for 300 decisions of the id's own workload."""
    from agents.ppo import UNIVERSAL_MODEL_PATH

    env = gym.make(env_id)
    policy = load_policy(env)
    assert policy.path == UNIVERSAL_MODEL_PATH
    obs, _ = env.reset(seed=1000)
    policy.reset()
    for _ in range(300):
        action, _ = policy.predict(obs, action_masks=obs["action_mask"].astype(bool))
        assert obs["action_mask"][int(action)], env_id
        obs, _, term, trunc, _ = env.step(int(action))
        if term or trunc:
            break
