"""Reward options as Gymnasium wrappers of :class:`~frenzy_env.env.FrenzyEnv`, for any learner (stable-baselines3,
RLlib, CleanRL): the PPO trainer's reward, differenced against a reference scheduler and normalised per episode.

In a scheduling environment most of the return's variance comes from the arrival sequence, not from the policy
(Mao et al., "Variance Reduction for Reinforcement Learning in Input-Driven Environments", ICLR 2019; Decima,
SIGCOMM 2019). So each episode's workload is first played by a *reference* policy, whose cumulative cost
``C_ref(t)`` (the env's cost: jobs in the system integrated over simulated time, in ``reward_scale`` units, from
the reference's first decision; linear between its decisions, 0 before, ``C_ref(T)`` its total after its end
``T``) is cached per workload seed. A step of the agent from simulated time ``t0`` to ``t1`` with env reward
``r_t`` (``-(jobs in the system) x (t1 - t0) / reward_scale``, minus any invalid-action penalty) earns::

    r'_t = (gain / Z) * (r_t + C_ref(t1) - C_ref(t0) + [terminated] * (C_ref(T) - C_ref(t1)))

with ``Z = C_ref(T)``, the reference's whole cost (:func:`differenced_reward`, :class:`RewardShaper`). The sum
over a terminated episode is ``gain * (1 - agent cost / reference cost)``: the same scale for a 7-hour and a
300-hour episode, 0 for the reference itself, and the same optimal policy as the env's reward (the reference's
cost does not depend on the agent's actions: only the variance changes). A truncated episode settles nothing,
so it compares both over the same span: ``gain * (C_ref(t_cut) - agent cost up to t_cut) / Z``. Without a
reference (``reference=None``) the reward is only normalised: ``r'_t = (gain / N) * r_t``, ``N`` the episode's
job count, so a terminated episode returns ``-gain`` times the average JCT in ``reward_scale`` units.

Both runs start at the env's first decision (what comes before it is the same for every policy: only "wait"
is legal), so the cost before it cancels and is left out. This module imports nothing of ``baselines`` or
``agents``: a reference is a policy factory the caller passes (``agents.ppo.ReferenceReward`` resolves
``baselines`` names).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from frenzy_env.errors import ConfigError


@dataclass(frozen=True)
class ReferenceCurve:
    """The reference's cumulative cost at its decisions: ``times`` (n,) simulated seconds, ascending, from
    the first decision; ``cost`` (n,) cost accrued since then (0 first); ``num_jobs``; ``avg_jct_h`` (the
    episode's average job completion time in hours, from the env's metrics)."""

    times: np.ndarray
    cost: np.ndarray
    num_jobs: int
    avg_jct_h: float

    @property
    def total(self) -> float:
        """The reference's whole cost (from its first decision)."""
        return float(self.cost[-1])

    def cost_at(self, t: float) -> float:
        """``C_ref(t)``: linear between decisions, 0 before the first and the total after the last. (Between two
        decisions the jobs in the system may change at events; only the sum over an episode is exact.)"""
        return float(np.interp(t, self.times, self.cost))


def play_curve(env: Any, act: Callable[[np.ndarray], int], seed: int) -> ReferenceCurve:
    """Play one episode on ``env`` reset with ``seed``, each action ``act(mask)``; its :class:`ReferenceCurve`."""
    return _play(env, seed, lambda _obs, mask: act(mask))


def policy_curve(env: Any, policy: Any, seed: int) -> ReferenceCurve:
    """:func:`play_curve` of a :class:`~frenzy_env.policy.Policy` bound to ``env``: ``reset()`` after the env's
    reset (as the evaluation loop calls it), then ``predict(obs, action_masks=mask, deterministic=True)``."""
    reset = getattr(policy, "reset", None)

    def choose(obs: Any, mask: np.ndarray) -> int:
        action, _ = policy.predict(obs, action_masks=mask, deterministic=True)
        return int(np.asarray(action).reshape(-1)[0])

    return _play(env, seed, choose, reset if callable(reset) else None)


