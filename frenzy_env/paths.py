"""Where the optional public data (traces, throughput measurements, memory calibration) lives.

One function, :func:`shared_data_dir`, answers it for every default that may use that data (the ``--data-dir``
style flags of ``frenzy reproduce`` and the scripts) and for the tests. The environment variable
``FRENZY_ENV_DATA`` names the folder; without it, ``../shared/data`` beside the repository root (the parent of
this package's folder) is used when it exists. The package itself never reads that folder unless a caller asks
for it: nothing in the environment, the simulator or the baselines depends on it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: environment variable naming the shared data folder (a value that is not a folder means "none")
DATA_ENV_VAR = "FRENZY_ENV_DATA"


def shared_data_dir() -> Path | None:
    """The folder of public data, or None where there is none.

    ``$FRENZY_ENV_DATA`` when set and not empty (None if it names no folder, so that
    ``FRENZY_ENV_DATA=/nonexistent`` behaves like a clean checkout); else ``../shared/data`` relative to the
    repository root when that folder exists; else None.
    """
    value = os.environ.get(DATA_ENV_VAR, "").strip()
    if value:
        path = Path(value).expanduser()
        return path if path.is_dir() else None
    path = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return path if path.is_dir() else None
