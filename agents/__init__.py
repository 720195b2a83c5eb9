"""Learned schedulers for frenzy-env.

:mod:`agents.ppo`: MaskablePPO with a set-structured (slot x plan) policy; ``agents.ppo.load_policy(env)``
loads the model shipped in ``agents/models/`` (imported lazily: ``import agents`` does not import torch).
"""
