"""Rollouts of many in-process envs and GAE with a discount per step (per unit of simulated time).

:class:`VecRollout` steps ``n`` :class:`~frenzy_env.env.FrenzyEnv` in this process, feeding all their
observations through the policy as one batch (on a few cores this beats subprocess envs, whose pipes cost
more than a step). Each step stores the observation, mask, action, log-probability, value, shaped reward
(:class:`~agents.ppo.reference_reward.RewardShaper`) and the step's discount ``exp(-dt / horizon)`` (``dt``: the
simulated seconds the step lasted; 1 without a horizon). :func:`gae` turns them into advantages. An episode cut
by a budget (``truncated``: the env's ``max_steps`` or ``max_sim_hours``, or :attr:`VecRollout.steps_per_job`)
is not an end of the task: the reward settles nothing against the reference (both compared over the same span)
and the step's reward adds its discount times the critic's value of the last observation (bootstrapping, as
stable-baselines3 does), so a cut does not look like the end of all cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch as th

from agents.ppo.guide import guide_hints

#: observation keys the network reads under ``interface="cluster"`` (the mask travels separately, as bool)
OBS_KEYS = ("queue", "running", "gpus", "nodes", "globals")
#: observation keys the network reads under ``interface="universal"`` (no ``nodes``; the ``plans`` rows)
UNIVERSAL_OBS_KEYS = ("queue", "running", "plans", "gpus", "globals")


def obs_keys(obs: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys the network reads of an observation (or a Dict space's ``spaces``, or a dict of stacked ones):
    :data:`UNIVERSAL_OBS_KEYS` when it has a ``plans`` entry, else :data:`OBS_KEYS`."""
    return UNIVERSAL_OBS_KEYS if "plans" in obs else OBS_KEYS


def step_discounts(dt: np.ndarray, horizon_s: float | None) -> np.ndarray:
    """``exp(-dt / horizon_s)`` per step (ones when ``horizon_s`` is None: undiscounted)."""
    dt = np.asarray(dt, dtype=np.float64)
    if horizon_s is None:
        return np.ones_like(dt)
    return np.exp(-np.maximum(dt, 0.0) / float(horizon_s))


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    discounts: np.ndarray,
    dones: np.ndarray,
    last_values: np.ndarray,
    lam: float | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation with a discount per step.

    All arrays are (T, N) (steps x envs) but ``last_values`` (N,), the value of the state after the last step.
    ``dones[t]`` is 1 when the episode ended at step t (no bootstrap across it); ``discounts[t]`` is the
    discount applied to what follows step t. ``delta_t = r_t + g_t (1 - d_t) V_{t+1} - V_t`` and ``A_t =
    delta_t + g_t lam_t (1 - d_t) A_{t+1}``; ``lam`` is one lambda or a (T, N) array of them (per step).
    Returns ``(advantages, returns = advantages + values)``.
    """
    t_len = rewards.shape[0]
    lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), rewards.shape)
    adv = np.zeros_like(values, dtype=np.float64)
    last = np.zeros(values.shape[1:], dtype=np.float64)
    for t in range(t_len - 1, -1, -1):
        nxt = last_values if t == t_len - 1 else values[t + 1]
        keep = 1.0 - dones[t]
        delta = rewards[t] + discounts[t] * keep * nxt - values[t]
        last = delta + discounts[t] * lam[t] * keep * last
        adv[t] = last
    return adv, adv + values


def instant_weights(elapsed: np.ndarray, dones: np.ndarray) -> np.ndarray:
    """(T, N) weights that make every decision *instant* of an env count once in the policy loss.

    The decisions an env takes at one simulated instant (starts and resizes before time moves on) form a
    group: a group ends at a step that lasted simulated time (``elapsed > 0``), that ended its episode
    (``dones``), or at the rollout's last step. Each step weighs ``1 / (its group's size)``; the weights are then
    scaled to mean 1 over the rollout, so the loss keeps its scale. A burst of 20 same-instant resizes then
    weighs as much as one start that is followed by simulated time, rather than 20 times as much.
    """
    elapsed = np.asarray(elapsed, dtype=np.float64)
    w = np.ones_like(elapsed)
    if elapsed.size == 0:
        return w
    ends = (elapsed > 0) | (np.asarray(dones) > 0)
    ends[-1] = True
    for i in range(elapsed.shape[1]):
        stops = np.flatnonzero(ends[:, i])
        sizes = np.diff(np.concatenate(([-1], stops)))
        w[:, i] = np.repeat(1.0 / sizes, sizes)
    return w * (w.size / w.sum())


def obs_tensors(obs: dict[str, np.ndarray]) -> dict[str, th.Tensor]:
    """The network's inputs of stacked observations (no copy)."""
    return {k: th.from_numpy(obs[k]) for k in obs_keys(obs)}


