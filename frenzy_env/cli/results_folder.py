"""The results folder of ``frenzy evaluate``, ``frenzy reproduce`` and ``frenzy benchmark`` (their ``--out``):
one run's files, never two runs' mixed, and a marker while a run is in flight.

- A folder that holds anything is refused (exit 2, one line naming it) unless ``--overwrite`` is given; then
  the files the command writes (:data:`EVALUATE_FILES`, :data:`REPRODUCE_FILES`, :data:`BENCHMARK_FILES`: every
  name it writes in any configuration, so that no file of an earlier run with other options stays) and the
  marker are removed first; nothing else in the folder is touched, and the folder itself stays.
- ``INCOMPLETE`` (:data:`MARKER`) is written into the folder before the run writes its first file and removed
  once it has written its last: a folder that holds it is a run that was interrupted or failed (or is still
  running), and the command's last line on stderr says so (:func:`incomplete_note`). ``frenzy evaluate``
  writes its tables after every episode, so it opens the folder (:func:`open_results_folder`) before the first
  one; ``frenzy reproduce`` and ``frenzy benchmark`` write every file at the end, so they check the folder
  before the run (:func:`check_results_folder`) and open it only then: interrupted earlier, they leave the
  folder as it was.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from frenzy_env.errors import FrenzyError
from frenzy_env.paths import atomic_write_text

#: the marker file of a run in flight (removed when the run has written every file)
MARKER = "INCOMPLETE"

#: what ``frenzy evaluate --out`` writes, with and without ``--suite`` (shell patterns)
EVALUATE_FILES = (
    "manifest.json", "jobs.csv", "episodes.csv", "bounds.csv", "summary.csv", "summary.md", "suite.csv",
    "suite.md", "pressure.csv", "jct_cdf.png", "utilisation.png", "bars.png", "schedule_*.png",
)
#: what ``frenzy reproduce --out`` writes
REPRODUCE_FILES = (
    "claims.md", "claims.csv", "episodes.csv", "marp.csv", "jct_frenzy_sia.png", "jct_asrpt.png",
    "jct_doubling.png", "marp_accuracy.png",
)
#: what ``frenzy benchmark --out`` writes
BENCHMARK_FILES = ("benchmark.csv", "benchmark.json", "benchmark.md", "benchmark.png")

_SHOWN = 4  # names listed in the refusal


def add_overwrite_flag(parser: argparse.ArgumentParser) -> None:
    """``--overwrite`` of a command with a results folder."""
    parser.add_argument(
        "--overwrite", action="store_true",
        help="write into an --out folder that is not empty: first remove the files this command writes there "
        "(and an INCOMPLETE marker), leaving any other file; without it a folder that holds anything is refused",
    )


def owns(name: str, files: Iterable[str]) -> bool:
    """Whether the file ``name`` is one of ``files`` (shell patterns) or the marker."""
    return name == MARKER or any(fnmatch.fnmatchcase(name, pattern) for pattern in files)


def _command(args: argparse.Namespace) -> str:
    return f"frenzy {getattr(args, 'command', None) or 'command'}"


def check_results_folder(args: argparse.Namespace, out: Path) -> list[str]:
    """Refuse ``out`` (a :class:`~frenzy_env.errors.FrenzyError` naming it and what to do) when it is a file, or
    when it holds anything and ``args.overwrite`` is not set; else return the names of what it holds. Changes
    nothing on disk."""
    if out.exists() and not out.is_dir():
        raise FrenzyError(f"--out {str(out)!r} exists and is not a directory")
    present = sorted(entry.name for entry in out.iterdir()) if out.is_dir() else []
    if present and not getattr(args, "overwrite", False):
        shown = ", ".join(present[:_SHOWN]) + (f" and {len(present) - _SHOWN} more" if len(present) > _SHOWN else "")
        earlier = "an incomplete earlier run" if MARKER in present else f"{len(present)} entries"
        raise FrenzyError(
            f"--out {str(out)!r} is not empty ({earlier}: {shown}): give a new or empty folder, or add --overwrite "
            f"to remove what {_command(args)} writes there first"
        )
    return present


def open_results_folder(args: argparse.Namespace, out: Path, files: Iterable[str]) -> Path:
    """Make ``out`` ready for a run of ``frenzy args.command`` that writes ``files`` (see the module): refuse it
    as :func:`check_results_folder` does, else remove the command's files there; create it; write the marker.
    ``args.results_folder`` records ``out`` for :func:`close_results_folder` and :func:`incomplete_note`."""
    files = tuple(files)
    command = _command(args)
    present = check_results_folder(args, out)
    for name in present:
        if owns(name, files) and (out / name).is_file():
            (out / name).unlink()
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    line = " ".join(getattr(args, "command_line", None) or [command])
    atomic_write_text(
        out / MARKER,
        f"{command} started writing here at {started} (process {os.getpid()}) and has not finished: the files "
        f"here are partial.\ncommand: {line}\n",
    )
    args.results_folder = out
    return out


def close_results_folder(args: argparse.Namespace) -> None:
    """The run has written every file: remove the marker of :func:`open_results_folder`."""
    out: Path | None = getattr(args, "results_folder", None)
    if out is not None:
        (out / MARKER).unlink(missing_ok=True)


def incomplete_note(args: Any) -> str:
    """``"; DIR is incomplete (DIR/INCOMPLETE marks it)"`` when the command's results folder still holds its
    marker, else ``""`` (the end of the line printed on an interruption or a failure)."""
    out: Path | None = getattr(args, "results_folder", None)
    if out is None or not (out / MARKER).is_file():
        return ""
    return f"; {out} is incomplete ({out / MARKER} marks it)"
