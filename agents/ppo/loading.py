"""Loading a trained MaskablePPO model as a scheduler: the shipped model's path, checks and :class:`PPOPolicy`.

Loading a model runs pickle
---------------------------
A stable-baselines3 ``.zip`` stores some objects with (cloud)pickle; :func:`load_policy` therefore executes
code from the file. Only load model files you trust (the shipped :data:`DEFAULT_MODEL_PATH` or ones you
trained). :func:`load_policy` refuses anything that is not an existing regular file named explicitly, and
reads exactly that file (stable-baselines3 would otherwise try ``PATH.zip``).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from agents.model_record import KNOB_REFUSED, agent_of, read_record
from agents.ppo.distribution import greedy_actions
from agents.ppo.guide import guide_hints, make_guide
from agents.ppo.rollout import obs_keys, policy_outputs, sample_actions
from frenzy_env.errors import ConfigError
from frenzy_env.observation import OBS_VERSION, UNIVERSAL_OBS_VERSION

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
#: The action-level MaskablePPO model of env v5's world, the ``ppo`` agent on an env of the cluster layout
#: (``interface="cluster"``: the ``-v5`` ids, ``frenzy evaluate --world v5``); frenzy-testbed's spaces only.
DEFAULT_MODEL_PATH = MODELS_DIR / "ppo_frenzy_testbed.zip"
#: The full training configuration of :data:`DEFAULT_MODEL_PATH`.
DEFAULT_CONFIG_PATH = MODELS_DIR / "ppo_frenzy_testbed.json"
#: The universal model, the ``ppo`` agent on an env of the universal layout (env v6's default): one network for
#: every cluster of at most 4 GPU types.
UNIVERSAL_MODEL_PATH = MODELS_DIR / "ppo_universal.zip"
#: The full training configuration of :data:`UNIVERSAL_MODEL_PATH`.
UNIVERSAL_CONFIG_PATH = MODELS_DIR / "ppo_universal.json"


def shipped_model_path(env: Any = None, interface: str | None = None) -> Path:
    """The shipped ``ppo`` model for ``env`` (or for an env of ``interface``): :data:`DEFAULT_MODEL_PATH` under
    the cluster layout (``interface="cluster"``, env v5's world), else :data:`UNIVERSAL_MODEL_PATH` (the
    universal layout, env v6's default; also when neither is given)."""
    if env is not None:
        interface = getattr(env.unwrapped.sim_config, "interface", "universal")
    return DEFAULT_MODEL_PATH if interface == "cluster" else UNIVERSAL_MODEL_PATH


def check_model_path(path: str | os.PathLike) -> Path:
    """The path as a :class:`Path` if it names an existing regular file; else a clear ConfigError."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"model file {str(p)!r} does not exist")
    if not p.is_file():
        raise ConfigError(f"model path {str(p)!r} is not a regular file (a model is a .zip file)")
    return p


def _torch_generator(seed: int, episode: Any) -> th.Generator:
    """A torch generator seeded from ``seed`` and an episode seed (None: none), independent across both."""
    key = [seed] if episode is None else [seed, abs(int(episode))]
    return th.Generator().manual_seed(int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> 1))


class PPOPolicy:
    """A loaded MaskablePPO model with the stable-baselines3 ``predict`` signature, bound to an env.

    ``predict(obs, state=None, episode_start=None, deterministic=True, action_masks=None)``: when
    ``action_masks`` is None the bound env's ``action_masks()`` is used.

    ``sample=True`` (the default): the policy acts as it was trained, drawing each action from its masked
    distribution, whatever ``deterministic`` says (evaluation loops pass ``deterministic=True`` by
    stable-baselines3's convention). The draws come from the policy's own generator, re-seeded at every
    :meth:`reset` from ``seed`` and the bound env's episode seed, so an episode is reproducible and two
    policies with different ``seed`` give independent samples. Why not the greedy action: the trained
    policy's argmax loops (it resizes a job back and forth: thousands of restarts and 37% worse average JCT
    than its own samples on the validation workloads). ``sample=False``:
    stable-baselines3's ``predict`` with ``deterministic`` as given. A model with a flat ``Box``
    observation space (trained behind gymnasium's ``FlattenObservation``) is given the env's ``Dict``
    observations flattened (``gymnasium.spaces.flatten`` with the bound env's space, as the wrapper does);
    observations that are arrays already are passed as they are.

    A guided model (its policy's ``guide``, :mod:`agents.ppo.guide`) runs its planner on the bound env: every
    ``predict`` asks it for its next step (the hint) and acts on the policy's guided distribution; it needs
    the env (loaded without one, it can be inspected but ``predict`` says so) and takes one observation at a
    time.
    """

    name = "ppo"
    oracle = False

    def __init__(
        self, model: Any, env: Any = None, path: Path | None = None, sample: bool = True, seed: int = 0
    ) -> None:
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")
        self.model = model
        self.sample = bool(sample)
        self.seed = int(seed)
        self._gen = _torch_generator(self.seed, None)
        self.env = env.unwrapped if env is not None else None
        self.path = path
        flat = isinstance(getattr(model, "observation_space", None), spaces.Box)
        #: the Dict space observations are flattened from (None: the model takes them as they are)
        self.flatten_from = self.env.observation_space if flat and self.env is not None else None
        self._flat = flat
        #: the planner a guided model was trained with (None: not guided)
        self.guide_name = getattr(getattr(model, "policy", None), "guide", None)
        #: that planner, bound to the env (None: not guided, or loaded without an env)
        self.guide = make_guide(self.guide_name, self.env) if self.guide_name and self.env is not None else None

    def reset(self) -> None:
        """Re-seed the sampling generator from ``seed`` and the bound env's episode seed, and restart a guided
        model's planner (the policy has no other state)."""
        self._gen = _torch_generator(self.seed, getattr(self.env, "episode_seed", None))
        if self.guide is not None:
            self.guide.reset()

    def _guided(self, observation: Any, action_masks: Any, greedy: bool) -> int:
        """A guided model's action for one observation: the planner's hint for ``action_masks``, the guided
        distribution, and its draw (or its greedy action)."""
        policy = self.model.policy
        obs_t, batched = policy.obs_to_tensor(observation)
        if batched:
            raise ConfigError("a guided model acts on one observation of its env at a time, got a batch")
        mask = np.asarray(action_masks, dtype=bool).reshape(1, -1)
        hint = guide_hints([self.guide], mask)
        with th.no_grad():
            logp, type_logp, _, _ = policy_outputs(
                policy, {k: obs_t[k].float() for k in obs_keys(obs_t)}, th.from_numpy(mask), th.from_numpy(hint)
            )
        if not greedy:
            return int(sample_actions(logp, th.from_numpy(mask), self._gen)[0])
        if type_logp is None:
            return int(logp.argmax(-1)[0])
        return int(greedy_actions(logp, type_logp, policy.action_type)[0])

    def _draw(self, observation: Any, action_masks: Any) -> tuple[np.ndarray, bool]:
        """Actions drawn from the masked distribution (the trainer's inverse-CDF draw,
        :func:`agents.ppo.rollout.sample_actions`, with this policy's generator) and whether the observation
        was a batch."""
        policy = self.model.policy
        obs_t, batched = policy.obs_to_tensor(observation)
        n = self.model.action_space.n
        masks = None if action_masks is None else np.asarray(action_masks, dtype=bool).reshape(-1, n)
        with th.no_grad():
            logp = policy.get_distribution(obs_t, action_masks=masks).distribution.logits  # normalised
        legal = th.ones_like(logp, dtype=th.bool) if masks is None else th.from_numpy(masks)
        return sample_actions(logp, legal, self._gen).numpy(), batched

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, Any]:
        if action_masks is None and self.env is not None:
            action_masks = self.env.action_masks()
        if self._flat and isinstance(observation, Mapping):
            if self.flatten_from is None:
                raise ConfigError(
                    "this model takes flat observations (trained with FlattenObservation): load it with its env, "
                    "load_policy(env, path), to have Dict observations flattened"
                )
            observation = spaces.flatten(self.flatten_from, observation)
        if self.guide_name is not None:
            if self.guide is None:
                raise ConfigError(f"this model is guided by the planner {self.guide_name!r}, which reads the env: "
                                  "load it with its env, load_policy(env, path)")
            if action_masks is None:
                raise ConfigError("a guided model needs the action mask (action_masks, or a bound env)")
            return np.int64(self._guided(observation, action_masks, greedy=not self.sample and deterministic)), state
        if self.sample:
            acts, batched = self._draw(observation, action_masks)
            return (acts if batched else acts[0]), state
        return self.model.predict(
            observation,
            state=state,
            episode_start=episode_start,
            deterministic=deterministic,
            action_masks=action_masks,
        )


def read_model(path: str | os.PathLike, any_obs_version: bool = False) -> Any:
    """The MaskablePPO model in the file ``path`` (an existing regular file, read exactly; its recorded
    observation version must be this frenzy-env's unless ``any_obs_version``), for inference or as initial
    weights: its training schedules are replaced by constants. Runs pickle: only read files you trust.
    ConfigError when the file is missing, not a model, or of another observation version.

    ``any_obs_version=True`` is for initial weights only (the trainer's ``init_model``): a network of the
    same sizes trained on an older encoding is a starting point that training then adapts, never a policy
    to play as it is."""
    from sb3_contrib import MaskablePPO

    p = check_model_path(path)
    custom = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    with open(p, "rb") as fh:
        try:
            model = MaskablePPO.load(fh, device="cpu", custom_objects=custom)
        except Exception as exc:  # a zip that is not an SB3 model, or a corrupt file
            raise ConfigError(_unreadable(p, exc)) from None
    if not any_obs_version:
        _check_obs_version(p)
    return model


def _unreadable(path: Path, exc: Exception) -> str:
    """The message of a model file stable-baselines3 cannot load: a file that is no zip, or a truncated or
    corrupt one, says so with zipfile's own reason (stable-baselines3's message names an open file object,
    not the path); any other failure is quoted."""
    bad_zip = next((e for e in (exc, exc.__cause__) if isinstance(e, zipfile.BadZipFile)), None)
    if bad_zip is not None or not zipfile.is_zipfile(path):
        reason = str(bad_zip) if bad_zip is not None else "File is not a zip file"
        return (f"cannot load model file {str(path)!r}: not a readable model file (not a zip, or a truncated or "
                f"corrupt one: {reason})")
    return f"cannot load model file {str(path)!r}: {exc}"


def load_policy(
    env: Any = None, path: str | os.PathLike | None = None, sample: bool = True, seed: int = 0
) -> Any:
    """Load a trained action-level MaskablePPO model, the ``ppo`` agent (default: the shipped model for ``env``,
    :func:`shipped_model_path`: the universal one, or env v5's under the cluster layout), for ``env``. A knob
    model, a research model, is refused with an error that says so (:data:`agents.model_record.KNOB_REFUSED`).

    Security: the file is unpickled (stable-baselines3 stores objects with cloudpickle), which can run
    arbitrary code: load only files you trust. ``path`` must be an existing regular file (a directory, a
    missing path or a non-file raises :class:`~frenzy_env.errors.ConfigError` naming it); exactly that file
    is read. If ``env`` is given, its observation and action spaces must match the model's; a model trained
    behind gymnasium's ``FlattenObservation`` (a flat ``Box`` observation space of the env's flattened size)
    fits too, and the policy flattens the env's ``Dict`` observations for it.
    ``sample`` and ``seed``: see :class:`PPOPolicy` (by default actions are sampled, as in training).
    Sets ``torch.set_num_threads(1)``: the policy sees one observation at a time, where more threads are
    slower.
    """
    p = check_model_path(shipped_model_path(env) if path is None else path)
    th.set_num_threads(1)  # one observation per call: extra threads only add synchronisation
    if agent_of(p) == "knob":
        raise ConfigError(f"model {str(p)!r} is a knob model, not an action-level ppo model: {KNOB_REFUSED}")
    model = read_model(p)
    if env is not None:
        base = env.unwrapped
        if model.action_space.n != base.action_space.n or _shapes(model.observation_space) != _shapes(
            base.observation_space, flat=isinstance(model.observation_space, spaces.Box)
        ):
            raise ConfigError(
                f"model {str(p)!r} was trained for action space {model.action_space} and observation shapes "
                f"{_shapes(model.observation_space)}; this env has {base.action_space} and "
                f"{_shapes(base.observation_space)} (cluster {base.cluster.name!r}, queue_slots={base.queue_slots}, "
                f"running_slots={base.running_slots}){_layout_hint(p, model, base)}"
            )
    return PPOPolicy(model, env, p, sample=sample, seed=seed)


def _layout_hint(path: Path, model: Any, env: Any) -> str:
    """The fix of a spaces mismatch between a model of the cluster layout (``interface="cluster"``, env v5's: its
    observations have ``nodes``) and an env of the universal one (env v6's default), as the end of the message;
    "" for any other mismatch."""
    model_keys = getattr(model.observation_space, "spaces", {})
    if "nodes" not in model_keys or getattr(env.sim_config, "interface", None) != "universal":
        return ""
    if path.resolve() == DEFAULT_MODEL_PATH.resolve():
        return (
            ": this env has the universal layout (interface='universal', env v6's default) and this shipped ppo model "
            'plays env v5: gym.make("frenzy/HeteroCluster-v5"), FrenzyEnv(**frenzy_env.registration.V5_WORLD) or '
            "frenzy evaluate --world v5 (load_policy(env) without a path loads the universal model, which plays here)"
        )
    return (
        ": the model reads the cluster layout (interface='cluster', env v5's) and this env has the universal one "
        "(env v6's default): play it on an env made with interface='cluster' (frenzy evaluate --env "
        "interface=cluster, or --world v5 for the whole world of env v5)"
    )


def _shapes(space: spaces.Space, flat: bool = False) -> Any:
    """The shapes of a Dict space's parts (a dict), or one shape: a Box's, or with ``flat`` the flattened
    space's (as ``FlattenObservation`` makes it)."""
    if flat:
        return (spaces.flatdim(space),)
    if isinstance(space, spaces.Dict):
        return {k: s.shape for k, s in space.spaces.items()}
    return space.shape


def recorded_obs_version(path: Path) -> tuple[int, Path] | None:
    """The observation version recorded beside a model file, and the file it is recorded in: ``PATH.json``
    (the shipped model's) or the training run's ``config.json`` in the model's folder or the one above it
    (``best_model.zip``, ``checkpoints/*.zip``; :func:`agents.model_record.read_record`). A record without the key
    predates versioning: version 1, the encoding of every model saved before it. None when no record is found."""
    found = read_record(path)
    return None if found is None else (int(found[0].get("obs_version", 1)), found[1])


def _check_obs_version(path: Path) -> None:
    """ConfigError when the model was trained on another observation encoding than :data:`OBS_VERSION`, or (a
    model of the universal layout, whose record has ``universal_obs_version``) another universal layout than
    :data:`~frenzy_env.observation.UNIVERSAL_OBS_VERSION`."""
    found = recorded_obs_version(path)
    if found is not None and found[0] != OBS_VERSION:
        raise ConfigError(
            f"model {str(path)!r} was trained on observation version {found[0]} (recorded in {str(found[1])!r}); "
            f"this frenzy-env encodes version {OBS_VERSION} (frenzy_env.observation): retrain it"
        )
    record = read_record(path)
    universal = None if record is None else record[0].get("universal_obs_version")
    if universal is not None and int(universal) != UNIVERSAL_OBS_VERSION:
        raise ConfigError(
            f"model {str(path)!r} was trained on universal layout version {universal} (recorded in "
            f"{str(record[1])!r}); this frenzy-env lays out version {UNIVERSAL_OBS_VERSION} "
            "(frenzy_env.observation.UNIVERSAL_OBS_VERSION): retrain it"
        )


def make_ppo_policy(
    env: Any, model: str | os.PathLike | None = None, sample: bool = True, seed: int = 0
) -> PPOPolicy:
    """Factory in the shape of ``baselines.make_policy``: ``make_ppo_policy(env, model=PATH)``."""
    return load_policy(env, model, sample=sample, seed=seed)
