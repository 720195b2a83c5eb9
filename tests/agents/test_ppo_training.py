"""The PPO trainer: per-step time discounts, the differenced reward, the factored distribution, resume, --quick."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch as th

from agents.ppo import (
    PPOConfig,
    ReferenceCurve,
    TrainConfig,
    action_types,
    differenced_reward,
    factored_log_probs,
    gae,
    load_policy,
    run_reference,
    step_discounts,
    train,
)
from agents.ppo.distribution import ILLEGAL_LOGP, greedy_actions
from agents.ppo.loading import read_model
from agents.ppo.rollout import sample_actions
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.observation import OBS_VERSION
from frenzy_env.versions import ENV_VERSION

th.set_num_threads(1)


def test_time_discounted_gae_on_a_hand_made_three_step_trajectory():
    # steps of 1 h, 2 h, 1 h with horizon 2 h: discounts e^-0.5, e^-1, e^-0.5; the episode ends at step 3
    g = step_discounts(np.array([3600.0, 7200.0, 3600.0]), 7200.0)
    assert np.allclose(g, [math.exp(-0.5), math.exp(-1.0), math.exp(-0.5)])
    r = np.array([[-1.0], [-2.0], [-3.0]])
    v = np.array([[0.5], [0.25], [0.125]])
    d = np.array([[0.0], [0.0], [1.0]])
    adv, ret = gae(r, v, g[:, None], d, np.array([99.0]), lam=1.0)
    # lambda 1: returns are the discounted sums of rewards (no bootstrap past the end)
    g3 = -3.0
    g2 = -2.0 + math.exp(-1.0) * g3
    g1 = -1.0 + math.exp(-0.5) * g2
    assert np.allclose(ret[:, 0], [g1, g2, g3])
    assert np.allclose(adv[:, 0], [g1 - 0.5, g2 - 0.25, g3 - 0.125])
    # lambda 0: one-step TD errors, bootstrapping with the next value and its step's discount
    adv0, _ = gae(r, v, g[:, None], d, np.array([99.0]), lam=0.0)
    assert np.allclose(adv0[:, 0], [-1 + math.exp(-0.5) * 0.25 - 0.5, -2 + math.exp(-1) * 0.125 - 0.25, -3 - 0.125])
    assert np.all(step_discounts(np.array([5.0, 1e6]), None) == 1.0)  # undiscounted


def test_gae_does_not_bootstrap_across_an_episode_end():
    r = np.array([[1.0], [1.0]])
    v = np.array([[0.0], [10.0]])
    adv, _ = gae(r, v, np.ones((2, 1)), np.array([[1.0], [0.0]]), np.array([0.0]), lam=0.9)
    assert adv[0, 0] == pytest.approx(1.0)  # the 10 of the next episode's first state is not added


def test_differenced_reward_sums_to_reference_cost_minus_agent_cost():
    env = FrenzyEnv(workload="synthetic-small")
    ref = run_reference(env, "doubling", seed=7)
    assert ref.total > 0 and ref.times[0] <= ref.times[-1]
    # the agent: FIFO on the same arrivals
    from baselines import make_policy

    pol = make_policy("fifo", env)
    pol.reset()
    _, info = env.reset(seed=7)
    t0, total, agent_cost, done = info["time"], 0.0, 0.0, False
    while not done:
        _, r, term, trunc, info = env.step(pol.act(env.action_masks()))
        done = term or trunc
        total += differenced_reward(ref, r, t0, info["time"], done)
        agent_cost -= r
        t0 = info["time"]
    assert total == pytest.approx(ref.total - agent_cost, rel=1e-9, abs=1e-9)
    # the same policy as the reference earns exactly 0
    again = run_reference(env, "doubling", seed=7)
    assert again.total == pytest.approx(ref.total)


def test_differenced_reward_by_hand():
    curve = ReferenceCurve(np.array([0.0, 10.0, 20.0]), np.array([0.0, 4.0, 6.0]), num_jobs=2, avg_jct_h=1.0)
    assert curve.cost_at(5.0) == 2.0 and curve.cost_at(-1.0) == 0.0 and curve.cost_at(99.0) == 6.0
    assert differenced_reward(curve, -3.0, 0.0, 10.0, False) == pytest.approx(1.0)
    # a terminal step at t=10 settles the reference's remaining 2
    assert differenced_reward(curve, -3.0, 0.0, 10.0, True) == pytest.approx(3.0)


def test_factored_distribution_on_a_hand_made_mask():
    # 8 actions: wait (0), two timed waits (1, 2), three starts (3-5), two resizes (6, 7)
    types = action_types(8, 3, 6)
    assert types.tolist() == [0, 1, 1, 2, 2, 2, 3, 3]
    logits = th.tensor([[0.0, 0.0, math.log(3.0), 0.0, math.log(2.0), 5.0, 1.0, 1.0]])
    type_logits = th.tensor([[0.0, 0.0, math.log(2.0), 0.0]])
    mask = th.tensor([[True, False, True, True, True, False, False, False]])  # no resize legal, start 5 masked
    logp, type_logp, ent = factored_log_probs(logits, type_logits, mask, types, floor=0.0)
    p_type = np.array([1, 1, 2]) / 4.0  # wait, timed wait, start (resize has no legal action)
    expected = np.array([p_type[0], 0, p_type[1], p_type[2] / 3, p_type[2] * 2 / 3, 0, 0, 0])
    assert np.allclose(th.exp(logp).numpy()[0], expected, atol=1e-7)
    assert float(type_logp[0, 3]) == ILLEGAL_LOGP and np.allclose(th.exp(type_logp[0, :3]).numpy(), p_type)
    nz = expected[expected > 0]
    assert float(ent[0]) == pytest.approx(float(-(nz * np.log(nz)).sum()), rel=1e-6)
    # a floor of 0.3 over 3 legal types: (1 - 0.3) * p + 0.1
    logp_f, _, _ = factored_log_probs(logits, type_logits, mask, types, floor=0.3)
    assert float(th.exp(logp_f[0, 0])) == pytest.approx(0.7 * 0.25 + 0.1)
    # greedy: the most likely type (start), then its most likely action (4)
    assert int(greedy_actions(logp, type_logp, types)[0]) == 4
    counts = np.bincount([int(sample_actions(logp, mask)[0]) for _ in range(4000)], minlength=8) / 4000
    assert np.allclose(counts, expected, atol=0.03) and counts[expected == 0].sum() == 0


def test_factored_floor_keeps_resizes_alive_whatever_the_logits():
    types = action_types(8, 3, 6)
    logits = th.tensor([[0.0, 0.0, 0.0, 50.0, 0.0, 0.0, -50.0, -50.0]])
    type_logits = th.tensor([[0.0, 0.0, 40.0, -40.0]])
    mask = th.ones(1, 8, dtype=th.bool)
    logp, _, _ = factored_log_probs(logits, type_logits, mask, types, floor=0.04)
    assert float(th.exp(logp[0, 6:]).sum()) >= 0.01 - 1e-6  # resize type keeps floor / 4


def _tiny(tmp_path, name: str, **kw) -> TrainConfig:
    return TrainConfig(
        timesteps=384, n_envs=3, jobs_range=(6, 10), validation_jobs=8, validation_episodes=2, train_workloads=6,
        eval_freq=128, checkpoint_minutes=60.0, threads=1, out_dir=str(tmp_path / name), progress=False, seed=5,
        ppo=PPOConfig(n_steps=64, batch_size=96, bc_episodes=1, bc_epochs=1, horizon_h=2.0), **kw,
    )


def _params(path) -> dict:
    env = FrenzyEnv(workload="synthetic-small")
    return {k: v.clone() for k, v in load_policy(env, path).model.policy.state_dict().items()}


def test_resume_after_a_kill_equals_an_uninterrupted_run(tmp_path):
    straight = train(_tiny(tmp_path, "a"))
    killed = train(_tiny(tmp_path, "b"), stop_after_updates=1)
    assert not (killed / "train_log.json").exists() and (killed / "checkpoint.pt").is_file()
    resumed = train(None, resume=killed)
    pa, pb = _params(straight / "model.zip"), _params(resumed / "model.zip")
    assert pa.keys() == pb.keys() and all(th.equal(pa[k], pb[k]) for k in pa)
    curve = lambda d: [line.split(",")[:2] + line.split(",")[3:] for line in (d / "learning_curve.csv").read_text().splitlines()]  # noqa: E731,E501
    assert curve(straight) == curve(resumed) and len(curve(straight)) == 4  # header, 0, 192, 384 decisions
    la = [json.loads(x) for x in (straight / "updates.jsonl").read_text().splitlines()]
    lb = [json.loads(x) for x in (resumed / "updates.jsonl").read_text().splitlines()]
    assert [x["pg_loss"] for x in la] == [x["pg_loss"] for x in lb] and len(la) == 2
    log = json.loads((resumed / "train_log.json").read_text())
    assert log["timesteps"] == 384 and log["updates"] == 2


def test_the_run_folders_json_is_standard_json_with_nan_written_as_null(tmp_path):
    def refuse(name: str):
        raise ValueError(f"not standard JSON: {name}")

    out = train(_tiny(tmp_path, "s"))
    lines = [json.loads(x, parse_constant=refuse) for x in (out / "updates.jsonl").read_text().splitlines()]
    # no teacher: the teacher's cross-entropy is a mean over nothing (NaN), written as null
    assert len(lines) == 2 and [x["teacher_ce"] for x in lines] == [None, None]
    assert all(math.isfinite(x["pg_loss"]) for x in lines)
    assert json.loads((out / "train_log.json").read_text(), parse_constant=refuse)["updates"] == 2
    assert json.loads((out / "config.json").read_text(), parse_constant=refuse)["timesteps"] == 384
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_frenzy_train_quick_end_to_end(tmp_path):
    from frenzy_env.cli import main

    out = tmp_path / "quick"
    assert main(["train", "--quick", "--out", str(out), "--no-progress", "--seed", "1"]) == 0
    for name in ("model.zip", "best_model.zip", "bc_model.zip", "config.json", "checkpoint.pt",
                 "learning_curve.csv", "learning_curve.png", "updates.jsonl", "train_log.json"):
        assert (out / name).is_file(), name
    record = json.loads((out / "config.json").read_text())
    assert record["env_version"] == ENV_VERSION and record["obs_version"] == 3 and "test" in record["split"]
    cfg = TrainConfig.from_dict(record)
    assert cfg.timesteps == 512 and cfg.ppo.factored and cfg.ppo.reference == "doubling"
    env = FrenzyEnv(workload="synthetic-small")
    policy = load_policy(env, out / "best_model.zip")
    assert policy.model.policy.factored
    result = run_episode(env, policy, seed=1001)
    assert result.metrics["invalid_actions"] == 0
    rows = (out / "learning_curve.csv").read_text().splitlines()
    assert rows[0].startswith("decisions,updates") and len(rows) == 4  # 0, 256, 512 decisions
    # --resume of a finished run changes nothing and --resume refuses configuration flags
    assert main(["train", "--resume", str(out), "--timesteps", "5"]) == 2


def test_config_checks_and_legacy_keys():
    with pytest.raises(ConfigError, match="type_floor"):
        PPOConfig(type_floor=1.0)
    with pytest.raises(ConfigError, match="horizon_h"):
        PPOConfig(horizon_h=-1.0)
    with pytest.raises(ConfigError, match="batch_size"):
        TrainConfig(n_envs=1, ppo=PPOConfig(n_steps=8, batch_size=64))
    with pytest.raises(ConfigError, match="vec_env"):
        TrainConfig(vec_env="forkserver")
    old = {"timesteps": 10, "checkpoint_freq": 5, "vec_env": "subproc", "obs_version": 2,
           "ppo": {"gamma": 0.995, "normalize_reward": True, "n_steps": 8, "batch_size": 8}}
    cfg = TrainConfig.from_dict(old)
    assert cfg.timesteps == 10 and cfg.vec_env == "dummy" and cfg.ppo.n_steps == 8
    assert TrainConfig.from_dict(dataclasses.asdict(cfg)) == cfg


def test_unknown_reference_is_refused(tmp_path):
    cfg = dataclasses.replace(_tiny(tmp_path, "r"), ppo=PPOConfig(reference="nobody", n_steps=64, batch_size=96))
    with pytest.raises(ConfigError, match="nobody"):
        train(cfg)


def test_window_starts_are_spread_and_fixed():
    from agents.ppo.workloads import window_starts

    assert window_starts(1150, 150, 2) == [250, 750]
    assert window_starts(100, 150, 3) == [0, 0, 0]  # a trace shorter than a window: its one window


def test_the_split_keeps_clusters_apart():
    from agents.ppo.config import TEST_TRACES, TRAIN_TRACES, VALIDATION_TRACES

    names = [{n for n, _ in s} for s in (TRAIN_TRACES, VALIDATION_TRACES, TEST_TRACES)]
    assert not (names[0] & names[1]) and not (names[0] & names[2]) and not (names[1] & names[2])


def test_split_workloads_from_the_public_traces(cached_trace):
    from agents.ppo import TraceWindows, test_workloads, validation_workloads
    from agents.ppo.config import TEST_TRACES, VALIDATION_TRACES

    def windows(files):  # (the ITP files of the split, from the frenzy data cache)
        return tuple(
            TraceWindows(str(cached_trace("itp-" + Path(n).stem)), max_jobs=20, load_scale=s) for n, s in files
        )

    cfg = TrainConfig(validation_jobs=10, validation_traces=windows(VALIDATION_TRACES), validation_windows=2,
                      test_traces=windows(TEST_TRACES), test_windows=4, test_seeds=10)
    val, test = validation_workloads(cfg), test_workloads(cfg)
    assert len(val) == 8 + 2 * 2 and len(test) == 10 + 4 * 3  # >= 10 paired test windows plus synthetic seeds
    assert {s for _, _, s in val} == set(range(500, 508)) and {s for _, _, s in test} >= {1000, 1009}
    assert len({n for n, _, _ in test}) == len(test)  # distinct windows
    assert all(len(wl.jobs) == 20 for n, wl, _ in test if not n.startswith("synthetic"))


def test_a_wall_clock_limit_ends_the_run_validated_and_saved(tmp_path):
    cfg = dataclasses.replace(_tiny(tmp_path, "m"), max_minutes=1e-6, timesteps=10_000)
    out = train(cfg)
    log = json.loads((out / "train_log.json").read_text())
    assert log["stopped_by_max_minutes"] and log["updates"] == 1 and log["timesteps"] == 192
    assert len((out / "learning_curve.csv").read_text().splitlines()) == 3  # header, start, at the stop
    assert (out / "checkpoint.pt").is_file() and (out / "model.zip").is_file()


@pytest.mark.slow  # a few seconds of training: the slow tier keeps the fast one under 4 minutes
def test_validation_samples_with_common_random_numbers_and_greedy_with_zero(tmp_path):
    from agents.ppo.training import Validator, _container
    from agents.ppo.workloads import make_env, training_generator

    cfg = _tiny(tmp_path, "v")
    model = _container(cfg, make_env(cfg, training_generator(cfg)))
    sampled = Validator(cfg)
    a, b = sampled.run(model.policy), sampled.run(model.policy)
    assert a.shape == (cfg.validation_samples, cfg.validation_episodes) and np.array_equal(a, b)  # same draws
    assert np.all(a > 0) and sampled.ref_jct.shape == (cfg.validation_episodes,)
    greedy = Validator(dataclasses.replace(cfg, validation_samples=0))
    g = greedy.run(model.policy)
    assert g.shape == (1, cfg.validation_episodes)
    # the greedy play is the policy's deterministic action, step by step
    env = make_env(cfg, greedy.items[0][1])
    expected = run_episode(env, load_policy(env, _save(model, tmp_path / "g.zip"), sample=False),
                           seed=greedy.seeds[0]).metrics["avg_jct_h"]
    assert g[0, 0] == pytest.approx(expected)


def _save(model, path):
    model.save(path)
    return path


@pytest.mark.slow  # a few seconds of training: the slow tier keeps the fast one under 4 minutes
def test_init_model_continues_from_its_weights(tmp_path):
    first = train(_tiny(tmp_path, "a"))
    cfg = dataclasses.replace(_tiny(tmp_path, "b"), init_model=str(first / "model.zip"), timesteps=192)
    second = train(cfg)
    assert not (second / "bc_model.zip").exists()  # no warm start: the weights came from the model
    rows = lambda d: (d / "learning_curve.csv").read_text().splitlines()  # noqa: E731
    # the same validation draws: the continued run starts where the first one ended
    assert rows(second)[1].split(",")[3:] == rows(first)[-1].split(",")[3:]
    log = json.loads((second / "train_log.json").read_text())
    assert log["init_model"] == str(first / "model.zip") and log["init_model_obs_version"] == OBS_VERSION
    assert log["init_optimizer"] is True  # the first run's checkpoint holds the same weights: its Adam moments
    # a model of an older observation encoding: refused as a policy, accepted (and recorded) as initial weights
    record = json.loads((first / "config.json").read_text())
    (first / "config.json").write_text(json.dumps({**record, "obs_version": OBS_VERSION - 1}))
    with pytest.raises(ConfigError, match=f"observation version {OBS_VERSION - 1}"):
        read_model(first / "model.zip")
    older = train(dataclasses.replace(cfg, out_dir=str(tmp_path / "older")))
    assert json.loads((older / "train_log.json").read_text())["init_model_obs_version"] == OBS_VERSION - 1
    assert rows(older)[1].split(",")[3:] == rows(second)[1].split(",")[3:]  # the same weights: same validation
    wider = dataclasses.replace(cfg, out_dir=str(tmp_path / "c"),
                                ppo=dataclasses.replace(cfg.ppo, embed_dim=cfg.ppo.embed_dim + 8))
    with pytest.raises(ConfigError, match="does not fit"):
        train(wider)
    with pytest.raises(ConfigError, match="init_model"):
        dataclasses.replace(cfg, init_model="runs/a")


def test_init_model_continues_adams_moments_only_from_its_own_checkpoint(tmp_path):
    from agents.ppo.training import _container, _load_optimizer, _load_weights
    from agents.ppo.workloads import make_env, training_generator

    cfg = _tiny(tmp_path, "a")
    first = train(cfg)
    saved = th.load(first / "checkpoint.pt", weights_only=False)["optimizer"]
    fresh = lambda: _container(cfg, make_env(cfg, training_generator(cfg))).policy  # noqa: E731
    policy = fresh()
    _load_weights(policy, first / "model.zip")
    assert _load_optimizer(policy, policy.optimizer, first / "model.zip")
    state = policy.optimizer.state_dict()["state"]
    assert state.keys() == saved["state"].keys() and len(state) > 0
    assert all(th.equal(state[k]["exp_avg_sq"], saved["state"][k]["exp_avg_sq"]) for k in state)
    # other weights than the checkpoint's (a fresh network), or no checkpoint beside the model: nothing loaded
    other = fresh()
    assert not _load_optimizer(other, other.optimizer, first / "model.zip")
    assert other.optimizer.state_dict()["state"] == {}
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "model.zip").write_bytes((first / "model.zip").read_bytes())
    assert not _load_optimizer(policy, other.optimizer, alone / "model.zip")
    trained = train(dataclasses.replace(cfg, out_dir=str(tmp_path / "b"), init_model=str(alone / "model.zip"),
                                        timesteps=192))
    assert json.loads((trained / "train_log.json").read_text())["init_optimizer"] is False
    with pytest.raises(ConfigError, match="init_optimizer"):
        dataclasses.replace(cfg, init_optimizer="yes")


@pytest.mark.slow  # a few seconds of training: the slow tier keeps the fast one under 4 minutes
def test_the_loaded_policy_samples_reproducibly_from_its_distribution(tmp_path):
    from agents.ppo.training import _container
    from agents.ppo.workloads import make_env, training_generator

    cfg = _tiny(tmp_path, "s")
    path = _save(_container(cfg, make_env(cfg, training_generator(cfg))), tmp_path / "s.zip")
    env = FrenzyEnv(workload="synthetic-small")
    policy = load_policy(env, path)
    assert policy.sample
    runs = [run_episode(env, policy, seed=1000).metrics["avg_jct_h"] for _ in range(2)]
    assert runs[0] == runs[1]  # re-seeded per episode
    obs, _ = env.reset(seed=1000)
    policy.reset()
    mask = env.action_masks()
    obs_t, _ = policy.model.policy.obs_to_tensor(obs)
    with th.no_grad():
        probs = policy.model.policy.get_distribution(obs_t, action_masks=mask[None]).distribution.probs[0].numpy()
    draws = np.array([int(policy.predict(obs, deterministic=True)[0]) for _ in range(3000)])
    freq = np.bincount(draws, minlength=probs.size) / draws.size
    assert mask[draws].all() and np.abs(freq - probs).max() < 0.04  # sampled, whatever deterministic says
    greedy = load_policy(env, path, sample=False)
    assert int(greedy.predict(obs)[0]) == int(policy.model.predict(obs, deterministic=True, action_masks=mask)[0])
    other = load_policy(env, path, seed=1)
    other.reset()
    policy.reset()
    assert [int(other.predict(obs)[0]) for _ in range(50)] != [int(policy.predict(obs)[0]) for _ in range(50)]
    with pytest.raises(ConfigError, match="seed"):
        load_policy(env, path, seed=-1)


def test_reference_reward_wrapper_returns_the_normalised_cost_difference():
    from agents.ppo import ReferenceReward
    from agents.rllib import RLlibTrainConfig, make_env
    from baselines import make_policy

    def play(env, policy_name):
        policy = make_policy(policy_name, env)
        policy.reset()
        env.reset(seed=1003)
        total, raw, done = 0.0, 0.0, False
        while not done:
            _, r, term, trunc, info = env.step(policy.act(env.unwrapped.action_masks()))
            total, raw, done = total + r, raw + info["env_reward"], term or trunc
        return total, raw

    env = ReferenceReward(FrenzyEnv(workload="synthetic-small"), "srpt_est", gain=10.0)
    same, _ = play(env, "srpt_est")
    assert same == pytest.approx(0.0, abs=1e-9)  # the reference against itself
    ref_cost = env.cache.get(1003).total
    shaped, raw = play(env, "fifo")
    assert shaped == pytest.approx(10.0 * (1.0 - (-raw) / ref_cost), rel=1e-6)  # costs from the first decision
    assert env.cache.runs == 1  # one reference run per workload seed
    # the RLlib env creator differences the reward the same way when the config names a reference
    cfg = RLlibTrainConfig(workload="synthetic-small")
    assert cfg.gamma == 1.0 and cfg.env_config()["reference"] == "doubling"
    assert isinstance(make_env(cfg.env_config()).env, ReferenceReward)
    assert not isinstance(make_env(RLlibTrainConfig(reference=None).env_config()).env, ReferenceReward)
    with pytest.raises(ConfigError, match="reference"):
        RLlibTrainConfig(reference="nobody")


def test_reference_reward_of_a_truncated_episode_covers_the_same_span():
    from agents.ppo import ReferenceReward
    from baselines import make_policy

    env = ReferenceReward(FrenzyEnv(workload="synthetic-small", max_steps=5), "srpt_est")
    policy = make_policy("srpt_est", env)
    policy.reset()
    env.reset(seed=1003)
    total, trunc = 0.0, False
    while not trunc:
        _, r, term, trunc, _ = env.step(policy.act(env.unwrapped.action_masks()))
        assert not term
        total += r
    assert total == pytest.approx(0.0, abs=1e-9)  # the reference itself over its own first 5 steps: no settling


def test_a_critic_warmup_update_leaves_the_policy_unchanged(tmp_path):
    from agents.ppo.training import CRITIC_ONLY

    first = train(_tiny(tmp_path, "a"))
    cfg = dataclasses.replace(_tiny(tmp_path, "w"), init_model=str(first / "model.zip"),
                              ppo=dataclasses.replace(_tiny(tmp_path, "w").ppo, critic_warmup_updates=1))
    warm = train(cfg, stop_after_updates=1)
    before, after = _params(first / "model.zip"), _params(warm / "model.zip")
    # (the state dict also lists the shared extractor as pi_features_extractor and vf_features_extractor)
    critic = [k for k in before if k.replace("pi_features", "features").replace("vf_features", "features")
              .startswith(CRITIC_ONLY)]
    assert critic and all(th.equal(before[k], after[k]) for k in before if k not in critic)
    assert any(not th.equal(before[k], after[k]) for k in critic)  # the critic learnt
    line = json.loads((warm / "updates.jsonl").read_text().splitlines()[0])
    assert line["approx_kl"] == pytest.approx(0.0, abs=1e-9)  # the policy's probabilities did not move


def test_gae_with_a_lambda_per_step():
    r = np.array([[0.0], [0.0], [-4.0]])
    v = np.array([[1.0], [2.0], [0.5]])
    d = np.array([[0.0], [0.0], [1.0]])
    lam = np.array([[1.0], [1.0], [0.5]])  # the first two steps took no time: lambda 1 there
    adv, _ = gae(r, v, np.ones((3, 1)), d, np.array([0.0]), lam)
    a3 = -4.0 - 0.5
    a2 = (0.0 + 0.5 - 2.0) + 1.0 * a3
    a1 = (0.0 + 2.0 - 1.0) + 1.0 * a2
    assert np.allclose(adv[:, 0], [a1, a2, a3])
    assert a1 == pytest.approx(-4.0 - 1.0)  # lambda 1 throughout: the return minus the first value
    same, _ = gae(r, v, np.ones((3, 1)), d, np.array([0.0]), 0.5)
    assert np.allclose(same, gae(r, v, np.ones((3, 1)), d, np.array([0.0]), np.full((3, 1), 0.5))[0])
    with pytest.raises(ConfigError, match="same_instant_lambda"):
        PPOConfig(same_instant_lambda=1.5)


def test_within_type_entropy_by_hand_and_without_a_pull_towards_the_largest_type():
    """Wait (one action), two starts at 1/2 each given the type, four resizes at 1/4 each: within-type
    entropies 0, ln 2, ln 4, so the mean over the three legal types is (ln 2 + ln 4) / 3 whatever the type
    probabilities. With the types uniform, the joint entropy still grows with the resize type's logit (its
    gradient there is P(resize) x (ln 4 - the mean within-type entropy) = (ln 4 - ln 8 / 3) / 3); the
    within-type entropy's gradient is 0."""
    from agents.ppo.distribution import factored_log_probs, within_type_entropy

    types = th.tensor([0, 2, 2, 3, 3, 3, 3])  # wait, two starts, four resizes (no timed wait)
    mask = th.ones(1, 7, dtype=th.bool)
    logits = th.zeros(1, 7)
    want = (math.log(2) + math.log(4)) / 3
    for resize_logit in (0.0, 3.0):
        type_logits = th.tensor([[0.0, 0.0, 0.0, resize_logit]], requires_grad=True)
        logp, type_logp, joint = factored_log_probs(logits, type_logits, mask, types)
        within = within_type_entropy(logp, type_logp, mask, types)
        assert float(within[0].detach()) == pytest.approx(want, rel=1e-5)
        if resize_logit == 0.0:
            (g_joint,) = th.autograd.grad(joint.sum(), type_logits, retain_graph=True)
            (g_within,) = th.autograd.grad(within.sum(), type_logits)
            assert float(g_joint[0, 3]) == pytest.approx((math.log(4) - math.log(8) / 3) / 3, rel=1e-4)
            assert float(g_within.abs().max()) < 1e-6
    # a row with only "wait" legal: 0 (the padding of the factored distribution stays out of it)
    only_wait = th.tensor([[True, False, False, False, False, False, False]])
    logp, type_logp, _ = factored_log_probs(logits, th.zeros(1, 4), only_wait, types)
    assert float(within_type_entropy(logp, type_logp, only_wait, types)[0]) == 0.0
    with pytest.raises(ConfigError, match="ppo.entropy"):
        PPOConfig(entropy="per-type")


