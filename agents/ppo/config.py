"""Training configuration of the MaskablePPO agent: hyperparameters, trace windows and the seed ranges.

:class:`PPOConfig` holds the MaskablePPO and network hyperparameters, :class:`TraceWindows` one real trace
to cut training windows from, :class:`TrainConfig` everything :func:`agents.ppo.train` needs (saved as JSON
beside the model). The seed ranges keep training (0-499), validation (500-999) and test (>= 1000)
workloads apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError

# Seed ranges that keep training, validation and test workloads apart.
TRAIN_SEEDS = (0, 500)  # training workloads draw their seeds in [0, 500)
VALIDATION_SEEDS = (500, 1000)  # the evaluation callback uses seeds 500, 501, ...
TEST_SEED_START = 1000  # held-out evaluation: seeds >= 1000


@dataclass(frozen=True)
class PPOConfig:
    """MaskablePPO and network hyperparameters (the defaults trained the shipped model).

    learning_rate: Adam step size, decayed linearly to ``lr_final_fraction`` of it by the end.
    n_steps: rollout length per env before each update (n_steps * n_envs samples per update).
    batch_size: minibatch size; n_epochs: passes over each rollout.
    gamma: discount per decision (an episode has ~3 decisions per job; 0.995 sees ~200 decisions ahead).
    gae_lambda: GAE lambda; clip_range: PPO ratio clip; ent_coef: entropy bonus; vf_coef: value-loss
    weight; max_grad_norm: gradient clipping; target_kl: stop an update early past this KL.
    normalize_reward: without a warm start, scale rewards by a running std of the discounted return
    (VecNormalize, no obs normalisation, so the saved model needs no statistics at evaluation); with a warm
    start, rewards are divided by the fixed std of the teacher's discounted returns (the critic is
    pre-trained on them).
    embed_dim, context_dim, pair_hidden, plan_dim, value_hidden: network widths (see :mod:`agents.ppo.network`).
    resize_bias: initial logit offset of resize actions.
    bc_episodes: behaviour-cloning warm start: episodes of :class:`~agents.ppo.warmstart.SrptTeacher` on
    training workloads imitated (masked cross-entropy) before PPO; 0 disables it. bc_epochs, bc_lr: its
    passes and step size; bc_gpu_cap: the teacher's cap on GPUs as a multiple of the requested count.
    """

    learning_rate: float = 1e-4
    lr_final_fraction: float = 0.1
    n_steps: int = 1024
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.995
    gae_lambda: float = 0.95
    clip_range: float = 0.1
    ent_coef: float = 0.001
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.02
    normalize_reward: bool = True
    embed_dim: int = 64
    context_dim: int = 128
    pair_hidden: int = 64
    plan_dim: int = 16
    value_hidden: int = 128
    resize_bias: float = -2.0
    bc_episodes: int = 60
    bc_epochs: int = 6
    bc_lr: float = 1e-3
    bc_gpu_cap: float = 4.0


@dataclass(frozen=True)
class TraceWindows:
    """Windows of a real trace used for training: ``max_jobs`` consecutive jobs from a seeded start row.

    path: trace CSV; format: its format ("itp", "philly", "canonical"); load_scale: divides inter-arrival
    times (2 doubles the offered load); exclude: (start, end) submission-time ranges never used (for
    example a held-out window of the same file).
    """

    path: str
    format: str = "itp"
    max_jobs: int = 150
    load_scale: float = 1.0
    exclude: tuple[tuple[float, float], ...] = ()



@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`~agents.ppo.training.train` needs; saved as JSON beside the model.

    timesteps: environment steps in total; n_envs: parallel envs; vec_env: "dummy" (one process) or
    "subproc"; seed: seeds PPO, the envs and the workload draws; cluster: cluster preset; workload:
    "mix" (:class:`MixtureGenerator` over synthetic workloads and ``traces``) or a workload preset name;
    traces: training trace windows; validation_episodes: synthetic validation workloads (seeds 500, 501,
    ...) run by the evaluation callback every ``eval_freq`` steps; checkpoint_freq: steps between
    checkpoints; out_dir: output folder; threads: torch threads; queue_slots, running_slots: env sizes.
    """

    timesteps: int = 240_000
    n_envs: int = 2
    vec_env: str = "dummy"
    seed: int = 0
    cluster: str = "frenzy-testbed"
    workload: str = "mix"
    traces: tuple[TraceWindows, ...] = ()
    trace_fraction: float = 0.3
    jobs_range: tuple[int, int] = (100, 200)
    load_range: tuple[float, float] = (0.5, 1.0)
    validation_jobs: int = 200
    validation_load: float = 0.7
    validation_episodes: int = 4
    eval_freq: int = 24_000
    checkpoint_freq: int = 50_000
    out_dir: str = "runs/ppo"
    threads: int = 1
    queue_slots: int = 64
    running_slots: int = 64
    progress: bool = True
    verbose: int = 0
    ppo: PPOConfig = field(default_factory=PPOConfig)

    def __post_init__(self) -> None:
        for name in ("timesteps", "n_envs", "validation_episodes", "eval_freq", "checkpoint_freq", "threads"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        if self.vec_env not in ("dummy", "subproc"):
            raise ConfigError(f"vec_env must be 'dummy' or 'subproc', got {self.vec_env!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The configuration of a ``config.json`` (its ``obs_version``, a record of the run, is not a field)."""
        data = dict(data)
        data.pop("obs_version", None)
        ppo = PPOConfig(**data.pop("ppo", {}))
        traces = tuple(
            TraceWindows(**{**t, "exclude": tuple(tuple(x) for x in t.get("exclude", ()))})
            for t in data.pop("traces", ())
        )
        for key in ("jobs_range", "load_range"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(ppo=ppo, traces=traces, **data)

