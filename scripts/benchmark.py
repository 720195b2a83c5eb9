"""Benchmark frenzy-env: ``python scripts/benchmark.py [--quick | --full] [options]``.

A thin wrapper over ``frenzy benchmark`` (see ``frenzy benchmark --help``) that replays the shared traces
(``../shared/data`` beside the repository, or ``--data-dir``) when they are there.
"""

from __future__ import annotations

import sys
from pathlib import Path

from frenzy_env.cli import main

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"

if __name__ == "__main__":
    argv = ["benchmark", *sys.argv[1:]]
    if "--data-dir" not in argv and SHARED.is_dir():
        argv += ["--data-dir", str(SHARED)]
    sys.exit(main(argv))
