"""The base class of scripted policies: stable-baselines3's ``predict`` over an ``act(mask)`` method."""

from __future__ import annotations

from typing import Any

import numpy as np


class ScriptedPolicy:
    """A policy bound to an environment; it may read the simulator state but acts only through actions.

    Subclasses implement :meth:`act`. ``oracle = True`` marks policies that read information schedulers do
    not have (true job durations); they are reported, never targets.
    """

    name = "scripted"
    oracle = False

    def __init__(self, env: Any) -> None:
        self.env = env.unwrapped

    @property
    def sim(self) -> Any:
        return self.env.sim

    def reset(self) -> None:
        """Called by the evaluation loop at the start of each episode: :meth:`setup` runs again before the
        next action."""
        self._for_sim = None

    def ensure_setup(self) -> None:
        """Run :meth:`setup` once per simulator (the env builds a new one on most resets); call it first
        thing in :meth:`act` when the policy keeps per-episode state."""
        sim = self.sim
        if getattr(self, "_for_sim", None) is not sim:
            self._for_sim = sim
            self.setup(sim)

    def setup(self, sim: Any) -> None:
        """Build the per-episode state of ``sim`` (subclasses that keep any)."""

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
