"""Held-out evaluation of a trained PPO scheduler against every baseline, and its learning curve.

Usage: ``python research/scripts/evaluate_ppo.py [--model agents/models/ppo_frenzy_testbed.zip] [--run runs/ppo]
[--test-split] [--seeds 5] [--out research/results/ppo] [--policies frenzy,srpt_est:grow=False,start,ppo]
[--labelled-model start=runs/ppo/bc_model.zip] [--preemption]``

Runs the same harness as ``frenzy evaluate`` (:func:`frenzy_env.evaluation.episodes.evaluate`) on

- with ``--test-split`` (needs ``--run``): the run's test split (``agents.ppo.test_workloads`` of its
  config.json: synthetic seeds 1000, ... and fixed windows of the test clusters, never trained or validated
  on), every policy on the same workloads (paired);
- otherwise the named ``--workloads`` (default ``synthetic,itp-default``) at seeds 1000, 1001, ...
  (training draws seeds below 500 and validation 500-999).

With ``--preemption`` every env offers preempt actions (``FrenzyEnv(preemption=True)``), as ``frenzy evaluate
--preemption`` runs them: for knob models trained with preemption and the preempting planner
(``sia_srpt:preempt=True``).

Every policy of ``baselines.POLICIES`` except masked random, plus ``ppo`` (``--model``, default the run's
``best_model.zip`` with ``--run``). Writes ``episodes.csv``, ``summary.csv``, ``summary.md``, ``paired.md``
(ppo against every other policy, paired per workload) and, with
``--run``, copies the run's ``learning_curve.csv`` and ``learning_curve.png`` (validation average JCT against
training decisions, with the reference's) into ``--out``.

A test split in two processes: ``--test-split --shard 0/2 --out OUT0`` and ``--shard 1/2 --out OUT1``, then
``--policies '' --combine OUT0/episodes.csv --combine OUT1/episodes.csv --out OUT`` (merges, plays nothing).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from agents.ppo import DEFAULT_MODEL_PATH, TEST_SEED_START, TrainConfig, load_policy, test_workloads
from baselines import POLICIES, make_policy
from frenzy_env.cli.policies import builtin_with_keywords
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import FrenzyError
from frenzy_env.evaluation.episodes import evaluate, summarise, summary_markdown, wide_window


def _policies(names: list[str], model: Path, models: dict[str, Path], seed: int = 0, greedy: bool = False,
              only_models: bool = False) -> dict:
    """Factories: the labelled ``models`` and ``ppo`` (``model``) with the env's windows, sampling with ``seed``
    (or greedy); scripted baselines with every job within reach (wide windows), as in frenzy evaluate (left
    out with ``only_models``). A name ``NAME:k=v:k=v`` passes keywords to ``make_policy``
    (``srpt_est:grow=False``) and keeps the whole spec as its label. A knob model (its record says ``knob``:
    :func:`agents.model_record.agent_of`) plays as a :class:`~research.knob.KnobPolicy`
    (``research.knob.load_policy``)."""
    from agents.model_record import agent_of

    out: dict = {}
    for spec in names:
        if spec == "ppo" or spec in models:
            path = model if spec == "ppo" else models[spec]
            load = _load_knob if agent_of(path) == "knob" else load_policy
            out[spec] = lambda env, path=path, load=load: load(env, path, sample=not greedy, seed=seed)
            continue
        if only_models:
            continue
        name, kwargs = spec, {}
        if ":" in spec:
            try:
                options = builtin_with_keywords(spec)
            except FrenzyError as exc:
                raise SystemExit(str(exc)) from None
            if options is None:
                raise SystemExit(f"--policies: expected NAME:key=value:... with NAME a baseline, got {spec!r}")
            name, kwargs = options
        if name not in POLICIES:
            raise SystemExit(f"--policies: unknown policy {name!r} (known: {', '.join(POLICIES)}, ppo)")
        out[spec] = wide_window(lambda env, name=name, kwargs=kwargs: make_policy(name, env, **kwargs))
    return out


def _load_knob(env, path: Path, sample: bool = True, seed: int = 0):
    """A knob model (``research.knob``, imported from the repository root) bound to ``env``."""
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    from research.knob import load_policy as load_knob

    return load_knob(env, path, sample=sample, seed=seed)


def paired_table(episodes: object, agent: str) -> str:
    """Markdown: for every other policy, ``agent``'s average JCT relative to it, paired per workload (the mean of
    ``1 - agent / policy`` over workloads with the t 95% half-width; positive = the agent is better), split by
    synthetic seeds and trace windows, with the workloads won and the GPU-hours ratio."""
    import numpy as np
    from scipy import stats

    wide = episodes.pivot_table(index="workload", columns="policy", values=["avg_jct_h", "gpu_hours"])
    groups = {"synthetic": [w for w in wide.index if w.startswith("synthetic")]}
    groups["trace windows"] = [w for w in wide.index if w not in groups["synthetic"]]
    groups["all"] = list(wide.index)
    lines = [f"| policy | workloads | {agent} avg JCT vs policy (1 - {agent}/policy) | {agent} better on | "
             f"GPU-hours {agent}/policy |", "|---|---|---|---|---|"]
    for other in [p for p in wide["avg_jct_h"].columns if p != agent]:
        for group, rows in groups.items():
            jct = wide["avg_jct_h"].loc[rows, [agent, other]].dropna()
            if len(jct) < 2:
                continue
            gain = 1.0 - jct[agent] / jct[other]
            half = stats.t.ppf(0.975, len(gain) - 1) * gain.std(ddof=1) / np.sqrt(len(gain))
            gpu = wide["gpu_hours"].loc[jct.index]
            ratio = float(np.exp(np.mean(np.log(gpu[agent] / gpu[other]))))
            lines.append(f"| {other} | {group} ({len(gain)}) | {gain.mean():+.1%} ± {half:.1%} | "
                         f"{int((gain > 0).sum())} of {len(gain)} | {ratio:.2f} |")
    return "\n".join(lines) + "\n"


def run_test_split(run: Path, policies: dict, save, shard: tuple[int, int] = (0, 1), **options: object) -> object:
    """Every policy on the run's test workloads: synthetic seeds (one workload per seed) and fixed trace
    windows (one seed each); returns the episodes table. ``shard`` ``(k, n)``: only the workloads whose index
    in the split is k modulo n (n processes share the split; their episodes.csv files concatenate);
    ``options``: further env keywords (``preemption=True``)."""
    import pandas as pd

    cfg = TrainConfig.from_dict(json.loads((run / "config.json").read_text()))
    k, n = shard
    items = [item for i, item in enumerate(test_workloads(cfg)) if i % n == k]
    table = {name: (wl, seed) for name, wl, seed in items}
    frames = []
    for name, (wl, seed) in table.items():
        _, episodes = evaluate(
            lambda _wl, wl=wl, **overrides: FrenzyEnv(
                cluster=cfg.cluster, workload=wl,
                **{"queue_slots": cfg.queue_slots, "running_slots": cfg.running_slots, **options, **overrides},
            ),
            policies, [name], [seed], progress=False,
        )
        frames.append(episodes)
        save(None, pd.concat(frames, ignore_index=True))
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    """Check the arguments, play every sample, merge them with the ``--combine`` files, write the tables and copy
    the run's learning curve (see the module docstring)."""
    ap = _parser()
    args = ap.parse_args()
    shard, model, models, names = _resolve(ap, args)
    import pandas as pd

    done = _play(args, names, model, models, shard)
    episodes = pd.concat([*(pd.read_csv(p) for p in args.combine), *done], ignore_index=True)
    episodes.to_csv(args.out / "episodes.csv", index=False)
    _write_summaries(args, episodes)
    if args.run is not None:
        for name in ("learning_curve.csv", "learning_curve.png"):
            if (args.run / name).is_file():
                shutil.copy(args.run / name, args.out / name)
                print(f"copied {args.run / name}")


