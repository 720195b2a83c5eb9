"""Reproduce the papers' claims (a thin wrapper over ``frenzy reproduce``; same options).

Usage: ``python scripts/reproduce.py [--quick] [--seeds N] [--scenarios a,b] [--out DIR]``.
"""

from __future__ import annotations

import sys

from frenzy_env.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", *sys.argv[1:]]))