def policy_outputs(
    policy: Any, obs: dict[str, th.Tensor], mask: th.Tensor, hint: Any = None
) -> tuple[th.Tensor, Any, th.Tensor, th.Tensor]:
    """``(logp (B, A), type_logp (B, 4) or None, entropy (B,), values (B,))`` of a
    :class:`~agents.ppo.network.SlotPlanPolicy`: normalised log-probabilities of the (factored or flat) masked
    distribution. ``hint`` (B,): a guided policy's guide actions (:mod:`agents.ppo.guide`), for its bonus or its
    gated mixture; None: the network's own distribution."""
    from agents.ppo.distribution import ILLEGAL_LOGP, entropy

    e = policy.features_extractor.encode(obs)  # the named pieces directly: no flat concat and split
    head = policy.mlp_extractor
    latent_pi = head.actor(e)
    gated = hint is not None and getattr(policy, "guide_gate", None) is not None
    if hint is not None:
        latent_pi = policy.guided(latent_pi, hint)  # a gated policy's latent stays as it is
    values = policy.value_net(head.critic(e)).squeeze(-1)
    if policy.factored:
        logp, type_logp, ent = policy.action_log_probs(latent_pi, mask)
    else:
        logp = th.log_softmax(latent_pi.masked_fill(~mask, ILLEGAL_LOGP), -1)
        type_logp, ent = None, entropy(logp)
    if gated:
        logp, type_logp, ent = policy.gated(logp, type_logp, e["context"], hint)
    return logp, type_logp, ent, values


def sample_actions(logp: th.Tensor, mask: th.Tensor, generator: th.Generator | None = None) -> th.Tensor:
    """(B,) actions drawn from normalised log-probabilities ``logp`` (B, A) over the legal entries of ``mask``
    only (an inverse-CDF draw on the legal entries, one uniform per row from ``generator``, torch's global one
    by default: cheaper than a multinomial over every action)."""
    bi, ai = mask.nonzero(as_tuple=True)
    p = th.exp(logp[bi, ai].double())
    b = logp.shape[0]
    counts = th.bincount(bi, minlength=b)
    last = th.cumsum(counts, 0) - 1
    first = last - counts + 1
    c = th.cumsum(p, 0)
    row_total = th.zeros(b, dtype=p.dtype).index_add(0, bi, p)
    row_start = th.cumsum(row_total, 0) - row_total
    k = th.searchsorted(c, row_start + th.rand(b, dtype=p.dtype, generator=generator) * row_total, right=True)
    return ai[th.minimum(th.maximum(k, first), last)]


