"""The studies behind frenzy-env (research/README.md): not part of the product, and never imported by it.

A package so that its modules import from the repository root (``import research.knob``); the installed
distribution does not contain it (``pyproject.toml`` packages ``frenzy_env``, ``baselines`` and ``agents`` only).
"""
