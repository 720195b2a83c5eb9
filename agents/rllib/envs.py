"""The frenzy env as RLlib trains on it: the env creator (:func:`make_env`), the invalid-step infos
(:class:`InvalidStepInfo`), the flat feature space of the observation, the layout of RLlib's stock
action-masking module (:class:`RLlibActionMaskObservation`) and the registration of the ids with Ray's
registry (:func:`register_rllib_envs`). Nothing here imports Ray at import time."""

from __future__ import annotations

import functools
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


def require_ray() -> None:
    """:class:`~frenzy_env.errors.ConfigError` with the install command unless Ray RLlib imports."""
    try:
        import ray  # noqa: F401
        import ray.rllib  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the rllib backend needs Ray RLlib ({exc}); install it with {_INSTALL_HINT}") from None


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


def check_masked_spaces(observation_space: Any, action_space: Any, user: str = "MaskedPPOTorchRLModule") -> None:
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
        check_masked_spaces(space, env.action_space, user="RLlibActionMaskObservation")
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
    require_ray()
    from ray.tune.registry import register_env

    ids = frenzy_env_ids()
    for env_id in ids:
        register_env(env_id, functools.partial(make_rllib_env, env_id))
    register_env(ENV_NAME, make_env)
    return ids
