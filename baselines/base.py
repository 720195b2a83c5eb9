"""The base class of scripted policies: stable-baselines3's ``predict`` over an ``act(mask)`` method."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from frenzy_env.simulator.core import MIN_WAKEUP_INTERVAL
from frenzy_env.simulator.view import SimView


class ScriptedPolicy:
    """A policy bound to an environment (a :class:`~frenzy_env.policy.Policy`); it reads the simulator only
    through :attr:`view` and acts only through actions.

    Subclasses implement :meth:`act`. ``oracle = True`` marks policies that read information schedulers do
    not have (true job durations); they are reported, never targets. A policy that must act at a time when
    nothing happens in the simulator (a round boundary, the end of a measurement) sets a timer with
    :meth:`wake_at` and waits with :meth:`wait_action`.
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

    # ------------------------------------------------------------------ timers
    def wake_at(self, t: float) -> float | None:
        """Ask the env to consult the policy again at simulated time ``t`` (seconds): a timer
        (``env.request_wakeup``).

        Nothing is asked (None) for a ``t`` that is not finite or not after now. As the env's rule has it, a
        ``t`` sooner than :data:`~frenzy_env.simulator.core.MIN_WAKEUP_INTERVAL` (1 s) ahead becomes now + 1 s.
        A time already pending is not asked again: the env caps the requests of one instant (16), duplicates
        included, so a policy may call this at every decision. Returns the wake-up's time, or None when
        nothing is pending for it (refused by the cap, or the episode is over).
        """
        if not math.isfinite(t):
            return None
        view = self.view
        now = view.now
        if t <= now:
            return None
        t = max(float(t), now + MIN_WAKEUP_INTERVAL)
        if t in view.pending_wakeups:
            return t
        return self.env.request_wakeup(t)

    def wait_action(self, mask: np.ndarray) -> int:
        """"Wait" (0) when it is legal now -- ``mask`` allows it, or something became pending after ``mask``
        was computed (a wake-up this decision asked for) --; otherwise the first legal start or resize, else
        the shortest timed wait: never an illegal action when ``mask`` has a legal one."""
        if mask[0] or not mask.any() or self.view.has_pending_events():
            return 0
        first = self.env.first_start
        moves = np.flatnonzero(mask[first:])
        return first + int(moves[0]) if moves.size else int(np.flatnonzero(mask)[0])

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
