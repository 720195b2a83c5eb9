"""Training PPO on RLlib: the algorithm's configuration (:func:`build_algorithm_config`), the run
(:func:`train_rllib`) and its ``train_log.json`` (:func:`summarise_result`)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from agents.rllib.config import RLlibTrainConfig
from agents.rllib.envs import ENV_NAME, register_rllib_envs, require_ray
from agents.rllib.rl_module import ray_class
from frenzy_env.errors import ConfigError
from frenzy_env.paths import atomic_write_json


def build_algorithm_config(cfg: RLlibTrainConfig) -> Any:
    """The RLlib ``PPOConfig`` (new API stack, masked module, invalid-action metrics) of ``cfg``.

    It calls :func:`register_rllib_envs` (so :data:`ENV_NAME` is known to ``build_algo()``; after a
    ``ray.shutdown()`` build the config again or call :func:`register_rllib_envs`).
    """
    register_rllib_envs()
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .environment(ENV_NAME, env_config=cfg.env_config())
        .env_runners(
            num_env_runners=cfg.num_env_runners,
            num_envs_per_env_runner=cfg.num_envs_per_env_runner,
            rollout_fragment_length="auto",
        )
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=cfg.train_batch_size,
            minibatch_size=cfg.minibatch_size,
            num_epochs=cfg.num_epochs,
            lr=cfg.lr,
            gamma=cfg.gamma,
            lambda_=cfg.lambda_,
            clip_param=cfg.clip_param,
            entropy_coeff=cfg.entropy_coeff,
            grad_clip=cfg.grad_clip,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ray_class("MaskedPPOTorchRLModule"),
                model_config={"fcnet_hiddens": list(cfg.hidden), "fcnet_activation": "relu"},
            )
        )
        .callbacks(ray_class("InvalidActionCallback"))
        .debugging(seed=cfg.seed, log_level="WARN")
    )


def _number(value: Any) -> float | None:
    """A JSON-safe float (None for missing or NaN values)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def summarise_result(result: dict[str, Any], iteration: int) -> dict[str, Any]:
    """The ``train_log.json`` row of one ``Algorithm.train()`` result (None where a metric is missing,
    e.g. the episode return when no episode ended yet)."""
    runners = result.get("env_runners", {}) or {}
    learner = (result.get("learners", {}) or {}).get("default_policy", {}) or {}
    return {
        "iteration": iteration,
        "episode_return_mean": _number(runners.get("episode_return_mean")),
        "episode_len_mean": _number(runners.get("episode_len_mean")),
        "episodes": int(_number(runners.get("num_episodes")) or 0),
        "env_steps_sampled": int(_number(runners.get("num_env_steps_sampled")) or 0),
        "env_steps_sampled_lifetime": int(_number(result.get("num_env_steps_sampled_lifetime")) or 0),
        "invalid_actions": int(_number(runners.get("invalid_actions")) or 0),
        "policy_loss": _number(learner.get("policy_loss")),
        "vf_loss": _number(learner.get("vf_loss")),
        "entropy": _number(learner.get("entropy")),
        "seconds": _number(result.get("time_this_iter_s")),
    }


def _init_ray(cfg: RLlibTrainConfig) -> bool:
    """Start or join Ray as ``cfg`` says (:func:`frenzy_env.evaluation.distributed.connect`); True if this call did (and
    must shut it down), False if Ray was already initialised in this process."""
    import ray

    from frenzy_env.evaluation.distributed import connect

    if ray.is_initialized():
        return False
    if cfg.address is None:
        cpus = cfg.num_cpus if cfg.num_cpus is not None else (os.cpu_count() or 1)
        if cfg.num_env_runners > cpus:
            raise ConfigError(
                f"num_env_runners ({cfg.num_env_runners}) needs one CPU each, but the local Ray has {cpus} "
                f"(num_cpus={cfg.num_cpus!r}); lower num_env_runners or raise num_cpus"
            )
    return connect(cfg.address, cfg.num_cpus)


def train_rllib(cfg: RLlibTrainConfig) -> Path:
    """Train PPO with RLlib for ``cfg.iterations`` iterations; returns ``cfg.out_dir`` (see the module
    docstring for what it holds). Ray is shut down at the end only if this call started it."""
    if not isinstance(cfg, RLlibTrainConfig):
        raise ConfigError(f"cfg must be an RLlibTrainConfig, got {type(cfg).__name__}")
    require_ray()
    import ray

    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", {**cfg.to_dict(), "backend": "rllib", "ray_version": ray.__version__})
    started = _init_ray(cfg)
    try:
        algo = build_algorithm_config(cfg).build_algo()  # registers the envs in this Ray session
        try:
            rows: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            for it in range(1, cfg.iterations + 1):
                row = summarise_result(algo.train(), it)
                rows.append(row)
                _write_log(out, rows, time.perf_counter() - t0, checkpoint=None)
                if cfg.progress:
                    ret = row["episode_return_mean"]
                    secs = row["seconds"] or 0.0
                    print(
                        f"[rllib] iter {it}/{cfg.iterations}: return_mean "
                        f"{'n/a' if ret is None else f'{ret:.2f}'} ({row['episodes']} episodes), "
                        f"{row['env_steps_sampled']} env steps ({row['env_steps_sampled_lifetime']} total), "
                        f"invalid {row['invalid_actions']}, {secs:.1f} s",
                        flush=True,
                    )
            checkpoint = Path(algo.save_to_path(str((out / "checkpoint").resolve())))
            _write_log(out, rows, time.perf_counter() - t0, checkpoint=checkpoint)
        finally:
            algo.stop()
    finally:
        if started:
            ray.shutdown()
    return out


def _write_log(out: Path, rows: list[dict[str, Any]], wall: float, checkpoint: Path | None) -> None:
    log = {
        "backend": "rllib",
        "iterations": rows,
        "env_steps": rows[-1]["env_steps_sampled_lifetime"] if rows else 0,
        "invalid_actions": sum(r["invalid_actions"] for r in rows),
        "wall_seconds": wall,
        "checkpoint": None if checkpoint is None else str(checkpoint),
    }
    atomic_write_json(out / "train_log.json", log)
