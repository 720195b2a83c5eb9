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
        """Called by the evaluation loop at the start of each episode."""

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
