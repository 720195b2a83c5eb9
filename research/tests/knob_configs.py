"""Small knob configurations shared by the knob tests (a helper module, not a test file)."""

from __future__ import annotations

from typing import Any

from agents.ppo.config import TrainConfig
from research.knob.agent import KnobConfig

#: 12-16-job synthetic workloads at moderate load: seconds per episode, on the cluster layout (``interface="cluster"``,
#: env v5's; not the default universal one of env v6): the knob reads that layout's ``gpus`` block (each type's free
#: fraction, then its share) and the shipped knob model was trained on it
SMALL = TrainConfig(workload="mix", traces=(), jobs_range=(12, 16), load_range=(0.6, 0.9), interface="cluster")


def small_config(**kw) -> KnobConfig:
    """A knob run of a few dozen decisions on :data:`SMALL`; ``kw`` overrides any field."""
    base = dict(train=SMALL, timesteps=96, n_envs=2, n_steps=32, batch_size=32, n_epochs=1, pool=2,
                checkpoint_every=32)
    return KnobConfig(**{**base, **kw})


def play_level(env: Any, level: int, **reset_kwargs: Any) -> tuple[float, int]:
    """(return, steps) of one knob-env episode that plays ``level`` at every step; ``reset_kwargs`` go to
    ``env.reset``."""
    env.reset(**reset_kwargs)
    total, steps, done = 0.0, 0, False
    while not done:
        _, r, term, trunc, _ = env.step(level)
        total, steps, done = total + r, steps + 1, term or trunc
    return total, steps
