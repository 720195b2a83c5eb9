"""PPO on Ray RLlib's current API stack (RLModule / Learner / EnvRunner) with action masking.

An alternative to :mod:`agents.ppo` (stable-baselines3) that scales sampling over Ray: ``num_env_runners``
EnvRunner actors (each stepping ``num_envs_per_env_runner`` copies of :class:`~frenzy_env.env.FrenzyEnv`)
feed one local Learner. Run it with ``frenzy train --backend rllib`` or :func:`train_rllib`.

The package re-exports the public names of its modules, so ``from agents.rllib import X`` works for all of them:

- :mod:`agents.rllib.config`: the run's configuration (:class:`RLlibTrainConfig`);
- :mod:`agents.rllib.envs`: the env as RLlib steps it (:func:`make_env`, :class:`InvalidStepInfo`,
  :class:`RLlibActionMaskObservation`, :func:`flat_feature_space`) and :func:`register_rllib_envs`;
- :mod:`agents.rllib.rl_module`: the Ray-derived :class:`MaskedPPOTorchRLModule` and
  :class:`InvalidActionCallback`, built on first use;
- :mod:`agents.rllib.training`: :func:`build_algorithm_config`, :func:`train_rllib`, :func:`summarise_result`;
- :mod:`agents.rllib.loading`: :func:`load_rllib_policy`, :class:`RLlibPolicy`, :func:`find_module_checkpoint`.

Masking
-------
FrenzyEnv observes a one-level ``Dict`` of flat float32 boxes (``queue``, ``running``, ``gpus``, ``nodes``,
``globals``; under ``interface="universal"`` ``plans`` in place of ``nodes``) plus the int8 ``action_mask`` (A,);
everything here reads the entries from the env's space, so both layouts work. RLlib's PPO networks need one flat
vector, and its action-masking example module expects the layout ``{"action_mask", "observations"}``, so this
package has its own :class:`MaskedPPOTorchRLModule` (a subclass of RLlib's ``DefaultPPOTorchRLModule``): it
concatenates the float entries (in the observation space's key order) into a (B, F) vector for the default MLP
encoder, and adds ``clamp(log(mask), min=FLOAT_MIN)`` to the action logits in every forward pass (exploration,
inference and training), so illegal actions have probability zero. The env is used unchanged apart from
:class:`InvalidStepInfo`, which adds ``info["invalid_step"]`` so that :class:`InvalidActionCallback` can report
illegal actions per iteration (``invalid_actions`` in ``train_log.json``; it stays 0 with masking).

RLlib outside the CLI
---------------------
``from agents.rllib import register_rllib_envs; register_rllib_envs()`` registers every ``frenzy/*`` id
(e.g. ``"frenzy/HeteroClusterSmall-v5"``) with ``ray.tune.registry.register_env``, so that
``PPOConfig().environment("frenzy/HeteroClusterSmall-v5", env_config={...})`` works. Each id creates
:func:`make_rllib_env`: the env in :class:`RLlibActionMaskObservation`, i.e. ``{"action_mask": float32 (A,),
"observations": float32 (F,)}``, the layout of RLlib's stock ``ActionMaskingTorchRLModule``
(``ray.rllib.examples.rl_modules.classes.action_masking_rlm``), which :class:`MaskedPPOTorchRLModule` also
accepts. (Without it, RLlib ``gym.make``-s the raw Dict observation, which its default catalog cannot
encode.) :func:`build_algorithm_config` registers by itself.

Ray is optional
---------------
``import agents.rllib`` imports nothing from Ray. The two Ray-derived classes, :class:`MaskedPPOTorchRLModule`
and :class:`InvalidActionCallback`, are built on first attribute access (PEP 562 module ``__getattr__``), so
they still pickle by reference as ``agents.rllib.<Name>`` to Ray workers and into checkpoints. Without Ray,
:func:`train_rllib` raises :class:`~frenzy_env.errors.ConfigError` with the install command.

Outputs (``out_dir``)
---------------------
``config.json`` (written first), ``train_log.json`` (rewritten after every iteration: one row per iteration
with the episode return mean, env steps sampled, invalid actions, losses and seconds) and ``checkpoint/``
(``Algorithm.save_to_path``; restore with ``ray.rllib.algorithms.algorithm.Algorithm.from_checkpoint``).
With ``address`` set (an existing Ray cluster), ``frenzy-env`` must be installed on every node.

Evaluating a checkpoint
-----------------------
:func:`load_rllib_policy` restores only the trained RLModule (``checkpoint/``:data:`MODULE_SUBDIR`; no
Algorithm, no EnvRunners, no Ray cluster) and wraps it in :class:`RLlibPolicy`, which has the
stable-baselines3 ``predict`` signature that :func:`frenzy_env.evaluation.episodes.play` calls, so
``frenzy evaluate --policies fifo,rllib --rllib-checkpoint OUT`` compares it with the baselines. A checkpoint
is read with pickle (the module class and its constructor arguments): load only checkpoints you trust. It is
refused unless its observation and action spaces equal the env's (compared as spaces, not by cluster name:
under ``interface="universal"`` a checkpoint of one cluster plays on any other of at most 4 GPU types).
"""

from __future__ import annotations

from typing import Any

from agents.rllib.config import RLlibTrainConfig
from agents.rllib.envs import (
    ENV_NAME,
    MASK_KEY,
    OBSERVATIONS_KEY,
    InvalidStepInfo,
    RLlibActionMaskObservation,
    flat_feature_space,
    frenzy_env_ids,
    make_env,
    make_rllib_env,
    register_rllib_envs,
)
from agents.rllib.loading import MODULE_SUBDIR, RLlibPolicy, find_module_checkpoint, load_rllib_policy
from agents.rllib.rl_module import LAZY_NAMES, ray_class
from agents.rllib.training import build_algorithm_config, summarise_result, train_rllib


def __getattr__(name: str) -> Any:
    """PEP 562: build :class:`MaskedPPOTorchRLModule` and :class:`InvalidActionCallback` on first use."""
    if name in LAZY_NAMES:
        return ray_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENV_NAME",
    "MASK_KEY",
    "MODULE_SUBDIR",
    "OBSERVATIONS_KEY",
    "InvalidStepInfo",
    "RLlibActionMaskObservation",
    "RLlibPolicy",
    "RLlibTrainConfig",
    "build_algorithm_config",
    "find_module_checkpoint",
    "flat_feature_space",
    "frenzy_env_ids",
    "load_rllib_policy",
    "make_env",
    "make_rllib_env",
    "register_rllib_envs",
    "summarise_result",
    "train_rllib",
]
