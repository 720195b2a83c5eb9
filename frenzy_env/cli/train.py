"""The ``frenzy train`` subcommand: train a learned scheduler. ``--agent ppo`` (the default and only agent)
trains the action-level agent with stable-baselines3's MaskablePPO (``--backend sb3``, the default;
agents/ppo/) or Ray RLlib's PPO (``--backend rllib``; agents/rllib/). ``--agent knob`` (the knob agent, a
research model, which the product does not train) is an error saying so.

::

    frenzy train --timesteps 300000 --n-envs 16 --seed 0 --out runs/ppo \\
        --trace traces/itp/cluster06.csv:load_scale=1.0,max_jobs=150 [--workload mix|PRESET] \\
        [--validation-trace traces/itp/cluster04.csv:load_scale=0.18] [--reference doubling]
    frenzy train --resume runs/ppo          # continue a killed run from its last checkpoint
    frenzy train --quick --out /tmp/smoke   # a seconds-long smoke run
    frenzy train --backend rllib --iterations 20 --num-env-runners 2 [--address auto] --out runs/rllib

Writes into ``--out``: ``config.json`` (the full configuration and the data split, written first),
``model.zip`` (latest), ``best_model.zip`` (best validation average JCT), ``bc_model.zip`` (the warm start),
``checkpoint.pt`` (everything ``--resume`` needs; written every ``--checkpoint-minutes``, with ``model.zip``
before every validation and again after it, and at the end), ``learning_curve.csv`` and
``learning_curve.png`` (validation average JCT against decisions, with the reference's, and the validation
episodes cut by a budget), ``updates.jsonl`` (a line per update) and ``train_log.json``. Training and
validation episodes have step budgets and a validation pass a wall-clock budget (``TrainConfig``'s
``max_steps_per_job``, ``validation_max_steps_per_job``, ``validation_time_budget_s``; set them with
``--config``): docs/agents.md. A
progress bar shows the decisions. Training workloads (``--workload mix``, the default) mix synthetic
workloads (seeds 0-499) with windows of the ``--trace`` files; validation uses synthetic seeds 500-999 and
fixed windows of the ``--validation-trace`` files; ``--test-trace`` files are recorded for the held-out
evaluation (seeds >= 1000), never trained or validated on. The reward is differenced against
``--reference`` (a baseline policy name; ``none``: the raw jobs-in-system reward): see docs/agents.md.

With ``--backend rllib`` (needs ``pip install -e ".[ray]"``): ``--iterations`` training iterations of
``--train-batch-size`` env steps each (so ``--timesteps`` does not apply), sampled by ``--num-env-runners``
Ray actors (0: in this process) with ``--n-envs`` envs each, on a local Ray (``--num-cpus``) or the cluster
at ``--address``. ``--seed``, ``--cluster``, ``--workload`` (a preset; default synthetic-small),
``--learning-rate``, ``--batch-size`` (minibatch), ``--ent-coef``, ``--config`` (an rllib config.json),
``--no-progress`` and ``--out`` (default runs/rllib) apply to both backends; the other flags to one only,
and giving one to the other backend is an error. Writes ``config.json``, ``train_log.json`` (one row per
iteration) and ``checkpoint/`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from frenzy_env.cli.common import non_negative_int, plain_text, positive_int
from frenzy_env.errors import ConfigError

_TRACE_KEYS = {"format": str, "max_jobs": int, "load_scale": float, "exclude": str}
#: the agents ``--agent`` trains (agents.model_record.AGENTS, written out so the parser imports no agent)
AGENTS = ("ppo",)


def _agent_name(text: str) -> str:
    """argparse type of ``--agent``: the name as given, except ``knob``, a research model the product does not
    train."""
    if text == "knob":
        raise argparse.ArgumentTypeError(
            "the knob agent is a research model (research/knob), which the product does not train: "
            "python research/scripts/train_knob.py trains it from the repository root"
        )
    return text


def parse_trace(text: str) -> Any:
    """``PATH[:key=value,...]`` (keys: format, max_jobs, load_scale, exclude=START-END) -> TraceWindows."""
    from agents.ppo import TraceWindows

    path, opts = text, ""
    head, sep, tail = text.rpartition(":")
    if sep and "=" in tail:
        path, opts = head, tail
    kwargs: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in opts.split(","))):
        key, eq, value = item.partition("=")
        if not eq or key not in _TRACE_KEYS:
            raise ConfigError(f"--trace option {item!r} in {text!r}: expected one of {', '.join(_TRACE_KEYS)}=VALUE")
        try:
            if key == "exclude":
                lo, hi = value.split("-")
                kwargs["exclude"] = ((float(lo), float(hi)),)
            else:
                kwargs[key] = _TRACE_KEYS[key](value)
        except ValueError:
            raise ConfigError(f"--trace option {item!r} in {text!r}: bad value {value!r}") from None
    if not Path(path).is_file():
        raise ConfigError(f"--trace: no such file {path!r}")
    return TraceWindows(path=path, **kwargs)


def add_parser(sub: Any) -> None:
    """Register ``frenzy train`` on an argparse subparsers object (torch is imported only when it runs)."""
    p = sub.add_parser(
        "train",
        help="train a learned scheduler: the action-level ppo agent",
        description=plain_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # None = the TrainConfig / PPOConfig / RLlibTrainConfig default (or the --config file's value)
    p.add_argument(
        "--agent", type=_agent_name, choices=AGENTS, default="ppo",
        help="ppo: the action-level MaskablePPO agent (the default and only one; the knob agent is a research model: "
        "python research/scripts/train_knob.py trains it)",
    )
    p.add_argument(
        "--backend", choices=("sb3", "rllib"), default="sb3",
        help="sb3: MaskablePPO in this process (default); rllib: Ray RLlib PPO with Ray env runners",
    )
    p.add_argument("--timesteps", type=positive_int, default=None, help="decisions in total (default 4000000)")
    p.add_argument(
        "--n-envs", type=positive_int, default=None,
        help="envs stepped together in this process (default 16; rllib: envs per env runner, default 4)",
    )
    p.add_argument(
        "--vec-env", choices=("dummy",), default=None,
        help="vectorisation: dummy (in-process, batched through the network; the only kind)",
    )
    p.add_argument("--resume", type=Path, default=None, metavar="DIR",
                   help="continue the run in DIR from its checkpoint.pt (with its own config.json)")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run of seconds (tiny workloads, two updates); other flags still apply")
    p.add_argument("--seed", type=int, default=None, help="seed of PPO, envs and workload draws (default 0)")
    p.add_argument("--cluster", default=None, help="cluster preset (default frenzy-testbed)")
    p.add_argument(
        "--workload", default=None,
        help="'mix' (synthetic + --trace windows; default) or a preset (rllib: a preset, default synthetic-small)",
    )
    p.add_argument(
        "--trace",
        action="append",
        default=[],
        metavar="PATH[:k=v,...]",
        help="trace CSV whose windows join the training mix (repeatable); options format=itp, max_jobs=150, "
        "load_scale=1.0, exclude=START-END (submission seconds never trained on)",
    )
    p.add_argument("--trace-fraction", type=float, default=None, help="share of trace episodes (default 0.3)")
    p.add_argument("--validation-trace", action="append", default=[], metavar="PATH[:k=v,...]",
                   help="trace CSV whose fixed windows join the validation set (repeatable; options as --trace)")
    p.add_argument("--test-trace", action="append", default=[], metavar="PATH[:k=v,...]",
                   help="trace CSV recorded as the held-out test set (repeatable; never trained or validated on)")
    p.add_argument("--reference", default=None,
                   help="baseline the reward is differenced against (default doubling; 'none': raw reward; "
                   "both backends)")
    p.add_argument("--horizon-h", type=float, default=None,
                   help="discount horizon in simulated hours, gamma = exp(-dt/horizon) (default: undiscounted)")
    p.add_argument("--train-workloads", type=positive_int, default=None,
                   help="size of the training workload pool (default 1000; each pool workload's reference runs once)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default runs/ppo; rllib: runs/rllib)")
    p.add_argument("--eval-freq", type=positive_int, default=None,
                   help="decisions between validations (default 200000)")
    p.add_argument("--eval-episodes", type=positive_int, default=None,
                   help="synthetic validation workloads (default 8)")
    p.add_argument("--validation-jobs", type=positive_int, default=None, help="jobs per validation workload (200)")
    p.add_argument("--validation-windows", type=int, default=None,
                   help="fixed windows of each validation trace (default 4)")
    p.add_argument("--validation-samples", type=int, default=None,
                   help="sampled plays of each validation workload (default 2; 0: one greedy play)")
    p.add_argument("--init-model", type=Path, default=None, metavar="ZIP",
                   help="start from this model's weights (one this trainer wrote) instead of the warm start, "
                        "and from its run's Adam moments when the checkpoint.pt beside it holds those weights")
    p.add_argument("--checkpoint-minutes", type=float, default=None, help="wall minutes between checkpoints (5)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop after the first update past this wall time, validated and saved (default 52; 0: none)")
    p.add_argument("--n-steps", type=positive_int, default=None, help="rollout decisions per env per update (1024)")
    p.add_argument("--n-epochs", type=positive_int, default=None, help="passes over each rollout (default 2)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="minibatch size (2048; both backends)")
    p.add_argument("--learning-rate", type=float, default=None, help="Adam step size (3e-4; both backends)")
    p.add_argument("--ent-coef", type=float, default=None, help="entropy bonus (0.002; both backends)")
    p.add_argument("--bc-episodes", type=int, default=None, help="warm-start teacher episodes (default 40; 0: none)")
    p.add_argument(
        "--guide", choices=("sia", "sia_srpt"), default=None,
        help="a planner whose next step the policy reads, with a learnt bonus on it (default: none; "
        "docs/agents.md)",
    )
    p.add_argument(
        "--guide-gate", type=float, default=None, metavar="P",
        help="with --guide: a learnt gate instead of the bonus, the policy leaving the plan with probability P "
        "at first (e.g. 0.03; docs/agents.md)",
    )
    p.add_argument(
        "--threads", type=positive_int, default=None,
        help="torch threads (default 1: with more, spinning threads on busy shared cores slow training tenfold)",
    )
    p.add_argument("--config", type=Path, default=None, help="a config.json to start from (flags override it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (rllib: no line per iteration)")
    p.add_argument("--verbose", type=int, default=None, help="stable-baselines3 verbosity (default 0)")
    r = p.add_argument_group("rllib backend (--backend rllib only)")
    r.add_argument("--iterations", type=positive_int, default=None, help="training iterations (default 10)")
    r.add_argument(
        "--num-env-runners", type=non_negative_int, default=None, metavar="N",
        help="Ray env-runner actors sampling in parallel, one CPU each (default 1; 0: sample in this process)",
    )
    r.add_argument(
        "--train-batch-size", type=positive_int, default=None, help="env steps per iteration (default 4000)"
    )
    r.add_argument(
        "--address", default=None, metavar="ADDR",
        help="an existing Ray cluster ('auto', 'HOST:6379' or 'ray://HOST:10001'; frenzy-env installed on "
        "every node); default: start a local Ray",
    )
    r.add_argument("--num-cpus", type=positive_int, default=None, help="CPUs of the local Ray (default: all)")
    p.set_defaults(func=run)


_TOP = {
    "timesteps": "timesteps",
    "n_envs": "n_envs",
    "vec_env": "vec_env",
    "seed": "seed",
    "cluster": "cluster",
    "workload": "workload",
    "trace_fraction": "trace_fraction",
    "eval_freq": "eval_freq",
    "eval_episodes": "validation_episodes",
    "validation_jobs": "validation_jobs",
    "validation_windows": "validation_windows",
    "validation_samples": "validation_samples",
    "checkpoint_minutes": "checkpoint_minutes",
    "max_minutes": "max_minutes",
    "threads": "threads",
    "train_workloads": "train_workloads",
}
_PPO = ("n_steps", "n_epochs", "batch_size", "learning_rate", "ent_coef", "bc_episodes", "horizon_h", "guide",
        "guide_gate")

#: ``--quick``: a smoke run of seconds (tiny synthetic workloads, two updates of 4 x 64 decisions)
QUICK = {
    "timesteps": 512, "n_envs": 4, "max_minutes": None, "jobs_range": (8, 16), "validation_jobs": 10,
    "validation_episodes": 2, "validation_windows": 1, "test_windows": 1, "test_seeds": 2, "train_workloads": 8,
    "eval_freq": 256, "threads": 1,
}
QUICK_PPO = {"n_steps": 64, "batch_size": 128, "bc_episodes": 1, "bc_epochs": 1}


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`~agents.ppo.TrainConfig` of parsed arguments (a ``--config`` file, then the flags)."""
    import dataclasses

    from agents.ppo import TrainConfig

    base = TrainConfig()
    if args.config is not None:
        if not args.config.is_file():
            raise ConfigError(f"--config: no such file {str(args.config)!r}")
        base = TrainConfig.from_dict(json.loads(args.config.read_text()))
    if getattr(args, "quick", False):
        base = dataclasses.replace(base, **QUICK, ppo=dataclasses.replace(base.ppo, **QUICK_PPO))
    top = {field: getattr(args, arg) for arg, field in _TOP.items() if getattr(args, arg) is not None}
    ppo = {k: getattr(args, k) for k in _PPO if getattr(args, k) is not None}
    if args.init_model is not None:
        from agents.ppo.loading import check_model_path

        top["init_model"] = str(check_model_path(args.init_model))
    if top.get("max_minutes") == 0:
        top["max_minutes"] = None
    if args.reference is not None:
        ppo["reference"] = None if args.reference == "none" else args.reference
    traces = tuple(parse_trace(t) for t in args.trace) or base.traces
    return dataclasses.replace(
        base,
        **top,
        traces=traces,
        validation_traces=tuple(parse_trace(t) for t in args.validation_trace) or base.validation_traces,
        test_traces=tuple(parse_trace(t) for t in args.test_trace) or base.test_traces,
        out_dir=str(args.out) if args.out is not None else base.out_dir,
        progress=not args.no_progress,
        verbose=args.verbose if args.verbose is not None else 0,
        ppo=dataclasses.replace(base.ppo, **ppo),
    )


