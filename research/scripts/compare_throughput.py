"""Compare the throughput model's scaling shape with measured A100 throughputs (ElasticFlow); calibrate it.

Reads ``throughput/elasticflow_a100/{gpt2,bert}.csv`` of the shared data folder (``--data``, else from
:func:`frenzy_env.paths.shared_data_dir`): iterations/s at 1..64 A100 GPUs for given global batch sizes
(Apache-2.0, pkusys/ElasticFlow). It prints, for every measured point, model vs
measured speed-up ``speed(w) / speed(1)`` and its relative error for

- *before*: the uncalibrated analytic model (no per-iteration overhead, full link bandwidth, no all-reduce
  latency) at the nominal sequence lengths (GPT-2 1024, BERT 512);
- *after*: the calibrated model (:data:`frenzy_env.world.throughput.DEFAULT_OVERHEAD_S`,
  ``DEFAULT_COMM_EFFICIENCY``, ``DEFAULT_HOP_LATENCY_S``) at the fitted effective sequence lengths
  (:data:`FITTED_SEQ_LEN`; the CSVs do not record them);
- the Capes et al. speed model f(w) fitted by NNLS to the measured points themselves (``--nnls``).

Pure data parallelism, 8 GPUs per node, A100-80GB; GPT-2 is the catalogue's GPT-2 small (124M), BERT a
BERT-base shape. ``--fit`` re-runs the calibration (:func:`fit_constants`), ``--llm`` prints the 8 -> 64 GPU
speed-up of large LLM jobs under the calibrated model.

``--network`` prints the issue-16 network tables: the ElasticFlow speed-ups of the model with the node's
aggregate NIC bandwidth (now) and with each GPU's share of it (before, at its own calibration), published
NCCL all-reduce bus bandwidths against the model's, and gpt2-medium (batch 64) on V100 nodes before/after.

Usage: ``python research/scripts/compare_throughput.py [--data DIR] [--fit] [--llm] [--nnls] [--network]``
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from frenzy_env.paths import shared_data_dir
from frenzy_env.world.cluster import GPUType, get_gpu_type
from frenzy_env.world.models import ModelSpec, custom_model, get_model
from frenzy_env.world.throughput import (
    DEFAULT_COMM_EFFICIENCY,
    DEFAULT_HOP_LATENCY_S,
    DEFAULT_OVERHEAD_S,
    dp_ring_bandwidth_gbps,
    fit_speed_model,
    iteration_time_array,
)

SHARED = shared_data_dir()
DEFAULT_DATA = SHARED / "throughput" / "elasticflow_a100" if SHARED is not None else None
GPU = "A100-80GB"
GPUS_PER_NODE = 8
# ElasticFlow's BERT job is BERT-base (Devlin et al. 2019: L=12, H=768, A=12), not in the catalogue.
BERT_BASE = custom_model(
    vocab_size=30522, hidden=768, layers=12, heads=12, max_seq_len=512, arch="encoder", name="bert-base"
)
#: nominal sequence lengths (the "before" assumption)
NOMINAL_SEQ_LEN = {"gpt2": 1024, "bert": 512}
#: effective tokens per sequence at DEFAULT_UTILISATION, fitted together with the throughput constants
FITTED_SEQ_LEN = {"gpt2": 176, "bert": 218}
#: residual weight of the log absolute-speed error relative to the log shape error in :func:`fit_constants`
ABS_WEIGHT = 0.1
UNCALIBRATED = {"overhead_s": 0.0, "comm_efficiency": 1.0, "hop_latency_s": 0.0}
CALIBRATED = {
    "overhead_s": DEFAULT_OVERHEAD_S,
    "comm_efficiency": DEFAULT_COMM_EFFICIENCY,
    "hop_latency_s": DEFAULT_HOP_LATENCY_S,
}


def model_for(stem: str) -> ModelSpec:
    return BERT_BASE if stem == "bert" else get_model(stem)


def load_curves(data: Path) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """[(stem, global batch, workers (W,), measured iterations/s (W,))] for gpt2 and bert."""
    out = []
    for stem in ("gpt2", "bert"):
        path = data / f"{stem}.csv"
        if not path.exists():
            continue
        table = pd.read_csv(path)
        workers = np.array([int(c) for c in table.columns[1:]])  # (W,)
        for _, row in table.iterrows():
            out.append((stem, int(row.iloc[0]), workers, row.iloc[1:].to_numpy(dtype=float)))
    return out


def analytic_speeds(
    model, batch: int, seq_len: int, workers: np.ndarray, gpu: GPUType | str = GPU, **constants: float
) -> np.ndarray:
    """(W,) iterations/s of the analytic model at ``workers`` data-parallel GPUs."""
    t = iteration_time_array(
        model,
        batch_size=batch,
        seq_len=seq_len,
        gpu=gpu,
        dp=workers,
        tp=np.ones_like(workers),
        nodes_spanned=-(-workers // GPUS_PER_NODE),
        **constants,
    )
    return 1.0 / t


def shape_errors(stem: str, batch: int, workers: np.ndarray, measured: np.ndarray, seq_len: int,
                 **constants: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(model speed-up (W,), measured speed-up (W,), relative shape error (W,))."""
    model = analytic_speeds(model_for(stem), batch, seq_len, workers, **constants)
    shape_model = model / model[0]
    shape_meas = measured / measured[0]
    return shape_model, shape_meas, shape_model / shape_meas - 1.0