def _parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="model file (default: the run's best, or the shipped)")
    ap.add_argument(
        "--labelled-model", action="append", default=[], metavar="NAME=PATH",
        help="another model, run as policy NAME (list NAME in --policies too); repeatable",
    )
    ap.add_argument("--run", type=Path, default=None, help="training output folder (learning curve, test split)")
    ap.add_argument("--test-split", action="store_true", help="evaluate on the run's test split (needs --run)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--workloads", default="synthetic,itp-default")
    ap.add_argument(
        "--policies", default=None,
        help="comma list (default: every baseline but random, + ppo); NAME:k=v:k=v passes keywords; '' plays "
        "nothing and only merges the --combine files",
    )
    ap.add_argument(
        "--samples", type=int, default=3,
        help="independent sampled plays of each model per workload (their mean is the model's value; default 3)",
    )
    ap.add_argument("--greedy", action="store_true", help="models take their greedy action (one play)")
    ap.add_argument(
        "--preemption", action="store_true",
        help="every env offers preempt actions (FrenzyEnv(preemption=True), as frenzy evaluate --preemption)",
    )
    ap.add_argument("--out", type=Path, default=Path("research/results/ppo"))
    ap.add_argument(
        "--combine", type=Path, action="append", default=[], help="episodes.csv of an earlier run to include"
    )
    ap.add_argument(
        "--shard", default=None, metavar="K/N",
        help="with --test-split: only the test workloads whose index is K modulo N (run N processes, K = 0..N-1, "
        "each with its own --out: a shard rewrites its --out's episodes.csv; then --combine their episodes.csv)",
    )
    return ap


