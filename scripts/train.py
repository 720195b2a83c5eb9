"""Train the PPO scheduler the way the shipped model was trained: ``frenzy train`` plus real-trace windows.

Usage: ``python scripts/train.py [frenzy train options]``. Unless ``--trace`` is given, the training mix gets
windows of ITP clusters 03, 06 and 08 from ``traces/itp`` of the shared data folder (when present; see
:func:`frenzy_env.paths.shared_data_dir`). The held-out trace window is the package's ``itp-default`` week (ITP
cluster02), so cluster02 is never trained on.
"""

from __future__ import annotations

import sys

from frenzy_env.cli import main
from frenzy_env.paths import shared_data_dir

# (file, load_scale): cluster03 offers ~140 busy GPUs on average, 06 ~87, 08 ~66 (on the 96-GPU testbed).
TRAINING_TRACES = (("cluster03.csv", 0.7), ("cluster06.csv", 1.0), ("cluster08.csv", 1.3))

if __name__ == "__main__":
    argv = ["train", *sys.argv[1:]]
    shared = shared_data_dir()
    itp = shared / "traces" / "itp" if shared is not None else None
    if "--trace" not in argv and itp is not None and itp.is_dir():
        for name, scale in TRAINING_TRACES:
            argv += ["--trace", f"{(itp / name).resolve()}:format=itp,max_jobs=150,load_scale={scale}"]
    sys.exit(main(argv))
