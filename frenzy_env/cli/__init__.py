"""The ``frenzy`` command: the top layer of the package, one module per subcommand (memory, plan, evaluate,
benchmark, train, reproduce, data), each with ``add_parser(subparsers)`` and ``run(args) -> int``.

Every subcommand is always registered; baselines, agents and optional packages (Ray) are imported only when
a command runs, and a missing one is reported then. Errors are printed as one line with an exit code (see
:mod:`frenzy_env.cli.common`); invalid arguments exit with argparse's usage message and code 2.
"""

from __future__ import annotations

import argparse
import sys

from frenzy_env import __version__
from frenzy_env.cli import benchmark, data, evaluate, memory, plan, reproduce, train
from frenzy_env.cli.common import run_command

COMMANDS = (memory, plan, evaluate, benchmark, train, reproduce, data)  # in the order `frenzy --help` lists them


def build_parser() -> argparse.ArgumentParser:
    """The ``frenzy`` parser with every subcommand; each sets ``func``, its ``run``."""
    parser = argparse.ArgumentParser(
        prog="frenzy", description="frenzy-env: GPU-cluster scheduling for LLM training, as a Gymnasium env."
    )
    parser.add_argument("-V", "--version", action="version", version=f"frenzy-env {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line), run the subcommand and return its exit code."""
    args = build_parser().parse_args(argv)
    args.command_line = ["frenzy", *(sys.argv[1:] if argv is None else argv)]  # (recorded by evaluate --out)
    return run_command(args.func, args)

