"""PPO on Ray RLlib's current API stack (RLModule / Learner / EnvRunner) with action masking.

An alternative to :mod:`agents.ppo` (stable-baselines3) that scales sampling over Ray: ``num_env_runners``
EnvRunner actors (each stepping ``num_envs_per_env_runner`` copies of :class:`~frenzy_env.env.FrenzyEnv`)
feed one local Learner. Run it with ``frenzy train --backend rllib`` or :func:`train_rllib`.

Masking
-------
FrenzyEnv observes a one-level ``Dict`` of flat float32 boxes (``queue``, ``running``, ``gpus``, ``nodes``,
``globals``) plus the int8 ``action_mask`` (A,). RLlib's PPO networks need one flat vector, and its
action-masking example module expects the layout ``{"action_mask", "observations"}``, so this module has its
own :class:`MaskedPPOTorchRLModule` (a subclass of RLlib's ``DefaultPPOTorchRLModule``): it concatenates the
float entries (in the observation space's key order) into a (B, F) vector for the default MLP encoder, and
adds ``clamp(log(mask), min=FLOAT_MIN)`` to the action logits in every forward pass (exploration, inference
and training), so illegal actions have probability zero. The env is used unchanged apart from
:class:`InvalidStepInfo`, which adds ``info["invalid_step"]`` so that :class:`InvalidActionCallback` can
report illegal actions per iteration (``invalid_actions`` in ``train_log.json``; it stays 0 with masking).

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
is read with pickle (the module class and its constructor arguments): load only checkpoints you trust.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from frenzy_env.errors import ConfigError

#: The name the env creator is registered under with ``ray.tune.registry.register_env``.
ENV_NAME = "frenzy-rllib-v4"
#: The observation entry holding the (A,) legal-action mask.
MASK_KEY = "action_mask"
#: The :class:`RLlibActionMaskObservation` entry holding the concatenated float features (RLlib's name).
OBSERVATIONS_KEY = "observations"
_INSTALL_HINT = 'pip install -e ".[ray]"'
_LAZY_NAMES = ("MaskedPPOTorchRLModule", "InvalidActionCallback")
#: Where ``Algorithm.save_to_path`` puts the (single-agent) RLModule inside a checkpoint directory.
MODULE_SUBDIR = Path("learner_group", "learner", "rl_module", "default_policy")


# ------------------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class RLlibTrainConfig:
    """Everything :func:`train_rllib` needs; saved as ``config.json`` beside the checkpoint.

    Environment: ``cluster`` (cluster preset), ``workload`` (workload preset), ``predictor`` (memory
    predictor), ``queue_slots``/``running_slots`` (env sizes), ``max_episode_steps`` (env truncation; None:
    episodes run until every job is done).
    Sampling: ``num_env_runners`` EnvRunner actors (0: sample in the driver process), each stepping
    ``num_envs_per_env_runner`` envs; ``train_batch_size`` env steps per iteration.
    Objective: ``reference`` (a ``baselines`` policy name; None: the env's raw reward) and ``reward_gain``: the
    reward of :class:`agents.ppo.PPOConfig`, differenced against the reference playing the same workload and
    normalised per episode (:class:`agents.ppo.ReferenceReward`), so an episode returns ``reward_gain * (1 -
    agent cost / reference cost)``; ``gamma`` 1 (undiscounted, as the sb3 trainer's default; RLlib discounts
    per step, so the sb3 trainer's per-hour discount ``horizon_h`` has no counterpart here).
    PPO: ``minibatch_size``, ``num_epochs`` (passes over each batch), ``lr``, ``gamma``, ``lambda_`` (GAE),
    ``clip_param``, ``entropy_coeff``, ``grad_clip`` (None: none), ``hidden`` (MLP widths of the policy and
    the separate value network); defaults follow :class:`agents.ppo.PPOConfig`.
    Run: ``iterations`` (training iterations), ``seed``, ``out_dir``, ``address`` (an existing Ray
    cluster, e.g. ``"auto"`` or ``"ray://head:10001"``; None starts a local Ray with ``num_cpus`` CPUs,
    None = all), ``progress`` (print one line per iteration).
    """

    cluster: str = "frenzy-testbed"
    workload: str = "synthetic-small"
    predictor: str = "extended"
    queue_slots: int = 64
    running_slots: int = 64
    max_episode_steps: int | None = None
    iterations: int = 10
    num_env_runners: int = 1
    num_envs_per_env_runner: int = 4
    train_batch_size: int = 4000
    minibatch_size: int = 256
    num_epochs: int = 4
    lr: float = 1e-4
    reference: str | None = "doubling"
    reward_gain: float = 10.0
    gamma: float = 1.0
    lambda_: float = 0.95
    clip_param: float = 0.1
    entropy_coeff: float = 0.001
    grad_clip: float | None = 0.5
    hidden: tuple[int, ...] = (256, 256)
    seed: int = 0
    out_dir: str = "runs/rllib"
    address: str | None = None
    num_cpus: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        from frenzy_env.simulator import PREDICTORS
        from frenzy_env.workload import make_generator
        from frenzy_env.world.cluster import ClusterSpec

        positive = ("queue_slots", "running_slots", "iterations", "num_envs_per_env_runner", "train_batch_size",
                    "minibatch_size", "num_epochs")
        for name in positive:
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("num_env_runners", self.num_env_runners, minimum=0)
        _check_int("seed", self.seed, minimum=0)
        for name in ("max_episode_steps", "num_cpus"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), minimum=1)
        if self.minibatch_size > self.train_batch_size:
            raise ConfigError(
                f"minibatch_size must be <= train_batch_size ({self.train_batch_size}), got {self.minibatch_size}"
            )
        _check_float("lr", self.lr, lo=0.0, lo_open=True)
        _check_float("gamma", self.gamma, lo=0.0, hi=1.0, lo_open=True)
        _check_float("lambda_", self.lambda_, lo=0.0, hi=1.0)
        _check_float("reward_gain", self.reward_gain, lo=0.0, lo_open=True)
        if self.reference is not None:
            from baselines import POLICIES

            if self.reference not in POLICIES:
                raise ConfigError(
                    f"reference must be a baseline policy name or None, got {self.reference!r} "
                    f"(known: {', '.join(POLICIES)})"
                )
        _check_float("clip_param", self.clip_param, lo=0.0, lo_open=True)
        _check_float("entropy_coeff", self.entropy_coeff, lo=0.0)
        if self.grad_clip is not None:
            _check_float("grad_clip", self.grad_clip, lo=0.0, lo_open=True)
        hidden = tuple(self.hidden) if isinstance(self.hidden, (list, tuple)) else self.hidden
        if not isinstance(hidden, tuple) or not hidden or not all(_is_int(h) and h > 0 for h in hidden):
            raise ConfigError(f"hidden must be a non-empty sequence of positive integers, got {self.hidden!r}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in hidden))
        for name in ("cluster", "workload", "out_dir"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise ConfigError(f"address must be a Ray address string or None, got {self.address!r}")
        if self.address is not None and self.num_cpus is not None:
            raise ConfigError(
                f"num_cpus ({self.num_cpus}) applies to a local Ray only; it cannot be combined with "
                f"address={self.address!r}"
            )
        if self.predictor not in PREDICTORS:
            raise ConfigError(f"predictor must be one of {', '.join(PREDICTORS)}, got {self.predictor!r}")
        ClusterSpec.preset(self.cluster)  # UnknownNameError lists the presets
        make_generator(self.workload)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        d = dataclasses.asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RLlibTrainConfig:
        """The config of a ``config.json`` dict (its ``backend`` and ``ray_version`` notes are skipped;
        other unknown keys raise :class:`ConfigError`)."""
        from frenzy_env.errors import check_keys

        data = {k: v for k, v in data.items() if k not in ("backend", "ray_version")}
        check_keys("RLlibTrainConfig", data, [f.name for f in dataclasses.fields(cls)])
        if "hidden" in data and isinstance(data["hidden"], list):
            data["hidden"] = tuple(data["hidden"])
        return cls(**data)

    def env_config(self) -> dict[str, Any]:
        """The RLlib ``env_config``: the keyword arguments of :class:`~frenzy_env.env.FrenzyEnv`, plus
        ``reference`` and ``reward_gain`` when the reward is differenced (:func:`make_env` takes them off)."""
        reward = {} if self.reference is None else {"reference": self.reference, "reward_gain": self.reward_gain}
        return {
            **reward,
            "cluster": self.cluster,
            "workload": self.workload,
            "predictor": self.predictor,
            "queue_slots": self.queue_slots,
            "running_slots": self.running_slots,
            "max_steps": self.max_episode_steps,
        }


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_int(name: str, value: Any, *, minimum: int) -> None:
    if not _is_int(value) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {kind}, got {value!r}")


def _check_float(
    name: str, value: Any, *, lo: float, hi: float = math.inf, lo_open: bool = False
) -> None:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        bound = f"> {lo}" if lo_open else f">= {lo}"
        rng = bound if hi == math.inf else f"{bound} and <= {hi}"
        raise ConfigError(f"{name} must be a finite number {rng}, got {value!r}")


# ------------------------------------------------------------------------------------------ env
class InvalidStepInfo(gym.Wrapper):
    """Adds ``info["invalid_step"]`` (1 if this step's action was illegal, else 0) from FrenzyEnv's
    cumulative ``info["invalid_actions"]``, and drops ``info["action_mask"]`` (the observation has it)
    so that the infos RLlib ships from EnvRunners to the driver stay small."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._seen = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._seen = int(info.get("invalid_actions", 0))
        info.pop("action_mask", None)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        count = int(info.get("invalid_actions", 0))
        info["invalid_step"] = count - self._seen
        self._seen = count
        info.pop("action_mask", None)
        return obs, reward, terminated, truncated, info


def make_env(env_config: dict[str, Any] | None = None) -> gym.Env:
    """The RLlib env creator: a :class:`FrenzyEnv` of ``env_config`` (its keyword arguments) wrapped in
    :class:`InvalidStepInfo`; with a ``reference`` key (and ``reward_gain``, default 10) the reward is
    differenced against that baseline first (:class:`agents.ppo.ReferenceReward`). Module-level so that Ray
    pickles it by reference."""
    from frenzy_env.env import FrenzyEnv

    kwargs = dict(env_config or {})
    kwargs.pop("num_envs", None)  # RLlib's vectorised entry point adds it
    reference = kwargs.pop("reference", None)
    gain = kwargs.pop("reward_gain", 10.0)
    env: gym.Env = FrenzyEnv(**kwargs)
    if reference is not None:
        from agents.ppo.reference_reward import ReferenceReward

        env = ReferenceReward(env, reference, gain)
    return InvalidStepInfo(env)


def flat_feature_space(observation_space: gym.spaces.Dict) -> gym.spaces.Box:
    """The (F,) float32 box of the concatenated non-mask entries of ``observation_space`` (key order)."""
    keys = [k for k in observation_space.spaces if k != MASK_KEY]
    low = np.concatenate([np.asarray(observation_space[k].low, np.float32).ravel() for k in keys])
    high = np.concatenate([np.asarray(observation_space[k].high, np.float32).ravel() for k in keys])
    return gym.spaces.Box(low, high, dtype=np.float32)


def _check_masked_spaces(observation_space: Any, action_space: Any, user: str = "MaskedPPOTorchRLModule") -> None:
    if not isinstance(observation_space, gym.spaces.Dict) or MASK_KEY not in observation_space.spaces:
        raise ValueError(
            f"{user} needs a Dict observation space with an {MASK_KEY!r} entry, got {observation_space!r}"
        )
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"{user} needs a Discrete action space, got {action_space!r}")
    if observation_space[MASK_KEY].shape != (int(action_space.n),):
        raise ValueError(
            f"{MASK_KEY} has shape {observation_space[MASK_KEY].shape}, expected ({int(action_space.n)},)"
        )
    for key, space in observation_space.spaces.items():
        if key != MASK_KEY and not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
            raise ValueError(f"observation entry {key!r} must be a flat Box, got {space!r}")


class RLlibActionMaskObservation(gym.ObservationWrapper):
    """FrenzyEnv's observation in the layout of RLlib's stock action-masking module.

    ``{"action_mask": float32 Box(0, 1, (A,)), "observations": float32 Box(F,)}``: the mask as 0.0/1.0 and
    every other (flat Box) entry concatenated in the observation space's key order (the same features,
    in the same order, as :func:`flat_feature_space`). That is what
    ``ray.rllib.examples.rl_modules.classes.action_masking_rlm.ActionMaskingTorchRLModule`` reads (it
    feeds ``observations`` to the default PPO networks and adds ``log(action_mask)``, clamped, to the
    logits); :class:`MaskedPPOTorchRLModule` accepts this layout too. Wrap the env (or a
    :class:`InvalidStepInfo` of it) directly; :func:`register_rllib_envs` does it for the registered ids.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        _check_masked_spaces(space, env.action_space, user="RLlibActionMaskObservation")
        self.feature_keys = tuple(k for k in space.spaces if k != MASK_KEY)
        n = int(env.action_space.n)
        self.observation_space = gym.spaces.Dict(
            {
                MASK_KEY: gym.spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32),
                OBSERVATIONS_KEY: flat_feature_space(space),
            }
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        return {
            MASK_KEY: np.asarray(observation[MASK_KEY], dtype=np.float32),
            OBSERVATIONS_KEY: np.concatenate(
                [np.asarray(observation[k], dtype=np.float32).ravel() for k in self.feature_keys]
            ),
        }


def make_rllib_env(env_id: str, env_config: dict[str, Any] | None = None) -> gym.Env:
    """``gym.make(env_id, **env_config)`` wrapped in :class:`InvalidStepInfo` and
    :class:`RLlibActionMaskObservation`: the env that :func:`register_rllib_envs` registers for ``env_id``
    (``env_config`` overrides the id's FrenzyEnv keyword arguments, as in ``gym.make``)."""
    import frenzy_env  # noqa: F401  (registers the frenzy/* ids with Gymnasium)

    kwargs = dict(env_config or {})
    kwargs.pop("num_envs", None)  # RLlib's vectorised entry point adds it
    return RLlibActionMaskObservation(InvalidStepInfo(gym.make(env_id, **kwargs)))


def frenzy_env_ids() -> tuple[str, ...]:
    """Every Gymnasium id under the ``frenzy/`` namespace (the ones ``import frenzy_env`` registers)."""
    import frenzy_env  # noqa: F401

    return tuple(sorted(env_id for env_id in gym.registry if env_id.startswith("frenzy/")))


def register_rllib_envs() -> tuple[str, ...]:
    """Make the frenzy env ids usable as ``PPOConfig().environment(<id>)`` in RLlib; returns the ids.

    Registers with ``ray.tune.registry.register_env`` every :func:`frenzy_env_ids` id (e.g.
    ``"frenzy/HeteroClusterSmall-v5"``), each creating :func:`make_rllib_env` of that id (the
    :class:`RLlibActionMaskObservation` layout of RLlib's stock ``ActionMaskingTorchRLModule``; the
    ``env_config`` dict overrides the id's FrenzyEnv keyword arguments), and :data:`ENV_NAME` with
    :func:`make_env` (the raw Dict observation, for :class:`MaskedPPOTorchRLModule`). Ray's registry
    lives in the Ray session: call it again after a ``ray.shutdown()`` (it is cheap; registering twice is
    harmless). :func:`build_algorithm_config` and :func:`train_rllib` call it themselves.
    """
    _require_ray()
    from ray.tune.registry import register_env

    ids = frenzy_env_ids()
    for env_id in ids:
        register_env(env_id, functools.partial(make_rllib_env, env_id))
    register_env(ENV_NAME, make_env)
    return ids


# ------------------------------------------------------------------------------------------ Ray classes
def _build_ray_classes() -> None:
    """Define the Ray-derived classes (imports Ray) and publish them as module attributes."""
    import torch
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
    from ray.rllib.callbacks.callbacks import RLlibCallback
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.torch_utils import FLOAT_MIN

    class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
        """RLlib's default PPO module (MLP encoder, policy and value heads) on the concatenated float
        entries of FrenzyEnv's Dict observation, with illegal-action logits pushed to ``FLOAT_MIN``."""

        def __init__(self, *, observation_space: Any = None, action_space: Any = None, **kwargs: Any) -> None:
            _check_masked_spaces(observation_space, action_space)
            self.observation_space_with_mask = observation_space
            self.feature_keys = tuple(k for k in observation_space.spaces if k != MASK_KEY)
            # The default networks are built for the flat (F,) feature box ...
            super().__init__(
                observation_space=flat_feature_space(observation_space), action_space=action_space, **kwargs
            )

        def setup(self) -> None:
            """Build the default networks, then report the env's Dict space (checkpoints rebuild from it)."""
            super().setup()
            self.observation_space = self.observation_space_with_mask

        def _split(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
            """(a shallow copy of ``batch`` whose OBS is the (..., F) feature tensor, the (..., A) mask)."""
            obs = batch[Columns.OBS]
            if not isinstance(obs, dict) or MASK_KEY not in obs:
                raise ValueError(f"expected a dict observation with an {MASK_KEY!r} entry in the batch")
            features = torch.cat([obs[k].float() for k in self.feature_keys], dim=-1)  # (..., F)
            inner = dict(batch)
            inner[Columns.OBS] = features
            return inner, obs[MASK_KEY]

        @staticmethod
        def _mask_logits(out: dict[str, Any], mask: Any) -> dict[str, Any]:
            logits = out[Columns.ACTION_DIST_INPUTS]  # (..., A)
            out[Columns.ACTION_DIST_INPUTS] = logits + torch.clamp(torch.log(mask.to(logits.dtype)), min=FLOAT_MIN)
            return out

        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            inner, mask = self._split(batch)
            return self._mask_logits(super()._forward(inner, **kwargs), mask)

        def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            inner, mask = self._split(batch)
            return self._mask_logits(super()._forward_train(inner, **kwargs), mask)

        def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
            """Value estimates (B,); the observation is flattened unless ``embeddings`` are given."""
            if embeddings is None:
                batch, _ = self._split(batch)
            return super().compute_values(batch, embeddings)

    class InvalidActionCallback(RLlibCallback):
        """Logs ``invalid_actions`` (illegal actions taken this iteration; 0 under masking) and
        ``invalid_actions_lifetime`` into the EnvRunner metrics, from :class:`InvalidStepInfo`'s infos."""

        def on_sample_end(self, *, metrics_logger: Any = None, samples: Any = None, **kwargs: Any) -> None:
            invalid = 0
            for episode in samples or ():
                # infos[0] belongs to the chunk's first observation (a reset, or the previous chunk's last step)
                invalid += sum(int(info.get("invalid_step", 0)) for info in episode.get_infos()[1:])
            if metrics_logger is not None:
                metrics_logger.log_value("invalid_actions", invalid, reduce="sum")
                metrics_logger.log_value("invalid_actions_lifetime", invalid, reduce="lifetime_sum")

    for cls in (MaskedPPOTorchRLModule, InvalidActionCallback):
        cls.__module__ = __name__
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls


def __getattr__(name: str) -> Any:
    """PEP 562: build :class:`MaskedPPOTorchRLModule` and :class:`InvalidActionCallback` on first use."""
    if name in _LAZY_NAMES:
        _require_ray()
        _build_ray_classes()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _ray_class(name: str) -> Any:
    """A lazily built class by name (module globals skip the module ``__getattr__``)."""
    return globals()[name] if name in globals() else __getattr__(name)


def _require_ray() -> None:
    try:
        import ray  # noqa: F401
        import ray.rllib  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the rllib backend needs Ray RLlib ({exc}); install it with {_INSTALL_HINT}") from None


# ------------------------------------------------------------------------------------------ training
def build_algorithm_config(cfg: RLlibTrainConfig) -> Any:
    """The RLlib ``PPOConfig`` (new API stack, masked module, invalid-action metrics) of ``cfg``.

    It calls :func:`register_rllib_envs` (so :data:`ENV_NAME` is known to ``build_algo()``; after a
    ``ray.shutdown()`` build the config again or call :func:`register_rllib_envs`).
    """
    register_rllib_envs()
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .environment(ENV_NAME, env_config=cfg.env_config())
        .env_runners(
            num_env_runners=cfg.num_env_runners,
            num_envs_per_env_runner=cfg.num_envs_per_env_runner,
            rollout_fragment_length="auto",
        )
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=cfg.train_batch_size,
            minibatch_size=cfg.minibatch_size,
            num_epochs=cfg.num_epochs,
            lr=cfg.lr,
            gamma=cfg.gamma,
            lambda_=cfg.lambda_,
            clip_param=cfg.clip_param,
            entropy_coeff=cfg.entropy_coeff,
            grad_clip=cfg.grad_clip,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=_ray_class("MaskedPPOTorchRLModule"),
                model_config={"fcnet_hiddens": list(cfg.hidden), "fcnet_activation": "relu"},
            )
        )
        .callbacks(_ray_class("InvalidActionCallback"))
        .debugging(seed=cfg.seed, log_level="WARN")
    )


def _number(value: Any) -> float | None:
    """A JSON-safe float (None for missing or NaN values)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def summarise_result(result: dict[str, Any], iteration: int) -> dict[str, Any]:
    """The ``train_log.json`` row of one ``Algorithm.train()`` result (None where a metric is missing,
    e.g. the episode return when no episode ended yet)."""
    runners = result.get("env_runners", {}) or {}
    learner = (result.get("learners", {}) or {}).get("default_policy", {}) or {}
    return {
        "iteration": iteration,
        "episode_return_mean": _number(runners.get("episode_return_mean")),
        "episode_len_mean": _number(runners.get("episode_len_mean")),
        "episodes": int(_number(runners.get("num_episodes")) or 0),
        "env_steps_sampled": int(_number(runners.get("num_env_steps_sampled")) or 0),
        "env_steps_sampled_lifetime": int(_number(result.get("num_env_steps_sampled_lifetime")) or 0),
        "invalid_actions": int(_number(runners.get("invalid_actions")) or 0),
        "policy_loss": _number(learner.get("policy_loss")),
        "vf_loss": _number(learner.get("vf_loss")),
        "entropy": _number(learner.get("entropy")),
        "seconds": _number(result.get("time_this_iter_s")),
    }


def _init_ray(cfg: RLlibTrainConfig) -> bool:
    """Start or join Ray as ``cfg`` says (:func:`frenzy_env.evaluation.distributed.connect`); True if this call did (and
    must shut it down), False if Ray was already initialised in this process."""
    import ray

    from frenzy_env.evaluation.distributed import connect

    if ray.is_initialized():
        return False
    if cfg.address is None:
        cpus = cfg.num_cpus if cfg.num_cpus is not None else (os.cpu_count() or 1)
        if cfg.num_env_runners > cpus:
            raise ConfigError(
                f"num_env_runners ({cfg.num_env_runners}) needs one CPU each, but the local Ray has {cpus} "
                f"(num_cpus={cfg.num_cpus!r}); lower num_env_runners or raise num_cpus"
            )
    return connect(cfg.address, cfg.num_cpus)


def train_rllib(cfg: RLlibTrainConfig) -> Path:
    """Train PPO with RLlib for ``cfg.iterations`` iterations; returns ``cfg.out_dir`` (see the module
    docstring for what it holds). Ray is shut down at the end only if this call started it."""
    if not isinstance(cfg, RLlibTrainConfig):
        raise ConfigError(f"cfg must be an RLlibTrainConfig, got {type(cfg).__name__}")
    _require_ray()
    import ray

    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(
        json.dumps({**cfg.to_dict(), "backend": "rllib", "ray_version": ray.__version__}, indent=2)
    )
    started = _init_ray(cfg)
    try:
        algo = build_algorithm_config(cfg).build_algo()  # registers the envs in this Ray session
        try:
            rows: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            for it in range(1, cfg.iterations + 1):
                row = summarise_result(algo.train(), it)
                rows.append(row)
                _write_log(out, rows, time.perf_counter() - t0, checkpoint=None)
                if cfg.progress:
                    ret = row["episode_return_mean"]
                    secs = row["seconds"] or 0.0
                    print(
                        f"[rllib] iter {it}/{cfg.iterations}: return_mean "
                        f"{'n/a' if ret is None else f'{ret:.2f}'} ({row['episodes']} episodes), "
                        f"{row['env_steps_sampled']} env steps ({row['env_steps_sampled_lifetime']} total), "
                        f"invalid {row['invalid_actions']}, {secs:.1f} s",
                        flush=True,
                    )
            checkpoint = Path(algo.save_to_path(str((out / "checkpoint").resolve())))
            _write_log(out, rows, time.perf_counter() - t0, checkpoint=checkpoint)
        finally:
            algo.stop()
    finally:
        if started:
            ray.shutdown()
    return out


def _write_log(out: Path, rows: list[dict[str, Any]], wall: float, checkpoint: Path | None) -> None:
    log = {
        "backend": "rllib",
        "iterations": rows,
        "env_steps": rows[-1]["env_steps_sampled_lifetime"] if rows else 0,
        "invalid_actions": sum(r["invalid_actions"] for r in rows),
        "wall_seconds": wall,
        "checkpoint": None if checkpoint is None else str(checkpoint),
    }
    (out / "train_log.json").write_text(json.dumps(log, indent=2))


# ------------------------------------------------------------------------------------------ evaluation
def find_module_checkpoint(path: str | os.PathLike) -> Path:
    """The RLModule directory of an RLlib checkpoint, given the run folder (``OUT`` of
    ``frenzy train --backend rllib``), its ``checkpoint/`` or the module folder
    (``checkpoint/``:data:`MODULE_SUBDIR`) itself. Needs no Ray.

    Raises :class:`~frenzy_env.errors.ConfigError` naming ``path`` when it is missing, not a directory or
    holds no module checkpoint in any of those places.
    """
    given = Path(path).expanduser()
    if not given.exists():
        raise ConfigError(f"RLlib checkpoint {str(path)!r} does not exist")
    if not given.is_dir():
        raise ConfigError(
            f"RLlib checkpoint {str(path)!r} is not a directory; give the training run folder, its checkpoint/ "
            f"or the module folder checkpoint/{MODULE_SUBDIR.as_posix()}"
        )
    candidates = (given / "checkpoint" / MODULE_SUBDIR, given / MODULE_SUBDIR, given / MODULE_SUBDIR.name, given)
    for candidate in candidates:
        if _is_module_dir(candidate):
            return candidate
    raise ConfigError(
        f"RLlib checkpoint {str(path)!r} holds no RLModule: looked for {MODULE_SUBDIR.as_posix()} in it and in "
        f"its checkpoint/ folder (written by frenzy train --backend rllib)"
    )


def _is_module_dir(path: Path) -> bool:
    """True for a directory an ``RLModule.save_to_path`` wrote (constructor pickle and module state)."""
    return (path / "class_and_ctor_args.pkl").is_file() and any(path.glob("module_state*"))


@contextmanager
def _quiet_rllib_deprecations() -> Any:
    """Silence RLlib's own ``DeprecationWarning`` log lines (RLModule builds a deprecated config object
    internally on every construction); other warnings still show."""
    logger = logging.getLogger("ray._common.deprecation")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _trained_for(module_dir: Path) -> str:
    """", trained on cluster 'X' with queue_slots=Q, running_slots=R" from the run's ``config.json``
    beside ``checkpoint/`` (empty when the module is not inside a training run folder)."""
    if tuple(module_dir.parts[-len(MODULE_SUBDIR.parts):]) != MODULE_SUBDIR.parts:
        return ""
    config = module_dir.parents[len(MODULE_SUBDIR.parts) - 1].parent / "config.json"
    try:
        data = json.loads(config.read_text())
        return (
            f" (its config.json: cluster {data['cluster']!r}, queue_slots={data['queue_slots']}, "
            f"running_slots={data['running_slots']})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _check_env_spaces(module: Any, env: Any, path: str | os.PathLike, module_dir: Path) -> None:
    """ConfigError naming the checkpoint unless the module's spaces have the shapes of ``env``'s."""
    base = env.unwrapped
    m_obs, e_obs = module.observation_space, base.observation_space
    m_shapes = {k: s.shape for k, s in m_obs.spaces.items()} if isinstance(m_obs, gym.spaces.Dict) else {}
    e_shapes = {k: s.shape for k, s in e_obs.spaces.items()}
    m_n, e_n = int(getattr(module.action_space, "n", -1)), int(base.action_space.n)
    if m_shapes == e_shapes and m_n == e_n:
        return
    diffs = [f"action space Discrete({m_n}) vs Discrete({e_n})"] if m_n != e_n else []
    diffs += [
        f"observation {k!r} {m_shapes.get(k, 'missing')} vs {e_shapes.get(k, 'missing')}"
        for k in sorted(set(m_shapes) | set(e_shapes))
        if m_shapes.get(k) != e_shapes.get(k)
    ]
    raise ConfigError(
        f"RLlib checkpoint {str(path)!r} does not fit this env (checkpoint vs env: {'; '.join(diffs)}); it was "
        f"trained for another cluster or slot count{_trained_for(module_dir)}, this env has cluster "
        f"{base.cluster.name!r}, queue_slots={base.queue_slots}, running_slots={base.running_slots}"
    )


class RLlibPolicy:
    """A trained :class:`MaskedPPOTorchRLModule` with the stable-baselines3 ``predict`` signature.

    ``predict(observation, state=None, episode_start=None, deterministic=True, action_masks=None)`` takes
    one observation dict (or a batch with a leading dimension) and returns ``(action, state)``: the argmax
    of the masked logits (``forward_inference``) when ``deterministic``, else a sample from the masked
    categorical distribution, drawn from a stream that :meth:`reset` derives from (``seed``, the env's
    ``episode_seed``). ``action_masks`` (bool or 0/1, shape (A,) or (B, A)) replaces the observation's
    ``action_mask`` when given. Illegal actions have probability zero either way.
    """

    name = "rllib"
    oracle = False

    def __init__(self, module: Any, env: Any = None, path: Path | None = None, seed: int = 0) -> None:
        import torch

        self.module = module
        self.env = env.unwrapped if env is not None else None
        self.path = path
        self.seed = int(seed)
        self.keys = tuple(module.observation_space.spaces)
        self._generator = torch.Generator()
        self.reset()

    def reset(self) -> None:
        """Restart the sampling stream from (``seed``, the episode's workload seed), so that an episode's
        sampled actions do not depend on the episodes played before it."""
        episode = getattr(self.env, "episode_seed", None)
        entropy = self.seed if episode is None else (self.seed, int(episode))
        self._generator.manual_seed(int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> 1))

    def predict(
        self,
        observation: dict[str, Any],
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        """The action for ``observation`` (a 0-d array; (B,) for a batch) and ``state`` unchanged."""
        import torch
        from ray.rllib.core.columns import Columns

        single = np.ndim(observation[MASK_KEY]) == 1
        obs = {k: np.asarray(observation[k]) for k in self.keys}
        if action_masks is not None:
            obs[MASK_KEY] = np.asarray(action_masks).astype(np.int8).reshape(obs[MASK_KEY].shape)
        batch = {k: torch.as_tensor(v[None] if single else v) for k, v in obs.items()}  # (B, ...)
        with torch.no_grad():
            logits = self.module.forward_inference({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS]  # (B, A)
            if deterministic:
                actions = logits.argmax(-1)
            else:
                probs = torch.softmax(logits.double(), -1)  # masked entries are exactly 0
                actions = torch.multinomial(probs, 1, generator=self._generator).squeeze(-1)
        out = actions.numpy().astype(np.int64)  # (B,)
        return (out.reshape(()) if single else out), state


def load_rllib_policy(env: Any, path: str | os.PathLike, *, seed: int = 0) -> RLlibPolicy:
    """Load the policy of an RLlib checkpoint written by :func:`train_rllib` for ``env``.

    ``path`` is the training run folder, its ``checkpoint/`` or the module folder
    (:func:`find_module_checkpoint`). Only the RLModule is restored (``RLModule.from_checkpoint``): no
    Algorithm, EnvRunners or Ray cluster. The module runs on the CPU with ``torch.set_num_threads(1)`` (one
    observation per call, where more threads are slower). ``seed`` seeds non-deterministic sampling.

    Security: the checkpoint is unpickled, which can run arbitrary code: load only checkpoints you trust.

    Raises :class:`~frenzy_env.errors.ConfigError` naming ``path`` when it is missing or holds no module,
    when Ray is not installed (with the install command), when the module cannot be restored or is not a
    :class:`MaskedPPOTorchRLModule`, and when ``env`` (None: not checked) has other observation or action
    space sizes than the checkpoint was trained for.
    """
    module_dir = find_module_checkpoint(path)
    _require_ray()
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule

    masked_cls = _ray_class("MaskedPPOTorchRLModule")
    torch.set_num_threads(1)  # one observation per call: extra threads only add synchronisation
    try:
        with _quiet_rllib_deprecations():
            module = RLModule.from_checkpoint(module_dir.resolve())
    except Exception as exc:  # a corrupt checkpoint, another Ray version, not an RLModule ...
        raise ConfigError(f"cannot load the RLlib module of checkpoint {str(path)!r} ({module_dir}): {exc}") from None
    if not isinstance(module, masked_cls):
        raise ConfigError(
            f"RLlib checkpoint {str(path)!r} holds a {type(module).__name__}, not the "
            f"agents.rllib.MaskedPPOTorchRLModule that frenzy train --backend rllib writes"
        )
    if env is not None:
        _check_env_spaces(module, env, path, module_dir)
    module.eval()
    return RLlibPolicy(module, env, module_dir, seed=seed)


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
