"""``frenzy data``: the public traces (:mod:`frenzy_env.workload.datasets`): list the catalogue and the cache, fetch
traces from their upstream repositories (or a mirror) with checksums and resume, print a cached file's path.

A cached trace is then usable by name: ``frenzy evaluate --trace itp-cluster04``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "data",
        help="list, fetch and locate the public traces (ITP, Philly)",
        description="The public GPU-cluster traces, downloaded from their upstream repositories (pinned to a "
        "commit, SHA-256 checked, resumable) into a user cache ($FRENZY_ENV_CACHE, else "
        "~/.cache/frenzy-env/traces). A cached trace can be named by --trace.",
    )
    p.add_argument("--cache-dir", default=None, help="cache folder (default: $FRENZY_ENV_CACHE or the user cache)")
    actions = p.add_subparsers(dest="data_command", metavar="ACTION")
    actions.required = True
    actions.add_parser("list", help="the catalogue: name, downloaded or not, size, description")
    f = actions.add_parser("fetch", help="download traces into the cache (resumes a partial download)")
    f.add_argument("names", nargs="+", metavar="NAME", help="catalogue names (see `frenzy data list`)")
    f.add_argument(
        "--mirror", default=None, help="a mirror with the upstream OWNER/REPO/COMMIT/PATH layout (http(s):// or "
        "file://; default $FRENZY_ENV_MIRROR, else the upstream repositories)"
    )
    f.add_argument("--force", action="store_true", help="download again even if cached")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    w = actions.add_parser("path", help="print the cached file of a trace (exit 2 if it is not downloaded)")
    w.add_argument("name", metavar="NAME")
    p.set_defaults(func=run)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)  # pragma: no cover


def run(args: argparse.Namespace) -> int:
    from frenzy_env.workload import datasets

    if args.data_command == "list":
        rows = datasets.list_traces(args.cache_dir)
        width = max(len(r.name) for r in rows)
        print(f"cache: {datasets.cache_dir(args.cache_dir)}")
        for r in rows:
            entry = datasets.get(r.name)
            state = "cached    " if r.cached else "not cached"
            size = _size(r.size) + ("" if r.cached else " to download")
            print(f"{r.name:<{width}}  {state}  {size:>22}  {entry.description}")
        return 0
    if args.data_command == "path":
        print(datasets.resolve(datasets.get(args.name).name, cache_dir=args.cache_dir))
        return 0
    for name in args.names:
        datasets.get(name)  # every name is checked before any download starts
    for name in args.names:
        path = datasets.fetch(
            name, cache_dir=args.cache_dir, base_url=args.mirror, progress=not args.no_progress, force=args.force
        )
        print(f"{name}: {path}", file=sys.stdout)
    return 0