def fmt(values: np.ndarray, pct: bool = True) -> str:
    return " ".join(f"{v:+7.1%}" if pct else f"{v:7.2f}" for v in values)


def compare(curves, nnls: bool = False) -> dict[str, tuple[float, float]]:
    """Print before/after tables; returns {curve: (max |shape err| before, after)}."""
    out: dict[str, tuple[float, float]] = {}
    last = None
    for stem, batch, workers, measured in curves:
        model = model_for(stem)
        if stem != last:
            print(
                f"\n== {stem}.csv: {model.name} ({model.num_params / 1e6:.0f}M), {GPU}; before: seq "
                f"{NOMINAL_SEQ_LEN[stem]}, uncalibrated; after: seq {FITTED_SEQ_LEN[stem]}, calibrated"
            )
            print(f"{'':30s}" + " ".join(f"{'w=' + str(w):>7s}" for w in workers))
            last = stem
        _, meas, err_b = shape_errors(stem, batch, workers, measured, NOMINAL_SEQ_LEN[stem], **UNCALIBRATED)
        after, _, err_a = shape_errors(stem, batch, workers, measured, FITTED_SEQ_LEN[stem], **CALIBRATED)
        speed_a = analytic_speeds(model, batch, FITTED_SEQ_LEN[stem], workers, **CALIBRATED)
        print(f"B={batch:<4d} measured speed-up        " + fmt(meas, pct=False))
        print(f"B={batch:<4d} model speed-up (after)   " + fmt(after, pct=False))
        print(f"B={batch:<4d} shape err (before)       " + fmt(err_b))
        print(f"B={batch:<4d} shape err (after)        " + fmt(err_a))
        print(f"B={batch:<4d} it/s err (after)         " + fmt(speed_a / measured - 1.0))
        if nnls:
            fit = fit_speed_model(workers, measured, m=batch, n=model.num_params)
            fitted = np.asarray(fit(workers))
            print(f"B={batch:<4d} NNLS f(w) shape err      " + fmt((fitted / fitted[0]) / meas - 1.0))
            print(f"       NNLS theta = {', '.join(f'{t:.3g}' for t in fit.theta)}")
        out[f"{stem}-{batch}"] = (float(np.abs(err_b).max()), float(np.abs(err_a).max()))
        print(f"       max |shape err| before {out[f'{stem}-{batch}'][0]:.1%}, after {out[f'{stem}-{batch}'][1]:.1%}")
    return out


