"""Playing a trained RLlib checkpoint: the module folder of a run (:func:`find_module_checkpoint`), the policy
with the stable-baselines3 ``predict`` signature (:class:`RLlibPolicy`) and its loader
(:func:`load_rllib_policy`), which restores only the RLModule (no Algorithm, no EnvRunners, no Ray cluster)."""

from __future__ import annotations

import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.rllib.envs import MASK_KEY, require_ray
from agents.rllib.rl_module import ray_class
from frenzy_env.errors import ConfigError

#: Where ``Algorithm.save_to_path`` puts the (single-agent) RLModule inside a checkpoint directory.
MODULE_SUBDIR = Path("learner_group", "learner", "rl_module", "default_policy")


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
    """" (its config.json: cluster 'X', interface 'I', queue_slots=Q, running_slots=R)" from the run's
    ``config.json`` beside ``checkpoint/`` (the interface only where the run set it; empty when the module is
    not inside a training run folder)."""
    if tuple(module_dir.parts[-len(MODULE_SUBDIR.parts):]) != MODULE_SUBDIR.parts:
        return ""
    config = module_dir.parents[len(MODULE_SUBDIR.parts) - 1].parent / "config.json"
    try:
        data = json.loads(config.read_text())
        layout = f"interface {data['interface']!r}, " if data.get("interface") is not None else ""
        return (
            f" (its config.json: cluster {data['cluster']!r}, {layout}queue_slots={data['queue_slots']}, "
            f"running_slots={data['running_slots']})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _check_env_spaces(module: Any, env: Any, path: str | os.PathLike, module_dir: Path) -> None:
    """ConfigError naming the checkpoint unless the module's observation and action spaces equal ``env``'s.

    The spaces are compared, not the clusters: under ``interface="universal"`` every cluster of at most 4 GPU
    types has the same spaces, so a checkpoint of one plays on another; with the cluster layout the spaces
    differ between clusters (plan slots, ``gpus``, ``nodes``) and the checkpoint is refused."""
    base = env.unwrapped
    m_obs, e_obs = module.observation_space, base.observation_space
    m_spaces = dict(m_obs.spaces) if isinstance(m_obs, gym.spaces.Dict) else {}
    e_spaces = dict(e_obs.spaces)
    m_act, e_act = module.action_space, base.action_space
    if m_spaces == e_spaces and m_act == e_act:
        return
    diffs = [f"action space {m_act} vs {e_act}"] if m_act != e_act else []
    diffs += [
        f"observation {k!r} {_difference(m_spaces.get(k), e_spaces.get(k))}"
        for k in sorted(set(m_spaces) | set(e_spaces))
        if m_spaces.get(k) != e_spaces.get(k)
    ]
    layout = getattr(getattr(base, "sim_config", None), "interface", None)
    raise ConfigError(
        f"RLlib checkpoint {str(path)!r} does not fit this env (checkpoint vs env: {'; '.join(diffs)}); it was "
        f"trained for other spaces (another cluster, interface or slot count){_trained_for(module_dir)}, this env "
        f"has cluster {base.cluster.name!r}, "
        + (f"interface {layout!r}, " if layout is not None else "")
        + f"queue_slots={base.queue_slots}, running_slots={base.running_slots}"
    )


def _difference(ours: Any, theirs: Any) -> str:
    """"A vs B" of two unequal spaces: their shapes (``missing`` for None), or the spaces themselves where the
    shapes agree (the bounds or the dtype differ)."""
    shape = lambda space: "missing" if space is None else getattr(space, "shape", space)  # noqa: E731
    if shape(ours) != shape(theirs):
        return f"{shape(ours)} vs {shape(theirs)}"
    return f"{ours} vs {theirs}"


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
    require_ray()
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule

    masked_cls = ray_class("MaskedPPOTorchRLModule")
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
