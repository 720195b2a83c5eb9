"""The MaskablePPO policy network: a set encoder over the env's queue and running slots and per-(slot, plan) heads.

The observation holds Q queue slots and R running slots, each a row of job features followed by the job's
predicted run time on each of the P plan slots. The policy treats the slots as *sets*:

1. :class:`SlotSetExtractor`: one shared MLP embeds every queue row, another every running row (the same
   weights for every slot, so the embeddings are permutation-equivariant); masked mean and max pooling over
   the present slots plus the GPU, node and global features give a context vector that does not depend on
   slot order.
   The network reads either layout of the env (``SimConfig.interface``, docs/environment.md): "cluster" (the
   cluster's own plan slots; ``gpus`` per type then ``nodes`` join the context) or "universal" (the fixed grid of
   4 type slots x 7 GPU counts on every cluster; the ``gpus`` rows of :data:`~frenzy_env.observation.GPU_FEATURES`
   join the context, each plan's ``plans`` row of :data:`~frenzy_env.observation.PLAN_FEATURES` its key, and a
   running job's GPU type is the type slot whose speed and memory it holds). Under "universal" nothing in the
   network depends on the cluster: a model trained on one plays on every cluster of at most 4 GPU types.
2. :class:`SlotPlanHead`: a logit for every action in the env's own layout ``1 + W + Q*P + R*P``: the waits from
   the context; "start queue slot k on plan p" from a small MLP over (slot embedding k, a learned embedding
   of plan p, pair features: predicted time of k on p, availability, time above the job's best plan, free
   share of p's GPU type, p's GPU count, and the context); resize logits likewise from the running slots.
   The same weights score every (slot, plan) pair, so the policy is equivariant to slot order and learns
   "which job, on how many GPUs of which type" from the per-plan time features rather than 865 separate
   output units. The value is an MLP of the context.
3. Options of new models (old models load unchanged, without them): ``critic_pool`` gives the critic its own
   context over *sum* pooling and slot counts as well (the load: a mean or max cannot tell 3 queued jobs from
   60); ``factored`` adds four action-type logits and makes the action distribution the factored masked one
   of :mod:`agents.ppo.distribution` (with ``type_floor``, every legal action type keeps a minimum
   probability); ``type_demand`` computes, per GPU type, who is waiting for it and who holds it while it
   could run elsewhere (:meth:`SlotSetExtractor.type_demand_features`), and feeds it to the contexts, the
   plan keys and a fifth pair feature (moving a running job off a type that queued jobs can only use),
   through modules of their own (names with ``_demand``) whose weights start at 0: a model without the
   option loads into one with it (:func:`load_growing`) and computes exactly what it did until they learn.

Masks come from the env (``action_masks()``); MaskablePPO puts -inf on illegal logits.
:class:`SlotPlanPolicy` is the stable-baselines3 policy class that assembles both; :func:`policy_kwargs_for`
gives its keyword arguments for an env. Saved models refer to it as ``agents.ppo.SlotPlanPolicy``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from agents.ppo.config import PPOConfig
from agents.ppo.distribution import NUM_TYPES, action_types, entropy, factored_distribution, factored_log_probs
from frenzy_env.errors import ConfigError
from frenzy_env.observation import GPU_FEATURES, GT, PLAN_FEATURES, QUEUE_FEATURES, RU, RUNNING_FEATURES

#: the observation columns type_demand reads: a queued job's wait, a running job's GPU type
_WAIT_COL, _TYPE_COL = QUEUE_FEATURES.index("wait"), RUNNING_FEATURES.index("gpu_type")


def grid_plans(plan_grid: tuple[int, int]) -> tuple[list[int], list[int]]:
    """``(plan_type, plan_count)`` of every slot of a universal plan grid ``(type slots, count levels)``: slot
    ``t * levels + k`` is type slot t with ``2**k`` GPUs (:data:`frenzy_env.observation.UNIVERSAL_PLANS`), the
    same on every cluster (a slot the cluster lacks is masked, and its ``plans`` row says so)."""
    types, levels = plan_grid
    return [s // levels for s in range(types * levels)], [2 ** (s % levels) for s in range(types * levels)]


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


def _zero(layer: nn.Linear) -> nn.Linear:
    """``layer`` with its weights (and bias) at 0."""
    nn.init.zeros_(layer.weight)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


def _mlp_plus(mlp: nn.Sequential, x: th.Tensor, extra: th.Tensor) -> th.Tensor:
    """An :func:`_mlp` applied to ``x`` with ``extra`` added to its first layer's pre-activation."""
    h = mlp[1](mlp[0](x) + extra)
    return mlp[2:](h) if len(mlp) > 2 else h