def fit_constants(curves, comm_efficiency: float = DEFAULT_COMM_EFFICIENCY) -> dict[str, float]:
    """Least-squares calibration of overhead, hop latency and the effective sequence lengths.

    Residuals: log shape error + ``ABS_WEIGHT`` x log absolute-speed error at every measured point;
    ``comm_efficiency`` is held fixed (the curves barely constrain it, see :mod:`frenzy_env.world.throughput`).
    The sequence lengths enter continuously (FLOPs per token are affine in s).
    """
    from scipy.optimize import least_squares

    stems = sorted({c[0] for c in curves})

    def flops_per_token(model: ModelSpec, s: float) -> float:
        a, b = model.flops_per_token(128), model.flops_per_token(256)
        return a + (b - a) * (s - 128.0) / 128.0

    def times(params: np.ndarray, stem: str, batch: int, workers: np.ndarray) -> np.ndarray:
        overhead, latency = params[0], params[1] * 1e-6
        s = params[2 + stems.index(stem)]
        model = model_for(stem)
        # compute at the continuous s: the analytic model at s=1 rescaled (everything else is s-free for dp)
        base = 1.0 / analytic_speeds(
            model, batch, 1, workers, overhead_s=overhead, comm_efficiency=comm_efficiency,
            hop_latency_s=latency,
        )
        c1 = model.flops_per_token(1) * batch / (workers * 312e12 * 0.4)
        return base - c1 + flops_per_token(model, s) * batch * s / (workers * 312e12 * 0.4)

    def residuals(params: np.ndarray) -> np.ndarray:
        res = []
        for stem, batch, workers, measured in curves:
            speed = 1.0 / times(params, stem, batch, workers)
            res.append(np.log(speed / speed[0]) - np.log(measured / measured[0]))
            res.append(ABS_WEIGHT * (np.log(speed) - np.log(measured)))
        return np.concatenate(res)

    x0 = np.array([0.03, 20.0] + [256.0] * len(stems))
    lo = np.array([0.0, 0.0] + [8.0] * len(stems))
    hi = np.array([1.0, 1e4] + [4096.0] * len(stems))
    fit = least_squares(residuals, x0, bounds=(lo, hi))
    out = {"overhead_s": float(fit.x[0]), "hop_latency_s": float(fit.x[1]) * 1e-6,
           "comm_efficiency": comm_efficiency}
    out.update({f"seq_len_{s}": float(v) for s, v in zip(stems, fit.x[2:])})
    return out


