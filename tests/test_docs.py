"""The documentation's commands run as pasted.

Every line of every ```bash / ```sh / ```shell / ```console block of README.md and docs/*.md is checked
without running it (comments and blank lines skipped, backslash continuations joined, ``&&`` and ``;`` split):

- no usage placeholders outside quotes: ``[``, ``]``, ``|``, ``...`` (usage forms belong in prose or
  ``--help``);
- ``frenzy ...`` parses with the CLI's own argparse parser (:func:`frenzy_env.cli.build_parser`);
- ``python X.py`` names a file that exists in the repository (``scripts/``, ``research/scripts/``);
- ``pip install`` names only extras that pyproject.toml defines.

The ```python blocks of docs/*.md run too (README's run in tests/test_readme.py), except a block right after
a line ``<!-- no-test: REASON -->``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

from frenzy_env.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = ("bash", "sh", "shell", "console")
_PYPROJECT = (ROOT / "pyproject.toml").read_text()
_OPTIONAL = re.search(r"^\[project\.optional-dependencies\]\n(.*?)(?=^\[)", _PYPROJECT, re.M | re.S)
EXTRAS = set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", _OPTIONAL.group(1), re.M))  # (tomllib needs Python 3.11)
NO_TEST = re.compile(r"<!--\s*no-test\b")


def blocks(path: Path) -> list[tuple[str, int, list[str], bool]]:
    """Every fenced block of ``path``: (language, line number of its first line, its lines, marked no-test)."""
    found, lang, start, body, marked, previous = [], None, 0, [], False, ""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fence = re.match(r"^\s*```(\S*)\s*$", line)
        if lang is None and fence:
            lang, start, body, marked = fence.group(1) or "text", number + 1, [], bool(NO_TEST.search(previous))
        elif lang is not None and re.match(r"^\s*```\s*$", line):
            found.append((lang, start, body, marked))
            lang = None
        elif lang is not None:
            body.append(line)
        if line.strip():
            previous = line
    return found


def shell_commands() -> list[tuple[str, str]]:
    """(``file:line``, command) for every command line of every shell block, continuations joined."""
    commands = []
    for page in PAGES:
        for lang, start, body, _ in blocks(page):
            if lang not in SHELLS:
                continue
            pending, first = "", 0
            for offset, line in enumerate(body):
                text = line.strip()
                if lang == "console":  # only prompted lines are commands; the rest is output
                    if not (pending or text.startswith("$ ")):
                        continue
                    text = text[2:] if text.startswith("$ ") else text
                if not pending:
                    if not text or text.startswith("#"):
                        continue
                    first = start + offset
                if text.endswith("\\"):
                    pending += text[:-1] + " "
                    continue
                commands.append((f"{page.relative_to(ROOT)}:{first}", pending + text))
                pending = ""
            if pending:
                commands.append((f"{page.relative_to(ROOT)}:{first}", pending))
    return commands


def split_command(line: str) -> list[str]:
    """``line`` without its trailing comment, split on ``&&`` and ``;`` outside quotes. Raises ValueError for a
    usage placeholder (``[``, ``]``, ``|``, ``...``) outside quotes or an unclosed quote."""
    parts, current, quote, i = [], "", None, 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(line):
                current += c
                i += 1
                c = line[i]
            current += c
        elif c in "'\"":
            quote = c
            current += c
        elif c == "#" and (not current or current[-1].isspace()):
            break
        elif line.startswith("&&", i):
            parts.append(current)
            current, i = "", i + 2
            continue
        elif c == ";":
            parts.append(current)
            current = ""
        elif c in "[]|" or line.startswith("...", i) or c == "\u2026":
            raise ValueError(f"usage placeholder {line[i : i + 3] if c == '.' else c!r} outside quotes")
        else:
            current += c
        i += 1
    if quote:
        raise ValueError("unclosed quote")
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def argv_of(segment: str) -> list[str]:
    """The command's argv, leading ``NAME=value`` environment assignments dropped."""
    argv = shlex.split(segment)
    while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
        argv = argv[1:]
    return argv


def check_frenzy(argv: list[str]) -> str | None:
    """None if the ``frenzy`` parser accepts ``argv`` (after ``frenzy``), else argparse's message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:  # --help / --version exit 0; an argparse error exits 2
        if exc.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    return None


def problems(segment: str) -> list[str]:
    argv = argv_of(segment)
    if not argv:
        return []
    out = []
    if argv[0] == "frenzy":
        message = check_frenzy(argv[1:])
        if message:
            out.append(f"frenzy's parser rejects it: {message}")
    elif re.fullmatch(r"python3?", argv[0]):
        scripts = [a for a in argv[1:2] if a.endswith(".py")]
        out += [f"no file {s}" for s in scripts if not (ROOT / s).is_file()]
    elif argv[:2] == ["pip", "install"] or argv[:4] == ["python", "-m", "pip", "install"]:
        for arg in argv:
            for group in re.findall(r"\[([^\]]*)\]", arg):
                out += [f"no extra {e!r} in pyproject.toml" for e in group.split(",") if e.strip() not in EXTRAS]
    return out


COMMANDS = shell_commands()


def test_the_docs_have_commands():
    assert len(COMMANDS) >= 20
    assert any(c.startswith("frenzy evaluate") for _, c in COMMANDS)


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_shell_line_runs_as_pasted(where, command):
    try:
        segments = split_command(command)
    except ValueError as exc:
        pytest.fail(f"{where}: {exc}: {command}")
    found = [p for s in segments for p in problems(s)]
    assert not found, f"{where}: {'; '.join(found)}: {command}"


def test_the_checker_catches_usage_forms():
    with pytest.raises(ValueError):
        split_command("frenzy evaluate [--json]")
    with pytest.raises(ValueError):
        split_command("frenzy data fetch NAME...")
    with pytest.raises(ValueError):
        split_command("frenzy memory --method frenzy|extended")
    assert split_command('pip install -e ".[test]" && python -m pytest -q  # a comment') == [
        'pip install -e ".[test]"',
        "python -m pytest -q",
    ]
    assert problems("frenzy evaluate --no-such-flag")
    assert problems("frenzy evaluate --seeds two")
    assert not problems("frenzy evaluate --workload synthetic-small --seeds 1")
    assert problems("python scripts/no_such_script.py")
    assert problems('pip install -e ".[nosuchextra]"')
    assert not problems('pip install -e ".[test]"')


DOC_SNIPPETS = [
    (f"{page.relative_to(ROOT)}:{start}", "\n".join(body))
    for page in PAGES[1:]
    for lang, start, body, marked in blocks(page)
    if lang == "python" and not marked
]


@pytest.mark.parametrize(("where", "code"), DOC_SNIPPETS, ids=[w for w, _ in DOC_SNIPPETS])
def test_docs_python_snippet_runs(where, code, tmp_path, monkeypatch):
    if "ray" in re.findall(r"^\s*(?:from|import) (\w+)", code, re.M) and importlib.util.find_spec("ray") is not None:
        pytest.skip("the RLlib snippet with Ray installed: tests/agents/test_rllib.py runs it")
    monkeypatch.chdir(tmp_path)  # snippets that write files write them here
    exec(compile(code, where, "exec"), {"__name__": "docs_snippet"})
