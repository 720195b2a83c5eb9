"""Plan guides (ppo.guide): the planner's next step as an input, its learnt bonus, loading, training and resume."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch as th

from agents.ppo import PPOConfig, TrainConfig, load_policy, train
from agents.ppo.guide import GUIDES, guide_hints, make_guide
from agents.ppo.loading import PPOPolicy, read_model
from agents.ppo.network import load_growing
from agents.ppo.training import _container
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode

th.set_num_threads(1)


def _cfg(tmp_path, name: str = "g", **ppo) -> TrainConfig:
    kw = dict(n_steps=32, batch_size=48, bc_episodes=0, guide="sia_srpt", guide_bonus=8.0, type_floor=0.01)
    kw.update(ppo)
    return TrainConfig(
        timesteps=192, n_envs=3, jobs_range=(6, 10), validation_jobs=8, validation_episodes=1, train_workloads=4,
        eval_freq=96, checkpoint_minutes=60.0, threads=1, out_dir=str(tmp_path / name), progress=False, seed=2,
        workload="synthetic-small", ppo=PPOConfig(**kw),
    )


def test_guided_adds_the_bonus_to_the_hinted_action_and_its_type_only(tmp_path):
    env = FrenzyEnv(workload="synthetic-small")
    policy = _container(_cfg(tmp_path), env).policy
    n = env.action_space.n
    latent = th.zeros(2, n + 4)
    resize = env.first_resize + 1
    out = policy.guided(latent, th.tensor([0, resize]))
    diff = (out - latent).detach()
    assert float(diff[0, 0]) == 8.0 and float(diff[0, n + 0]) == 8.0  # wait, and the wait type
    assert float(diff[1, resize]) == 8.0 and float(diff[1, n + 3]) == 8.0  # a resize, and the resize type
    assert int((diff != 0).sum()) == 4
    assert th.equal(policy.guided(latent, None), latent)
    loss = policy.guided(latent, th.tensor([0, resize])).sum()
    loss.backward()
    assert th.equal(policy.guide_bonus.grad, th.tensor([2.0, 2.0]))  # the bonus is learnt


def test_a_strong_guide_plays_exactly_the_planners_episode(tmp_path):
    """With a large bonus and no type floor the fresh guided policy carries the plan out step for step: its
    episode equals the planner's own."""
    env = FrenzyEnv(workload="synthetic-small")
    model = _container(_cfg(tmp_path, guide_bonus=60.0, type_floor=0.0), env)
    path = tmp_path / "g.zip"
    model.save(path)
    alone = make_guide("sia_srpt", env)
    obs, _ = env.reset(seed=4)
    alone.reset()
    planned, done = [], False
    while not done:
        a = alone.act(env.action_masks())
        planned.append(a)
        _, _, term, trunc, info = env.step(a)
        done = term or trunc
    policy = load_policy(env, path)
    assert policy.guide is not None and policy.model.policy.guide == "sia_srpt"
    played = []
    predict = policy.predict
    policy.predict = lambda *a, **k: (lambda r: (played.append(int(r[0])), r)[1])(predict(*a, **k))
    result = run_episode(env, policy, seed=4)
    assert played == planned
    assert result.metrics["avg_jct_h"] == pytest.approx(info["metrics"]["avg_jct_h"])


def test_a_guided_model_needs_its_env_and_checks_its_guide(tmp_path):
    env = FrenzyEnv(workload="synthetic-small")
    path = tmp_path / "g.zip"
    _container(_cfg(tmp_path), env).save(path)
    unbound = PPOPolicy(read_model(path))  # loads (to inspect) but cannot act without its env
    obs, _ = env.reset(seed=1)
    with pytest.raises(ConfigError, match="guided by the planner 'sia_srpt'"):
        unbound.predict(obs, action_masks=env.action_masks())
    with pytest.raises(ValueError, match="guide must be one of"):
        make_guide("fifo", env)
    assert guide_hints(None, np.ones((2, 3), bool)) is None
    with pytest.raises(ConfigError, match="ppo.guide"):
        PPOConfig(guide="fifo")
    with pytest.raises(ConfigError, match="ppo.guide_bonus"):
        PPOConfig(guide_bonus=-1.0)
    assert set(GUIDES) == {"sia", "sia_srpt"}


def test_an_unguided_model_loads_into_a_guided_network_with_the_bonus_kept(tmp_path):
    env = FrenzyEnv(workload="synthetic-small")
    plain = _container(dataclasses.replace(_cfg(tmp_path), ppo=PPOConfig(bc_episodes=0)), env).policy
    guided = _container(_cfg(tmp_path, guide_bonus=5.0), env).policy
    new = load_growing(guided, plain.state_dict())
    assert new == ["guide_bonus"]
    assert th.equal(guided.guide_bonus.detach(), th.tensor([5.0, 5.0]))
    shared = plain.state_dict()
    assert all(th.equal(guided.state_dict()[k], v) for k, v in shared.items())


