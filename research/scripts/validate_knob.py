"""Score knob models (``research.knob``) on a run's validation split: a held-out learning curve.

    python research/scripts/validate_knob.py --run runs/knob1 --out research/results/ppo/v9 runs/knob1/start.zip \\
        runs/knob1/checkpoints/knob_24576_steps.zip runs/knob1/model.zip

Every model plays each validation workload of the run's config (``agents.ppo.validation_workloads``:
synthetic seeds 500, ... and fixed windows of the validation clusters; never the test split) ``--samples``
times (sampled levels, draw k re-seeded with k), next to ``sia_srpt`` and the run's reference plan (the
plan at its ``reference_level``, with preemption when the run has it; margin 0 for older runs), played once
each (deterministic). A run with ``preemption`` plays its models and plan in envs that offer preempt actions;
``sia_srpt`` plays as ``frenzy evaluate`` runs it by default (no preemption). Appends rows to
``validation_knob.csv`` (model, decisions, workload, draw, average JCT) and prints each model's mean ratio to
both (over its draws' mean per workload); ``--plot`` draws ``validation_curve_knob.png`` from the csv. Plays
already in the csv are not played again, so the command can be re-run as checkpoints appear, or with a larger
``--samples`` to add draws to models already scored (one play per workload does not rank checkpoints less
than 1% apart: research/results/ppo/training.md, session 14).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path, help="knob model zips (a checkpoint's decisions: its name)")
    ap.add_argument("--run", type=Path, required=True, help="the knob run folder (its config.json gives the split)")
    ap.add_argument("--out", type=Path, required=True, help="folder of validation_knob.csv")
    ap.add_argument("--samples", type=int, default=1, help="sampled plays per workload (default 1)")
    ap.add_argument("--greedy", action="store_true", help="models take their most likely level (label PATH:greedy)")
    ap.add_argument("--plot", action="store_true", help="draw validation_curve_knob.png from the csv")
    args = ap.parse_args()

    import pandas as pd

    from agents.ppo.workloads import make_env, validation_workloads
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import WIDE_WINDOWS, run_episode
    from research.knob import OBJECTIVES, KnobConfig, load_knob_policy, play_plan

    cfg = KnobConfig.from_dict(json.loads((args.run / "config.json").read_text()))
    items = validation_workloads(cfg.train)
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / "validation_knob.csv"
    columns = ["model", "decisions", "workload", "draw", "avg_jct_h"]
    table = pd.read_csv(csv) if csv.is_file() else pd.DataFrame(columns=columns)

    def add(model: str, decisions: float, workload: str, draw: int, jct: float) -> None:
        nonlocal table
        table = pd.concat([table, pd.DataFrame([[model, decisions, workload, draw, jct]], columns=table.columns)])
        table.to_csv(csv, index=False)

    for name, wl, seed in items:  # the references, once per workload
        env = make_env(cfg.train, wl, preemption=cfg.preemption)
        if not ((table.model == "plan") & (table.workload == name)).any():
            plan = play_plan(env, seed, OBJECTIVES[cfg.planner], cfg.levels[cfg.reference_level],
                             preempt=cfg.preemption)
            add("plan", np.nan, name, 0, plan.avg_jct_h)
        if not ((table.model == "sia_srpt") & (table.workload == name)).any():
            wide = FrenzyEnv(cluster=cfg.train.cluster, workload=wl, **WIDE_WINDOWS)  # as frenzy evaluate runs it
            pol = make_policy("sia_srpt", wide)
            add("sia_srpt", np.nan, name, 0, run_episode(wide, pol, seed=seed).metrics["avg_jct_h"])
    for path in args.models:
        label = f"{path}:greedy" if args.greedy else str(path)
        todo = [(item, draw) for item in items
                for draw in missing_draws(table, label, item[0], 1 if args.greedy else args.samples)]
        if not todo:
            continue
        meta = json.loads(path.with_suffix(".json").read_text()) if path.with_suffix(".json").is_file() else {}
        decisions = _decisions(path, meta)
        env_of = None  # todo lists a workload's draws together: one env per workload
        for (name, wl, seed), draw in todo:
            if env_of != name:
                env, env_of = make_env(cfg.train, wl, preemption=cfg.preemption), name
            pol = load_knob_policy(env, path, seed=draw, sample=not args.greedy)
            add(label, decisions, name, draw, run_episode(env, pol, seed=seed).metrics["avg_jct_h"])
        _report(table, label)
    if args.plot:
        plan = f"the plan, margin {cfg.levels[cfg.reference_level]:g}" + (", preemption" if cfg.preemption else "")
        _plot(table, args.out / "validation_curve_knob.png", plan)


def missing_draws(table, label: str, workload: str, samples: int) -> list[int]:
    """The draws ``0 .. samples - 1`` of ``label`` on ``workload`` that ``table`` lacks (so a re-run with a
    larger ``--samples`` adds plays instead of starting over)."""
    have = set(table[(table.model == label) & (table.workload == workload)].draw.astype(int).tolist())
    return [d for d in range(samples) if d not in have]


def _decisions(path: Path, meta: dict) -> float:
    """Training decisions behind a model: a checkpoint's ``knob_N_steps``, else its SB3 counter."""
    parts = path.stem.split("_")
    if len(parts) == 3 and parts[0] == "knob" and parts[1].isdigit():
        return float(parts[1])
    from stable_baselines3 import PPO

    return float(PPO.load(path, device="cpu").num_timesteps)


def ratios(table, label: str):
    """Per workload: ``label``'s mean average JCT over draws / sia_srpt's and / the plan's."""
    m = table[table.model == label].groupby("workload").avg_jct_h.mean()
    ref = table[table.model == "sia_srpt"].set_index("workload").avg_jct_h
    plan = table[table.model == "plan"].set_index("workload").avg_jct_h
    return m / ref.loc[m.index], m / plan.loc[m.index]


def _report(table, label: str) -> None:
    r_ref, r_plan = ratios(table, label)
    syn = r_ref.index.str.startswith("synthetic")
    print(f"{label}: x sia_srpt {r_ref.mean():.4f} (synthetic {r_ref[syn].mean():.4f}, trace windows "
          f"{r_ref[~syn].mean():.4f}); x plan {r_plan.mean():.4f} (synthetic {r_plan[syn].mean():.4f}, trace "
          f"windows {r_plan[~syn].mean():.4f})", flush=True)


def _plot(table, path: Path, plan_label: str = "the plan, margin 0") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [m for m in table.model.unique() if m not in ("plan", "sia_srpt") and not m.endswith(":greedy")]
    pts = []
    for label in labels:
        r_ref, _ = ratios(table, label)
        syn = r_ref.index.str.startswith("synthetic")
        d = float(table[table.model == label].decisions.iloc[0])
        pts.append((d, r_ref.mean(), r_ref[syn].mean(), r_ref[~syn].mean()))
    pts.sort()
    x = np.array(pts)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(x[:, 0], x[:, 1], "o-", label="all 16")
    ax.plot(x[:, 0], x[:, 2], "s--", label="synthetic (8)")
    ax.plot(x[:, 0], x[:, 3], "^--", label="trace windows (8)")
    r_plan, _ = ratios(table, "plan")
    ax.axhline(r_plan.mean(), color="grey", lw=1, label=plan_label)
    ax.axhline(1.0, color="black", lw=1, label="sia_srpt")
    ax.set_xlabel("training decisions (one per `hold` instants; sessions 13-19: every instant)")
    ax.set_ylabel("validation average JCT / sia_srpt's")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")  # beside the curves, not on them
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
