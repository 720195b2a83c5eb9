"""The results table of a benchmark suite (:mod:`frenzy_env.workload.suites`) and the page docs/results.md.

:func:`suite_table` turns a suite's episodes (one per policy and workload, every policy on the same workloads)
into one row per policy: the average JCT over the suite's workloads with its 95% t-interval; the paired ratio
to a reference policy (the geometric mean over workloads of the policy's average JCT over the reference's on
the same workload, with a 95% t-interval on the log ratios, :func:`paired_ratio`); the same ratio to the JCT
lower bound of :mod:`frenzy_env.evaluation.bounds` when bounds were computed; GPU-hours; OOMs and restarts; the median
and 99th percentile of the wall time of every decision. :func:`suite_markdown` prints it;
:func:`results_section` and :func:`update_results_page` write it into a Markdown page with the date, the
versions and the machine (:func:`machine_info`), one section per suite, keeping the page's text above
:data:`GENERATED_MARKER` and the other suites' sections. :func:`queue_pressure` reads an episode's wait share
(jobs that start over a minute after their submission) and busy fraction over the arrival window;
:func:`pressure_note` puts FIFO's on a suite's workloads into the table's notes.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from frenzy_env.errors import FrenzyError
from frenzy_env.evaluation.episodes import CUT_NOTE, confidence_interval, cut_counts, format_ci, format_number
from frenzy_env.workload.load import WAIT_S, busy_fraction, wait_share

PAIR_KEYS = ("workload", "seed")
"""The columns that identify a workload of a suite: episodes with equal keys are paired across policies."""
GENERATED_MARKER = "<!-- frenzy results: the sections below are generated; text above this line is kept -->"
"""Above this line a results page is hand-written (kept by :func:`update_results_page`); below it, generated."""


def paired_ratio(
    values: Iterable[float], reference: Iterable[float], level: float = 0.95
) -> tuple[float, float, float]:
    """(geometric mean, low, high) of ``values[i] / reference[i]``: the exponential of the mean log ratio and of
    its t-interval's ends (nan ends for one pair). Pairs with a non-positive or missing value are left out."""
    v = np.asarray(list(values), dtype=float)
    r = np.asarray(list(reference), dtype=float)
    ok = np.isfinite(v) & np.isfinite(r) & (v > 0) & (r > 0)
    logs = np.log(v[ok] / r[ok])
    if logs.size == 0:
        return math.nan, math.nan, math.nan
    mean, half = confidence_interval(logs.tolist(), level)
    if not math.isfinite(half):
        return math.exp(mean), math.nan, math.nan
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def suite_table(
    episodes: pd.DataFrame, reference: str, latencies: Mapping[str, np.ndarray] | None = None
) -> pd.DataFrame:
    """One row per policy (in the order of ``episodes``) of a suite's ``episodes`` (columns workload, seed,
    policy, avg_jct_h, gpu_hours, ooms, restarts, latency_median_ms, latency_p99_ms, and jct_bound_h when bounds
    were computed). ``latencies``: every decision time of each policy in seconds (pooled over the suite; without
    them, the mean over episodes of each episode's median and p99). Columns: policy, n (workloads), avg_jct_h
    and avg_jct_h_ci95, ref_ratio with ref_ratio_low/high (to ``reference``, paired by workload), bound_ratio
    with bound_ratio_low/high (nan without bounds), gpu_hours and gpu_hours_ci95 (per workload), ooms and
    restarts (totals over the suite), latency_median_ms, latency_p99_ms, truncated (the policy's episodes a budget
    cut) and unfinished (their jobs neither finished nor rejected). The paired ratios leave out every workload
    where a budget cut either episode (a cut episode's avg_jct_h is not the JCT it would have had to the end)."""
    policies = list(dict.fromkeys(episodes["policy"]))
    if reference not in policies:
        raise FrenzyError(f"reference policy {reference!r} is not among the policies ({', '.join(policies)})")
    counts = cut_counts(episodes)
    cut = counts[0] if counts is not None else pd.Series(0, index=episodes.index)
    # a cut episode's avg_jct_h is no finished episode's: a workload where either policy was cut is no pair
    jct = episodes.assign(avg_jct_h=episodes["avg_jct_h"].where(cut == 0)).pivot_table(
        index=list(PAIR_KEYS), columns="policy", values="avg_jct_h", aggfunc="first", dropna=False)
    has_bound = "jct_bound_h" in episodes and episodes["jct_bound_h"].notna().any()
    bound = episodes.groupby(list(PAIR_KEYS))["jct_bound_h"].first() if has_bound else None
    rows = []
    for policy in policies:
        group = episodes[episodes["policy"] == policy]
        mean, half = confidence_interval(group["avg_jct_h"].tolist())
        pol = jct[policy].dropna()
        ref = jct[reference].reindex(pol.index)
        ratio = paired_ratio(pol, ref) if policy != reference else (1.0, math.nan, math.nan)
        if bound is not None:
            b = paired_ratio(pol, bound.reindex(pol.index))
        else:
            b = (math.nan, math.nan, math.nan)
        gpu, gpu_half = confidence_interval(group["gpu_hours"].tolist())
        lat = None if latencies is None else latencies.get(policy)
        if lat is not None and np.asarray(lat).size:
            lat_ms = np.asarray(lat, dtype=float) * 1e3
            median, p99 = float(np.median(lat_ms)), float(np.percentile(lat_ms, 99))
        else:
            median, p99 = float(group["latency_median_ms"].mean()), float(group["latency_p99_ms"].mean())
        rows.append({
            "policy": policy, "n": len(group), "avg_jct_h": mean, "avg_jct_h_ci95": half,
            "ref_ratio": ratio[0], "ref_ratio_low": ratio[1], "ref_ratio_high": ratio[2],
            "bound_ratio": b[0], "bound_ratio_low": b[1], "bound_ratio_high": b[2],
            "gpu_hours": gpu, "gpu_hours_ci95": gpu_half,
            "ooms": int(group["ooms"].sum()) if "ooms" in group else 0,
            "restarts": int(group["restarts"].sum()) if "restarts" in group else 0,
            "latency_median_ms": median, "latency_p99_ms": p99,
            "truncated": int(cut.loc[group.index].sum()),
            "unfinished": int(counts[1].loc[group.index].sum()) if counts is not None else 0,
        })
    return pd.DataFrame(rows)


