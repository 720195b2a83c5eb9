"""Train the knob policy (``agents.knob``): PPO chooses sia_srpt's move margin at every decision instant.

    python scripts/train_knob.py --config docs/ppo/configs/knob1.json --out runs/knob1
    python scripts/train_knob.py --out runs/knob1 --resume        # continue a killed run from its last checkpoint
    python scripts/train_knob.py --quick --out /tmp/knob_smoke     # seconds: tiny workloads, a few updates

A config with ``"rollouts": K`` (K >= 2) trains with K plays of each workload per update and their
leave-one-out baseline (``agents.knob_rollouts``); ``--resume`` picks the run's own trainer.

Run from the repository root (the config's trace paths are relative to it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.knob import KnobConfig, train_knob  # noqa: E402
from agents.knob_rollouts import train_knob_rollouts  # noqa: E402
from agents.ppo.config import TrainConfig  # noqa: E402


def quick_config() -> KnobConfig:
    """A seconds-long smoke run: 20-30-job synthetic workloads, two envs, a few updates."""
    train = TrainConfig(workload="mix", traces=(), jobs_range=(20, 30), load_range=(0.5, 0.8))
    return KnobConfig(train=train, timesteps=256, n_envs=2, n_steps=64, batch_size=64, n_epochs=2, pool=3,
                      checkpoint_every=128)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, help="a KnobConfig JSON (default: the defaults)")
    ap.add_argument("--out", type=Path, required=True, help="the run folder")
    ap.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    ap.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    ap.add_argument("--max-minutes", type=float, help="stop (and save the model) after this many minutes")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.quick:
        cfg = quick_config()
    elif args.config is not None:
        cfg = KnobConfig.from_dict(json.loads(args.config.read_text()))
    elif args.resume:
        cfg = KnobConfig.from_dict(json.loads((args.out / "config.json").read_text()))
    else:
        cfg = KnobConfig()
    if args.max_minutes is not None:
        cfg = KnobConfig.from_dict({**cfg.to_dict(), "max_minutes": args.max_minutes})
    if cfg.rollouts > 1:  # several plays of each workload per update, no critic (agents.knob_rollouts)
        train_knob_rollouts(cfg, args.out, resume=args.resume)
    else:
        train_knob(cfg, args.out, resume=args.resume, progress=not args.no_progress and sys.stderr.isatty())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
