"""Pictures of the environment: an ANSI text table and a labelled RGB frame (``render_mode="rgb_array"``).

The frame (:data:`FRAME_SHAPE`, uint8) shows every GPU as a cell, nodes grouped by GPU type, coloured by the
job on it (pale while the job loads, grey when free), with the time, the queue, running and finished counts,
and a legend of the running jobs and the head of the queue. Its text is drawn from a glyph atlas that
matplotlib's FreeType binding renders once per font size; the frame itself is numpy only (a few milliseconds).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from frenzy_env.simulator import ClusterSimulator
    from frenzy_env.world.cluster import ClusterSpec


class Scene(Protocol):
    """What the pictures read of an environment (:class:`~frenzy_env.env.FrenzyEnv` has all of it)."""

    sim: ClusterSimulator
    cluster: ClusterSpec

    @property
    def visible_queue(self) -> np.ndarray: ...

    @property
    def visible_running(self) -> np.ndarray: ...

FRAME_SHAPE = (480, 800, 3)  # height, width, RGB
_GRID = (10, 56, 530, 470)  # x0, y0, x1, y1 of the GPU grid
_PANEL_X = 545  # left edge of the legend
_WHITE = np.array([255, 255, 255], dtype=np.uint8)
_FREE = np.array([214, 214, 214], dtype=np.uint8)
_INK = (30, 30, 30)
_GREY_INK = (110, 110, 110)
_PALETTE = np.array(  # saturated colours only: matplotlib's tab10 less its grey, then darker shades of tab20b
    [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189], [140, 86, 75],
     [227, 119, 194], [188, 189, 34], [23, 190, 207], [57, 59, 121], [99, 121, 57], [140, 109, 49],
     [132, 60, 57], [123, 65, 115]],
    dtype=np.uint8,
)


def render_ansi(env: Scene) -> str:
    """Text: time, counters, busy GPUs per type, the visible queue and running jobs."""
    sim = env.sim
    lines = [
        f"t={sim.now:,.0f}s ({sim.now / 3600:.2f} h)  queued={len(sim.queue)}  running={len(sim.running)}"
        f"  finished={sim.finished}/{sim.num_jobs}  rejected={sim.rejected}  ooms={sim.oom_failures}"
        f"  busy={sim.busy_gpus}/{env.cluster.num_gpus}",
    ]
    free = sim.state.free_by_type()
    for t, name in enumerate(sim.gpu_types):
        cap = int(env.cluster.type_capacity[t])
        busy = cap - int(free[t])
        bar = "#" * round(20 * busy / cap) if cap else ""
        lines.append(f"  {name:<14} busy {busy:>5} / {cap:>5}  [{bar:<20}]")
    lines.append(f"  queue (first 8 of {len(sim.queue)}):")
    for j in env.visible_queue[:8]:
        job = sim.jobs[int(j)]
        lines.append(
            f"    job {job.job_id:>6} {job.model.name:<14} B={job.batch_size:<5} s={job.seq_len:<5}"
            f" waited {sim.now - sim.submit[int(j)]:>9,.0f}s"
        )
    lines.append(f"  running (first 8 of {len(sim.running)}):")
    for j in env.visible_running[:8]:
        run = sim.running[int(j)]
        job = sim.jobs[int(j)]
        frac = sim.progress(int(j)) / sim.work[int(j)]
        lines.append(
            f"    job {job.job_id:>6} {job.model.name:<14} {sim.plan_label(run.plan):<16}"
            f" dp={int(sim.plan_count[run.plan]) // run.tp} tp={run.tp} {100 * frac:5.1f}%"
        )
    return "\n".join(lines)


def render_rgb(env: Scene) -> np.ndarray:
    """uint8 :data:`FRAME_SHAPE`: the labelled picture of the cluster now (see the module docstring)."""
    sim = env.sim
    layout = _layout(env.cluster)
    img = np.full(FRAME_SHAPE, 255, dtype=np.uint8)
    # the GPU cells: one colour per GPU (its job's, pale while loading, grey when free), gathered by the map
    owner = sim.state.owner
    busy = owner >= 0
    colours = np.empty((owner.size + 1, 3), dtype=np.uint8)
    colours[:-1] = _FREE
    colours[-1] = _WHITE  # the background (index -1 of the map)
    colours[:-1][busy] = _PALETTE[owner[busy] % len(_PALETTE)]
    loading = np.zeros(owner.size, dtype=bool)
    loading[busy] = sim.run_floats[owner[busy], 1] > sim.now  # progress starts after the start-up
    colours[:-1][loading] = colours[:-1][loading] // 5 * 3 + 102  # 60% colour, 40% white
    x0, y0, x1, y1 = _GRID
    img[y0:y1, x0:x1] = colours[layout.cell_map]

    big, small = _font(11), _font(9)
    header = (
        f"t = {sim.now / 3600:,.2f} h     queued {len(sim.queue)}     running {len(sim.running)}"
        f"     finished {sim.finished} / {sim.num_jobs}"
    )
    big.draw(img, 10, 20, header, _INK)
    small.draw(
        img, 10, 40,
        f"busy {sim.busy_gpus} / {env.cluster.num_gpus} GPUs     rejected {sim.rejected}     "
        f"OOM failures {sim.oom_failures}     restarts {sim.restarts}     {env.cluster.name}",
        _GREY_INK,
    )
    img[47, 10:790] = (180, 180, 180)
    free = sim.state.free_by_type()
    cap = env.cluster.type_capacity
    for t, (x, y) in enumerate(layout.labels):
        small.draw(img, x, y, f"{sim.gpu_types[t]}   busy {int(cap[t] - free[t])} / {int(cap[t])}", _INK)
    _legend(env, img, small)
    return img


def _legend(env: Scene, img: np.ndarray, font: _Font) -> None:
    """The running jobs (colour, model, plan, progress) then the head of the queue, in the right panel."""
    sim = env.sim
    x, y = _PANEL_X, 66
    rows = (FRAME_SHAPE[0] - 60) // font.line
    running = env.visible_running[: max(0, rows - 6)]
    font.draw(img, x, y, f"running ({len(sim.running)})   pale: loading", _INK)
    for j in running.tolist():
        y += font.line
        job, run = sim.jobs[j], sim.running[j]
        img[y - 9 : y, x : x + 9] = _PALETTE[j % len(_PALETTE)]
        pct = 100 * sim.progress(j) / sim.work[j]
        font.draw(img, x + 13, y, f"{job.job_id} {job.model.name} {sim.plan_label(run.plan)} {pct:.0f}%", _INK)
    y += font.line + 8
    font.draw(img, x, y, f"queue ({len(sim.queue)})", _INK)
    for j in env.visible_queue[: max(0, (FRAME_SHAPE[0] - 8 - y) // font.line)].tolist():
        y += font.line
        job = sim.jobs[j]
        font.draw(img, x + 13, y, f"{job.job_id} {job.model.name} waited {(sim.now - sim.submit[j]) / 3600:.1f} h",
                  _GREY_INK)


# ---------------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class _Layout:
    """Where every GPU of a cluster is drawn: ``cell_map`` (grid height, grid width) int64 holds the global GPU
    index of each pixel of the grid (-1: background); ``labels`` the (x, baseline y) of each type's label."""

    cell_map: np.ndarray
    labels: tuple[tuple[int, int], ...]


