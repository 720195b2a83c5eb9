"""Play the planner (``sia_srpt``'s integer program re-solved at every decision instant, ``SiaTeacher``) with
fixed settings on a run's workloads, and say how much choosing a setting per workload could gain.

    python research/scripts/planner_sweep.py --run runs/knob2d --split validation --out research/results/ppo/v12 \\
        margin=0 margin=0.2 margin=0.2,rate_power=2 margin=0.2,efficiency_power=1

A setting is ``key=value`` pairs joined by commas: ``margin`` (the move margin) and any keyword of
:class:`baselines.sia.SiaPolicy` (``rate_power``, ``efficiency_power``, ``preempt=1`` with the env's preempt
actions, ...); ``sia_srpt`` names the round-based baseline as ``frenzy evaluate`` runs it, and
``sia_srpt,key=value,...`` that baseline with those keywords. ``--split validation`` plays the run's validation
workloads; ``--split train --train-workloads N`` the first N workloads of its training pool (seeds 0, 1, ...
of the training mixture, as the knob agent's envs draw them); ``--split test`` its test split (to report a
setting chosen elsewhere, never to choose one). Every play is one deterministic episode; rows
(setting, workload, average JCT, restarts, seconds) are appended to ``sweep_<split>.csv`` in ``--out`` and a
play already there is not repeated. The report gives each setting's mean ratio to ``--reference`` (the
mean over workloads, with a 95% confidence interval over them) and, for the settings listed with
``--ceiling``, the mean of each workload's best ratio among them (what a knob that picked the best setting
per episode, in hindsight, would reach); ``--ceiling`` may be repeated, one group of settings each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

COLUMNS = ["setting", "workload", "avg_jct_h", "restarts", "seconds"]


def parse_setting(text: str) -> dict[str, float | bool]:
    """``"margin=0.2,rate_power=2"`` -> ``{"move_margin": 0.2, "rate_power": 2.0}``; ``"sia_srpt"`` -> {};
    ``preempt=1`` (or 0) -> ``{"preempt": True}`` (the play's env then has ``preemption=True``); the
    round-based baseline with keywords, ``"sia_srpt,margin=0.2,preempt=1"``, parses as its keywords."""
    if text == "sia_srpt":
        return {}
    if text.startswith("sia_srpt,"):
        return parse_setting(text.partition(",")[2])
    out: dict[str, float | bool] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise SystemExit(f"setting {text!r}: expected key=value pairs joined by commas, got {part!r}")
        if key == "preempt":
            if value not in ("0", "1"):
                raise SystemExit(f"setting {text!r}: preempt must be 0 or 1, got {value!r}")
            out[key] = value == "1"
            continue
        try:
            out["move_margin" if key == "margin" else key] = float(value)
        except ValueError:
            raise SystemExit(f"setting {text!r}: {key} must be a number, got {value!r}") from None
    return out


def workloads(cfg, split: str, n_train: int) -> list[tuple[str, object, int]]:
    """``(name, Workload, seed)`` of the split."""
    from agents.ppo.workloads import test_workloads, training_generator, validation_workloads

    if split == "validation":
        return validation_workloads(cfg)
    if split == "test":
        return test_workloads(cfg)
    gen = training_generator(cfg)
    return [(f"train#{s}", gen.generate(s), s) for s in range(n_train)]


def play(job: tuple) -> list:
    """One deterministic episode of ``setting`` on one workload: a csv row."""
    setting, name, workload, seed, train_cfg = job
    from agents.ppo.workloads import make_env
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import WIDE_WINDOWS, run_episode
    from research.knob import play_plan

    t0 = time.perf_counter()
    kwargs = parse_setting(setting)
    preemption = bool(kwargs.get("preempt", False))
    if setting.partition(",")[0] == "sia_srpt":  # the round-based baseline, as frenzy evaluate runs it
        env = FrenzyEnv(cluster=train_cfg.cluster, workload=workload, preemption=preemption, **WIDE_WINDOWS)
        metrics = run_episode(env, make_policy("sia_srpt", env, **kwargs), seed=seed).metrics
        jct, restarts = metrics["avg_jct_h"], metrics.get("restarts", float("nan"))
    else:
        env = make_env(train_cfg, workload, preemption=preemption)
        jct = play_plan(env, seed, "completion", kwargs.pop("move_margin", 0.0), **kwargs).avg_jct_h
        restarts = float(env.unwrapped.sim.restarts)
    return [setting, name, jct, restarts, round(time.perf_counter() - t0, 1)]


def report(table, reference: str, ceilings: list[list[str]]) -> str:
    """Markdown: each setting's mean ratio to ``reference`` and, per group in ``ceilings``, the mean of each
    workload's best ratio among the group's settings (its hindsight best)."""
    wide = table.pivot_table(index="workload", columns="setting", values="avg_jct_h", aggfunc="mean")
    if reference not in wide:
        return f"(no rows of the reference {reference!r} yet)"
    ratio = wide.div(wide[reference], axis=0)
    trace = ratio.index.str.contains("@")
    lines = [f"| setting | x {reference} | 95% CI | trace windows | synthetic / train | workloads |",
             "|---|---|---|---|---|---|"]
    for s in ratio.columns:
        col = ratio[s].dropna()
        half = 1.96 * col.std(ddof=1) / np.sqrt(col.size) if col.size > 1 else float("nan")
        lines.append(f"| {s} | {col.mean():.3f} | ± {half:.3f} | {col[col.index.str.contains('@')].mean():.3f} | "
                     f"{col[~col.index.str.contains('@')].mean():.3f} | {col.size} |")
    for group in ceilings:
        chosen = [s for s in group if s in ratio]
        if not chosen:
            continue
        best = ratio[chosen].min(axis=1)
        lines.append(f"| hindsight best of {', '.join(chosen)} | {best.mean():.3f} | | {best[trace].mean():.3f} | "
                     f"{best[~trace].mean():.3f} | {best.dropna().size} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("settings", nargs="*", help="settings to play (key=value,...; or sia_srpt)")
    ap.add_argument("--run", type=Path, required=True, help="a knob run folder (its config.json gives the splits)")
    ap.add_argument("--split", choices=("validation", "train", "test"), default="validation",
                    help="test: the run's test split (report only: never choose a setting on it)")
    ap.add_argument("--train-workloads", type=int, default=16, help="with --split train: how many (default 16)")
    ap.add_argument("--out", type=Path, required=True, help="folder of sweep_<split>.csv")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--reference", default="margin=0", help="the setting ratios are taken to (default margin=0)")
    ap.add_argument("--ceiling", nargs="+", action="append", default=None,
                    help="settings of one hindsight best (repeat for several groups; default: every setting "
                         "but sia_srpt)")
    args = ap.parse_args()
    for s in args.settings:
        parse_setting(s)

    import pandas as pd

    from research.knob import KnobConfig

    cfg = KnobConfig.from_dict(json.loads((args.run / "config.json").read_text())).train
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / f"sweep_{args.split}.csv"
    table = pd.read_csv(csv) if csv.is_file() else pd.DataFrame(columns=COLUMNS)
    done = set(zip(table.setting, table.workload))
    items = workloads(cfg, args.split, args.train_workloads)
    jobs = [(s, name, wl, seed, cfg) for s in args.settings for name, wl, seed in items if (s, name) not in done]
    if jobs:
        from tqdm import tqdm

        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            for row in tqdm(pool.map(play, jobs), total=len(jobs), desc="plays"):
                table = pd.concat([table, pd.DataFrame([row], columns=COLUMNS)], ignore_index=True)
                table.to_csv(csv, index=False)
    ceilings = args.ceiling or [sorted(set(table.setting) - {"sia_srpt"})]
    text = report(table, args.reference, ceilings)
    print(text)
    (args.out / f"sweep_{args.split}.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
