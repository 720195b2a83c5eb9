"""Scripted baseline schedulers; ``make_policy(name, env, **kwargs)`` builds one bound to an env.

Registered names: ``frenzy`` (:mod:`baselines.frenzy`), ``asrpt`` (:mod:`baselines.asrpt`), ``doubling``
(:mod:`baselines.doubling`), ``sia`` and ``sia_srpt`` (:mod:`baselines.sia`), ``srpt_est``
(:mod:`baselines.srpt`), ``fifo``, ``fifo_strict``, ``sjf`` and ``sjf_greedy`` (oracles)
(:mod:`baselines.fifo`), ``random`` (:mod:`baselines.masked_random`); ``fifo_he``, ``spwf`` and ``sjf_he``,
A-SRPT's comparators on its placement
(:mod:`baselines.queue_order`).
:func:`register_policy` adds a policy of your own under a name of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baselines.asrpt import AsrptPolicy
from baselines.base import ScriptedPolicy
from baselines.doubling import DoublingPolicy
from baselines.fifo import FifoPolicy, SjfGreedyPolicy, SjfPolicy, StrictFifoPolicy
from baselines.frenzy import FrenzyPolicy
from baselines.masked_random import RandomPolicy
from baselines.queue_order import FifoHeavyEdgePolicy, SjfHeavyEdgePolicy, SpwfPolicy
from baselines.sia import SiaPolicy, SiaSrptPolicy
from baselines.srpt import SrptEstPolicy
from frenzy_env.errors import ConfigError, unknown_name

POLICIES: dict[str, Callable[..., ScriptedPolicy]] = {
    "frenzy": FrenzyPolicy,
    "asrpt": AsrptPolicy,
    "doubling": DoublingPolicy,
    "sia": SiaPolicy,
    "sia_srpt": SiaSrptPolicy,
    "srpt_est": SrptEstPolicy,
    "fifo": FifoPolicy,
    "fifo_strict": StrictFifoPolicy,
    "sjf": SjfPolicy,
    "sjf_greedy": SjfGreedyPolicy,
    "random": RandomPolicy,
    "fifo_he": FifoHeavyEdgePolicy,
    "spwf": SpwfPolicy,
    "sjf_he": SjfHeavyEdgePolicy,
}


def register_policy(name: str, factory: Callable[..., ScriptedPolicy]) -> None:
    """Add a policy to the registry under ``name`` (a name already registered is replaced).

    ``factory(env, **kwargs)`` builds the policy bound to ``env``: any object with stable-baselines3's
    ``predict(observation, state=None, episode_start=None, deterministic=True, action_masks=None)`` and a
    ``reset()`` called at the start of each episode (a :class:`~frenzy_env.policy.Policy`), usually a
    :class:`ScriptedPolicy` subclass implementing ``act(mask) -> action``. From then on, in this process,
    ``make_policy(name, env)`` builds it and ``frenzy_env.evaluation.episodes.evaluate`` and ``frenzy evaluate
    --policies NAME`` (called through :func:`frenzy_env.cli.main`) run it beside the built-in ones::

        class Widest(ScriptedPolicy):
            def act(self, mask):
                return int(np.flatnonzero(mask)[-1])

        register_policy("widest", Widest)
        policy = make_policy("widest", env)

    The ``frenzy`` command in a shell needs no registration: ``frenzy evaluate --policies mymod:Widest``
    imports ``mymod`` (from the current directory or the installed packages) and calls ``Widest(env)``.
    ``name`` must not contain ``:`` (that form names MODULE:ATTR) and must not be ``ppo`` or ``rllib`` (the
    learned agents' names) or ``knob`` (the knob agent's, a research model: ``--policies knob`` answers that the
    product does not play it, never with another policy under that name).
    """
    if not name or ":" in name or name in ("ppo", "knob", "rllib"):
        raise ConfigError(
            f"cannot register a policy as {name!r}: names are non-empty, without ':', not ppo/knob/rllib"
        )
    POLICIES[name] = factory


def make_policy(name: str, env: Any, **kwargs: Any) -> ScriptedPolicy:
    """Build the scripted policy ``name`` bound to ``env``; unknown names or keywords raise clearly."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise unknown_name("policy", name, POLICIES) from None
    try:
        return factory(env, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad keyword for policy {name!r}: {exc}") from None


__all__ = [
    "POLICIES", "AsrptPolicy", "DoublingPolicy", "FrenzyPolicy", "ScriptedPolicy", "SrptEstPolicy", "make_policy",
    "register_policy",
]