# flags of one backend only (argparse dest -> flag); shared: seed, cluster, workload, out, learning-rate,
# batch-size, ent-coef, n-envs, config, no-progress, reference
_SB3_ONLY = {
    "timesteps": "--timesteps",
    "vec_env": "--vec-env",
    "trace": "--trace",
    "trace_fraction": "--trace-fraction",
    "eval_freq": "--eval-freq",
    "eval_episodes": "--eval-episodes",
    "validation_jobs": "--validation-jobs",
    "validation_windows": "--validation-windows",
    "validation_samples": "--validation-samples",
    "init_model": "--init-model",
    "checkpoint_minutes": "--checkpoint-minutes",
    "max_minutes": "--max-minutes",
    "n_steps": "--n-steps",
    "n_epochs": "--n-epochs",
    "resume": "--resume",
    "quick": "--quick",
    "validation_trace": "--validation-trace",
    "test_trace": "--test-trace",
    "horizon_h": "--horizon-h",
    "train_workloads": "--train-workloads",
    "bc_episodes": "--bc-episodes",
    "guide": "--guide",
    "guide_gate": "--guide-gate",
    "threads": "--threads",
    "verbose": "--verbose",
}
_RLLIB_ONLY = {
    "iterations": "--iterations",
    "num_env_runners": "--num-env-runners",
    "train_batch_size": "--train-batch-size",
    "address": "--address",
    "num_cpus": "--num-cpus",
}
# rllib: argparse dest -> RLlibTrainConfig field (and --reference, read by build_rllib_config)
_RLLIB_FIELDS = {
    "seed": "seed",
    "cluster": "cluster",
    "workload": "workload",
    "learning_rate": "lr",
    "batch_size": "minibatch_size",
    "ent_coef": "entropy_coeff",
    "n_envs": "num_envs_per_env_runner",
    "iterations": "iterations",
    "num_env_runners": "num_env_runners",
    "train_batch_size": "train_batch_size",
    "address": "address",
    "num_cpus": "num_cpus",
}


