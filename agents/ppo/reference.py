"""The reward differenced against a reference scheduler on the same arrivals (an input-driven baseline).

In a scheduling environment most of the return's variance comes from the arrival sequence, not from the
policy (Mao et al., "Variance Reduction for Reinforcement Learning in Input-Driven Environments", ICLR
2019; Decima, SIGCOMM 2019). So every training workload is first played by a scripted *reference* policy
(``baselines.make_policy(name)``), whose cumulative cost curve ``C_ref(t)`` (jobs in the system integrated
over simulated time, in the env's reward unit, hours by default) is cached per workload seed
(:class:`ReferenceCache`). The agent's step from ``t0`` to ``t1`` then earns

``r = r_env + C_ref(t1) - C_ref(t0)``    (``r_env = -(the agent's jobs in the system integrated over [t0, t1])``)

and its last step also ``C_ref(end) - C_ref(t1)``, so an episode's rewards sum to exactly ``reference cost -
agent cost`` (:func:`differenced_reward`). :class:`RewardShaper` also divides by the reference's total cost
and multiplies by ``gain``: the return is ``gain * (1 - agent cost / reference cost)``, the same scale for a
7-hour and a 300-hour episode. :class:`ReferenceReward` is the same reward as a Gymnasium wrapper, for
learners that step an env themselves (RLlib: ``RLlibTrainConfig.reference``).

Both runs start from the env's first decision (what comes before it is the same for every policy: only
"wait" is legal), so the cost before it cancels and is left out.
"""

from __future__ import annotations

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


def run_reference(env: Any, policy: str, seed: int) -> ReferenceCurve:
    """Play one episode of the baseline ``policy`` on ``env`` reset with ``seed``; its :class:`ReferenceCurve`."""
    from baselines import make_policy

    pol = make_policy(policy, env)
    pol.reset()
    return play_curve(env, pol.act, seed)


def play_curve(env: Any, act: Any, seed: int) -> ReferenceCurve:
    """Play one episode on ``env`` reset with ``seed``, each action ``act(mask)``; its :class:`ReferenceCurve`."""
    base = env.unwrapped
    _, info = env.reset(seed=int(seed))
    times, cost, c = [float(info["time"])], [0.0], 0.0
    done = False
    while not done:
        _, r, term, trunc, info = env.step(act(base.action_masks()))
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


class ReferenceCache:
    """Reference curves per workload seed, computed on first use on a private env (``make_env()``); at most
    ``max_cached`` curves are kept (the oldest go first). ``policy``: a baseline's name (played by
    :func:`run_reference`), or a function ``play(env, seed) -> ReferenceCurve`` for a reference that is not
    a registered baseline (the knob agent's plan)."""

    def __init__(self, make_env: Any, policy: Any, max_cached: int | None = None) -> None:
        from baselines import POLICIES

        if not callable(policy) and policy not in POLICIES:
            raise ConfigError(f"ppo.reference: unknown baseline policy {policy!r} (known: {', '.join(POLICIES)})")
        self.make_env, self.policy = make_env, policy
        self._env: Any = None
        self.curves: dict[int, ReferenceCurve] = {}
        self.runs = 0
        self.max_cached = max_cached

    def get(self, seed: int) -> ReferenceCurve:
        """The curve of workload ``seed`` (run now if not cached)."""
        seed = int(seed)
        curve = self.curves.get(seed)
        if curve is None:
            if self._env is None:
                self._env = self.make_env()
            play = self.policy if callable(self.policy) else lambda env, s: run_reference(env, self.policy, s)
            curve = self.curves[seed] = play(self._env, seed)
            self.runs += 1
            if self.max_cached is not None and len(self.curves) > self.max_cached:
                del self.curves[next(iter(self.curves))]
        return curve


class RewardShaper:
    """Per-env reward transformation of the rollout: differenced against ``cache`` (None: the raw reward),
    scaled by ``gain`` / the reference's total cost (raw: ``gain`` / the episode's job count)."""

    def __init__(self, cache: ReferenceCache | None, gain: float, n_envs: int) -> None:
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
        """The shaped reward of env ``i``'s step ending at ``t1``."""
        curve = self.curve[i]
        r = float(r_env) if curve is None else differenced_reward(curve, r_env, self.t[i], t1, terminal)
        self.t[i] = float(t1)
        return r * self.scale[i]

    def state(self) -> dict[str, Any]:
        """What a checkpoint needs (the curves themselves are recomputed on resume: they are deterministic)."""
        return {"t": list(self.t), "scale": list(self.scale)}


class ReferenceReward(gym.Wrapper):
    """The PPO trainer's reward as a Gymnasium wrapper of a :class:`~frenzy_env.env.FrenzyEnv`: each step's
    reward differenced against ``reference`` (a ``baselines`` policy name) playing the same workload, times
    ``gain`` / the reference's total cost, so an episode returns ``gain * (1 - agent cost / reference cost)``
    (see this module's docstring). At every reset the reference plays the episode's workload (the env's
    ``episode_seed``) on a private copy of the env, once per seed (cached, ``max_cached`` curves at most:
    a finite pool of workload seeds makes that pay; fresh seeds cost one reference episode each, 0.2-1.5 s
    on the testbed). ``info["env_reward"]`` keeps the env's own reward. Only a terminated episode settles the
    reference's cost after its last step; a truncated one (``max_steps``) compares both over the same span,
    ``C_ref(t) - agent cost up to t``.
    """

    def __init__(self, env: Any, reference: str = "doubling", gain: float = 10.0, max_cached: int = 4096) -> None:
        import copy

        super().__init__(env)
        if not (isinstance(gain, (int, float)) and np.isfinite(gain) and gain > 0):
            raise ConfigError(f"gain must be a positive number, got {gain!r}")
        self.reference = reference
        self.cache = ReferenceCache(lambda: copy.deepcopy(self.env.unwrapped), reference, max_cached)
        self.shaper = RewardShaper(self.cache, gain, 1)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        base = self.env.unwrapped
        self.shaper.start(0, base.episode_seed, info["time"], base.sim.num_jobs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, r, terminated, truncated, info = self.env.step(action)
        info["env_reward"] = float(r)
        return obs, self.shaper.reward(0, r, info["time"], terminated), terminated, truncated, info
