"""Fuzz the environment: every kind of policy, illegal actions included, on every preset and random small
instances, with preemption on and off and the episode budgets set and unset, under the invariant checker.

Usage::

    python scripts/fuzz.py --steps 1000000 --json fuzz.json
    python scripts/fuzz.py --steps 20000 --policies masked-random,ppo,fifo --presets frenzy/HeteroCluster-v5 \\
        --no-custom --preemption off --budgets on --episode-steps 200 --warmup-episodes 20

A command line over :func:`frenzy_env.testing.fuzzing.fuzz` (see its module for how episodes are drawn and
checked). Flags:

- ``--steps N`` env steps to play (default 1,000,000); ``--seed S`` the seed every draw comes from (0);
- ``--policies A,B,...`` the drivers to draw from (default ``all``): ``masked-random`` (a uniformly random legal
  action), ``unmasked-random`` (a uniformly random integer in [-3, n + 3), mostly illegal), ``ppo`` (the shipped
  learned agent, ``agents.ppo.loading.load_policy``: it fits the frenzy-testbed presets' ``-v5`` ids, the world
  it was trained in, without preemption and refuses the other envs, counted as refusals) and any registered
  baseline (``baselines.POLICIES``);
- ``--presets A,B,...`` the registered presets to draw from, by env id (default ``all``: each preset's current id
  and its ``-v5`` id, :func:`frenzy_env.testing.fuzzing.fuzz_presets`); ``--no-custom`` leaves
  out the random small instances;
- ``--preemption {on,off,both}`` and ``--budgets {on,off,both}`` (default ``both``: drawn per episode; the
  budgets are the env's ``max_steps``, 1 to ``--episode-steps`` steps, and ``max_sim_hours``, 0.01 to 100
  hours, each set or unset);
- ``--episode-steps N`` the fuzzer's cap on one episode (400); ``--preset-jobs A,B,...`` the job counts a
  preset's workload is cut to, drawn per episode (4,12,40);
- ``--warmup-episodes K`` and ``--warmup-steps N`` the memory check's warm-up, over once both are done (100
  episodes; default steps: a tenth of ``--steps``); ``--max-growth-mb M`` the RSS growth after it that fails
  the run (50);
- ``--json PATH`` writes the report (:meth:`FuzzReport.to_dict`) there, as standard JSON, atomically.

The report (:meth:`FuzzReport.summary`) goes to stdout, each failure's traceback to stderr. The exit status is
1 on any crash or invariant violation, a memory growth above ``--max-growth-mb``, a warm-up that did not
complete (the memory check was not made), or a stalled run; 2 on a bad flag; else 0. Refusals are counted, not
failures.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import baselines
from frenzy_env.paths import atomic_write_json
from frenzy_env.testing.fuzzing import RANDOM_DRIVERS, SETTINGS, fuzz, fuzz_presets

AGENT = "ppo"  # the shipped learned agent's name among --policies


def agent_factory(env):
    """The shipped agent bound to ``env`` (ConfigError when the env's spaces are not the model's)."""
    from agents.ppo.loading import DEFAULT_MODEL_PATH, load_policy

    return load_policy(env, DEFAULT_MODEL_PATH)


def _names(parser: argparse.ArgumentParser, flag: str, text: str, known: list[str]) -> list[str]:
    """A comma list of names, each among ``known`` (``all``: every one of them); else a usage error naming it."""
    if text == "all":
        return known
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        parser.error(f"{flag} names nothing: {text!r}")
    for name in names:
        if name not in known:
            parser.error(f"{flag}: unknown name {name!r}; known: all, {', '.join(known)}")
    return list(dict.fromkeys(names))


def _counts(parser: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"{flag} must be a comma list of positive integers, got {text!r}")
    return counts


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps to play (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default="all", help="comma list: masked-random, unmasked-random, ppo, baselines")
    parser.add_argument("--presets", default="all", help="comma list of registered env ids (default all)")
    parser.add_argument("--no-custom", action="store_true", help="leave out the random small instances")
    parser.add_argument("--preemption", choices=SETTINGS, default="both")
    parser.add_argument("--budgets", choices=SETTINGS, default="both", help="max_steps and max_sim_hours")
    parser.add_argument("--episode-steps", type=int, default=400, help="cap on the steps of one episode")
    parser.add_argument("--preset-jobs", default="4,12,40", help="job counts a preset's workload is cut to")
    parser.add_argument("--warmup-episodes", type=int, default=100, help="episodes before the warm RSS")
    parser.add_argument("--warmup-steps", type=int, default=None, help="steps before the warm RSS (a tenth)")
    parser.add_argument("--max-growth-mb", type=float, default=50.0, help="fail above this RSS growth")
    parser.add_argument("--json", default=None, help="write the report as JSON here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for flag, value, least in (("--steps", args.steps, 1), ("--episode-steps", args.episode_steps, 1),
                               ("--warmup-episodes", args.warmup_episodes, 0),
                               ("--warmup-steps", args.warmup_steps, 0)):
        if value is not None and value < least:
            parser.error(f"{flag} must be an integer >= {least}, got {value}")
    names = _names(parser, "--policies", args.policies, [*RANDOM_DRIVERS, AGENT, *baselines.POLICIES])
    presets = _names(parser, "--presets", args.presets, list(fuzz_presets()))
    policies = {n: agent_factory if n == AGENT else partial(baselines.make_policy, n) for n in names}
    report = fuzz(
        args.steps, seed=args.seed, policies={n: f for n, f in policies.items() if n not in RANDOM_DRIVERS},
        random_drivers=[n for n in names if n in RANDOM_DRIVERS], presets=presets, custom=not args.no_custom,
        preemption=args.preemption, budgets=args.budgets, episode_steps=args.episode_steps,
        preset_jobs=_counts(parser, "--preset-jobs", args.preset_jobs), warmup_episodes=args.warmup_episodes,
        warmup_steps=args.warmup_steps, progress=True,
    )
    print(report.summary())
    for failure in report.failures:
        print(f"{failure['kind']} in {failure['place']}:\n{failure['traceback']}", file=sys.stderr)
    if args.json:
        atomic_write_json(args.json, report.to_dict())
    growth = report.rss_growth_mb
    bad = report.crashes or report.violations or report.stalled or growth is None or growth > args.max_growth_mb
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
