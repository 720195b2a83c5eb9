"""Every Python snippet of the README runs verbatim (the RLlib one, where Ray is installed, in test_rllib; without
Ray it says how to install it and does nothing)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_snippets():
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs_verbatim(index, tmp_path, monkeypatch):
    code = SNIPPETS[index]
    if "ray" in re.findall(r"^\s*(?:from|import) (\w+)", code, re.M) and importlib.util.find_spec("ray") is not None:
        pytest.skip("the RLlib snippet with Ray installed: tests/agents/test_rllib.py runs it (and checks its result)")
    monkeypatch.chdir(tmp_path)  # snippets that write files write them here
    exec(compile(code, f"README.md snippet {index}", "exec"), {"__name__": f"readme_snippet_{index}"})
