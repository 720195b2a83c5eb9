"""Scripted baseline schedulers; ``make_policy(name, env, **kwargs)`` builds one bound to an env.

Registered names: ``frenzy`` (:mod:`baselines.frenzy`), ``asrpt`` (:mod:`baselines.asrpt`), ``doubling``
(:mod:`baselines.doubling`), ``sia`` (:mod:`baselines.sia`), ``fifo``, ``sjf`` (oracle) and ``random``
(:mod:`baselines.simple`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baselines.asrpt import AsrptPolicy
from baselines.base import ScriptedPolicy
from baselines.doubling import DoublingPolicy
from baselines.frenzy import FrenzyPolicy
from baselines.sia import SiaPolicy
from baselines.simple import FifoPolicy, RandomPolicy, SjfPolicy
from frenzy_env.errors import ConfigError, unknown_name

POLICIES: dict[str, Callable[..., ScriptedPolicy]] = {
    "frenzy": FrenzyPolicy,
    "asrpt": AsrptPolicy,
    "doubling": DoublingPolicy,
    "sia": SiaPolicy,
    "fifo": FifoPolicy,
    "sjf": SjfPolicy,
    "random": RandomPolicy,
}


def register_policy(name: str, factory: Callable[..., ScriptedPolicy]) -> None:
    """Add a policy to the registry."""
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
    "POLICIES", "AsrptPolicy", "DoublingPolicy", "FrenzyPolicy", "ScriptedPolicy", "make_policy",
    "register_policy",
]
