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

The reward's core (:class:`ReferenceCurve`, :func:`play_curve`, :func:`differenced_reward`,
:class:`RewardShaper`) lives in :mod:`frenzy_env.wrappers`, with the wrapper any learner can use; this module
adds what needs ``baselines``: references named by baseline (:func:`run_reference`, :class:`ReferenceCache`,
:class:`ReferenceReward`).

Both runs start from the env's first decision (what comes before it is the same for every policy: only
"wait" is legal), so the cost before it cancels and is left out.
"""

from __future__ import annotations

from typing import Any

from agents.ppo.config import WORLD_SEED_STRIDE
from frenzy_env import wrappers
from frenzy_env.errors import ConfigError
from frenzy_env.wrappers import ReferenceCurve, RewardShaper, differenced_reward, play_curve


def run_reference(env: Any, policy: str, seed: int) -> ReferenceCurve:
    """Play one episode of the baseline ``policy`` on ``env`` reset with ``seed``; its :class:`ReferenceCurve`."""
    from baselines import make_policy

    pol = make_policy(policy, env)
    pol.reset()
    return play_curve(env, pol.act, seed)


class ReferenceCache(wrappers.CurveCache):
    """Reference curves per workload seed (:class:`frenzy_env.wrappers.CurveCache`), computed on first use on a
    private env (``make_env()``); at most ``max_cached`` curves are kept (the oldest go first). ``policy``: a
    baseline's name (played by :func:`run_reference`), or a function ``play(env, seed) -> ReferenceCurve`` for a
    reference that is not a registered baseline (a planner re-solved at every decision instant, say)."""

    def __init__(self, make_env: Any, policy: Any, max_cached: int | None = None) -> None:
        from baselines import POLICIES

        if not callable(policy) and policy not in POLICIES:
            raise ConfigError(f"ppo.reference: unknown baseline policy {policy!r} (known: {', '.join(POLICIES)})")
        super().__init__(make_env, policy if callable(policy) else run_reference, max_cached)
        self.policy = policy

    def _play(self, env: Any, seed: int) -> ReferenceCurve:
        return self.policy(env, seed) if callable(self.policy) else run_reference(env, self.policy, seed)


class WorldReferenceCache:
    """Reference curves of several training worlds behind one ``get(seed)``: seed ``w * WORLD_SEED_STRIDE + k``
    is workload k of world w, played by ``caches[w]`` (each a :class:`ReferenceCache` on that world's env)."""

    def __init__(self, caches: list[ReferenceCache]) -> None:
        self.caches = list(caches)

    def get(self, seed: int) -> ReferenceCurve:
        world = int(seed) // WORLD_SEED_STRIDE
        if not 0 <= world < len(self.caches):
            raise ConfigError(f"workload seed {seed} names world {world}; there are {len(self.caches)}")
        return self.caches[world].get(seed)

    @property
    def runs(self) -> int:
        """Reference episodes played, over every world."""
        return sum(c.runs for c in self.caches)


class ReferenceReward(wrappers.ReferenceReward):
    """:class:`frenzy_env.wrappers.ReferenceReward` with the reference named by a ``baselines`` policy
    (``reference``, checked against the registry), played exactly as the PPO trainer plays it
    (:class:`ReferenceCache`): each step's reward differenced against that baseline on the same workload, times
    ``gain`` / the reference's total cost, so an episode returns ``gain * (1 - agent cost / reference cost)``
    (see :mod:`frenzy_env.wrappers`). At every reset the reference plays the episode's workload (the env's
    ``episode_seed``) on a private copy of the env, once per seed (cached, ``max_cached`` curves at most).
    ``info["env_reward"]`` keeps the env's own reward. Only a terminated episode settles the reference's cost
    after its last step; a truncated one (``max_steps``, ``max_sim_hours``) compares both over the same span,
    ``C_ref(t) - agent cost up to t``.
    """

    def __init__(self, env: Any, reference: str = "doubling", gain: float = 10.0, max_cached: int = 4096) -> None:
        super().__init__(env, reference, gain, curves=ReferenceCache(self._reference_env, reference, max_cached))


__all__ = [
    "ReferenceCache", "ReferenceCurve", "ReferenceReward", "RewardShaper", "WorldReferenceCache", "differenced_reward",
    "play_curve", "run_reference",
]