def _packed(f: nn.Module, x: th.Tensor, present: th.Tensor, width: int) -> th.Tensor:
    """``f`` applied to the present rows of ``x`` (B, S, F) only -> (B, S, width), zeros elsewhere (most
    slots are empty: this is several times cheaper than embedding all of them, with the same result)."""
    idx = present.nonzero(as_tuple=True)
    out = x.new_zeros(x.shape[0], x.shape[1], width)
    out[idx] = f(x[idx])
    return out


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
    plan_type : (P,) GPU-type index of each plan slot (``sim.plan_type``; universal layout: the grid's type
        slot, :func:`grid_plans`).
    plan_count : (P,) GPU count of each plan slot (``sim.plan_count``; universal layout: the grid's count).
    num_waits : the env's timed waits (``len(env.wait_options)``; their logits come from the context).
    embed_dim : slot embedding width d.
    context_dim : width of the pooled context vector.

    The flat output is ``[context (C) | queue embeddings (Q*d) | running embeddings (R*d) | queue plan
    times (Q*P) | running plan times (R*P) | queue best time (Q) | running remaining time (R) | free share
    per plan (P) | queue present (Q) | running present (R) | plan rows (P*5, universal layout) | critic context
    (C, with critic_pool) | type_demand's pieces]``; :meth:`split` returns the pieces with their shapes.

    The layout is the observation space's: with a ``plans`` entry it is the universal one (context from ``gpus``
    as (4, 9) rows and ``globals``; no ``nodes``), else the cluster's (``gpus`` as 2T, ``nodes``, ``globals``).
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        queue_slots: int,
        running_slots: int,
        plan_type: list[int],
        plan_count: list[int],
        num_waits: int = 0,
        embed_dim: int = 64,
        context_dim: int = 128,
        critic_pool: bool = False,
        type_demand: bool = False,
    ) -> None:
        q, r, p = int(queue_slots), int(running_slots), len(plan_type)
        self.num_waits = int(num_waits)
        qf = observation_space["queue"].shape[0] // q
        rf = observation_space["running"].shape[0] // r
        if qf * q != observation_space["queue"].shape[0] or qf <= p:
            raise ConfigError(
                f"queue observation of size {observation_space['queue'].shape[0]} does not match "
                f"queue_slots={q} and {p} plans"
            )
        universal = "plans" in observation_space.spaces
        n_glob = observation_space["globals"].shape[0]
        if universal:  # gpus: one row of GPU_FEATURES per type slot; plans: one row of PLAN_FEATURES per plan slot
            n_types = observation_space["gpus"].shape[0] // len(GPU_FEATURES)
            if observation_space["plans"].shape[0] != p * len(PLAN_FEATURES):
                raise ConfigError(
                    f"plans observation of size {observation_space['plans'].shape[0]} does not match {p} plans of "
                    f"{len(PLAN_FEATURES)} features"
                )
            n_env = observation_space["gpus"].shape[0] + n_glob
        else:
            n_types = observation_space["gpus"].shape[0] // 2
            n_env = 2 * n_types + observation_space["nodes"].shape[0] + n_glob
        if max(plan_type) >= n_types:
            raise ConfigError(f"plan_type names GPU type {max(plan_type)}; the observation has {n_types} types")
        d, c = int(embed_dim), int(context_dim)
        self.universal = universal
        self.critic_pool = bool(critic_pool)
        self.type_demand = bool(type_demand)
        n_dem = DEMAND_FEATURES * n_types if self.type_demand else 0
        features_dim = (c + q * d + r * d + q * p + r * p + 2 * (q + r) + p + (c if self.critic_pool else 0)
                        + (p + q * p + r * p if self.type_demand else 0)
                        + (p * len(PLAN_FEATURES) if universal else 0))
        super().__init__(observation_space, features_dim)
        self.q, self.r, self.p, self.d, self.c = q, r, p, d, c
        self.qf, self.rf, self.n_types = qf, rf, n_types
        self.register_buffer("plan_type", th.as_tensor(plan_type, dtype=th.long), persistent=False)
        self.register_buffer(
            "plan_count_feat", th.log2(th.as_tensor(plan_count, dtype=th.float32) + 1.0) / 6.0, persistent=False
        )
        self.queue_encoder = _mlp([qf, d, d])
        self.running_encoder = _mlp([rf, d, d])
        if self.type_demand:
            onehot = th.zeros(p, n_types)
            onehot[th.arange(p), th.as_tensor(plan_type, dtype=th.long)] = 1.0
            self.register_buffer("plan_onehot", onehot, persistent=False)
        ctx_in = 4 * d + n_env
        self.context = _mlp([ctx_in, c, c])
        if self.critic_pool:  # the critic's own context: pools, sums, counts and the global aggregates
            self.critic_context = _mlp([ctx_in + 2 * d + 2, c, c])
        if self.type_demand:  # added to the first layers' pre-activations; zero until they learn
            self.context_demand = _zero(nn.Linear(n_dem, c, bias=False))
            if self.critic_pool:
                self.critic_demand = _zero(nn.Linear(n_dem, c, bias=False))

    def encode(self, obs: dict[str, th.Tensor]) -> dict[str, th.Tensor]:
        """Named pieces: context (B, C), queue_emb (B, Q, d), running_emb (B, R, d), queue_times (B, Q, P),
        running_times (B, R, P), queue_best (B, Q), running_rem (B, R), plan_free (B, P)."""
        b = obs["queue"].shape[0]
        queue = obs["queue"].reshape(b, self.q, self.qf)
        running = obs["running"].reshape(b, self.r, self.rf)
        nf_q, nf_r = self.qf - self.p, self.rf - self.p
        q_present = queue[:, :, 0]
        r_present = running[:, :, 0]
        q_emb = _packed(self.queue_encoder, queue, q_present > 0, self.d)
        r_emb = _packed(self.running_encoder, running, r_present > 0, self.d)
        env_in = [obs["gpus"], obs["globals"]] if self.universal else [obs["gpus"], obs["nodes"], obs["globals"]]
        ctx_in = th.cat([_masked_pool(q_emb, q_present), _masked_pool(r_emb, r_present), *env_in], dim=-1)
        gpus = obs["gpus"].reshape(b, self.n_types, len(GPU_FEATURES)) if self.universal else None
        if self.type_demand:
            demand, plan_demand, q_extra, r_extra = self.type_demand_features(queue, running, gpus)
            ctx = _mlp_plus(self.context, ctx_in, self.context_demand(demand))
        else:
            ctx = self.context(ctx_in)
        free_by_type = gpus[:, :, GT.free] if self.universal else obs["gpus"][:, : self.n_types]  # (B, T)
        out = {
            "context": ctx,
            "queue_emb": q_emb,
            "running_emb": r_emb,
            "queue_times": queue[:, :, nf_q:],
            "running_times": running[:, :, nf_r:],
            "queue_best": queue[:, :, 2],
            "running_rem": running[:, :, 2],
            "plan_free": free_by_type[:, self.plan_type],
            "queue_present": q_present,
            "running_present": r_present,
        }
        if self.universal:
            out["plan_rows"] = obs["plans"].reshape(b, self.p, len(PLAN_FEATURES))
        if self.critic_pool:
            load = th.cat(
                [
                    q_emb.sum(1) / self.q,
                    r_emb.sum(1) / self.r,
                    q_present.sum(1, keepdim=True) / self.q,
                    r_present.sum(1, keepdim=True) / self.r,
                ],
                dim=-1,
            )
            critic_in = th.cat([ctx_in, load], dim=-1)
            out["critic"] = (
                _mlp_plus(self.critic_context, critic_in, self.critic_demand(demand)) if self.type_demand
                else self.critic_context(critic_in)
            )
        if self.type_demand:
            out.update(plan_demand=plan_demand, queue_extra=q_extra, running_extra=r_extra)
        return out

    def type_demand_features(
        self, queue: th.Tensor, running: th.Tensor, gpus: th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor]:
        """Who waits for each GPU type and who holds it while it could run elsewhere, from the slot rows.

        A queued job can use type t when one of its plans of type t is available (predicted time > 0); it is
        *bound* to t when t is the only such type. Per type (T of each, concatenated, ``DEMAND_FEATURES * T``):
        the longest wait (the row's log-time ``wait``) of the queued jobs that can use it; the longest wait of
        those bound to it; the jobs bound to it / 8; the running jobs on it that have an available plan of
        another type / 8. Returns ``(demand (B, 4T), plan_demand (B, P): the bound wait of each plan's type,
        queue_extra (B, Q, P), running_extra (B, R, P))``: the fifth pair feature. For a queued job that can
        use two or more types, the bound wait of plan p's type (taking a type others can only use); 0 for a
        bound job. For a running job, the bound wait of its own type minus that of plan p's type on plans of
        another type (vacating a type others wait for); 0 on plans of its own type. Both 0 on unavailable
        plans. Empty slots give 0 everywhere (their rows are 0). A running job's type is its row's type index
        (cluster layout) or, universal layout (``gpus`` (B, T, 9) given), :meth:`held_type_slot`.
        """
        nf_q, nf_r, t = self.qf - self.p, self.rf - self.p, self.n_types
        q_avail = (queue[:, :, nf_q:] > 0).float()  # (B, Q, P)
        q_types = (q_avail @ self.plan_onehot) > 0  # (B, Q, T)
        n_types = q_types.sum(-1, keepdim=True)  # (B, Q, 1)
        bound = q_types & (n_types == 1)
        wait = queue[:, :, _WAIT_COL : _WAIT_COL + 1] * queue[:, :, 0:1]  # (B, Q, 1), 0 on empty slots
        can_wait = (q_types.float() * wait).amax(1)  # (B, T)
        bound_wait = (bound.float() * wait).amax(1)
        bound_n = bound.float().sum(1) / 8.0
        r_avail = (running[:, :, nf_r:] > 0).float()  # (B, R, P)
        r_types = (r_avail @ self.plan_onehot) > 0  # (B, R, T)
        if self.universal:
            cur = self.held_type_slot(running, gpus)
        else:
            cur = th.round(running[:, :, _TYPE_COL] * max(t - 1, 1)).long().clamp(0, t - 1)  # (B, R)
        cur_onehot = th.nn.functional.one_hot(cur, t).float() * running[:, :, 0:1]  # (B, R, T)
        flexible = ((r_types.float() * (1.0 - cur_onehot)).sum(-1, keepdim=True) > 0).float()
        flex_n = (cur_onehot * flexible).sum(1) / 8.0  # (B, T)
        demand = th.cat([can_wait, bound_wait, bound_n, flex_n], dim=-1)
        plan_demand = bound_wait @ self.plan_onehot.T  # (B, P)
        q_extra = plan_demand[:, None, :] * (n_types > 1).float() * q_avail
        own = (cur_onehot * bound_wait[:, None, :]).sum(-1, keepdim=True)  # (B, R, 1)
        other_type = 1.0 - cur_onehot @ self.plan_onehot.T  # (B, R, P): 1 on plans of another type
        r_extra = (own - plan_demand[:, None, :]) * other_type * r_avail
        return demand, plan_demand, q_extra, r_extra

    @staticmethod
    def held_type_slot(running: th.Tensor, gpus: th.Tensor) -> th.Tensor:
        """(B, R) the type slot each running row (B, R, 8 + P) of the universal layout holds: the present type
        slot of ``gpus`` (B, T, 9) whose peak speed and memory are nearest the row's (a cluster's types differ in
        one or both: the catalogue has no two parts alike); any slot on an empty row."""
        cols = [RU.gpu_speed, RU.gpu_memory]
        held = running[:, :, None, cols]  # (B, R, 1, 2)
        types = gpus[:, None, :, [GT.gpu_speed, GT.gpu_memory]]  # (B, 1, T, 2)
        dist = (held - types).abs().sum(-1) + 1e3 * (1.0 - gpus[:, None, :, GT.present])  # absent slots: far
        return dist.argmin(-1)

    @property
    def pieces(self) -> tuple[str, ...]:
        """The names of the flat output's pieces, in order."""
        return (_PIECES + (("plan_rows",) if self.universal else ()) + (("critic",) if self.critic_pool else ())
                + (_DEMAND_PIECES if self.type_demand else ()))

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        e = self.encode(obs)
        b = e["context"].shape[0]
        return th.cat([e[k].reshape(b, -1) for k in self.pieces], dim=-1)

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
            "queue_present": (q,),
            "running_present": (r,),
            "plan_rows": (p, len(PLAN_FEATURES)),
            "critic": (self.c,),
            "plan_demand": (p,),
            "queue_extra": (q, p),
            "running_extra": (r, p),
        }
        out, i = {}, 0
        for k in self.pieces:
            n = math.prod(shapes[k])
            out[k] = features[:, i : i + n].reshape(b, *shapes[k])
            i += n
        return out


