"""The environment's version: the suffix of every registered id (``frenzy/HeteroCluster-v6``) and the prefix
of every benchmark suite's name (``v6-test``, :mod:`frenzy_env.workload.suites`).

It goes up whenever the environment's dynamics or spaces change (with a Version History entry in
:class:`frenzy_env.env.FrenzyEnv`'s docstring), which renames the ids and the suites with it: results of two
versions are never mixed under one name. A leaf module, so that every layer can read it.
"""

from __future__ import annotations

ENV_VERSION = "v6"