@pytest.mark.slow
def test_guided_training_records_hints_validates_and_resumes_to_the_same_weights(tmp_path):
    straight = train(_cfg(tmp_path, "a"))
    killed = train(_cfg(tmp_path, "b"), stop_after_updates=1)
    resumed = train(None, resume=killed)
    pa = read_model(straight / "model.zip").policy.state_dict()
    pb = read_model(resumed / "model.zip").policy.state_dict()
    assert "guide_bonus" in pa and all(th.equal(pa[k], pb[k]) for k in pa)
    log = json.loads((straight / "train_log.json").read_text())
    assert log["timesteps"] == 192
    env = FrenzyEnv(workload="synthetic-small")
    result = run_episode(env, load_policy(env, straight / "best_model.zip"), seed=1001)
    assert result.metrics["invalid_actions"] == 0


def test_frenzy_train_guide_flag(tmp_path, capsys):
    """--guide sets ppo.guide (sb3 only; a bad name is refused by argparse, naming the choices)."""
    import argparse

    from frenzy_env.cli import main
    from frenzy_env.cli.train import add_parser, build_config

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "--guide", "sia_srpt", "--out", str(tmp_path / "o")])
    assert build_config(args).ppo.guide == "sia_srpt"
    assert build_config(parser.parse_args(["train"])).ppo.guide is None
    gated = build_config(parser.parse_args(["train", "--guide", "sia_srpt", "--guide-gate", "0.03"]))
    assert gated.ppo.guide_gate == 0.03 and gated.ppo.guide == "sia_srpt"
    with pytest.raises(ConfigError, match="ppo.guide_gate needs ppo.guide"):
        build_config(parser.parse_args(["train", "--guide-gate", "0.03"]))
    with pytest.raises(SystemExit):
        main(["train", "--guide", "fifo"])
    assert "invalid choice: 'fifo'" in capsys.readouterr().err
    assert main(["train", "--backend", "rllib", "--guide", "sia", "--out", str(tmp_path / "r")]) == 2
    assert "--guide" in capsys.readouterr().err


def test_gated_mixture_by_hand(tmp_path):
    """guide_gate: pi(a) = (1 - d) [a = hint] + d q(a), d = sigmoid(gate bias) at first (the gate's weights
    start at 0); normalised, the entropy that of pi, and the gate learns from the log-probability of the
    action taken."""
    env = FrenzyEnv(workload="synthetic-small")
    policy = _container(_cfg(tmp_path, guide_gate=0.2), env).policy
    assert not hasattr(policy, "guide_bonus")
    n = env.action_space.n
    types = policy.action_type
    q = th.full((1, n), -1e8)
    legal = [0, env.first_start, env.first_start + 1]  # wait and two starts
    q[0, legal] = th.log(th.tensor([0.5, 0.3, 0.2]))
    type_q = th.full((1, 4), -1e8)
    type_q[0, [0, 2]] = th.log(th.tensor([0.5, 0.5]))
    ctx = th.randn(1, policy.features_extractor.c)
    hint = th.tensor([env.first_start + 1])
    logp, type_logp, ent = policy.gated(q, type_q, ctx, hint)
    want = th.tensor([0.2 * 0.5, 0.2 * 0.3, 0.8 + 0.2 * 0.2])
    assert th.allclose(th.exp(logp[0, legal]), want, atol=1e-6)
    assert float(th.exp(logp.detach()).sum()) == pytest.approx(1.0, abs=1e-6)
    assert th.allclose(th.exp(type_logp[0, [0, 2]]), th.tensor([0.1, 0.9]), atol=1e-6)
    assert float(ent[0]) == pytest.approx(float(-(want * th.log(want)).sum()), rel=1e-5)
    assert int(types[hint]) == 2
    logp[0, env.first_start].backward()  # a deviation: d log(d q) / d (gate logit of starts) = 1 - d
    assert float(policy.gate.bias.grad[2]) == pytest.approx(0.8, abs=1e-6)
    assert float(policy.gate.bias.grad.abs().sum()) == pytest.approx(0.8, abs=1e-6)  # only the hint's type


@pytest.mark.slow  # a few seconds of training: the slow tier keeps the fast one under 4 minutes
def test_a_gated_policy_trains_and_plays_and_loads_an_unguided_model(tmp_path):
    env = FrenzyEnv(workload="synthetic-small")
    plain = _container(dataclasses.replace(_cfg(tmp_path), ppo=PPOConfig(bc_episodes=0)), env).policy
    gated = _container(_cfg(tmp_path, guide_gate=0.05), env).policy
    assert load_growing(gated, plain.state_dict()) == ["gate.weight", "gate.bias"]
    assert th.allclose(th.sigmoid(gated.gate.bias.detach()), th.full((4,), 0.05))
    with pytest.raises(ConfigError, match="ppo.guide_gate"):
        PPOConfig(guide_gate=0.05)  # no guide
    with pytest.raises(ConfigError, match="ppo.guide_gate"):
        PPOConfig(guide="sia_srpt", guide_gate=1.0)
    out = train(_cfg(tmp_path, "gate", guide_gate=0.3))
    lines = [json.loads(x) for x in (out / "updates.jsonl").read_text().splitlines()]
    assert all(0.0 < x["off_plan"] < 1.0 for x in lines)  # it leaves the plan, and mostly follows it
    result = run_episode(env, load_policy(env, out / "model.zip"), seed=1001)
    assert result.metrics["invalid_actions"] == 0