def _given(value: Any) -> bool:
    """A flag was given: anything but its unset default (None, an empty list, a store_true False); a 0 counts
    (``0 in (None, [], False)`` is true in Python, so membership cannot tell it from False)."""
    return value is not None and value is not False and not (isinstance(value, list) and not value)


def check_backend_flags(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` naming every given flag that belongs to the other backend."""
    backend = getattr(args, "backend", "sb3")
    foreign, owner = (_SB3_ONLY, "sb3") if backend == "rllib" else (_RLLIB_ONLY, "rllib")
    given = [flag for dest, flag in foreign.items() if _given(getattr(args, dest, None))]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise ConfigError(f"{', '.join(given)} {verb} only to --backend {owner}, not --backend {backend}")


def check_out(out: Path | None) -> None:
    """ConfigError when ``--out`` names an existing path that is not a folder (before anything is trained)."""
    if out is not None and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)}: is a file, not a folder")


def read_config_file(path: Path, what: str = "a configuration") -> dict[str, Any]:
    """The JSON object in ``--config``'s file; a missing file or another kind of JSON is a ConfigError."""
    if not path.is_file():
        raise ConfigError(f"--config: no such file {str(path)!r}")
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"--config {str(path)!r}: expected a JSON object ({what})")
    return data


def build_rllib_config(args: argparse.Namespace) -> Any:
    """The :class:`~agents.rllib.RLlibTrainConfig` of parsed arguments (a ``--config`` file, then the flags)."""
    from agents.rllib import RLlibTrainConfig

    data = read_config_file(args.config) if args.config is not None else {}
    data.update({field: getattr(args, arg) for arg, field in _RLLIB_FIELDS.items() if getattr(args, arg) is not None})
    if args.reference is not None:
        data["reference"] = None if args.reference == "none" else args.reference
    if args.out is not None:
        data["out_dir"] = str(args.out)
    if args.no_progress:
        data["progress"] = False
    return RLlibTrainConfig.from_dict(data)


def _run_rllib(args: argparse.Namespace) -> int:
    from agents.rllib import train_rllib

    out = train_rllib(build_rllib_config(args))
    log = json.loads((out / "train_log.json").read_text())
    print(
        f"trained {len(log['iterations'])} iterations, {log['env_steps']} env steps in "
        f"{log['wall_seconds'] / 60:.1f} min ({log['invalid_actions']} invalid actions); wrote {out}/checkpoint, "
        f"config.json, train_log.json"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    """``frenzy train``: check that every flag fits ``--backend``, then train the ppo agent with it."""
    check_backend_flags(args)
    check_out(args.out)
    if getattr(args, "backend", "sb3") == "rllib":
        return _run_rllib(args)
    from agents.ppo import train
    from frenzy_env.workload import make_generator
    from frenzy_env.world.cluster import ClusterSpec

    if args.resume is not None:
        given = [flag for dest, flag in _RESUME_CONFLICTS.items() if _given(getattr(args, dest, None))]
        if given:
            raise ConfigError(f"--resume continues the run with its own config.json: drop {', '.join(given)}")
        out = train(None, resume=args.resume)
    else:
        cfg = build_config(args)
        ClusterSpec.preset(cfg.cluster)  # unknown names fail before anything is written
        if cfg.workload != "mix":
            make_generator(cfg.workload)
        out = train(cfg)
    log = json.loads((out / "train_log.json").read_text())
    print(
        f"trained {log['timesteps']} decisions in {log['wall_seconds'] / 60:.1f} min "
        f"({log['decisions_per_second']:.0f} decisions/s); best validation: {log['best_val_over_ref']:.3f} x the "
        f"reference's average JCT ({log['best_val_avg_jct_h']:.3f} h against {log['reference_val_avg_jct_h']:.3f} h); "
        f"wrote {out}/model.zip, best_model.zip, config.json, checkpoint.pt, learning_curve.csv"
    )
    return 0


# flags that set the configuration, which --resume takes from the run's config.json
_RESUME_CONFLICTS = {**{k: "--" + k.replace("_", "-") for k in (*_TOP, *_PPO)}, "config": "--config",
                     "trace": "--trace", "validation_trace": "--validation-trace", "test_trace": "--test-trace",
                     "reference": "--reference", "quick": "--quick", "out": "--out",
                     "init_model": "--init-model"}
