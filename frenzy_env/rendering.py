"""Pictures of the environment: an ANSI text table and an RGB array (numpy only, no matplotlib)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from frenzy_env.env import FrenzyEnv

_CELL = 6  # pixels per GPU cell
_PALETTE = np.array(
    [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189], [140, 86, 75],
     [227, 119, 194], [188, 189, 34], [23, 190, 207], [127, 127, 127]],
    dtype=np.uint8,
)


def render_ansi(env: FrenzyEnv) -> str:
    """Text: time, counters, free GPUs per type, the visible queue and running jobs."""
    sim = env.sim
    lines = [
        f"t={sim.now:,.0f}s  queued={len(sim.queue)}  running={len(sim.running)}  finished={sim.finished}"
        f"  rejected={sim.rejected}  ooms={sim.oom_failures}  busy={sim.busy_gpus}/{env.cluster.num_gpus}",
    ]
    free = sim.state.free_by_type()
    for t, name in enumerate(sim.gpu_types):
        lines.append(f"  {name:<14} free {int(free[t]):>5} / {int(env.cluster.type_capacity[t]):>5}")
    lines.append("  queue (first 8):")
    for j in env.visible_queue[:8]:
        job = sim.jobs[int(j)]
        lines.append(
            f"    job {job.job_id:>6} {job.model.name:<14} B={job.batch_size:<5} s={job.seq_len:<5}"
            f" waited {sim.now - sim.submit[int(j)]:>9,.0f}s"
        )
    lines.append("  running (first 8):")
    for j in env.visible_running[:8]:
        run = sim.running[int(j)]
        job = sim.jobs[int(j)]
        frac = sim.progress(int(j)) / sim.work[int(j)]
        lines.append(
            f"    job {job.job_id:>6} {job.model.name:<14} {sim.plan_label(run.plan):<16}"
            f" dp={int(sim.plan_count[run.plan]) // run.tp} tp={run.tp} {100 * frac:5.1f}%"
        )
    return "\n".join(lines)


def render_rgb(env: FrenzyEnv) -> np.ndarray:
    """uint8 (H, W, 3): one row of cells per node (grey = free, coloured by job), a queue bar below."""
    sim = env.sim
    caps = env.cluster.node_capacity
    width_cells = int(caps.max())
    cols = max(1, int(math.ceil(math.sqrt(env.cluster.num_nodes / 4))))
    rows = int(math.ceil(env.cluster.num_nodes / cols))
    h = rows * _CELL + 2 * _CELL
    w = cols * (width_cells + 1) * _CELL
    img = np.full((h, w, 3), 255, dtype=np.uint8)
    owner = sim.state.owner
    offsets = env.cluster.node_offsets
    for node in range(env.cluster.num_nodes):
        r, c = divmod(node, cols)
        y0 = r * _CELL
        for g in range(int(caps[node])):
            x0 = (c * (width_cells + 1) + g) * _CELL
            job = int(owner[offsets[node] + g])
            colour = (200, 200, 200) if job < 0 else _PALETTE[job % len(_PALETTE)]
            img[y0 + 1 : y0 + _CELL - 1, x0 + 1 : x0 + _CELL - 1] = colour
    qlen = min(len(sim.queue), w // 2)
    img[h - _CELL : h - 1, : qlen * 2] = (40, 40, 40)
    return img
