"""The base class of scripted policies: stable-baselines3's ``predict`` over an ``act(mask)`` method."""

from __future__ import annotations

from collections.abc import Mapping
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
        """stable-baselines3's ``predict``: the action of :meth:`act` on ``action_masks`` (the env's when None).

        One observation gives a 0-d action. A batch of one (what sb3-contrib's ``evaluate_policy`` passes
        from a one-env ``VecEnv``: masks of shape (1, A), observation entries with a leading 1) gives an
        action of shape (1,); a larger batch raises ``ValueError``, since a scripted policy reads the one
        simulator of the env it is bound to. With a batch, a true ``episode_start`` (SB3 passes it at an
        episode's first step) calls :meth:`reset` first: SB3's loops never call it, while the evaluation loop
        (unbatched) does.
        """
        batch = _batch_size(observation, action_masks)
        if batch is not None and batch != 1:
            raise ValueError(
                f"{type(self).__name__} acts for one environment (it reads that env's simulator), got a batch of"
                f" {batch}: evaluate it on a single env or a VecEnv of one"
            )
        if batch is not None and episode_start is not None and np.asarray(episode_start).any():
            self.reset()
        if action_masks is None:
            mask = self.env.action_masks()
        else:
            mask = np.asarray(action_masks, dtype=bool).reshape(-1)
        action = np.array(self.act(mask))
        return (action.reshape(1) if batch is not None else action), state


def _batch_size(observation: Any, action_masks: Any) -> int | None:
    """The leading batch dimension of ``action_masks`` (A,) or (n, A), else of the observation's
    ``action_mask`` entry; None for one unbatched observation."""
    if action_masks is not None:
        masks = np.asarray(action_masks)
    elif isinstance(observation, Mapping) and "action_mask" in observation:
        masks = np.asarray(observation["action_mask"])
    else:
        return None
    return int(masks.shape[0]) if masks.ndim == 2 else None
