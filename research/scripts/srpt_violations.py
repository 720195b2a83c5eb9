"""How much of a policy's queueing a preemptive scheduler could reorder: a job waits while a running job
that needs longer holds GPUs it could run on.

    python research/scripts/srpt_violations.py --run runs/knob2d --margin 0.2 cluster04@9782 synthetic#500

Plays the planner (``SiaTeacher``, ``sia_srpt``'s objective, move margin ``--margin``) on the named
validation workloads of the run's config, one deterministic episode each. From the episode's records, a job
counts towards the queued job-hours from its submission to its first start, and it is *blocked by a longer
job* while some running job holds GPUs of a type on which the queued job has an available plan of no more
GPUs and will still run longer (to its actual finish) than the queued job would need on its fastest such
plan. Those hours are what preempting the longer job (shortest remaining first) could reorder; the env cannot
preempt a job back to the queue, only shrink it. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _measure(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals."""
    total, reach = 0.0, -np.inf
    for lo, hi in sorted(i for i in intervals if i[1] > i[0]):
        if hi > reach:
            total += hi - max(lo, reach)
            reach = hi
    return total


def blocked_hours(sim: Any) -> tuple[float, float]:
    """(queued job-hours, of them blocked by a longer job) of a finished episode, from its job records and
    attempt log: job q, queued from its submission to its first start, is blocked at time t when an attempt
    running at t holds GPUs of a type on which q has an available plan of no more GPUs, and that attempt's
    job finishes more than ``T`` after t, ``T`` q's whole work (estimated iterations) on its fastest such
    plan at that plan's iteration time. (Hindsight: the running job's finish time is the one it had.)"""
    names = list(sim.gpu_types)
    finish = {r.job_id: r.finish_time for r in sim.records}
    holders = [  # (job, GPU type index, GPUs, start, end, the job's finish) of every attempt, once
        (a.job_id, names.index(a.gpu_type), a.num_gpus, a.start_time,
         a.end_time if np.isfinite(a.end_time) else np.inf, finish.get(a.job_id, np.inf))
        for a in sim.attempts
    ]
    queued_s = blocked_s = 0.0
    for rec in sim.records:
        q, lo, hi = rec.job_id, rec.submit_time, rec.start_time
        if not np.isfinite(hi) or hi <= lo:
            continue
        queued_s += hi - lo
        avail = sim.available_plans(np.array([q]))[0]
        need: dict[tuple[int, int], float] = {}  # q's run time within (type, at most count GPUs); inf: none fits
        spans = []
        for job, gpu_type, count, start, end, done in holders:
            if job == q or end <= lo or start >= hi:
                continue
            if (gpu_type, count) not in need:
                fits = avail & (sim.plan_type == gpu_type) & (sim.plan_count <= count)
                need[gpu_type, count] = (float(sim.work_estimate[q]) * float(sim.iter_time[q, fits].min())
                                         if fits.any() else np.inf)
            spans.append((max(start, lo), min(end, hi, done - need[gpu_type, count])))
        blocked_s += _measure(spans)
    return queued_s / 3600.0, blocked_s / 3600.0


def srpt_violations(env: Any, act: Callable[[np.ndarray], int], seed: int) -> dict[str, float]:
    """One episode of ``act`` on ``env`` reset with ``seed`` (``play_curve``): its average JCT, job count,
    and queued and blocked job-hours (:func:`blocked_hours`)."""
    from agents.ppo.reference_reward import play_curve

    curve = play_curve(env, act, seed)
    queued_h, blocked_h = blocked_hours(env.sim)
    return {"avg_jct_h": curve.avg_jct_h, "jobs": float(curve.num_jobs), "queued_h": queued_h,
            "blocked_h": blocked_h}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="+", help="validation workload names (synthetic#500, cluster04@9782, ...)")
    ap.add_argument("--run", type=Path, required=True, help="a knob run folder (its config.json gives the split)")
    ap.add_argument("--margin", type=float, default=0.0, help="the planner's move margin (default 0)")
    args = ap.parse_args()

    from agents.ppo.workloads import make_env, validation_workloads
    from baselines.sia import SiaTeacher
    from research.knob import KnobConfig

    cfg = KnobConfig.from_dict(json.loads((args.run / "config.json").read_text())).train
    items = {name: (wl, seed) for name, wl, seed in validation_workloads(cfg)}
    unknown = sorted(set(args.workloads) - set(items))
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(unknown)}; the split has {', '.join(items)}")
    print("| workload | avg JCT (h) | job-hours | queued | blocked by a longer job | blocked / job-hours |")
    print("|---|---|---|---|---|---|")
    for name in args.workloads:
        wl, seed = items[name]
        env = make_env(cfg, wl)
        teacher = SiaTeacher(env, objective="completion", move_margin=args.margin)
        teacher.reset()
        r = srpt_violations(env, teacher.act, seed)
        total = r["avg_jct_h"] * r["jobs"]
        print(f"| {name} | {r['avg_jct_h']:.2f} | {total:.0f} | {r['queued_h']:.0f} | {r['blocked_h']:.0f} | "
              f"{r['blocked_h'] / total:.0%} |")


if __name__ == "__main__":
    main()
