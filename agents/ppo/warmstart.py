"""The behaviour-cloning warm start of PPO: scripted teachers, their demonstrations and imitation.

:class:`GrowTeacher` (:class:`SrptTeacher`'s starts plus the doubling baseline's growing resizes) plays
training episodes (:func:`collect_teacher`); :func:`behaviour_clone` fits the actor to its actions. The
planner teacher (``ppo.bc_teacher`` "sia" or "sia_srpt") is :class:`baselines.sia.SiaTeacher`, beside the
planner it drives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from torch import nn

from agents.ppo.config import SIA_TEACHERS, TrainConfig
from baselines.sia import SiaTeacher


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
        sim = env.view  # what every policy may read (frenzy_env.simulator.view.SimView)
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


class GrowTeacher(SrptTeacher):
    """:class:`SrptTeacher`'s starts, and when it would wait, the doubling baseline's *growing* resizes (a
    running job moved to a plan with more GPUs, into GPUs that would idle): a teacher that also resizes, so
    cloning it does not teach the policy that resizes never happen."""

    def __init__(self, env: Any, gpu_cap: float = 4.0) -> None:
        from baselines import make_policy

        super().__init__(env, gpu_cap)
        self.doubling = make_policy("doubling", env)

    def act(self, mask: np.ndarray) -> int:
        a = super().act(mask)
        if a != 0:
            return a
        env = self.env
        b = int(self.doubling.act(mask))
        if b >= env.first_resize and mask[b]:
            r, plan = divmod(b - env.first_resize, env.num_plans)
            job = int(env.visible_running[r])
            view = env.view
            if view.plan_count[plan] > view.plan_count[view.running[job].plan]:
                return b
        return 0 if mask[0] else int(np.flatnonzero(mask)[0])


def make_teacher(cfg: TrainConfig, env: Any) -> Any:
    """The warm-start teacher ``cfg.ppo.bc_teacher`` names, bound to ``env``."""
    if cfg.ppo.bc_teacher in SIA_TEACHERS:
        return SiaTeacher(env, objective=SIA_TEACHERS[cfg.ppo.bc_teacher])
    return GrowTeacher(env, cfg.ppo.bc_gpu_cap)


def collect_teacher(cfg: TrainConfig, generator: Any) -> dict[str, Any]:
    """Play ``cfg.ppo.bc_episodes`` training episodes with the teacher (:func:`make_teacher`).

    Returns observations (dict of (n, ...) arrays of the network's keys), masks (n, A), actions (n,), the
    teacher's mean average JCT in hours and the share of its actions that are resizes.
    """
    from agents.ppo.rollout import obs_keys
    from agents.ppo.workloads import make_env

    p = cfg.ppo
    env = make_env(cfg, generator)
    teacher = make_teacher(cfg, env)
    keys = obs_keys(env.observation_space.spaces)
    obs_buf: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    masks, actions, jcts = [], [], []
    rng = np.random.default_rng(cfg.seed + 7)
    from frenzy_env.progress import progress_bar

    bar = progress_bar(p.bc_episodes, show=cfg.progress, unit="episode", desc=f"teacher {p.bc_teacher}")
    for _ in range(p.bc_episodes):
        obs, _ = env.reset(seed=int(rng.integers(cfg.train_workloads)))
        if hasattr(teacher, "reset"):
            teacher.reset()
        done = False
        while not done:
            mask = env.action_masks()
            a = teacher.act(mask)
            for k in keys:
                obs_buf[k].append(obs[k])
            masks.append(mask)
            actions.append(a)
            obs, _, term, trunc, info = env.step(a)
            done = term or trunc
        jcts.append(info["metrics"]["avg_jct_h"])
        bar.update(1)
    bar.close()
    acts = np.array(actions)
    return {
        "obs": {k: np.stack(v).astype(np.float32) for k, v in obs_buf.items()},
        "masks": np.stack(masks),
        "actions": acts,
        "teacher_avg_jct_hours": float(np.mean(jcts)),
        "teacher_resize_share": float(np.mean(acts >= env.first_resize)),
    }


def behaviour_clone(policy: Any, cfg: TrainConfig, data: dict[str, Any], log: Any = print) -> dict:
    """Warm start: fit the actor to the teacher's actions (cross-entropy of the policy's masked, factored
    distribution, whose type floor keeps every action type alive). The critic is not fitted: with the
    differenced reward a policy like the teacher has returns near 0, where a fresh critic starts.
    Returns the final imitation accuracy and sample count."""
    p = cfg.ppo
    n = len(data["actions"])
    demos = teacher_tensors(data)
    policy.set_training_mode(True)
    opt = th.optim.Adam(policy.parameters(), lr=p.bc_lr)
    gen = th.Generator().manual_seed(cfg.seed)
    acc = 0.0
    for epoch in range(p.bc_epochs):
        perm = th.randperm(n, generator=gen)
        correct, total_ce = 0, 0.0
        for i in range(0, n, p.batch_size):
            idx = perm[i : i + p.batch_size]
            ce, logp = _teacher_ce(policy, demos, idx)
            opt.zero_grad()
            ce.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            total_ce += float(ce.detach()) * len(idx)
            correct += int((logp.argmax(-1) == demos["actions"][idx]).sum())
        acc = correct / n
        log(f"behaviour cloning epoch {epoch + 1}/{p.bc_epochs}: cross-entropy {total_ce / n:.3f}, accuracy {acc:.3f}")
    policy.set_training_mode(False)
    return {"bc_samples": n, "bc_accuracy": acc}


def teacher_tensors(data: dict[str, Any]) -> dict[str, Any]:
    """The demonstrations of :func:`collect_teacher` as tensors (no copy): obs (key -> (n, ...)), masks,
    actions."""
    return {
        "obs": {k: th.as_tensor(v) for k, v in data["obs"].items()},
        "masks": th.as_tensor(data["masks"]),
        "actions": th.as_tensor(data["actions"]),
    }


def teacher_loss(policy: Any, demos: dict[str, Any], idx: th.Tensor) -> th.Tensor:
    """Mean cross-entropy of the teacher's actions under the policy on demonstrations ``idx``: KL(teacher ||
    policy) up to the teacher's (zero) entropy, the pull a PPO update adds with a decaying weight."""
    return _teacher_ce(policy, demos, idx)[0]


def _teacher_ce(policy: Any, demos: dict[str, Any], idx: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """(mean cross-entropy of the teacher's actions, the policy's log-probabilities (B, A)) on demonstrations
    ``idx``: what cloning and the pull both minimise."""
    from agents.ppo.rollout import policy_outputs

    logp, _, _, _ = policy_outputs(policy, {k: v[idx] for k, v in demos["obs"].items()}, demos["masks"][idx])
    return -logp.gather(1, demos["actions"][idx, None]).mean(), logp


def save_demos(data: dict[str, Any], path: Any) -> None:
    """The demonstrations to ``path`` (.npz, uncompressed), so a resumed run keeps the same ones."""
    arrays = {f"obs_{k}": v for k, v in data["obs"].items()}
    np.savez(path, masks=data["masks"], actions=data["actions"], **arrays)


def load_demos(path: Any) -> dict[str, Any]:
    """What :func:`save_demos` wrote (obs, masks, actions)."""
    with np.load(path) as z:
        return {
            "obs": {k[4:]: z[k] for k in z.files if k.startswith("obs_")},
            "masks": z["masks"],
            "actions": z["actions"],
        }
