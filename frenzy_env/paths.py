"""Where the optional public data (traces, throughput measurements, memory calibration) lives.

One function, :func:`shared_data_dir`, answers it for every default that may use that data (the ``--data-dir``
style flags of ``frenzy reproduce`` and the scripts): the folder named by the environment variable
``FRENZY_ENV_DATA``, or none. The package never looks for data outside itself on its own; public traces come
from the ``frenzy data`` cache (:mod:`frenzy_env.workload.datasets`).
"""

from __future__ import annotations

import os
from pathlib import Path

#: environment variable naming the shared data folder (a value that is not a folder means "none")
DATA_ENV_VAR = "FRENZY_ENV_DATA"

#: the data that ships inside the package (trace extract, memory cases, residuals; frenzy_env/data)
PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def shared_data_dir() -> Path | None:
    """The folder of public data named by ``$FRENZY_ENV_DATA``, or None where it is unset, empty or names no
    folder (so ``FRENZY_ENV_DATA=/nonexistent`` behaves like an unset variable)."""
    value = os.environ.get(DATA_ENV_VAR, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_dir() else None
