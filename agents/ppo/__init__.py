"""MaskablePPO schedulers for :class:`~frenzy_env.env.FrenzyEnv`: the network, training and loading.

This package re-exports the public names of its modules, so ``from agents.ppo import X`` works for all of
them, and saved models refer to the policy as ``agents.ppo.SlotPlanPolicy``:

- :mod:`agents.ppo.network`: the set-structured policy (:class:`SlotPlanPolicy`, :class:`SlotSetExtractor`,
  :class:`SlotPlanHead`) and :func:`policy_kwargs_for`;
- :mod:`agents.ppo.config`: hyperparameters (:class:`PPOConfig`), :class:`TraceWindows`,
  :class:`TrainConfig` and the seed ranges;
- :mod:`agents.ppo.workloads`: training and validation envs (:class:`MixtureGenerator`, :class:`CycleSeeds`);
- :mod:`agents.ppo.warmstart`: the behaviour-cloning warm start (:class:`SrptTeacher`);
- :mod:`agents.ppo.training`: :func:`train`;
- :mod:`agents.ppo.loading`: :func:`load_policy` and the shipped :data:`DEFAULT_MODEL_PATH`.

Training mixes synthetic workloads with real-trace windows; validation uses synthetic seeds 500-999 and test
(held-out) workloads use seeds >= 1000 and trace windows never trained on. Loading a model runs pickle: only
load model files you trust (see :mod:`agents.ppo.loading`).
"""

from agents.ppo.config import TEST_SEED_START, TRAIN_SEEDS, VALIDATION_SEEDS, PPOConfig, TraceWindows, TrainConfig
from agents.ppo.loading import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_MODEL_PATH,
    MODELS_DIR,
    PPOPolicy,
    check_model_path,
    load_policy,
    make_ppo_policy,
)
from agents.ppo.network import SlotPlanHead, SlotPlanPolicy, SlotSetExtractor, policy_kwargs_for
from agents.ppo.training import train
from agents.ppo.warmstart import SrptTeacher, behaviour_clone, collect_teacher, scale_reward
from agents.ppo.workloads import CycleSeeds, MixtureGenerator, make_env, make_validation_env

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_MODEL_PATH",
    "MODELS_DIR",
    "TEST_SEED_START",
    "TRAIN_SEEDS",
    "VALIDATION_SEEDS",
    "CycleSeeds",
    "MixtureGenerator",
    "PPOConfig",
    "PPOPolicy",
    "SlotPlanHead",
    "SlotPlanPolicy",
    "SlotSetExtractor",
    "SrptTeacher",
    "TraceWindows",
    "TrainConfig",
    "behaviour_clone",
    "check_model_path",
    "collect_teacher",
    "load_policy",
    "make_env",
    "make_ppo_policy",
    "make_validation_env",
    "policy_kwargs_for",
    "scale_reward",
    "train",
]
