"""What a policy is: :class:`Policy`, the protocol the evaluation loop runs, and :func:`as_policy`.

A policy decides through the environment's actions only (``env.start_action``, ``env.resize_action``, the
action mask); what it may read of the cluster is ``env.view``, a :class:`~frenzy_env.simulator.view.SimView`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Policy(Protocol):
    """Anything the evaluation loop can run: stable-baselines3's ``predict`` plus ``reset``.

    ``predict`` returns ``(action, state)``: the action as an integer array (0-d for one observation) and
    the recurrent state (``state`` unchanged for memoryless policies). ``action_masks`` (A,) bool are the
    legal actions now; a policy bound to an env reads them from it when None. ``reset()`` is called after
    each ``env.reset()`` and before the episode's first ``predict``: per-episode state starts there.
    Implemented by the scripted baselines (``baselines.ScriptedPolicy``), ``agents.ppo.PPOPolicy`` and
    ``agents.rllib.RLlibPolicy``; a bare stable-baselines3 model has no ``reset`` (wrap it in ``PPOPolicy``, or
    in :func:`as_policy`).
    """

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]: ...

    def reset(self) -> None: ...


class _WithReset:
    """A policy with only ``predict`` made a :class:`Policy`: ``reset()`` does nothing, ``predict`` is its own."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.predict = inner.predict

    def reset(self) -> None:
        """Nothing to reset: the wrapped object has no ``reset``."""


def as_policy(obj: Any) -> Policy:
    """``obj`` as a :class:`Policy`: itself when it has ``predict`` and ``reset``, wrapped with a ``reset`` that
    does nothing when it has ``predict`` only (a bare stable-baselines3 model, say); a :class:`TypeError`
    naming its type when it has no ``predict``."""
    if not callable(getattr(obj, "predict", None)):
        raise TypeError(
            f"{type(obj).__name__} has no predict(observation, state=None, episode_start=None, "
            "deterministic=True, action_masks=None) method"
        )
    return obj if callable(getattr(obj, "reset", None)) else _WithReset(obj)


__all__ = ["Policy", "as_policy"]