class VecRollout:
    """``envs`` stepped together; workload seeds drawn by ``seed_rng`` from ``range(num_workloads)`` (offset
    by ``seed_offset``, one for all envs or one per env: the training worlds' pools) so every env starts each
    episode on a pool workload whose reference is cached.

    ``collect(policy, n_steps)`` fills and returns a buffer dict: obs (key -> (T, N, ...)), masks (T, N, A),
    actions, logp, values, rewards, discounts, elapsed (simulated seconds of the step), dones (T, N),
    last_values (N,), and with ``guides`` (one :mod:`agents.ppo.guide` planner per env) hints (T, N); finished
    episodes' metrics go to :attr:`episodes`. ``steps_per_job`` (None: none) sets each episode's step budget
    at reset, the env's ``max_steps`` = ``ceil(steps_per_job x the workload's jobs)``.
    """

    def __init__(self, envs: list[Any], shaper: Any, seed_rng: np.random.Generator, num_workloads: int,
                 horizon_s: float | None, seed_offset: int | Sequence[int] = 0, start: bool = True,
                 guides: list[Any] | None = None, steps_per_job: float | None = None) -> None:
        self.envs, self.shaper, self.rng, self.guides = envs, shaper, seed_rng, guides
        self.steps_per_job = steps_per_job
        self.num_workloads, self.horizon_s = int(num_workloads), horizon_s
        offsets = [seed_offset] * len(envs) if isinstance(seed_offset, (int, np.integer)) else list(seed_offset)
        if len(offsets) != len(envs):
            raise ValueError(f"seed_offset: {len(offsets)} offsets for {len(envs)} envs")
        self.seed_offsets = [int(o) for o in offsets]
        self.episodes: list[dict[str, float]] = []
        self.obs: list[dict[str, np.ndarray]] = [{} for _ in envs]
        self.time = np.zeros(len(envs))
        if start:  # else :meth:`restore` follows (resume)
            for i in range(len(envs)):
                self._reset(i)

    def _reset(self, i: int) -> None:
        seed = self.seed_offsets[i] + int(self.rng.integers(self.num_workloads))
        env = self.envs[i]
        obs, info = env.reset(seed=seed)
        if self.steps_per_job is not None:  # a budget for this episode's workload (the env reads it at each step)
            env.unwrapped.max_steps = max(1, math.ceil(self.steps_per_job * env.unwrapped.sim.num_jobs))
        if self.guides is not None:
            self.guides[i].reset()
        self.obs[i] = obs
        self.time[i] = info["time"]
        self.shaper.start(i, seed, info["time"], env.unwrapped.sim.num_jobs)

    def restore(self, obs: list[dict[str, np.ndarray]], time: np.ndarray) -> None:
        """Resume: the envs (already unpickled into :attr:`envs`) and their last observations and times."""
        self.obs, self.time = obs, np.asarray(time, dtype=np.float64)

    def collect(self, policy: Any, n_steps: int) -> dict[str, Any]:
        envs, n = self.envs, len(self.envs)
        first = self.obs[0]
        keys = obs_keys(first)
        buf_obs = {k: np.empty((n_steps, n, *first[k].shape), dtype=np.float32) for k in keys}
        a_n = first["action_mask"].shape[0]
        masks = np.empty((n_steps, n, a_n), dtype=bool)
        actions = np.empty((n_steps, n), dtype=np.int64)
        logps, values, rewards, discounts, elapsed, dones = (np.empty((n_steps, n)) for _ in range(6))
        hints = np.zeros((n_steps, n), dtype=np.int64) if self.guides is not None else None
        for t in range(n_steps):
            for i in range(n):
                o = self.obs[i]
                for k in keys:
                    buf_obs[k][t, i] = o[k]
                masks[t, i] = envs[i].unwrapped.action_masks()
            hint = guide_hints(self.guides, masks[t])
            if hints is not None:
                hints[t] = hint
            with th.inference_mode():  # (cheaper than no_grad: nothing here is trained)
                logp, _, _, v = policy_outputs(policy, obs_tensors({k: buf_obs[k][t] for k in keys}),
                                            th.from_numpy(masks[t]), None if hint is None else th.from_numpy(hint))
                a = sample_actions(logp, th.from_numpy(masks[t]))
            act = a.numpy()
            actions[t] = act
            logps[t] = logp.gather(1, a[:, None]).squeeze(-1).numpy()
            values[t] = v.numpy()
            cut: list[tuple[int, dict[str, np.ndarray]]] = []  # (env, last observation) of truncated episodes
            for i in range(n):
                obs, r, term, trunc, info = envs[i].step(int(act[i]))
                t1 = info["time"]
                done = term or trunc
                elapsed[t, i] = t1 - self.time[i]
                discounts[t, i] = step_discounts(elapsed[t, i], self.horizon_s)
                rewards[t, i] = self.shaper.reward(i, r, t1, term)
                dones[t, i] = float(done)
                if trunc and not term:
                    cut.append((i, obs))
                if done:
                    self.episodes.append(dict(info["metrics"]))
                    self._reset(i)
                else:
                    self.obs[i] = obs
                    self.time[i] = t1
            if cut:  # bootstrap: the value of the state the budget cut the episode in
                with th.inference_mode():
                    rows = {k: np.stack([o[k] for _, o in cut]).astype(np.float32) for k in keys}
                    cut_mask = th.from_numpy(np.stack([o["action_mask"] for _, o in cut]).astype(bool))
                    _, _, _, cut_v = policy_outputs(policy, obs_tensors(rows), cut_mask)
                for (i, _), v_cut in zip(cut, cut_v.numpy()):
                    rewards[t, i] += discounts[t, i] * float(v_cut)
        with th.inference_mode():
            last = {k: np.stack([o[k] for o in self.obs]).astype(np.float32) for k in keys}
            mask = np.stack([e.unwrapped.action_masks() for e in envs])
            _, _, _, last_v = policy_outputs(policy, obs_tensors(last), th.from_numpy(mask))
        return {
            "obs": buf_obs, "masks": masks, "actions": actions, "logp": logps, "values": values,
            "rewards": rewards, "discounts": discounts, "elapsed": elapsed, "dones": dones,
            "last_values": last_v.numpy(), "hints": hints,
        }
