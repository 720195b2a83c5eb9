"""Train the knob agent (``research.knob``): PPO chooses sia_srpt's move margin at every decision instant.

    python research/scripts/train_knob.py --config research/results/ppo/configs/knob2.json --out runs/knob2
    python research/scripts/train_knob.py --out runs/knob2 --resume --max-minutes 45   # on from the last checkpoint
    python research/scripts/train_knob.py --quick --out /tmp/knob_smoke    # seconds: tiny workloads, a few updates

The configuration is ``--quick``'s, a ``--config`` file's (a ``KnobConfig`` in JSON; the shipped model's is the
``config`` entry of ``research/knob/models/knob_frenzy_testbed.json``), the run's own (``--resume``) or the
defaults, then ``--timesteps``, ``--seed`` and ``--max-minutes`` (0: no limit) override it. ``--resume``
continues the run in ``--out`` with its own ``config.json`` and this command's budget. A config with
``"rollouts": K`` (K >= 2) trains with K plays of each workload per update and their leave-one-out baseline
(``research.knob.rollouts``). Writes ``config.json``, ``checkpoints/``, ``start.zip`` and ``model.zip`` with
``model.json`` beside it into ``--out``.

Run from the repository root (a config's trace paths are relative to it). This was ``frenzy train --agent
knob`` while the knob agent was part of the product (until issue 44: ``research/knob/__init__.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def build_config(args: argparse.Namespace):
    """The :class:`~research.knob.KnobConfig` of the parsed arguments."""
    from frenzy_env.errors import ConfigError
    from research.knob import KnobConfig, quick_config

    if args.quick:
        data = quick_config().to_dict()
    elif args.config is not None:
        if not args.config.is_file():
            raise ConfigError(f"--config: no such file {str(args.config)!r}")
        data = json.loads(args.config.read_text())
    elif args.resume:
        run_config = args.out / "config.json"
        if not run_config.is_file():
            raise ConfigError(f"--resume: no config.json in {str(args.out)!r} (not a knob run folder)")
        data = json.loads(run_config.read_text())
    else:
        data = KnobConfig().to_dict()
    for name in ("timesteps", "seed", "max_minutes"):
        if getattr(args, name) is not None:
            data[name] = getattr(args, name)
    if data.get("max_minutes") == 0:
        data["max_minutes"] = None
    return KnobConfig.from_dict(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, help="a knob configuration in JSON (default: the defaults)")
    ap.add_argument("--out", type=Path, required=True, help="the run folder")
    ap.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    ap.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    ap.add_argument("--timesteps", type=int, help="decisions in total")
    ap.add_argument("--seed", type=int, help="seed of PPO and the workload draws")
    ap.add_argument("--max-minutes", type=float, help="stop (and save the model) after this many minutes (0: none)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)

    from frenzy_env.errors import ConfigError
    from research.knob import train_knob, train_knob_rollouts

    try:
        cfg = build_config(args)
        if cfg.rollouts > 1:  # several plays of each workload per update, no critic (research.knob.rollouts)
            path = train_knob_rollouts(cfg, args.out, resume=args.resume)
        else:
            path = train_knob(cfg, args.out, resume=args.resume,
                              progress=not args.no_progress and sys.stderr.isatty())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} (and {path.with_suffix('.json').name} beside it), config.json and checkpoints/ in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
