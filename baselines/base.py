"""The base class of scripted policies: stable-baselines3's ``predict`` over an ``act(mask)`` method."""

from __future__ import annotations

from typing import Any

import numpy as np

from frenzy_env.policy import SimView


class ScriptedPolicy:
    """A policy bound to an environment (a :class:`~frenzy_env.policy.Policy`); it reads the simulator only
    through :attr:`view` and acts only through actions.

    Subclasses implement :meth:`act`. ``oracle = True`` marks policies that read information schedulers do
    not have (true job durations); they are reported, never targets.
    """

    name = "scripted"
    oracle = False

    def __init__(self, env: Any) -> None:
        self.env = env.unwrapped

    @property
    def view(self) -> SimView:
        """The read-only view of the env's current simulator."""
        return self.env.view

    def reset(self) -> None:
        """Called by the evaluation loop at the start of each episode: :meth:`setup` runs again before the
        next action."""
        self._for_view = None

    def ensure_setup(self) -> SimView:
        """Run :meth:`setup` once per simulator (the env builds a new one, with a new view, on most resets);
        call it first thing in :meth:`act` when the policy keeps per-episode state. Returns :attr:`view`."""
        view = self.view
        if getattr(self, "_for_view", None) is not view:
            self._for_view = view
            self.setup(view)
        return view

    def setup(self, view: SimView) -> None:
        """Build the per-episode state of the simulator behind ``view`` (subclasses that keep any)."""

    def act(self, mask: np.ndarray) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        mask = self.env.action_masks() if action_masks is None else np.asarray(action_masks, dtype=bool)
        return np.array(self.act(mask)), state