def _resolve(ap: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[tuple[int, int], Path, dict, list]:
    """Check the arguments (``ap.error`` on a bad one) and create ``--out``; returns the shard ``(k, n)``, the
    ``ppo`` model, the labelled models by name and the policy names to play."""
    if args.test_split and args.run is None:
        ap.error("--test-split needs --run (the test split is recorded in the run's config.json)")
    shard = (0, 1)
    if args.shard is not None:
        k, slash, n = args.shard.partition("/")
        if not (slash and k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
            ap.error(f"--shard: expected K/N with 0 <= K < N, got {args.shard!r}")
        if not args.test_split:
            ap.error("--shard needs --test-split")
        shard = (int(k), int(n))
    model = args.model or (args.run / "best_model.zip" if args.run is not None else DEFAULT_MODEL_PATH)
    args.out.mkdir(parents=True, exist_ok=True)
    models = {}
    for item in args.labelled_model:
        name, eq, path = item.partition("=")
        if not eq or not Path(path).is_file():
            ap.error(f"--labelled-model: expected NAME=PATH of an existing file, got {item!r}")
        models[name] = Path(path)
    default = [p for p in POLICIES if p != "random"] + ["ppo"]
    names = default if args.policies is None else [n for n in args.policies.split(",") if n]
    if not names and not args.combine:
        ap.error("--policies '' plays nothing: give --combine files to merge (the shards of a test split)")
    if args.samples < 1:
        ap.error(f"--samples must be >= 1, got {args.samples}")
    return shard, model, models, names


def _play(args: argparse.Namespace, names: list, model: Path, models: dict, shard: tuple[int, int]) -> list:
    """The episodes of each sample (a table each, with its ``sample`` column): every policy in the first, the
    models alone in the others; ``episodes.csv`` in ``--out`` is rewritten after every episode."""
    import pandas as pd

    done: list = []

    def save(jobs, episodes):  # partial results survive a later failure
        pd.concat([*done, episodes], ignore_index=True).to_csv(args.out / "episodes.csv", index=False)

    for sample in range(1 if args.greedy else args.samples):
        policies = _policies(names, model, models, seed=sample, greedy=args.greedy, only_models=sample > 0)
        if not policies:
            break
        if args.test_split:
            part = run_test_split(args.run, policies, save, shard, preemption=args.preemption)
        else:
            _, part = evaluate(
                lambda wl, **overrides: FrenzyEnv(
                    cluster="frenzy-testbed", workload=wl, preemption=args.preemption, **overrides
                ),
                policies,
                args.workloads.split(","),
                range(TEST_SEED_START, TEST_SEED_START + args.seeds),
                on_episode=save,
            )
        done.append(part.assign(sample=sample))
    return done


def _write_summaries(args: argparse.Namespace, episodes: object) -> None:
    """``summary.csv`` and ``summary.md`` (with ``--test-split`` also one row per policy over every test
    workload) and, when ``ppo`` played, ``paired.md``, appended to the summary too; prints the summary."""
    import pandas as pd

    summary = summarise(episodes)
    if args.test_split:  # one row per policy over every test workload, too
        summary = pd.concat([summary, summarise(episodes.assign(workload="all test"))], ignore_index=True)
    summary.to_csv(args.out / "summary.csv", index=False)
    md = summary_markdown(summary, metrics=("avg_jct_h", "gpu_hours", "p95_jct_h", "makespan_h", "restarts", "ooms"))
    if "ppo" in set(episodes["policy"]):
        paired = paired_table(episodes, "ppo")
        (args.out / "paired.md").write_text(paired)
        md += "\n" + paired
    (args.out / "summary.md").write_text(md)
    print(md)

if __name__ == "__main__":
    main()
