"""The knob agent (research.knob.agent): PPO chooses sia_srpt's move margin at every decision instant."""

from __future__ import annotations

import json

import numpy as np
import pytest
from knob_configs import SMALL, play_level
from knob_configs import small_config as _cfg

from agents.ppo.workloads import make_env, training_generator
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from research.knob.agent import (
    KnobConfig,
    KnobEnv,
    KnobPolicy,
    gpu_summary,
    is_knob_model,
    knob_features,
    load_knob_policy,
    play_plan,
    save_knob_model,
    start_at_plan,
    train_knob,
)


def _model(cfg: KnobConfig, p0: float = 0.85):
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", KnobEnv(cfg), n_steps=16, batch_size=16, device="cpu", seed=0)
    start_at_plan(model, p0, cfg.reference_level)
    return model


@pytest.mark.parametrize(
    "kw, field",
    [({"levels": (0.1, 0.2)}, "levels"), ({"levels": (0.0, 0.2, 0.1)}, "levels"), ({"levels": (0.0, -1.0)}, "levels"),
     ({"planner": "fifo"}, "planner"), ({"n_envs": 0}, "n_envs"), ({"gain": 0.0}, "gain"),
     ({"start_plan_prob": 1.0}, "start_plan_prob"), ({"max_minutes": 0}, "max_minutes"),
     ({"gpu_features": "types"}, "gpu_features"), ({"preemption": 1}, "preemption"),
     ({"reference_level": 4}, "reference_level"), ({"reference_level": -1}, "reference_level")],
)
def test_config_errors_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        _cfg(**kw)


def test_config_round_trips_and_refuses_unknown_fields():
    cfg = _cfg(levels=(0.0, 0.3))
    assert KnobConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ConfigError, match="margins"):
        KnobConfig.from_dict({"margins": [0.0]})


def test_features_are_the_globals_free_gpus_and_previous_level():
    obs = {"globals": np.arange(12, dtype=np.float32) / 10, "gpus": np.full(6, 0.5, np.float32)}
    x = knob_features(obs, 2, 4, "per_type")
    assert x.shape == (22,) and x.dtype == np.float32
    np.testing.assert_array_equal(x[:12], obs["globals"])
    np.testing.assert_array_equal(x[12:18], 0.5)
    np.testing.assert_array_equal(x[18:], [0, 0, 1, 0])


def test_summary_features_are_the_same_three_numbers_on_any_cluster():
    # 3 types: free 0.5, 0.0, 1.0 of shares 0.5, 0.25, 0.25 -> min 0, max 1, all GPUs 0.25 + 0 + 0.25 = 0.5
    obs = {"globals": np.zeros(12, np.float32), "gpus": np.array([0.5, 0.0, 1.0, 0.5, 0.25, 0.25], np.float32)}
    x = knob_features(obs, 0, 4)
    assert x.shape == (19,)
    np.testing.assert_allclose(x[12:15], [0.0, 1.0, 0.5])
    np.testing.assert_allclose(gpu_summary(np.array([0.2, 0.6, 0.25, 0.75])), [0.2, 0.6, 0.5])  # 2 types
    with pytest.raises(ConfigError, match="gpus"):
        gpu_summary(np.zeros(5))


def test_a_summary_model_plays_on_a_cluster_with_other_gpu_types_and_a_per_type_one_is_refused(tmp_path):
    import gymnasium as gym

    for features in ("summary", "per_type"):
        cfg = _cfg(gpu_features=features)
        save_knob_model(_model(cfg), cfg, tmp_path / f"{features}.zip")
    other = gym.make("frenzy/Doubling64-v4", workload="synthetic-small").unwrapped  # one GPU type, not three
    policy = load_knob_policy(other, tmp_path / "summary.zip")
    assert policy.gpu_features == "summary"
    result = run_episode(other, policy, seed=0)
    assert result.metrics["finished"] == result.metrics["jobs"] and result.metrics["invalid_actions"] == 0
    with pytest.raises(ConfigError, match="number of GPU types"):
        load_knob_policy(other, tmp_path / "per_type.zip")


def test_a_version_1_config_and_model_read_as_per_type(tmp_path):
    cfg = _cfg(gpu_features="per_type")
    data = cfg.to_dict()
    del data["gpu_features"]  # as a version 1 config was written
    assert KnobConfig.from_dict(data).gpu_features == "per_type"
    save_knob_model(_model(cfg), cfg, tmp_path / "m.zip")
    meta = json.loads((tmp_path / "m.json").read_text())
    del meta["gpu_features"]
    meta["knob_version"] = 1
    (tmp_path / "m.json").write_text(json.dumps(meta))
    env = make_env(SMALL, training_generator(SMALL))
    assert load_knob_policy(env, tmp_path / "m.zip").gpu_features == "per_type"


