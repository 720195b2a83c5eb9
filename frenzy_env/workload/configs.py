"""Training configurations of jobs: layouts, memory fit, reference iteration times and the assignment rule.

Model assignment (traces record no model)
-----------------------------------------
A job that records no model gets a training configuration by this seeded rule (:func:`assign_configs`):

1. Candidates: every catalogue model (or those given) x global batch in :data:`ASSIGN_BATCH_SIZES`, at
   sequence length ``min(model.max_seq_len, 2048)`` (recorded batch or sequence values are kept).
2. A candidate *fits* g GPUs when some layout ``dp x tp x pp = g`` (:func:`frenzy_env.layouts.plan_layouts`:
   ``tp`` a power of two dividing g and the heads, at most ``gpus_per_node``; ``pp`` a power of two dividing
   the layers; ``dp <= batch``; gradient accumulation over power-of-two micro-batches) has an "extended" MARP
   estimate within the memory of the reference GPU type (default A100-80GB). Its *minimum* is the smallest
   power of two it fits.
3. For a job that asked for g GPUs, keep the candidates that fit g and are *right-sized*: minimum <= g <
   2 x minimum (the job asked for about what its configuration needs). None right-sized: every candidate
   that fits g. None at all: a :class:`ValueError` (for a recorded model: all its candidates).
4. Draw two uniforms per job, in job order, from ``numpy.random.default_rng(seed)``: the first picks the
   model among the kept ones (catalogue order), the second the batch among that model's kept batches.

With a GPU mix (``gpu_mix``: the cluster's GPU types with their counts and node sizes, as trace loaders pass
when given a cluster), step 2's memory is not always the reference type's: after the draws of step 4, one
more uniform per job (in job order) draws the job's *sizing type* among the types with at least ``g`` GPUs,
with probability proportional to their GPU counts, and steps 2-3 use that type's memory and node size. A job
sized for the smallest-memory type fits every larger one at its recorded count, so every GPU type keeps
work it can run at the counts the trace recorded, in proportion to its share of the cluster (sizing every
job to the reference A100-80GB left 447 of the 570 jobs of the default ITP week runnable at their recorded
count only on the 32 A100s of frenzy-testbed, and the RTX3090s idle under FIFO). A job with no candidate
on its sizing type falls back to the reference type.

Assigned fields are listed in :attr:`JobSpec.assigned`; recorded ones never change with the seed.

:func:`reference_iteration_time` is the seconds per iteration of a configuration on a given GPU count of the
reference GPU type, consolidated: what a trace's recorded duration means.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from frenzy_env.cluster import get_gpu_type
from frenzy_env.errors import ConfigError
from frenzy_env.layouts import layouts, plan_layouts
from frenzy_env.memory import estimate_memory_layouts
from frenzy_env.models import MODELS, ModelSpec, get_model
from frenzy_env.throughput import DEFAULT_UTILISATION, iteration_time_array

REFERENCE_GPU_TYPE = "A100-80GB"
ASSIGN_BATCH_SIZES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024)
MAX_ASSIGN_SEQ_LEN = 2048
TP_LEVELS: tuple[int, ...] = (1, 2, 4, 8)


def _layouts(heads: int, batch: int, count: int, per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(L,) dp and tp of every legal layout of ``count`` GPUs (:mod:`frenzy_env.layouts`), tp in TP_LEVELS."""
    return layouts(heads, batch, (count,), min(per_node, TP_LEVELS[-1]))


def _plan_layouts(model: ModelSpec, batch: int, count: int, per_node: int) -> dict[str, np.ndarray]:
    """(L,) dp, tp, pp and micro-batch of every candidate layout of ``count`` GPUs, tp in TP_LEVELS."""
    dp, tp, pp, mb = plan_layouts(model.heads, model.layers, batch, (count,), min(per_node, TP_LEVELS[-1]))
    return {"dp": dp, "tp": tp, "pp": pp, "micro_batch": mb}


