"""Each memory predictor's out-of-memory rate and the safety margin that removes 99% of its failures, under the
memory truths ``"residual"`` (env v5's) and ``"published"`` (:mod:`frenzy_env.world.memory.published_truth`).

Plan tables (cheap: no episode is played): for each workload, seed, truth and predictor the simulator's plan
table on the cluster (``SimConfig(predictor=..., memory_truth=..., memory_margin=m)``) gives, per job and plan
slot, whether the predictor admits the slot's chosen layout (``pred_ok``) and whether it truly fits
(``true_ok``). Printed, pooled over the seeds: the admitted (job, slot) pairs, the share of them that truly do
not fit at margin 0 (the OOM rate), the predictor's signed error against the truth on them (the 1st, 50th and
99th percentiles and the extremes of ``predicted / true - 1`` at each pair's chosen layout), the smallest
margin (to 0.005, by bisection) at which at most 1% of the margin-0 failures remain, and the share of the
margin-0 admitted pairs that margin still admits.

Episodes (``--episodes``, a few): the mean OOM failures per episode of scripted policies (every job within
reach, as ``frenzy evaluate`` runs them) at margin 0 and at the plan tables' 99% margin, the same seeds for
every row (paired factors).

Usage: ``python scripts/memory_truth_margins.py [--workloads itp-default,synthetic] [--seeds 3]
[--cluster frenzy-testbed] [--episodes fifo,frenzy] [--fragmentation-max F] [--csv OUT]`` (3 minutes on two
cores with the defaults; ``--episodes ''`` plays none).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from frenzy_env.paths import atomic_write_csv

TRUTHS = ("residual", "published")
PREDICTORS = ("frenzy", "extended", "oracle")
RESIDUAL_SHARE = 0.01  # the margin removes all but this share of the margin-0 failures
TOLERANCE = 0.005  # bisection resolution of the margin


def _sims(cluster: str, workload: str, seeds: list[int]) -> list:
    """One simulator per seed (the default world): its jobs, workload and seed build the plan tables."""
    from frenzy_env.env import FrenzyEnv

    env = FrenzyEnv(cluster=cluster, workload=workload)
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append((env.sim, seed))
    return out


def _tables(sims: list, predictor: str, truth: str, margin: float) -> list:
    from frenzy_env.simulator import SimConfig
    from frenzy_env.simulator.plans import PlanTable

    cfg = SimConfig(predictor=predictor, memory_truth=truth, memory_margin=margin)
    return [PlanTable(sim.cluster, sim.jobs, sim.workload, cfg, seed) for sim, seed in sims]


def _counts(tables: list) -> tuple[int, int]:
    """(admitted pairs, admitted pairs that truly do not fit), pooled over the tables."""
    admitted = sum(int(t.pred_ok.sum()) for t in tables)
    fails = sum(int((t.pred_ok & ~t.true_ok).sum()) for t in tables)
    return admitted, fails


def _errors(sims: list, tables: list, predictor: str, truth: str) -> np.ndarray:
    """``predicted / true - 1`` at the chosen layout of every admitted (job, slot) pair, pooled."""
    from frenzy_env.world.memory.estimator import estimate_memory_layouts
    from frenzy_env.world.memory.published_truth import true_peak_layouts

    out = []
    for (sim, _), t in zip(sims, tables):
        for j, job in enumerate(sim.jobs):
            slots = np.flatnonzero(t.pred_ok[j])
            if not slots.size:
                continue
            row = t._row_key_l[j]
            tp = t.layout_tp[j, slots].astype(np.float64)
            pp = np.array([t._row_pp_l[row][p] for p in slots], dtype=np.float64)
            mb = np.array([t._row_mb_l[row][p] for p in slots], dtype=np.float64)
            dp = t.plan_count[slots] / (tp * pp)
            lay = {"dp": dp, "tp": tp, "pp": pp, "micro_batch": mb}
            kw = {"batch_size": int(job.batch_size), "seq_len": int(job.seq_len)}
            est = estimate_memory_layouts(job.model, **kw, **lay)
            factor = float(t.memory_factor[j])
            true = true_peak_layouts(job.model, **kw, factor=factor, **lay) if truth == "published" else est * factor
            if predictor == "oracle":
                pred = true
            elif predictor == "extended":
                pred = est
            else:
                pred = estimate_memory_layouts(job.model, **kw, method="frenzy", **lay)
            out.append(pred / true - 1.0)
    return np.concatenate(out) if out else np.zeros(0)


def _margin_99(sims: list, predictor: str, truth: str, fails0: int) -> tuple[float, int, int]:
    """The smallest margin (to :data:`TOLERANCE`) leaving at most :data:`RESIDUAL_SHARE` of ``fails0``, with
    its (admitted, fails)."""
    allowed = RESIDUAL_SHARE * fails0
    lo, hi = 0.0, 0.9
    best = _counts(_tables(sims, predictor, truth, hi))
    while hi - lo > TOLERANCE:
        mid = round((lo + hi) / 2, 4)
        counts = _counts(_tables(sims, predictor, truth, mid))
        if counts[1] <= allowed:
            hi, best = mid, counts
        else:
            lo = mid
    return hi, *best


def plan_table_report(cluster: str, workloads: list[str], seeds: list[int]) -> pd.DataFrame:
    """One row per (workload, truth, predictor): see the module docstring."""
    rows = []
    for wl in workloads:
        sims = _sims(cluster, wl, seeds)
        for truth in TRUTHS:
            for predictor in PREDICTORS:
                t0 = time.time()
                tables = _tables(sims, predictor, truth, 0.0)
                admitted, fails = _counts(tables)
                err = _errors(sims, tables, predictor, truth)
                if fails:
                    margin, adm_m, fails_m = _margin_99(sims, predictor, truth, fails)
                else:
                    margin, adm_m, fails_m = 0.0, admitted, 0
                q = np.quantile(err, [0.0, 0.01, 0.5, 0.99, 1.0]) if err.size else [np.nan] * 5
                rows.append({
                    "workload": wl, "truth": truth, "predictor": predictor, "admitted": admitted, "fails": fails,
                    "oom_rate": fails / admitted if admitted else np.nan, "err_min": q[0], "err_p01": q[1],
                    "err_p50": q[2], "err_p99": q[3], "err_max": q[4], "margin_99": margin, "fails_at_margin": fails_m,
                    "admitted_kept": adm_m / admitted if admitted else np.nan,
                })
                print(f"# {wl} {truth} {predictor}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def episode_report(cluster: str, workloads: list[str], seeds: list[int], policies: list[str], margins: pd.DataFrame):
    """Mean OOM failures per episode per (workload, policy, truth, predictor) at margin 0 and at the plan
    tables' 99% margin of that (workload, truth, predictor)."""
    from frenzy_env.cli.policies import _builtin_factory
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import evaluate

    factories = {name: _builtin_factory(name) for name in policies}
    rows = []
    for wl in workloads:
        for truth in TRUTHS:
            for predictor in PREDICTORS:
                sel = margins[(margins.workload == wl) & (margins.truth == truth) & (margins.predictor == predictor)]
                m99 = float(sel["margin_99"].iloc[0])
                for label, margin in (("0", 0.0), ("99", m99)):
                    if label == "99" and m99 == 0.0:
                        continue
                    kw = {"predictor": predictor, "memory_truth": truth, "memory_margin": margin}

                    def make_env(workload: str, _kw=kw, **overrides):
                        return FrenzyEnv(cluster=cluster, workload=workload, **_kw, **overrides)

                    _, eps = evaluate(make_env, factories, [wl], seeds, progress=False)
                    for pol, grp in eps.groupby("policy", sort=False):
                        rows.append({"workload": wl, "policy": pol, "truth": truth, "predictor": predictor,
                                     "margin": margin, "at": label, "ooms_mean": float(grp["ooms"].mean()),
                                     "ooms_max": int(grp["ooms"].max()), "avg_jct_h": float(grp["avg_jct_h"].mean()),
                                     "rejected": int(grp["rejected"].sum())})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="itp-default,synthetic")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cluster", default="frenzy-testbed")
    ap.add_argument("--episodes", default="fifo,frenzy", help="policies to play ('' for none)")
    ap.add_argument("--csv", default=None, help="write the plan-table rows here (and the episodes beside it)")
    ap.add_argument("--fragmentation-max", type=float, default=None,
                    help="replace published_truth.FRAGMENTATION_MAX (0: no allocator draw), for a sensitivity run")
    args = ap.parse_args(argv)
    if args.fragmentation_max is not None:
        from frenzy_env.world.memory import published_truth

        published_truth.FRAGMENTATION_MAX = args.fragmentation_max
    workloads, seeds = args.workloads.split(","), list(range(args.seeds))
    table = plan_table_report(args.cluster, workloads, seeds)
    print("| workload | truth | predictor | admitted | OOM rate | error p1 / p50 / p99 (min .. max) "
          "| 99% margin | admitted kept |")
    print("|---|---|---|---:|---:|---|---:|---:|")
    for r in table.itertuples():
        err = f"{r.err_p01:+.1%} / {r.err_p50:+.1%} / {r.err_p99:+.1%} ({r.err_min:+.1%} .. {r.err_max:+.1%})"
        print(f"| {r.workload} | {r.truth} | {r.predictor} | {r.admitted:,} | {r.oom_rate:.2%} ({r.fails:,}) | {err} "
              f"| {r.margin_99:.3f} | {r.admitted_kept:.1%} |")
    if args.csv:
        atomic_write_csv(args.csv, table)
    if args.episodes:
        eps = episode_report(args.cluster, workloads, seeds, args.episodes.split(","), table)
        print("\n| workload | policy | predictor | residual: OOMs, margin 0 | at its 99% margin "
              "| published: OOMs, margin 0 | at its 99% margin | published: avg JCT (h), margin 0 |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for (wl, pol, pred), g in eps.groupby(["workload", "policy", "predictor"], sort=False):
            cells = []
            for truth in TRUTHS:
                at = g[g["truth"] == truth].set_index("at")
                cells.append(f"{at.loc['0', 'ooms_mean']:.1f}")
                m99 = f"{at.loc['99', 'ooms_mean']:.1f} ({at.loc['99', 'margin']:.3f})" if "99" in at.index else "-"
                cells.append(m99)
            jct = g[(g["truth"] == "published") & (g["at"] == "0")]["avg_jct_h"].iloc[0]
            print(f"| {wl} | {pol} | {pred} | " + " | ".join(cells) + f" | {jct:.1f} |")
        if args.csv:
            atomic_write_csv(str(args.csv).removesuffix(".csv") + "_episodes.csv", eps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
