"""Where data lives and how the package writes its files.

Where: one function, :func:`shared_data_dir`, answers it for every default that may use the optional public
data (traces, throughput measurements, memory calibration): the ``--data-dir`` style flags of ``frenzy
reproduce`` and the scripts take the folder named by the environment variable ``FRENZY_ENV_DATA``, or none. The
package never looks for data outside itself on its own; public traces come from the ``frenzy data`` cache
(:mod:`frenzy_env.workload.datasets`).

How: every CSV, JSON and text file the package writes is written whole or not at all: into a temporary file in
the same folder, then moved onto its name with ``os.replace`` (:func:`atomic_open`, :func:`atomic_write_text`,
:func:`atomic_write_csv`, :func:`atomic_write_json`), so a kill never leaves half a file. JSON is standard JSON: NaN and
infinities are written as ``null`` (:func:`json_ready`, :func:`json_text`). A JSON Lines log grows by one whole
line per :func:`append_json_line`, flushed as it is written.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

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


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO[Any]]:
    """A new temporary file in ``path``'s folder, opened with ``mode`` (``"w"`` or ``"wb"``) and ``open_kwargs``,
    that replaces ``path`` (``os.replace``) when the block ends without an exception and is deleted when it
    raises: ``path`` holds its earlier content or the whole new one, never a part."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, mode.replace("w", "x"), **open_kwargs) as fh:
            yield fh
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_open`); returns the path."""
    with atomic_open(path, encoding="utf-8") as fh:
        fh.write(text)
    return Path(path)


def atomic_write_csv(path: str | os.PathLike, frame: Any) -> Path:
    """Write a pandas DataFrame to ``path`` as CSV without its index, atomically; returns the path."""
    with atomic_open(path, newline="", encoding="utf-8") as fh:
        frame.to_csv(fh, index=False)
    return Path(path)


def json_ready(value: Any) -> Any:
    """``value`` with every NaN or infinite float made None, through dicts, lists and tuples (numpy scalars and
    arrays as their Python values), so that it is standard JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return json_ready(value.tolist())
    return value


def json_text(value: Any, indent: int | None = None, default: Any = None) -> str:
    """``value`` as standard JSON text (:func:`json_ready` first; ``json.dumps`` with ``allow_nan=False``);
    ``default`` turns other objects into JSON values, as ``json.dumps``'s does."""
    return json.dumps(json_ready(value), indent=indent, default=default, allow_nan=False)


def atomic_write_json(path: str | os.PathLike, value: Any, indent: int | None = 2, default: Any = None) -> Path:
    """Write ``value`` to ``path`` as standard JSON (:func:`json_text`) ending in a newline, atomically; returns
    the path."""
    return atomic_write_text(path, json_text(value, indent=indent, default=default) + "\n")


def append_json_line(path: str | os.PathLike, value: Any) -> None:
    """Append ``value`` to the JSON Lines file ``path`` as one line of standard JSON, flushed before the call
    returns."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json_text(value) + "\n")
        fh.flush()
