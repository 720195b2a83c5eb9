"""The ``frenzy train`` subcommand: train a PPO scheduler, with stable-baselines3's MaskablePPO (``--backend
sb3``, the default; agents/ppo/) or Ray RLlib's PPO (``--backend rllib``; agents/rllib.py).

::

    frenzy train --timesteps 300000 --n-envs 2 --seed 0 --out runs/ppo \\
        --trace traces/itp/cluster06.csv:load_scale=1.0,max_jobs=150 [--workload mix|PRESET] [--bc-episodes 60]
    frenzy train --backend rllib --iterations 20 --num-env-runners 2 [--address auto] --out runs/rllib

Writes into ``--out``: ``config.json`` (the full configuration, written first), ``model.zip`` (final),
``best_model.zip`` (best on the validation workloads), ``checkpoints/``, ``eval/evaluations.npz``,
``tb/`` (TensorBoard logs: ``tensorboard --logdir OUT/tb``) and ``train_log.json``. A progress bar shows the
steps. Training workloads (``--workload mix``, the default) mix synthetic workloads on the cluster with
windows of the ``--trace`` files; validation uses synthetic seeds 500-999 and held-out evaluation seeds
>= 1000, never trained on.

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
        help="train a PPO scheduler: MaskablePPO (default) or Ray RLlib PPO (--backend rllib)",
        description=plain_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # None = the TrainConfig / PPOConfig / RLlibTrainConfig default (or the --config file's value)
    p.add_argument(
        "--backend", choices=("sb3", "rllib"), default="sb3",
        help="sb3: MaskablePPO in this process (default); rllib: Ray RLlib PPO with Ray env runners",
    )
    p.add_argument("--timesteps", type=positive_int, default=None, help="environment steps (default 240000)")
    p.add_argument(
        "--n-envs", type=positive_int, default=None,
        help="parallel envs (default 2; rllib: envs per env runner, default 4)",
    )
    p.add_argument("--vec-env", choices=("dummy", "subproc"), default=None, help="vectorisation (default dummy)")
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
    p.add_argument("--out", type=Path, default=None, help="output directory (default runs/ppo; rllib: runs/rllib)")
    p.add_argument("--eval-freq", type=positive_int, default=None, help="steps between validations (default 24000)")
    p.add_argument("--eval-episodes", type=positive_int, default=None, help="validation workloads (default 4)")
    p.add_argument("--validation-jobs", type=positive_int, default=None, help="jobs per validation workload (200)")
    p.add_argument("--checkpoint-freq", type=positive_int, default=None, help="steps between checkpoints (50000)")
    p.add_argument("--n-steps", type=positive_int, default=None, help="rollout steps per env per update (1024)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="minibatch size (256; both backends)")
    p.add_argument("--learning-rate", type=float, default=None, help="Adam step size (1e-4; both backends)")
    p.add_argument("--ent-coef", type=float, default=None, help="entropy bonus (0.001; both backends)")
    p.add_argument("--bc-episodes", type=int, default=None, help="warm-start teacher episodes (default 60; 0: none)")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads (default 1)")
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
    "checkpoint_freq": "checkpoint_freq",
    "threads": "threads",
}
_PPO = ("n_steps", "batch_size", "learning_rate", "ent_coef", "bc_episodes")


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`~agents.ppo.TrainConfig` of parsed arguments (a ``--config`` file, then the flags)."""
    import dataclasses

    from agents.ppo import TrainConfig

    base = TrainConfig()
    if args.config is not None:
        if not args.config.is_file():
            raise ConfigError(f"--config: no such file {str(args.config)!r}")
        base = TrainConfig.from_dict(json.loads(args.config.read_text()))
    top = {field: getattr(args, arg) for arg, field in _TOP.items() if getattr(args, arg) is not None}
    ppo = {k: getattr(args, k) for k in _PPO if getattr(args, k) is not None}
    traces = tuple(parse_trace(t) for t in args.trace) or base.traces
    return dataclasses.replace(
        base,
        **top,
        traces=traces,
        out_dir=str(args.out) if args.out is not None else base.out_dir,
        progress=not args.no_progress,
        verbose=args.verbose if args.verbose is not None else 0,
        ppo=dataclasses.replace(base.ppo, **ppo),
    )


# flags of one backend only (argparse dest -> flag); shared: seed, cluster, workload, out, learning-rate,
# batch-size, ent-coef, n-envs, config, no-progress
_SB3_ONLY = {
    "timesteps": "--timesteps",
    "vec_env": "--vec-env",
    "trace": "--trace",
    "trace_fraction": "--trace-fraction",
    "eval_freq": "--eval-freq",
    "eval_episodes": "--eval-episodes",
    "validation_jobs": "--validation-jobs",
    "checkpoint_freq": "--checkpoint-freq",
    "n_steps": "--n-steps",
    "bc_episodes": "--bc-episodes",
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
# rllib: argparse dest -> RLlibTrainConfig field
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


def check_backend_flags(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` naming every given flag that belongs to the other backend."""
    backend = getattr(args, "backend", "sb3")
    foreign, owner = (_SB3_ONLY, "sb3") if backend == "rllib" else (_RLLIB_ONLY, "rllib")
    given = [flag for dest, flag in foreign.items() if getattr(args, dest, None) not in (None, [])]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise ConfigError(f"{', '.join(given)} {verb} only to --backend {owner}, not --backend {backend}")


def build_rllib_config(args: argparse.Namespace) -> Any:
    """The :class:`~agents.rllib.RLlibTrainConfig` of parsed arguments (a ``--config`` file, then the flags)."""
    from agents.rllib import RLlibTrainConfig

    data: dict[str, Any] = {}
    if args.config is not None:
        if not args.config.is_file():
            raise ConfigError(f"--config: no such file {str(args.config)!r}")
        data = json.loads(args.config.read_text())
        if not isinstance(data, dict):
            raise ConfigError(f"--config {str(args.config)!r}: expected a JSON object")
    data.update({field: getattr(args, arg) for arg, field in _RLLIB_FIELDS.items() if getattr(args, arg) is not None})
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
    """``frenzy train``: check that every flag fits ``--backend``, then train with it."""
    check_backend_flags(args)
    if getattr(args, "backend", "sb3") == "rllib":
        return _run_rllib(args)
    from agents.ppo import train
    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.workload import make_generator

    cfg = build_config(args)
    ClusterSpec.preset(cfg.cluster)  # unknown names fail before anything is written
    if cfg.workload != "mix":
        make_generator(cfg.workload)
    out = train(cfg)
    log = json.loads((out / "train_log.json").read_text())
    print(
        f"trained {log['timesteps']} steps in {log['wall_seconds'] / 60:.1f} min; wrote {out}/model.zip, "
        f"best_model.zip, config.json, checkpoints/, tb/"
    )
    return 0
