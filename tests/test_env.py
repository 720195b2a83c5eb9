"""FrenzyEnv: Gymnasium and stable-baselines3 conformance, masks, determinism, copies."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import frenzy_env  # noqa: F401  (registers the ids)
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.registration import ENV_PRESETS

SMALL = {"cluster": "frenzy-testbed", "workload": "synthetic-small"}


def play(env, seed, n_steps, rng_seed=0):
    """Masked-random play; returns the trajectory of (action, reward, obs checksum)."""
    rng = np.random.default_rng(rng_seed)
    obs, _ = env.reset(seed=seed)
    traj = []
    for _ in range(n_steps):
        legal = np.flatnonzero(env.action_masks())
        a = int(rng.choice(legal))
        obs, r, term, trunc, info = env.step(a)
        traj.append((a, r, float(sum(v.astype(np.float64).sum() for v in obs.values())), info["time"]))
        if term or trunc:
            break
    return traj


@pytest.mark.parametrize("preset", ENV_PRESETS, ids=lambda p: p.env_id)
def test_gymnasium_check_env(preset):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(preset.env_id, workload="synthetic-small")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("preset", ENV_PRESETS, ids=lambda p: p.env_id)
def test_sb3_check_env(preset):
    from stable_baselines3.common.env_checker import check_env

    env = FrenzyEnv(cluster=preset.cluster, workload="synthetic-small")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, warn=True)


def test_default_id_uses_shipped_trace():
    env = gym.make("frenzy/HeteroCluster-v6")
    obs, info = env.reset(seed=0)
    assert env.unwrapped.cluster.name == "frenzy-testbed"
    assert env.unwrapped.sim.num_jobs >= 500
    assert obs["action_mask"].dtype == np.int8
    assert (info["action_mask"] == env.unwrapped.action_masks()).all()


def test_same_seed_same_trajectory():
    a = play(FrenzyEnv(**SMALL), seed=3, n_steps=300)
    b = play(FrenzyEnv(**SMALL), seed=3, n_steps=300)
    assert a == b
    c = play(FrenzyEnv(**SMALL), seed=4, n_steps=300)
    assert a != c


def test_every_masked_action_succeeds_and_illegal_are_penalised_noops():
    env = FrenzyEnv(**SMALL, invalid_action_penalty=0.5)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(200):
        mask = env.action_masks()
        illegal = np.flatnonzero(~mask)
        if illegal.size:
            a = int(rng.choice(illegal))
            sim = env.sim
            before = (sim.now, list(sim.queue), sim.state.free.copy(), len(sim.running))
            _, r, term, trunc, info = env.step(a)
            assert r == -0.5 and info["reward_components"]["invalid"] == -0.5
            assert (sim.now, list(sim.queue), len(sim.running)) == (before[0], before[1], before[3])
            assert (sim.state.free == before[2]).all()
        legal = np.flatnonzero(env.action_masks())
        _, _, term, trunc, _ = env.step(int(rng.choice(legal)))  # asserts inside step check agreement
        env.sim.check_invariants()
        if term or trunc:
            break
    assert env._invalid > 0
    # out-of-range actions are no-ops too
    if not env._needs_reset:
        _, r, *_ = env.step(10**9)
        assert r == -0.5


def test_episode_ends_with_metrics_and_return_is_minus_total_jct():
    env = FrenzyEnv(**SMALL, invalid_action_penalty=0.0)
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    total, term, info = 0.0, False, {}
    while not term:
        _, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        total += r
        assert not trunc
    m = info["metrics"]
    assert m["finished"] + m["rejected"] == m["jobs"]
    fin = [r for r in env.sim.records if r.finish_time == r.finish_time]
    total_jct = sum(r.finish_time - r.submit_time for r in fin)
    assert -total * 3600.0 == pytest.approx(total_jct, rel=1e-9)


def test_auto_advance_leaves_a_real_choice():
    env = FrenzyEnv(**SMALL)
    env.reset(seed=0)
    for _ in range(50):
        mask = env.action_masks()
        assert mask[1:].any() or env.sim.done
        _, _, term, _, _ = env.step(0 if mask[0] else int(np.flatnonzero(mask)[0]))
        if term:
            break


def test_deepcopy_and_pickle_mid_episode_continue_identically():
    env = FrenzyEnv(**SMALL)
    play(env, seed=2, n_steps=40)
    twin = copy.deepcopy(env)
    thawed = pickle.loads(pickle.dumps(env))
    rng_actions = np.random.default_rng(5)
    for _ in range(40):
        a = int(rng_actions.choice(np.flatnonzero(env.action_masks())))
        outs = [e.step(a) for e in (env, twin, thawed)]
        for o in outs[1:]:
            assert o[1] == outs[0][1] and o[2] == outs[0][2]
            assert all((o[0][k] == outs[0][0][k]).all() for k in o[0])
        if outs[0][2]:
            break


def test_unknown_keyword_and_bad_values_raise():
    with pytest.raises(ConfigError, match="startup_tme"):
        FrenzyEnv(**SMALL, startup_tme=1)
    with pytest.raises(ConfigError, match="queue_slots"):
        FrenzyEnv(**SMALL, queue_slots=0)
    with pytest.raises(ConfigError, match="predictor"):
        FrenzyEnv(**SMALL, predictor="psychic")


def test_render_modes():
    env = FrenzyEnv(**SMALL, render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert "queued=" in text and "A100-80GB" in text
    env = FrenzyEnv(**SMALL, render_mode="rgb_array")
    env.reset(seed=0)
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3


def test_vector_envs_sync_and_async():
    for mode in ("sync", "async"):
        envs = gym.make_vec("frenzy/HeteroClusterSmall-v6", num_envs=2, vectorization_mode=mode)
        obs, _ = envs.reset(seed=0)
        assert obs["queue"].shape[0] == 2 and obs["queue"].ndim == 2
        actions = np.zeros(2, dtype=np.int64)  # wait is always legal at the start (arrivals pending)
        obs, r, term, trunc, info = envs.step(actions)
        assert r.shape == (2,)
        envs.close()


def test_maskable_ppo_learns_a_few_hundred_steps():
    from sb3_contrib import MaskablePPO

    env = FrenzyEnv(**SMALL)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, verbose=0)
    model.learn(total_timesteps=256)
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
    assert env.action_masks()[int(action)]


# ------------------------------------------------------------------------------------- the final observation
def _tiny(**kw) -> dict:
    from frenzy_env.workload import make_generator

    return {"cluster": "frenzy-testbed", "workload": make_generator("synthetic-small", num_jobs=5), **kw}


@pytest.mark.parametrize("max_steps", [None, 3])
def test_the_final_mask_allows_wait_and_stepping_on_needs_a_reset(max_steps):
    env = FrenzyEnv(**_tiny(max_steps=max_steps))
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    assert truncated == (max_steps is not None) and terminated == (max_steps is None)
    mask = env.action_masks()
    assert mask[0] and (obs["action_mask"] == mask).all() and (info["action_mask"] == mask).all()
    if terminated:
        assert not mask[1:].any()  # nothing left to start or resize
    rng.choice(np.flatnonzero(obs["action_mask"]))  # CleanRL-style sampling works on the final observation
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_sync_vector_env_with_masked_random_sampling_runs_through_episode_ends():
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("frenzy/HeteroClusterSmall-v6", **_tiny()) for _ in range(2)])
    obs, _ = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(2000):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in obs["action_mask"]])  # as CleanRL samples
        obs, _, terminated, truncated, _ = envs.step(actions)
        ends += int(np.sum(terminated | truncated))
        if ends >= 6:
            break
    envs.close()
    assert ends >= 6


def test_the_current_ids_are_v6_with_auto_budgets_and_the_v5_and_v4_ids_keep_their_worlds():
    from frenzy_env.registration import ENV_PRESETS, ID_BUDGETS, V4_WORLD, V5_WORLD
    from frenzy_env.versions import ENV_VERSION

    assert ENV_VERSION == "v6" and all(p.env_id.endswith("-v6") for p in ENV_PRESETS)
    assert ID_BUDGETS == {"max_steps": "auto", "max_sim_hours": "auto"}
    for preset in ENV_PRESETS:  # every preset: the current id with the budgets, the v5 and v4 ids with their worlds
        stem = preset.env_id[: -len("v6")]
        current, v5, v4 = gym.spec(preset.env_id), gym.spec(stem + "v5"), gym.spec(stem + "v4")
        assert {k: current.kwargs.get(k) for k in ID_BUDGETS} == ID_BUDGETS
        assert not set(V5_WORLD) & set(current.kwargs)  # the current id is the current defaults
        assert {k: v5.kwargs.get(k) for k in V5_WORLD} == V5_WORLD and "max_steps" not in v5.kwargs
        assert {k: v4.kwargs.get(k) for k in V4_WORLD} == V4_WORLD and "max_steps" not in v4.kwargs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Gymnasium's "out of date" notice for the older ids
        old = gym.make("frenzy/HeteroCluster-v4").unwrapped
        small = gym.make("frenzy/Doubling64-v4").unwrapped
        v5 = gym.make("frenzy/HeteroCluster-v5").unwrapped
    new = gym.make("frenzy/HeteroCluster-v6").unwrapped
    assert new.max_steps == "auto" and new.max_sim_hours == "auto"
    assert v5.max_steps is None and v5.max_sim_hours is None and old.max_steps is None
    for key, value in V4_WORLD.items():
        assert getattr(old.sim_config, key) == value != getattr(new.sim_config, key)
    for key, value in V5_WORLD.items():
        assert getattr(v5.sim_config, key) == value != getattr(new.sim_config, key)
    assert old._generator.sizing == "v4" and v5._generator.sizing == new._generator.sizing == "recorded"
    assert old._generator.efficiency == "flat" and v5._generator.efficiency == "microbatch"
    assert new._generator.efficiency == "per_type"
    # bound like a preset named by string: the generator follows the preset's cluster
    assert small.cluster.name == "doubling-64" and small._generator.cluster.name == "doubling-64"
    # v4 and v5 share the cluster layout's spaces; v6's universal spaces differ from them
    assert old.observation_space == v5.observation_space and old.action_space == v5.action_space
    assert new.observation_space != v5.observation_space and new.action_space != v5.action_space
    assert "plans" in new.observation_space.spaces and "plans" not in v5.observation_space.spaces


def test_an_env_binds_its_generators_efficiency_to_its_own():
    from frenzy_env.registration import V4_WORLD
    from frenzy_env.workload import SyntheticGenerator, make_generator

    by_hand = FrenzyEnv(workload=make_generator("itp-default", sizing="v4"), **V4_WORLD)
    assert by_hand._generator.efficiency == "flat" and by_hand._generator.sizing == "v4"
    gen = SyntheticGenerator(num_jobs=5, efficiency="flat")
    for kw, efficiency in (({}, "per_type"), ({"efficiency": "microbatch"}, "microbatch")):  # v6's default, v5's
        env = FrenzyEnv(workload=gen, **kw)  # the durations are drawn under the simulator's speed model
        assert env._generator.efficiency == efficiency and gen.efficiency == "flat"  # the caller's object unchanged
        wl = env._generator.generate(3)
        same = dataclasses.replace(gen, efficiency=efficiency).generate(3)
        assert [j.iterations for j in wl.jobs] == [j.iterations for j in same.jobs]
