"""The configuration of an RLlib training run: :class:`RLlibTrainConfig`, checked on construction and saved as
``config.json``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError


@dataclass(frozen=True)
class RLlibTrainConfig:
    """Everything :func:`train_rllib` needs; saved as ``config.json`` beside the checkpoint.

    Environment: ``cluster`` (cluster preset), ``workload`` (workload preset), ``predictor`` (memory
    predictor), ``queue_slots``/``running_slots`` (env sizes), ``max_episode_steps`` (env truncation; None:
    episodes run until every job is done), ``interface`` (default None: the env's default layout; ``"cluster"``
    or ``"universal"``: :class:`~frenzy_env.env.FrenzyEnv`'s ``interface`` keyword, under which a checkpoint
    has the same spaces on every cluster of at most 4 GPU types).
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
    interface: str | None = None
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
        from frenzy_env.observation import INTERFACES
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
        if self.interface is not None and self.interface not in INTERFACES:
            raise ConfigError(f"interface must be one of {', '.join(INTERFACES)} or None, got {self.interface!r}")
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
        ``reference`` and ``reward_gain`` when the reward is differenced (:func:`~agents.rllib.envs.make_env` takes
        them off); ``interface`` only when set."""
        reward = {} if self.reference is None else {"reference": self.reference, "reward_gain": self.reward_gain}
        layout = {} if self.interface is None else {"interface": self.interface}
        return {
            **reward,
            **layout,
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
