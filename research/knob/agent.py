"""A planner with a learnt knob: PPO chooses, at every decision instant, the move margin of ``sia_srpt``'s plan.

A research model (``research.knob``; it was the product's ``knob`` agent, ``agents/knob.py``, until issue 44:
see ``research/knob/__init__.py`` for why it left and what replaced it).

The guided agents of ``agents.ppo`` (``ppo.guide``, ``ppo.guide_gate``) choose among the env's 2,308 actions
with a planner's next step as a hint; PPO hardly moved them (research/results/ppo/training.md). Here the
learnt part is small and the planner does the rest: at each decision instant the policy picks one of a few
*levels* of the planner's move margin (:class:`baselines.sia.SiaPolicy`'s ``move_margin``: a running job's
other configurations count ``1 / (1 + margin)``, a hysteresis on moves), the planner
(:class:`baselines.sia.SiaTeacher` with ``sia_srpt``'s objective) solves its integer program with it,
and the instant's steps are carried out. A scripted check found a fixed margin of 0.1-0.2 about 4% better
than none on validation trace windows and level on synthetic ones; the policy learns when moving pays.

* **MDP** (:class:`KnobEnv`): one step per decision instant, ``Discrete(len(levels))``; the observation is
  the env's whole-system aggregates (``globals``), the smallest, largest and overall free fraction over the
  GPU types (:func:`gpu_summary`; the same on every cluster, so a model plays on any; version 1 models saw
  each type's, ``gpu_features="per_type"``) and the previous level (one-hot); the reward is the env's
  (``-(jobs in system) x hours``), differenced against the planner with margin 0 on the same arrivals (the
  input-dependent baseline of ``agents.ppo.reference_reward``, cached per workload seed) and scaled by ``gain`` /
  that reference's cost, so an episode returns ``gain x (1 - cost / plan's cost)``: exactly the knob's
  worth, undiscounted.
* **With preemption** (``KnobConfig(preemption=True)``): the env offers preempt actions, the
  planner may return a running job to the queue (:class:`~baselines.sia.SiaPolicy`'s ``preempt``), and the
  reward is differenced against the plan at ``reference_level`` (for example margin 0.2 with preemption, the
  strongest scripted setting measured) instead of margin 0; such a model plays only where preemption is on.
* **Training** (:func:`train_knob`): stable-baselines3's PPO, an MLP, envs in subprocesses, checkpoints
  every ``checkpoint_every`` decisions (``resume`` continues from the last one).
* **Acting** (:class:`KnobPolicy`, :func:`load_knob_policy`): a policy like any other for
  ``research/scripts/evaluate_ppo.py --labelled-model NAME=MODEL.zip``, ``research/scripts/validate_knob.py`` and
  ``run_episode``. It samples the level from the model's distribution with its own generator (re-seeded per
  episode), or takes the most likely one (``sample=False``).
* **Cost**: the planner's integer program at every decision instant (5-20 ms, more on busy traces), so
  training runs at tens of decisions per second on two cores, and an episode takes seconds to minutes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from agents.ppo.config import TrainConfig
from agents.ppo.reference_reward import ReferenceCache, ReferenceCurve, RewardShaper, play_curve
from baselines.base import ScriptedPolicy
from baselines.sia import SiaTeacher
from frenzy_env.errors import ConfigError

KNOB_VERSION = 2  # the observation and action layout below; a model records it (1: per-type GPU features only)
OBJECTIVES = {"sia_srpt": "completion", "sia": "goodput"}
GPU_FEATURES = ("summary", "per_type")  # KnobConfig.gpu_features: how the observation shows the GPU types
INVALID_PENALTY = 0.01  # KnobEnv: an action that is not a level keeps the previous one and costs this much


@dataclass(frozen=True)
class KnobConfig:
    """What :func:`train_knob` trains. ``train``: the PPO trainer's :class:`~agents.ppo.config.TrainConfig`
    for the cluster, windows and workload splits (its PPO fields are unused); ``levels``: the move margins
    the policy chooses among (ascending, the first 0: the reference plan); ``planner``: ``"sia_srpt"`` or
    ``"sia"``'s objective; ``pool``: training episodes draw their workload seed from this many (each seed's
    reference plan is played once); ``gpu_features``: ``"summary"`` (the smallest, largest and GPU-weighted
    mean free fraction over the GPU types: the same three numbers on every cluster, so the model plays on any
    cluster) or ``"per_type"`` (each type's free fraction and share, version 1's layout: the training
    cluster's types only); ``preemption``: the env offers preempt actions (``FrenzyEnv(preemption=True)``) and
    the planner may preempt a running job (:class:`~baselines.sia.SiaPolicy`'s ``preempt``);
    ``reference_level``: the level whose plan is the reward's reference and which the fresh policy picks with
    probability ``start_plan_prob`` (0: the plan with margin 0); ``hold``: the instants a chosen level is kept
    (one policy decision per ``hold`` instants; 1: every instant); ``rollouts``: plays of the same workload per
    update (1: stable-baselines3's PPO with its critic, :func:`train_knob`; K > 1: PPO with Mao et al.'s
    leave-one-out baseline over the K plays and no critic, :func:`research.knob.rollouts.train_knob_rollouts`,
    each update on ``workloads_per_update`` workloads, ``n_envs`` worker processes); the rest are
    stable-baselines3 PPO's."""

    # the knob reads the cluster layout's gpus block (gpu_summary): its trainer config is the cluster layout's
    train: TrainConfig = field(default_factory=lambda: TrainConfig(interface="cluster"))
    levels: tuple[float, ...] = (0.0, 0.1, 0.2, 0.4)
    planner: str = "sia_srpt"
    timesteps: int = 120_000
    n_envs: int = 4
    n_steps: int = 256
    batch_size: int = 256
    n_epochs: int = 5
    learning_rate: float = 3e-4
    ent_coef: float = 0.01
    gae_lambda: float = 0.98
    clip_range: float = 0.2
    net_arch: tuple[int, ...] = (64, 64)
    gain: float = 10.0
    pool: int = 64
    seed: int = 0
    checkpoint_every: int = 8192
    max_minutes: float | None = None
    start_plan_prob: float = 0.85
    gpu_features: str = "summary"
    preemption: bool = False
    reference_level: int = 0
    hold: int = 1
    rollouts: int = 1
    workloads_per_update: int = 1

    def __post_init__(self) -> None:
        if self.train.interface != "cluster":
            raise ConfigError(
                f"train.interface must be 'cluster' (the knob reads the cluster layout's gpus block), "
                f"got {self.train.interface!r}"
            )
        lv = self.levels
        if not lv or any(not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0) for v in lv):
            raise ConfigError(f"levels must be finite margins >= 0, got {lv!r}")
        if lv[0] != 0 or list(lv) != sorted(set(lv)):
            raise ConfigError(f"levels must ascend from 0 without repeats, got {lv!r}")
        if self.planner not in OBJECTIVES:
            raise ConfigError(f"planner must be one of {sorted(OBJECTIVES)}, got {self.planner!r}")
        if self.gpu_features not in GPU_FEATURES:
            raise ConfigError(f"gpu_features must be one of {list(GPU_FEATURES)}, got {self.gpu_features!r}")
        for name in ("timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "pool", "checkpoint_every", "hold",
                     "rollouts", "workloads_per_update"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("learning_rate", "gain", "clip_range"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ConfigError(f"{name} must be a positive number, got {v!r}")
        if not (0 <= self.gae_lambda <= 1) or not (self.ent_coef >= 0):
            raise ConfigError(
                f"gae_lambda must be in [0, 1] and ent_coef >= 0, got {self.gae_lambda!r}, {self.ent_coef!r}"
            )
        if not isinstance(self.preemption, bool):
            raise ConfigError(f"preemption must be true or false, got {self.preemption!r}")
        if self.rollouts == 1 and self.workloads_per_update != 1:
            raise ConfigError(f"workloads_per_update is for rollouts > 1, got {self.workloads_per_update!r} with"
                              " rollouts=1")
        if not (isinstance(self.reference_level, int) and 0 <= self.reference_level < len(lv)):
            raise ConfigError(f"reference_level must index levels (0 to {len(lv) - 1}), got {self.reference_level!r}")
        if not 0 < self.start_plan_prob < 1:
            raise ConfigError(f"start_plan_prob must be in (0, 1), got {self.start_plan_prob!r}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ConfigError(f"max_minutes must be > 0 or None, got {self.max_minutes!r}")

    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON data, with ``"agent": "knob"`` (:mod:`agents.model_record`) first."""
        d = {"agent": "knob", **asdict(self)}
        d["train"] = self.train.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnobConfig:
        """The configuration of JSON data (``to_dict``'s; an ``"agent"`` record must say ``knob``)."""
        data = dict(data)
        agent = data.pop("agent", "knob")
        if agent != "knob":
            raise ConfigError(f"a knob config needs agent 'knob', this one records agent {agent!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown knob config field(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        d = dict(data)
        d.setdefault("gpu_features", "per_type")  # a config saved before the field existed (version 1)
        if "train" in d:
            d["train"] = TrainConfig.from_dict(d["train"])
        for name in ("levels", "net_arch"):
            if name in d:
                d[name] = tuple(d[name])
        return cls(**d)


def gpu_summary(gpus: np.ndarray) -> np.ndarray:
    """The observation's ``gpus`` block (each type's free fraction, then each type's share of the GPUs) as
    three numbers whatever the number of types: the smallest and largest free fraction, and the free
    fraction of all GPUs (the shares' weighted mean)."""
    gpus = np.asarray(gpus, dtype=np.float32).reshape(-1)
    n = gpus.size // 2
    if n == 0 or gpus.size != 2 * n:
        raise ConfigError(f"gpus: expected free fractions then shares (an even, non-zero length), got {gpus.size}")
    free, share = gpus[:n], gpus[n:]
    return np.array([free.min(), free.max(), float(free @ share)], dtype=np.float32)


def knob_features(obs: dict[str, np.ndarray], prev: int, n_levels: int, gpu_features: str = "summary") -> np.ndarray:
    """The policy's input: the env observation's ``globals``, its ``gpus`` (:func:`gpu_summary`, or the
    block as it is with ``gpu_features="per_type"``) and the previous level one-hot."""
    one = np.zeros(n_levels, dtype=np.float32)
    one[prev] = 1.0
    gpus = gpu_summary(obs["gpus"]) if gpu_features == "summary" else np.asarray(obs["gpus"]).reshape(-1)
    return np.concatenate([np.asarray(obs["globals"]).reshape(-1), gpus, one]).astype(np.float32)


def knob_input_size(env: Any, n_levels: int, gpu_features: str) -> int:
    """The length of :func:`knob_features` on ``env``'s observation."""
    space = env.unwrapped.observation_space
    gpus = 3 if gpu_features == "summary" else space["gpus"].shape[0]
    return len(space["globals"].low) + gpus + n_levels


def play_plan(env: Any, seed: int, objective: str, margin: float = 0.0, **sia_kwargs: Any) -> ReferenceCurve:
    """One episode of the planner alone (``margin`` and any other :class:`~baselines.sia.SiaPolicy` keywords
    fixed) on ``env`` reset with ``seed``: its cost curve."""
    return play_curve(env, SiaTeacher(env, objective=objective, move_margin=margin, **sia_kwargs).act, seed)


class KnobEnv(gym.Env):
    """The knob MDP (see the module docstring) over training workloads of ``cfg.train``: each episode's
    workload seed is drawn (a generator seeded by ``seed``) from ``seeds``, default ``range(cfg.pool)``, unless
    ``reset(options={"workload": w})`` names it; :func:`train_knob` gives each env its own share of the pool,
    so each seed's reference is played once. A step carries out ``cfg.hold`` decision instants at the chosen
    level. ``reference=False``: the reward is the env's own (``-(jobs in system) x hours``), scaled by
    ``gain`` / the episode's job count, with no reference plan played (:mod:`research.knob.rollouts`' plays,
    whose baseline is the other plays of the same workload). :attr:`cost_times` and :attr:`cost` record the
    episode's cumulative cost (minus the summed rewards) after each env step."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, cfg: KnobConfig, seed: int = 0, seeds: Any = None, reference: bool = True) -> None:
        from agents.ppo.workloads import make_env, training_generator

        self.cfg = cfg
        self.levels = tuple(float(v) for v in cfg.levels)
        self.objective = OBJECTIVES[cfg.planner]
        gen = training_generator(cfg.train)
        self.env = make_env(cfg.train, gen, preemption=cfg.preemption)
        self.ref = cfg.reference_level
        # the reference level's plan, played once per seed
        plan = functools.partial(play_plan, objective=self.objective, margin=self.levels[self.ref],
                                 preempt=cfg.preemption)
        ref_env = functools.partial(make_env, cfg.train, gen, preemption=cfg.preemption)
        self.shaper = RewardShaper(ReferenceCache(ref_env, plan) if reference else None, cfg.gain, 1)
        self.teacher = SiaTeacher(self.env, objective=self.objective, preempt=cfg.preemption)
        self._rng = np.random.default_rng(seed)
        self.seeds = np.arange(cfg.pool) if seeds is None else np.asarray(seeds, dtype=np.int64)
        if self.seeds.size == 0:
            raise ConfigError("KnobEnv: no workload seeds to draw from")
        dim = knob_input_size(self.env, len(self.levels), cfg.gpu_features)
        self.observation_space = gym.spaces.Box(0.0, 2.0, (dim,), np.float32)
        self.action_space = gym.spaces.Discrete(len(self.levels))
        self.prev = self.ref
        self.cost_times: list[float] = []
        self.cost: list[float] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        workload = (options or {}).get("workload")
        if workload is None:
            workload = int(self.seeds[self._rng.integers(self.seeds.size)])
        elif not (isinstance(workload, (int, np.integer)) and workload >= 0):
            raise ConfigError(f"KnobEnv.reset: options['workload'] must be a seed >= 0, got {workload!r}")
        obs, info = self.env.reset(seed=int(workload))
        self.workload = int(workload)
        self.teacher.reset()
        self.shaper.start(0, int(workload), info["time"], self.env.sim.num_jobs)
        self.prev = self.ref
        self.cost_times, self.cost = [float(info["time"])], [0.0]
        return self._features(obs, self.ref), info

    def _features(self, obs: dict[str, np.ndarray], prev: int) -> np.ndarray:
        return knob_features(obs, prev, len(self.levels), self.cfg.gpu_features)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        try:
            a = int(action)
        except (TypeError, ValueError):
            a = -1
        invalid = not 0 <= a < len(self.levels)
        if invalid:  # a no-op with a penalty: the previous level is kept
            a = self.prev
        self.teacher.sia.move_margin = self.levels[a]
        env, total, instants = self.env, 0.0, 0
        t0 = env.view.now
        while True:  # the instants' steps, up to the hold-th that moves simulated time on
            obs, r, term, trunc, info = env.step(self.teacher.act(env.action_masks()))
            shaped = self.shaper.reward(0, r, info["time"], term)
            total += shaped
            self.cost_times.append(float(info["time"]))
            self.cost.append(self.cost[-1] - shaped)
            if term or trunc:
                break
            if env.view.now != t0:
                instants, t0 = instants + 1, env.view.now
                if instants >= self.cfg.hold:
                    break
        self.prev = a
        info["invalid_action"] = invalid
        if invalid:
            total -= INVALID_PENALTY
        return self._features(obs, a), total, term, trunc, info


class KnobPolicy(ScriptedPolicy):
    """The planner driven by a trained knob model (an SB3 PPO ``model``), bound to ``env``: at the first
    decision of each simulated instant it picks a level from the observation :meth:`predict` is given, then
    carries the planner's steps out. ``levels`` and ``planner`` are the model's (:func:`load_knob_policy`);
    ``sample``: draw the level (generator re-seeded at every :meth:`reset` from ``seed`` and the episode's
    seed) or take the most likely one; ``gpu_features``, ``preemption`` and ``reference_level``: the model's
    (:class:`KnobConfig`; a model trained with preemption plays only in an env that offers it); ``hold``: the
    instants a choice is kept (the model's). ``levels_used`` counts each level's choices this episode."""

    name = "knob"

    def __init__(self, env: Any, model: Any, levels: tuple[float, ...], planner: str = "sia_srpt",
                 sample: bool = True, seed: int = 0, gpu_features: str = "summary", preemption: bool = False,
                 reference_level: int = 0, hold: int = 1) -> None:
        super().__init__(env)
        if planner not in OBJECTIVES:
            raise ConfigError(f"planner must be one of {sorted(OBJECTIVES)}, got {planner!r}")
        if gpu_features not in GPU_FEATURES:
            raise ConfigError(f"gpu_features must be one of {list(GPU_FEATURES)}, got {gpu_features!r}")
        if not 0 <= reference_level < len(levels):
            raise ConfigError(f"reference_level must index levels (0 to {len(levels) - 1}), got {reference_level!r}")
        if preemption and not getattr(self.env, "preemption", False):
            raise ConfigError(
                "this knob model was trained with preemption (preemption=True): play it in an env that offers"
                " preempt actions (FrenzyEnv(preemption=True), frenzy evaluate --preemption)"
            )
        if not (isinstance(hold, (int, np.integer)) and hold >= 1):
            raise ConfigError(f"hold must be an integer >= 1, got {hold!r}")
        self.gpu_features, self.preemption, self.reference_level = gpu_features, bool(preemption), int(reference_level)
        self.hold = int(hold)
        self.model, self.levels, self.sample, self.seed = model, tuple(levels), bool(sample), int(seed)
        self.teacher = SiaTeacher(self.env, objective=OBJECTIVES[planner], preempt=self.preemption)
        self._obs: dict[str, np.ndarray] | None = None
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.teacher.reset()
        self._instant: float | None = None
        self._held = self.hold  # instants since the last choice: the first instant chooses
        self.prev = self.reference_level
        self.levels_used = np.zeros(len(self.levels), dtype=np.int64)
        self._rng = np.random.default_rng([self.seed, int(getattr(self.env, "episode_seed", 0) or 0)])

    def level_probabilities(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The model's distribution over the levels for observation ``obs`` (previous level :attr:`prev`)."""
        import torch as th

        x = th.as_tensor(knob_features(obs, self.prev, len(self.levels), self.gpu_features))[None]
        with th.no_grad():
            probs = self.model.policy.get_distribution(x).distribution.probs
        return probs.numpy()[0].astype(np.float64)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, Any]:
        self._obs = None
        if isinstance(observation, dict) and "globals" in observation and "gpus" in observation:
            # one observation, or a batch of one (SB3's evaluate_policy); a larger batch is refused below
            self._obs = {k: np.asarray(observation[k]).reshape(-1) for k in ("globals", "gpus")}
        return super().predict(observation, state, episode_start, deterministic, action_masks)

    def act(self, mask: np.ndarray) -> int:
        view = self.view
        if view.now != self._instant:
            self._instant = view.now
            self._held += 1
        if self._held > self.hold:
            if self._obs is None:
                raise ConfigError("KnobPolicy acts on the observation predict() is given: call predict(obs, ...)")
            p = self.level_probabilities(self._obs)
            a = int(self._rng.choice(len(p), p=p / p.sum())) if self.sample else int(np.argmax(p))
            self.teacher.sia.move_margin = self.levels[a]
            self.levels_used[a] += 1
            self.prev = a
            self._held = 1
        return self.teacher.act(mask)


def quick_config() -> KnobConfig:
    """A seconds-long smoke run (``python research/scripts/train_knob.py --quick``): 20-30-job synthetic
    workloads, two envs, a few updates."""
    train = TrainConfig(workload="mix", traces=(), jobs_range=(20, 30), load_range=(0.5, 0.8), interface="cluster")
    return KnobConfig(train=train, timesteps=256, n_envs=2, n_steps=64, batch_size=64, n_epochs=2, pool=3,
                      checkpoint_every=128)


def save_knob_model(model: Any, cfg: KnobConfig, path: Path) -> None:
    """``model`` to ``path`` (an SB3 zip) with ``path.with_suffix('.json')``: the config and layout version."""
    path = Path(path)
    model.save(path)
    meta = {**_model_meta(cfg), "config": cfg.to_dict()}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1))


def _model_meta(cfg: KnobConfig) -> dict:
    """What a model of ``cfg`` needs to play: its layout version, levels, planner and options."""
    return {"agent": "knob", "knob_version": KNOB_VERSION, "levels": list(cfg.levels), "planner": cfg.planner,
            "gpu_features": cfg.gpu_features, "preemption": cfg.preemption, "reference_level": cfg.reference_level,
            "hold": cfg.hold}


def _knob_meta(path: Path) -> dict | None:
    """A knob model's metadata: the ``.json`` beside it, or for a checkpoint (``RUN/checkpoints/*.zip``) the
    run's ``config.json``; None when there is neither (or it is not a knob model's)."""
    beside = path.with_suffix(".json")
    run_config = path.parent.parent / "config.json"
    try:
        if beside.is_file():
            meta = json.loads(beside.read_text())
            return meta if isinstance(meta, dict) and "knob_version" in meta else None
        if path.parent.name == "checkpoints" and run_config.is_file():
            cfg = KnobConfig.from_dict(json.loads(run_config.read_text()))
            return _model_meta(cfg)
    except (ValueError, TypeError, ConfigError):
        return None
    return None


def is_knob_model(path: str | Path) -> bool:
    """Whether ``path`` is a knob model: a ``.json`` beside it records a ``knob_version``, or it is a knob
    run's checkpoint."""
    return _knob_meta(Path(path)) is not None


def load_knob_policy(env: Any, path: str | Path, sample: bool = True, seed: int = 0) -> KnobPolicy:
    """A :class:`KnobPolicy` of the model at ``path`` (with its ``.json`` beside it) bound to ``env``.
    Loading runs pickle: load only files you trust. Errors name a missing file or another layout."""
    from stable_baselines3 import PPO

    path = Path(path)
    meta = _knob_meta(path)
    if not path.is_file():
        raise ConfigError(f"knob model: no file {path}")
    if meta is None:
        raise ConfigError(f"knob model: no file {path.with_suffix('.json')} (nor a run's config.json above it)")
    if meta.get("knob_version") not in (1, KNOB_VERSION):
        raise ConfigError(
            f"knob model {path}: layout version {meta.get('knob_version')!r}, this code reads 1 and {KNOB_VERSION}"
        )
    gpu_features = meta.get("gpu_features", "per_type")  # version 1 knew only the per-type layout
    model = PPO.load(path, device="cpu")
    want = knob_input_size(env, len(meta["levels"]), gpu_features)
    if model.observation_space.shape[0] != want:
        raise ConfigError(
            f"knob model {path}: trained for another cluster's observation (input"
            f" {model.observation_space.shape[0]}, this env {want}; gpu_features={gpu_features!r} models fit only"
            " clusters with the training cluster's number of GPU types)"
        )
    return KnobPolicy(env, model, tuple(meta["levels"]), meta["planner"], sample=sample, seed=seed,
                      gpu_features=gpu_features, preemption=bool(meta.get("preemption", False)),
                      reference_level=int(meta.get("reference_level", 0)), hold=int(meta.get("hold", 1)))


def train_knob(
    cfg: KnobConfig, out: str | Path, resume: bool = False, progress: bool = False, log: Any = print
) -> Path:
    """Train the knob policy with stable-baselines3 PPO into ``out`` (``config.json``, ``episodes.monitor.csv``:
    the training episodes' returns, ``checkpoints/``, ``model.zip`` + ``model.json``); ``resume`` continues from
    the last checkpoint (episodes in flight start over). The fresh policy picks level 0 (the plan itself) with
    probability ``cfg.start_plan_prob`` and the others evenly (:func:`start_at_plan`), so PPO starts at the
    planner and its gain is measured from there. Returns the model's path."""
    import torch as th
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecMonitor

    if cfg.rollouts > 1:
        raise ConfigError(f"rollouts={cfg.rollouts}: train it with research.knob.rollouts.train_knob_rollouts"
                          " (research/scripts/train_knob.py picks it)")
    out = Path(out)
    ckpt_dir = out / "checkpoints"
    if resume:  # the run's own config, with the budget (timesteps, max_minutes) of the one passed
        saved = KnobConfig.from_dict(json.loads((out / "config.json").read_text()))
        budget = {"timesteps": cfg.timesteps, "max_minutes": cfg.max_minutes}
        if dataclasses.replace(saved, **budget) != cfg:
            log(f"resume: using the run's own config.json ({out / 'config.json'}) with this budget")
        cfg = dataclasses.replace(saved, **budget)
    elif (out / "config.json").exists():
        raise ConfigError(f"{out} already holds a run: resume it or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    th.set_num_threads(1)
    venv = VecMonitor(
        SubprocVecEnv([_env_factory(cfg, cfg.seed * 1000 + i, i) for i in range(cfg.n_envs)]),
        filename=str(out / ("episodes_resumed" if resume else "episodes")),
    )
    last = _last_checkpoint(ckpt_dir) if resume else None
    if last is not None:
        model = PPO.load(last, env=venv, device="cpu")
        log(f"resume: {last.name} ({model.num_timesteps:,} decisions)")
    else:
        model = PPO(
            "MlpPolicy", venv, n_steps=cfg.n_steps, batch_size=cfg.batch_size, n_epochs=cfg.n_epochs,
            gamma=1.0, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef, learning_rate=cfg.learning_rate,
            clip_range=cfg.clip_range, policy_kwargs={"net_arch": list(cfg.net_arch)}, seed=cfg.seed,
            device="cpu", verbose=0,
        )
        start_at_plan(model, cfg.start_plan_prob, cfg.reference_level)
        save_knob_model(model, cfg, out / "start.zip")
    callbacks = [CheckpointCallback(max(1, cfg.checkpoint_every // cfg.n_envs), str(ckpt_dir), name_prefix="knob")]
    if cfg.max_minutes is not None:
        callbacks.append(_Deadline(time.monotonic() + 60 * cfg.max_minutes))
    remaining = cfg.timesteps - model.num_timesteps
    try:
        if remaining > 0:
            model.learn(remaining, callback=CallbackList(callbacks), reset_num_timesteps=last is None,
                        progress_bar=progress)
    finally:
        venv.close()
    save_knob_model(model, cfg, out / "model.zip")
    log(f"knob model: {out / 'model.zip'} ({model.num_timesteps:,} decisions)")
    return out / "model.zip"


def start_at_plan(model: Any, p0: float, level: int = 0) -> None:
    """Make ``model``'s level distribution ``p0`` on ``level`` (the reference plan's) and the rest even,
    whatever the input: the action head's weights to 0 and its bias to those log-probabilities."""
    import torch as th

    n = model.action_space.n
    head = model.policy.action_net
    logp = np.full(n, np.log((1.0 - p0) / (n - 1)) if n > 1 else 0.0)
    logp[level] = np.log(p0) if n > 1 else 0.0
    with th.no_grad():
        head.weight.zero_()
        head.bias.copy_(th.as_tensor(logp, dtype=head.bias.dtype))


class _Deadline(BaseCallback):
    """Ends training at a monotonic ``deadline`` (``max_minutes``)."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def _on_step(self) -> bool:
        return time.monotonic() < self.deadline


def _env_factory(cfg: KnobConfig, seed: int, index: int) -> Any:
    """Env ``index`` of ``cfg.n_envs``: the pool's seeds ``index``, ``index + n_envs``, ... (all of them when
    the pool is smaller than the envs)."""
    seeds = np.arange(index, cfg.pool, cfg.n_envs) if cfg.pool >= cfg.n_envs else np.arange(cfg.pool)

    def make() -> KnobEnv:
        return KnobEnv(cfg, seed=seed, seeds=seeds)

    return make


def _last_checkpoint(folder: Path) -> Path | None:
    found = sorted(folder.glob("knob_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1]))
    return found[-1] if found else None


#: the knob model that shipped as the product's ``knob`` agent until issue 44 (trained in env v4; the checkpoint
#: chosen on the validation split, with its training configuration in the ``.json`` beside it;
#: ``gpu_features="summary"``, so it plays on any cluster)
SHIPPED = Path(__file__).resolve().parent / "models" / "knob_frenzy_testbed.zip"


def load_policy(env: Any, path: str | Path | None = None, sample: bool = True, seed: int = 0) -> KnobPolicy:
    """The knob agent: the knob model at ``path`` (default: :data:`SHIPPED`) bound to ``env``
    (:func:`load_knob_policy`). An action-level ``ppo`` model is refused with an error saying how to load it.
    Loading runs pickle: load only files you trust."""
    from agents.model_record import agent_of

    path = SHIPPED if path is None else Path(path)
    if path.is_file() and agent_of(path) != "knob":
        raise ConfigError(
            f"model {str(path)!r} is an action-level ppo model, not a knob model: load it with "
            "agents.ppo.load_policy(env, path), or play it with frenzy evaluate --policies ppo --model PATH"
        )
    return load_knob_policy(env, path, sample=sample, seed=seed)


def knob(env: Any) -> KnobPolicy:
    """The :data:`SHIPPED` knob model bound to ``env``, sampling (seed 0): what ``frenzy evaluate --policies
    research.knob:knob`` plays (run from the repository root, so that ``research`` imports). Its
    ``gpu_features`` decide which clusters it fits (``"summary"``: any)."""
    return load_knob_policy(env, SHIPPED)