def test_start_at_plan_sets_the_level_distribution_for_every_input():
    cfg = _cfg()
    model = _model(cfg, p0=0.7)
    import torch as th

    x = th.rand(5, model.observation_space.shape[0]) * 2
    probs = model.policy.get_distribution(x).distribution.probs.detach().numpy()
    np.testing.assert_allclose(probs, np.tile([0.7, 0.1, 0.1, 0.1], (5, 1)), rtol=1e-5)
    start_at_plan(model, 0.4, 2)  # another reference level
    probs = model.policy.get_distribution(x).distribution.probs.detach().numpy()
    np.testing.assert_allclose(probs, np.tile([0.2, 0.2, 0.4, 0.2], (5, 1)), rtol=1e-5)


def test_always_level_zero_returns_exactly_zero_and_a_margin_returns_its_relative_gain():
    """The reference is the plan with margin 0: playing level 0 at every instant is that plan (return 0);
    another level's return is gain x (1 - its cost / the plan's cost), its cost the env's summed reward."""
    cfg = _cfg(pool=1)
    env = KnobEnv(cfg, seed=0)
    ret0, steps = play_level(env, 0)
    assert ret0 == pytest.approx(0.0, abs=1e-9) and steps > 5
    plan = play_plan(make_env(SMALL, training_generator(SMALL)), 0, "completion", margin=0.0)
    margin = play_plan(make_env(SMALL, training_generator(SMALL)), 0, "completion", margin=0.4)
    ret3, _ = play_level(env, 3)
    assert ret3 == pytest.approx(cfg.gain * (1 - margin.total / plan.total), rel=1e-6, abs=1e-9)


def test_with_preemption_the_reference_levels_plan_returns_zero_and_another_its_relative_gain():
    """A preempting knob (``preemption=True``, ``reference_level=2``): its env offers preempt actions, its
    planner may preempt, and the reward is differenced against the preempting plan at margin 0.2."""
    cfg = _cfg(pool=1, preemption=True, reference_level=2)
    env = KnobEnv(cfg, seed=0)
    assert env.env.preemption and env.teacher.sia.preempt
    ret2, steps = play_level(env, 2)
    assert ret2 == pytest.approx(0.0, abs=1e-9) and steps > 5
    ref = play_plan(make_env(SMALL, training_generator(SMALL), preemption=True), 0, "completion", margin=0.2,
                    preempt=True)
    zero = play_plan(make_env(SMALL, training_generator(SMALL), preemption=True), 0, "completion", margin=0.0,
                     preempt=True)
    ret0, _ = play_level(env, 0)
    assert ret0 == pytest.approx(cfg.gain * (1 - zero.total / ref.total), rel=1e-6, abs=1e-9)


def test_a_preempting_model_starts_at_its_reference_plan_and_needs_an_env_with_preemption(tmp_path):
    cfg = _cfg(preemption=True, reference_level=2)
    save_knob_model(_model(cfg), cfg, tmp_path / "m.zip")
    meta = json.loads((tmp_path / "m.json").read_text())
    assert meta["preemption"] is True and meta["reference_level"] == 2
    with pytest.raises(ConfigError, match="preemption"):
        load_knob_policy(make_env(SMALL, training_generator(SMALL)), tmp_path / "m.zip")
    env = make_env(SMALL, training_generator(SMALL), preemption=True)
    plan = play_plan(env, 7, "completion", margin=0.2, preempt=True)
    greedy = load_knob_policy(env, tmp_path / "m.zip", sample=False)
    assert greedy.preemption and greedy.prev == 2
    m = run_episode(env, greedy, seed=7).metrics
    assert m["avg_jct_h"] == pytest.approx(plan.avg_jct_h, rel=1e-12) and m["invalid_actions"] == 0
    assert greedy.levels_used[2] > 0 and greedy.levels_used.sum() == greedy.levels_used[2]


def test_each_step_is_one_decision_instant():
    env = KnobEnv(_cfg(pool=1), seed=0)
    env.reset()
    times = [env.env.view.now]
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(1)
        done = term or trunc
        times.append(env.env.view.now)
    assert all(b > a for a, b in zip(times[:-1], times[1:]))  # simulated time moves on at every step


