"""Train the action-level ``ppo`` agent on the shipped data split: ``frenzy train`` plus ITP trace windows.

Usage: ``python scripts/train.py`` followed by any ``frenzy train`` options. Unless ``--trace`` or
``--resume`` is given, the split of :mod:`agents.ppo.config` is added from the ITP traces in the ``frenzy
data`` cache: training windows of ITP clusters 03, 06, 08 (:data:`~agents.ppo.config.TRAIN_TRACES`),
validation windows of clusters 04, 07 (:data:`~agents.ppo.config.VALIDATION_TRACES`) and the test clusters
01, 09, 02 (:data:`~agents.ppo.config.TEST_TRACES`, recorded in config.json, never trained or validated on),
each load-matched to the 96-GPU testbed. A trace not yet downloaded stops the script with the ``frenzy data
fetch`` command that downloads it. The shipped action-level model was trained on this split
(``agents/models/ppo_frenzy_testbed.json`` records its commands)::

    python scripts/train.py --out runs/ppo --seed 0
"""

from __future__ import annotations

import sys
from pathlib import Path

from agents.ppo.config import TEST_TRACES, TRAIN_TRACES, VALIDATION_TRACES
from frenzy_env.cli import main
from frenzy_env.workload.datasets import NotCachedError, resolve


def split_args(max_jobs: int = 150) -> list[str]:
    """``--trace``/``--validation-trace``/``--test-trace`` arguments of the split, from the ``frenzy data``
    cache (:class:`~frenzy_env.workload.datasets.NotCachedError` names the command for a trace not downloaded)."""
    argv: list[str] = []
    for flag, files in (("--trace", TRAIN_TRACES), ("--validation-trace", VALIDATION_TRACES),
                        ("--test-trace", TEST_TRACES)):
        for name, scale in files:
            path = resolve("itp-" + Path(name).stem)
            argv += [flag, f"{path}:format=itp,max_jobs={max_jobs},load_scale={scale}"]
    return argv


if __name__ == "__main__":
    argv = ["train", *sys.argv[1:]]
    if "--trace" not in argv and "--resume" not in argv:
        try:
            argv += split_args()
        except NotCachedError as exc:
            sys.exit(f"scripts/train.py: {exc} (the split needs ITP clusters 01-04 and 06-09)")
    sys.exit(main(argv))
