"""Held-out evaluation of a trained PPO scheduler against every baseline, and its learning curve.

Usage: ``python scripts/evaluate_ppo.py [--model agents/models/ppo_frenzy_testbed.zip] [--run runs/ppo]
[--seeds 5] [--out docs/ppo]``

Runs the same harness as ``frenzy evaluate`` (:func:`frenzy_env.evaluation.evaluate`) on

- ``synthetic``: the synthetic preset (200 jobs, load 0.7) on frenzy-testbed at seeds 1000, 1001, ...
  (training draws seeds below 500 and validation 500-999, so these workloads were never seen);
- ``itp-default``: the shipped ITP cluster02 week, seeds 1000, ... (the seed re-draws the models assigned to
  the trace's jobs); cluster02 is never trained on.

Every policy of ``baselines.POLICIES`` except masked random, plus ``ppo``. Writes ``episodes.csv``,
``summary.csv``, ``summary.md`` and, when ``--run`` has ``eval/evaluations.npz``, ``learning_curve.png``
(validation average JCT over training steps).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from agents.ppo import DEFAULT_MODEL_PATH, TEST_SEED_START, load_policy
from baselines import POLICIES, make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation import evaluate, summarise, summary_markdown, wide_window
from frenzy_env.paths import shared_data_dir

_COLOURS = {"frenzy": "C1", "asrpt": "C2", "doubling": "C3", "fifo": "C4"}


def learning_curve(run: Path, out: Path, validation_jobs: int) -> Path | None:
    """Plot validation average JCT (hours) against training steps.

    Left: the evaluation callback's synthetic validation workloads (``run/eval/evaluations.npz``) with the
    baselines on them (``out/validation_baselines.json``). Right, when ``out/validation_selection.csv``
    exists (``--select``): the saved checkpoints on the validation ITP window.
    """
    npz = run / "eval" / "evaluations.npz"
    if not npz.is_file():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    data = np.load(npz)
    steps = data["timesteps"]
    jct = -np.asarray(data["results"]) / validation_jobs  # return = -total JCT in hours -> average JCT
    sel_path = out / "validation_selection.csv"
    sel = pd.read_csv(sel_path) if sel_path.is_file() else None
    fig, axes = plt.subplots(1, 2 if sel is not None else 1, figsize=(10 if sel is not None else 6, 3.6))
    ax = axes[0] if sel is not None else axes
    ax.plot(steps, jct.mean(axis=1), marker="o", label="PPO (validation seeds 500-503)")
    ax.fill_between(steps, jct.min(axis=1), jct.max(axis=1), alpha=0.2)
    ax.annotate("warm start", (steps[0], jct.mean(axis=1)[0]), textcoords="offset points", xytext=(5, -14), fontsize=7)
    ref = out / "validation_baselines.json"
    top = 1.2 * float(jct.max())
    if ref.is_file():
        refs = json.loads(ref.read_text())
        top = 1.2 * max(float(jct.max()), float(np.median(list(refs.values()))))
        for name, value in refs.items():
            if value <= top:
                ax.axhline(value, ls="--", lw=1, color=_COLOURS.get(name, "k"), label=f"{name} ({value:.0f} h)")
            else:
                ax.plot(
                    [], [], ls="--", lw=1, color=_COLOURS.get(name, "k"), label=f"{name} ({value:.0f} h, off scale)"
                )
    ax.set_ylim(0, top)
    ax.set_xlabel("training steps")
    ax.set_ylabel("average JCT (hours)")
    ax.set_title("synthetic validation (evaluation callback)", fontsize=9)
    ax.legend(fontsize=7)
    if sel is not None:
        ax2 = axes[1]
        trace = sel[sel.workload != "val-synthetic"]
        pts = []
        for cand, value in zip(trace.candidate, trace.avg_jct_h):
            name = Path(cand).name
            if name == "bc_model.zip":
                pts.append((0, value))
            elif name.startswith("ppo_") and name.endswith("_steps.zip"):
                pts.append((int(name.split("_")[1]), value))
            elif name == "best_model.zip":
                pts.append((int(steps[int(np.argmin(jct.mean(axis=1)))]), value))
        pts.sort()
        ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="PPO checkpoints (seeds 500-502)")
        for name in ("frenzy", "doubling", "fifo"):
            row = trace[trace.candidate == name]
            if len(row):
                value = float(row.avg_jct_h.iloc[0])
                ax2.axhline(value, ls="--", lw=1, color=_COLOURS[name], label=f"{name} ({value:.1f} h)")
        ax2.set_ylim(0, None)
        ax2.set_xlabel("training steps")
        ax2.set_title("ITP cluster02 day-20 validation window (checkpoints)", fontsize=9)
        ax2.legend(fontsize=7)
    fig.suptitle("MaskablePPO on frenzy-testbed: validation average JCT", fontsize=10)
    fig.tight_layout()
    path = out / "learning_curve.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def validation_baselines(out: Path, names: list[str], episodes: int, jobs: int) -> None:
    """Average JCT (hours) of each baseline on the validation workloads (for the learning-curve plot)."""
    from frenzy_env.workload import SyntheticGenerator

    env = FrenzyEnv(workload=SyntheticGenerator(num_jobs=jobs, load=0.7, cluster="frenzy-testbed"))
    values = {}
    for name in names:
        pol = make_policy(name, env)
        from frenzy_env.evaluation import run_episode

        jct = [run_episode(env, pol, seed=500 + i).metrics["avg_jct_h"] for i in range(episodes)]
        values[name] = float(np.mean(jct))
    (out / "validation_baselines.json").write_text(json.dumps(values, indent=2) + "\n")


VALIDATION_TRACE_START = 1_729_235.0  # ITP cluster02, day 20: rows 1372-1671, weeks before the test week (day 46)


def select_model(run: Path, out: Path, trace_dir: Path) -> Path:
    """Pick the run's model (warm start, checkpoints, best, final) with the lowest validation score.

    Validation workloads, never used for training or test: synthetic seeds 500-503 (200 jobs, load 0.7) and a
    300-job window of ITP cluster02 at day 20 (load x1.5), seeds 500-502. Score: mean over the two workloads
    of the model's average JCT divided by the best of frenzy, doubling and fifo there. Writes
    ``validation_selection.csv``.
    """
    import pandas as pd

    from frenzy_env.evaluation import run_episode
    from frenzy_env.workload import SyntheticGenerator, TraceGenerator

    workloads = {
        "val-synthetic": (SyntheticGenerator(num_jobs=200, load=0.7, cluster="frenzy-testbed"), range(500, 504)),
        "val-itp02-day20": (
            TraceGenerator(
                str(trace_dir / "cluster02.csv"), start=VALIDATION_TRACE_START, max_jobs=300, load_scale=1.5
            ),
            range(500, 503),
        ),
    }
    models = [
        run / "bc_model.zip",
        *sorted((run / "checkpoints").glob("*.zip")),
        run / "best_model.zip",
        run / "model.zip",
    ]
    rows = []
    for wl, (gen, seeds) in workloads.items():
        env = FrenzyEnv(cluster="frenzy-testbed", workload=gen)
        for name in ("frenzy", "doubling", "fifo"):
            pol = make_policy(name, env)
            jct = np.mean([run_episode(env, pol, seed=s).metrics["avg_jct_h"] for s in seeds])
            rows.append({"workload": wl, "candidate": name, "avg_jct_h": jct})
        for path in models:
            if path.is_file():
                pol = load_policy(env, path)
                jct = np.mean([run_episode(env, pol, seed=s).metrics["avg_jct_h"] for s in seeds])
                rows.append({"workload": wl, "candidate": str(path), "avg_jct_h": jct})
    df = pd.DataFrame(rows)
    best_base = df[df.candidate.isin(["frenzy", "doubling", "fifo"])].groupby("workload").avg_jct_h.min()
    df["relative"] = df.avg_jct_h / df.workload.map(best_base)
    df.to_csv(out / "validation_selection.csv", index=False)
    scores = df[~df.candidate.isin(["frenzy", "doubling", "fifo"])].groupby("candidate").relative.mean()
    print(df.to_string(index=False))
    print(scores.sort_values().to_string())
    return Path(scores.idxmin())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL_PATH)
    ap.add_argument("--run", type=Path, default=None, help="training output folder (for the learning curve)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--workloads", default="synthetic,itp-default")
    ap.add_argument("--policies", default=None, help="comma list (default: every baseline but random, + ppo)")
    ap.add_argument("--out", type=Path, default=Path("docs/ppo"))
    ap.add_argument(
        "--combine", type=Path, action="append", default=[], help="episodes.csv of an earlier run to include"
    )
    ap.add_argument("--select", type=Path, default=None, help="a training run: pick its model on validation")
    shared = shared_data_dir()
    ap.add_argument(
        "--traces",
        type=Path,
        default=shared / "traces" / "itp" if shared is not None else None,
        help="folder of the ITP CSVs (for the validation trace window; default traces/itp of the shared data)",
    )
    args = ap.parse_args()
    if args.select is not None and args.traces is None:
        ap.error("--select needs --traces (there is no shared data folder)")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.select is not None:
        print(f"selected: {select_model(args.select, args.out, args.traces)}")
        return
    names = args.policies.split(",") if args.policies else [p for p in POLICIES if p != "random"] + ["ppo"]
    policies = {  # scripted baselines with every job within reach (wide windows), as in frenzy evaluate
        n: (lambda env: load_policy(env, args.model))
        if n == "ppo"
        else wide_window(lambda env, n=n: make_policy(n, env))
        for n in names
    }
    seeds = range(TEST_SEED_START, TEST_SEED_START + args.seeds)

    def save(jobs, episodes):  # partial results survive a later failure
        episodes.to_csv(args.out / "episodes.csv", index=False)

    _, episodes = evaluate(
        lambda wl, **overrides: FrenzyEnv(cluster="frenzy-testbed", workload=wl, **overrides),
        policies,
        args.workloads.split(","),
        seeds,
        on_episode=save,
    )
    if args.combine:
        import pandas as pd

        episodes = pd.concat([*(pd.read_csv(p) for p in args.combine), episodes], ignore_index=True)
        episodes.to_csv(args.out / "episodes.csv", index=False)
    summary = summarise(episodes)
    summary.to_csv(args.out / "summary.csv", index=False)
    md = summary_markdown(summary, metrics=("avg_jct_h", "gpu_hours", "p95_jct_h", "makespan_h", "restarts", "ooms"))
    (args.out / "summary.md").write_text(md)
    print(md)
    if args.run is not None:
        cfg = json.loads((args.run / "config.json").read_text())
        baselines = [n for n in POLICIES if n not in ("random", "sjf")]
        validation_baselines(args.out, baselines, cfg["validation_episodes"], cfg["validation_jobs"])
        path = learning_curve(args.run, args.out, cfg["validation_jobs"])
        print(f"learning curve: {path}")


if __name__ == "__main__":
    main()
