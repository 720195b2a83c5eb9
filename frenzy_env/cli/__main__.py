"""``python -m frenzy_env.cli``: the ``frenzy`` command without its console script."""

from __future__ import annotations

import sys

from frenzy_env.cli import main

sys.exit(main())
