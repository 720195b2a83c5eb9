"""The benchmark's report: the Markdown summary table, the CSV / JSON / Markdown files and the PNG of a
:class:`~frenzy_env.benchmark.measure.Results`."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.benchmark.measure import REPLAY_CLUSTER, Results
from frenzy_env.paths import atomic_open, atomic_write_json, atomic_write_text


def summary_table(res: Results, machine: dict[str, Any], mode: str) -> str:
    """The headline numbers as a Markdown table (what docs/performance.md shows)."""
    lines = ["| measurement | value |", "|---|---|"]

    def add(label: str, value: float, fmt: str) -> None:
        if math.isfinite(value):
            lines.append(f"| {label} | {format(value, fmt)} |")

    add("start-up of the compiled kernels in this process, s (load, or compile on a first run)",
        res.get("startup", "compiled kernels", "seconds"), ".2f")

    for r in res.section("steps"):
        if r.metric == "steps_per_s":
            add(f"{r.case}: steps/s (masked random)" if r.case != "CartPole-v1" else "CartPole-v1: steps/s",
                r.value, ",.0f")
        elif r.metric == "cartpole_steps_per_env_step":
            cpu = res.get("steps", r.case, "cartpole_steps_per_env_step_cpu")
            lines.append(f"| {r.case}: CartPole steps per env step | {r.value:.1f} (by CPU time {cpu:.1f}) |")
    cases = dict.fromkeys(r.case for r in res.section("replay"))
    for case in cases:
        wall = res.get("replay", case, "wall_s")
        cpu = res.get("replay", case, "cpu_s")
        jps = res.get("replay", case, "jobs_per_s")
        med = res.get("replay", case, "latency_median_ms")
        flag = "" if res.get("replay", case, "complete") else " (incomplete)"
        lines.append(f"| replay {case} on {REPLAY_CLUSTER} | {wall:,.1f} s ({cpu:,.1f} s CPU), {jps:,.0f} jobs/s, "
                     f"median decision {med:.3f} ms{flag} |")
    lat = [r for r in res.section("latency") if r.metric == "latency_median_ms"]
    for r in lat:
        p99 = res.get("latency", r.case, "latency_p99_ms")
        lines.append(f"| decision latency {r.case} | median {r.value:.3f} ms, p99 {p99:.3f} ms |")
    for r in res.section("marp"):
        add(f"MARP {r.case}: {r.metric.replace('_', ' ')}", r.value, ",.0f")
    for r in res.section("scaling_jobs"):
        if r.metric == "total_s":
            rss = res.get("scaling_jobs", r.case, "peak_rss_mb")
            cpu = res.get("scaling_jobs", r.case, "cpu_s")
            start = res.get("scaling_jobs", r.case, "kernels_s")
            lines.append(f"| synthetic build + replay {r.case} | {r.value:,.1f} s (replay {cpu:,.1f} s CPU; "
                         f"kernel start-up before it {start:.2f} s), peak RSS {rss:,.0f} MiB |")
        elif r.metric == "exponent":
            add(f"growth exponent in jobs ({r.case})", r.value, ".2f")
    for r in res.section("scaling_gpus"):
        if r.metric == "total_s":
            lines.append(f"| synthetic build + replay {r.case} | {r.value:,.1f} s |")
        elif r.metric == "exponent":
            add(f"growth exponent in GPUs ({r.case})", r.value, ".2f")
    for r in res.section("train"):
        if r.metric == "decisions_per_s":
            roll = res.get("train", r.case, "rollout_decisions_per_s")
            lines.append(f"| ppo training ({r.case}) | {r.value:,.0f} decisions/s (rollouts alone {roll:,.0f}/s) |")
    for r in res.section("sia"):
        if r.metric == "round_median_ms":
            p99, n = res.get("sia", r.case, "round_p99_ms"), res.get("sia", r.case, "rounds")
            lines.append(f"| Sia round {r.case} | median {r.value:.2f} ms, p99 {p99:.1f} ms ({n:,.0f} rounds) |")
    head = (f"Measured in `{mode}` mode on {machine['cpu']} ({machine['cores']} cores, {machine['memory_gb']} GB; "
            f"load average {machine['load_average_1m']} at the start), Python {machine['python']}, "
            f"numpy {machine['numpy']}, gymnasium {machine['gymnasium']}; kernels: {machine['kernels']}.")
    return head + "\n\n" + "\n".join(lines) + "\n"


def write_outputs(res: Results, machine: dict[str, Any], out: Path, mode: str, plot: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "benchmark.csv", out / "benchmark.json", out / "benchmark.md"]
    with atomic_open(paths[0], newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["section", "case", "metric", "value", "unit"])
        for r in res.rows:
            w.writerow([r.section, r.case, r.metric, f"{r.value:.6g}", r.unit])
    atomic_write_json(
        paths[1], {"mode": mode, "machine": machine, "rows": [dataclasses.asdict(r) for r in res.rows]}, indent=1
    )
    atomic_write_text(paths[2], summary_table(res, machine, mode))
    if plot:
        paths.append(plot_results(res, out / "benchmark.png"))
    return paths


def plot_results(res: Results, path: Path) -> Path:
    """Scaling curves (with the fitted exponents), decision latency and step rates in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))

    def curve(ax: Any, section: str, key: str, xlabel: str) -> None:
        pts = []
        for r in res.section(section):
            if r.metric == "total_s":
                pts.append((res.get(section, r.case, "jobs" if key == "jobs" else "gpus"), r.value))
        if pts:
            x, y = np.array(sorted(pts)).T
            ax.loglog(x, y, "o-")
            exp = res.get(section, "all points", "exponent")
            ax.set_title(f"build + replay time vs {key} (fitted exponent {exp:.2f})")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)

    curve(axes[0, 0], "scaling_jobs", "jobs", "jobs (synthetic, large-1024)")
    curve(axes[0, 1], "scaling_gpus", "GPUs", "GPUs")
    ax = axes[1, 0]
    series: dict[str, list[tuple[float, float]]] = {}
    for r in res.section("latency"):
        if r.metric == "latency_median_ms":
            where, policy = r.case.rsplit(" / ", 1)
            gpus = where.split(" GPUs")[0]
            q = float(where.split("queue ")[1].replace(",", ""))
            series.setdefault(f"{policy}, {gpus} GPUs", []).append((q, r.value))
    for label, pts in series.items():
        x, y = np.array(sorted(pts)).T
        ax.loglog(x, y, "o-", label=label, linewidth=1)
    ax.set_xlabel("queued jobs")
    ax.set_ylabel("median decision latency (ms)")
    ax.set_title("decision latency")
    if series:
        ax.legend(fontsize=6, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[1, 1]
    steps = [r for r in res.section("steps") if r.metric == "steps_per_s"]
    if steps:
        bars = ax.barh([r.case for r in steps], [r.value for r in steps])
        for bar, r in zip(bars, steps):  # each env's cost in CartPole steps (the target is at most 10)
            ratio = res.get("steps", r.case, "cartpole_steps_per_env_step")
            if math.isfinite(ratio):
                end = (bar.get_width(), bar.get_y() + bar.get_height() / 2)
                ax.annotate(f"{ratio:.1f} CartPole steps per step", end, xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize=8)
        ax.set_xlim(0, max(r.value for r in steps) * 1.15)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v / 1000:,.0f}k"))
    ax.set_xlabel("steps per second")
    ax.set_title("environment steps (masked random) vs CartPole-v1")
    for ax in axes.flat:  # a section that was not run leaves its panel empty: say so
        if not ax.has_data():
            ax.text(0.5, 0.5, "section not run", transform=ax.transAxes, ha="center", va="center", color="0.5")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