def _play(env: Any, seed: int, choose: Callable[[Any, np.ndarray], int],
          on_reset: Callable[[], None] | None = None) -> ReferenceCurve:
    """The episode loop of :func:`play_curve` and :func:`policy_curve`: ``choose(obs, mask)`` acts."""
    base = env.unwrapped
    obs, info = env.reset(seed=int(seed))
    if on_reset is not None:
        on_reset()
    times, cost, c = [float(info["time"])], [0.0], 0.0
    done = False
    while not done:
        obs, r, term, trunc, info = env.step(choose(obs, base.action_masks()))
        c -= float(r)
        times.append(float(info["time"]))
        cost.append(c)
        done = term or trunc
    m = info["metrics"]
    return ReferenceCurve(np.array(times), np.array(cost), int(base.sim.num_jobs), float(m["avg_jct_h"]))


def differenced_reward(curve: ReferenceCurve, r_env: float, t0: float, t1: float, terminal: bool) -> float:
    """The agent's reward for a step from ``t0`` to ``t1`` with env reward ``r_env``, against ``curve``; on the
    ``terminal`` step the reference's cost after ``t1`` is settled, so an episode sums to ref cost - agent cost."""
    r = float(r_env) + curve.cost_at(t1) - curve.cost_at(t0)
    if terminal:
        r += curve.total - curve.cost_at(t1)
    return r


class CurveCache:
    """Reference curves per workload seed, computed on first use by ``play(env, seed) -> ReferenceCurve`` on a
    private env (``make_env()``, built once); at most ``max_cached`` curves are kept (the oldest go first).
    :attr:`runs` counts the reference episodes played."""

    def __init__(self, make_env: Callable[[], Any], play: Callable[[Any, int], ReferenceCurve],
                 max_cached: int | None = None) -> None:
        if max_cached is not None and (not isinstance(max_cached, (int, np.integer)) or max_cached < 1):
            raise ConfigError(f"max_cached must be a positive integer or None, got {max_cached!r}")
        self.make_env, self.play = make_env, play
        self._env: Any = None
        self.curves: dict[int, ReferenceCurve] = {}
        self.runs = 0
        self.max_cached = max_cached

    def _play(self, env: Any, seed: int) -> ReferenceCurve:
        return self.play(env, seed)

    def get(self, seed: int) -> ReferenceCurve:
        """The curve of workload ``seed`` (run now if not cached)."""
        seed = int(seed)
        curve = self.curves.get(seed)
        if curve is None:
            if self._env is None:
                self._env = self.make_env()
            curve = self.curves[seed] = self._play(self._env, seed)
            self.runs += 1
            if self.max_cached is not None and len(self.curves) > self.max_cached:
                del self.curves[next(iter(self.curves))]
        return curve


class RewardShaper:
    """Per-env reward transformation (the equation of this module's docstring) for ``n_envs`` envs stepped
    side by side: differenced against the curves of ``cache`` (anything with ``get(seed) -> ReferenceCurve``,
    a :class:`CurveCache`; None: the raw reward) and scaled by ``gain`` / the reference's total cost (raw:
    ``gain`` / the episode's job count). Call :meth:`start` at each reset and :meth:`reward` at each step."""

    def __init__(self, cache: Any, gain: float, n_envs: int) -> None:
        self.cache, self.gain = cache, float(gain)
        self.curve: list[ReferenceCurve | None] = [None] * n_envs
        self.t: list[float] = [0.0] * n_envs
        self.scale: list[float] = [1.0] * n_envs

    def start(self, i: int, seed: int, t0: float, num_jobs: int) -> None:
        """Env ``i`` began an episode on workload ``seed`` at simulated time ``t0``."""
        self.t[i] = float(t0)
        if self.cache is None:
            self.curve[i] = None
            self.scale[i] = self.gain / max(num_jobs, 1)
        else:
            curve = self.curve[i] = self.cache.get(seed)
            self.scale[i] = self.gain / max(curve.total, 1e-9)

    def reward(self, i: int, r_env: float, t1: float, terminal: bool) -> float:
        """The shaped reward of env ``i``'s step ending at ``t1`` (``terminal``: the episode *terminated*; a
        truncated one settles nothing)."""
        curve = self.curve[i]
        r = float(r_env) if curve is None else differenced_reward(curve, r_env, self.t[i], t1, terminal)
        self.t[i] = float(t1)
        return r * self.scale[i]

    def state(self) -> dict[str, Any]:
        """What a checkpoint needs (the curves themselves are recomputed on resume: they are deterministic)."""
        return {"t": list(self.t), "scale": list(self.scale)}


