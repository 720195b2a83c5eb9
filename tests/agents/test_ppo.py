"""agents/ppo/: set-structured policy, the shipped model, `frenzy train`, safe loading."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch as th

import frenzy_env  # noqa: F401  (registers the ids)
from agents.ppo import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_MODEL_PATH,
    TRAIN_SEEDS,
    MixtureGenerator,
    PPOConfig,
    SlotPlanPolicy,
    SlotSetExtractor,
    TrainConfig,
    check_model_path,
    load_policy,
    policy_kwargs_for,
)
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode

th.set_num_threads(1)


def _busy_obs(env: FrenzyEnv, seed: int = 3) -> dict[str, np.ndarray]:
    """An observation with several queued and running jobs (start a few, then wait)."""
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    for _ in range(40):
        mask = env.action_masks()
        legal = np.flatnonzero(mask[1:]) + 1
        a = int(rng.choice(legal)) if legal.size and rng.random() < 0.5 else 0
        obs, _, term, _, _ = env.step(a)
        if term:
            obs, _ = env.reset(seed=seed)
    return obs


@pytest.fixture(scope="module", params=["universal", "cluster"])
def env(request) -> FrenzyEnv:
    """The env under either layout: the universal one (env v6's default) and the cluster one (env v5's)."""
    return FrenzyEnv(workload="synthetic-small", interface=request.param)


@pytest.fixture(scope="module")
def policy(env: FrenzyEnv) -> SlotPlanPolicy:
    th.manual_seed(0)
    kwargs = policy_kwargs_for(env, PPOConfig())
    return SlotPlanPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **kwargs)


def _tensor(obs: dict[str, np.ndarray]) -> dict[str, th.Tensor]:
    return {k: th.as_tensor(v, dtype=th.float32)[None] for k, v in obs.items()}


def _permute_queue(env: FrenzyEnv, obs: dict[str, np.ndarray], perm: np.ndarray) -> dict[str, np.ndarray]:
    out = dict(obs)
    out["queue"] = obs["queue"].reshape(env.queue_shape)[perm].reshape(-1)
    return out


def test_extractor_is_permutation_invariant_over_queue_slots(env, policy):
    obs = _busy_obs(env)
    rows = obs["queue"].reshape(env.queue_shape)
    assert rows[:, 0].sum() >= 2, "the test needs several queued jobs"
    perm = np.random.default_rng(1).permutation(env.queue_slots)
    ext: SlotSetExtractor = policy.features_extractor
    with th.no_grad():
        a = ext.encode(_tensor(obs))
        b = ext.encode(_tensor(_permute_queue(env, obs, perm)))
    th.testing.assert_close(a["context"], b["context"], rtol=1e-5, atol=1e-5)  # pooled: invariant
    th.testing.assert_close(a["queue_emb"][:, perm], b["queue_emb"], rtol=1e-5, atol=1e-5)  # equivariant


def test_start_logits_follow_the_slots(env, policy):
    obs = _busy_obs(env)
    perm = np.random.default_rng(2).permutation(env.queue_slots)
    q, p = env.queue_slots, env.num_plans
    with th.no_grad():
        la = policy.mlp_extractor.forward_actor(policy.extract_features(_tensor(obs)))
        lb = policy.mlp_extractor.forward_actor(policy.extract_features(_tensor(_permute_queue(env, obs, perm))))
    assert la.shape == (1, env.action_space.n + 4)  # the actions' logits, then the 4 type logits (factored)
    s0, r0 = env.first_start, env.first_resize
    start_a = la[0, s0:r0].reshape(q, p)
    start_b = lb[0, s0:r0].reshape(q, p)
    th.testing.assert_close(start_a[perm], start_b, rtol=1e-5, atol=1e-5)
    th.testing.assert_close(la[0, :s0], lb[0, :s0], rtol=1e-5, atol=1e-5)  # the waits
    th.testing.assert_close(la[0, r0:], lb[0, r0:], rtol=1e-5, atol=1e-5)  # resizes


def test_shipped_model_plays_a_legal_episode():
    assert DEFAULT_MODEL_PATH.is_file(), DEFAULT_MODEL_PATH
    assert DEFAULT_MODEL_PATH.stat().st_size < 5_000_000
    cfg = json.loads(DEFAULT_CONFIG_PATH.read_text())["train_config"]
    assert cfg["cluster"] == "frenzy-testbed" and (cfg["queue_slots"], cfg["running_slots"]) == (64, 64)  # env v1
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    policy = load_policy(env)
    result = run_episode(env, policy, seed=1000)
    assert result.metrics["invalid_actions"] == 0
    assert result.metrics["finished"] == result.metrics["jobs"]


def test_load_refuses_directories_and_missing_paths(tmp_path):
    with pytest.raises(ConfigError, match="not a regular file") as exc:
        load_policy(None, tmp_path)
    assert str(tmp_path) in str(exc.value)
    missing = tmp_path / "nope.zip"
    with pytest.raises(ConfigError, match="does not exist") as exc:
        load_policy(None, missing)
    assert str(missing) in str(exc.value)
    # SB3 would silently try "model.zip" for "model": we read exactly the named file
    (tmp_path / "model.zip").write_bytes(DEFAULT_MODEL_PATH.read_bytes())
    with pytest.raises(ConfigError, match="does not exist"):
        check_model_path(tmp_path / "model")
    bad = tmp_path / "bad.zip"
    bad.write_text("not a zip")
    with pytest.raises(ConfigError, match="cannot load model file"):
        load_policy(None, bad)


def test_load_refuses_a_mismatched_env(tmp_path):
    """Another slot count; and a model of the cluster layout (env v5's: the shipped one, or a copy standing for one
    of the user's) on the universal layout (env v6's default), naming the fix."""
    env = FrenzyEnv(workload="synthetic-small", queue_slots=8)
    with pytest.raises(ConfigError, match="queue_slots=8"):
        load_policy(env)  # the universal model: 64 queue slots
    universal = FrenzyEnv(workload="synthetic-small")
    with pytest.raises(ConfigError, match=r"this shipped ppo model plays env v5: .*frenzy evaluate --world v5"):
        load_policy(universal, DEFAULT_MODEL_PATH)
    (tmp_path / "mine.zip").write_bytes(DEFAULT_MODEL_PATH.read_bytes())
    with pytest.raises(ConfigError, match=r"the model reads the cluster layout .*interface='cluster'"):
        load_policy(universal, tmp_path / "mine.zip")


def test_mixture_generator_is_seeded_and_keeps_training_seeds():
    gen = MixtureGenerator(jobs_range=(10, 20))
    a, b = gen.generate(12345), gen.generate(12345)
    assert [j.submit_time for j in a.jobs] == [j.submit_time for j in b.jobs]
    assert 10 <= len(a) <= 20
    assert TRAIN_SEEDS == (0, 500)


def test_frenzy_train_tiny_run(tmp_path):
    from frenzy_env.cli import main

    out = tmp_path / "run"
    code = main(
        [
            "train", "--timesteps", "128", "--n-envs", "1", "--n-steps", "64", "--batch-size", "32",
            "--eval-freq", "64", "--checkpoint-minutes", "1", "--eval-episodes", "1", "--validation-jobs", "8",
            "--workload", "synthetic-small", "--out", str(out), "--no-progress", "--seed", "3", "--bc-episodes", "1",
            "--train-workloads", "4",
        ]
    )  # fmt: skip
    assert code == 0
    files = ("model.zip", "best_model.zip", "bc_model.zip", "config.json", "train_log.json", "checkpoint.pt",
             "learning_curve.csv")
    for name in files:
        assert (out / name).is_file(), name
    assert len((out / "learning_curve.csv").read_text().splitlines()) == 4  # header and 0, 64, 128 decisions
    cfg = TrainConfig.from_dict(json.loads((out / "config.json").read_text()))
    assert cfg.timesteps == 128 and cfg.seed == 3 and cfg.ppo.n_steps == 64
    env = FrenzyEnv(workload="synthetic-small")
    result = run_episode(env, load_policy(env, out / "model.zip"), seed=1001)
    assert result.metrics["invalid_actions"] == 0


def test_train_cli_rejects_bad_trace_option(tmp_path, capsys):
    from frenzy_env.cli import main

    f = tmp_path / "t.csv"
    f.write_text("job_id,submission_time,duration,num_gpu\n")
    assert main(["train", "--trace", f"{f}:colour=red", "--out", str(tmp_path / "o")]) == 2
    assert "colour=red" in capsys.readouterr().err
    assert main(["train", "--trace", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")]) == 2


def test_load_policy_checks_the_observation_version(tmp_path) -> None:
    """A model recorded as trained on another observation encoding is refused, naming both versions."""
    import json
    import shutil

    from agents.ppo import DEFAULT_MODEL_PATH, load_policy
    from agents.ppo.loading import recorded_obs_version
    from frenzy_env.errors import ConfigError
    from frenzy_env.observation import OBS_VERSION

    assert recorded_obs_version(DEFAULT_MODEL_PATH)[0] == OBS_VERSION  # the shipped model's record
    model = tmp_path / "run" / "best_model.zip"
    model.parent.mkdir()
    shutil.copy(DEFAULT_MODEL_PATH, model)
    assert recorded_obs_version(model) is None  # no record: only the spaces are checked
    load_policy(None, model)
    (tmp_path / "run" / "config.json").write_text(json.dumps({"obs_version": OBS_VERSION + 1}))
    with pytest.raises(ConfigError, match=f"observation version {OBS_VERSION + 1}"):
        load_policy(None, model)
    (tmp_path / "run" / "config.json").write_text(json.dumps({"seed": 0}))  # saved before versioning: 1
    assert recorded_obs_version(model)[0] == 1


def test_a_model_trained_on_flattened_observations_loads_and_plays(tmp_path):
    """A MaskablePPO MlpPolicy trained behind gymnasium's FlattenObservation: load_policy flattens the env's
    Dict observations for it (and refuses an env whose flattened size differs)."""
    from gymnasium.wrappers import FlattenObservation
    from sb3_contrib import MaskablePPO

    train_env = FlattenObservation(gym.make("frenzy/HeteroClusterSmall-v5"))
    model = MaskablePPO("MlpPolicy", train_env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(32)
    path = tmp_path / "flat.zip"
    model.save(path)

    env = gym.make("frenzy/HeteroClusterSmall-v5")
    policy = load_policy(env, path)
    result = run_episode(env, policy, seed=0, max_steps=40)
    assert result.metrics["decisions"] == 40
    obs, _ = env.reset(seed=1)
    flat, _ = train_env.reset(seed=1)
    mask = env.unwrapped.action_masks()
    draws = []
    for observation in (obs, flat):  # the same draw from the same distribution, flattened or not
        policy.reset()
        draws.append(policy.predict(observation, action_masks=mask)[0])
    assert draws[0] == draws[1]
    greedy = load_policy(env, path, sample=False)
    assert greedy.predict(obs, action_masks=mask)[0] == greedy.predict(flat, action_masks=mask)[0]
    flat_size = train_env.observation_space.shape[0]  # every float entry and the mask, flattened
    with pytest.raises(ConfigError, match=rf"observation shapes \({flat_size},\)"):
        load_policy(FrenzyEnv(workload="synthetic-small", queue_slots=8), path)
    with pytest.raises(ConfigError, match="load it with its env"):
        load_policy(None, path).predict(obs)


def test_type_demand_features_by_hand():
    """Two GPU types, plans [t0, t0, t1, t1]. Queued job A (wait 0.5) can only use type 0; queued job B
    (wait 0.2) can use both; running job C is on type 1 and has an available plan of type 0."""
    from gymnasium import spaces

    qf = 7 + 4  # 7 job features, then 4 plan slots
    space = spaces.Dict({
        "queue": spaces.Box(0, 2, (2 * qf,)), "running": spaces.Box(0, 2, (2 * qf,)),
        "gpus": spaces.Box(0, 2, (4,)), "nodes": spaces.Box(0, 2, (2,)), "globals": spaces.Box(0, 2, (12,)),
    })
    ext = SlotSetExtractor(space, 2, 2, plan_type=[0, 0, 1, 1], plan_count=[1, 2, 1, 2], embed_dim=8,
                           context_dim=8, critic_pool=True, type_demand=True)
    queue = th.zeros(1, 2, qf)
    queue[0, 0, :2], queue[0, 0, 7:] = th.tensor([1.0, 0.5]), th.tensor([0.3, 0.3, 0.0, 0.0])
    queue[0, 1, :2], queue[0, 1, 7:] = th.tensor([1.0, 0.2]), th.tensor([0.3, 0.0, 0.4, 0.0])
    running = th.zeros(1, 2, qf)
    running[0, 0, 0], running[0, 0, 4] = 1.0, 1.0  # present, GPU type index 1 of (2 - 1)
    running[0, 0, 7:] = th.tensor([0.2, 0.0, 0.3, 0.0])
    demand, plan_demand, q_extra, r_extra = ext.type_demand_features(queue, running)
    # per type: longest wait of jobs that can use it, of jobs bound to it, jobs bound / 8, flexible holders / 8
    assert th.allclose(demand[0], th.tensor([0.5, 0.2, 0.5, 0.0, 1 / 8, 0.0, 0.0, 1 / 8]))
    assert th.allclose(plan_demand[0], th.tensor([0.5, 0.5, 0.0, 0.0]))
    assert th.allclose(q_extra[0], th.tensor([[0.0] * 4, [0.5, 0.0, 0.0, 0.0]]))  # A is bound: 0
    assert th.allclose(r_extra[0], th.tensor([[-0.5, 0.0, 0.0, 0.0], [0.0] * 4]))  # onto a wanted type: -0.5
    # C on type 0 instead (index 0): vacating type 0 for type 1's available plan scores +0.5
    running[0, 0, 4] = 0.0
    _, _, _, r_extra = ext.type_demand_features(queue, running)
    assert th.allclose(r_extra[0, 0], th.tensor([0.0, 0.0, 0.5, 0.0]))


def test_a_model_without_type_demand_loads_into_one_exactly(env):
    """load_growing: type_demand's modules start at 0, so the network gives the same logits and value; any
    other difference is refused."""
    from agents.ppo.network import load_growing

    th.manual_seed(1)
    old = SlotPlanPolicy(env.observation_space, env.action_space, lambda _: 1e-3,
                         **policy_kwargs_for(env, PPOConfig()))
    new = SlotPlanPolicy(env.observation_space, env.action_space, lambda _: 1e-3,
                         **policy_kwargs_for(env, PPOConfig(type_demand=True)))
    demand = {k for k in new.state_dict() if "_demand." in k}
    assert demand and all(not new.state_dict()[k].any() for k in demand)  # a new model starts them at 0 too
    with pytest.raises(RuntimeError):
        new.load_state_dict(old.state_dict())
    for k in demand:  # not 0 before loading: the loader itself sets them
        new.state_dict()[k].fill_(1.0)
    assert set(load_growing(new, old.state_dict())) == demand
    assert all(not new.state_dict()[k].any() for k in demand)
    obs = _busy_obs(env)
    assert _tensor(obs)["queue"].reshape(env.queue_shape)[:, 0].sum() > 0  # jobs wait: the features are live
    f_old, f_new = old.extract_features(_tensor(obs)), new.extract_features(_tensor(obs))
    assert th.equal(old.mlp_extractor.forward_actor(f_old), new.mlp_extractor.forward_actor(f_new))
    assert th.equal(old.mlp_extractor.forward_critic(f_old), new.mlp_extractor.forward_critic(f_new))
    assert load_growing(old, old.state_dict()) == []
    with pytest.raises(RuntimeError):
        load_growing(old, new.state_dict())  # parameters the network does not have
    with pytest.raises(ConfigError, match="type_demand"):
        PPOConfig(type_demand=1)


def test_pair_scorer_is_the_factorised_score_on_present_slots_and_zero_elsewhere():
    """``score(s, p) = sum_k a_k(s) f_k(s, p) + q(s) . k(p) / sqrt(H)`` on present slots (written out here slot by
    slot), 0 on empty ones; the batched matrix product the scorer uses must agree with it."""
    from agents.ppo.network import SlotPlanHead, _PairScorer

    th.manual_seed(0)
    b, s, p, d, c, h = 3, 5, 4, 6, 7, 8
    scorer = _PairScorer(d, c, p, plan_dim=3, hidden=h, plan_in=2)
    emb, times, ref = th.randn(b, s, d), th.rand(b, s, p), th.rand(b, s)
    plan_in, ctx = th.randn(b, p, 2), th.randn(b, c)
    present = th.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=th.float32)  # slot 4 empty in all
    out = scorer(emb, times, ref, plan_in, ctx, present)
    keys = scorer.key_out(th.relu(scorer.key_in(th.cat([scorer.plan_emb.expand(b, p, -1), plan_in], -1))
                                  + scorer.key_ctx(ctx)[:, None, :]))
    for i in range(b):
        for j in range(s):
            if not present[i, j]:
                assert th.all(out[i, j] == 0)
                continue
            hid = th.relu(scorer.slot_in(emb[i, j]) + scorer.slot_ctx(ctx[i]))
            lin = (SlotPlanHead.pair(times[i, j], ref[i, j]) * scorer.coef(hid)).sum(-1)
            att = keys[i] @ scorer.query(hid) / np.sqrt(h)
            assert th.allclose(out[i, j], lin + att, atol=1e-5)
