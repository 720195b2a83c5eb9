"""Plots of evaluation results (``frenzy evaluate --out DIR`` calls :func:`plot_results` and
:func:`plot_schedules`).

Three PNG files, one panel per workload:

* ``jct_cdf.png``: the empirical CDF of job completion time (hours, log scale) of each policy, every seed
  pooled; rejected jobs (no finish time) are left out.
* ``utilisation.png``: busy GPUs over time of each policy (its first seed), as a fraction of the cluster when
  the cluster size can be recovered from the episode table (``gpu_hours / (utilisation_frac x makespan_h)``),
  else as a GPU count. It is rebuilt from the per-job table as a step function: each job holds, from its first
  start to its finish, its average GPU count ``gpu_hours / (finish - start)`` -- exactly ``num_gpus`` for a
  job never resized; for a resized job the average keeps its GPU-hours right but smooths its resizes
  (and counts waits between an out-of-memory crash and the restart as busy).
* ``bars.png``: average JCT (hours), GPU-hours and utilisation (a fraction) of each policy, mean over seeds
  with the 95% confidence interval of the summary as error bars, clipped to the range the quantity can take
  (:func:`clipped_errors`: never below 0, a fraction never above 1).

and one schedule picture per (workload, policy), ``schedule_<workload>_<policy>.png`` (:func:`plot_schedule`):
every attempt of every job as a bar over the GPUs it held and its time, one band per GPU type.

matplotlib is imported inside the function (Agg backend), so importing this module costs nothing.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

PLOT_FILES = ("jct_cdf.png", "utilisation.png", "bars.png")
BAR_METRICS = (  # (metric, label, upper bound of its values)
    ("avg_jct_h", "average JCT (hours)", math.inf),
    ("gpu_hours", "GPU-hours", math.inf),
    ("utilisation_frac", "utilisation (fraction)", 1.0),
)


def _workloads(frame: Any) -> list:
    return list(dict.fromkeys(frame["workload"])) if "workload" in frame else [None]


def _subset(frame: Any, workload: Any) -> Any:
    return frame if workload is None else frame[frame["workload"] == workload]


def busy_timeline(jobs: Any) -> tuple[np.ndarray, np.ndarray]:
    """Step function of busy GPUs from a per-job table (one policy, one seed).

    Returns ``(times, busy)``: busy GPUs on ``[times[i], times[i+1])``, both (E,) float64, seconds.
    """
    start, finish = jobs["start_time_s"].to_numpy(float), jobs["finish_time_s"].to_numpy(float)
    ran = jobs[np.isfinite(start) & np.isfinite(finish)]
    start = ran["start_time_s"].to_numpy(float)
    finish = ran["finish_time_s"].to_numpy(float)
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
        value = float(r["gpu_hours"]) / (float(r["utilisation_frac"]) * float(r["makespan_h"]))
    except (KeyError, IndexError, ZeroDivisionError, TypeError, ValueError):
        return math.nan
    return round(value) if math.isfinite(value) and value > 0 else math.nan


def plot_results(jobs: Any, episodes: Any, summary: Any, out_dir: str | Path) -> list[Path]:
    """Write :data:`PLOT_FILES` into ``out_dir``; returns their paths.

    Parameters
    ----------
    jobs: per-job table (:data:`frenzy_env.evaluation.episodes.JOB_COLUMNS` plus ``workload``, ``policy``, ``seed``).
    episodes: per-episode table (metrics plus ``workload``, ``policy``, ``seed``).
    summary: :func:`frenzy_env.evaluation.episodes.summarise` of ``episodes``.
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
            jct = (sub[sub["policy"] == pol] if "policy" in sub else sub)["jct_h"].to_numpy(float)
            jct = np.sort(jct[np.isfinite(jct)])
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
            t0 = float(pj["submit_time_s"].min()) if len(pj) else 0.0
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
    fig, axes = plt.subplots(rows, len(BAR_METRICS), figsize=(15, 3.6 * rows), squeeze=False)
    for r, wl in enumerate(workloads):
        sub = _subset(summary, wl)
        names = list(sub["policy"]) if "policy" in sub else ["policy"]
        x = np.arange(len(names))
        for c, (metric, label, upper) in enumerate(BAR_METRICS):
            ax = axes[r, c]
            mean = sub[metric].to_numpy(float) if metric in sub else np.zeros(len(names))
            ci_col = f"{metric}_ci95"
            err = sub[ci_col].to_numpy(float) if ci_col in sub else np.zeros(len(names))
            yerr = clipped_errors(mean, err, 0.0, upper) if np.isfinite(err).any() else None  # (one seed: none)
            ax.bar(x, mean, yerr=yerr, capsize=4, color=[colours.get(n, "grey") for n in names])
            if upper < math.inf:
                ax.set_ylim(0, upper * 1.05)
            ax.set_xticks(x, names, rotation=20, ha="right")
            ax.set_ylabel(label)
            ax.grid(True, axis="y", alpha=0.3)
            ax.set_title(f"{label}{'' if wl is None else f' -- {wl}'}\n{_interval_words(sub)}", fontsize=10)
    fig.tight_layout()
    paths.append(out / PLOT_FILES[2])
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def _interval_words(summary: Any) -> str:
    """What the error bars are, with the number of seeds (``episodes``) and a warning below FEW_SEEDS."""
    from frenzy_env.evaluation.episodes import FEW_SEEDS

    n = int(summary["episodes"].min()) if "episodes" in summary and not summary.empty else 0
    if n == 1:
        return "n=1 seed: no interval"
    words = "mean ± 95% CI" + (f", n={n} seeds" if n else "")
    return words + " (too few seeds: unreliable)" * (0 < n < FEW_SEEDS)


