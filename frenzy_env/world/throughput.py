"""Iteration time of a training job under a resource plan and placement; scaling-curve fits.

Analytic model (one training iteration of global batch ``B`` sequences of ``s`` tokens, ``dp`` data-parallel
replicas of ``tp`` tensor-parallel GPUs each, ``n = dp * tp`` GPUs of one type)::

    t = (t_compute + t_tp + m t_p2p) / (1 - bubble) + t_dp + t_overhead     (pp pipeline stages, m micro-batches)

    t_compute  = flops_per_token(s) * B * s / (n * peak * utilisation)
    t_tp       = layers * 4 * 2 (tp - 1) / tp * (B / dp) * s * hidden * 2 bytes / (intra_node_bw * eff)
    t_dp       = 2 (dp - 1) / dp * (num_params / (tp pp)) * 2 bytes / (ring_bw * eff) + 2 (dp - 1) * hop_latency
    ring_bw    = intra_node_bw                                          on one node
               = min(intra_node_bw, min(k, nics) * nic_bw / tp)         across nodes, k = n / nodes_spanned
    t_overhead = overhead (a constant, seconds)

- ``t_compute``: training FLOPs (forward + backward, from :meth:`ModelSpec.flops_per_token`) spread evenly
  over the GPUs at a fixed fraction of the dense peak, :data:`DEFAULT_UTILISATION` = 0.4 (model FLOPs
  utilisation of 30-50 % is what Megatron-LM reports for GPT training on A100; 0.4 is the middle).
- ``t_tp``: Megatron tensor parallelism does 4 all-reduces of the ``b x s x h`` activations per layer per
  iteration (2 forward, 2 backward), ``b = B / dp`` the per-replica batch; ring all-reduce moves
  ``2 (t-1)/t`` of the buffer per GPU. A tensor-parallel group never spans nodes, so it uses the
  intra-node link (NVLink or PCIe).
- ``t_dp``: ring all-reduce of the fp16 gradient shard (``num_params / tp`` values, 2 bytes each) plus a
  latency of ``hop_latency`` per ring step (a ring all-reduce over ``dp`` ranks takes ``2 (dp - 1)`` steps),
  zero at ``dp = 1``. Its bandwidth ``ring_bw`` is the bus bandwidth of the ring (NCCL's ``busbw``, the
  rate at which each rank moves its ``2 (dp - 1) / dp`` share): on one node the intra-node link; across
  nodes NCCL runs one ring channel per GPU-NIC pair, each crossing every node boundary once, so the
  inter-node hops together get the NICs of the node the job reaches, ``min(k, nics_per_node) * nic_bw``
  (:meth:`GPUType.job_network_gbps`) for ``k`` GPUs of the job on a node, shared by the ``tp`` rings that
  run at once (one per tensor-parallel rank), and never more than each GPU's own intra-node link. A
  DGX A100 node (8 x 200 Gb/s HDR) gives an 8-GPU-per-node data-parallel ring 200 GB/s; an RTX 3090 node
  with one 25 GbE port gives its GPUs 3.125 GB/s together. ``k`` is the even split ``n / nodes_spanned``
  (the ring is as fast as its slowest node; plans place powers of two on nodes of 4 or 8, so the split
  is even for consolidated placements). Measured check: nccl-tests all_reduce_perf between 8 x A100 nodes
  with 4 x HDR 200 Gb/s (100 GB/s per node) reaches a bus bandwidth of 85-96 GB/s on 3 nodes
  (NVIDIA/nccl-tests#119) and 86 GB/s on 2 nodes (NVIDIA/nccl#1048): the node's aggregate, not the
  12.5 GB/s per-GPU share.
- ``eff`` (:data:`DEFAULT_COMM_EFFICIENCY`): fraction of the link bandwidth a ring all-reduce achieves.
- pipeline parallelism and gradient accumulation (``pp`` stages, 1F1B, ``n = dp * tp * pp``; the per-replica
  batch ``B / dp`` in ``m`` micro-batches): ``t_compute`` and ``t_dp`` are unchanged (accumulation does the
  same compute and all-reduces the gradients once per iteration; the gradient shard is ``num_params / (tp
  pp)``), ``t_tp`` covers a stage's ``layers / pp`` layers; ``bubble = (pp - 1) / (m + pp - 1)``
  (:func:`bubble_fraction`; GPipe, Huang et al. 2019; Narayanan et al. 2021, arXiv 2104.04473) and
  ``t_p2p`` the boundary activations and their gradients of one micro-batch (:func:`_pipeline_stage_time`).
  With ``pp = 1`` the bubble and ``t_p2p`` are zero.
- ``t_overhead`` (:data:`DEFAULT_OVERHEAD_S`): fixed per-iteration cost independent of the plan (optimizer
  step launch, data loading, host synchronisation), paid even on one GPU.
- ``efficiency`` (keyword; a world option, :mod:`frenzy_env.world.efficiency`): ``"flat"`` (these functions' default,
  all of the above; env v4's world) or ``"microbatch"``: ``t_compute`` at the efficiency of the micro-batch's tokens,
  ``utilisation x g(mb s) / g(16384)`` with ``g(T) = T / (T + 455)`` (fitted to published micro-batch sweeps),
  plus ``(m - 1) x microstep_overhead_s`` (2 ms, an assumption) for the ``m`` micro-steps of an iteration, so
  gradient accumulation over small micro-batches costs time; ``t_dp`` still runs once per iteration; or
  ``"per_type"``: as ``"microbatch"`` with the GPU type's own curve and level,
  :func:`frenzy_env.world.efficiency.type_efficiency`.

Calibration: the constants were fitted by
:func:`scipy.optimize.least_squares` on log speeds of the measured ElasticFlow A100 curves (pkusys/ElasticFlow
``throughputs_A100``: GPT-2 124M at global batch 128/256, BERT-base at 64/128, pure data parallelism on 1..64
GPUs, 8 per node), residuals = log shape error ``speed(w)/speed(1)`` + 0.1 x log absolute error. The CSVs do
not record the sequence length; 1-GPU GPT-2 at batch 128 runs 7.3 it/s, which at s = 1024 would need
~700 TFLOP/s, so the effective tokens per sequence (at :data:`DEFAULT_UTILISATION`) were fitted too:
~176 for GPT-2 and ~218 for BERT (e.g. s = 128 at ~25-30 % MFU). Fitted with the node-aggregate network
(with a per-GPU-share network the fit gives 60 ms and 140 us): overhead 49 ms, hop latency 220 us.
The curves hardly constrain the bandwidth factor (the shape error moves by < 1 point for eff in 0.7..1.0;
left free the fit runs to the bound, since PyTorch DDP overlaps the all-reduce with the backward pass), so
``eff`` is fixed at 0.8, the usual NCCL ring bus bandwidth / link peak, and the rest fitted with it. The
hop latency is 10-20x a raw NCCL ring step: it also absorbs DDP's gradient bucketing (~10-20 all-reduces per
iteration for these models) and framework synchronisation, measured only on data-parallel jobs, so it is
applied to the data-parallel gradient all-reduce only (not to the small, NVLink-local tensor-parallel
all-reduces). Shape error after calibration: within 9 % at every measured point (uncalibrated: up to
+2300 %; the per-GPU-share network with its own fit: within 12 %).

Compute and communication are not overlapped (a conservative upper bound on time). Bandwidths in the
catalogue are GB/s (1e9 bytes/s) per direction.

Speed model of Capes et al. (arXiv 1908.08082), iterations per second at ``w`` workers::

    f(w) = 1 / (th0 * m / w + th1 * (w - 1) + th2 * (w - 1) * n / w + th3)

``m`` the global batch size, ``n`` the model size (parameters); ``1 / f(w)`` is linear in ``theta``, so theta
is fitted by non-negative least squares (:func:`scipy.optimize.nnls`) on ``1 / f``. Note that
``(w - 1) n / w = n - (n / m) (m / w)`` lies in the span of the ``m / w`` and constant columns, so ``th2``
trades off against ``th0`` and ``th3``: the fitted curve is unique, theta only up to that direction (NNLS
returns the vertex with ``th2 = 0`` whenever ``th0 >= th2 n / m`` allows it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from frenzy_env.world.cluster import GPUType, get_gpu_type
from frenzy_env.world.efficiency import (
    MICROSTEP_OVERHEAD_S,
    check_efficiency,
    microbatch_efficiency,
    type_efficiency,
)
from frenzy_env.world.models import ModelSpec, get_model

DEFAULT_UTILISATION = 0.4
#: fixed per-iteration overhead in seconds (optimizer step launch, data loading, synchronisation); fitted
DEFAULT_OVERHEAD_S = 0.049
#: fraction of the link bandwidth achieved by ring all-reduce (NCCL bus bandwidth / link peak); fixed, see above
DEFAULT_COMM_EFFICIENCY = 0.8
#: seconds per ring step of the data-parallel gradient all-reduce (2 (dp - 1) steps); fitted
DEFAULT_HOP_LATENCY_S = 220e-6
BYTES_PER_VALUE = 2  # fp16 / bf16 activations and gradients
TP_ALLREDUCES_PER_LAYER = 4  # Megatron: 2 in the forward pass, 2 in the backward pass


def _check_common(
    batch_size: int,
    seq_len: int,
    utilisation: float,
    overhead_s: float = 0.0,
    comm_efficiency: float = 1.0,
    hop_latency_s: float = 0.0,
) -> None:
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    if int(seq_len) != seq_len or seq_len < 1:
        raise ValueError(f"seq_len must be a positive integer, got {seq_len}")
    if not 0.0 < utilisation <= 1.0:
        raise ValueError(f"utilisation must be in (0, 1], got {utilisation}")
    if not 0.0 < comm_efficiency <= 1.0:
        raise ValueError(f"comm_efficiency must be in (0, 1], got {comm_efficiency}")
    if not (math.isfinite(overhead_s) and overhead_s >= 0.0):
        raise ValueError(f"overhead_s must be a finite non-negative number, got {overhead_s}")
    if not (math.isfinite(hop_latency_s) and hop_latency_s >= 0.0):
        raise ValueError(f"hop_latency_s must be a finite non-negative number, got {hop_latency_s}")


def tp_allreduce_time_array(
    act_bytes: np.ndarray | float,
    tp: np.ndarray | float,
    gpu: GPUType | str,
    *,
    layers: float | np.ndarray,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
) -> np.ndarray:
    """Seconds per iteration of Megatron tensor-parallel all-reduces, on the intra-node link.

    ``layers * 4`` ring all-reduces of ``act_bytes`` (the ``b x s x h`` activations of one replica) among the
    ``tp`` GPUs of a group, which never spans nodes: each moves ``2 (tp - 1) / tp * act_bytes`` per GPU over
    the GPU's NVLink or PCIe link (``intra_node_gbps``). Zero at ``tp = 1``.
    """
    g = get_gpu_type(gpu)
    tp_a = np.asarray(tp, dtype=np.float64)
    return (
        layers * TP_ALLREDUCES_PER_LAYER * 2.0 * (tp_a - 1.0) / tp_a * np.asarray(act_bytes, dtype=np.float64)
        / (g.intra_node_gbps * 1e9 * comm_efficiency)
    )


def dp_ring_bandwidth_gbps(
    dp: np.ndarray | float,
    tp: np.ndarray | float,
    nodes_spanned: np.ndarray | int,
    gpu: GPUType | str,
) -> np.ndarray:
    """Bus bandwidth (GB/s per direction) of one data-parallel ring all-reduce; see the module docstring.

    On one node: the intra-node link. Across nodes: the ring (NCCL builds one channel per GPU-NIC pair)
    crosses every node boundary on all the NICs the job reaches there, ``gpu.job_network_gbps(k)`` for the
    ``k = dp * tp / nodes_spanned`` GPUs the job holds per node (an even split), shared by the ``tp``
    data-parallel rings that run at once (one per tensor-parallel rank); and no faster than the intra-node
    link each GPU sends on: ``min(intra, job_network_gbps(k) / tp)``.
    """
    g = get_gpu_type(gpu)
    dp_a, tp_a, span = np.broadcast_arrays(
        np.asarray(dp, dtype=np.float64), np.asarray(tp, dtype=np.float64), np.asarray(nodes_spanned)
    )
    n = dp_a * tp_a
    span_f = np.clip(span.astype(np.float64), 1.0, np.maximum(n, 1.0))
    per_node = n / span_f  # GPUs of the job per node
    net = np.asarray(g.job_network_gbps(per_node), dtype=np.float64) / tp_a
    return np.where(span_f > 1.0, np.minimum(g.intra_node_gbps, net), g.intra_node_gbps)


def dp_allreduce_time_array(
    grad_bytes: np.ndarray | float,
    dp: np.ndarray | float,
    tp: np.ndarray | float,
    nodes_spanned: np.ndarray | int,
    gpu: GPUType | str,
    *,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
    hop_latency_s: float = DEFAULT_HOP_LATENCY_S,
) -> np.ndarray:
    """Seconds per iteration of the data-parallel gradient ring all-reduce.

    ``2 (dp - 1) / dp * grad_bytes / (bw * comm_efficiency) + 2 (dp - 1) * hop_latency_s``, ``bw`` from
    :func:`dp_ring_bandwidth_gbps`, ``grad_bytes`` the gradient shard of one GPU (parameters / tp, fp16).
    Zero at ``dp = 1``.
    """
    dp_a = np.asarray(dp, dtype=np.float64)
    bw = dp_ring_bandwidth_gbps(dp, tp, nodes_spanned, gpu) * (1e9 * comm_efficiency)
    moved = 2.0 * (dp_a - 1.0) / dp_a * np.asarray(grad_bytes, dtype=np.float64)
    return moved / bw + 2.0 * (dp_a - 1.0) * hop_latency_s


def iteration_time_array(
    model: ModelSpec | str,
    *,
    batch_size: int,
    seq_len: int,
    gpu: GPUType | str,
    dp: np.ndarray,
    tp: np.ndarray,
    nodes_spanned: np.ndarray | int = 1,
    utilisation: float = DEFAULT_UTILISATION,
    overhead_s: float = DEFAULT_OVERHEAD_S,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
    hop_latency_s: float = DEFAULT_HOP_LATENCY_S,
    pp: np.ndarray | int = 1,
    micro_batch: np.ndarray | int | None = None,
    efficiency: str = "flat",
    microstep_overhead_s: float = MICROSTEP_OVERHEAD_S,
) -> np.ndarray:
    """Seconds per iteration for many plans at once.

    Parameters
    ----------
    model: a :class:`~frenzy_env.world.models.ModelSpec` or catalogue name.
    batch_size: global batch (sequences per iteration).
    seq_len: tokens per sequence.
    gpu: GPU type (name or :class:`GPUType`).
    dp, tp: (P,) data- and tensor-parallel degrees (broadcast together).
    nodes_spanned: (P,) or scalar, nodes the placement touches; > 1 sends the data-parallel all-reduce over
        the network.
    utilisation: fraction of the dense peak reached by compute.
    overhead_s: fixed per-iteration overhead, seconds (:data:`DEFAULT_OVERHEAD_S`).
    comm_efficiency: fraction of link bandwidth achieved by all-reduce, in (0, 1]
        (:data:`DEFAULT_COMM_EFFICIENCY`).
    hop_latency_s: latency per ring step of the data-parallel all-reduce, seconds
        (:data:`DEFAULT_HOP_LATENCY_S`).
    pp: (P,) or scalar pipeline stages (1F1B; ``n = dp * tp * pp`` GPUs).
    micro_batch: (P,) or scalar micro-batch (gradient accumulation); ``None``: the whole per-replica batch.
    efficiency: ``"flat"`` (compute at ``utilisation`` whatever the micro-batch; accumulation costs nothing),
        ``"microbatch"`` (compute at :func:`frenzy_env.world.efficiency.microbatch_efficiency` of the micro-batch's
        tokens, each micro-step after the first ``microstep_overhead_s`` more) or ``"per_type"`` (as
        ``"microbatch"`` on ``gpu``'s own curve at the model's width,
        :func:`frenzy_env.world.efficiency.type_efficiency`); see :mod:`frenzy_env.world.efficiency`.
    microstep_overhead_s: seconds per extra micro-step under ``"microbatch"`` and ``"per_type"``
        (:data:`frenzy_env.world.efficiency.MICROSTEP_OVERHEAD_S`).

    Returns
    -------
    (P,) float64 seconds; ``inf`` where the plan is impossible (``dp > batch_size``, ``dp < 1``,
    ``tp < 1``, ``pp < 1``, micro-batch < 1).
    """
    model = get_model(model)
    g = get_gpu_type(gpu)
    _check_common(batch_size, seq_len, utilisation, overhead_s, comm_efficiency, hop_latency_s)
    check_efficiency(efficiency)
    if not (math.isfinite(microstep_overhead_s) and microstep_overhead_s >= 0.0):
        raise ValueError(f"microstep_overhead_s must be a finite non-negative number, got {microstep_overhead_s}")
    mb_in = np.inf if micro_batch is None else micro_batch
    dp_a, tp_a, span, pp_a, mb_a = np.broadcast_arrays(
        np.asarray(dp, dtype=np.float64),
        np.asarray(tp, dtype=np.float64),
        np.asarray(nodes_spanned),
        np.asarray(pp, dtype=np.float64),
        np.asarray(mb_in, dtype=np.float64),
    )  # (P,) each
    bad = (dp_a < 1) | (tp_a < 1) | (dp_a > batch_size) | (pp_a < 1) | (mb_a < 1)
    dp_s = np.where(bad, 1.0, dp_a)
    tp_s = np.where(bad, 1.0, tp_a)
    pp_s = np.where(bad, 1.0, pp_a)
    n = dp_s * tp_s * pp_s

    flops = float(model.flops_per_token(seq_len)) * batch_size * seq_len
    act_bytes = (batch_size / dp_s) * seq_len * model.hidden * BYTES_PER_VALUE
    t_tp = tp_allreduce_time_array(act_bytes, tp_s, g, layers=model.layers / pp_s, comm_efficiency=comm_efficiency)
    if efficiency == "flat":
        t_compute = flops / (n * g.peak_tflops * 1e12 * utilisation)
        t_work = t_compute + t_tp
    else:  # "microbatch", "per_type": compute at the micro-batch's efficiency, a fixed cost per extra micro-step
        b_rep = np.ceil(batch_size / dp_s)
        mb_s = np.minimum(np.where(bad, 1.0, mb_a), b_rep)  # the micro-batch (whole replica batch if None)
        steps = np.ceil(b_rep / mb_s)  # micro-steps per iteration
        if efficiency == "per_type":
            u = type_efficiency(mb_s * seq_len, utilisation, g.name, model.hidden)
        else:
            u = microbatch_efficiency(mb_s * seq_len, utilisation)
        t_compute = flops / (n * g.peak_tflops * 1e12 * u)
        t_work = t_compute + t_tp + (steps - 1.0) * microstep_overhead_s
    t_stage = _pipeline_stage_time(
        g, batch_size, seq_len, model.hidden, dp_s, tp_s, pp_s, mb_a, span, t_work, comm_efficiency
    )
    # the gradient shard of one GPU; the tp x pp rings of the replicas run at once and share the nodes' NICs
    grad_bytes = float(model.num_params) / (tp_s * pp_s) * BYTES_PER_VALUE
    t_dp = dp_allreduce_time_array(
        grad_bytes, dp_s, tp_s * pp_s, span, g, comm_efficiency=comm_efficiency, hop_latency_s=hop_latency_s
    )

    return np.where(bad, np.inf, t_stage + t_dp + overhead_s)


def bubble_fraction(pp: np.ndarray | int, micro_batches: np.ndarray | int) -> np.ndarray | float:
    """Idle fraction of a 1F1B (or GPipe) pipeline of ``pp`` stages over ``m`` micro-batches:
    ``(pp - 1) / (m + pp - 1)`` (Huang et al. 2019, GPipe, arXiv 1811.06965, Sec. 2.2; Narayanan et al. 2021,
    arXiv 2104.04473, Sec. 2.2.1: bubble time / ideal time ``(p - 1) / m``, the same idle share)."""
    p = np.asarray(pp, dtype=np.float64)
    m = np.asarray(micro_batches, dtype=np.float64)
    out = (p - 1.0) / (m + p - 1.0)
    return float(out) if out.ndim == 0 else out


def _pipeline_stage_time(g, batch_size, seq_len, hidden, dp, tp, pp, mb, span, t_work, comm_efficiency):
    """Seconds of the forward/backward part of an iteration of ``m`` micro-batches on ``pp`` 1F1B stages.

    ``t_work`` is a stage's compute plus its tensor-parallel all-reduces for the whole per-replica batch (the
    time of all ``m`` micro-batches back to back). Each micro-batch also sends its boundary activations to
    the next stage (forward) and their gradients back (backward): ``mb x s x h`` fp16 values each way, split
    over the ``tp`` ranks (Narayanan et al. 2021, Sec. 4.1, scatter/gather), over the intra-node link when
    the job sits on one node, else one NIC's bandwidth (a stage boundary is a GPU-to-GPU send). The
    pipeline takes ``m + pp - 1`` micro-batch slots, so the time is ``(t_work + m t_p2p) / (1 -
    bubble_fraction(pp, m))`` (Narayanan et al. 2021, Sec. 2.2.1). With ``pp = 1`` this is ``t_work``:
    gradient accumulation alone costs no time here (same compute; the data-parallel all-reduce runs once per
    iteration) unless ``t_work`` already holds it (``efficiency="microbatch"`` or ``"per_type"``).
    """
    b_rep = np.ceil(batch_size / dp)
    mb = np.minimum(mb, b_rep)
    m = np.ceil(b_rep / mb)  # micro-batches per iteration
    if not (pp > 1).any():
        return t_work
    link = np.where(span > 1, g.nic_gbps, g.intra_node_gbps) * (1e9 * comm_efficiency)  # one NIC per sender
    p2p = np.where(pp > 1, 2.0 * mb * seq_len * hidden * BYTES_PER_VALUE / tp / link, 0.0)  # per micro-batch
    return (t_work + m * p2p) * (m + pp - 1.0) / m


def iteration_time(
    model: ModelSpec | str,
    *,
    batch_size: int,
    seq_len: int,
    gpu: GPUType | str,
    dp: int,
    tp: int,
    nodes_spanned: int = 1,
    utilisation: float = DEFAULT_UTILISATION,
    overhead_s: float = DEFAULT_OVERHEAD_S,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
    hop_latency_s: float = DEFAULT_HOP_LATENCY_S,
    pp: int = 1,
    micro_batch: int | None = None,
    efficiency: str = "flat",
    microstep_overhead_s: float = MICROSTEP_OVERHEAD_S,
) -> float:
    """Seconds per iteration of one plan; see the module docstring for the formula (``efficiency``: as in
    :func:`iteration_time_array`).

    Raises ``ValueError`` for ``dp``/``tp`` below 1 or ``dp > batch_size`` (fewer than one sequence per
    replica).
    """
    if int(dp) != dp or dp < 1:
        raise ValueError(f"dp must be a positive integer, got {dp}")
    if int(tp) != tp or tp < 1:
        raise ValueError(f"tp must be a positive integer, got {tp}")
    if dp > batch_size:
        raise ValueError(f"dp must not exceed batch_size={batch_size} (one sequence per replica), got {dp}")
    if nodes_spanned < 1:
        raise ValueError(f"nodes_spanned must be a positive integer, got {nodes_spanned}")
    if int(pp) != pp or pp < 1:
        raise ValueError(f"pp must be a positive integer, got {pp}")
    if micro_batch is not None and (int(micro_batch) != micro_batch or micro_batch < 1):
        raise ValueError(f"micro_batch must be a positive integer or None, got {micro_batch}")
    out = iteration_time_array(
        model,
        batch_size=batch_size,
        seq_len=seq_len,
        gpu=gpu,
        dp=np.array([dp]),
        tp=np.array([tp]),
        nodes_spanned=np.array([nodes_spanned]),
        utilisation=utilisation,
        overhead_s=overhead_s,
        comm_efficiency=comm_efficiency,
        hop_latency_s=hop_latency_s,
        pp=np.array([pp]),
        micro_batch=None if micro_batch is None else np.array([micro_batch]),
        efficiency=efficiency,
        microstep_overhead_s=microstep_overhead_s,
    )
    return float(out[0])


# --------------------------------------------------------------------------------------- speed model
def _features(w: np.ndarray, m: float, n: float) -> np.ndarray:
    """(len(w), 4) design matrix of 1/f(w): [m/w, w-1, (w-1) n/w, 1]."""
    w = np.asarray(w, dtype=np.float64)
    return np.stack([m / w, w - 1.0, (w - 1.0) * n / w, np.ones_like(w)], axis=-1)


@dataclass(frozen=True)
class SpeedModel:
    """Capes et al. speed model: ``f(w) = 1 / (th0 m/w + th1 (w-1) + th2 (w-1) n/w + th3)`` iterations/s.

    Attributes
    ----------
    theta: the four non-negative coefficients.
    m: global batch size.
    n: model size (parameters).
    """

    theta: tuple[float, float, float, float]
    m: float
    n: float

    def __call__(self, w: float | np.ndarray) -> float | np.ndarray:
        w_arr = np.asarray(w, dtype=np.float64)
        if np.any(w_arr <= 0):
            raise ValueError(f"workers must be positive, got {w}")
        inv = _features(w_arr, self.m, self.n) @ np.asarray(self.theta, dtype=np.float64)
        with np.errstate(divide="ignore"):
            speed = 1.0 / inv
        return float(speed) if np.ndim(speed) == 0 else speed


def fit_speed_model(workers: np.ndarray, speeds: np.ndarray, *, m: float, n: float) -> SpeedModel:
    """Fit :class:`SpeedModel` to measured ``speeds`` (iterations/s) at ``workers`` by NNLS on ``1/speed``.

    Columns are scaled to unit maximum before :func:`scipy.optimize.nnls` (n can be ~1e9) and the
    coefficients scaled back.
    """
    from scipy.optimize import nnls

    w = np.asarray(workers, dtype=np.float64).reshape(-1)  # (K,)
    f = np.asarray(speeds, dtype=np.float64).reshape(-1)  # (K,)
    if w.shape != f.shape or w.size == 0:
        raise ValueError(
            f"workers and speeds must be non-empty and of equal length, got {w.size} and {f.size}"
        )
    if np.any(w <= 0) or np.any(~np.isfinite(f)) or np.any(f <= 0):
        raise ValueError("workers and speeds must be positive and finite")
    if m <= 0 or n <= 0:
        raise ValueError(f"m and n must be positive, got m={m}, n={n}")
    a = _features(w, m, n)  # (K, 4)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    theta_s, _ = nnls(a / scale, 1.0 / f)
    theta = theta_s / scale
    return SpeedModel(theta=tuple(float(t) for t in theta), m=float(m), n=float(n))  # type: ignore[arg-type]


def speed_model_from_throughput(
    model: ModelSpec | str,
    *,
    batch_size: int,
    seq_len: int,
    gpu: GPUType | str,
    max_workers: int = 64,
    gpus_per_node: int = 8,
    utilisation: float = DEFAULT_UTILISATION,
    overhead_s: float = DEFAULT_OVERHEAD_S,
    comm_efficiency: float = DEFAULT_COMM_EFFICIENCY,
    hop_latency_s: float = DEFAULT_HOP_LATENCY_S,
    efficiency: str = "flat",
) -> SpeedModel:
    """Fit :class:`SpeedModel` to the analytic model's pure data-parallel speeds at w = 1..max_workers.

    Workers are packed ``gpus_per_node`` to a node (consolidated); ``w`` above ``batch_size`` is skipped.
    ``efficiency``: as in :func:`iteration_time_array` (no accumulation: each worker's whole share is its
    micro-batch).
    """
    model = get_model(model)
    w = np.arange(1, min(max_workers, batch_size) + 1)  # (W,)
    span = -(-w // gpus_per_node)
    t = iteration_time_array(
        model,
        batch_size=batch_size,
        seq_len=seq_len,
        gpu=gpu,
        dp=w,
        tp=np.ones_like(w),
        nodes_spanned=span,
        utilisation=utilisation,
        overhead_s=overhead_s,
        comm_efficiency=comm_efficiency,
        hop_latency_s=hop_latency_s,
        efficiency=efficiency,
    )
    return fit_speed_model(w, 1.0 / t, m=batch_size, n=model.num_params)
