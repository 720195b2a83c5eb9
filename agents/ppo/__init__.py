"""MaskablePPO schedulers for :class:`~frenzy_env.env.FrenzyEnv`: the network, training and loading.

This package re-exports the public names of its modules, so ``from agents.ppo import X`` works for all of
them, and saved models refer to the policy as ``agents.ppo.SlotPlanPolicy``:

- :mod:`agents.ppo.network`: the set-structured policy (:class:`SlotPlanPolicy`, :class:`SlotSetExtractor`,
  :class:`SlotPlanHead`) and :func:`policy_kwargs_for`;
- :mod:`agents.ppo.config`: hyperparameters (:class:`PPOConfig`), :class:`TraceWindows`,
  :class:`TrainConfig` and the seed ranges;
- :mod:`agents.ppo.distribution`: the factored masked action distribution (:func:`factored_log_probs`);
- :mod:`agents.ppo.workloads`: training, validation and test workloads (:class:`MixtureGenerator`,
  :func:`validation_workloads`, :func:`test_workloads`);
- :mod:`agents.ppo.reference_reward`: the reward differenced against a reference scheduler named by baseline (its
  core, :class:`RewardShaper` and the wrapper's base, in :mod:`frenzy_env.wrappers`);
- :mod:`agents.ppo.rollout`: in-process vectorised rollouts and GAE with per-step discounts;
- :mod:`agents.ppo.warmstart`: the behaviour-cloning warm start and the teacher pull (:class:`GrowTeacher`;
  the planner teacher is :class:`baselines.sia.SiaTeacher`);
- :mod:`agents.ppo.guide`: plan guides, a planner's next step as an input of the policy (``ppo.guide``);
- :mod:`agents.ppo.training`: :func:`train` (resumable);
- :mod:`agents.ppo.loading`: :func:`load_policy` and the shipped models (:func:`shipped_model_path`).

Training mixes synthetic workloads with windows of ITP clusters 03, 06, 08; validation uses synthetic seeds
500-999 and clusters 04, 07; test uses seeds >= 1000 and clusters 01, 09, 02 (docs/evaluation.md).
Loading a model runs pickle: only load model files you trust (see :mod:`agents.ppo.loading`).
"""

from agents.ppo.config import (
    TEST_SEED_START,
    TEST_TRACES,
    TRAIN_SEEDS,
    TRAIN_TRACES,
    VALIDATION_SEEDS,
    VALIDATION_TRACES,
    PPOConfig,
    TraceWindows,
    TrainConfig,
)
from agents.ppo.distribution import action_types, factored_log_probs
from agents.ppo.loading import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_MODEL_PATH,
    MODELS_DIR,
    UNIVERSAL_CONFIG_PATH,
    UNIVERSAL_MODEL_PATH,
    PPOPolicy,
    check_model_path,
    load_policy,
    make_ppo_policy,
    shipped_model_path,
)
from agents.ppo.network import SlotPlanHead, SlotPlanPolicy, SlotSetExtractor, policy_kwargs_for
from agents.ppo.reference_reward import (
    ReferenceCache,
    ReferenceCurve,
    ReferenceReward,
    RewardShaper,
    differenced_reward,
    run_reference,
)
from agents.ppo.rollout import VecRollout, gae, step_discounts
from agents.ppo.training import train
from agents.ppo.warmstart import GrowTeacher, SrptTeacher, behaviour_clone, collect_teacher
from agents.ppo.workloads import MixtureGenerator, make_env, test_workloads, training_generator, validation_workloads

__all__ = [
    "DEFAULT_CONFIG_PATH", "DEFAULT_MODEL_PATH", "MODELS_DIR", "UNIVERSAL_CONFIG_PATH", "UNIVERSAL_MODEL_PATH",
    "TEST_SEED_START", "TEST_TRACES", "TRAIN_SEEDS",
    "TRAIN_TRACES", "VALIDATION_SEEDS", "VALIDATION_TRACES", "GrowTeacher", "MixtureGenerator", "PPOConfig",
    "PPOPolicy", "ReferenceCache", "ReferenceCurve", "ReferenceReward", "RewardShaper", "SlotPlanHead",
    "SlotPlanPolicy", "SlotSetExtractor", "SrptTeacher", "TraceWindows", "TrainConfig", "VecRollout", "action_types",
    "behaviour_clone", "check_model_path", "collect_teacher", "differenced_reward", "factored_log_probs", "gae",
    "load_policy", "make_env", "make_ppo_policy", "policy_kwargs_for", "run_reference", "shipped_model_path",
    "step_discounts", "test_workloads", "train", "training_generator", "validation_workloads",
]