DEMAND_FEATURES = 4  # per GPU type: see SlotSetExtractor.type_demand_features
_DEMAND_PIECES = ("plan_demand", "queue_extra", "running_extra")
_PIECES = (
    "context",
    "queue_emb",
    "running_emb",
    "queue_times",
    "running_times",
    "queue_best",
    "running_rem",
    "plan_free",
    "queue_present",
    "running_present",
)


class _PairScorer(nn.Module):
    """Factorised (slot, plan) scores, cheap enough for CPU training: for slot s and plan p,

    ``score = sum_k a_k(s) f_k(s, p) + q(s) . k(p)``

    where ``f(s, p)`` are the pair features (predicted time on p, availability, time above the slot's
    reference, its square), ``a(s)`` and the query ``q(s)`` come from the slot embedding and the context, and
    the key ``k(p)`` from a learned plan embedding, the free share of p's GPU type, p's GPU count (and, universal
    layout, p's ``plans`` row: ``plan_in`` = 2 + 5 features) and the context. Only (B, S, P) tensors are formed,
    never (B, S, P, hidden).
    """

    N_PAIR = 4

    def __init__(
        self, embed_dim: int, context_dim: int, num_plans: int, plan_dim: int, hidden: int, demand: bool = False,
        plan_in: int = 2,
    ) -> None:
        super().__init__()
        self.plan_emb = nn.Parameter(th.randn(num_plans, plan_dim) * 0.1)
        self.slot_in = nn.Linear(embed_dim, hidden)
        self.slot_ctx = nn.Linear(context_dim, hidden, bias=False)
        self.coef = nn.Linear(hidden, self.N_PAIR)
        self.query = nn.Linear(hidden, hidden)
        self.key_in = nn.Linear(plan_dim + plan_in, hidden)
        if demand:  # the fifth pair feature's coefficient and the plan's demand in its key; zero until learnt
            self.coef_demand = _zero(nn.Linear(hidden, 1))
            self.key_demand = _zero(nn.Linear(1, hidden, bias=False))
        self.key_ctx = nn.Linear(context_dim, hidden, bias=False)
        self.key_out = nn.Linear(hidden, hidden)
        self.scale = 1.0 / math.sqrt(hidden)

    def forward(
        self, emb: th.Tensor, times: th.Tensor, ref: th.Tensor, plan_in: th.Tensor, ctx: th.Tensor,
        present: th.Tensor, extra: th.Tensor | None = None, plan_demand: th.Tensor | None = None,
    ) -> th.Tensor:
        # emb (B, S, d), times (B, S, P), ref (B, S), plan_in (B, P, 2 or 7), ctx (B, C), present (B, S),
        # extra (B, S, P): the fifth pair feature and plan_demand (B, P) (type_demand) -> (B, S, P);
        # only present slots are scored (the others' actions are illegal: 0 there)
        b, p = plan_in.shape[:2]
        bi, si = (present > 0).nonzero(as_tuple=True)
        h = th.relu(self.slot_in(emb[bi, si]) + self.slot_ctx(ctx)[bi])  # (n, H)
        lin = (SlotPlanHead.pair(times[bi, si], ref[bi, si]) * self.coef(h)[:, None, :]).sum(-1)  # (n, P)
        k_in = th.cat([self.plan_emb.expand(b, p, -1), plan_in], dim=-1)  # (B, P, plan_dim + plan_in)
        k_pre = self.key_in(k_in) + self.key_ctx(ctx)[:, None, :]
        if extra is not None:
            lin = lin + extra[bi, si] * self.coef_demand(h)
            k_pre = k_pre + self.key_demand(plan_demand.unsqueeze(-1))
        keys = self.key_out(th.relu(k_pre))  # (B, P, H)
        # query . key of every (slot, plan) as one batched matrix product over the slots (empty slots' queries are
        # 0): a BLAS call instead of an (n, P, H) product and gather, several times cheaper in training's updates
        # over the slots up to the last one present in any row only (slots fill from the first: the rest are empty)
        s_used = int(si.max()) + 1 if si.numel() else 0
        query = emb.new_zeros(emb.shape[0], s_used, h.shape[1])
        query[bi, si] = self.query(h)
        out = th.bmm(query, keys.transpose(1, 2)) * self.scale  # (B, s_used, P), 0 on empty slots
        if s_used < emb.shape[1]:
            out = th.cat([out, out.new_zeros(emb.shape[0], emb.shape[1] - s_used, p)], dim=1)
        return out.index_put((bi, si), lin, accumulate=True)


