"""The ``frenzy train`` subcommand: train a MaskablePPO scheduler (agents/ppo.py).

::

    frenzy train --timesteps 300000 --n-envs 2 --seed 0 --out runs/ppo \\
        --trace traces/itp/cluster06.csv:load_scale=1.0,max_jobs=150 [--workload mix|PRESET] [--bc-episodes 60]

Writes into ``--out``: ``config.json`` (the full configuration, written first), ``model.zip`` (final),
``best_model.zip`` (best on the validation workloads), ``checkpoints/``, ``eval/evaluations.npz``,
``tb/`` (TensorBoard logs: ``tensorboard --logdir OUT/tb``) and ``train_log.json``. A progress bar shows the
steps. Training workloads (``--workload mix``, the default) mix synthetic workloads on the cluster with
windows of the ``--trace`` files; validation uses synthetic seeds 500-999 and held-out evaluation seeds
>= 1000, never trained on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from frenzy_env.cli import positive_int
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


def add_parsers(sub: Any) -> None:
    """Register ``frenzy train`` on an argparse subparsers object (torch is imported only when it runs)."""
    p = sub.add_parser(
        "train",
        help="train a MaskablePPO scheduler (TensorBoard logs, checkpoints, validation callback)",
        description=__doc__.split("::")[0].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # None = the TrainConfig / PPOConfig default (or the --config file's value)
    p.add_argument("--timesteps", type=positive_int, default=None, help="environment steps (default 240000)")
    p.add_argument("--n-envs", type=positive_int, default=None, help="parallel envs (default 2)")
    p.add_argument("--vec-env", choices=("dummy", "subproc"), default=None, help="vectorisation (default dummy)")
    p.add_argument("--seed", type=int, default=None, help="seed of PPO, envs and workload draws (default 0)")
    p.add_argument("--cluster", default=None, help="cluster preset (default frenzy-testbed)")
    p.add_argument("--workload", default=None, help="'mix' (synthetic + --trace windows; default) or a preset")
    p.add_argument(
        "--trace",
        action="append",
        default=[],
        metavar="PATH[:k=v,...]",
        help="trace CSV whose windows join the training mix (repeatable); options format=itp, max_jobs=150, "
        "load_scale=1.0, exclude=START-END (submission seconds never trained on)",
    )
    p.add_argument("--trace-fraction", type=float, default=None, help="share of trace episodes (default 0.3)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default runs/ppo)")
    p.add_argument("--eval-freq", type=positive_int, default=None, help="steps between validations (default 24000)")
    p.add_argument("--eval-episodes", type=positive_int, default=None, help="validation workloads (default 4)")
    p.add_argument("--validation-jobs", type=positive_int, default=None, help="jobs per validation workload (200)")
    p.add_argument("--checkpoint-freq", type=positive_int, default=None, help="steps between checkpoints (50000)")
    p.add_argument("--n-steps", type=positive_int, default=None, help="rollout steps per env per update (1024)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="minibatch size (256)")
    p.add_argument("--learning-rate", type=float, default=None, help="Adam step size (1e-4)")
    p.add_argument("--ent-coef", type=float, default=None, help="entropy bonus (0.001)")
    p.add_argument("--bc-episodes", type=int, default=None, help="warm-start teacher episodes (default 60; 0: none)")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads (default 1)")
    p.add_argument("--config", type=Path, default=None, help="a config.json to start from (flags override it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--verbose", type=int, default=0, help="stable-baselines3 verbosity")
    p.set_defaults(func=cmd_train)


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
        verbose=args.verbose,
        ppo=dataclasses.replace(base.ppo, **ppo),
    )


def cmd_train(args: argparse.Namespace) -> int:
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