def test_policy_greedy_at_the_start_is_the_plan_and_sampling_is_reproducible(tmp_path):
    cfg = _cfg()
    save_knob_model(_model(cfg), cfg, tmp_path / "m.zip")
    env = make_env(SMALL, training_generator(SMALL))
    plan = play_plan(env, 7, "completion")
    greedy = load_knob_policy(env, tmp_path / "m.zip", sample=False)
    m = run_episode(env, greedy, seed=7).metrics
    assert m["avg_jct_h"] == pytest.approx(plan.avg_jct_h, rel=1e-12) and m["invalid_actions"] == 0
    assert greedy.levels_used[1:].sum() == 0 and greedy.levels_used[0] > 0
    runs = []
    for _ in range(2):
        pol = load_knob_policy(env, tmp_path / "m.zip", seed=3)
        runs.append((run_episode(env, pol, seed=7).metrics["avg_jct_h"], pol.levels_used.copy()))
    assert runs[0][0] == runs[1][0] and (runs[0][1] == runs[1][1]).all()
    assert runs[0][1][1:].sum() > 0  # 15% of the instants draw another level


def test_is_knob_model(tmp_path):
    cfg = _cfg()
    save_knob_model(_model(cfg), cfg, tmp_path / "m.zip")
    assert is_knob_model(tmp_path / "m.zip")
    (tmp_path / "other.zip").write_bytes(b"")
    (tmp_path / "other.json").write_text('{"ppo": {}}')
    (tmp_path / "bad.json").write_text("{")
    assert not is_knob_model(tmp_path / "other.zip") and not is_knob_model(tmp_path / "bad.zip")
    assert not is_knob_model(tmp_path / "none.zip")


def test_load_errors_name_the_file_and_the_version(tmp_path):
    cfg = _cfg()
    env = make_env(SMALL, training_generator(SMALL))
    with pytest.raises(ConfigError, match="no file"):
        load_knob_policy(env, tmp_path / "none.zip")
    save_knob_model(_model(cfg), cfg, tmp_path / "m.zip")
    meta = json.loads((tmp_path / "m.json").read_text())
    (tmp_path / "m.json").write_text(json.dumps({**meta, "knob_version": 99}))
    with pytest.raises(ConfigError, match="version"):
        load_knob_policy(env, tmp_path / "m.zip")


def test_policy_needs_an_observation(tmp_path):
    cfg = _cfg()
    env = make_env(SMALL, training_generator(SMALL))
    pol = KnobPolicy(env, _model(cfg), cfg.levels)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="predict"):
        pol.act(env.action_masks())


@pytest.mark.slow
def test_training_writes_a_model_and_resumes_from_its_last_checkpoint(tmp_path):
    cfg = _cfg()
    path = train_knob(cfg, tmp_path / "run", log=lambda *_: None)
    assert path.is_file() and (tmp_path / "run" / "start.zip").is_file()
    from stable_baselines3 import PPO

    done = PPO.load(path).num_timesteps  # whole rollouts: 2 of 2 envs x 32 decisions
    assert done == 128
    steps = sorted(int(p.stem.split("_")[1]) for p in (tmp_path / "run" / "checkpoints").glob("*.zip"))
    assert steps == [32, 64, 96, 128]
    with pytest.raises(ConfigError, match="already holds a run"):
        train_knob(cfg, tmp_path / "run", log=lambda *_: None)
    more = KnobConfig.from_dict({**cfg.to_dict(), "timesteps": 160})
    (tmp_path / "run" / "config.json").write_text(json.dumps(more.to_dict()))
    logs = []
    train_knob(more, tmp_path / "run", resume=True, log=logs.append)
    assert any("knob_128_steps" in line and "128 decisions" in line for line in logs)
    assert PPO.load(tmp_path / "run" / "model.zip").num_timesteps == 192


def test_envs_share_the_pool_without_overlap():
    """Each training env draws from its own share of the pool (each seed's reference is played once)."""
    from research.knob.agent import _env_factory

    cfg = _cfg(pool=7, n_envs=3)
    shares = [_env_factory(cfg, 0, i)().seeds.tolist() for i in range(3)]
    assert shares == [[0, 3, 6], [1, 4], [2, 5]]
    env = KnobEnv(cfg, seed=1, seeds=[5])
    env.reset()
    assert env.env.episode_seed == 5
    with pytest.raises(ConfigError, match="seeds"):
        KnobEnv(cfg, seeds=[])