def test_instant_weights_by_hand():
    """env 0: three decisions at one instant (the third lasts 5 s), then two (the last ends the rollout);
    env 1: one timed step, two decisions ending in an episode end, two more cut by the rollout's end.
    Raw weights 1/3 x3, 1/2 x2 | 1, 1/2 x4: they sum to 5 over 10 steps, so each is doubled."""
    from agents.ppo.rollout import instant_weights

    elapsed = np.array([[0.0, 1.0], [0.0, 0.0], [5.0, 0.0], [0.0, 0.0], [3.0, 0.0]])
    dones = np.zeros((5, 2))
    dones[2, 1] = 1.0
    w = instant_weights(elapsed, dones)
    assert np.allclose(w[:, 0], 2 * np.array([1 / 3, 1 / 3, 1 / 3, 1 / 2, 1 / 2]))
    assert np.allclose(w[:, 1], 2 * np.array([1.0, 1 / 2, 1 / 2, 1 / 2, 1 / 2]))
    assert w.mean() == pytest.approx(1.0)
    assert np.allclose(instant_weights(np.ones((4, 3)), np.zeros((4, 3))), 1.0)  # every step timed: all 1
    assert instant_weights(np.zeros((0, 2)), np.zeros((0, 2))).shape == (0, 2)
    with pytest.raises(ConfigError, match="instant_weighting"):
        PPOConfig(instant_weighting="yes")


