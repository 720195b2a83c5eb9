"""What every ``frenzy`` subcommand shares: the argparse value types and the handling that turns a failed
command into one line on stderr and an exit code.

Errors a user can fix (bad names, bad files, bad values, a missing optional package) are printed as one line
``frenzy: error: ...`` with exit code 2 and no traceback; any other failure (a policy that raises, say) is
printed as one line with exit code 1 (``FRENZY_DEBUG=1`` re-raises it with its traceback). When the command
leaves its results folder unfinished, the line says so (:func:`frenzy_env.cli.results_folder.incomplete_note`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from frenzy_env.cli.results_folder import incomplete_note
from frenzy_env.errors import FrenzyError

# the packages of this project: a module of theirs that fails to import is a bug, not a missing dependency
_OWN_PACKAGES = ("frenzy_env", "baselines", "agents")
# optional packages -> the extra of pyproject.toml that installs them (any other package is a dependency)
_EXTRAS = {"ray": "ray", "pyinstrument": "profile"}
# module names that differ from the name pip installs under (beyond "_" for "-")
_DISTRIBUTIONS = {"sklearn": "scikit-learn"}


def _int_at_least(text: str, minimum: int, expected: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a positive integer (shared by every subcommand)."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


#: FrenzyEnv keywords that have flags of their own (--env refuses them)
_OWN_FLAGS = {"cluster": "--cluster", "workload": "--workload", "predictor": "--predictor",
              "preemption": "--preemption"}


def env_option(text: str) -> tuple[str, object]:
    """argparse type of ``--env``: ``KEY=VALUE`` -> ``(KEY, value)`` (value by
    :func:`frenzy_env.cli.policies.keyword_value`)."""
    from frenzy_env.cli.policies import keyword_value

    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    if key in _OWN_FLAGS:
        raise argparse.ArgumentTypeError(f"{key} has a flag of its own: use {_OWN_FLAGS[key]}")
    return key, keyword_value(value.strip())


def env_interface(args: Any) -> str:
    """The observation layout of the run's envs (``--env interface=...`` or ``--world``'s, else the default)."""
    from frenzy_env.simulator import SimConfig

    return str(env_keywords(args).get("interface", SimConfig().interface))


def env_keywords(args: argparse.Namespace) -> dict[str, object]:
    """The keywords of ``--world`` (the world of an earlier env version, :data:`frenzy_env.registration.WORLDS`),
    then the ``--env`` keywords over them, as a dict (a key given twice: the last value)."""
    from frenzy_env.registration import WORLDS

    world = getattr(args, "world", None)
    return {**(WORLDS[world] if world is not None else {}), **dict(getattr(args, "env_options", None) or [])}


def choice_list(kind: str, known: tuple[str, ...]) -> Any:
    """argparse type: a comma list of names from ``known`` (e.g. benchmark sections, reproduce scenarios)."""

    def parse(text: str) -> tuple[str, ...]:
        items = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in items if t not in known]
        if not items or bad:
            raise argparse.ArgumentTypeError(f"unknown {kind}(s) {bad or text!r}; known: {', '.join(known)}")
        return items

    return parse


def csv_list(text: str) -> list[str]:
    """argparse type: a non-empty comma list of names (checked by the command that uses them)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def plain_text(rst: str) -> str:
    """A reStructuredText docstring as plain text for ``--help``: roles (``:mod:`x```, ``:class:`~a.B```) and
    double backticks dropped, a literal block's ``::`` made ``:``; the line layout is kept (use
    ``argparse.RawDescriptionHelpFormatter``)."""
    text = re.sub(r":[a-z]+:`(~?)([^`]+)`", lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), rst)
    text = text.replace("``", "")
    text = re.sub(r"^[ \t]*::[ \t]*\n([ \t]*\n)?", "", text, flags=re.MULTILINE)  # a marker on a line of its own
    text = re.sub(r"[ \t]*::$", ":", text, flags=re.MULTILINE)
    return text.strip()


class CommandFailed(Exception):
    """A command failed and its message already says how (no exception type is put before it); ``exit_code``
    is the code to exit with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def missing_package(exc: BaseException, command: str) -> str | None:
    """The one line saying which package ``frenzy COMMAND`` needs and how to install it, when ``exc`` is a
    :class:`ModuleNotFoundError` for a package outside this project; otherwise None."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not name or name.split(".")[0] in _OWN_PACKAGES:
        return None
    module = name.split(".")[0]
    package = _DISTRIBUTIONS.get(module, module.replace("_", "-"))
    extra = _EXTRAS.get(module)
    install = f'pip install -e ".[{extra}]" (the [{extra}] extra)' if extra else "pip install -e . (a dependency)"
    return f"frenzy {command} needs the package {package!r}, which is not installed: {install}"


def run_command(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``handler(args)`` and return its exit code, printing any error as one line (see the module)."""
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print(f"frenzy: interrupted{incomplete_note(args)}", file=sys.stderr)
        return 130
    except (FrenzyError, OSError) as exc:  # OSError: missing, unreadable or unwritable files and directories
        print(f"frenzy: error: {_one_line(exc)}{incomplete_note(args)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug or a failing policy: one line, no traceback unless asked for
        missing = missing_package(exc, args.command)
        if missing is not None:
            print(f"frenzy: error: {missing}{incomplete_note(args)}", file=sys.stderr)
            return 2
        if os.environ.get("FRENZY_DEBUG"):
            raise
        code = exc.exit_code if isinstance(exc, CommandFailed) else 1
        kind = "" if isinstance(exc, CommandFailed) else f"{type(exc).__name__}: "
        print(f"frenzy: error: {kind}{_one_line(exc)}{incomplete_note(args)} (FRENZY_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return code


def guarded(command: str, handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``handler(args)`` of ``frenzy COMMAND`` (memory, plan), printing a bad value (:class:`FrenzyError`
    or ``ValueError``) as one line ``frenzy COMMAND: error: ...`` and returning exit code 2."""
    try:
        return handler(args)
    except (FrenzyError, ValueError) as exc:
        print(f"frenzy {command}: error: {exc}", file=sys.stderr)
        return 2
