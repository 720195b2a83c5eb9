"""What each memory predictor costs when the simulator's truth is not one of them (``memory_truth="residual"``).

For each workload, policy, predictor setting and seed it plays one episode on ``frenzy-testbed`` with
``FrenzyEnv(memory_truth="residual", predictor=..., memory_margin=...)`` (scripted policies with every job
within reach, as ``frenzy evaluate`` runs them) and prints OOM failures, GPU-hours lost to them and the
average JCT of the finished jobs, mean ± 95% half-width over the seeds (the same seeds, hence the same per-job
memory factors, for every row), and the jobs rejected per seed (a job that failed with out-of-memory on every
plan its predictor allowed is rejected, and is not in the JCT). Settings: the paper's formula (``frenzy``),
``extended``, ``oracle``, and ``extended`` with a 10% margin; ``--with-estimate`` adds ``extended`` under
env v4's truth (``memory_truth="estimate"``).

Usage: ``python scripts/memory_truth_table.py [--workloads itp-default,synthetic] [--policies
frenzy,fifo,doubling] [--seeds 3] [--with-estimate] [--csv OUT]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from frenzy_env.paths import atomic_write_csv

SETTINGS = {
    "frenzy": dict(predictor="frenzy"),
    "extended": dict(predictor="extended"),
    "oracle": dict(predictor="oracle"),
    "extended+margin0.1": dict(predictor="extended", memory_margin=0.1),
}


def main(argv: list[str] | None = None) -> int:
    from frenzy_env.cli.policies import _builtin_factory
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import confidence_interval, evaluate, format_ci

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="itp-default,synthetic")
    ap.add_argument("--policies", default="frenzy,fifo,doubling")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cluster", default="frenzy-testbed")
    ap.add_argument("--with-estimate", action="store_true")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args(argv)
    settings = dict(SETTINGS)
    if args.with_estimate:
        settings["extended (v4 truth)"] = dict(predictor="extended", memory_truth="estimate")
    policies = {name: _builtin_factory(name) for name in args.policies.split(",")}
    rows = []
    for label, kw in settings.items():
        kw = {"memory_truth": "residual", **kw}
        t0 = time.time()

        def make_env(workload: str, _kw=kw, **overrides):
            return FrenzyEnv(cluster=args.cluster, workload=workload, **_kw, **overrides)

        _, episodes = evaluate(make_env, policies, args.workloads.split(","), range(args.seeds), progress=False)
        episodes["setting"] = label
        rows.append(episodes)
        print(f"# {label}: {len(episodes)} episodes in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    table = pd.concat(rows, ignore_index=True)
    if args.csv:
        atomic_write_csv(args.csv, table)
    print("| workload | policy | predictor | OOM failures | lost GPU-hours | avg JCT (h) | rejected |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (wl, pol), grp in table.groupby(["workload", "policy"], sort=False):
        for label in settings:
            g = grp[grp["setting"] == label]
            cells = [format_ci(*confidence_interval(g[m])) for m in ("ooms", "lost_gpu_hours", "avg_jct_h")]
            cells.append("/".join(str(int(x)) for x in g.sort_values("seed")["rejected"]))
            print(f"| {wl} | {pol} | {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
