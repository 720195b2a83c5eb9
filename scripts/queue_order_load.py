"""Does queue order matter? The queue-order baselines on a suite's workloads at its loads in several load modes.

For each load mode (``fluid``: the offered load of frenzy_env.workload.load, the suites' default; ``busy``: the
share of the cluster's GPUs FIFO keeps busy over the arrival window, "Busy load" there; ``wait``: the share of the
jobs that wait over a minute under FIFO, "Wait load" there), every policy plays every
workload of the suite (same seeds and trace windows) and the script prints, per mode, one row per policy: the
mean average JCT with its 95% t-interval and the paired ratios to ``fifo`` and to ``srpt_est`` (geometric mean
over the workloads of the per-workload ratio, 95% t-interval on the log ratios), then FIFO's pressure (share of
jobs that wait over a minute, GPUs' busy fraction over the arrival window, share of the jobs' time spent waiting,
measured in the simulator; and the same three of the FIFO model the loads are calibrated on). A workload whose load
FIFO cannot reach (frenzy_env.workload.load.pressure_stretch) is left out of that mode, with the reason printed.

    FRENZY_ENV_CACHE=... python scripts/queue_order_load.py --suite v5-test
    python scripts/queue_order_load.py --suite v5-test --only 0,1,10 --trace-load 0.6
    python scripts/queue_order_load.py --suite v5-test --modes wait --synthetic-load 0.5 --trace-load 0.3
    python scripts/queue_order_load.py --suite v5-test --modes wait --synthetic-load 0.6 --trace-load 0.6 \
        --trace-jobs 300
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time

import numpy as np
import pandas as pd

from baselines import make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import confidence_interval, run_episode
from frenzy_env.evaluation.results import format_ratio, paired_ratio, queue_pressure
from frenzy_env.workload.load import delay_share, fifo_report
from frenzy_env.workload.suites import get_suite, suite_workloads
from frenzy_env.world.cluster import ClusterSpec

POLICIES = "fifo,sjf,spwf,fifo_he,sjf_he,asrpt,srpt_est"


def _suite_at(suite, mode: str, synthetic_load: float | None, trace_load: float | None, trace_jobs: int | None = None):
    """The suite in load mode ``mode``, its loads (and its trace windows' job count) replaced where given."""
    syn = suite.synthetic
    if syn is not None and synthetic_load is not None:
        syn = dataclasses.replace(syn, load=synthetic_load)
    traces = tuple(t if trace_load is None else dataclasses.replace(t, load=trace_load) for t in suite.traces)
    if trace_jobs is not None:
        traces = tuple(dataclasses.replace(t, max_jobs=trace_jobs) for t in traces)
    return dataclasses.replace(suite, synthetic=syn, traces=traces, load_mode=mode)


def run_mode(suite, policies: list[str], only: list[int] | None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(episodes: workload, seed, policy, avg_jct_h; pressure: workload, seed, wait_frac, busy_frac, model_busy,
    delay_frac, model_wait, model_delay, offered_load;
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
                jobs = result.jobs
                sub = np.array([j.submit_time for j in workload.jobs])
                pressure.append({"workload": item.name, "seed": item.seed, "wait_frac": wait, "busy_frac": busy,
                                 "delay_frac": delay_share(jobs["submit_time_s"], jobs["start_time_s"],
                                                           jobs["finish_time_s"]),
                                 "model_busy": model.busy_frac, "model_wait": model.wait_frac,
                                 "model_delay": delay_share(sub, model.start, model.finish),
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
    ap.add_argument("--modes", default="fluid,busy", help="comma-separated: fluid, busy, wait")
    ap.add_argument("--trace-jobs", type=int, default=None, help="jobs per trace window (default: the suite's)")
    ap.add_argument("--out", default=None, help="a folder to write each mode's episodes and pressure CSVs to")
    ap.add_argument("--only", default=None, help="indices of the suite's workloads to run (default: all)")
    ap.add_argument("--synthetic-load", type=float, default=None, help="busy and wait modes: the synthetic "
                    "load (default: the suite's)")
    ap.add_argument("--trace-load", type=float, default=None, help="busy and wait modes: the trace "
                    "windows' load (default: the suite's)")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    only = None if args.only is None else [int(x) for x in args.only.split(",")]
    base = get_suite(args.suite)
    for mode in args.modes.split(","):
        t0 = time.perf_counter()
        loads = (None, None) if mode == "fluid" else (args.synthetic_load, args.trace_load)
        suite = _suite_at(base, mode, *loads, args.trace_jobs)
        episodes, pressure, skipped = run_mode(suite, policies, only)
        print(f"\n## {suite.describe()}  [{time.perf_counter() - t0:.0f} s]\n")
        print(table(episodes, policies))
        print(f"\nFIFO in the simulator: {spread(pressure['wait_frac'])} of jobs wait over a minute; GPUs busy "
              f"{spread(pressure['busy_frac'])} of the arrival window; jobs wait "
              f"{spread(pressure['delay_frac'])} of their time in the system (the FIFO model: "
              f"{spread(pressure['model_busy'])} busy, {spread(pressure['model_wait'])} wait, "
              f"{spread(pressure['model_delay'])} delay); offered (fluid) load "
              f"{pressure['offered_load'].mean():.2f} "
              f"({pressure['offered_load'].min():.2f} - {pressure['offered_load'].max():.2f}).")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            episodes.to_csv(os.path.join(args.out, f"{mode}-episodes.csv"), index=False)
            pressure.to_csv(os.path.join(args.out, f"{mode}-pressure.csv"), index=False)
        for line in skipped:
            print(f"left out: {line}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
