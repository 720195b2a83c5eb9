"""Benchmark frenzy-env: ``python scripts/benchmark.py [--quick | --full] [options]``.

A thin wrapper over ``frenzy benchmark`` (see ``frenzy benchmark --help``) that replays the shared traces
(``--data-dir``, else :func:`frenzy_env.paths.shared_data_dir`: ``$FRENZY_ENV_DATA`` or ``../shared/data``
beside the repository) when they are there.
"""

from __future__ import annotations

import sys

from frenzy_env.cli import main
from frenzy_env.paths import shared_data_dir

if __name__ == "__main__":
    argv = ["benchmark", *sys.argv[1:]]
    shared = shared_data_dir()
    if "--data-dir" not in argv and shared is not None:
        argv += ["--data-dir", str(shared)]
    sys.exit(main(argv))
