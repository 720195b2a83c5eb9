"""Episode helpers the test modules share (fixtures live in ``tests/conftest.py``)."""

from __future__ import annotations


def play_out(env, policy, max_steps: int = 1000) -> dict:
    """Step ``env`` with ``policy`` from where it stands (invariants checked after each step) until the episode
    ends; the last info. Fails if it does not end within ``max_steps`` (the policy loops)."""
    for _ in range(max_steps):
        action, _ = policy.predict(None, action_masks=env.action_masks())
        _, _, term, trunc, info = env.step(int(action))
        env.sim.check_invariants()
        if term or trunc:
            return info
    raise AssertionError("episode did not end: the policy loops")


def play_episode(env, policy, max_steps: int = 10_000) -> dict:
    """Reset ``env`` (seed 0) and ``policy``, then :func:`play_out`."""
    env.reset(seed=0)
    policy.reset()
    return play_out(env, policy, max_steps)

