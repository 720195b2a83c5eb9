"""Which learned agent a model file holds, read from the record saved beside it.

One agent ships, under one name everywhere (``frenzy evaluate --policies``, ``frenzy train --agent``, its
``load_policy``): ``ppo`` (:mod:`agents.ppo`), the action-level MaskablePPO policy, which chooses among all the
env's actions itself (milliseconds per decision; its spaces fit one cluster's).

A ``knob`` model (PPO choosing the move margin of the ``sia_srpt`` integer-program planner at every decision
instant) is a research model, which the product does not load. Its records are recognised, so that the
product's loaders refuse a knob model with :data:`KNOB_REFUSED` instead of misreading it.

A model ``PATH.zip`` records which it is in ``PATH.json`` beside it (``"agent": "ppo"`` or ``"knob"``), or,
for a run's checkpoints and ``best_model.zip``, in the run's ``config.json`` one or two folders up. Records
written before the key existed are told apart by their content: a knob record carries ``knob_version`` (a
model's) or ``levels`` and ``planner`` (a run's configuration).
"""

from __future__ import annotations

import json
from pathlib import Path

#: the learned agents of the product
AGENTS = ("ppo",)
#: the agents a record may name: the product's, and ``knob``, a research model (:data:`KNOB_REFUSED`)
RECORDED_AGENTS = (*AGENTS, "knob")
#: what the product says of a knob model, or of ``--policies knob``
KNOB_REFUSED = (
    "the knob agent is a research model (research/knob), which the product does not load (a learned tuner ships "
    "only if it beats its planner with the best fixed margin on validation, and the knob does not): from the "
    "repository root, research.knob's load_policy(env, path) loads it and frenzy evaluate --policies "
    "research.knob:knob plays it; the product's planner baseline is sia_srpt:move_margin=0.2"
)


def read_record(path: str | Path) -> tuple[dict, Path] | None:
    """The record of the model at ``path`` and the file it came from: ``PATH.json`` beside it, else the run's
    ``config.json`` in its folder or the one above it. None when there is no readable JSON object."""
    path = Path(path)
    for candidate in (path.with_suffix(".json"), path.parent / "config.json", path.parent.parent / "config.json"):
        if candidate.is_file():
            try:
                record = json.loads(candidate.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict):
                return record, candidate
    return None


def agent_of(path: str | Path) -> str:
    """``"ppo"`` or ``"knob"`` (a research model: :data:`KNOB_REFUSED`): the agent the model at ``path`` holds (a
    model without a record is taken for an action-level ``ppo`` model, as stable-baselines3 saves one)."""
    found = read_record(path)
    if found is None:
        return "ppo"
    record = found[0]
    if record.get("agent") in RECORDED_AGENTS:
        return str(record["agent"])
    if "knob_version" in record or ("levels" in record and "planner" in record):
        return "knob"
    return "ppo"
