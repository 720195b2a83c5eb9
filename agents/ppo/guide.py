"""Plan guides: a scripted planner whose next step is an input of the policy (``ppo.guide``).

A guided :class:`~agents.ppo.network.SlotPlanPolicy` is given, at every decision, the action the planner
would take next (its *hint*) and adds a learnt bonus to that action's logit and to its type's
(:meth:`~agents.ppo.network.SlotPlanPolicy.guided`). It starts by carrying the plan out, nearly as the
planner would, and PPO learns where deviating pays; imitation loses most of a joint plan's worth (a clone of
``sia_srpt`` is 1.14 x Sia, its teacher 0.87), a guide keeps it. The planner is
:class:`~baselines.sia.SiaTeacher`: Sia's integer program re-solved at every decision instant with
the objective the guide's name selects. It reads only what every policy may read (``env.view``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.ppo.config import SIA_TEACHERS
from baselines.sia import SiaTeacher

#: guide names (``ppo.guide``, a guided model's ``guide``) and the planner objective each re-solves
GUIDES = SIA_TEACHERS


def make_guide(name: str, env: Any) -> SiaTeacher:
    """The planner ``name`` (a key of :data:`GUIDES`) bound to ``env``; ValueError names a bad one."""
    if name not in GUIDES:
        raise ValueError(f"guide must be one of {sorted(GUIDES)}, got {name!r}")
    return SiaTeacher(env, objective=GUIDES[name])


def guide_hints(guides: list[Any] | None, masks: np.ndarray) -> np.ndarray | None:
    """(N,) the hint of each guide for its env's legal actions ``masks`` (N, A); None without guides. Call
    once per decision: a guide carries its plan out one step per call."""
    if guides is None:
        return None
    return np.array([g.act(m) for g, m in zip(guides, masks)], dtype=np.int64)