def clipped_errors(mean: np.ndarray, half: np.ndarray, lower: float = 0.0, upper: float = math.inf) -> np.ndarray:
    """(2, n) error-bar lengths (below, above) of ``mean ± half`` clipped to ``[lower, upper]``, the range the
    quantity can take (a time or a count: [0, inf); a fraction: [0, 1]); 0 where ``half`` is nan (one seed)."""
    mean = np.asarray(mean, dtype=float)
    half = np.where(np.isfinite(half), np.asarray(half, dtype=float), 0.0)
    below = np.clip(np.minimum(half, mean - lower), 0.0, None)
    above = np.clip(np.minimum(half, upper - mean), 0.0, None)
    return np.vstack([below, above])


SCHEDULE_COLUMNS = ("job_id", "attempt", "outcome", "lane", "lanes", "start_h", "end_h")
OUTCOME_STYLE = {  # outcome -> (hatch, edge colour, end marker, legend label); see plot_schedule
    "finished": ("", "0.25", None, "finished"),
    "resized": ("", "0.25", ">", "resized: restarts on another plan"),
    "preempted": ("", "0.25", "s", "preempted: back to the queue"),
    "oom": ("xxxx", "red", "X", "out of memory: failed, back to the queue"),
    "running": ("....", "0.25", None, "still running when the episode stopped"),
}


def schedule_file(workload: str, policy: str) -> str:
    """``schedule_<workload>_<policy>.png``, with every character but letters, digits, ``.``, ``_`` and ``-``
    replaced by ``-`` (a trace file name, ``sia[requested]``)."""
    return "schedule_" + "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", str(x)) for x in (workload, policy)) + ".png"


def gpu_lanes(cluster: Any) -> tuple[np.ndarray, np.ndarray]:
    """(num_gpus,) lane of each GPU of ``cluster`` (lanes grouped by GPU type in ``cluster.gpu_types`` order,
    within a type in the cluster's GPU order) and (num_types + 1,) the first lane of each type's band."""
    gpu_type = np.repeat(np.asarray(cluster.node_type_index), np.asarray(cluster.node_capacity))  # (G,)
    order = np.argsort(gpu_type, kind="stable")
    lanes = np.empty(gpu_type.size, dtype=np.int64)
    lanes[order] = np.arange(gpu_type.size)
    bands = np.concatenate([[0], np.cumsum(np.bincount(gpu_type, minlength=len(cluster.gpu_types)))])
    return lanes, bands


def schedule_bars(attempts: Any, cluster: Any, t0_s: float = 0.0) -> Any:
    """The bars of :func:`plot_schedule`: one per attempt and run of consecutive lanes it held (one per
    attempt unless its GPUs are scattered), with :data:`SCHEDULE_COLUMNS`; times in hours since ``t0_s``. An
    attempt still running ends at the latest time of the log."""
    import pandas as pd

    lanes, _ = gpu_lanes(cluster)
    start = attempts["start_time_s"].to_numpy(float)
    end = attempts["end_time_s"].to_numpy(float)
    last = np.nanmax(np.concatenate([start, end])) if len(attempts) else 0.0
    end = np.where(np.isfinite(end), end, last)
    rows = []
    for i, a in enumerate(attempts.itertuples(index=False)):
        held = np.sort(lanes[np.asarray(a.gpus, dtype=np.int64)])
        for run in np.split(held, np.flatnonzero(np.diff(held) != 1) + 1):
            rows.append((a.job_id, a.attempt, a.outcome, int(run[0]), int(run.size),
                         (start[i] - t0_s) / 3600.0, (end[i] - t0_s) / 3600.0))
    return pd.DataFrame(rows, columns=list(SCHEDULE_COLUMNS))