@pytest.mark.slow  # a few seconds of training: the slow tier keeps the fast one under 4 minutes
def test_instant_weighting_changes_the_actors_update(tmp_path):
    """The same first update from the same weights and the same rollout, with and without instant weighting:
    the tiny workloads have bursts of same-instant decisions, so the actor's step differs."""
    first = train(_tiny(tmp_path, "a"))
    runs = {}
    for flag in (False, True):
        base = _tiny(tmp_path, f"w{int(flag)}")
        cfg = dataclasses.replace(base, init_model=str(first / "model.zip"),
                                  ppo=dataclasses.replace(base.ppo, instant_weighting=flag))
        runs[flag] = _params(train(cfg, stop_after_updates=1) / "model.zip")
    before = _params(first / "model.zip")
    moved = [k for k in before if not th.equal(runs[False][k], runs[True][k])]
    assert moved, "instant weighting left the update unchanged"
    assert all(not th.equal(before[k], runs[True][k]) for k in moved)


def test_init_model_without_type_demand_starts_a_type_demand_run(tmp_path):
    """A model without ``type_demand`` is the initial weights of a run with it: its new modules start at 0 (the
    first update's approximate KL is measured from the saved model's probabilities), learn at
    ``new_lr_scale`` x the learning rate, are recorded, and a killed run resumes with the same groups."""
    first = train(_tiny(tmp_path, "a"))
    base = _tiny(tmp_path, "d")
    cfg = dataclasses.replace(base, init_model=str(first / "model.zip"),
                              ppo=dataclasses.replace(base.ppo, type_demand=True, new_lr_scale=10.0))
    out = train(cfg, stop_after_updates=1)
    model = read_model(out / "model.zip")
    assert model.policy.features_extractor.type_demand
    state = th.load(out / "checkpoint.pt", weights_only=False)
    new = state["info"]["init_new_parameters"]
    assert new and all("_demand." in k for k in new)
    groups = state["optimizer"]["param_groups"]
    assert [g["lr_scale"] for g in groups] == [1.0, 10.0]
    assert groups[1]["lr"] == pytest.approx(10.0 * groups[0]["lr"])
    line = json.loads((out / "updates.jsonl").read_text().splitlines()[0])
    assert line["approx_kl"] < 0.05  # the grown model started where the saved one was
    done = train(None, resume=out)  # resumes with the two groups
    assert len((done / "updates.jsonl").read_text().splitlines()) == 384 // (64 * 3)
    with pytest.raises(ConfigError, match="new_lr_scale"):
        PPOConfig(new_lr_scale=0.0)


