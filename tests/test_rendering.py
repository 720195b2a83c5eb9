"""frenzy_env.rendering: the labelled rgb_array frame and the ansi text."""

from __future__ import annotations

import numpy as np
import pytest

from frenzy_env.env import FrenzyEnv
from frenzy_env.rendering import FRAME_SHAPE

SMALL = {"cluster": "frenzy-testbed", "workload": "synthetic-small"}
FREE = (214, 214, 214)  # the colour of a free GPU's cell


def _start_until_busy(env: FrenzyEnv) -> None:
    """Take the first legal start (else wait) until some GPU is busy after the step."""
    for _ in range(100):
        mask = env.action_masks()
        starts = np.flatnonzero(mask[env.first_start : env.first_resize])
        env.step(env.first_start + int(starts[0]) if starts.size else 0)
        if env.sim.busy_gpus:
            return
    raise AssertionError("no GPU became busy")


@pytest.mark.parametrize("cluster", ["frenzy-testbed", "pai-2020", "large-1024"])
def test_frame_shape_content_and_change_after_a_start(cluster):
    env = FrenzyEnv(cluster=cluster, workload="synthetic-small", render_mode="rgb_array")
    env.reset(seed=0)
    before = env.render()
    assert before.shape == FRAME_SHAPE and before.dtype == np.uint8
    assert len(np.unique(before.reshape(-1, 3), axis=0)) > 20  # anti-aliased text, free cells, background
    assert (before == 255).all(axis=2).mean() > 0.3  # mostly background
    free_pixels = (before == FREE).all(axis=2).sum()
    assert free_pixels >= 4 * env.cluster.num_gpus  # every GPU is a free cell of at least 2x2 pixels
    _start_until_busy(env)
    after = env.render()
    assert after.shape == FRAME_SHAPE and not np.array_equal(before, after)
    assert (after == FREE).all(axis=2).sum() < free_pixels  # the busy GPUs' cells are coloured


def test_ansi_text_has_the_counters_types_and_jobs():
    env = FrenzyEnv(**SMALL, render_mode="ansi")
    env.reset(seed=0)
    _start_until_busy(env)
    text = env.render()
    assert "queued=" in text and " h)" in text and "A100-80GB" in text and "busy" in text
    assert f"running (first 8 of {len(env.sim.running)})" in text and len(env.sim.running) >= 1