def queue_pressure(
    jobs: pd.DataFrame, attempts: pd.DataFrame, num_gpus: int, *, wait_s: float = WAIT_S
) -> tuple[float, float]:
    """(wait share, busy fraction) of one episode: the share of its jobs not rejected that start more than
    ``wait_s`` seconds (default one minute, :data:`~frenzy_env.workload.load.WAIT_S`) after their submission or
    never start (:func:`~frenzy_env.workload.load.wait_share`), and the GPU-seconds its attempts hold inside the
    arrival window over ``num_gpus`` times the window (:func:`~frenzy_env.workload.load.busy_fraction`).
    ``jobs`` and ``attempts``: the episode's tables (:data:`~frenzy_env.evaluation.episodes.JOB_COLUMNS`,
    :data:`~frenzy_env.evaluation.episodes.ATTEMPT_COLUMNS`)."""
    rejected = jobs["rejected_reason"].fillna("").astype(str) != ""
    kept = jobs[~rejected]
    wait = wait_share(kept["submit_time_s"].to_numpy(float), kept["start_time_s"].to_numpy(float), wait_s)
    busy = busy_fraction(jobs["submit_time_s"].to_numpy(float), attempts["start_time_s"].to_numpy(float),
                         attempts["end_time_s"].to_numpy(float), attempts["num_gpus"].to_numpy(float), num_gpus)
    return wait, busy


def pressure_note(pressure: pd.DataFrame, policy: str = "fifo") -> str:
    """One line on the pressure of a suite's workloads: the mean, smallest and largest over the workloads of
    ``pressure``'s columns ``wait_frac`` and ``busy_frac`` (one row per workload, :func:`queue_pressure` of
    ``policy``'s episode)."""
    def spread(col: str) -> str:
        v = pressure[col].to_numpy(float)
        return f"{np.nanmean(v):.0%} ({np.nanmin(v):.0%} - {np.nanmax(v):.0%})"

    return (f"Pressure under `{policy}` (mean over the {len(pressure)} workloads, smallest - largest): "
            f"{spread('wait_frac')} of the jobs wait over {WAIT_S:g} s to start; the GPUs are busy "
            f"{spread('busy_frac')} of the arrival window.")


def format_ratio(value: float, low: float, high: float) -> str:
    """``0.91 (0.69 - 1.19)``: a ratio and its interval (the ratio alone without one)."""
    if not math.isfinite(value):
        return "n/a"
    if not (math.isfinite(low) and math.isfinite(high)):
        return format_number(value)
    return f"{format_number(value)} ({format_number(low)} - {format_number(high)})"


