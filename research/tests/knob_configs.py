"""Small knob configurations shared by the knob tests (a helper module, not a test file)."""

from __future__ import annotations

from agents.ppo.config import TrainConfig
from research.knob.agent import KnobConfig

#: 12-16-job synthetic workloads at moderate load: seconds per episode
SMALL = TrainConfig(workload="mix", traces=(), jobs_range=(12, 16), load_range=(0.6, 0.9))


def small_config(**kw) -> KnobConfig:
    """A knob run of a few dozen decisions on :data:`SMALL`; ``kw`` overrides any field."""
    base = dict(train=SMALL, timesteps=96, n_envs=2, n_steps=32, batch_size=32, n_epochs=1, pool=2,
                checkpoint_every=32)
    return KnobConfig(**{**base, **kw})