def plot_schedule(attempts: Any, cluster: Any, path: str | Path, title: str, t0_s: float = 0.0) -> Path:
    """Draw one episode's schedule into ``path`` (the format from its suffix): time in hours since ``t0_s``
    across, the cluster's GPUs down, one band per GPU type (nodes separated by dotted lines); each attempt
    (:func:`frenzy_env.evaluation.episodes.attempts_table`) a bar over [start, end] and the GPUs it held, coloured by
    job (labelled with the job id where there is room), hatched in red when it failed out of memory, with a
    marker at its end when it was resized or preempted. Each bar's ``gid`` is ``attempt-<job>-<attempt>``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    bars = schedule_bars(attempts, cluster, t0_s)
    _, bands = gpu_lanes(cluster)
    total = int(bands[-1])
    fig, ax = plt.subplots(figsize=(12, min(9.0, max(3.5, 1.5 + 0.05 * total))))
    cmap = plt.get_cmap("tab20")
    span = float(bars["end_h"].max()) if len(bars) else 1.0
    width = bars["end_h"] - bars["start_h"]
    for outcome, (hatch, edge, marker, _) in OUTCOME_STYLE.items():
        of = bars["outcome"] == outcome
        part = bars[of]
        if part.empty:
            continue
        drawn = ax.barh(part["lane"], width[of], height=part["lanes"], left=part["start_h"], align="edge",
                        color=[cmap(int(j) % 20) for j in part["job_id"]], edgecolor=edge, linewidth=0.6,
                        hatch=hatch)
        for patch, job, number in zip(drawn, part["job_id"], part["attempt"]):
            patch.set_gid(f"attempt-{job}-{number}")
        if marker is not None:
            ax.scatter(part["end_h"], part["lane"] + part["lanes"] / 2, marker=marker, s=28, zorder=3,
                       color="red" if outcome == "oom" else "black", edgecolors="white", linewidths=0.5)
    roomy = (width > 0.04 * span) & (bars["lanes"] >= 0.02 * total)
    for b in bars[roomy].itertuples(index=False):
        ax.text((b.start_h + b.end_h) / 2, b.lane + b.lanes / 2, str(b.job_id), ha="center", va="center",
                fontsize=6, clip_on=True)
    offsets = np.asarray(cluster.node_offsets)
    lanes, _ = gpu_lanes(cluster)
    if len(offsets) <= 65:  # node boundaries, where there are few enough to see
        for first in offsets[1:-1]:
            ax.axhline(lanes[first], color="0.6", linewidth=0.4, linestyle=":")
    for edge in bands[1:-1]:
        ax.axhline(edge, color="black", linewidth=1.0)
    ax.set_yticks((bands[:-1] + bands[1:]) / 2,
                  [f"{t}\n{int(n)} GPUs" for t, n in zip(cluster.gpu_types, np.diff(bands))], fontsize=8)
    ax.set_ylim(total, 0)  # the first GPU type on top
    ax.set_xlim(0, span * 1.01)
    ax.set_xlabel("time since first submission (hours)")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(facecolor=cmap(0), edgecolor="0.25", label="attempt (colour: job; height: its GPUs)")]
    for outcome, (hatch, edge, marker, label) in OUTCOME_STYLE.items():
        if outcome == "finished" or not (bars["outcome"] == outcome).any():
            continue
        if marker is None:
            handles.append(Patch(facecolor="white", edgecolor=edge, hatch=hatch, label=label))
        else:
            handles.append(Line2D([], [], marker=marker, linestyle="", color="red" if outcome == "oom" else "black",
                                  label=label))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_schedules(schedules: dict, cluster: Any, out_dir: str | Path) -> list[Path]:
    """:func:`plot_schedule` of each ``(workload, policy) -> (seed, attempts, t0_s)`` into ``out_dir`` as
    :func:`schedule_file`; returns the paths."""
    out = Path(out_dir)
    return [
        plot_schedule(attempts, cluster, out / schedule_file(w, p), f"Schedule of {p} on {w} (seed {seed})", t0)
        for (w, p), (seed, attempts, t0) in schedules.items()
    ]


__all__ = [
    "BAR_METRICS", "PLOT_FILES", "SCHEDULE_COLUMNS", "busy_timeline", "clipped_errors", "gpu_lanes",
    "plot_results", "plot_schedule", "plot_schedules", "schedule_bars", "schedule_file",
]