def suite_markdown(
    table: pd.DataFrame, reference: str, description: str | None = None, pressure: pd.DataFrame | None = None
) -> str:
    """The Markdown of a :func:`suite_table` with its notes (and ``description``, the suite's, above them, then
    the :func:`pressure_note` of ``pressure`` when given); the column of the bound ratio only when there are
    bounds."""
    bounds = bool(table["bound_ratio"].notna().any())
    cuts = "truncated" in table and bool((table["truncated"] > 0).any())
    head = ["policy", "n"] + ["truncated", "unfinished"] * cuts + ["avg JCT (h)", f"avg JCT / {reference}'s (paired)"]
    head += ["avg JCT / lower bound"] * bounds
    head += ["GPU-hours per workload", "OOMs", "restarts", "decision median (ms)", "decision p99 (ms)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in table.iterrows():
        cells = [f"`{r['policy']}`", str(int(r["n"]))]
        cells += [f"{int(r['truncated']):,}", f"{int(r['unfinished']):,}"] * cuts
        cells += [format_ci(r["avg_jct_h"], r["avg_jct_h_ci95"]),
                 format_ratio(r["ref_ratio"], r["ref_ratio_low"], r["ref_ratio_high"])]
        if bounds:
            cells.append(format_ratio(r["bound_ratio"], r["bound_ratio_low"], r["bound_ratio_high"]))
        cells += [format_ci(r["gpu_hours"], r["gpu_hours_ci95"]), f"{int(r['ooms']):,}", f"{int(r['restarts']):,}",
                  format_number(r["latency_median_ms"]), format_number(r["latency_p99_ms"])]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        "n: the suite's workloads, each played once by every policy with the same seed. avg JCT: the mean over "
        "the workloads of each episode's average JCT, ± the half-width of its 95% t-interval. "
        f"avg JCT / {reference}'s: the geometric mean over the workloads of the policy's average JCT divided by "
        f"{reference}'s on the same workload, with its 95% interval (a t-interval on the log ratios); an interval "
        "that contains 1 is no evidence of a difference."
        + (" avg JCT / lower bound: the same against the episode's lower bound on the average JCT "
           "(frenzy_env.evaluation.bounds), which no scheduler can beat." if bounds else "")
        + " GPU-hours: the mean per workload ± 95% t-interval; OOMs and restarts: totals over the suite; "
        "decision times: the median and 99th percentile of the wall time of every predict call of the policy "
        "in the suite.",
    ]
    if cuts:
        notes.append(CUT_NOTE + " The paired ratios leave out the workloads where a budget cut either episode.")
    if pressure is not None and len(pressure):
        notes.insert(0, pressure_note(pressure))
    if description:
        notes.insert(0, f"Workloads: {description}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(notes) + "\n"


def machine_info() -> dict[str, str]:
    """The machine a table was measured on: CPU count and model, memory, platform, Python, torch."""
    from importlib import metadata

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            found = re.search(r"^model name\s*:\s*(.+)$", fh.read(), re.M)
        if found:
            cpu = found.group(1).strip()
    memory = ""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    return {"cpus": str(os.cpu_count() or "?"), "cpu": cpu, "memory": memory, "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch}


def results_section(
    suite_name: str, table_md: str, command: str, *, date: str, env_version: str, package_version: str,
    machine: Mapping[str, str] | None = None,
) -> str:
    """A page's section of one suite: heading, command, date, versions, machine, the table (:func:`suite_markdown`),
    between the markers :func:`update_results_page` finds."""
    m = dict(machine_info() if machine is None else machine)
    memory = f", {m['memory']}" if m.get("memory") else ""
    return (
        f"<!-- suite {suite_name}: begin -->\n"
        f"## Suite `{suite_name}`\n\n"
        f"```bash\n{command}\n```\n\n"
        f"- Measured: {date}, env {env_version}, frenzy-env {package_version}.\n"
        f"- Machine: {m['cpus']} CPU core(s) ({m['cpu']}){memory}; {m['platform']}; Python {m['python']}, "
        f"torch {m['torch']}.\n\n"
        f"{table_md.rstrip()}\n"
        f"<!-- suite {suite_name}: end -->\n"
    )


_INTRO = (
    "# Results\n\n"
    "The tables of the named benchmark suites (docs/evaluation.md, \"Suites\"), each with the command that "
    "produced it, the date, the versions and the machine. Every policy plays the same workloads.\n"
)


def update_results_page(page: str | None, suite_name: str, section: str) -> str:
    """``page`` (None: a new page) with ``section`` (:func:`results_section`) in place of the suite's previous
    section, or after the others. The text above :data:`GENERATED_MARKER` is kept as the page's introduction (a
    page without the marker is kept whole, the marker added after it); below it only the suites' sections are
    kept, in their order."""
    if page is None:
        page = _INTRO
    intro, marker, generated = page.partition(GENERATED_MARKER)
    if not marker:
        generated = ""
    sections = {m.group(1): m.group(0).strip("\n") for m in _SECTION.finditer(generated)}
    sections[suite_name] = section.strip("\n")
    body = "\n\n".join(sections.values())
    return intro.rstrip("\n") + "\n\n" + GENERATED_MARKER + "\n\n" + body + "\n"


_SECTION = re.compile(r"<!-- suite (\S+): begin -->\n.*?<!-- suite \1: end -->", re.S)


def pooled_latencies(episodes: Iterable[tuple[str, Any]]) -> dict[str, np.ndarray]:
    """Every decision time (seconds) of each policy, from (policy, one episode's decision times) pairs (an
    :class:`~frenzy_env.evaluation.episodes.EpisodeResult`'s ``latencies``)."""
    pooled: dict[str, list[np.ndarray]] = {}
    for policy, latencies in episodes:
        pooled.setdefault(policy, []).append(np.asarray(latencies, dtype=float))
    return {p: np.concatenate(v) if v else np.zeros(0) for p, v in pooled.items()}
