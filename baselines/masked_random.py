"""``random``: a uniformly random legal action (seeded), the floor every scheduler should beat."""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy


class RandomPolicy(ScriptedPolicy):
    """Uniformly random among the legal actions (including wait)."""

    name = "random"

    def __init__(self, env: Any, seed: int = 0) -> None:
        super().__init__(env)
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """A fresh stream per episode from (``seed``, the episode's workload seed): an episode's actions do
        not depend on which episodes this policy played before (the Ray backend runs each in a new process)."""
        super().reset()
        episode = getattr(self.env, "episode_seed", None)
        self._rng = np.random.default_rng(self.seed if episode is None else (self.seed, episode))

    def act(self, mask: np.ndarray) -> int:
        legal = np.flatnonzero(mask)
        return int(self._rng.choice(legal)) if legal.size else 0
