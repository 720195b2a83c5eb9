"""The outputs of ``frenzy reproduce`` (:mod:`frenzy_env.reproduce.runner`): the claims table in Markdown, CSV files and
plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from frenzy_env.paths import atomic_write_csv, atomic_write_text

if TYPE_CHECKING:
    from frenzy_env.reproduce.runner import ReproduceResult


#: the claims table's header
CLAIMS_HEADER = "| claim | kind | paper | ours (mean ± 95% CI) | comparator | setting (scenario) | verdict | reason |"


def verdict_summary(rows: list) -> str:
    """One line counting the verdicts of the paper-claim rows only (extensions and controls are not the
    papers')."""
    from collections import Counter

    counts = Counter(r.verdict for r in rows if r.kind == "paper claim")
    if not counts:
        return "Paper claims: none in this run."
    total = sum(counts.values())
    return f"Paper claims ({total} rows): " + ", ".join(f"{v} {n}" for v, n in counts.most_common()) + "."


def claims_markdown(result: ReproduceResult) -> str:
    """The verdict rule, the claims table (claim, kind, paper, ours, comparator, setting, verdict, reason), the
    count of the paper claims' verdicts, the details per row, the extra tables (predictors) and the workloads'
    offered load and lost GPU-hours, in Markdown."""
    from frenzy_env.reproduce.verdicts import VERDICT_RULE

    cfg = result.config
    lines = [
        f"Run: {'--quick' if cfg.quick else 'full'}, {cfg.num_seeds} seeds, scenarios {', '.join(cfg.scenarios)}; "
        f"took {result.seconds / 60:.1f} min.",
        "",
        VERDICT_RULE,
        "",
        CLAIMS_HEADER,
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result.rows:
        lines.append(
            f"| {r.claim} | {r.kind or '-'} | {r.paper} | {r.ours} | {r.comparator or '-'} | {r.scenario} | "
            f"{r.verdict} | {r.reason or '-'} |"
        )
    lines += ["", verdict_summary(result.rows)]
    lines += [
        "",
        "Relative differences are paired by seed (same workload draw); ± is the t-distribution 95% CI half-width "
        "over seeds (over cases for MARP). Details per row:",
        "",
    ]
    for r in result.rows:
        if r.detail:
            lines.append(f"- {r.claim} [{r.scenario}]: {r.detail}")
    if "predictors" in result.tables:
        lines += [
            "",
            "Memory predictors (env setting ``predictor``; means ± 95% CI over seeds): the paper's MARP formula "
            "(frenzy), the extended estimator (the default) and the oracle (the simulator's true peak memory):",
            "",
            *result.tables["predictors"],
        ]
    lines += workloads_markdown(result.episodes)
    return "\n".join(lines) + "\n"


def workloads_markdown(episodes: list[dict]) -> list[str]:
    """Lines of a table, one row per workload: its offered load (:mod:`frenzy_env.workload.load`, mean over the
    seeds' draws) and the GPU-hours lost to out-of-memory attempts per policy (mean over seeds)."""
    import pandas as pd

    if not episodes:
        return []
    df = pd.DataFrame(episodes)
    if "offered_load_ratio" not in df or "lost_gpu_hours" not in df:
        return []
    lines = [
        "",
        "Workloads: offered load (speed- and memory-aware, 1.0 = the cluster's capacity over the arrival window) and "
        "GPU-hours lost to out-of-memory attempts, per policy (means over seeds):",
        "",
        "| workload | offered load | lost GPU-hours by policy |",
        "|---|---|---|",
    ]
    for wl, sub in df.groupby("workload", sort=False):
        lost = sub.groupby("policy", sort=False)["lost_gpu_hours"].mean()
        cells = ", ".join(f"{p} {v:.3g}" for p, v in lost.items())
        lines.append(f"| {wl} | {sub['offered_load_ratio'].mean():.3g} | {cells} |")
    return lines


def write_outputs(result: ReproduceResult, out: Path) -> list[Path]:
    """claims.md, claims.csv, episodes.csv, marp.csv and the plots; returns the paths written."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "claims.md", out / "claims.csv"]
    atomic_write_text(paths[0], claims_markdown(result))
    atomic_write_csv(paths[1], pd.DataFrame([r.__dict__ for r in result.rows]))
    if result.episodes:
        paths.append(out / "episodes.csv")
        atomic_write_csv(paths[-1], pd.DataFrame(result.episodes))
    if result.marp:
        paths.append(out / "marp.csv")
        atomic_write_csv(paths[-1], pd.DataFrame(result.marp))
    paths += plot_reproduce(result, out)
    return paths


def plot_reproduce(result: ReproduceResult, out: Path) -> list[Path]:
    """One figure per scenario group: mean avg JCT (or total JCT) per policy with 95% CI bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from frenzy_env.evaluation.episodes import confidence_interval
    from frenzy_env.evaluation.plots import clipped_errors

    written: list[Path] = []
    if result.episodes:
        df = pd.DataFrame(result.episodes)
        groups = {
            "jct_frenzy_sia.png": (df[~df.workload.str.startswith(("asrpt", "doubling"))], "avg_jct_h"),
            "jct_asrpt.png": (df[df.workload.str.startswith("asrpt")], "total_jct_h"),
            "jct_doubling.png": (df[df.workload.str.startswith("doubling")], "avg_jct_h"),
        }
        for fname, (sub, metric) in groups.items():
            if sub.empty:
                continue
            wls = list(dict.fromkeys(sub.workload))
            fig, axes = plt.subplots(1, len(wls), figsize=(4.5 * len(wls), 3.6), squeeze=False)
            for ax, wl in zip(axes[0], wls):
                part = sub[sub.workload == wl]
                labels = list(dict.fromkeys(part.policy))
                stats = [confidence_interval(part[part.policy == p][metric]) for p in labels]
                means = np.array([s[0] for s in stats])
                errs = clipped_errors(means, np.array([s[1] for s in stats]))  # never below 0
                ax.bar(range(len(labels)), means, yerr=errs, capsize=3, color="tab:blue")
                ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize=7)
                ax.set_title(wl, fontsize=8)
                ax.set_ylabel(("total JCT (job-hours)" if metric == "total_jct_h" else "avg JCT (h)"), fontsize=8)
            fig.tight_layout()
            fig.savefig(out / fname, dpi=110)
            plt.close(fig)
            written.append(out / fname)
    if result.marp:
        m = pd.DataFrame(result.marp)
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for method, mk in (("frenzy", "o"), ("extended", "s")):
            ax.scatter(m.measured_mib / 1024, m[f"{method}_mib"] / 1024, marker=mk, label=method)
        hi = float(max(m.measured_mib.max(), m.frenzy_mib.max(), m.extended_mib.max())) / 1024 * 1.05
        lo = float(min(m.measured_mib.min(), m.frenzy_mib.min(), m.extended_mib.min())) / 1024 / 1.05
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")  # the cases span 1 GiB to several hundred GiB predicted
        ax.set_yscale("log")
        ax.set_xlabel("measured (GiB)")
        ax.set_ylabel("predicted (GiB)")
        ax.legend()
        ax.set_title("MARP: predicted vs measured peak memory", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "marp_accuracy.png", dpi=110)
        plt.close(fig)
        written.append(out / "marp_accuracy.png")
    return written


__all__ = [
    "CLAIMS_HEADER", "verdict_summary", "claims_markdown", "workloads_markdown", "write_outputs", "plot_reproduce",
]