def test_validator_reference_cache_is_reused_and_keyed_by_the_split(tmp_path, monkeypatch):
    """The reference's results are written once and read back (no reference run the second time); another
    split (other validation jobs) is another entry."""
    from agents.ppo import training
    from agents.ppo.training import Validator

    cfg = _tiny(tmp_path, "c")
    cache = tmp_path / "ref.json"
    first = Validator(cfg, cache)
    assert cache.is_file() and len(json.loads(cache.read_text())) == 1

    def refuse(*_a, **_k):
        raise AssertionError("the reference ran although its results were cached")

    monkeypatch.setattr(training, "run_reference", refuse)
    again = Validator(dataclasses.replace(cfg, validation_samples=1), cache)  # draws do not change the reference
    assert np.array_equal(again.ref_jct, first.ref_jct)
    with pytest.raises(AssertionError, match="cached"):
        Validator(dataclasses.replace(cfg, validation_jobs=cfg.validation_jobs + 1), cache)
    monkeypatch.undo()
    other = Validator(dataclasses.replace(cfg, validation_jobs=cfg.validation_jobs + 1), cache)
    assert len(json.loads(cache.read_text())) == 2 and other.ref_jct.shape == first.ref_jct.shape


@pytest.mark.parametrize("objective", ["goodput", "completion"])
def test_sia_teacher_solves_once_per_instant_sets_no_timers_and_follows_sias_plan(objective):
    """The event-driven Sia teacher: one integer program per simulated instant (the first decision of an instant
    takes the first legal step of Sia's plan for that state), no wake-ups, only legal actions, every job done;
    with Sia's objective and with sia_srpt's (what ppo.bc_teacher "sia" and "sia_srpt" build)."""
    from agents.ppo.warmstart import make_teacher
    from baselines.sia import SiaPolicy, SiaTeacher

    env = FrenzyEnv(workload="synthetic-small")
    name = "sia" if objective == "goodput" else "sia_srpt"
    teacher = make_teacher(TrainConfig(ppo=PPOConfig(bc_teacher=name)), env)
    assert isinstance(teacher, SiaTeacher) and teacher.sia.objective == objective
    probe = SiaPolicy(env, objective=objective)  # Sia's plan of the same state, solved independently
    solves = []
    plan_round = teacher.sia.plan_round
    teacher.sia.plan_round = lambda: (solves.append(env.view.now), plan_round())[1]
    env.request_wakeup = lambda t: pytest.fail("the teacher set a timer")
    env.reset(seed=3)
    teacher.reset()
    instants, done, firsts = [], False, 0
    while not done:
        mask = env.action_masks()
        now = env.view.now
        new_instant = not instants or instants[-1] != now
        if new_instant:
            instants.append(now)
            probe.replan()
            first = probe.next_step(mask)
            expected = 0 if first is None else first
        a = teacher.act(mask)
        assert mask[a]
        if new_instant:
            assert a == expected
            firsts += expected != 0
        _, _, term, trunc, info = env.step(a)
        done = term or trunc
    assert solves == instants and firsts > 0
    m = info["metrics"]
    assert m["finished"] + m["rejected"] == m["jobs"] and m["invalid_actions"] == 0


