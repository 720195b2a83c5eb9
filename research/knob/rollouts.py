"""PPO for the knob with several plays of the same workload per update (Mao et al.'s multiple rollouts).

With one play per workload the knob's updates are mostly noise (research/results/ppo/training.md): a reference
plan on the same arrivals removes the arrival sequence's variance, but not that of the knob's own draws over
hundreds of instants, and the critic cannot tell one episode's state from another's. Here each update plays every one of
``workloads_per_update`` training workloads ``rollouts`` (K) times with the current policy (sampled levels,
:class:`research.knob.agent.KnobEnv` with ``reference=False``, one decision per ``hold`` instants), and the advantage of
play k's decision at simulated time t is

``A = C_others(t) - C_k(t)``,  ``C(t)``: a play's cost after t (jobs in the system integrated over time),

with ``C_others(t)`` the mean of the other K - 1 plays' cost after the same instant (Mao et al., ICLR 2019: an
input-dependent baseline, here a leave-one-out mean over plays of the same input, so it depends on nothing
play k did and leaves the gradient unbiased), all divided by the workload's mean cost over its K plays and
multiplied by ``gain`` (a 7-hour and a 300-hour episode weigh the same). No critic and no discount: the cost
after t is exactly what a decision at t can change, and the baseline is measured, not learned. The update is
PPO's clipped surrogate (``clip_range``, ``n_epochs`` over minibatches of ``batch_size``, advantages
normalised over the update) with an entropy bonus ``ent_coef``.

The model is a stable-baselines3 ``PPO`` whose policy head is trained (its value head is not used), so it loads
and plays like any knob model (:func:`research.knob.agent.load_knob_policy`). Plays run in ``n_envs`` worker
processes; a checkpoint (``checkpoints/knob_N_steps.zip``, N the decisions so far) follows every update whose
decisions pass a multiple of ``checkpoint_every``, and ``resume`` continues from the last (the plays of an
unfinished update start over, the workload draw continues from the checkpoint's update). ``plays.csv`` logs
every play: update, workload, play, decisions, instants, the average JCT and each level's share.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from research.knob.agent import KnobConfig, KnobEnv, _last_checkpoint, save_knob_model, start_at_plan

PLAY_COLUMNS = ["update", "workload", "play", "decisions", "instants", "avg_jct_h", "cost", "seconds"]


@dataclasses.dataclass
class Play:
    """One episode of a workload under the sampled policy: its ``obs`` (n, d), ``actions`` (n,), their
    ``logp`` under the policy that drew them, the simulated ``times`` (n,) of the decisions, and the cumulative
    cost curve (``cost_times``, ``cost``: the env's cost after each env step, scaled by ``gain`` / jobs)."""

    workload: int
    obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray
    times: np.ndarray
    cost_times: np.ndarray
    cost: np.ndarray
    avg_jct_h: float
    instants: int
    seconds: float

    @property
    def total(self) -> float:
        return float(self.cost[-1])

    def cost_after(self, t: np.ndarray) -> np.ndarray:
        """The cost this play accrued after each of the simulated times ``t`` (linear between env steps)."""
        return self.total - np.interp(t, self.cost_times, self.cost)


def leave_one_out_advantages(plays: list[Play], gain: float = 1.0) -> list[np.ndarray]:
    """Each play's advantages: at each of its decisions, the other plays' mean cost after that instant minus
    its own, times ``gain`` / the plays' mean total cost. ``plays`` are K >= 2 plays of one workload."""
    k = len(plays)
    if k < 2:
        raise ConfigError(f"leave_one_out_advantages: needs at least 2 plays of a workload, got {k}")
    if len({p.workload for p in plays}) != 1:
        raise ConfigError("leave_one_out_advantages: the plays must be of one workload")
    scale = gain / max(np.mean([p.total for p in plays]), 1e-12)
    out = []
    for i, p in enumerate(plays):
        own = p.cost_after(p.times)
        others = np.mean([q.cost_after(p.times) for j, q in enumerate(plays) if j != i], axis=0)
        out.append(((others - own) * scale).astype(np.float64))
    return out


# ---- worker side: each process keeps one KnobEnv and one policy network --------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(cfg_dict: dict) -> None:
    import torch as th
    from stable_baselines3.common.policies import ActorCriticPolicy

    th.set_num_threads(1)
    cfg = KnobConfig.from_dict(cfg_dict)
    env = KnobEnv(cfg, reference=False)
    policy = ActorCriticPolicy(env.observation_space, env.action_space, lambda _: 0.0, net_arch=list(cfg.net_arch))
    _WORKER.update(cfg=cfg, env=env, policy=policy.eval())


def _play(workload: int, state: dict, seed: int) -> Play:
    """One sampled episode of ``workload`` with the policy weights ``state`` (draws seeded by ``seed``)."""
    import torch as th

    env, policy = _WORKER["env"], _WORKER["policy"]
    policy.load_state_dict(state)
    rng = np.random.default_rng(seed)
    t_start = time.perf_counter()
    x, info = env.reset(options={"workload": int(workload)})
    obs, actions, logp, times = [], [], [], []
    done = False
    while not done:
        with th.no_grad():
            probs = policy.get_distribution(th.as_tensor(x)[None]).distribution.probs.numpy()[0].astype(np.float64)
        probs /= probs.sum()
        a = int(rng.choice(len(probs), p=probs))
        obs.append(x)
        actions.append(a)
        logp.append(np.log(max(probs[a], 1e-30)))
        times.append(env.env.view.now)
        x, _, term, trunc, info = env.step(a)
        done = term or trunc
    instants = len(np.unique(env.cost_times)) - 1
    return Play(int(workload), np.asarray(obs, np.float32), np.asarray(actions, np.int64), np.asarray(logp),
                np.asarray(times, np.float64), np.asarray(env.cost_times), np.asarray(env.cost),
                float(info["metrics"]["avg_jct_h"]), instants, time.perf_counter() - t_start)


# ---- the trainer -----------------------------------------------------------------------------------------------


def ppo_update(model: Any, obs: np.ndarray, actions: np.ndarray, logp_old: np.ndarray, adv: np.ndarray,
               cfg: KnobConfig, rng: np.random.Generator) -> dict[str, float]:
    """PPO's clipped surrogate on the policy head of ``model`` (SB3 PPO): ``cfg.n_epochs`` passes over
    minibatches of ``cfg.batch_size``; advantages normalised over the whole batch. Returns the mean policy
    loss, entropy, approximate KL and clipped fraction of the last epoch."""
    import torch as th

    policy = model.policy
    policy.set_training_mode(True)
    a_std = adv.std()
    adv = (adv - adv.mean()) / (a_std if a_std > 1e-12 else 1.0)
    o, a, lp, A = (th.as_tensor(v) for v in (obs, actions, logp_old.astype(np.float32), adv.astype(np.float32)))
    n = len(a)
    stats: dict[str, list[float]] = {"loss": [], "entropy": [], "kl": [], "clipped": []}
    for epoch in range(cfg.n_epochs):
        last = epoch == cfg.n_epochs - 1
        for idx in np.array_split(rng.permutation(n), max(1, int(np.ceil(n / cfg.batch_size)))):
            i = th.as_tensor(idx)
            _, logp, ent = policy.evaluate_actions(o[i], a[i])
            ratio = th.exp(logp - lp[i])
            surr = th.min(ratio * A[i], th.clamp(ratio, 1 - cfg.clip_range, 1 + cfg.clip_range) * A[i])
            loss = -surr.mean() - cfg.ent_coef * ent.mean()
            policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            policy.optimizer.step()
            if last:
                with th.no_grad():
                    stats["loss"].append(float(loss))
                    stats["entropy"].append(float(ent.mean()))
                    stats["kl"].append(float((lp[i] - logp).mean()))
                    stats["clipped"].append(float(((ratio - 1).abs() > cfg.clip_range).float().mean()))
    policy.set_training_mode(False)
    return {k: float(np.mean(v)) for k, v in stats.items()}


def train_knob_rollouts(cfg: KnobConfig, out: str | Path, resume: bool = False, log: Any = print) -> Path:
    """Train the knob with K plays per workload per update (see the module docstring) into ``out``
    (``config.json``, ``plays.csv``, ``updates.csv``, ``start.zip``, ``checkpoints/``, ``model.zip`` +
    ``model.json``). ``resume`` continues from the last checkpoint with the run's own config and the budget
    (``timesteps``, ``max_minutes``) of ``cfg``. Returns the model's path."""
    import torch as th
    from stable_baselines3 import PPO

    if cfg.rollouts < 2:
        raise ConfigError(f"rollouts must be >= 2 for train_knob_rollouts, got {cfg.rollouts!r} (1: train_knob)")
    out = Path(out)
    ckpt_dir = out / "checkpoints"
    if resume:
        saved = KnobConfig.from_dict(json.loads((out / "config.json").read_text()))
        cfg = dataclasses.replace(saved, timesteps=cfg.timesteps, max_minutes=cfg.max_minutes)
    elif (out / "config.json").exists():
        raise ConfigError(f"{out} already holds a run: resume it or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    ckpt_dir.mkdir(exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    th.set_num_threads(1)
    deadline = None if cfg.max_minutes is None else time.monotonic() + 60 * cfg.max_minutes

    last = _last_checkpoint(ckpt_dir) if resume else None
    if last is not None:
        model = PPO.load(last, device="cpu")
        state = json.loads((ckpt_dir / f"{last.stem}.state.json").read_text())
        update, rng_state = int(state["update"]), state["rng"]
        log(f"resume: {last.name} ({model.num_timesteps:,} decisions, update {update})")
    else:
        spaces_env = KnobEnv(cfg, reference=False)  # for the spaces only: it plays nothing
        model = PPO("MlpPolicy", spaces_env, learning_rate=cfg.learning_rate, ent_coef=cfg.ent_coef,
                    clip_range=cfg.clip_range, policy_kwargs={"net_arch": list(cfg.net_arch)}, seed=cfg.seed,
                    device="cpu", verbose=0)
        start_at_plan(model, cfg.start_plan_prob, cfg.reference_level)
        save_knob_model(model, cfg, out / "start.zip")
        update, rng_state = 0, None
    rng = np.random.default_rng(cfg.seed)
    if rng_state is not None:
        rng.bit_generator.state = rng_state
    plays_csv, updates_csv = out / "plays.csv", out / "updates.csv"
    for path, cols in ((plays_csv, PLAY_COLUMNS + [f"level{i}" for i in range(len(cfg.levels))]),
                       (updates_csv, ["update", "decisions", "seconds", "loss", "entropy", "kl", "clipped",
                                      "adv_abs_mean"])):
        if not path.exists():
            with path.open("w", newline="") as f:
                csv.writer(f).writerow(cols)
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    next_ckpt = (model.num_timesteps // cfg.checkpoint_every + 1) * cfg.checkpoint_every
    with ProcessPoolExecutor(cfg.n_envs, mp_context=ctx, initializer=_init_worker,
                             initargs=(cfg.to_dict(),)) as pool:
        while model.num_timesteps < cfg.timesteps and (deadline is None or time.monotonic() < deadline):
            t0 = time.perf_counter()
            workloads = rng.choice(cfg.pool, size=min(cfg.workloads_per_update, cfg.pool), replace=False)
            state = {k: v.detach().clone() for k, v in model.policy.state_dict().items()}
            seeds = rng.integers(2**31, size=(len(workloads), cfg.rollouts))
            futures = [[pool.submit(_play, int(w), state, int(seeds[i, k])) for k in range(cfg.rollouts)]
                       for i, w in enumerate(workloads)]
            groups = [[f.result() for f in fs] for fs in futures]
            adv = np.concatenate([a for plays in groups for a in leave_one_out_advantages(plays, cfg.gain)])
            plays = [p for g in groups for p in g]
            obs, actions = np.concatenate([p.obs for p in plays]), np.concatenate([p.actions for p in plays])
            stats = ppo_update(model, obs, actions, np.concatenate([p.logp for p in plays]), adv, cfg, rng)
            decisions = len(obs)
            model.num_timesteps += decisions
            update += 1
            seconds = time.perf_counter() - t0
            with plays_csv.open("a", newline="") as f:
                w = csv.writer(f)
                for i, p in enumerate(plays):
                    shares = np.bincount(p.actions, minlength=len(cfg.levels)) / max(len(p.actions), 1)
                    w.writerow([update, p.workload, i % cfg.rollouts, len(p.actions), p.instants,
                                f"{p.avg_jct_h:.6f}", f"{p.total:.6f}", f"{p.seconds:.1f}"]
                               + [f"{s:.4f}" for s in shares])
            with updates_csv.open("a", newline="") as f:
                csv.writer(f).writerow([update, model.num_timesteps, f"{seconds:.1f}"]
                                       + [f"{stats[k]:.5f}" for k in ("loss", "entropy", "kl", "clipped")]
                                       + [f"{np.mean(np.abs(adv)):.5f}"])
            share = np.bincount(actions, minlength=len(cfg.levels)) / decisions
            log(f"update {update}: {model.num_timesteps:,} decisions, workloads {list(map(int, workloads))}, "
                f"{seconds:.0f} s, entropy {stats['entropy']:.3f}, kl {stats['kl']:.4f}, levels "
                + " ".join(f"{s:.2f}" for s in share))
            if model.num_timesteps >= next_ckpt:
                _checkpoint(model, cfg, ckpt_dir, update, rng)
                next_ckpt = (model.num_timesteps // cfg.checkpoint_every + 1) * cfg.checkpoint_every
    _checkpoint(model, cfg, ckpt_dir, update, rng)
    save_knob_model(model, cfg, out / "model.zip")
    log(f"knob model: {out / 'model.zip'} ({model.num_timesteps:,} decisions, {update} updates)")
    return out / "model.zip"


def _checkpoint(model: Any, cfg: KnobConfig, folder: Path, update: int, rng: np.random.Generator) -> None:
    """``knob_N_steps.zip`` (SB3's checkpoint naming, so :func:`research.knob.agent._last_checkpoint` and the run's
    ``config.json`` find it) and beside it the update count and the workload generator's state."""
    path = folder / f"knob_{model.num_timesteps}_steps.zip"
    model.save(path)
    path.with_suffix(".state.json").write_text(json.dumps({"update": update, "rng": rng.bit_generator.state}))
