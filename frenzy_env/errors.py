"""Exceptions raised by frenzy-env.

Every error names the field (or file, row and column) and the offending value, so that a person can act on
it without reading a traceback. All of them are ``ValueError`` subclasses, so callers that already catch
``ValueError`` keep working.
"""

from __future__ import annotations


class FrenzyError(Exception):
    """Base class of every error raised on purpose by frenzy-env."""


class UnknownNameError(FrenzyError, ValueError):
    """An unknown model, GPU type, cluster preset, workload preset, ranking or policy name."""


class ConfigError(FrenzyError, ValueError):
    """A configuration field with a bad value, or a misspelt configuration key."""


class TraceFormatError(FrenzyError, ValueError):
    """A trace file that cannot be read; the message names the file, the row and the column."""


def unknown_name(kind: str, name: object, known: object) -> UnknownNameError:
    """Build the standard "unknown <kind> 'x'; known: a, b, c" error, with a close-match hint."""
    import difflib

    known_list = sorted(str(k) for k in known)
    hint = difflib.get_close_matches(str(name), known_list, n=1)
    did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
    return UnknownNameError(f"unknown {kind} {name!r}{did_you_mean}; known: {', '.join(known_list)}")


def check_keys(kind: str, given: dict[str, object] | object, allowed: object) -> None:
    """Raise :class:`ConfigError` naming every key of ``given`` that is not in ``allowed``."""
    import difflib

    allowed_list = sorted(str(a) for a in allowed)
    bad = [k for k in given if k not in allowed_list]  # type: ignore[union-attr]
    if not bad:
        return
    parts = []
    for key in bad:
        hint = difflib.get_close_matches(str(key), allowed_list, n=1)
        parts.append(f"{key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    raise ConfigError(f"unknown {kind} key(s) {', '.join(parts)}; allowed: {', '.join(allowed_list)}")