@pytest.mark.slow  # a few seconds of training: the slow tier keeps the fast one under 4 minutes
def test_teacher_pull_decays_lowers_the_teachers_cross_entropy_and_resumes(tmp_path):
    """ppo.bc_coef: the teacher's demonstrations are collected even when an init_model skips the warm start,
    saved beside the run, and pulled towards with a weight that decays linearly (hand values per update); the
    pull lowers the teacher's cross-entropy; a killed run resumes to the same weights."""
    from agents.ppo.training import DEMOS_FILE
    from agents.ppo.warmstart import load_demos, teacher_loss, teacher_tensors

    first = train(_tiny(tmp_path, "a"))
    base = _tiny(tmp_path, "t")
    cfg = dataclasses.replace(base, init_model=str(first / "model.zip"), ppo=dataclasses.replace(
        base.ppo, bc_teacher="sia", bc_coef=5.0, bc_decay=256, learning_rate=1e-3))
    straight = train(cfg)
    assert not (straight / "bc_model.zip").exists()  # the weights came from init_model: no cloning
    lines = [json.loads(x) for x in (straight / "updates.jsonl").read_text().splitlines()]
    assert [x["teacher_coef"] for x in lines] == [5.0, pytest.approx(5.0 * (1 - 192 / 256))]
    assert all(x["teacher_ce"] > 0 for x in lines)
    log = json.loads((straight / "train_log.json").read_text())
    assert log["teacher"] == "sia" and log["teacher_avg_jct_hours"] > 0
    demos = teacher_tensors(load_demos(straight / DEMOS_FILE))
    everything = th.arange(len(demos["actions"]))
    ce = {}
    for name, path in (("before", first / "model.zip"), ("after", straight / "model.zip")):
        with th.no_grad():
            ce[name] = float(teacher_loss(read_model(path).policy, demos, everything))
    assert ce["after"] < ce["before"]
    killed = train(dataclasses.replace(cfg, out_dir=str(tmp_path / "k")), stop_after_updates=1)
    resumed = train(None, resume=killed)
    pa, pb = _params(straight / "model.zip"), _params(resumed / "model.zip")
    assert all(th.equal(pa[k], pb[k]) for k in pa)


def test_teacher_options_are_checked():
    with pytest.raises(ConfigError, match="bc_teacher"):
        PPOConfig(bc_teacher="oracle")
    with pytest.raises(ConfigError, match="bc_coef"):
        PPOConfig(bc_coef=-1.0)
    with pytest.raises(ConfigError, match="bc_episodes"):
        PPOConfig(bc_coef=1.0, bc_episodes=0)
    with pytest.raises(ConfigError, match="bc_decay"):
        PPOConfig(bc_decay=0)