@functools.lru_cache(maxsize=16)
def _layout(cluster: ClusterSpec) -> _Layout:
    """The largest cells with which every GPU type's nodes (a row of cells each, side by side, wrapping) and
    its label fit in the grid."""
    x0, y0, x1, y1 = _GRID
    width, height = x1 - x0, y1 - y0
    label_h = 16
    types = [np.flatnonzero(cluster.node_type_index == t) for t in range(len(cluster.gpu_types))]
    caps = cluster.node_capacity
    for cell in (26, 22, 18, 15, 12, 10, 8, 6, 5, 4, 3, 2):
        node_gap, row_gap = max(2, cell // 2), max(1, cell // 4)
        per_row = [max(1, (width + node_gap) // (int(caps[nodes].max()) * cell + node_gap)) for nodes in types]
        needed = sum(label_h + -(-len(nodes) // k) * (cell + row_gap) + 4 for nodes, k in zip(types, per_row))
        if needed <= height:
            break
    cell_map = np.full((height, width), -1, dtype=np.int64)
    labels = []
    y = 0
    offsets = cluster.node_offsets
    for nodes, k in zip(types, per_row):
        labels.append((x0, y0 + y + 12))
        y += label_h
        pitch = int(caps[nodes].max()) * cell + node_gap
        for i, node in enumerate(nodes.tolist()):
            r, c = divmod(i, k)
            top = y + r * (cell + row_gap)
            for g in range(int(caps[node])):
                left = c * pitch + g * cell
                cell_map[top : top + cell - 1, left : left + cell - 1] = offsets[node] + g
        y += -(-len(nodes) // k) * (cell + row_gap) + 4
    return _Layout(cell_map, tuple(labels))


# ------------------------------------------------------------------------------------------------ text
class _Font:
    """DejaVu Sans at one size: each printable ASCII glyph rendered once by FreeType (alpha, offsets,
    advance); :meth:`draw` blends them into an image."""

    def __init__(self, size: int) -> None:
        from matplotlib import font_manager
        from matplotlib.ft2font import FT2Font

        face = FT2Font(font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans")))
        face.set_size(size, 96)
        self.line = int(round(size * 96 / 72 * 1.3))
        self.glyphs: dict[str, tuple[np.ndarray, int, int, int]] = {}
        for code in range(32, 127):
            ch = chr(code)
            face.set_text(ch, 0.0)
            face.draw_glyphs_to_bitmap(antialiased=True)
            alpha = np.asarray(face.get_image(), dtype=np.float32)[..., None] / 255.0
            descent = face.get_descent() // 64
            left = face.get_bitmap_offset()[0] // 64 - 1
            advance = int(round(face.load_char(code).horiAdvance / 64))
            self.glyphs[ch] = (alpha, alpha.shape[0] - 1 - descent, left, advance)

    def draw(self, img: np.ndarray, x: int, baseline: int, text: str, colour: tuple[int, int, int]) -> None:
        """Blend ``text`` in ``colour`` into ``img`` from ``x`` on ``baseline`` (clipped at the image's edges)."""
        ink = np.array(colour, dtype=np.float32)
        height, width = img.shape[:2]
        for ch in text:
            alpha, above, left, advance = self.glyphs.get(ch, self.glyphs["?"])
            top, gx = baseline - above, x + left
            h, w = alpha.shape[:2]
            if gx >= 0 and top >= 0 and gx + w <= width and top + h <= height:
                region = img[top : top + h, gx : gx + w]
                region[:] = region * (1.0 - alpha) + ink * alpha
            x += advance


@functools.lru_cache(maxsize=4)
def _font(size: int) -> _Font:
    return _Font(size)
