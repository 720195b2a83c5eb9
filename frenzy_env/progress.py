"""Progress bars: the one tqdm factory every part of the package uses (evaluation, the Ray backend, training,
downloads), so that a bar is drawn only where someone watches it.

A bar shows on a terminal or in a notebook; when stderr is redirected to a file or a pipe (a batch job's log) it
is off, as tqdm's ``disable=None`` does, so logs are not filled with redraws. ``show=False`` (the ``--no-progress``
flags) turns it off everywhere.
"""

from __future__ import annotations

from typing import Any


def progress_bar(total: int | None = None, *, show: bool = True, **kwargs: Any) -> Any:
    """A ``tqdm.auto`` bar of ``total`` steps (other keywords go to tqdm), off when ``show`` is False or when
    stderr is not a terminal (a notebook's bar, a widget, stays on)."""
    from tqdm.auto import tqdm

    notebook = any(cls.__module__ == "tqdm.notebook" for cls in tqdm.__mro__)
    disable = True if not show else False if notebook else None  # None: tqdm's "off unless a terminal"
    return tqdm(total=total, disable=disable, **kwargs)
