"""Does queue order matter? The queue-order baselines on a suite's workloads at the fluid and at the busy load.

For each load mode (``fluid``: the offered load of frenzy_env.workload.load, the suites' default; ``busy``: the
share of the cluster's GPUs FIFO keeps busy over the arrival window, "Busy load" there), every policy plays every
workload of the suite (same seeds and trace windows) and the script prints, per mode, one row per policy: the
mean average JCT with its 95% t-interval and the paired ratios to ``fifo`` and to ``srpt_est`` (geometric mean
over the workloads of the per-workload ratio, 95% t-interval on the log ratios), then FIFO's pressure (share of
jobs that wait over a minute, GPUs' busy fraction over the arrival window, measured in the simulator; and the
busy fraction of the FIFO model the busy load is calibrated on). A workload whose busy load FIFO cannot reach
(frenzy_env.workload.load.busy_stretch) is left out of that mode, with the reason printed.

    FRENZY_ENV_CACHE=... python scripts/queue_order_load.py --suite v5-test
    python scripts/queue_order_load.py --suite v5-test --only 0,1,10 --trace-load 0.6
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time

import numpy as np
import pandas as pd

from baselines import make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import confidence_interval, run_episode
from frenzy_env.evaluation.results import format_ratio, paired_ratio, queue_pressure
from frenzy_env.workload.load import fifo_report
from frenzy_env.workload.suites import get_suite, suite_workloads
from frenzy_env.world.cluster import ClusterSpec

POLICIES = "fifo,sjf,spwf,fifo_he,sjf_he,asrpt,srpt_est"


def _suite_at(suite, mode: str, synthetic_load: float | None, trace_load: float | None):
    """The suite in load mode ``mode``, its loads replaced where given."""
    syn = suite.synthetic
    if syn is not None and synthetic_load is not None:
        syn = dataclasses.replace(syn, load=synthetic_load)
    traces = tuple(t if trace_load is None else dataclasses.replace(t, load=trace_load) for t in suite.traces)
    return dataclasses.replace(suite, synthetic=syn, traces=traces, load_mode=mode)


def run_mode(suite, policies: list[str], only: list[int] | None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(episodes: workload, seed, policy, avg_jct_h; pressure: workload, seed, wait_frac, busy_frac, model_busy;
    the workloads left out, with why)."""
    cluster = ClusterSpec.preset(suite.cluster)
    items = suite_workloads(suite)
    rows, pressure, skipped = [], [], []
    for k, item in enumerate(items):
        if only is not None and k not in only:
            continue
        try:
            workload = item.generator.generate(item.seed)
        except ConfigError as exc:
            skipped.append(str(exc))
            continue
        for policy in policies:
            env = FrenzyEnv(cluster=cluster, workload=item.generator)
            result = run_episode(env, make_policy(policy, env), seed=item.seed)
            rows.append({"workload": item.name, "seed": item.seed, "policy": policy,
                         "avg_jct_h": result.metrics["avg_jct_h"]})
            if policy == "fifo":
                wait, busy = queue_pressure(result.jobs, result.attempts, cluster.num_gpus)
                cfg = env.unwrapped.sim.config
                model = fifo_report(workload, cluster, utilisation=cfg.utilisation, max_gpus=cfg.max_plan_gpus,
                                    efficiency=cfg.efficiency)
                pressure.append({"workload": item.name, "seed": item.seed, "wait_frac": wait, "busy_frac": busy,
                                 "model_busy": model.busy_frac,
                                 "offered_load": result.metrics["offered_load_ratio"]})
    return pd.DataFrame(rows), pd.DataFrame(pressure), skipped


def table(episodes: pd.DataFrame, policies: list[str]) -> str:
    jct = episodes.pivot_table(index=["workload", "seed"], columns="policy", values="avg_jct_h", aggfunc="first")
    lines = ["| policy | n | avg JCT (h) | / fifo (paired) | / srpt_est (paired) |", "|---|---|---|---|---|"]
    for p in policies:
        mean, half = confidence_interval(jct[p].tolist())
        jct_cell = f"{mean:.2f} ± {half:.2f}" if math.isfinite(half) else f"{mean:.2f}"
        cells = [f"`{p}`", str(jct[p].notna().sum()), jct_cell]
        for ref in ("fifo", "srpt_est"):
            cells.append(format_ratio(*paired_ratio(jct[p], jct[ref])) if ref in jct and p != ref else "1")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def spread(v: pd.Series) -> str:
    return f"{np.nanmean(v):.0%} ({np.nanmin(v):.0%} - {np.nanmax(v):.0%})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="v5-test")
    ap.add_argument("--policies", default=POLICIES, help=f"comma-separated, fifo and srpt_est among them ({POLICIES})")
    ap.add_argument("--modes", default="fluid,busy")
    ap.add_argument("--only", default=None, help="indices of the suite's workloads to run (default: all)")
    ap.add_argument("--synthetic-load", type=float, default=None, help="busy mode: the synthetic load (default: "
                    "the suite's)")
    ap.add_argument("--trace-load", type=float, default=None, help="busy mode: the trace windows' load (default: "
                    "the suite's)")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    only = None if args.only is None else [int(x) for x in args.only.split(",")]
    base = get_suite(args.suite)
    for mode in args.modes.split(","):
        t0 = time.perf_counter()
        loads = (None, None) if mode == "fluid" else (args.synthetic_load, args.trace_load)
        suite = _suite_at(base, mode, *loads)
        episodes, pressure, skipped = run_mode(suite, policies, only)
        print(f"\n## {suite.describe()}  [{time.perf_counter() - t0:.0f} s]\n")
        print(table(episodes, policies))
        print(f"\nFIFO in the simulator: {spread(pressure['wait_frac'])} of jobs wait over a minute; GPUs busy "
              f"{spread(pressure['busy_frac'])} of the arrival window (the FIFO model: "
              f"{spread(pressure['model_busy'])}); offered (fluid) load {pressure['offered_load'].mean():.2f} "
              f"({pressure['offered_load'].min():.2f} - {pressure['offered_load'].max():.2f}).")
        for line in skipped:
            print(f"left out: {line}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
