"""Fuzz the environment: random actions, illegal ones included, across every preset and baseline.

Usage::

    python scripts/fuzz.py --steps 1000000 [--seed 0] [--policies fifo,frenzy] [--json fuzz.json]

A command line over :func:`frenzy_env.testing.fuzzing.fuzz` (episodes round-robin over every registered preset and
random small instances, driven by masked-random play and by the registered baselines, ``baselines.POLICIES``),
whose :class:`frenzy_env.testing.checker.InvariantChecker` checks every step. The exit status is 1 on any crash,
invariant violation or resident-memory growth above ``--max-growth-mb``.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial

import baselines
from frenzy_env.testing.fuzzing import fuzz


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps to play (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episode-steps", type=int, default=30_000, help="cap on the steps of one episode")
    parser.add_argument("--policies", default=None, help="comma list of baselines (default: all registered)")
    parser.add_argument("--max-growth-mb", type=float, default=50.0, help="fail above this RSS growth")
    parser.add_argument("--json", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.episode_steps < 1:
        parser.error("--steps and --episode-steps must be positive")
    names = list(baselines.POLICIES) if args.policies is None else [p for p in args.policies.split(",") if p]
    policies = {name: partial(baselines.make_policy, name) for name in names}
    report = fuzz(args.steps, seed=args.seed, policies=policies, episode_steps=args.episode_steps, progress=True)
    print(report.summary())
    print("configs:", ", ".join(report.configs))
    print("steps by driver:", ", ".join(f"{k} {v:,}" for k, v in report.steps_by_driver.items()))
    for failure in report.failures:
        print(failure, file=sys.stderr)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report.to_dict(), fh, indent=2)
    bad = report.crashes or report.violations or report.rss_growth_mb > args.max_growth_mb
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