def _play_factory(factory: Callable[[Any], Any], env: Any, seed: int) -> ReferenceCurve:
    """The curve of the policy ``factory(env)`` on ``env`` reset with ``seed`` (a fresh policy per workload)."""
    return policy_curve(env, factory(env), seed)


class ReferenceReward(gym.Wrapper):
    """The PPO trainer's reward as a Gymnasium wrapper of a :class:`~frenzy_env.env.FrenzyEnv` (the equation of
    this module's docstring): each step's env reward differenced against a reference policy playing the same
    workload, times ``gain`` / the reference's total cost, so a terminated episode returns ``gain * (1 - agent
    cost / reference cost)``; a truncated one (``max_steps``, ``max_sim_hours``) compares both over the same
    span. ``info["env_reward"]`` keeps the env's own reward; spaces, observations, flags and infos are the env's.

    ``reference``: a policy factory ``reference(env) -> policy`` (a :class:`~frenzy_env.policy.Policy` bound to
    ``env``: ``predict(obs, action_masks=mask)`` and ``reset()``, e.g. ``functools.partial(baselines.make_policy,
    "doubling")``); a name, resolved as ``make_policy(name, env)`` (the caller passes ``make_policy``:
    ``baselines.make_policy``, so this module stays free of policies; ``agents.ppo.ReferenceReward`` does that
    for you); or None: no reference, the env's reward times ``gain`` / the episode's job count. At every reset
    the reference plays the episode's workload (the env's ``episode_seed``) on a private deep copy of the env,
    once per seed (cached, ``max_cached`` curves at most: a finite pool of workload seeds makes that pay; fresh
    seeds cost one reference episode each, 0.2-1.5 s on the testbed), with the env's budgets off, so ``Z`` is the
    whole episode's cost even when the agent's episodes are cut. ``curves``: a :class:`CurveCache` to use
    instead (shared between wrappers, or a reference that is not a policy).
    """

    def __init__(self, env: Any, reference: Any = None, gain: float = 10.0, *,
                 make_policy: Callable[..., Any] | None = None, max_cached: int = 4096,
                 curves: CurveCache | None = None) -> None:
        super().__init__(env)
        if isinstance(gain, bool) or not (isinstance(gain, (int, float)) and np.isfinite(gain) and gain > 0):
            raise ConfigError(f"gain must be a positive number, got {gain!r}")
        self.reference = reference
        if curves is None and reference is not None:
            if isinstance(reference, str):
                if make_policy is None:
                    raise ConfigError(
                        f"reference {reference!r} is a name: pass make_policy (baselines.make_policy) to build it, "
                        "or a factory reference(env) -> policy"
                    )
                factory = functools.partial(make_policy, reference)
            elif callable(reference):
                factory = reference
            else:
                raise ConfigError(f"reference must be None, a policy name or a factory env -> policy: {reference!r}")
            curves = CurveCache(self._reference_env, functools.partial(_play_factory, factory), max_cached)
        self.cache = curves
        self.shaper = RewardShaper(self.cache, gain, 1)

    def _reference_env(self) -> Any:
        """The reference's private env: a deep copy of the wrapped one (same cluster, workloads, settings) without
        its budgets, so the reference plays whole episodes (``max_steps``, ``max_sim_hours`` cut the agent's)."""
        env = copy.deepcopy(self.env.unwrapped)
        for budget in ("max_steps", "max_sim_hours"):
            if hasattr(env, budget):
                setattr(env, budget, None)
        return env

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        base = self.env.unwrapped
        self.shaper.start(0, base.episode_seed, info["time"], base.sim.num_jobs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, r, terminated, truncated, info = self.env.step(action)
        info["env_reward"] = float(r)
        return obs, self.shaper.reward(0, r, info["time"], terminated), terminated, truncated, info


__all__ = [
    "CurveCache", "ReferenceCurve", "ReferenceReward", "RewardShaper", "differenced_reward", "play_curve",
    "policy_curve",
]
