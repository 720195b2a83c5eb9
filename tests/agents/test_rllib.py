"""PPO on Ray RLlib (agents/rllib/) and ``frenzy train --backend rllib``; skipped without Ray installed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from agents.rllib import (  # noqa: E402
    ENV_NAME,
    MASK_KEY,
    OBSERVATIONS_KEY,
    InvalidStepInfo,
    RLlibActionMaskObservation,
    RLlibTrainConfig,
    flat_feature_space,
    make_env,
    make_rllib_env,
    register_rllib_envs,
    train_rllib,
)
from frenzy_env.cli import main  # noqa: E402
from frenzy_env.env import FrenzyEnv  # noqa: E402
from frenzy_env.errors import ConfigError, UnknownNameError  # noqa: E402

ENV_KW = {"cluster": "frenzy-testbed", "workload": "synthetic-small", "predictor": "extended"}

#: The RLlib snippet of docs/ray.md ("RLlib outside the CLI"), executed verbatim by test_readme_rllib_snippet.
README_SNIPPET = """\
# needs the [ray] extra: pip install -e ".[ray]" (without it, this example says so and does nothing)
import importlib.util

if importlib.util.find_spec("ray") is None:
    print('Ray is not installed: pip install -e ".[ray]" to run this example')
else:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

    from agents.rllib import register_rllib_envs

    register_rllib_envs()  # every frenzy/* id, in the layout of RLlib's action-masking module

    config = (
        PPOConfig()
        .environment("frenzy/HeteroClusterSmall-v5", env_config={"max_steps": 50})
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=200, minibatch_size=50, num_epochs=1)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=ActionMaskingTorchRLModule))
    )
    algo = config.build_algo()
    result = algo.train()
    print("episode return mean:", result["env_runners"]["episode_return_mean"])
    algo.stop()
