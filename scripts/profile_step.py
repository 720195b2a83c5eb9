"""Profile the environment step: masked-random play under pyinstrument (or cProfile), to see where a step's
time goes (the case ``frenzy benchmark`` measures against CartPole).

Usage::

    python scripts/profile_step.py [--env frenzy/Large1024-v5] [--steps 20000] [--seed 0]
                                   [--out profile.html | profile.txt] [--cprofile] [--no-jit]

Prints the unprofiled cost of a step first (microseconds, best of three rounds), then the profile: a call
tree from pyinstrument (``pip install -e ".[profile]"``), or with ``--cprofile`` the standard library's
profiler sorted by own time. ``--no-jit`` profiles the numpy code instead of the compiled kernels.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import frenzy_env  # noqa: F401  (registers the ids)
from frenzy_env import kernels


def play(env: gym.Env, steps: int, rng: np.random.Generator, obs: dict) -> dict:
    """``steps`` masked-random steps (the benchmark's action choice); returns the last observation."""
    for _ in range(steps):
        legal = np.flatnonzero(obs["action_mask"])
        obs, _, term, trunc, _ = env.step(int(legal[rng.integers(legal.size)]))
        if term or trunc:
            obs, _ = env.reset()
    return obs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="frenzy/Large1024-v5", help="registered id (default frenzy/Large1024-v5)")
    p.add_argument("--steps", type=int, default=20_000, help="profiled steps (default 20000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also write the report (.html: pyinstrument's page)")
    p.add_argument("--cprofile", action="store_true", help="use the standard library's cProfile")
    p.add_argument("--no-jit", action="store_true", help="the numpy code instead of the compiled kernels")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps must be at least 1, got {args.steps}")
    if not args.cprofile:
        try:
            from pyinstrument import Profiler
        except ImportError:
            print('pyinstrument is not installed: pip install -e ".[profile]", or pass --cprofile', file=sys.stderr)
            return 2
    if args.no_jit:
        kernels.set_enabled(False)
    env = gym.make(args.env)
    rng = np.random.default_rng(args.seed)
    obs, _ = env.reset(seed=args.seed)
    obs = play(env, min(2_000, args.steps), rng, obs)  # warm-up: caches, the kernels' load
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        obs = play(env, args.steps, rng, obs)
        best = min(best, (time.perf_counter() - t0) / args.steps)
    path = "compiled kernels" if kernels.enabled() else "numpy code"
    print(f"{args.env}: {best * 1e6:.1f} us per masked-random step ({path}, best of 3 x {args.steps:,} steps)\n")
    if args.cprofile:
        prof = cProfile.Profile()
        prof.enable()
        play(env, args.steps, rng, obs)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
        report = buf.getvalue()
    else:
        profiler = Profiler(interval=0.0001)
        profiler.start()
        play(env, args.steps, rng, obs)
        profiler.stop()
        report = profiler.output_text(unicode=True, color=False)
    print(report)
    if args.out is not None:
        html = args.out.suffix == ".html" and not args.cprofile
        args.out.write_text(profiler.output_html() if html else report, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
