"""Training configuration of the PPO agent: hyperparameters, trace windows, the data split and seed ranges.

:class:`PPOConfig` holds the PPO, objective, exploration and network hyperparameters, :class:`TraceWindows`
one real trace to cut windows from, :class:`TrainConfig` everything :func:`agents.ppo.train` needs (saved
as JSON beside the model). The seed ranges keep synthetic training (0-499), validation (500-999) and test
(>= 1000) workloads apart; :data:`TRAIN_TRACES`, :data:`VALIDATION_TRACES` and :data:`TEST_TRACES` do the
same for the ITP clusters (docs/evaluation.md, "Splits"). Both come from :data:`frenzy_env.workload.suites.SPLITS`,
the one definition of the split, which the benchmark suites share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frenzy_env.errors import ConfigError
from frenzy_env.observation import INTERFACES
from frenzy_env.workload.load import check_load_mode
from frenzy_env.workload.suites import SPLITS
from frenzy_env.workload.suites import TEST_SEED_START as TEST_SEED_START
from frenzy_env.workload.suites import TRAIN_SEEDS as TRAIN_SEEDS
from frenzy_env.workload.suites import VALIDATION_SEEDS as VALIDATION_SEEDS

#: names of :class:`~baselines.sia.SiaTeacher` (``ppo.bc_teacher``, ``ppo.guide``) and the
#: :class:`~baselines.sia.SiaPolicy` objective each re-solves
SIA_TEACHERS = {"sia": "goodput", "sia_srpt": "completion"}

# The seed ranges that keep training, validation and test workloads apart (TRAIN_SEEDS [0, 500), VALIDATION_SEEDS
# [500, 1000), TEST_SEED_START 1000) and the ITP clusters of each split are defined once, with the benchmark
# suites, in frenzy_env.workload.suites (SPLITS), and imported above.


@dataclass(frozen=True)
class PPOConfig:
    """PPO, objective, exploration and network hyperparameters (the defaults are the shipped run's).

    Optimisation: learning_rate (Adam, decayed linearly to ``lr_final_fraction`` of it by the end); n_steps
    (decisions per env per rollout: a rollout is n_steps * n_envs decisions); batch_size (minibatch);
    n_epochs (passes over each rollout); gae_lambda (GAE lambda per decision); clip_range (PPO ratio clip);
    vf_coef (value-loss weight); max_grad_norm (gradient clipping); target_kl (an update stops early past
    this approximate KL; None: never); critic_warmup_updates (the run's first updates fit the critic only,
    for a run that starts from a model whose critic learnt another reward, e.g. another reference);
    same_instant_lambda (GAE's lambda on steps that take no simulated time, the starts and resizes of one
    instant; None: gae_lambda. 1 hands the cost that follows a burst of same-instant decisions back to each
    of them undiminished, so they lean less on the critic); instant_weighting (the policy loss weighs each
    decision by 1 / the decisions its env took at that simulated instant, so every instant counts once:
    :func:`agents.ppo.rollout.instant_weights`; False: every decision counts once).

    Objective (docs/agents.md, "The MDP"): horizon_h discounts per hour of *simulated* time, ``gamma_t = exp(-dt /
    horizon)`` for a step lasting dt (None: undiscounted, the return is the whole episode's cost);
    reference (a ``baselines`` policy name, e.g. "doubling" or "srpt_est") plays every training workload once
    and the agent is rewarded against its jobs-in-system curve, so an episode's return is ``reward_gain *
    (reference cost - agent cost) / reference cost`` (cost: total job completion time); reference=None uses
    the env's raw reward, -(jobs in system x hours), times ``reward_gain`` / the episode's job count.

    Exploration: factored (the factored masked distribution P(type) x P(action | type) of
    :mod:`agents.ppo.distribution`); type_floor (the minimum share of every legal action type: wait, timed
    wait, start, resize); ent_coef (entropy bonus, on ``entropy``: "joint", the whole distribution's, or
    "within_type", the mean over legal types of each type's conditional entropy, which does not reward moving
    probability to the type with the most actions: :func:`agents.ppo.distribution.within_type_entropy`);
    type_ent_coef (extra bonus on the type distribution's entropy).

    Network (:mod:`agents.ppo.network`): embed_dim, context_dim, pair_hidden, plan_dim, value_hidden widths;
    critic_pool (the critic's own context with sum pooling and slot counts); type_demand (per GPU type, who
    waits for it and who holds it while it could run elsewhere, for the contexts, the plan keys and a pair
    feature: :meth:`agents.ppo.network.SlotSetExtractor.type_demand_features`; an ``init_model`` without it
    loads into it exactly, its modules at 0); new_lr_scale (the parameters an ``init_model`` lacks learn at
    this multiple of the learning rate, so new modules catch up with a fine-tuned network); resize_bias
    (initial logit offset of resize actions).

    Warm start (:mod:`agents.ppo.warmstart`): bc_episodes episodes of the teacher imitated for bc_epochs
    passes at bc_lr; 0 disables it. bc_teacher: "grow" (:class:`~agents.ppo.warmstart.GrowTeacher`, SRPT
    starts plus grow-into-idle resizes), "sia" (:class:`~baselines.sia.SiaTeacher`, Sia's integer
    program re-solved at every decision instant) or "sia_srpt" (the same with ``sia_srpt``'s objective, the
    summed estimated completion rates). bc_gpu_cap: the grow teacher's cap on GPUs as a multiple of
    the requested count. bc_coef: weight of the teacher's cross-entropy on its own demonstrations in every
    PPO minibatch (a KL pull towards the teacher, KL(teacher || policy) up to a constant), decayed linearly
    to 0 over the first bc_decay decisions; 0 (the default) disables it. The demonstrations are collected
    also when an ``init_model`` skips the warm start.

    Guide (:mod:`agents.ppo.guide`): guide None (the default) or a planner name, "sia" or "sia_srpt": the
    planner's next step is an input of the policy, which adds a learnt bonus (initially guide_bonus) to that
    action's logit and its type's, so it starts by carrying the plan out and PPO learns the deviations.
    guide_gate (None: the bonus) instead makes the policy a mixture: with probability ``1 - d`` the hint,
    with ``d`` a draw from the network's own distribution, ``d`` a learnt gate of the state and the hint's
    action type that starts at guide_gate (:meth:`agents.ppo.network.SlotPlanPolicy.gated`).
    The planner runs in every rollout, validation and evaluation step (10-20 ms per decision instant).
    """

    learning_rate: float = 3e-4
    lr_final_fraction: float = 0.1
    n_steps: int = 1024
    batch_size: int = 2048
    n_epochs: int = 2
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.03
    critic_warmup_updates: int = 0
    same_instant_lambda: float | None = None
    instant_weighting: bool = False
    horizon_h: float | None = None
    reference: str | None = "doubling"
    reward_gain: float = 10.0
    factored: bool = True
    type_floor: float = 0.05
    ent_coef: float = 0.002
    entropy: str = "joint"
    type_ent_coef: float = 0.01
    embed_dim: int = 32
    context_dim: int = 96
    pair_hidden: int = 32
    plan_dim: int = 16
    value_hidden: int = 96
    critic_pool: bool = True
    type_demand: bool = False
    new_lr_scale: float = 1.0
    resize_bias: float = -2.0
    bc_episodes: int = 40
    bc_epochs: int = 4
    bc_lr: float = 1e-3
    bc_gpu_cap: float = 4.0
    bc_teacher: str = "grow"
    bc_coef: float = 0.0
    bc_decay: int = 1_000_000
    guide: str | None = None
    guide_bonus: float = 8.0
    guide_gate: float | None = None

    def __post_init__(self) -> None:
        for name in ("n_steps", "batch_size", "n_epochs", "embed_dim", "context_dim", "pair_hidden", "plan_dim",
                     "value_hidden", "bc_epochs", "bc_decay"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"ppo.{name} must be a positive integer, got {v!r}")
        for name in ("learning_rate", "clip_range", "reward_gain", "bc_lr", "bc_gpu_cap", "new_lr_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ConfigError(f"ppo.{name} must be a positive number, got {v!r}")
        if self.horizon_h is not None and not (isinstance(self.horizon_h, (int, float)) and self.horizon_h > 0):
            raise ConfigError(f"ppo.horizon_h must be a positive number of hours or None, got {self.horizon_h!r}")
        if self.same_instant_lambda is not None and not (0.0 <= self.same_instant_lambda <= 1.0):
            raise ConfigError(f"ppo.same_instant_lambda must be in [0, 1] or None, got {self.same_instant_lambda!r}")
        for name in ("type_demand", "instant_weighting"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ConfigError(f"ppo.{name} must be true or false, got {getattr(self, name)!r}")
        if not (0.0 <= self.gae_lambda <= 1.0):
            raise ConfigError(f"ppo.gae_lambda must be in [0, 1], got {self.gae_lambda!r}")
        if self.entropy not in ("joint", "within_type"):
            raise ConfigError(f"ppo.entropy must be 'joint' or 'within_type', got {self.entropy!r}")
        if self.entropy == "within_type" and not self.factored:
            raise ConfigError("ppo.entropy 'within_type' needs the factored distribution (ppo.factored true)")
        if not (0.0 <= self.type_floor < 1.0):
            raise ConfigError(f"ppo.type_floor must be in [0, 1), got {self.type_floor!r}")
        if not isinstance(self.critic_warmup_updates, (int, np.integer)) or self.critic_warmup_updates < 0:
            raise ConfigError(f"ppo.critic_warmup_updates must be an integer >= 0, got {self.critic_warmup_updates!r}")
        if not isinstance(self.bc_episodes, (int, np.integer)) or self.bc_episodes < 0:
            raise ConfigError(f"ppo.bc_episodes must be an integer >= 0, got {self.bc_episodes!r}")
        if self.bc_teacher != "grow" and self.bc_teacher not in SIA_TEACHERS:
            raise ConfigError(f"ppo.bc_teacher must be 'grow', 'sia' or 'sia_srpt', got {self.bc_teacher!r}")
        if not (isinstance(self.bc_coef, (int, float)) and np.isfinite(self.bc_coef) and self.bc_coef >= 0):
            raise ConfigError(f"ppo.bc_coef must be a number >= 0, got {self.bc_coef!r}")
        if self.bc_coef > 0 and self.bc_episodes == 0:
            raise ConfigError(f"ppo.bc_coef {self.bc_coef!r} needs demonstrations: ppo.bc_episodes must be > 0")
        if self.guide is not None and self.guide not in SIA_TEACHERS:
            raise ConfigError(f"ppo.guide must be None, 'sia' or 'sia_srpt', got {self.guide!r}")
        if not (isinstance(self.guide_bonus, (int, float)) and np.isfinite(self.guide_bonus) and self.guide_bonus >= 0):
            raise ConfigError(f"ppo.guide_bonus must be a number >= 0, got {self.guide_bonus!r}")
        if self.guide_gate is not None:
            if not (isinstance(self.guide_gate, (int, float)) and 0 < self.guide_gate < 1):
                raise ConfigError(f"ppo.guide_gate must be a probability in (0, 1) or None, got {self.guide_gate!r}")
            if self.guide is None:
                raise ConfigError("ppo.guide_gate needs ppo.guide (the planner whose hint the gate follows)")
        if self.reference is not None and not isinstance(self.reference, str):
            raise ConfigError(f"ppo.reference must be a baseline policy name or None, got {self.reference!r}")


#: workload seeds of training world w are ``w * WORLD_SEED_STRIDE + k`` (k < ``train_workloads``): one number names
#: the world and its workload, so one reference cache serves envs of several worlds
#: (:class:`agents.ppo.reference_reward.WorldReferenceCache`)
WORLD_SEED_STRIDE = 1_000_000

#: env keywords a training world may not set: the trainer sets them for every env (workload, interface, windows,
#: the step budget it sets per episode)
WORLD_RESERVED = ("workload", "interface", "queue_slots", "running_slots", "max_steps")

#: PPOConfig keys of configurations written before the time-discounted trainer; dropped when read.
LEGACY_PPO_KEYS = ("gamma", "normalize_reward")


@dataclass(frozen=True)
class TraceWindows:
    """Windows of a real trace used for training: ``max_jobs`` consecutive jobs from a seeded start row.

    path: trace CSV; format: its format ("itp", "philly", "canonical"); load_scale: divides inter-arrival
    times (2 doubles the offered load); exclude: (start, end) submission-time ranges never used (for
    example a held-out window of the same file).
    """

    path: str
    format: str = "itp"
    max_jobs: int = 150
    load_scale: float = 1.0
    exclude: tuple[tuple[float, float], ...] = ()



#: load_scale of each ITP cluster's training windows (divides inter-arrival times): load-matched so each
#: offers ~85-100 busy GPUs on average to the 96-GPU testbed (offered GPU-seconds per second of the whole
#: file: cluster01 28, 02 86, 03 140, 04 495, 06 87, 07 257, 08 66, 09 31).
ITP_LOAD_SCALES = {"cluster01": 3.2, "cluster02": 1.0, "cluster03": 0.7, "cluster04": 0.18, "cluster06": 1.0,
                   "cluster07": 0.35, "cluster08": 1.3, "cluster09": 2.9}


def _split_traces(split: str) -> tuple[tuple[str, float], ...]:
    """(file in ``traces/itp`` of the shared data, load_scale) of each ITP cluster of ``split``."""
    clusters = [name.removeprefix("itp-") for name in SPLITS[split].traces]
    return tuple((f"{c}.csv", ITP_LOAD_SCALES[c]) for c in clusters)


#: The split of the ITP traces (frenzy_env.workload.suites.SPLITS): training, validation and test use disjoint
#: clusters, so a cluster's jobs never appear in two splits.
TRAIN_TRACES = _split_traces("train")  # cluster03 (0.7), cluster06 (1.0), cluster08 (1.3)
VALIDATION_TRACES = _split_traces("validation")  # cluster04 (0.18), cluster07 (0.35)
TEST_TRACES = _split_traces("test")  # cluster01 (3.2), cluster09 (2.9), cluster02 (1.0)


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`~agents.ppo.training.train` needs; saved as ``config.json`` beside the model.

    timesteps: decisions (env steps over all envs) in total; n_envs: envs stepped together in this process
    (their observations go through the network as one batch); vec_env: "dummy" (in-process, the only
    kind: on a few cores it beats subprocesses); seed: seeds the network, the envs and the workload draws;
    cluster: cluster preset (of validation, the warm start and the worlds that name none); worlds: the training
    envs' worlds, each a dict of env keywords (:meth:`world_keywords`): ``cluster`` (a preset name),
    ``cost_scale`` (the start-up and restart costs times it, :func:`frenzy_env.simulator.config.stop_cost_keywords`)
    and any other :class:`~frenzy_env.env.FrenzyEnv` / ``SimConfig`` keyword (``checkpoint_interval``,
    ``stop_mode``, ...); env i plays ``worlds[i % len(worlds)]`` and draws its workloads from its own pool
    (``train_workloads`` seeds each, the reference played in that world); () (the default): one world,
    ``cluster`` with the env's defaults (worlds on several clusters need the universal interface);
    interface: the env's ``SimConfig.interface`` for every training, validation, teacher and reference env
    ("universal", the default, env v6's: the fixed grid of docs/environment.md, a model that plays on every
    cluster of at most 4 GPU types; "cluster", env v5's and the shipped model's: the cluster's own spaces, a
    model for that cluster only; a ``config.json`` without the key trained on "cluster"); workload: "mix"
    (:class:`~agents.ppo.workloads.MixtureGenerator` over synthetic workloads and ``traces``) or a workload
    preset; traces: training trace windows;
    trace_fraction, jobs_range, load_range: the mixture's trace share and synthetic sizes and loads;
    load_mode: the measure of ``load_range`` and ``validation_load`` (:mod:`frenzy_env.workload.load`):
    "fluid" (offered load; trace windows at their ``load_scale``) or "busy" / "wait" (the env v6 suites' measure,
    trace windows stretched to a load of that measure too: :class:`~agents.ppo.workloads.MixtureGenerator`);
    train_workloads: training episodes draw their workload seed from this many seeds (a finite pool, so
    the reference run of each is cached and reused).

    Validation (every ``eval_freq`` decisions): ``validation_episodes`` synthetic workloads
    (``validation_jobs`` jobs, load ``validation_load``, seeds 500, 501, ...) and ``validation_windows``
    fixed windows of each of ``validation_traces``, each played ``validation_samples`` times with sampled
    actions (seeded; 0: once, greedily); ``best_model.zip`` has the lowest mean ratio of average JCT to the
    reference's. Test (never used in training or validation; recorded with the run's configuration, and
    :func:`agents.ppo.workloads.test_workloads` builds them): ``test_windows`` fixed windows of each of
    ``test_traces`` and ``test_seeds`` synthetic seeds from 1000.

    Budgets (every training and validation episode ends, whatever the policy does: docs/environment.md, "Reward
    and episode end"): max_steps_per_job (200; None: none): a training episode is truncated after this many
    steps per job of its workload (the env's ``max_steps``, set at each reset; scripted baselines take 3-4
    steps per job, masked-random play 100-800); max_sim_hours (None): the env's simulated-time budget of
    training episodes. A cut training episode settles nothing against the reference and is bootstrapped with
    the critic's value (:mod:`agents.ppo.rollout`). validation_max_steps_per_job (200) and
    validation_max_sim_hours (None): the same for validation episodes; validation_time_budget_s (900; None:
    none): wall seconds of one validation pass, after which its unfinished episodes are cut. A cut validation
    episode scores its ``avg_time_in_system_h`` (a lower bound on its average JCT) and is counted in the
    learning curve's ``val_truncated``; a pass with any cut episode never replaces an uncut ``best_model.zip``.
    (``frenzy evaluate`` plays without budgets.)

    max_minutes: a wall-clock limit (None: none): training ends after the first update past it, with a final
    validation and checkpoint, as at ``timesteps`` (the learning rate schedule still runs to ``timesteps``);
    checkpoint_minutes: wall minutes between checkpoints (also written at every validation and at the end);
    out_dir: output folder; threads: torch threads; queue_slots, running_slots: env sizes; progress: a
    progress bar; verbose: a line per update; init_model: start from this model's weights (a ``.zip`` this
    trainer wrote with the same network sizes, of any observation version: fine-tuning after an encoding
    change) instead of the warm start (which it replaces); init_optimizer: with ``init_model``, also continue
    Adam's moments from the ``checkpoint.pt`` beside the model when that checkpoint holds the same weights
    (a run's last model; recorded as ``init_optimizer`` in ``train_log.json``).
    """

    timesteps: int = 3_000_000
    n_envs: int = 16
    vec_env: str = "dummy"
    seed: int = 0
    cluster: str = "frenzy-testbed"
    worlds: tuple[dict[str, Any], ...] = ()
    interface: str = "universal"
    workload: str = "mix"
    traces: tuple[TraceWindows, ...] = ()
    trace_fraction: float = 0.3
    jobs_range: tuple[int, int] = (100, 200)
    load_range: tuple[float, float] = (0.5, 1.0)
    load_mode: str = "fluid"
    train_workloads: int = 1000
    validation_jobs: int = 200
    validation_load: float = 0.7
    validation_episodes: int = 8
    validation_traces: tuple[TraceWindows, ...] = ()
    validation_windows: int = 4
    validation_samples: int = 2
    max_steps_per_job: float | None = 200.0
    max_sim_hours: float | None = None
    validation_max_steps_per_job: float | None = 200.0
    validation_max_sim_hours: float | None = None
    validation_time_budget_s: float | None = 900.0
    test_traces: tuple[TraceWindows, ...] = ()
    test_windows: int = 6
    test_seeds: int = 10
    eval_freq: int = 200_000
    max_minutes: float | None = 52.0
    checkpoint_minutes: float = 5.0
    out_dir: str = "runs/ppo"
    threads: int = 1
    queue_slots: int = 64
    running_slots: int = 64
    progress: bool = True
    verbose: int = 0
    init_model: str | None = None
    init_optimizer: bool = True
    ppo: PPOConfig = field(default_factory=PPOConfig)

    def __post_init__(self) -> None:
        for name in ("timesteps", "n_envs", "validation_episodes", "eval_freq", "threads", "train_workloads",
                     "queue_slots", "running_slots"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        for name in ("validation_windows", "validation_samples", "test_windows", "test_seeds"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {v!r}")
        if self.max_minutes is not None and not (isinstance(self.max_minutes, (int, float)) and self.max_minutes > 0):
            raise ConfigError(f"max_minutes must be a positive number or None, got {self.max_minutes!r}")
        for name in ("max_steps_per_job", "max_sim_hours", "validation_max_steps_per_job", "validation_max_sim_hours",
                     "validation_time_budget_s"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v)
                                  or v <= 0):
                raise ConfigError(f"{name} must be a positive number or None, got {v!r}")
        if not (isinstance(self.checkpoint_minutes, (int, float)) and self.checkpoint_minutes > 0):
            raise ConfigError(f"checkpoint_minutes must be a positive number, got {self.checkpoint_minutes!r}")
        if not isinstance(self.init_optimizer, bool):
            raise ConfigError(f"init_optimizer must be true or false, got {self.init_optimizer!r}")
        if self.init_model is not None and not str(self.init_model).endswith(".zip"):
            raise ConfigError(f"init_model must name a model .zip file, got {self.init_model!r}")
        check_load_mode(self.load_mode)
        if self.interface not in INTERFACES:
            raise ConfigError(f"interface must be one of {', '.join(INTERFACES)}, got {self.interface!r}")
        for i, world in enumerate(self.worlds):
            if not isinstance(world, dict) or not all(isinstance(k, str) for k in world):
                raise ConfigError(f"worlds[{i}] must be a dict of env keywords, got {world!r}")
            for key in WORLD_RESERVED:
                if key in world:
                    raise ConfigError(f"worlds[{i}] may not set {key!r} (the trainer sets it for every env)")
        clusters = {w.get("cluster", self.cluster) for w in self.worlds}
        if len(clusters) > 1 and self.interface != "universal":
            raise ConfigError(
                f"worlds on {len(clusters)} clusters ({', '.join(sorted(map(str, clusters)))}) need "
                f"interface='universal' (one network for every cluster), got {self.interface!r}"
            )
        if self.train_workloads > WORLD_SEED_STRIDE:
            raise ConfigError(f"train_workloads must be at most {WORLD_SEED_STRIDE:,}, got {self.train_workloads!r}")
        if len(self.worlds) > self.n_envs:
            raise ConfigError(f"{len(self.worlds)} worlds need at least as many envs, n_envs is {self.n_envs}")
        if self.vec_env != "dummy":
            raise ConfigError(
                f"vec_env must be 'dummy' (the trainer steps its envs in this process), got {self.vec_env!r}"
            )
        if self.ppo.batch_size > self.ppo.n_steps * self.n_envs:
            raise ConfigError(
                f"ppo.batch_size={self.ppo.batch_size} exceeds a rollout of n_steps * n_envs = "
                f"{self.ppo.n_steps * self.n_envs} decisions"
            )

    @property
    def num_worlds(self) -> int:
        """Training worlds (1 when ``worlds`` is empty)."""
        return max(1, len(self.worlds))

    def world_keywords(self, index: int) -> dict[str, Any]:
        """The env keywords of world ``index`` (``cost_scale`` expanded into the four cost keywords, ``cluster``
        defaulting to :attr:`cluster`); ``{"cluster": cluster}`` when ``worlds`` is empty."""
        from frenzy_env.simulator.config import stop_cost_keywords

        world = dict(self.worlds[index]) if self.worlds else {}
        scale = world.pop("cost_scale", None)
        out = {"cluster": self.cluster, **world}
        if scale is not None:
            for key, value in stop_cost_keywords(scale).items():
                if key in out:
                    raise ConfigError(f"worlds[{index}] sets both cost_scale and {key!r}")
                out[key] = value
        return out

    @property
    def rollout_size(self) -> int:
        """Decisions per rollout (and per PPO update): ``ppo.n_steps * n_envs``."""
        return self.ppo.n_steps * self.n_envs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The configuration of a ``config.json`` (records of the run such as ``obs_version`` are not fields;
        PPO keys of older trainers, :data:`LEGACY_PPO_KEYS`, are dropped; an ``agent`` record must say ``ppo``)."""
        data = dict(data)
        agent = data.pop("agent", "ppo")
        if agent != "ppo":
            raise ConfigError(f"a ppo training config needs agent 'ppo', this one records agent {agent!r}")
        for key in ("obs_version", "universal_obs_version", "env_version", "split"):
            data.pop(key, None)
        data.setdefault("interface", "cluster")  # records older than the field trained on the cluster layout
        for key in ("checkpoint_freq",):  # older configurations' checkpoint interval in steps (checkpoint_minutes here)
            data.pop(key, None)
        ppo_data = {k: v for k, v in data.pop("ppo", {}).items() if k not in LEGACY_PPO_KEYS}
        ppo = PPOConfig(**ppo_data)
        trace_sets = {}
        for key in ("traces", "validation_traces", "test_traces"):
            trace_sets[key] = tuple(
                TraceWindows(**{**t, "exclude": tuple(tuple(x) for x in t.get("exclude", ()))})
                for t in data.pop(key, ())
            )
        for key in ("jobs_range", "load_range"):
            if key in data:
                data[key] = tuple(data[key])
        if "worlds" in data:
            data["worlds"] = tuple(data["worlds"])
        if data.get("vec_env") == "subproc":
            data["vec_env"] = "dummy"
        return cls(ppo=ppo, **trace_sets, **data)
