"""Train the PPO scheduler with the shipped data split: ``frenzy train`` plus ITP trace windows.

Usage: ``python scripts/train.py [frenzy train options]``. Unless ``--trace`` is given, the split of
:mod:`agents.ppo.config` is added from ``traces/itp`` of the shared data folder (when present; see
:func:`frenzy_env.paths.shared_data_dir`): training windows of ITP clusters 03, 06, 08
(:data:`~agents.ppo.config.TRAIN_TRACES`), validation windows of clusters 04, 07
(:data:`~agents.ppo.config.VALIDATION_TRACES`) and the test clusters 01, 09, 02
(:data:`~agents.ppo.config.TEST_TRACES`, recorded in config.json, never trained or validated on), each
load-matched to the 96-GPU testbed. ``--resume DIR`` passes through unchanged. The shipped run::

    python scripts/train.py --out runs/ppo_v3 --seed 0
"""

from __future__ import annotations

import sys

from agents.ppo.config import TEST_TRACES, TRAIN_TRACES, VALIDATION_TRACES
from frenzy_env.cli import main
from frenzy_env.paths import shared_data_dir


def split_args(itp: object, max_jobs: int = 150) -> list[str]:
    """``--trace``/``--validation-trace``/``--test-trace`` arguments of the split for the folder ``itp``."""
    argv: list[str] = []
    for flag, files in (("--trace", TRAIN_TRACES), ("--validation-trace", VALIDATION_TRACES),
                        ("--test-trace", TEST_TRACES)):
        for name, scale in files:
            argv += [flag, f"{(itp / name).resolve()}:format=itp,max_jobs={max_jobs},load_scale={scale}"]
    return argv


if __name__ == "__main__":
    argv = ["train", *sys.argv[1:]]
    shared = shared_data_dir()
    itp = shared / "traces" / "itp" if shared is not None else None
    if "--trace" not in argv and "--resume" not in argv and itp is not None and itp.is_dir():
        argv += split_args(itp)
    sys.exit(main(argv))
