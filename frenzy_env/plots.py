"""Plots of evaluation results (``frenzy evaluate --out DIR`` calls :func:`plot_results`).

Three PNG files, one panel per workload:

* ``jct_cdf.png``: the empirical CDF of job completion time (hours, log scale) of each policy, every seed
  pooled; rejected jobs (no finish time) are left out.
* ``utilisation.png``: busy GPUs over time of each policy (its first seed), as a fraction of the cluster when
  the cluster size can be recovered from the episode table (``gpu_hours / (utilisation x makespan)``), else
  as a GPU count. It is rebuilt from the per-job table as a step function: each job holds, from its first
  start to its finish, its average GPU count ``gpu_hours / (finish - start)`` -- exactly ``num_gpus`` for a
  job never resized; for a resized job the average keeps its GPU-hours right but smooths its resizes
  (and counts waits between an out-of-memory crash and the restart as busy).
* ``bars.png``: average JCT (hours) and GPU-hours of each policy, mean over seeds with the 95% confidence
  interval of the summary as error bars.

matplotlib is imported inside the function (Agg backend), so importing this module costs nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

PLOT_FILES = ("jct_cdf.png", "utilisation.png", "bars.png")


def _workloads(frame: Any) -> list:
    return list(dict.fromkeys(frame["workload"])) if "workload" in frame else [None]


def _subset(frame: Any, workload: Any) -> Any:
    return frame if workload is None else frame[frame["workload"] == workload]


def busy_timeline(jobs: Any) -> tuple[np.ndarray, np.ndarray]:
    """Step function of busy GPUs from a per-job table (one policy, one seed).

    Returns ``(times, busy)``: busy GPUs on ``[times[i], times[i+1])``, both (E,) float64, seconds.
    """
    ran = jobs[np.isfinite(jobs["start_time"].to_numpy(float)) & np.isfinite(jobs["finish_time"].to_numpy(float))]
    start = ran["start_time"].to_numpy(float)
    finish = ran["finish_time"].to_numpy(float)
    gpus = ran["num_gpus"].to_numpy(float)
    if "gpu_hours" in ran:
        held = finish - start
        avg = np.where(held > 0, ran["gpu_hours"].to_numpy(float) * 3600.0 / np.maximum(held, 1e-12), gpus)
        gpus = np.where(np.isfinite(avg) & (avg > 0), avg, gpus)
    if start.size == 0:
        return np.zeros(1), np.zeros(1)
    times = np.concatenate([start, finish])  # (2n,)
    delta = np.concatenate([gpus, -gpus])
    order = np.argsort(times, kind="stable")
    times, delta = times[order], np.cumsum(delta[order])
    last = np.r_[times[1:] != times[:-1], True]  # keep the level after the last change at each instant
    return times[last], np.maximum(delta[last], 0.0)


def _cluster_gpus(episodes: Any, workload: Any, policy: str) -> float:
    rows = _subset(episodes, workload)
    rows = rows[rows["policy"] == policy] if "policy" in rows else rows
    try:
        r = rows.iloc[0]
        value = float(r["gpu_hours"]) * 3600.0 / (float(r["utilisation"]) * float(r["makespan"]))
    except (KeyError, IndexError, ZeroDivisionError, TypeError, ValueError):
        return math.nan
    return round(value) if math.isfinite(value) and value > 0 else math.nan


def plot_results(jobs: Any, episodes: Any, summary: Any, out_dir: str | Path) -> list[Path]:
    """Write :data:`PLOT_FILES` into ``out_dir``; returns their paths.

    Parameters
    ----------
    jobs: per-job table (:data:`frenzy_env.evaluation.JOB_COLUMNS` plus ``workload``, ``policy``, ``seed``).
    episodes: per-episode table (metrics plus ``workload``, ``policy``, ``seed``).
    summary: :func:`frenzy_env.evaluation.summarise` of ``episodes``.
    out_dir: directory (created if missing).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    workloads = _workloads(jobs)
    policies = list(dict.fromkeys(jobs["policy"])) if "policy" in jobs else ["policy"]
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(policies)}
    rows = len(workloads)
    paths = []

    # --- JCT CDF
    fig, axes = plt.subplots(rows, 1, figsize=(7.5, 3.6 * rows), squeeze=False)
    for ax, wl in zip(axes[:, 0], workloads):
        sub = _subset(jobs, wl)
        for pol in policies:
            jct = sub[sub["policy"] == pol]["jct"].to_numpy(float) if "policy" in sub else sub["jct"].to_numpy(float)
            jct = np.sort(jct[np.isfinite(jct)]) / 3600.0
            if jct.size == 0:
                continue
            ax.step(np.maximum(jct, 1e-3), np.arange(1, jct.size + 1) / jct.size, where="post", label=pol,
                    color=colours[pol], linewidth=1.6)
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (hours, log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"JCT CDF{'' if wl is None else f' -- {wl}'}")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    paths.append(out / PLOT_FILES[0])
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # --- utilisation over time (first seed of each policy)
    fig, axes = plt.subplots(rows, 1, figsize=(9, 3.4 * rows), squeeze=False)
    for ax, wl in zip(axes[:, 0], workloads):
        sub = _subset(jobs, wl)
        as_fraction = True
        for pol in policies:
            pj = sub[sub["policy"] == pol] if "policy" in sub else sub
            if "seed" in pj and len(pj):
                pj = pj[pj["seed"] == pj["seed"].iloc[0]]
            times, busy = busy_timeline(pj)
            total = _cluster_gpus(episodes, wl, pol)
            if not math.isfinite(total):
                as_fraction = False
            level = busy / total if as_fraction else busy
            t0 = float(pj["submit_time"].min()) if len(pj) else 0.0
            ax.step((times - t0) / 3600.0, level, where="post", label=pol, color=colours[pol], linewidth=1.1,
                    alpha=0.85)
        ax.set_xlabel("time since first submission (hours)")
        ax.set_ylabel("busy GPUs (fraction)" if as_fraction else "busy GPUs")
        if as_fraction:
            ax.set_ylim(0, 1.05)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"Utilisation over time (first seed){'' if wl is None else f' -- {wl}'}")
        ax.legend(loc="upper right", fontsize=8, ncol=min(3, len(policies)))
    fig.tight_layout()
    paths.append(out / PLOT_FILES[1])
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # --- bars with CI
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.6 * rows), squeeze=False)
    for r, wl in enumerate(workloads):
        sub = _subset(summary, wl)
        names = list(sub["policy"]) if "policy" in sub else ["policy"]
        x = np.arange(len(names))
        for c, (metric, scale, label) in enumerate(
            (("avg_jct", 1 / 3600.0, "average JCT (hours)"), ("gpu_hours", 1.0, "GPU-hours"))
        ):
            ax = axes[r, c]
            mean = sub[metric].to_numpy(float) * scale if metric in sub else np.zeros(len(names))
            ci_col = f"{metric}_ci95"
            err = sub[ci_col].to_numpy(float) * scale if ci_col in sub else np.zeros(len(names))
            err = np.where(np.isfinite(err), err, 0.0)
            ax.bar(x, mean, yerr=err, capsize=4, color=[colours.get(n, "grey") for n in names])
            ax.set_xticks(x, names, rotation=20, ha="right")
            ax.set_ylabel(label)
            ax.grid(True, axis="y", alpha=0.3)
            ax.set_title(f"{label}, mean ± 95% CI{'' if wl is None else f' -- {wl}'}", fontsize=10)
    fig.tight_layout()
    paths.append(out / PLOT_FILES[2])
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


__all__ = ["PLOT_FILES", "busy_timeline", "plot_results"]
