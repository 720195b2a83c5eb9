"""The Ray-derived classes of the RLlib backend, built on first use (they import Ray):
:class:`MaskedPPOTorchRLModule`, RLlib's default PPO module on the concatenated float entries of FrenzyEnv's Dict
observation with illegal-action logits pushed to ``FLOAT_MIN``, and :class:`InvalidActionCallback`, which logs
the illegal actions of each iteration. They are published as ``agents.rllib.<Name>`` (the package's module
``__getattr__`` calls :func:`ray_class`), so they pickle by reference under that name to Ray workers and into
checkpoints."""

from __future__ import annotations

from typing import Any

from agents.rllib.envs import MASK_KEY, check_masked_spaces, flat_feature_space, require_ray

#: The classes built on first use, by name.
LAZY_NAMES = ("MaskedPPOTorchRLModule", "InvalidActionCallback")
_CLASSES: dict[str, type] = {}


def ray_class(name: str) -> type:
    """The Ray-derived class ``name`` (one of :data:`LAZY_NAMES`), built with its sibling on first use;
    :class:`~frenzy_env.errors.ConfigError` with the install command without Ray."""
    if name not in _CLASSES:
        require_ray()
        _build_ray_classes()
    return _CLASSES[name]


def _build_ray_classes() -> None:
    """Define the Ray-derived classes (imports Ray) into :data:`_CLASSES`."""
    import torch
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
    from ray.rllib.callbacks.callbacks import RLlibCallback
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.torch_utils import FLOAT_MIN

    class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
        """RLlib's default PPO module (MLP encoder, policy and value heads) on the concatenated float
        entries of FrenzyEnv's Dict observation, with illegal-action logits pushed to ``FLOAT_MIN``."""

        def __init__(self, *, observation_space: Any = None, action_space: Any = None, **kwargs: Any) -> None:
            check_masked_spaces(observation_space, action_space)
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
        cls.__module__ = __package__  # agents.rllib, whose __getattr__ returns them
        cls.__qualname__ = cls.__name__
        _CLASSES[cls.__name__] = cls