class SlotPlanHead(nn.Module):
    """Actor logits in the env's action layout and the critic latent (the "mlp_extractor" of SB3).

    ``forward_actor(features)`` -> (B, 1 + W + Q*P + R*P) logits ("wait" and the W timed waits from the
    context, then the starts and resizes), followed with ``factored`` by the 4 action-type logits;
    ``forward_critic(features)`` -> (B, H), from the critic's own context when the extractor has one.
    """

    def __init__(
        self,
        extractor: SlotSetExtractor,
        pair_hidden: int = 64,
        plan_dim: int = 16,
        value_hidden: int = 128,
        factored: bool = False,
    ) -> None:
        super().__init__()
        self.critic_key = "critic" if extractor.critic_pool else "context"
        self.factored = bool(factored)
        self._split = extractor.split  # a bound method, not a submodule (no duplicate parameters)
        self.register_buffer("count_feat", extractor.plan_count_feat.clone(), persistent=False)
        c, d, p = extractor.c, extractor.d, extractor.p
        self.demand = extractor.type_demand
        plan_in = 2 + (len(PLAN_FEATURES) if extractor.universal else 0)  # the universal layout's plans rows too
        self.queue_scorer = _PairScorer(d, c, p, plan_dim, pair_hidden, self.demand, plan_in)
        self.running_scorer = _PairScorer(d, c, p, plan_dim, pair_hidden, self.demand, plan_in)
        self.wait = nn.Linear(c, 1 + extractor.num_waits)
        self.value = _mlp([c, value_hidden, value_hidden])
        self.latent_dim_pi = 1 + extractor.num_waits + extractor.q * p + extractor.r * p
        self.latent_dim_vf = value_hidden
        if self.factored:
            self.type_head = nn.Linear(c, NUM_TYPES)

    @staticmethod
    def pair(times: th.Tensor, ref: th.Tensor) -> th.Tensor:
        """Pair features (..., P, 4) of plan times (..., P) and the slot's reference time (...)."""
        avail = (times > 0).float()  # (..., P)
        above = (times - ref.unsqueeze(-1)) * avail * 4.0
        return th.stack([times, avail, above, above * above], dim=-1)

    def actor(self, e: dict[str, th.Tensor]) -> th.Tensor:
        """Actor logits from the extractor's named pieces (:meth:`SlotSetExtractor.encode`)."""
        ctx = e["context"]
        b = ctx.shape[0]
        plan_in = th.stack([e["plan_free"], self.count_feat.expand(b, -1)], dim=-1)  # (B, P, 2)
        if "plan_rows" in e:  # universal layout: each plan slot's PLAN_FEATURES row (B, P, 5)
            plan_in = th.cat([plan_in, e["plan_rows"]], dim=-1)
        q_logits = self.queue_scorer(
            e["queue_emb"], e["queue_times"], e["queue_best"], plan_in, ctx, e["queue_present"],
            e.get("queue_extra"), e.get("plan_demand"),
        )
        r_logits = self.running_scorer(
            e["running_emb"], e["running_times"], e["running_rem"], plan_in, ctx, e["running_present"],
            e.get("running_extra"), e.get("plan_demand"),
        )
        parts = [self.wait(ctx), q_logits.reshape(b, -1), r_logits.reshape(b, -1)]
        if self.factored:
            parts.append(self.type_head(ctx))
        return th.cat(parts, dim=-1)

    def critic(self, e: dict[str, th.Tensor]) -> th.Tensor:
        """Critic latent from the extractor's named pieces."""
        return self.value(e[self.critic_key])

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self.actor(self._split(features))

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.critic(self._split(features))

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