"""


@pytest.fixture(scope="module")
def env() -> FrenzyEnv:
    return FrenzyEnv(**ENV_KW)


@pytest.fixture(scope="module")
def module(env):
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from agents.rllib import MaskedPPOTorchRLModule

    torch.manual_seed(0)
    spec = RLModuleSpec(
        module_class=MaskedPPOTorchRLModule,
        observation_space=env.observation_space,
        action_space=env.action_space,
        model_config={"fcnet_hiddens": [32, 32]},
    )
    return spec.build()


def _batch(obs: dict, n: int) -> dict:
    from ray.rllib.core.columns import Columns

    return {Columns.OBS: {k: torch.as_tensor(np.repeat(v[None], n, axis=0)) for k, v in obs.items()}}


# ------------------------------------------------------------------------------------------ module
def test_import_does_not_import_ray():
    code = "import sys, agents.rllib; assert not any(m == 'ray' or m.startswith('ray.') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_keeps_dict_space_and_flattens_features(env, module):
    assert module.observation_space == env.observation_space  # checkpoints rebuild from the env's space
    assert MASK_KEY not in module.feature_keys
    flat = flat_feature_space(env.observation_space)
    assert flat.shape == (sum(env.observation_space[k].shape[0] for k in module.feature_keys),)


@pytest.mark.parametrize("forward", ["forward_exploration", "forward_inference", "forward_train"])
def test_only_the_legal_action_is_ever_chosen(env, module, forward):
    from ray.rllib.core.columns import Columns

    obs, _ = env.reset(seed=0)
    legal = np.flatnonzero(obs[MASK_KEY])
    k = int(legal[-1])  # a start action, not wait
    assert k != 0
    only_k = dict(obs)
    only_k[MASK_KEY] = np.zeros_like(obs[MASK_KEY])
    only_k[MASK_KEY][k] = 1
    batch = _batch(only_k, 64)
    with torch.no_grad():
        out = getattr(module, forward)(batch)
    logits = out[Columns.ACTION_DIST_INPUTS]
    assert logits.shape == (64, env.action_space.n)
    assert torch.all(logits.argmax(-1) == k)
    dist = module.get_exploration_action_dist_cls().from_logits(logits)
    assert torch.all(dist.sample() == k)
    assert torch.isfinite(logits).all()  # FLOAT_MIN, not -inf: no NaN in the loss
    assert batch[Columns.OBS][MASK_KEY].shape == (64, env.action_space.n)  # the caller's batch is untouched


def test_sampling_with_the_real_mask_is_always_legal(env, module):
    from ray.rllib.core.columns import Columns

    obs, _ = env.reset(seed=3)
    legal = obs[MASK_KEY].astype(bool)
    with torch.no_grad():
        logits = module.forward_exploration(_batch(obs, 500))[Columns.ACTION_DIST_INPUTS]
        values = module.compute_values(_batch(obs, 4))
    actions = module.get_exploration_action_dist_cls().from_logits(logits).sample().numpy()
    assert legal[actions].all()
    assert values.shape == (4,)


def test_invalid_step_info_and_callback_count_illegal_actions(env):
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from agents.rllib import InvalidActionCallback

    wrapped = make_env(dict(ENV_KW, num_envs=1))
    assert isinstance(wrapped, InvalidStepInfo)
    obs, info = wrapped.reset(seed=0)
    assert "action_mask" not in info
    illegal = int(np.flatnonzero(obs[MASK_KEY] == 0)[0])
    legal = int(np.flatnonzero(obs[MASK_KEY])[0])
    infos = [info]
    for action in (illegal, legal, illegal):
        obs, _, _, _, info = wrapped.step(action)
        infos.append(info)
    assert [i["invalid_step"] for i in infos[1:]] == [1, 0, 1]
    episode = SingleAgentEpisode(
        observations=[obs] * 4, actions=[illegal, legal, illegal], rewards=[0.0] * 3, infos=infos, len_lookback_buffer=0
    )
    logger = MetricsLogger()
    InvalidActionCallback().on_sample_end(metrics_logger=logger, samples=[episode])
    assert logger.peek("invalid_actions") == 2


def test_config_errors_name_field_and_value():
    with pytest.raises(ConfigError, match=r"iterations must be a positive integer, got 0"):
        RLlibTrainConfig(iterations=0)
    with pytest.raises(ConfigError, match=r"num_env_runners must be an integer >= 0, got -1"):
        RLlibTrainConfig(num_env_runners=-1)
    with pytest.raises(ConfigError, match=r"minibatch_size must be <= train_batch_size \(128\), got 256"):
        RLlibTrainConfig(train_batch_size=128, minibatch_size=256)
    with pytest.raises(ConfigError, match=r"gamma must be a finite number > 0.0 and <= 1.0, got 1.5"):
        RLlibTrainConfig(gamma=1.5)
    with pytest.raises(ConfigError, match=r"lr must be .* got nan"):
        RLlibTrainConfig(lr=float("nan"))
    with pytest.raises(ConfigError, match=r"num_cpus \(2\) applies to a local Ray only"):
        RLlibTrainConfig(address="auto", num_cpus=2)
    with pytest.raises(UnknownNameError, match="workload preset 'mix'"):
        RLlibTrainConfig(workload="mix")
    with pytest.raises(ConfigError, match="'lr_rate'"):
        RLlibTrainConfig.from_dict({"lr_rate": 0.1})
    cfg = RLlibTrainConfig(hidden=[64, 64])
    assert RLlibTrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_more_env_runners_than_local_cpus_is_refused(tmp_path):
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray session is already running")
    cfg = RLlibTrainConfig(num_env_runners=3, num_cpus=2, out_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"num_env_runners \(3\) needs one CPU each"):
        train_rllib(cfg)
    assert not ray.is_initialized()


# ------------------------------------------------------------------------------------------ CLI flags
@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--backend", "rllib", "--timesteps", "100"], "--timesteps"),
        (["--backend", "rllib", "--n-steps", "64", "--verbose", "1"], "--n-steps, --verbose"),
        (["--iterations", "2"], "--iterations"),
        (["--backend", "sb3", "--num-env-runners", "0"], "--num-env-runners"),
        (["--address", "auto"], "--address"),
    ],
)
def test_flags_of_the_other_backend_are_errors(tmp_path, capsys, argv, flag):
    assert main(["train", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert flag in err and "only to --backend" in err
    assert not (tmp_path / "o").exists()


def test_rllib_cli_rejects_the_sb3_mix_workload(tmp_path, capsys):
    assert main(["train", "--backend", "rllib", "--workload", "mix", "--out", str(tmp_path / "o")]) == 2
    assert "unknown workload preset 'mix'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ training
@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rllib") / "run"
    code = main(
        [
            "train", "--backend", "rllib", "--iterations", "2", "--num-env-runners", "1", "--num-cpus", "2",
            "--n-envs", "2", "--train-batch-size", "256", "--batch-size", "64", "--learning-rate", "3e-4",
            "--seed", "1", "--workload", "synthetic-small", "--out", str(out), "--no-progress",
        ]
    )  # fmt: skip
    return code, out


def test_frenzy_train_rllib_cli_run(cli_run, env):
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModule

    code, out = cli_run
    assert code == 0
    cfg = RLlibTrainConfig.from_dict(json.loads((out / "config.json").read_text()))
    assert (cfg.iterations, cfg.num_env_runners, cfg.num_envs_per_env_runner) == (2, 1, 2)
    assert (cfg.train_batch_size, cfg.minibatch_size) == (256, 64)
    assert cfg.lr == 3e-4 and cfg.seed == 1
    log = json.loads((out / "train_log.json").read_text())
    assert [row["iteration"] for row in log["iterations"]] == [1, 2]
    assert all(row["env_steps_sampled"] >= 256 for row in log["iterations"])
    assert log["env_steps"] >= 512
    assert log["invalid_actions"] == 0  # every sampled action was legal
    assert all(row["invalid_actions"] == 0 for row in log["iterations"])
    assert (out / "checkpoint" / "rllib_checkpoint.json").is_file()
    assert log["checkpoint"] == str((out / "checkpoint").resolve())
    # the trained module restores from the checkpoint (the lazily built class pickles by reference)
    module = RLModule.from_checkpoint(out / "checkpoint" / "learner_group" / "learner" / "rl_module" / "default_policy")
    obs, _ = env.reset(seed=7)
    with torch.no_grad():
        logits = module.forward_inference(_batch(obs, 1))[Columns.ACTION_DIST_INPUTS]
    assert obs[MASK_KEY][int(logits.argmax())] == 1


def test_train_rllib_in_process_sampling_finishes_episodes(tmp_path):
    import ray

    cfg = RLlibTrainConfig(
        iterations=1, num_env_runners=0, num_envs_per_env_runner=1, train_batch_size=256, minibatch_size=64,
        num_epochs=1, max_episode_steps=40, num_cpus=1, out_dir=str(tmp_path / "r0"), progress=False,
        reference=None,  # the env's own reward (minus jobs x hours): the return's sign is known
    )  # fmt: skip
    was_running = ray.is_initialized()
    out = train_rllib(cfg)
    assert ray.is_initialized() == was_running  # it shuts down only a Ray it started
    (row,) = json.loads((out / "train_log.json").read_text())["iterations"]
    assert row["episodes"] >= 5 and row["episode_len_mean"] <= 40
    assert row["episode_return_mean"] is not None and row["episode_return_mean"] <= 0
    assert row["invalid_actions"] == 0
    assert ENV_NAME == "frenzy-rllib-v4"


# ------------------------------------------------------------------------------------------ evaluation
def _small_env(cluster: str = "frenzy-testbed", interface: str | None = None, jobs: int = 10) -> FrenzyEnv:
    """``interface`` None: the env's default layout (the universal one), as the CLI's run was trained on."""
    from frenzy_env.workload import make_generator

    layout = {} if interface is None else {"interface": interface}
    return FrenzyEnv(cluster=cluster, workload=make_generator("synthetic-small", num_jobs=jobs), **layout)


def test_load_rllib_policy_plays_an_episode_with_legal_actions(cli_run):
    from agents.rllib import MODULE_SUBDIR, RLlibPolicy, load_rllib_policy
    from frenzy_env.evaluation.episodes import run_episode

    _, out = cli_run
    env = _small_env()
    policy = load_rllib_policy(env, out)
    assert isinstance(policy, RLlibPolicy) and policy.name == "rllib"
    assert torch.get_num_threads() == 1
    for other in (out / "checkpoint", out / "checkpoint" / MODULE_SUBDIR):  # the same module from each
        assert load_rllib_policy(env, other).path == policy.path == out / "checkpoint" / MODULE_SUBDIR
    # a barely trained policy may keep taking the always-legal timed waits: cap the episode, check legality
    result = run_episode(env, policy, seed=1, max_steps=400)
    assert result.metrics["invalid_actions"] == 0 and result.metrics["jobs"] == 10
    assert result.metrics["finished"] == 10 or result.metrics["steps"] == 400
    obs, _ = env.reset(seed=2)
    first, state = policy.predict(obs, deterministic=True)
    again, _ = policy.predict(obs, deterministic=True, action_masks=env.action_masks())
    assert state is None and first.shape == () and int(first) == int(again)
    assert obs[MASK_KEY][int(first)] == 1


def test_rllib_policy_sampling_is_legal_and_reproducible_per_episode(cli_run):
    from agents.rllib import load_rllib_policy

    _, out = cli_run
    env = _small_env()
    policy = load_rllib_policy(env, out, seed=3)
    obs, _ = env.reset(seed=4)
    policy.reset()
    batch = {k: np.repeat(v[None], 200, axis=0) for k, v in obs.items()}
    actions, _ = policy.predict(batch, deterministic=False)
    assert actions.shape == (200,) and obs[MASK_KEY][actions].all()
    policy.reset()
    assert np.array_equal(policy.predict(batch, deterministic=False)[0], actions)  # reset restarts the stream
    only = np.zeros_like(obs[MASK_KEY])  # an explicit mask wins over the observation's
    only[int(np.flatnonzero(obs[MASK_KEY])[-1])] = 1
    forced, _ = policy.predict(obs, deterministic=False, action_masks=only.astype(bool))
    assert only[int(forced)] == 1


def test_frenzy_evaluate_rllib_policy(cli_run, capsys):
    _, out = cli_run
    argv = ["evaluate", "--policies", "fifo,rllib", "--rllib-checkpoint", str(out), "--workload", "synthetic-small",
            "--max-jobs", "10", "--seeds", "1", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| synthetic-small | rllib |" in printed and "| synthetic-small | fifo |" in printed


def test_rllib_checkpoint_of_another_cluster_is_refused(cli_run, capsys, tmp_path):
    """The CLI's run is of frenzy-testbed in the default layout (the universal one, env v6's, which plays on any
    cluster: test_rllib_universal.py); on doubling-64 in the cluster layout (``--env interface=cluster``, env v5's,
    whose spaces differ between clusters) it is refused, before any episode, naming both clusters."""
    from agents.rllib import load_rllib_policy

    _, out = cli_run
    argv = ["evaluate", "--policies", "fifo,rllib", "--rllib-checkpoint", str(out), "--cluster", "doubling-64",
            "--workload", "synthetic-small", "--max-jobs", "10", "--seeds", "1", "--no-progress",
            "--env", "interface=cluster", "--out", str(tmp_path / "ev")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"RLlib checkpoint {str(out)!r} does not fit" in err, err
    assert "cluster 'frenzy-testbed'" in err and "cluster 'doubling-64'" in err
    assert not (tmp_path / "ev").exists()  # refused before any episode ran
    trained, other = FrenzyEnv(workload="synthetic-small").action_space.n, _small_env("doubling-64", "cluster")
    with pytest.raises(ConfigError, match=rf"action space Discrete\({trained}\) vs Discrete\({other.action_space.n}\)"):
        load_rllib_policy(other, out / "checkpoint")


@pytest.mark.slow
def test_frenzy_evaluate_rllib_policy_on_the_ray_backend_matches_local(cli_run, tmp_path, monkeypatch):
    import pandas as pd

    _, out = cli_run
    monkeypatch.chdir(out.parent)  # a relative checkpoint path still reaches the Ray workers
    common = ["evaluate", "--policies", "rllib", "--rllib-checkpoint", out.name, "--workload", "synthetic-small",
              "--max-jobs", "10", "--seeds", "2", "--no-progress"]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--backend", "ray", "--num-cpus", "2", "--out", str(tmp_path / "ray")]) == 0
    cols = ["policy", "seed", "avg_jct_h", "makespan_h", "invalid_actions"]
    local, remote = (
        pd.read_csv(tmp_path / run / "episodes.csv")[cols].sort_values("seed", ignore_index=True)
        for run in ("local", "ray")
    )
    pd.testing.assert_frame_equal(local, remote)
    assert (local["invalid_actions"] == 0).all()


# ------------------------------------------------------------------------------------------ RLlib outside the CLI
def test_action_mask_observation_has_the_stock_layout(env):
    wrapped = RLlibActionMaskObservation(env)
    space = wrapped.observation_space
    n = env.action_space.n
    assert list(space.spaces) == [MASK_KEY, OBSERVATIONS_KEY]
    mask_space = space[MASK_KEY]
    assert mask_space.dtype == np.float32 and mask_space.shape == (n,)
    assert (mask_space.low == 0).all() and (mask_space.high == 1).all()
    assert space[OBSERVATIONS_KEY] == flat_feature_space(env.observation_space)
    raw, _ = env.reset(seed=5)
    obs = wrapped.observation(raw)
    assert obs in space
    assert obs[MASK_KEY].dtype == np.float32 and np.array_equal(obs[MASK_KEY], raw[MASK_KEY])
    keys = [k for k in env.observation_space.spaces if k != MASK_KEY]
    assert np.array_equal(obs[OBSERVATIONS_KEY], np.concatenate([raw[k] for k in keys]))
    with pytest.raises(ValueError, match="RLlibActionMaskObservation needs a Dict observation space"):
        RLlibActionMaskObservation(gym.make("CartPole-v1"))


def test_register_rllib_envs_registers_every_id_wrapped():
    from ray.tune.registry import ENV_CREATOR, _global_registry

    from frenzy_env.registration import ENV_PRESETS

    ids = register_rllib_envs()
    assert {p.env_id for p in ENV_PRESETS} <= set(ids) and "frenzy/HeteroClusterSmall-v5" in ids
    for env_id in (*ids, ENV_NAME):
        assert _global_registry.contains(ENV_CREATOR, env_id)
    creator = _global_registry.get(ENV_CREATOR, "frenzy/HeteroClusterSmall-v5")  # a pickle round trip
    made = creator({"max_steps": 3, "num_envs": 2})
    assert isinstance(made, RLlibActionMaskObservation) and made.unwrapped.max_steps == 3
    obs, info = made.reset(seed=0)
    assert obs in made.observation_space and "action_mask" not in info
    _, _, _, truncated, info = made.step(int(np.flatnonzero(obs[MASK_KEY])[0]))
    assert info["invalid_step"] == 0  # InvalidStepInfo sits below, so InvalidActionCallback works too
    assert make_rllib_env("frenzy/Doubling64-v5").unwrapped.cluster.name == "doubling-64"


@pytest.mark.parametrize("module_kind", ["stock", "ours"])
def test_masking_modules_on_the_wrapped_layout_choose_only_legal_actions(env, module_kind):
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

    from agents.rllib import MaskedPPOTorchRLModule

    wrapped = RLlibActionMaskObservation(env)
    torch.manual_seed(0)
    cls = ActionMaskingTorchRLModule if module_kind == "stock" else MaskedPPOTorchRLModule
    module = RLModuleSpec(
        module_class=cls, observation_space=wrapped.observation_space, action_space=wrapped.action_space,
        model_config={"fcnet_hiddens": [32]},
    ).build()  # fmt: skip
    obs, _ = wrapped.reset(seed=0)
    k = int(np.flatnonzero(obs[MASK_KEY])[-1])
    only_k = {OBSERVATIONS_KEY: obs[OBSERVATIONS_KEY], MASK_KEY: np.zeros_like(obs[MASK_KEY])}
    only_k[MASK_KEY][k] = 1.0
    with torch.no_grad():
        logits = module.forward_exploration(_batch(only_k, 64))[Columns.ACTION_DIST_INPUTS]
    assert torch.all(module.get_exploration_action_dist_cls().from_logits(logits).sample() == k)


def test_build_algorithm_config_registers_the_env_itself():
    from ray.tune.registry import ENV_CREATOR, _global_registry

    from agents.rllib import build_algorithm_config

    cfg = build_algorithm_config(RLlibTrainConfig(num_env_runners=0))
    assert cfg.env == ENV_NAME and _global_registry.contains(ENV_CREATOR, ENV_NAME)


@pytest.mark.filterwarnings("ignore:.*Overriding environment rllib-single-agent-env-v0")  # RLlib's, per Algorithm
def test_readme_rllib_snippet(capsys):
    """The docs/ray.md snippet runs verbatim: 1 PPO iteration of the stock masking module on a registered id."""
    import ray

    readme = Path(__file__).resolve().parents[2] / "docs" / "ray.md"
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.S) if readme.is_file() else []
    in_readme = [b for b in blocks if "register_rllib_envs()" in b]
    for block in in_readme:  # the page's snippet must be this one
        assert block == README_SNIPPET
    was_running = ray.is_initialized()
    namespace: dict = {"__name__": "__readme__"}
    try:
        exec(compile(README_SNIPPET, "docs/ray.md (RLlib outside the CLI)", "exec"), namespace)
    finally:
        if not was_running and ray.is_initialized():
            ray.shutdown()
    result = namespace["result"]
    assert result["env_runners"]["num_env_steps_sampled"] >= 200
    assert result["env_runners"]["num_episodes"] >= 1  # max_steps=50 truncates episodes
    assert "episode return mean:" in capsys.readouterr().out
