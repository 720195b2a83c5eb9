"""Training the MaskablePPO agent: :func:`train` runs warm start, PPO, validation and checkpoints for a config.

:func:`train` writes the configuration, the models (final, best on validation, warm-started), checkpoints,
the validation curve, TensorBoard logs and a training log into ``cfg.out_dir``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

from agents.ppo.config import TrainConfig
from agents.ppo.network import SlotPlanPolicy, policy_kwargs_for
from agents.ppo.warmstart import behaviour_clone, collect_teacher, scale_reward
from agents.ppo.workloads import _training_generator, make_env, make_validation_env
from frenzy_env.observation import OBS_VERSION


def _callbacks(cfg: TrainConfig, out: Path, eval_env: Any) -> list[Any]:
    from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback

    class RewindingEval(MaskableEvalCallback):
        """MaskableEvalCallback that replays the same validation workloads at every evaluation, and also
        evaluates before the first update (so a warm-started policy is a candidate for the best model)."""

        def _on_training_start(self) -> None:
            super()._on_training_start()
            self._on_step()  # n_calls is 0 here: evaluates

        def _on_step(self) -> bool:
            if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                self.eval_env.env_method("rewind")
            return super()._on_step()

    class Progress(BaseCallback):
        """tqdm progress bar; logs each finished episode's average JCT (hours) to TensorBoard."""

        def __init__(self, total: int, show: bool) -> None:
            super().__init__()
            self.total, self.show, self.bar = total, show, None
            self.last_jct = math.nan

        def _on_training_start(self) -> None:
            from frenzy_env.progress import progress_bar

            self.bar = progress_bar(self.total, show=self.show, unit="step", desc="train")

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", ()):
                m = info.get("metrics")
                if m:
                    self.last_jct = m["avg_jct_h"]
                    self.logger.record_mean("rollout/avg_jct_h", self.last_jct)
                    self.logger.record_mean("rollout/gpu_hours", m["gpu_hours"])
            if self.bar is not None:
                self.bar.update(self.training_env.num_envs)
                if self.n_calls % 200 == 0:
                    self.bar.set_postfix_str(f"last avg JCT {self.last_jct:.2f} h")
            return True

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    per_env = lambda steps: max(1, steps // cfg.n_envs)  # noqa: E731  callbacks count vec steps
    eval_cb = RewindingEval(
        eval_env,
        n_eval_episodes=cfg.validation_episodes,
        eval_freq=per_env(cfg.eval_freq),
        best_model_save_path=str(out),
        log_path=str(out / "eval"),
        deterministic=True,
        verbose=cfg.verbose,
    )
    ckpt = CheckpointCallback(
        save_freq=per_env(cfg.checkpoint_freq), save_path=str(out / "checkpoints"), name_prefix="ppo"
    )
    return [Progress(cfg.timesteps, cfg.progress), eval_cb, ckpt]



def _quiet(*_: Any) -> None:
    """A logger that prints nothing (behaviour cloning without --verbose or progress)."""


def _has_tensorboard() -> bool:
    """TensorBoard logs need the ``tensorboard`` package; without it training runs and warns once."""
    import importlib.util
    import warnings

    if importlib.util.find_spec("tensorboard") is None:
        warnings.warn("tensorboard is not installed: no TensorBoard logs (pip install tensorboard)", stacklevel=3)
        return False
    return True


def train(cfg: TrainConfig) -> Path:
    """Train MaskablePPO as configured; returns the output folder.

    Writes ``config.json`` (the full configuration, before training starts), ``model.zip`` (final),
    ``best_model.zip`` (best on validation), ``checkpoints/``, ``eval/evaluations.npz`` (validation curve),
    ``tb/`` (TensorBoard) and ``train_log.json`` (wall time, timesteps).
    """
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    th.set_num_threads(cfg.threads)
    set_random_seed(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record = {**cfg.to_dict(), "obs_version": OBS_VERSION}  # load_policy checks the encoding against it
    (out / "config.json").write_text(json.dumps(record, indent=2) + "\n")
    gen = _training_generator(cfg)
    p = cfg.ppo
    t0 = time.time()
    info: dict[str, Any] = {}
    data = None
    if p.bc_episodes > 0:
        data = collect_teacher(cfg, gen)
        info["teacher_avg_jct_hours"] = data["teacher_avg_jct_hours"]
    fns = [lambda r=r: make_env(cfg, gen, r) for r in range(cfg.n_envs)]
    venv = SubprocVecEnv(fns) if cfg.vec_env == "subproc" and cfg.n_envs > 1 else DummyVecEnv(fns)
    eval_env = DummyVecEnv([lambda: make_validation_env(cfg)])
    if data is not None:  # a fixed reward scale: the std of the teacher's discounted returns
        reward_scale = float(max(np.std(data["returns"]), 1e-6))
        info["reward_scale"] = reward_scale
        venv = scale_reward(venv, reward_scale)
        eval_env = scale_reward(eval_env, 1.0)  # same wrapper type; validation reports raw returns
    elif p.normalize_reward:
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=p.gamma, clip_reward=100.0)
        eval_env = VecNormalize(eval_env, norm_obs=False, norm_reward=False, training=False)
    probe = make_env(cfg, gen)
    lr0, frac = p.learning_rate, p.lr_final_fraction
    model = MaskablePPO(
        SlotPlanPolicy,
        venv,
        learning_rate=lambda progress: lr0 * (frac + (1 - frac) * progress),
        n_steps=p.n_steps,
        batch_size=p.batch_size,
        n_epochs=p.n_epochs,
        gamma=p.gamma,
        gae_lambda=p.gae_lambda,
        clip_range=p.clip_range,
        ent_coef=p.ent_coef,
        vf_coef=p.vf_coef,
        max_grad_norm=p.max_grad_norm,
        target_kl=p.target_kl,
        policy_kwargs=policy_kwargs_for(probe, p),
        tensorboard_log=str(out / "tb") if _has_tensorboard() else None,
        seed=cfg.seed,
        device="cpu",
        verbose=cfg.verbose,
    )
    probe.close()
    if data is not None:
        log = print if cfg.verbose or cfg.progress else _quiet
        info.update(behaviour_clone(model, cfg, data, info["reward_scale"], log=log))
        info["bc_seconds"] = time.time() - t0
        model.save(out / "bc_model.zip")
        del data
    model.learn(cfg.timesteps, callback=_callbacks(cfg, out, eval_env), tb_log_name="ppo")
    wall = time.time() - t0
    model.save(out / "model.zip")
    (out / "train_log.json").write_text(
        json.dumps(
            {
                "wall_seconds": wall,
                "timesteps": int(model.num_timesteps),
                "torch_threads": th.get_num_threads(),
                **info,
            },
            indent=2,
        )
        + "\n"
    )
    venv.close()
    eval_env.close()
    return out


