"""The factored masked action distribution: P(type) x P(which | type) over the env's one Discrete action.

The env's action ``a`` belongs to one of four *types* (:func:`action_types`): plain wait (action 0), timed
waits (1..W), starts (``first_start`` ..) and resizes (``first_resize`` ..). The policy emits a logit per
type and a logit per action; the probability of a legal action ``a`` of type ``k`` is

``P(a) = P(k) * softmax_{legal a' of type k}(logit_a')``, with
``P(k) = (1 - floor) * softmax_{legal k}(type logit) + floor / n_legal``

where a type is legal when it has a legal action. The floor keeps every legal type (resizes included) at
probability >= ``floor / n_legal`` however the logits move, so no action type dies out during training (a
flat softmax over ~2,300 actions let behaviour cloning push resizes to 1e-11). The result is an ordinary
normalised log-probability per flat action (-1e8 on illegal ones), so sampling, log-probs and the entropy are
those of one Categorical over the same Discrete action space: the env's action space does not change.
"""

from __future__ import annotations

from typing import Any

import torch as th

NUM_TYPES = 4
TYPE_NAMES = ("wait", "timed_wait", "start", "resize")
ILLEGAL_LOGP = -1e8  # the log-probability given to masked actions (finite: no NaN in p * log p)


def action_types(num_actions: int, first_start: int, first_resize: int) -> th.Tensor:
    """(A,) long: the type index of every action (0 wait, 1 timed wait, 2 start, 3 resize)."""
    if not 1 <= first_start <= first_resize <= num_actions:
        raise ValueError(
            f"action layout needs 1 <= first_start <= first_resize <= num_actions, got first_start={first_start}, "
            f"first_resize={first_resize}, num_actions={num_actions}"
        )
    t = th.full((num_actions,), 3, dtype=th.long)
    t[0] = 0
    t[1:first_start] = 1
    t[first_start:first_resize] = 2
    return t


def factored_log_probs(
    logits: th.Tensor, type_logits: th.Tensor, mask: th.Tensor, types: th.Tensor, floor: float = 0.0
) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """Normalised log-probabilities of the factored distribution, and its entropy.

    logits (B, A) per-action logits; type_logits (B, 4); mask (B, A) bool (a row with no legal action is
    treated as "wait only"); types (A,) from :func:`action_types`; floor in [0, 1). Returns ``(logp (B, A),
    type_logp (B, 4), entropy (B,))``: ``ILLEGAL_LOGP`` on illegal actions and on types without a legal
    action. Only the legal entries are computed (a few percent of the ~2,300 actions), so the exponentials
    cost little.
    """
    if not 0.0 <= floor < 1.0:
        raise ValueError(f"floor must be in [0, 1), got {floor!r}")
    mask = mask.bool()
    empty = ~mask.any(-1)
    if bool(empty.any()):
        mask = mask.clone()
        mask[empty, 0] = True
    b = logits.shape[0]
    bi, ai = mask.nonzero(as_tuple=True)  # (n,) the legal entries
    lg = logits[bi, ai]  # (n,)
    seg = bi * NUM_TYPES + types[ai]  # (n,) the (row, type) segment of each legal entry
    with th.no_grad():  # a constant per segment for a stable log-sum-exp (its gradient cancels)
        seg_max = th.full((b * NUM_TYPES,), -th.inf, dtype=lg.dtype).scatter_reduce(0, seg, lg, "amax")
    ex = th.exp(lg - seg_max[seg])
    sums = th.zeros(b * NUM_TYPES, dtype=lg.dtype).index_add(0, seg, ex)
    type_legal = (sums > 0).reshape(b, NUM_TYPES)
    lse = th.log(sums.clamp(min=1e-30)) + th.where(th.isfinite(seg_max), seg_max, th.zeros_like(seg_max))
    neg = th.finfo(logits.dtype).min / 4
    p_type = th.softmax(type_logits.masked_fill(~type_legal, neg), -1) * type_legal
    if floor > 0:
        n_legal = type_legal.sum(-1, keepdim=True).clamp(min=1)
        p_type = (1.0 - floor) * p_type + floor * type_legal / n_legal
    type_logp = th.where(type_legal, th.log(p_type.clamp(min=1e-30)), th.full_like(p_type, ILLEGAL_LOGP))
    lp = type_logp.reshape(-1)[seg] + lg - lse[seg]  # (n,)
    logp = th.full_like(logits, ILLEGAL_LOGP).index_put((bi, ai), lp)
    ent = th.zeros(b, dtype=lg.dtype).index_add(0, bi, -th.exp(lp) * lp)
    return logp, type_logp, ent


def within_type_entropy(logp: th.Tensor, type_logp: th.Tensor, mask: th.Tensor, types: th.Tensor) -> th.Tensor:
    """(B,) the mean over each row's legal types of the entropy of P(action | type), from the factored
    distribution's ``logp`` (B, A) and ``type_logp`` (B, 4); ``mask`` (B, A) the legal actions, ``types`` (A,).

    Unlike the joint entropy, ``H(type) + sum_t P(t) H(action | t)``, it does not grow when probability moves
    to the type with the most legal actions (resizes: running jobs x plans), so a bonus on it keeps each type's
    choice spread without pushing the policy towards any type. A type with one legal action adds 0."""
    mask = mask.bool()
    b = logp.shape[0]
    bi, ai = mask.nonzero(as_tuple=True)
    t = types[ai]
    cond = logp[bi, ai] - type_logp[bi, t]  # log P(a | t) on the legal entries
    h = th.zeros(b * NUM_TYPES, dtype=logp.dtype).index_add(0, bi * NUM_TYPES + t, -th.exp(cond) * cond)
    legal = (type_logp > ILLEGAL_LOGP / 2).to(logp.dtype)  # (B, 4) types with a legal action
    return (h.reshape(b, NUM_TYPES) * legal).sum(-1) / legal.sum(-1).clamp(min=1.0)


def entropy(logp: th.Tensor) -> th.Tensor:
    """(B,) entropy of normalised log-probabilities ``logp`` (B, N) (entries at ``ILLEGAL_LOGP`` add 0)."""
    return -(th.exp(logp) * logp).sum(-1)


def greedy_actions(logp: th.Tensor, type_logp: th.Tensor, types: th.Tensor) -> th.Tensor:
    """(B,) the deterministic action of the factored distribution: the most likely type, then its most likely
    action. (The joint argmax would favour types with few actions: "wait" at 0.3 beats each of five starts
    sharing 0.7.)"""
    best_type = type_logp.argmax(-1, keepdim=True)  # (B, 1)
    return logp.masked_fill(types[None, :] != best_type, -th.inf).argmax(-1)


def _factored_distribution_class() -> type:
    from sb3_contrib.common.maskable.distributions import MaskableCategoricalDistribution

    class FactoredCategoricalDistribution(MaskableCategoricalDistribution):
        """sb3-contrib's masked categorical over normalised factored log-probabilities, whose deterministic
        action (``mode``) is :func:`greedy_actions`."""

        greedy: th.Tensor | None = None

        def mode(self) -> th.Tensor:
            return self.greedy if self.greedy is not None else super().mode()

    return FactoredCategoricalDistribution


def factored_distribution(logp: th.Tensor, type_logp: th.Tensor, types: th.Tensor) -> Any:
    """An sb3-contrib distribution of the factored log-probabilities (sampling, log_prob, entropy) with
    :func:`greedy_actions` as its deterministic action."""
    dist = _factored_distribution_class()(logp.shape[-1]).proba_distribution(action_logits=logp)
    dist.greedy = greedy_actions(logp, type_logp, types)
    return dist