def llm_scaling() -> None:
    """Print the 8 -> 64 GPU speed-up of large LLM jobs at fixed tp (memory not checked: the memory model
    has no micro-batching, so at these global batches no layout fits) and at the fastest tp in 1..8."""
    print("\n== LLM scaling, calibrated model: speed(64 GPUs) / speed(8 GPUs) at tp = 1, 2, 4, 8; fastest tp")
    tps = np.array([1, 2, 4, 8])
    for gpu in ("A100-80GB", "H100-80GB"):
        for name in ("llama-7b", "llama-2-70b"):
            for batch in (256, 1024):
                for seq in (2048, 4096):
                    t = {
                        n: iteration_time_array(
                            name, batch_size=batch, seq_len=seq, gpu=gpu, dp=n // tps, tp=tps,
                            nodes_spanned=max(1, n // GPUS_PER_NODE),
                        )  # (4,)
                        for n in (8, 64)
                    }
                    ratio = t[8] / t[64]
                    best = t[8].min() / t[64].min()
                    print(
                        f"{gpu:10s} {name:12s} B={batch:<5d} s={seq:<5d} "
                        + " ".join(f"{r:5.2f}x" for r in ratio)
                        + f"  fastest {best:5.2f}x  ({t[64].min():.2f} s/it at 64)"
                    )


#: the model before issue 16 (each GPU got its node's NIC bandwidth / GPUs per node across nodes), with the
#: constants and effective sequence lengths it was calibrated with (overhead 60 ms, 140 us per ring step)
BEFORE_CONSTANTS = {"overhead_s": 0.060, "comm_efficiency": 0.8, "hop_latency_s": 140e-6}
BEFORE_SEQ_LEN = {"gpt2": 240, "bert": 290}


def per_gpu_share(gpu: str, gpus_per_node: int = GPUS_PER_NODE) -> GPUType:
    """``gpu`` with the pre-issue-16 network: a ring across nodes runs at one GPU's share of the node's NICs.

    For pure data parallelism (tp = 1) a single NIC of ``node_network_gbps / gpus_per_node`` reproduces the
    old formula exactly (``min(k, 1) * share = share``)."""
    g = get_gpu_type(gpu)
    return replace(g, node_network_gbps=g.node_network_gbps / gpus_per_node, nics_per_node=1)


#: published nccl-tests all_reduce_perf bus bandwidths between nodes of 8 x A100 (GB/s, large messages)
PUBLISHED_BUSBW = (
    # (source, nodes, NICs x Gb/s per node, measured bus bandwidth GB/s)
    ("NVIDIA/nccl-tests#119 (avg)", 3, (4, 200), 84.8),
    ("NVIDIA/nccl-tests#119 (peak)", 3, (4, 200), 96.0),
    ("NVIDIA/nccl#1048", 2, (4, 200), 86.0),
)


def network_tables(curves) -> None:
    """Print the issue-16 comparison: measured vs model speed-ups (now / before), NCCL bus bandwidths,
    and gpt2-medium batch 64 on V100 before/after."""
    print("\n== ElasticFlow A100 (8 per node, 8 x HDR 200 Gb/s): speed-up vs 1 GPU, measured / now / before")
    old_gpu = per_gpu_share(GPU)
    for stem, batch, workers, measured in curves:
        model = model_for(stem)
        now = analytic_speeds(model, batch, FITTED_SEQ_LEN[stem], workers, **CALIBRATED)
        before = analytic_speeds(model, batch, BEFORE_SEQ_LEN[stem], workers, gpu=old_gpu, **BEFORE_CONSTANTS)
        meas, now, before = measured / measured[0], now / now[0], before / before[0]
        print(f"| {stem} B={batch} | " + " | ".join(
            f"{m:.2f} / {a:.2f} ({a / m - 1:+.0%}) / {b:.2f} ({b / m - 1:+.0%})"
            for w, m, a, b in zip(workers, meas, now, before) if w > 1
        ) + " |")
    print("\n== NCCL all-reduce bus bandwidth between 8 x A100 nodes: published vs model (eff 0.8)")
    for source, nodes, (nics, gbit), busbw in PUBLISHED_BUSBW:
        g = replace(get_gpu_type(GPU), node_network_gbps=nics * gbit / 8.0, nics_per_node=nics)
        ring = dp_ring_bandwidth_gbps(nodes * 8, 1, nodes, g) * DEFAULT_COMM_EFFICIENCY
        old = dp_ring_bandwidth_gbps(nodes * 8, 1, nodes, per_gpu_share(g)) * DEFAULT_COMM_EFFICIENCY
        print(f"| {source} | {nodes} x 8 | {nics} x {gbit} Gb/s | {busbw:.1f} | {float(ring):.1f} "
              f"({float(ring) / busbw - 1:+.0%}) | {float(old):.1f} ({float(old) / busbw - 1:+.0%}) |")
    print("\n== gpt2-medium, batch 64, seq 1024, V100-32GB (8 per node, DGX-1V 4 x EDR): seconds per iteration")
    old_v100 = per_gpu_share("V100-32GB")
    for n, span in ((8, 1), (8, 2), (16, 2), (16, 4), (32, 4), (64, 8)):
        kw = dict(batch_size=64, seq_len=1024, dp=np.array([n]), tp=np.array([1]), nodes_spanned=span)
        before = float(iteration_time_array("gpt2-medium", gpu=old_v100, **kw, **BEFORE_CONSTANTS)[0])
        now = float(iteration_time_array("gpt2-medium", gpu="V100-32GB", **kw)[0])
        print(f"| {n} GPUs on {span} node(s) | {before:.3f} | {now:.3f} | {before / now:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--fit", action="store_true", help="re-run the calibration and print the constants")
    parser.add_argument("--llm", action="store_true", help="print LLM 8 -> 64 GPU speed-ups")
    parser.add_argument("--nnls", action="store_true", help="also fit the Capes et al. f(w) to each curve")
    parser.add_argument("--network", action="store_true", help="print the issue-16 network comparison tables")
    args = parser.parse_args()
    if args.data is None:
        raise SystemExit("no shared data folder: pass --data (or set FRENZY_ENV_DATA)")
    if not (args.data / "gpt2.csv").exists():
        raise SystemExit(f"no measured throughputs at {args.data} (pass --data)")
    curves = load_curves(args.data)
    if args.fit:
        fitted = fit_constants(curves)
        print("fitted constants:", ", ".join(f"{k}={v:.4g}" for k, v in fitted.items()))
    compare(curves, nnls=args.nnls)
    if args.llm:
        llm_scaling()
    if args.network:
        network_tables(curves)


if __name__ == "__main__":
    main()
