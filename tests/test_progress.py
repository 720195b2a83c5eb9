"""frenzy_env/progress.py: bars are drawn on a terminal only (not into redirected logs), and never with
``show=False``; every bar of the package comes from it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from frenzy_env.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_shows_on_a_terminal_only(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log file or a pipe
    assert progress_bar(3).disable
    monkeypatch.setattr(sys, "stderr", _Terminal())
    bar = progress_bar(3, desc="episodes")
    assert not bar.disable
    bar.update(1)
    bar.close()
    assert "episodes" in sys.stderr.getvalue()
    assert progress_bar(3, show=False).disable


def test_every_bar_of_the_package_comes_from_progress_bar():
    root = Path(__file__).resolve().parents[1]
    users = [
        str(path.relative_to(root))
        for package in ("frenzy_env", "baselines", "agents")
        for path in (root / package).rglob("*.py")
        if ("from tqdm" in path.read_text() or "import tqdm" in path.read_text()) and path.name != "progress.py"
    ]
    assert users == []


def test_redirected_evaluate_writes_no_bar(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "frenzy_env.cli", "evaluate", "--policies", "fifo", "--workload", "synthetic-small",
         "--max-jobs", "4", "--seeds", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 0, done.stderr
    assert "episodes" not in done.stderr and "ep/s" not in done.stderr, done.stderr
