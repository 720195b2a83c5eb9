"""Compare the throughput model's scaling shape with measured A100 throughputs (ElasticFlow).

Reads ``shared/data/throughput/elasticflow_a100/{gpt2,bert}.csv`` (iterations/s at 1..64 A100 GPUs for
given global batch sizes; Apache-2.0, pkusys/ElasticFlow) and prints, for every measured point, the
relative error of the scaling shape ``speed(w) / speed(1)``:

(a) the analytic model of :mod:`frenzy_env.throughput` (pure data parallelism, 8 GPUs per node, A100-80GB)
    for the GPT-2 (124M) shape, and for BERT a BERT-base shape, at the CSV's global batch sizes;
(b) the Capes et al. speed model f(w) fitted by NNLS to the measured points themselves (shape error, and
    the error on the absolute speed).

Usage: ``python scripts/compare_throughput.py [--data DIR] [--seq-len 1024] [--bert-seq-len 512]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from frenzy_env.models import custom_model, get_model
from frenzy_env.throughput import fit_speed_model, iteration_time_array

DEFAULT_DATA = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "throughput" / "elasticflow_a100"
)
GPU = "A100-80GB"
GPUS_PER_NODE = 8
# ElasticFlow's BERT job is BERT-base (Devlin et al. 2019: L=12, H=768, A=12), not in the catalogue.
BERT_BASE = custom_model(
    vocab_size=30522, hidden=768, layers=12, heads=12, max_seq_len=512, arch="encoder", name="bert-base"
)


def analytic_speeds(model, batch: int, seq_len: int, workers: np.ndarray) -> np.ndarray:
    """(W,) iterations/s of the analytic model at ``workers`` data-parallel GPUs."""
    t = iteration_time_array(
        model,
        batch_size=batch,
        seq_len=seq_len,
        gpu=GPU,
        dp=workers,
        tp=np.ones_like(workers),
        nodes_spanned=-(-workers // GPUS_PER_NODE),
    )
    return 1.0 / t


def fmt(values: np.ndarray) -> str:
    return " ".join(f"{v:+7.1%}" for v in values)


def compare(path: Path, model, seq_len: int) -> dict[str, list[float]]:
    table = pd.read_csv(path)
    workers = np.array([int(c) for c in table.columns[1:]])  # (W,)
    print(f"\n== {path.name}: model {model.name} ({model.num_params / 1e6:.0f}M), seq_len {seq_len}, {GPU}")
    print(f"{'':28s}" + " ".join(f"{'w=' + str(w):>7s}" for w in workers))
    out: dict[str, list[float]] = {}
    for _, row in table.iterrows():
        batch = int(row.iloc[0])
        measured = row.iloc[1:].to_numpy(dtype=float)  # (W,) iterations/s
        shape_meas = measured / measured[0]
        shape_model = analytic_speeds(model, batch, seq_len, workers)
        shape_model = shape_model / shape_model[0]
        fit = fit_speed_model(workers, measured, m=batch, n=model.num_params)
        fitted = np.asarray(fit(workers))
        err_a = shape_model / shape_meas - 1.0
        err_b = (fitted / fitted[0]) / shape_meas - 1.0
        err_abs = fitted / measured - 1.0
        print(f"B={batch:<4d} measured speedup      " + " ".join(f"{v:7.2f}" for v in shape_meas))
        print(f"B={batch:<4d} analytic speedup      " + " ".join(f"{v:7.2f}" for v in shape_model))
        print(f"B={batch:<4d} (a) analytic shape err " + fmt(err_a))
        print(f"B={batch:<4d} (b) NNLS f(w) shape err" + fmt(err_b))
        print(f"B={batch:<4d} (b) NNLS f(w) speed err" + fmt(err_abs))
        print(
            f"       theta = {', '.join(f'{t:.3g}' for t in fit.theta)}; mean |err| (a) "
            f"{np.abs(err_a).mean():.1%}, (b) shape {np.abs(err_b).mean():.1%}, "
            f"speed {np.abs(err_abs).mean():.1%}"
        )
        out[f"{path.stem}-{batch}"] = [float(np.abs(err_a).mean()), float(np.abs(err_abs).mean())]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seq-len", type=int, default=1024, help="GPT-2 sequence length (not in the CSV)")
    parser.add_argument("--bert-seq-len", type=int, default=512, help="BERT sequence length (not in the CSV)")
    args = parser.parse_args()
    if not (args.data / "gpt2.csv").exists():
        raise SystemExit(f"no measured throughputs at {args.data} (pass --data)")
    compare(args.data / "gpt2.csv", get_model("gpt2"), args.seq_len)
    if (args.data / "bert.csv").exists():
        compare(args.data / "bert.csv", BERT_BASE, args.bert_seq_len)


if __name__ == "__main__":
    main()
