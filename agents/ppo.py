"""MaskablePPO schedulers for :class:`~frenzy_env.env.FrenzyEnv`: the network, training and loading.

Network (:class:`SlotPlanPolicy`)
---------------------------------
The observation holds Q queue slots and R running slots, each a row of job features followed by the job's
predicted run time on each of the P plan slots. The policy treats the slots as *sets*:

1. :class:`SlotSetExtractor`: one shared MLP embeds every queue row, another every running row (the same
   weights for every slot, so the embeddings are permutation-equivariant); masked mean and max pooling over
   the present slots plus the GPU, node and global features give a context vector that does not depend on
   slot order.
2. :class:`SlotPlanHead`: a logit for every action in the env's own layout ``1 + Q*P + R*P``: "wait" from
   the context; "start queue slot k on plan p" from a small MLP over (slot embedding k, a learned embedding
   of plan p, pair features: predicted time of k on p, availability, time above the job's best plan, free
   share of p's GPU type, p's GPU count, and the context); resize logits likewise from the running slots.
   The same weights score every (slot, plan) pair, so the policy is equivariant to slot order and learns
   "which job, on how many GPUs of which type" from the per-plan time features rather than 865 separate
   output units. The value is an MLP of the context.

Masks come from the env (``action_masks()``); MaskablePPO puts -inf on illegal logits.

Hyperparameters (:class:`PPOConfig`) are documented field by field. Training (:func:`train`) mixes
synthetic workloads with real-trace windows (:class:`MixtureGenerator`); validation uses synthetic seeds
500-999 and test (held-out) workloads use seeds >= 1000 and trace windows never trained on.

Loading a model runs pickle
---------------------------
A stable-baselines3 ``.zip`` stores some objects with (cloud)pickle; :func:`load_policy` therefore executes
code from the file. Only load model files you trust (the shipped :data:`DEFAULT_MODEL_PATH` or ones you
trained). :func:`load_policy` refuses anything that is not an existing regular file named explicitly, and
reads exactly that file (stable-baselines3 would otherwise try ``PATH.zip``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from frenzy_env.errors import ConfigError

MODELS_DIR = Path(__file__).resolve().parent / "models"
#: The trained model shipped with the package (frenzy-testbed cluster, 32 queue / 16 running slots).
DEFAULT_MODEL_PATH = MODELS_DIR / "ppo_frenzy_testbed.zip"
#: The full training configuration of :data:`DEFAULT_MODEL_PATH`.
DEFAULT_CONFIG_PATH = MODELS_DIR / "ppo_frenzy_testbed.json"

# Seed ranges that keep training, validation and test workloads apart.
TRAIN_SEEDS = (0, 500)  # training workloads draw their seeds in [0, 500)
VALIDATION_SEEDS = (500, 1000)  # the evaluation callback uses seeds 500, 501, ...
TEST_SEED_START = 1000  # held-out evaluation: seeds >= 1000


# ------------------------------------------------------------------------------------------ network
def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


def _masked_pool(emb: th.Tensor, present: th.Tensor) -> th.Tensor:
    """Mean and max over present slots: emb (B, S, d), present (B, S) -> (B, 2d); zeros when none."""
    w = present.unsqueeze(-1)  # (B, S, 1)
    count = w.sum(1).clamp(min=1.0)  # (B, 1)
    mean = (emb * w).sum(1) / count
    neg = th.finfo(emb.dtype).min
    mx = emb.masked_fill(w == 0, neg).max(1).values
    mx = th.where(present.any(1, keepdim=True), mx, th.zeros_like(mx))
    return th.cat([mean, mx], dim=-1)


class SlotSetExtractor(BaseFeaturesExtractor):
    """Set encoder over queue and running slots; output is a flat tensor the :class:`SlotPlanHead` splits.

    Parameters
    ----------
    observation_space : the env's Dict space.
    queue_slots, running_slots : Q and R of the env.
    plan_type : (P,) GPU-type index of each plan slot (``sim.plan_type``).
    plan_count : (P,) GPU count of each plan slot (``sim.plan_count``).
    embed_dim : slot embedding width d.
    context_dim : width of the pooled context vector.

    The flat output is ``[context (C) | queue embeddings (Q*d) | running embeddings (R*d) | queue plan
    times (Q*P) | running plan times (R*P) | queue best time (Q) | running remaining time (R) | free share
    per plan (P)]``; :meth:`split` returns the pieces with their shapes.
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        queue_slots: int,
        running_slots: int,
        plan_type: list[int],
        plan_count: list[int],
        embed_dim: int = 64,
        context_dim: int = 128,
    ) -> None:
        q, r, p = int(queue_slots), int(running_slots), len(plan_type)
        qf = observation_space["queue"].shape[0] // q
        rf = observation_space["running"].shape[0] // r
        if qf * q != observation_space["queue"].shape[0] or qf <= p:
            raise ConfigError(
                f"queue observation of size {observation_space['queue'].shape[0]} does not match "
                f"queue_slots={q} and {p} plans"
            )
        n_types = observation_space["gpus"].shape[0] // 2
        n_nodes = observation_space["nodes"].shape[0]
        n_glob = observation_space["globals"].shape[0]
        d, c = int(embed_dim), int(context_dim)
        features_dim = c + q * d + r * d + q * p + r * p + q + r + p
        super().__init__(observation_space, features_dim)
        self.q, self.r, self.p, self.d, self.c = q, r, p, d, c
        self.qf, self.rf, self.n_types = qf, rf, n_types
        self.register_buffer("plan_type", th.as_tensor(plan_type, dtype=th.long), persistent=False)
        self.register_buffer(
            "plan_count_feat", th.log2(th.as_tensor(plan_count, dtype=th.float32) + 1.0) / 6.0, persistent=False
        )
        self.queue_encoder = _mlp([qf, d, d])
        self.running_encoder = _mlp([rf, d, d])
        ctx_in = 4 * d + 2 * n_types + n_nodes + n_glob
        self.context = _mlp([ctx_in, c, c])

    def encode(self, obs: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
        """Named pieces: context (B, C), queue_emb (B, Q, d), running_emb (B, R, d), queue_times (B, Q, P),
        running_times (B, R, P), queue_best (B, Q), running_rem (B, R), plan_free (B, P)."""
        b = obs["queue"].shape[0]
        queue = obs["queue"].reshape(b, self.q, self.qf)
        running = obs["running"].reshape(b, self.r, self.rf)
        nf_q, nf_r = self.qf - self.p, self.rf - self.p
        q_present = queue[:, :, 0]
        r_present = running[:, :, 0]
        q_emb = self.queue_encoder(queue) * q_present.unsqueeze(-1)
        r_emb = self.running_encoder(running) * r_present.unsqueeze(-1)
        ctx = self.context(
            th.cat(
                [
                    _masked_pool(q_emb, q_present),
                    _masked_pool(r_emb, r_present),
                    obs["gpus"],
                    obs["nodes"],
                    obs["globals"],
                ],
                dim=-1,
            )
        )
        free_by_type = obs["gpus"][:, : self.n_types]  # (B, T)
        return {
            "context": ctx,
            "queue_emb": q_emb,
            "running_emb": r_emb,
            "queue_times": queue[:, :, nf_q:],
            "running_times": running[:, :, nf_r:],
            "queue_best": queue[:, :, 2],
            "running_rem": running[:, :, 2],
            "plan_free": free_by_type[:, self.plan_type],
        }

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        e = self.encode(obs)
        b = e["context"].shape[0]
        return th.cat([e[k].reshape(b, -1) for k in _PIECES], dim=-1)

    def split(self, features: th.Tensor) -> dict[str, th.Tensor]:
        """Inverse of :meth:`forward`: the flat features back into named tensors."""
        b = features.shape[0]
        q, r, p, d = self.q, self.r, self.p, self.d
        shapes = {
            "context": (self.c,),
            "queue_emb": (q, d),
            "running_emb": (r, d),
            "queue_times": (q, p),
            "running_times": (r, p),
            "queue_best": (q,),
            "running_rem": (r,),
            "plan_free": (p,),
        }
        out, i = {}, 0
        for k in _PIECES:
            n = math.prod(shapes[k])
            out[k] = features[:, i : i + n].reshape(b, *shapes[k])
            i += n
        return out


_PIECES = (
    "context",
    "queue_emb",
    "running_emb",
    "queue_times",
    "running_times",
    "queue_best",
    "running_rem",
    "plan_free",
)


class _PairScorer(nn.Module):
    """Factorised (slot, plan) scores, cheap enough for CPU training: for slot s and plan p,

    ``score = sum_k a_k(s) f_k(s, p) + q(s) . k(p)``

    where ``f(s, p)`` are the pair features (predicted time on p, availability, time above the slot's
    reference, its square), ``a(s)`` and the query ``q(s)`` come from the slot embedding and the context, and
    the key ``k(p)`` from a learned plan embedding, the free share of p's GPU type, p's GPU count and the
    context. Only (B, S, P) tensors are formed, never (B, S, P, hidden).
    """

    N_PAIR = 4

    def __init__(self, embed_dim: int, context_dim: int, num_plans: int, plan_dim: int, hidden: int) -> None:
        super().__init__()
        self.plan_emb = nn.Parameter(th.randn(num_plans, plan_dim) * 0.1)
        self.slot_in = nn.Linear(embed_dim, hidden)
        self.slot_ctx = nn.Linear(context_dim, hidden, bias=False)
        self.coef = nn.Linear(hidden, self.N_PAIR)
        self.query = nn.Linear(hidden, hidden)
        self.key_in = nn.Linear(plan_dim + 2, hidden)
        self.key_ctx = nn.Linear(context_dim, hidden, bias=False)
        self.key_out = nn.Linear(hidden, hidden)
        self.scale = 1.0 / math.sqrt(hidden)

    def forward(self, emb: th.Tensor, pair: th.Tensor, plan_in: th.Tensor, ctx: th.Tensor) -> th.Tensor:
        # emb (B, S, d), pair (B, S, P, F), plan_in (B, P, 2), ctx (B, C) -> (B, S, P)
        b, p = plan_in.shape[:2]
        h = th.relu(self.slot_in(emb) + self.slot_ctx(ctx)[:, None, :])  # (B, S, H)
        lin = (pair * self.coef(h)[:, :, None, :]).sum(-1)  # (B, S, P)
        k_in = th.cat([self.plan_emb.expand(b, p, -1), plan_in], dim=-1)  # (B, P, plan_dim + 2)
        keys = self.key_out(th.relu(self.key_in(k_in) + self.key_ctx(ctx)[:, None, :]))  # (B, P, H)
        return lin + th.bmm(self.query(h), keys.transpose(1, 2)) * self.scale


class SlotPlanHead(nn.Module):
    """Actor logits in the env's action layout and the critic latent (the "mlp_extractor" of SB3).

    ``forward_actor(features)`` -> (B, 1 + Q*P + R*P) logits; ``forward_critic(features)`` -> (B, H).
    """

    def __init__(
        self, extractor: SlotSetExtractor, pair_hidden: int = 64, plan_dim: int = 16, value_hidden: int = 128
    ) -> None:
        super().__init__()
        self._split = extractor.split  # a bound method, not a submodule (no duplicate parameters)
        self.register_buffer("count_feat", extractor.plan_count_feat.clone(), persistent=False)
        c, d, p = extractor.c, extractor.d, extractor.p
        self.queue_scorer = _PairScorer(d, c, p, plan_dim, pair_hidden)
        self.running_scorer = _PairScorer(d, c, p, plan_dim, pair_hidden)
        self.wait = nn.Linear(c, 1)
        self.value = _mlp([c, value_hidden, value_hidden])
        self.latent_dim_pi = 1 + extractor.q * p + extractor.r * p
        self.latent_dim_vf = value_hidden

    @staticmethod
    def _pair(times: th.Tensor, ref: th.Tensor) -> th.Tensor:
        avail = (times > 0).float()  # (B, S, P)
        above = (times - ref.unsqueeze(-1)) * avail * 4.0
        return th.stack([times, avail, above, above * above], dim=-1)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        e = self._split(features)
        ctx = e["context"]
        b = ctx.shape[0]
        plan_in = th.stack([e["plan_free"], self.count_feat.expand(b, -1)], dim=-1)  # (B, P, 2)
        q_logits = self.queue_scorer(e["queue_emb"], self._pair(e["queue_times"], e["queue_best"]), plan_in, ctx)
        r_logits = self.running_scorer(e["running_emb"], self._pair(e["running_times"], e["running_rem"]), plan_in, ctx)
        return th.cat([self.wait(ctx), q_logits.reshape(b, -1), r_logits.reshape(b, -1)], dim=-1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.value(self._split(features)["context"])

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


class SlotPlanPolicy(MaskableActorCriticPolicy):
    """MaskableActorCriticPolicy with :class:`SlotSetExtractor` and the per-(slot, plan) :class:`SlotPlanHead`.

    Extra keyword arguments: ``pair_hidden`` (width of the pair MLP), ``plan_dim`` (plan embedding width),
    ``value_hidden`` (critic width), ``resize_bias`` (initial logit offset of resize actions; negative makes
    the untrained policy rarely resize, as restarts cost time).
    """

    def __init__(
        self,
        *args: Any,
        pair_hidden: int = 64,
        plan_dim: int = 16,
        value_hidden: int = 128,
        resize_bias: float = -2.0,
        **kwargs: Any,
    ) -> None:
        self.pair_hidden, self.plan_dim, self.value_hidden = pair_hidden, plan_dim, value_hidden
        self.resize_bias = resize_bias
        kwargs.setdefault("features_extractor_class", SlotSetExtractor)
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = SlotPlanHead(
            self.features_extractor,
            pair_hidden=self.pair_hidden,
            plan_dim=self.plan_dim,
            value_hidden=self.value_hidden,
        )

    def _build(self, lr_schedule: Any) -> None:
        self._build_mlp_extractor()
        self.action_net = nn.Identity()  # the head already emits logits in the action layout
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:
            for module, gain in (
                (self.features_extractor, np.sqrt(2)),
                (self.mlp_extractor, np.sqrt(2)),
                (self.value_net, 1.0),
            ):
                module.apply(lambda m, g=gain: self.init_weights(m, gain=g))
            head = self.mlp_extractor
            for out in (
                head.queue_scorer.coef,
                head.running_scorer.coef,
                head.wait,
                head.queue_scorer.query,
                head.running_scorer.query,
            ):
                nn.init.orthogonal_(out.weight, gain=0.01)
                nn.init.zeros_(out.bias)
            nn.init.constant_(head.running_scorer.coef.bias[1], self.resize_bias)  # x availability (1 if legal)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            pair_hidden=self.pair_hidden,
            plan_dim=self.plan_dim,
            value_hidden=self.value_hidden,
            resize_bias=self.resize_bias,
        )
        return data


def policy_kwargs_for(env: Any, ppo: PPOConfig) -> dict[str, Any]:
    """``policy_kwargs`` of :class:`SlotPlanPolicy` for an env (reads Q, R and the plan slots)."""
    base = env.unwrapped
    return {
        "features_extractor_kwargs": {
            "queue_slots": base.queue_slots,
            "running_slots": base.running_slots,
            "plan_type": [int(x) for x in base.sim.plan_type],
            "plan_count": [int(x) for x in base.sim.plan_count],
            "embed_dim": ppo.embed_dim,
            "context_dim": ppo.context_dim,
        },
        "pair_hidden": ppo.pair_hidden,
        "plan_dim": ppo.plan_dim,
        "value_hidden": ppo.value_hidden,
        "resize_bias": ppo.resize_bias,
    }


# ------------------------------------------------------------------------------------------ configs
@dataclass(frozen=True)
class PPOConfig:
    """MaskablePPO and network hyperparameters (the defaults trained the shipped model).

    learning_rate: Adam step size, decayed linearly to ``lr_final_fraction`` of it by the end.
    n_steps: rollout length per env before each update (n_steps * n_envs samples per update).
    batch_size: minibatch size; n_epochs: passes over each rollout.
    gamma: discount per decision (an episode has ~3 decisions per job; 0.995 sees ~200 decisions ahead).
    gae_lambda: GAE lambda; clip_range: PPO ratio clip; ent_coef: entropy bonus; vf_coef: value-loss
    weight; max_grad_norm: gradient clipping; target_kl: stop an update early past this KL.
    normalize_reward: without a warm start, scale rewards by a running std of the discounted return
    (VecNormalize, no obs normalisation, so the saved model needs no statistics at evaluation); with a warm
    start, rewards are divided by the fixed std of the teacher's discounted returns (the critic is
    pre-trained on them).
    embed_dim, context_dim, pair_hidden, plan_dim, value_hidden: network widths (see the module docstring).
    resize_bias: initial logit offset of resize actions.
    bc_episodes: behaviour-cloning warm start: episodes of :class:`SrptTeacher` on training workloads
    imitated (masked cross-entropy) before PPO; 0 disables it. bc_epochs, bc_lr: its passes and step
    size; bc_gpu_cap: the teacher's cap on GPUs as a multiple of the requested count.
    """

    learning_rate: float = 1e-4
    lr_final_fraction: float = 0.1
    n_steps: int = 1024
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.995
    gae_lambda: float = 0.95
    clip_range: float = 0.1
    ent_coef: float = 0.001
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = 0.02
    normalize_reward: bool = True
    embed_dim: int = 64
    context_dim: int = 128
    pair_hidden: int = 64
    plan_dim: int = 16
    value_hidden: int = 128
    resize_bias: float = -2.0
    bc_episodes: int = 60
    bc_epochs: int = 6
    bc_lr: float = 1e-3
    bc_gpu_cap: float = 4.0


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


@dataclass(frozen=True)
class MixtureGenerator:
    """Training workloads: synthetic ones with varied size and load, and windows of real traces.

    ``generate(seed)`` draws from ``numpy.random.default_rng(seed)``: with probability ``trace_fraction``
    (when traces are given) a window of a random trace starting at a random row (windows overlapping an
    ``exclude`` range are redrawn), else a synthetic workload with ``num_jobs`` in ``jobs_range`` and load
    in ``load_range``. Every sub-seed is drawn in ``seed_range`` so training never sees validation (500-999)
    or test (>= 1000) seeds.
    """

    cluster: Any = "frenzy-testbed"
    traces: tuple[TraceWindows, ...] = ()
    trace_fraction: float = 0.3
    jobs_range: tuple[int, int] = (100, 200)
    load_range: tuple[float, float] = (0.5, 1.0)
    seed_range: tuple[int, int] = TRAIN_SEEDS
    name: str = "train-mix"

    def generate(self, seed: int) -> Any:
        from frenzy_env.workload import SyntheticGenerator, TraceGenerator, read_trace

        rng = np.random.default_rng(seed)
        sub_seed = int(rng.integers(*self.seed_range))
        if self.traces and rng.random() < self.trace_fraction:
            spec = self.traces[int(rng.integers(len(self.traces)))]
            submit = read_trace(spec.path, format=spec.format).submit
            n = submit.size
            for _ in range(100):
                i = int(rng.integers(0, max(1, n - spec.max_jobs)))
                lo, hi = submit[i], submit[min(n - 1, i + spec.max_jobs)]
                if not any(lo < e1 and hi >= s1 for s1, e1 in spec.exclude):
                    break
            else:
                raise ConfigError(f"trace {spec.path}: no window of {spec.max_jobs} jobs outside {spec.exclude}")
            gen = TraceGenerator(
                spec.path,
                format=spec.format,
                start=float(submit[i]),
                max_jobs=spec.max_jobs,
                load_scale=spec.load_scale,
                name=f"{Path(spec.path).stem}@{i}",
            )
            return gen.generate(sub_seed)
        num_jobs = int(rng.integers(self.jobs_range[0], self.jobs_range[1] + 1))
        load = float(rng.uniform(*self.load_range))
        return SyntheticGenerator(
            num_jobs=num_jobs, load=load, cluster=self.cluster, name=f"synthetic-l{load:.2f}"
        ).generate(sub_seed)


@dataclass(frozen=True)
class TrainConfig:
    """Everything :func:`train` needs; saved as JSON beside the model.

    timesteps: environment steps in total; n_envs: parallel envs; vec_env: "dummy" (one process) or
    "subproc"; seed: seeds PPO, the envs and the workload draws; cluster: cluster preset; workload:
    "mix" (:class:`MixtureGenerator` over synthetic workloads and ``traces``) or a workload preset name;
    traces: training trace windows; validation_episodes: synthetic validation workloads (seeds 500, 501,
    ...) run by the evaluation callback every ``eval_freq`` steps; checkpoint_freq: steps between
    checkpoints; out_dir: output folder; threads: torch threads; queue_slots, running_slots: env sizes.
    """

    timesteps: int = 240_000
    n_envs: int = 2
    vec_env: str = "dummy"
    seed: int = 0
    cluster: str = "frenzy-testbed"
    workload: str = "mix"
    traces: tuple[TraceWindows, ...] = ()
    trace_fraction: float = 0.3
    jobs_range: tuple[int, int] = (100, 200)
    load_range: tuple[float, float] = (0.5, 1.0)
    validation_jobs: int = 200
    validation_load: float = 0.7
    validation_episodes: int = 4
    eval_freq: int = 24_000
    checkpoint_freq: int = 50_000
    out_dir: str = "runs/ppo"
    threads: int = 1
    queue_slots: int = 32
    running_slots: int = 16
    progress: bool = True
    verbose: int = 0
    ppo: PPOConfig = field(default_factory=PPOConfig)

    def __post_init__(self) -> None:
        for name in ("timesteps", "n_envs", "validation_episodes", "eval_freq", "checkpoint_freq", "threads"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        if self.vec_env not in ("dummy", "subproc"):
            raise ConfigError(f"vec_env must be 'dummy' or 'subproc', got {self.vec_env!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        ppo = PPOConfig(**data.pop("ppo", {}))
        traces = tuple(
            TraceWindows(**{**t, "exclude": tuple(tuple(x) for x in t.get("exclude", ()))})
            for t in data.pop("traces", ())
        )
        for key in ("jobs_range", "load_range"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(ppo=ppo, traces=traces, **data)


# ------------------------------------------------------------------------------------------ envs
def _training_generator(cfg: TrainConfig) -> Any:
    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.workload import make_generator

    cluster = ClusterSpec.preset(cfg.cluster)
    if cfg.workload == "mix":
        return MixtureGenerator(
            cluster=cluster,
            traces=cfg.traces,
            trace_fraction=cfg.trace_fraction,
            jobs_range=cfg.jobs_range,
            load_range=cfg.load_range,
        )
    gen = make_generator(cfg.workload)
    return _SeedRange(gen, TRAIN_SEEDS)


@dataclass(frozen=True)
class _SeedRange:
    """A generator whose seeds are folded into ``seeds`` (keeps a preset's training seeds apart)."""

    inner: Any
    seeds: tuple[int, int]

    def generate(self, seed: int) -> Any:
        lo, hi = self.seeds
        return self.inner.generate(lo + int(seed) % (hi - lo))


def make_env(cfg: TrainConfig, generator: Any, rank: int = 0) -> Any:
    """One monitored training env (module-level so SubprocVecEnv can pickle it)."""
    from stable_baselines3.common.monitor import Monitor

    from frenzy_env.env import FrenzyEnv

    env = FrenzyEnv(
        cluster=cfg.cluster, workload=generator, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots
    )
    env.reset(seed=cfg.seed * 1000 + rank)
    return Monitor(env, info_keywords=())


class CycleSeeds(gym.Wrapper):
    """Reset ignores the caller's seed and cycles through fixed ``seeds``; ``rewind()`` starts over."""

    def __init__(self, env: Any, seeds: list[int]) -> None:
        super().__init__(env)
        self.seeds, self.i = list(seeds), 0

    def rewind(self) -> None:
        self.i = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        s = self.seeds[self.i % len(self.seeds)]
        self.i += 1
        return self.env.reset(seed=s, options=options)


def make_validation_env(cfg: TrainConfig) -> Any:
    """Synthetic validation workloads (seeds 500, 501, ...), never used for training or test."""
    from stable_baselines3.common.monitor import Monitor

    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.workload import SyntheticGenerator

    cluster = ClusterSpec.preset(cfg.cluster)
    gen = SyntheticGenerator(num_jobs=cfg.validation_jobs, load=cfg.validation_load, cluster=cluster, name="validation")
    env = FrenzyEnv(cluster=cluster, workload=gen, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots)
    seeds = list(range(VALIDATION_SEEDS[0], VALIDATION_SEEDS[0] + cfg.validation_episodes))
    return CycleSeeds(Monitor(env), seeds)


# ------------------------------------------------------------------------------------------ callbacks
def _callbacks(cfg: TrainConfig, out: Path, eval_env: Any) -> list[Any]:
    from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback

    class RewindingEval(MaskableEvalCallback):
        """MaskableEvalCallback that replays the same validation workloads at every evaluation, and also
        evaluates before the first update (so a warm-started policy is a candidate for the best model)."""

        def _on_training_start(self) -> None:
            super()._on_training_start()
            self._on_step()  # n_calls is 0 here: evaluates

        def _on_step(self) -> bool:
            if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                self.eval_env.env_method("rewind")
            return super()._on_step()

    class Progress(BaseCallback):
        """tqdm progress bar; logs each finished episode's average JCT (hours) to TensorBoard."""

        def __init__(self, total: int, show: bool) -> None:
            super().__init__()
            self.total, self.show, self.bar = total, show, None
            self.last_jct = math.nan

        def _on_training_start(self) -> None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, disable=not self.show, unit="step", desc="train")

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", ()):
                m = info.get("metrics")
                if m:
                    self.last_jct = m["avg_jct"] / 3600.0
                    self.logger.record_mean("rollout/avg_jct_hours", self.last_jct)
                    self.logger.record_mean("rollout/gpu_hours", m["gpu_hours"])
            if self.bar is not None:
                self.bar.update(self.training_env.num_envs)
                if self.n_calls % 200 == 0:
                    self.bar.set_postfix_str(f"last avg JCT {self.last_jct:.2f} h")
            return True

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    per_env = lambda steps: max(1, steps // cfg.n_envs)  # noqa: E731  callbacks count vec steps
    eval_cb = RewindingEval(
        eval_env,
        n_eval_episodes=cfg.validation_episodes,
        eval_freq=per_env(cfg.eval_freq),
        best_model_save_path=str(out),
        log_path=str(out / "eval"),
        deterministic=True,
        verbose=cfg.verbose,
    )
    ckpt = CheckpointCallback(
        save_freq=per_env(cfg.checkpoint_freq), save_path=str(out / "checkpoints"), name_prefix="ppo"
    )
    return [Progress(cfg.timesteps, cfg.progress), eval_cb, ckpt]


# ------------------------------------------------------------------------------------------ warm start
class SrptTeacher:
    """Warm-start teacher: shortest estimated remaining time first, on its fastest legal plan with at most
    ``gpu_cap`` x the requested GPUs. It reads only what schedulers may know (``sim.work_estimate``, the
    requested GPU count, predicted iteration times), never the true work; it never resizes.
    """

    def __init__(self, env: Any, gpu_cap: float = 4.0) -> None:
        self.env = env.unwrapped
        self.gpu_cap = float(gpu_cap)

    def act(self, mask: np.ndarray) -> int:
        env = self.env
        sim = env.sim
        qv = env.visible_queue
        p = sim.num_plans
        if len(qv) == 0:
            return 0
        legal = mask[1 : 1 + len(qv) * p].reshape(len(qv), p)  # (k, P)
        if not legal.any():
            return 0
        rem = np.maximum(sim.work_estimate[qv] - sim.done_iters[qv], 0.0)
        times = rem[:, None] * sim.iter_time[qv]  # (k, P) predicted seconds
        best = np.where(sim.available_plans(qv), times, np.inf).min(axis=1)
        for k in np.argsort(best, kind="stable"):
            if not legal[k].any():
                continue
            want = (sim.jobs[int(qv[k])].requested_gpus or 1) * self.gpu_cap
            ok = legal[k] & (sim.plan_count <= want)
            if not ok.any():
                ok = legal[k]
            return 1 + int(k) * p + int(np.argmin(np.where(ok, times[k], np.inf)))
        return 0


def collect_teacher(cfg: TrainConfig, generator: Any) -> dict[str, Any]:
    """Play ``cfg.ppo.bc_episodes`` training episodes with :class:`SrptTeacher`.

    Returns observations (dict of (n, ...) arrays), masks (n, A), actions (n,), discounted returns (n,)
    (``cfg.ppo.gamma``, raw rewards) and the teacher's mean average JCT in hours.
    """
    from frenzy_env.env import FrenzyEnv

    p = cfg.ppo
    env = FrenzyEnv(
        cluster=cfg.cluster, workload=generator, queue_slots=cfg.queue_slots, running_slots=cfg.running_slots
    )
    teacher = SrptTeacher(env, p.bc_gpu_cap)
    obs_buf: dict[str, list[np.ndarray]] = {k: [] for k in env.observation_space.spaces}
    masks, actions, returns, jcts = [], [], [], []
    rng = np.random.default_rng(cfg.seed + 7)
    for _ in range(p.bc_episodes):
        obs, _ = env.reset(seed=int(rng.integers(2**31 - 1)))
        done, rewards = False, []
        while not done:
            mask = env.action_masks()
            a = teacher.act(mask)
            for k, v in obs.items():
                obs_buf[k].append(v)
            masks.append(mask)
            actions.append(a)
            obs, r, term, trunc, info = env.step(a)
            rewards.append(r)
            done = term or trunc
        g, ep_returns = 0.0, np.zeros(len(rewards))
        for t in range(len(rewards) - 1, -1, -1):
            g = rewards[t] + p.gamma * g
            ep_returns[t] = g
        returns.append(ep_returns)
        jcts.append(info["metrics"]["avg_jct"] / 3600.0)
    return {
        "obs": {k: np.stack(v) for k, v in obs_buf.items()},
        "masks": np.stack(masks),
        "actions": np.array(actions),
        "returns": np.concatenate(returns),
        "teacher_avg_jct_hours": float(np.mean(jcts)),
    }


def behaviour_clone(model: Any, cfg: TrainConfig, data: dict[str, Any], reward_scale: float, log: Any = print) -> dict:
    """Warm start: fit the actor to the teacher's actions (masked cross-entropy) and the critic to the
    teacher's discounted returns divided by ``reward_scale`` (mean squared error, weight ``vf_coef``).
    Returns the final imitation accuracy and sample count."""
    p = cfg.ppo
    n = len(data["actions"])
    obs_t = {k: th.as_tensor(v) for k, v in data["obs"].items()}
    mask_t = th.as_tensor(data["masks"])
    act_t = th.as_tensor(data["actions"])
    ret_t = th.as_tensor(data["returns"] / reward_scale, dtype=th.float32)
    policy = model.policy
    policy.set_training_mode(True)
    opt = th.optim.Adam(policy.parameters(), lr=p.bc_lr)
    gen = th.Generator().manual_seed(cfg.seed)
    acc = 0.0
    for epoch in range(p.bc_epochs):
        perm = th.randperm(n, generator=gen)
        correct, total_ce, total_vf = 0, 0.0, 0.0
        for i in range(0, n, p.batch_size):
            idx = perm[i : i + p.batch_size]
            feats = policy.extract_features({k: v[idx] for k, v in obs_t.items()})
            logits, latent_vf = policy.mlp_extractor(feats)
            logits = logits.masked_fill(~mask_t[idx], -1e8)
            ce = nn.functional.cross_entropy(logits, act_t[idx])
            vf = nn.functional.mse_loss(policy.value_net(latent_vf).squeeze(-1), ret_t[idx])
            loss = ce + p.vf_coef * vf
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            total_ce += float(ce.detach()) * len(idx)
            total_vf += float(vf.detach()) * len(idx)
            correct += int((logits.argmax(-1) == act_t[idx]).sum())
        acc = correct / n
        log(
            f"behaviour cloning epoch {epoch + 1}/{p.bc_epochs}: cross-entropy {total_ce / n:.3f}, "
            f"accuracy {acc:.3f}, value mse {total_vf / n:.3f}"
        )
    policy.set_training_mode(False)
    return {"bc_samples": n, "bc_accuracy": acc}


@functools.lru_cache(maxsize=1)
def _scale_reward_class() -> type:
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class ScaleReward(VecEnvWrapper):
        """VecEnv wrapper dividing rewards by a fixed ``scale``."""

        def __init__(self, venv: Any, scale: float) -> None:
            super().__init__(venv)
            self.scale = float(scale)

        def reset(self) -> Any:
            return self.venv.reset()

        def step_wait(self) -> Any:
            obs, rewards, dones, infos = self.venv.step_wait()
            return obs, rewards / self.scale, dones, infos

    return ScaleReward


def scale_reward(venv: Any, scale: float) -> Any:
    """``venv`` with rewards divided by the fixed ``scale`` (SB3 is imported lazily)."""
    return _scale_reward_class()(venv, scale)


# ------------------------------------------------------------------------------------------ train
def _quiet(*_: Any) -> None:
    """A logger that prints nothing (behaviour cloning without --verbose or progress)."""


def _has_tensorboard() -> bool:
    """TensorBoard logs need the ``tensorboard`` package; without it training runs and warns once."""
    import importlib.util
    import warnings

    if importlib.util.find_spec("tensorboard") is None:
        warnings.warn("tensorboard is not installed: no TensorBoard logs (pip install tensorboard)", stacklevel=3)
        return False
    return True


def train(cfg: TrainConfig) -> Path:
    """Train MaskablePPO as configured; returns the output folder.

    Writes ``config.json`` (the full configuration, before training starts), ``model.zip`` (final),
    ``best_model.zip`` (best on validation), ``checkpoints/``, ``eval/evaluations.npz`` (validation curve),
    ``tb/`` (TensorBoard) and ``train_log.json`` (wall time, timesteps).
    """
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    th.set_num_threads(cfg.threads)
    set_random_seed(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    gen = _training_generator(cfg)
    p = cfg.ppo
    t0 = time.time()
    info: dict[str, Any] = {}
    data = None
    if p.bc_episodes > 0:
        data = collect_teacher(cfg, gen)
        info["teacher_avg_jct_hours"] = data["teacher_avg_jct_hours"]
    fns = [lambda r=r: make_env(cfg, gen, r) for r in range(cfg.n_envs)]
    venv = SubprocVecEnv(fns) if cfg.vec_env == "subproc" and cfg.n_envs > 1 else DummyVecEnv(fns)
    eval_env = DummyVecEnv([lambda: make_validation_env(cfg)])
    if data is not None:  # a fixed reward scale: the std of the teacher's discounted returns
        reward_scale = float(max(np.std(data["returns"]), 1e-6))
        info["reward_scale"] = reward_scale
        venv = scale_reward(venv, reward_scale)
        eval_env = scale_reward(eval_env, 1.0)  # same wrapper type; validation reports raw returns
    elif p.normalize_reward:
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=p.gamma, clip_reward=100.0)
        eval_env = VecNormalize(eval_env, norm_obs=False, norm_reward=False, training=False)
    probe = make_env(cfg, gen)
    lr0, frac = p.learning_rate, p.lr_final_fraction
    model = MaskablePPO(
        SlotPlanPolicy,
        venv,
        learning_rate=lambda progress: lr0 * (frac + (1 - frac) * progress),
        n_steps=p.n_steps,
        batch_size=p.batch_size,
        n_epochs=p.n_epochs,
        gamma=p.gamma,
        gae_lambda=p.gae_lambda,
        clip_range=p.clip_range,
        ent_coef=p.ent_coef,
        vf_coef=p.vf_coef,
        max_grad_norm=p.max_grad_norm,
        target_kl=p.target_kl,
        policy_kwargs=policy_kwargs_for(probe, p),
        tensorboard_log=str(out / "tb") if _has_tensorboard() else None,
        seed=cfg.seed,
        device="cpu",
        verbose=cfg.verbose,
    )
    probe.close()
    if data is not None:
        log = print if cfg.verbose or cfg.progress else _quiet
        info.update(behaviour_clone(model, cfg, data, info["reward_scale"], log=log))
        info["bc_seconds"] = time.time() - t0
        model.save(out / "bc_model.zip")
        del data
    model.learn(cfg.timesteps, callback=_callbacks(cfg, out, eval_env), tb_log_name="ppo")
    wall = time.time() - t0
    model.save(out / "model.zip")
    (out / "train_log.json").write_text(
        json.dumps(
            {
                "wall_seconds": wall,
                "timesteps": int(model.num_timesteps),
                "torch_threads": th.get_num_threads(),
                **info,
            },
            indent=2,
        )
        + "\n"
    )
    venv.close()
    eval_env.close()
    return out


# ------------------------------------------------------------------------------------------ loading
def check_model_path(path: str | os.PathLike) -> Path:
    """The path as a :class:`Path` if it names an existing regular file; else a clear ConfigError."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"model file {str(p)!r} does not exist")
    if not p.is_file():
        raise ConfigError(f"model path {str(p)!r} is not a regular file (a model is a .zip file)")
    return p


class PPOPolicy:
    """A loaded MaskablePPO model with the stable-baselines3 ``predict`` signature, bound to an env.

    ``predict(obs, state=None, episode_start=None, deterministic=True, action_masks=None)``: when
    ``action_masks`` is None the bound env's ``action_masks()`` is used.
    """

    name = "ppo"
    oracle = False

    def __init__(self, model: Any, env: Any = None, path: Path | None = None) -> None:
        self.model = model
        self.env = env.unwrapped if env is not None else None
        self.path = path

    def reset(self) -> None:
        """Nothing to reset (the policy is memoryless)."""

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
        return self.model.predict(
            observation,
            state=state,
            episode_start=episode_start,
            deterministic=deterministic,
            action_masks=action_masks,
        )


def load_policy(env: Any = None, path: str | os.PathLike | None = None) -> PPOPolicy:
    """Load a trained MaskablePPO model (default: the shipped :data:`DEFAULT_MODEL_PATH`) for ``env``.

    Security: the file is unpickled (stable-baselines3 stores objects with cloudpickle), which can run
    arbitrary code: load only files you trust. ``path`` must be an existing regular file (a directory, a
    missing path or a non-file raises :class:`~frenzy_env.errors.ConfigError` naming it); exactly that file
    is read. If ``env`` is given, its observation and action spaces must match the model's.
    Sets ``torch.set_num_threads(1)``: the policy sees one observation at a time, where more threads are
    slower.
    """
    from sb3_contrib import MaskablePPO

    p = check_model_path(DEFAULT_MODEL_PATH if path is None else path)
    th.set_num_threads(1)  # one observation per call: extra threads only add synchronisation
    custom = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    with open(p, "rb") as fh:
        try:
            model = MaskablePPO.load(fh, device="cpu", custom_objects=custom)
        except Exception as exc:  # a zip that is not an SB3 model, or a corrupt file
            raise ConfigError(f"cannot load model file {str(p)!r}: {exc}") from None
    if env is not None:
        base = env.unwrapped
        if model.action_space.n != base.action_space.n or any(
            model.observation_space[k].shape != base.observation_space[k].shape for k in base.observation_space.spaces
        ):
            raise ConfigError(
                f"model {str(p)!r} was trained for action space {model.action_space} and observation shapes "
                f"{ {k: s.shape for k, s in model.observation_space.spaces.items()} }; this env has "
                f"{base.action_space} (cluster {base.cluster.name!r}, queue_slots={base.queue_slots}, "
                f"running_slots={base.running_slots})"
            )
    return PPOPolicy(model, env, p)


def make_ppo_policy(env: Any, model: str | os.PathLike | None = None) -> PPOPolicy:
    """Factory in the shape of ``baselines.make_policy``: ``make_ppo_policy(env, model=PATH)``."""
    return load_policy(env, model)


__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_MODEL_PATH",
    "MixtureGenerator",
    "PPOConfig",
    "PPOPolicy",
    "SlotPlanHead",
    "SlotPlanPolicy",
    "SlotSetExtractor",
    "TraceWindows",
    "TrainConfig",
    "check_model_path",
    "load_policy",
    "make_ppo_policy",
    "policy_kwargs_for",
    "train",
]
