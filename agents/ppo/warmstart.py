"""The behaviour-cloning warm start of PPO: a scripted teacher, its demonstrations, imitation and reward scale.

:class:`SrptTeacher` plays training episodes (:func:`collect_teacher`); :func:`behaviour_clone` fits the
actor to its actions and the critic to its discounted returns; :func:`scale_reward` divides the training
rewards by the fixed scale those returns give (the critic is pre-trained on that scale).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch as th
from torch import nn

from agents.ppo.config import TrainConfig


class SrptTeacher:
    """Warm-start teacher: shortest estimated remaining time first, on its fastest legal plan with at most
    ``gpu_cap`` x the requested GPUs. It reads only what schedulers may know (``sim.work_estimate``, the
    requested GPU count, predicted iteration times), never the true work; it never resizes.
    """

    def __init__(self, env: Any, gpu_cap: float = 4.0) -> None:
        self.env = env.unwrapped
        self.gpu_cap = float(gpu_cap)

    def act(self, mask: np.ndarray) -> int:
        env = self.env
        sim = env.view  # what every policy may read (frenzy_env.policy.SimView)
        qv = env.visible_queue
        p = sim.num_plans
        if len(qv) == 0:
            return 0
        legal = env.start_rows(mask)  # (k, P)
        if not legal.any():
            return 0
        rem = np.maximum(sim.work_estimate[qv] - sim.done_iters[qv], 0.0)
        times = rem[:, None] * sim.iter_time[qv]  # (k, P) predicted seconds
        best = np.where(sim.available_plans(qv), times, np.inf).min(axis=1)
        for k in np.argsort(best, kind="stable"):
            if not legal[k].any():
                continue
            want = (sim.jobs[int(qv[k])].requested_gpus or 1) * self.gpu_cap
            ok = legal[k] & (sim.plan_count <= want)
            if not ok.any():
                ok = legal[k]
            return env.first_start + int(k) * p + int(np.argmin(np.where(ok, times[k], np.inf)))
        return 0


def collect_teacher(cfg: TrainConfig, generator: Any) -> dict[str, Any]:
    """Play ``cfg.ppo.bc_episodes`` training episodes with :class:`SrptTeacher`.

    Returns observations (dict of (n, ...) arrays), masks (n, A), actions (n,), discounted returns (n,)
    (``cfg.ppo.gamma``, raw rewards) and the teacher's mean average JCT in hours.
    """
    from frenzy_env.env import FrenzyEnv

    p = cfg.ppo
    env = FrenzyEnv(
        cluster=cfg.cluster, workload=generator, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots
    )
    teacher = SrptTeacher(env, p.bc_gpu_cap)
    obs_buf: dict[str, list[np.ndarray]] = {k: [] for k in env.observation_space.spaces}
    masks, actions, returns, jcts = [], [], [], []
    rng = np.random.default_rng(cfg.seed + 7)
    for _ in range(p.bc_episodes):
        obs, _ = env.reset(seed=int(rng.integers(2**31 - 1)))
        done, rewards = False, []
        while not done:
            mask = env.action_masks()
            a = teacher.act(mask)
            for k, v in obs.items():
                obs_buf[k].append(v)
            masks.append(mask)
            actions.append(a)
            obs, r, term, trunc, info = env.step(a)
            rewards.append(r)
            done = term or trunc
        g, ep_returns = 0.0, np.zeros(len(rewards))
        for t in range(len(rewards) - 1, -1, -1):
            g = rewards[t] + p.gamma * g
            ep_returns[t] = g
        returns.append(ep_returns)
        jcts.append(info["metrics"]["avg_jct_h"])
    return {
        "obs": {k: np.stack(v) for k, v in obs_buf.items()},
        "masks": np.stack(masks),
        "actions": np.array(actions),
        "returns": np.concatenate(returns),
        "teacher_avg_jct_hours": float(np.mean(jcts)),
    }


def behaviour_clone(model: Any, cfg: TrainConfig, data: dict[str, Any], reward_scale: float, log: Any = print) -> dict:
    """Warm start: fit the actor to the teacher's actions (masked cross-entropy) and the critic to the
    teacher's discounted returns divided by ``reward_scale`` (mean squared error, weight ``vf_coef``).
    Returns the final imitation accuracy and sample count."""
    p = cfg.ppo
    n = len(data["actions"])
    obs_t = {k: th.as_tensor(v) for k, v in data["obs"].items()}
    mask_t = th.as_tensor(data["masks"])
    act_t = th.as_tensor(data["actions"])
    ret_t = th.as_tensor(data["returns"] / reward_scale, dtype=th.float32)
    policy = model.policy
    policy.set_training_mode(True)
    opt = th.optim.Adam(policy.parameters(), lr=p.bc_lr)
    gen = th.Generator().manual_seed(cfg.seed)
    acc = 0.0
    for epoch in range(p.bc_epochs):
        perm = th.randperm(n, generator=gen)
        correct, total_ce, total_vf = 0, 0.0, 0.0
        for i in range(0, n, p.batch_size):
            idx = perm[i : i + p.batch_size]
            feats = policy.extract_features({k: v[idx] for k, v in obs_t.items()})
            logits, latent_vf = policy.mlp_extractor(feats)
            logits = logits.masked_fill(~mask_t[idx], -1e8)
            ce = nn.functional.cross_entropy(logits, act_t[idx])
            vf = nn.functional.mse_loss(policy.value_net(latent_vf).squeeze(-1), ret_t[idx])
            loss = ce + p.vf_coef * vf
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            total_ce += float(ce.detach()) * len(idx)
            total_vf += float(vf.detach()) * len(idx)
            correct += int((logits.argmax(-1) == act_t[idx]).sum())
        acc = correct / n
        log(
            f"behaviour cloning epoch {epoch + 1}/{p.bc_epochs}: cross-entropy {total_ce / n:.3f}, "
            f"accuracy {acc:.3f}, value mse {total_vf / n:.3f}"
        )
    policy.set_training_mode(False)
    return {"bc_samples": n, "bc_accuracy": acc}


@functools.lru_cache(maxsize=1)
def _scale_reward_class() -> type:
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class ScaleReward(VecEnvWrapper):
        """VecEnv wrapper dividing rewards by a fixed ``scale``."""

        def __init__(self, venv: Any, scale: float) -> None:
            super().__init__(venv)
            self.scale = float(scale)

        def reset(self) -> Any:
            return self.venv.reset()

        def step_wait(self) -> Any:
            obs, rewards, dones, infos = self.venv.step_wait()
            return obs, rewards / self.scale, dones, infos

    return ScaleReward


def scale_reward(venv: Any, scale: float) -> Any:
    """``venv`` with rewards divided by the fixed ``scale`` (SB3 is imported lazily)."""
    return _scale_reward_class()(venv, scale)