def test_a_checkpoint_loads_with_its_runs_config(tmp_path):
    cfg = _cfg(levels=(0.0, 0.3))
    train_knob(cfg, tmp_path / "run", log=lambda *_: None)
    ckpt = tmp_path / "run" / "checkpoints" / "knob_64_steps.zip"
    assert is_knob_model(ckpt)
    pol = load_knob_policy(make_env(SMALL, training_generator(SMALL)), ckpt)
    assert pol.levels == (0.0, 0.3)


def test_the_shipped_knob_model_plays_a_legal_episode():
    """The model that shipped (frenzy-testbed, env v4) loads through :func:`research.knob.knob`, the factory
    of ``frenzy evaluate --policies research.knob:knob``, and plays; its levels and config are recorded beside
    it."""
    from research.knob.agent import SHIPPED, knob

    meta = json.loads(SHIPPED.with_suffix(".json").read_text())
    assert meta["levels"] == [0.0, 0.1, 0.2, 0.4] and meta["planner"] == "sia_srpt"
    env = make_env(SMALL, training_generator(SMALL))
    pol = knob(env)
    m = run_episode(env, pol, seed=3).metrics
    assert m["invalid_actions"] == 0 and m["finished"] + m["rejected"] == m["jobs"]
    assert pol.levels_used.sum() > 0


def test_an_invalid_level_is_a_no_op_with_a_penalty():
    """An action outside the levels keeps the previous level (the same instant's steps as choosing it) and
    costs INVALID_PENALTY; it never raises."""
    from research.knob.agent import INVALID_PENALTY

    cfg = _cfg(pool=1)
    a, b = KnobEnv(cfg, seed=0), KnobEnv(cfg, seed=0)
    a.reset(), b.reset()
    for _ in range(3):
        a.step(2), b.step(2)
    oa, ra, *_, ia = a.step(2)
    ob, rb, *_, ib = b.step(17)
    assert ib["invalid_action"] and not ia["invalid_action"]
    np.testing.assert_array_equal(oa, ob)
    assert rb == pytest.approx(ra - INVALID_PENALTY)
    _, _, *_, ic = b.step("x")
    assert ic["invalid_action"]


@pytest.mark.slow
def test_resume_keeps_the_runs_config_but_takes_the_new_budget(tmp_path):
    cfg = _cfg(timesteps=64)
    train_knob(cfg, tmp_path / "run", log=lambda *_: None)
    other = KnobConfig.from_dict({**cfg.to_dict(), "timesteps": 128, "n_epochs": 3})
    logs = []
    train_knob(other, tmp_path / "run", resume=True, log=logs.append)
    saved = KnobConfig.from_dict(json.loads((tmp_path / "run" / "config.json").read_text()))
    assert saved.timesteps == 128 and saved.n_epochs == 1
    assert any("with this budget" in line for line in logs)
    from stable_baselines3 import PPO

    assert PPO.load(tmp_path / "run" / "model.zip").num_timesteps == 128


def test_frenzy_evaluate_plays_it_as_module_attr_and_product_loaders_point_here():
    """From the repository root ``--policies research.knob:knob`` is the knob (labelled ``knob``) beside the
    named planner baseline; the product's ppo loader and ``--policies knob`` refuse it with where it went, and
    the knob loader refuses an action-level model."""
    from agents.model_record import agent_of
    from agents.ppo import DEFAULT_MODEL_PATH
    from agents.ppo import load_policy as load_ppo
    from frenzy_env.cli.policies import resolve
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.errors import FrenzyError
    from research.knob import SHIPPED, load_policy

    env = FrenzyEnv(workload="synthetic-small", interface="cluster")  # the layout the shipped knob model reads
    knob, planner = resolve(["research.knob:knob", "sia_srpt:move_margin=0.2"], [], None)
    assert (knob.name, knob.kind, planner.name) == ("knob", "module", "sia_srpt:move_margin=0.2")
    assert isinstance(knob.factory(env), KnobPolicy) and planner.factory(env).move_margin == 0.2
    assert agent_of(SHIPPED) == "knob" and isinstance(load_policy(env, sample=False), KnobPolicy)
    with pytest.raises(ConfigError, match="research model.*research/knob.*research.knob"):
        load_ppo(env, SHIPPED)
    with pytest.raises(FrenzyError, match="research/knob"):
        resolve(["knob"], [], None)
    with pytest.raises(ConfigError, match="is an action-level ppo model.*agents.ppo.load_policy"):
        load_policy(env, DEFAULT_MODEL_PATH)