class SlotPlanPolicy(MaskableActorCriticPolicy):
    """MaskableActorCriticPolicy with :class:`SlotSetExtractor` and the per-(slot, plan) :class:`SlotPlanHead`.

    Extra keyword arguments: ``pair_hidden`` (width of the pair MLP), ``plan_dim`` (plan embedding width),
    ``value_hidden`` (critic width), ``resize_bias`` (initial logit offset of resize actions; negative makes
    the untrained policy rarely resize, as restarts cost time), ``factored`` (the factored masked
    distribution of :mod:`agents.ppo.distribution`) and ``type_floor`` (its minimum share per legal type),
    ``guide`` (None, or the name of a planner in :data:`agents.ppo.guide.GUIDES` whose next step is an input:
    :meth:`guided` adds the learnt ``guide_bonus`` (2,) to that action's logit and to its type's logit, so
    the policy starts by carrying the plan out and learns where to deviate) and ``guide_bonus`` (its initial
    value); ``guide_gate`` (None: the bonus) makes a guided policy the mixture of :meth:`gated` instead, its
    gate starting at that deviation probability.
    With ``factored``, :meth:`action_log_probs` gives the normalised log-probabilities and every SB3 entry
    point (``predict``, ``forward``, ``evaluate_actions``, ``get_distribution``) uses them.
    """

    def __init__(
        self,
        *args: Any,
        pair_hidden: int = 64,
        plan_dim: int = 16,
        value_hidden: int = 128,
        resize_bias: float = -2.0,
        factored: bool = False,
        type_floor: float = 0.0,
        guide: str | None = None,
        guide_bonus: float = 8.0,
        guide_gate: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.pair_hidden, self.plan_dim, self.value_hidden = pair_hidden, plan_dim, value_hidden
        self.resize_bias = resize_bias
        self.factored, self.type_floor = bool(factored), float(type_floor)
        self.guide, self.guide_bonus_init = guide, float(guide_bonus)
        self.guide_gate = None if guide_gate is None else float(guide_gate)
        kwargs.setdefault("features_extractor_class", SlotSetExtractor)
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = SlotPlanHead(
            self.features_extractor,
            pair_hidden=self.pair_hidden,
            plan_dim=self.plan_dim,
            value_hidden=self.value_hidden,
            factored=self.factored,
        )
        fe = self.features_extractor
        first_start = 1 + fe.num_waits
        self.register_buffer(
            "action_type",
            action_types(self.action_space.n, first_start, first_start + fe.q * fe.p),
            persistent=False,
        )

    def _build(self, lr_schedule: Any) -> None:
        self._build_mlp_extractor()
        if self.guide is not None and self.guide_gate is None:  # (action bonus, type bonus) of the next step
            self.guide_bonus = nn.Parameter(th.full((2,), self.guide_bonus_init))
        elif self.guide is not None:  # deviation logit per hinted action type, from the context
            self.gate = nn.Linear(self.features_extractor.c, NUM_TYPES)
            nn.init.zeros_(self.gate.weight)  # every state starts at guide_gate
            nn.init.constant_(self.gate.bias, math.log(self.guide_gate / (1.0 - self.guide_gate)))
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
            if self.factored:  # every type equally likely at first
                nn.init.orthogonal_(head.type_head.weight, gain=0.01)
                nn.init.zeros_(head.type_head.bias)
            nn.init.constant_(head.running_scorer.coef.bias[1], self.resize_bias)  # x availability (1 if legal)
            for name, module in self.named_modules():  # type_demand's modules start at 0 (see the module doc)
                if name.endswith("_demand"):
                    _zero(module)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            pair_hidden=self.pair_hidden,
            plan_dim=self.plan_dim,
            value_hidden=self.value_hidden,
            resize_bias=self.resize_bias,
            factored=self.factored,
            type_floor=self.type_floor,
            guide=self.guide,
            guide_bonus=self.guide_bonus_init,
            guide_gate=self.guide_gate,
        )
        return data

    def guided(self, latent_pi: th.Tensor, hint: th.Tensor | None) -> th.Tensor:
        """The actor latent with the guide's bonus: ``guide_bonus[0]`` added to the logit of each row's hinted
        action ``hint`` (B,) and, when factored, ``guide_bonus[1]`` to the logit of its type. Unchanged
        without a guide or a hint."""
        if self.guide is None or hint is None or self.guide_gate is not None:
            return latent_pi
        hint = th.as_tensor(hint, dtype=th.long, device=latent_pi.device).reshape(-1)
        rows = th.arange(len(hint), device=latent_pi.device)
        out = latent_pi.index_put((rows, hint), self.guide_bonus[0].expand(len(hint)), accumulate=True)
        if self.factored:  # the type logits follow the action logits
            cols = self.action_space.n + self.action_type[hint]
            out = out.index_put((rows, cols), self.guide_bonus[1].expand(len(hint)), accumulate=True)
        return out

    def gated(
        self, logp: th.Tensor, type_logp: th.Tensor | None, context: th.Tensor, hint: Any
    ) -> tuple[th.Tensor, th.Tensor | None, th.Tensor]:
        """The gated mixture of a ``guide_gate`` policy: ``pi(a) = (1 - d) [a = hint] + d q(a)``, ``q`` the
        network's own (unguided, masked) distribution ``logp`` (B, A) and ``d = sigmoid(gate(context))`` taken
        at the hinted action's type, so the policy learns, per state and kind of step (wait, start, resize),
        how often to leave the plan, and ``q`` learns what to do instead. Returns ``(logp, type_logp,
        entropy)`` of the mixture, normalised (``type_logp`` None when ``type_logp`` is)."""
        hint = th.as_tensor(hint, dtype=th.long, device=logp.device).reshape(-1, 1)
        d_logit = self.gate(context).gather(1, self.action_type[hint])  # (B, 1)
        log_d, log_keep = nn.functional.logsigmoid(d_logit), nn.functional.logsigmoid(-d_logit)
        mix = logp + log_d
        mix = mix.scatter(1, hint, th.logaddexp(mix.gather(1, hint), log_keep))
        if type_logp is not None:
            t = self.action_type[hint]
            type_mix = type_logp + log_d
            type_logp = type_mix.scatter(1, t, th.logaddexp(type_mix.gather(1, t), log_keep))
        return mix, type_logp, entropy(mix)  # illegal entries stay near ILLEGAL_LOGP: they add 0

    # ------------------------------------------------------------------ the factored distribution
    def action_log_probs(self, latent_pi: th.Tensor, action_masks: Any) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """``(logp (B, A), type_logp (B, 4), entropy (B,))`` of the factored distribution for the actor latent
        ``latent_pi`` (per-action logits then type logits) and the masks (None: every action legal)."""
        n = self.action_space.n
        logits, type_logits = latent_pi[:, :n], latent_pi[:, n:]
        if action_masks is None:
            mask = th.ones_like(logits, dtype=th.bool)
        else:
            mask = th.as_tensor(action_masks, device=logits.device).reshape(logits.shape).bool()
        return factored_log_probs(logits, type_logits, mask, self.action_type, self.type_floor)

    def _distribution(self, latent_pi: th.Tensor, action_masks: Any) -> Any:
        if not self.factored:
            dist = self._get_action_dist_from_latent(latent_pi)
            if action_masks is not None:
                dist.apply_masking(action_masks)
            return dist
        logp, type_logp, _ = self.action_log_probs(latent_pi, action_masks)
        return factored_distribution(logp, type_logp, self.action_type)

    def forward(self, obs: Any, deterministic: bool = False, action_masks: Any = None) -> Any:
        features = self.extract_features(obs)
        latent_pi, latent_vf = self.mlp_extractor(features)
        values = self.value_net(latent_vf)
        dist = self._distribution(latent_pi, action_masks)
        actions = dist.get_actions(deterministic=deterministic)
        return actions, values, dist.log_prob(actions)

    def evaluate_actions(self, obs: Any, actions: th.Tensor, action_masks: Any = None) -> Any:
        features = self.extract_features(obs)
        latent_pi, latent_vf = self.mlp_extractor(features)
        dist = self._distribution(latent_pi, action_masks)
        return self.value_net(latent_vf), dist.log_prob(actions), dist.entropy()

    def get_distribution(self, obs: Any, action_masks: Any = None) -> Any:
        features = self.extract_features(obs)
        return self._distribution(self.mlp_extractor.forward_actor(features), action_masks)