@lru_cache(maxsize=65536)
def reference_iteration_time(
    model: ModelSpec,
    batch_size: int,
    seq_len: int,
    gpus: int,
    *,
    gpu: str = REFERENCE_GPU_TYPE,
    gpus_per_node: int = 8,
    utilisation: float = DEFAULT_UTILISATION,
) -> float:
    """Seconds per iteration of a job on ``gpus`` GPUs of ``gpu``, consolidated (what trace durations mean).

    The fastest memory-feasible ("extended") layout (with pipeline stages and gradient accumulation, as
    MARP plans them); if none fits, the fastest layout ignoring memory; if no layout exists (``gpus``
    exceeds the batch and no tensor parallelism helps), ``dp = min(gpus, batch)``.
    """
    g = get_gpu_type(gpu)
    lay = _plan_layouts(model, batch_size, gpus, gpus_per_node)
    if lay["dp"].size == 0:
        one = np.array([1])
        lay = {"dp": np.array([min(gpus, batch_size)]), "tp": one, "pp": one, "micro_batch": np.array([batch_size])}
    span = max(1, -(-gpus // gpus_per_node))
    it = iteration_time_array(
        model,
        batch_size=batch_size,
        seq_len=seq_len,
        gpu=g,
        dp=lay["dp"],
        tp=lay["tp"],
        nodes_spanned=span,
        utilisation=utilisation,
        pp=lay["pp"],
        micro_batch=lay["micro_batch"],
    )  # (L,)
    mem = estimate_memory_layouts(model, batch_size=batch_size, seq_len=seq_len, **lay)  # (L,)
    ok = mem <= g.memory_bytes
    return float(it[ok].min() if ok.any() else it.min())


@lru_cache(maxsize=65536)
def _fits(model: ModelSpec, batch: int, seq: int, count: int, gpu: str, per_node: int) -> bool:
    lay = _plan_layouts(model, batch, count, per_node)
    if lay["dp"].size == 0:
        return False
    mem = estimate_memory_layouts(model, batch_size=batch, seq_len=seq, **lay)
    return bool((mem <= get_gpu_type(gpu).memory_bytes).any())


@lru_cache(maxsize=16384)
def _min_pow2(model: ModelSpec, batch: int, seq: int, gpu: str, per_node: int, limit: int) -> int:
    """Smallest power-of-two GPU count (<= limit) the configuration fits; 0 if none."""
    c = 1
    while c <= limit:
        if _fits(model, batch, seq, c, gpu, per_node):
            return c
        c *= 2
    return 0


def default_seq_len(model: ModelSpec) -> int:
    """Sequence length the assignment rule gives a model: ``min(max_seq_len, 2048)``."""
    return min(model.max_seq_len, MAX_ASSIGN_SEQ_LEN)


class NoConfigurationError(ConfigError):
    """No catalogue configuration fits a job's GPU count; ``index`` is the job's position (if known)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


def _candidates(
    count: int,
    model: ModelSpec | None,
    batch: int | None,
    seq: int | None,
    models: tuple[ModelSpec, ...],
    gpu: str,
    per_node: int,
) -> list[tuple[ModelSpec, int, int]]:
    """Kept candidate configurations for one job (rule steps 1-3), in (catalogue, batch) order."""
    limit = 1 << max(0, (count - 1).bit_length())
    pool = [
        (m, b, seq if seq is not None else default_seq_len(m))
        for m in ((model,) if model is not None else models)
        for b in ((batch,) if batch is not None else ASSIGN_BATCH_SIZES)
    ]
    fit = [c for c in pool if _fits(c[0], c[1], c[2], count, gpu, per_node)]
    right = [
        c for c in fit if (mn := _min_pow2(c[0], c[1], c[2], gpu, per_node, limit)) and mn <= count < 2 * mn
    ]
    if right:
        return right
    if fit:
        return fit
    if model is not None:
        return pool
    raise NoConfigurationError(
        f"no configuration of models {', '.join(m.name for m in models)} fits {count} GPUs of {gpu} "
        f"(gpus_per_node={per_node}); pass other models"
    )


def _sizing_types(
    counts: np.ndarray,
    u: np.ndarray,
    gpu_mix: Sequence[tuple[str, int, int]] | None,
    reference_gpu_type: str,
    gpus_per_node: int,
) -> list[tuple[str, int]]:
    """(n,) (GPU type, GPUs per node) each job is sized for: drawn by ``u`` among the types of ``gpu_mix`` with
    at least the job's count of GPUs, in proportion to their counts; the reference type without a mix."""
    ref = (reference_gpu_type, int(gpus_per_node))
    if not gpu_mix:
        return [ref] * len(counts)
    mix = [(get_gpu_type(t).name, int(c), int(p)) for t, c, p in gpu_mix if int(c) > 0]
    out = []
    for g, x in zip(counts.tolist(), u.tolist()):
        ok = [(t, c, p) for t, c, p in mix if c >= g]
        if not ok:
            out.append(ref)
            continue
        w = np.cumsum([c for _, c, _ in ok], dtype=np.float64)
        k = min(int(np.searchsorted(w, x * w[-1], side="right")), len(ok) - 1)
        out.append((ok[k][0], ok[k][2]))
    return out


def assign_configs(
    counts: np.ndarray,
    *,
    seed: int,
    recorded_model: Sequence[ModelSpec | None] | None = None,
    recorded_batch: Sequence[int | None] | None = None,
    recorded_seq: Sequence[int | None] | None = None,
    models: Sequence[str | ModelSpec] | None = None,
    reference_gpu_type: str = REFERENCE_GPU_TYPE,
    gpus_per_node: int = 8,
    gpu_mix: Sequence[tuple[str, int, int]] | None = None,
) -> tuple[list[ModelSpec], np.ndarray, np.ndarray]:
    """Training configurations for jobs that asked for ``counts`` GPUs (the rule in the module docstring).

    ``gpu_mix``: ``(gpu type, GPUs of that type, GPUs per node)`` of the cluster; ``None`` sizes every job to
    ``reference_gpu_type``. Returns (models list, (n,) batch sizes, (n,) sequence lengths); recorded values
    are kept as given.
    """
    counts = np.asarray(counts, dtype=np.int64)  # (n,)
    n = counts.size
    get_gpu_type(reference_gpu_type)
    model_pool = tuple(get_model(m) for m in (models if models is not None else MODELS))
    if not model_pool:
        raise ConfigError("models must name at least one model")
    rec_m = list(recorded_model) if recorded_model is not None else [None] * n
    rec_b = list(recorded_batch) if recorded_batch is not None else [None] * n
    rec_s = list(recorded_seq) if recorded_seq is not None else [None] * n
    rng = np.random.default_rng(seed)
    u = rng.random((n, 2))  # (n, 2): model draw, batch draw
    sizing = _sizing_types(counts, rng.random(n), gpu_mix, reference_gpu_type, gpus_per_node)  # (n,) (type, node)
    out_m: list[ModelSpec] = [None] * n  # type: ignore[list-item]
    out_b = np.empty(n, dtype=np.int64)
    out_s = np.empty(n, dtype=np.int64)
    groups: dict[tuple, list[int]] = {}
    for i in range(n):
        groups.setdefault((int(counts[i]), rec_m[i], rec_b[i], rec_s[i], sizing[i]), []).append(i)
    for (count, m, b, s, (gpu, per_node)), rows in groups.items():
        try:
            try:
                cands = _candidates(count, m, b, s, model_pool, gpu, per_node)
            except NoConfigurationError:
                if (gpu, per_node) == (reference_gpu_type, gpus_per_node):
                    raise
                cands = _candidates(count, m, b, s, model_pool, reference_gpu_type, gpus_per_node)
        except NoConfigurationError as exc:
            raise NoConfigurationError(str(exc), index=rows[0]) from None
        kept_models = list(dict.fromkeys(c[0] for c in cands))  # catalogue order, distinct
        per_model = {km: [c for c in cands if c[0] is km] for km in kept_models}
        idx = np.asarray(rows)
        mi = np.minimum((u[idx, 0] * len(kept_models)).astype(np.int64), len(kept_models) - 1)
        for r, k, ub in zip(rows, mi.tolist(), u[idx, 1].tolist()):
            opts = per_model[kept_models[k]]
            c = opts[min(int(ub * len(opts)), len(opts) - 1)]
            out_m[r], out_b[r], out_s[r] = c
    return out_m, out_b, out_s
