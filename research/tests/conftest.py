"""Tests of the research scripts and of ``research.knob``: ``python -m pytest research/tests`` from the
repository root (the product's ``python -m pytest`` collects ``tests/`` only). Puts ``research/scripts`` on
``sys.path``, so a test imports a script as a module (``import planner_sweep``), and the repository root, so
``research.knob`` imports (also under a bare ``pytest``), and takes the small builders (``make_job``,
``make_workload``, ``make_env``) from the product tests' ``tests/conftest.py``, loaded under a name of its own.

Nothing here reads a file outside the checkout: tests build their configurations and workloads in place.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "research" / "scripts"
for _path in (ROOT, SCRIPTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

_spec = importlib.util.spec_from_file_location("frenzy_product_tests_conftest", ROOT / "tests" / "conftest.py")
_product = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _product
_spec.loader.exec_module(_product)

# fixtures re-exported: pytest collects fixture functions found in a conftest's namespace
make_job = _product.make_job
make_workload = _product.make_workload
make_env = _product.make_env