def policy_kwargs_for(env: Any, ppo: PPOConfig) -> dict[str, Any]:
    """``policy_kwargs`` of :class:`SlotPlanPolicy` for an env (reads Q, R and the plan slots: the cluster's own
    under ``interface="cluster"``, the fixed grid's, :func:`grid_plans`, under ``"universal"``, so the model
    holds nothing of the cluster it was built on)."""
    base = env.unwrapped
    if getattr(base, "plans_shape", None) is not None:  # the universal layout
        plan_type, plan_count = grid_plans(base.view.plan_grid)
    else:
        plan_type = [int(x) for x in base.view.plan_type]
        plan_count = [int(x) for x in base.view.plan_count]
    return {
        "features_extractor_kwargs": {
            "queue_slots": base.queue_slots,
            "running_slots": base.running_slots,
            "plan_type": plan_type,
            "plan_count": plan_count,
            "num_waits": len(base.wait_options),
            "embed_dim": ppo.embed_dim,
            "context_dim": ppo.context_dim,
            "critic_pool": ppo.critic_pool,
            "type_demand": ppo.type_demand,
        },
        "pair_hidden": ppo.pair_hidden,
        "plan_dim": ppo.plan_dim,
        "value_hidden": ppo.value_hidden,
        "resize_bias": ppo.resize_bias,
        "factored": ppo.factored,
        "type_floor": ppo.type_floor,
        "guide": ppo.guide,
        "guide_bonus": ppo.guide_bonus,
        "guide_gate": ppo.guide_gate,
    }




def load_growing(policy: nn.Module, saved: dict[str, th.Tensor]) -> list[str]:
    """Load ``saved`` (a model's state dict) into ``policy``, which may have parameters the saved model lacks:
    the ``_demand`` modules of ``type_demand``, set to 0 so ``policy`` computes exactly what the saved model
    did until they learn, and a guide's ``guide_bonus`` or ``gate``, which keep their initial values (the
    policy then carries the guide's plan out, or leaves it at the gate's initial rate). Returns their names
    (empty when the state dicts match). Raises RuntimeError (torch's message) when anything else differs: a
    missing or unexpected parameter, or a shape."""
    now = policy.state_dict()
    missing = [k for k in now if k not in saved]
    keep = [k for k in missing if k == "guide_bonus" or k.startswith("gate.")]
    if any("_demand." not in k and k not in keep for k in missing) or any(k not in now for k in saved):
        policy.load_state_dict(saved)  # strict: raises with torch's list of what differs
    fill = {k: now[k] if k in keep else th.zeros_like(now[k]) for k in missing}
    policy.load_state_dict({**saved, **fill})
    return missing
