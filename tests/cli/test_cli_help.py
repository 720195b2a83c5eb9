"""The ``frenzy`` command's own flags and help: ``--version`` and readable ``--help`` text (no raw
reStructuredText from the docstrings used as descriptions)."""

from __future__ import annotations

import re

import pytest

import frenzy_env
from frenzy_env.cli import COMMANDS, main
from frenzy_env.cli.common import plain_text


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag, capsys):
    with pytest.raises(SystemExit) as info:
        main([flag])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"frenzy-env {frenzy_env.__version__}"


@pytest.mark.parametrize("command", [c.__name__.rsplit(".", 1)[-1] for c in COMMANDS])
def test_help_has_no_raw_restructured_text(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and not re.search(r":[a-z]+:`", text) and not re.search(r"::\s*$", text, re.M), text


def test_train_help_keeps_the_docstring_layout(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert "\n    frenzy train --timesteps 300000" in text  # the example stays an indented block
    assert "Writes into --out: config.json" in text


def test_plain_text():
    rst = "See :mod:`agents.ppo` and :class:`~frenzy_env.env.FrenzyEnv` with ``x=1``::\n\n    code\n\nEnd\n\n::\n\n  x"
    assert plain_text(rst) == "See agents.ppo and FrenzyEnv with x=1:\n\n    code\n\nEnd\n\n  x"
