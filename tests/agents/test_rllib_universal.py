"""The RLlib glue (agents/rllib/) under ``interface="universal"``: the env creators and the masked module read the
layout (``plans``, per-type ``gpus``, no ``nodes``) from the env's spaces, a checkpoint of one cluster plays on
another (the check compares spaces, not clusters), and one of other spaces is still refused. Skipped without
Ray installed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from agents.rllib import (  # noqa: E402
    MASK_KEY,
    OBSERVATIONS_KEY,
    RLlibTrainConfig,
    flat_feature_space,
    load_rllib_policy,
    make_env,
    make_rllib_env,
)
from agents.rllib.loading import _check_env_spaces  # noqa: E402
from frenzy_env.env import FrenzyEnv  # noqa: E402
from frenzy_env.errors import ConfigError  # noqa: E402
from frenzy_env.evaluation.episodes import run_episode  # noqa: E402
from frenzy_env.versions import ENV_VERSION  # noqa: E402
from frenzy_env.workload import make_generator  # noqa: E402

UNIVERSAL = {"interface": "universal"}  # env v6's default, named where a test is about it
CLUSTER = {"interface": "cluster"}  # env v5's layout
SMALL = {"queue_slots": 8, "running_slots": 8}  # smaller spaces: a smaller module to build and save


def _env(cluster: str, jobs: int = 6, **kwargs) -> FrenzyEnv:
    return FrenzyEnv(cluster=cluster, workload=make_generator("synthetic-small", num_jobs=jobs), **SMALL, **kwargs)


def _module(env: gym.Env):
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from agents.rllib import MaskedPPOTorchRLModule

    torch.manual_seed(0)
    return RLModuleSpec(
        module_class=MaskedPPOTorchRLModule, observation_space=env.observation_space,
        action_space=env.action_space, model_config={"fcnet_hiddens": [16]},
    ).build()  # fmt: skip


@pytest.fixture(scope="module")
def universal_checkpoint(tmp_path_factory):
    """An untrained masked module of frenzy-testbed under the universal layout, saved as a checkpoint's module
    folder (what load_rllib_policy restores)."""
    path = tmp_path_factory.mktemp("rllib_universal") / "default_policy"
    _module(_env("frenzy-testbed", **UNIVERSAL)).save_to_path(str(path))
    return path


def test_config_interface_reaches_the_env_and_defaults_to_the_env_s():
    assert "interface" not in RLlibTrainConfig().env_config()  # the default config makes the env it made before
    assert RLlibTrainConfig().interface is None
    cfg = RLlibTrainConfig(interface="universal")
    assert cfg.env_config()["interface"] == "universal"
    assert RLlibTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    env = make_env(dict(cfg.env_config(), queue_slots=4, running_slots=4))
    assert "plans" in env.observation_space.spaces and "nodes" not in env.observation_space.spaces
    with pytest.raises(ConfigError, match=r"interface must be one of cluster, universal or None, got 'grid'"):
        RLlibTrainConfig(interface="grid")


def test_env_creators_have_equal_spaces_on_every_cluster_under_universal():
    made = [make_env(dict(cluster=c, **SMALL, **UNIVERSAL)) for c in ("frenzy-testbed", "doubling-64", "pai-2020")]
    assert made[0].observation_space == made[1].observation_space == made[2].observation_space
    assert made[0].action_space == made[1].action_space == made[2].action_space
    assert list(made[0].observation_space.spaces) == [MASK_KEY, "globals", "gpus", "plans", "queue", "running"]
    ids = (f"frenzy/HeteroClusterSmall-{ENV_VERSION}", f"frenzy/Doubling64-{ENV_VERSION}")
    wrapped = [make_rllib_env(i, dict(SMALL, **UNIVERSAL)) for i in ids]
    assert wrapped[0].observation_space == wrapped[1].observation_space
    raw, _ = made[0].reset(seed=0)
    obs = wrapped[0].observation(raw)
    keys = ["globals", "gpus", "plans", "queue", "running"]  # every float entry, in key order
    assert np.array_equal(obs[OBSERVATIONS_KEY], np.concatenate([raw[k] for k in keys]))
    assert wrapped[0].observation_space[OBSERVATIONS_KEY] == flat_feature_space(made[0].observation_space)
    # the cluster layout (env v5's, interface="cluster") still differs between clusters (the reason its checkpoints
    # are refused elsewhere)
    assert make_env(dict(cluster="frenzy-testbed", **SMALL, **CLUSTER)).observation_space != make_env(
        dict(cluster="doubling-64", **SMALL, **CLUSTER)).observation_space


def test_masked_module_reads_the_universal_entries():
    from ray.rllib.core.columns import Columns

    env = _env("frenzy-testbed", **UNIVERSAL)
    module = _module(env)
    assert module.feature_keys == ("globals", "gpus", "plans", "queue", "running")
    assert module.observation_space == env.observation_space
    obs, _ = env.reset(seed=0)
    k = int(np.flatnonzero(obs[MASK_KEY])[-1])
    assert k >= env.first_start  # a start action, not a wait
    only_k = dict(obs)
    only_k[MASK_KEY] = np.zeros_like(obs[MASK_KEY])
    only_k[MASK_KEY][k] = 1
    batch = {Columns.OBS: {key: torch.as_tensor(np.repeat(v[None], 32, axis=0)) for key, v in only_k.items()}}
    with torch.no_grad():
        logits = module.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS]
    assert logits.shape == (32, env.action_space.n) and torch.all(logits.argmax(-1) == k)


@pytest.mark.parametrize("cluster", ["frenzy-testbed", "doubling-64"])
def test_universal_checkpoint_plays_on_another_cluster(universal_checkpoint, cluster):
    env = _env(cluster, **UNIVERSAL)
    policy = load_rllib_policy(env, universal_checkpoint)  # trained (built) on frenzy-testbed
    result = run_episode(env, policy, seed=1, max_steps=300)
    assert result.metrics["invalid_actions"] == 0 and result.metrics["jobs"] == 6
    assert result.metrics["finished"] == 6 or result.metrics["steps"] == 300


def test_universal_checkpoint_is_refused_by_the_cluster_layout(universal_checkpoint):
    """On an env of the cluster layout (``interface="cluster"``, env v5's)."""
    with pytest.raises(ConfigError) as info:
        load_rllib_policy(_env("frenzy-testbed", **CLUSTER), universal_checkpoint)
    message = str(info.value)
    assert "observation 'plans' (140,) vs missing" in message and "observation 'nodes' missing vs (16,)" in message
    assert "action space Discrete(452) vs Discrete(292)" in message
    assert "interface 'cluster'" in message and "cluster 'frenzy-testbed'" in message


def test_space_check_compares_bounds_not_only_shapes():
    env = _env("frenzy-testbed", **UNIVERSAL)
    spaces = dict(env.observation_space.spaces)
    same = SimpleNamespace(observation_space=gym.spaces.Dict(spaces), action_space=env.action_space)
    _check_env_spaces(same, env, "ckpt", Path("ckpt"))  # equal spaces: accepted
    spaces["globals"] = gym.spaces.Box(0.0, 1.0, shape=spaces["globals"].shape, dtype=np.float32)  # other bounds
    module = SimpleNamespace(observation_space=gym.spaces.Dict(spaces), action_space=env.action_space)
    with pytest.raises(ConfigError, match=r"observation 'globals' Box\(0\.0, 1\.0, \(14,\), float32\) vs "
                                          r"Box\(0\.0, 2\.0, \(14,\), float32\)"):
        _check_env_spaces(module, env, "ckpt", Path("ckpt"))


@pytest.mark.slow  # about 14 s, most of it Ray's start
def test_train_rllib_on_the_universal_layout_and_play_on_another_cluster(tmp_path):
    """RLlib's connectors, learner and checkpoint on the universal layout (256 env steps), then the trained module
    plays doubling-64 (trained on frenzy-testbed)."""
    import ray

    cfg = RLlibTrainConfig(
        iterations=1, num_env_runners=0, num_envs_per_env_runner=1, train_batch_size=256, minibatch_size=64,
        num_epochs=1, max_episode_steps=40, num_cpus=1, out_dir=str(tmp_path / "u"), progress=False,
        queue_slots=8, running_slots=8, hidden=(32,), interface="universal",
    )  # fmt: skip
    was_running = ray.is_initialized()
    from agents.rllib import train_rllib

    out = train_rllib(cfg)
    assert ray.is_initialized() == was_running
    log = json.loads((out / "train_log.json").read_text())
    assert log["invalid_actions"] == 0 and log["env_steps"] >= 256
    assert json.loads((out / "config.json").read_text())["interface"] == "universal"
    env = _env("doubling-64", **UNIVERSAL)
    policy = load_rllib_policy(env, out)
    assert "plans" in policy.keys and "nodes" not in policy.keys
    result = run_episode(env, policy, seed=2, max_steps=300)
    assert result.metrics["invalid_actions"] == 0
    with pytest.raises(ConfigError, match=r"its config.json: cluster 'frenzy-testbed', interface 'universal'"):
        load_rllib_policy(_env("doubling-64", **CLUSTER), out)  # the cluster layout: other spaces
