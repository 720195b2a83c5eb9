"""Fit the micro-batch efficiency curve of :mod:`frenzy_env.world.efficiency` and print the docs/world.md tables.

Prints the fitted ``T_half`` (hyperbolic and exponential forms), then one row per published point
(:data:`frenzy_env.world.efficiency.POINTS`): measured seconds per iteration, the same without the 1F1B bubble, the
efficiency the point implies on the simulator's scale (``u = 0.40 x A_c / y / g(T_ref)``, ``A_c`` the fitted
scale of its configuration) and the curve's value; then the curve at round token counts.

Usage: ``python research/scripts/fit_efficiency.py``
"""

from __future__ import annotations

import numpy as np

from frenzy_env.world.efficiency import (
    HALF_TOKENS,
    POINTS,
    POINTS_GLOBAL_BATCH,
    POINTS_MAX_MEMORY_GB,
    REFERENCE_TOKENS,
    fit_half_tokens,
    microbatch_efficiency,
    saturation,
)
from frenzy_env.world.throughput import DEFAULT_UTILISATION


def main() -> None:
    for form in ("hyperbolic", "exp"):
        p, err, rms, worst = fit_half_tokens(form)
        print(f"{form}: parameter {p:.1f} +- {err:.1f} tokens, rms log error {rms:.2%}, largest {worst:.2%}")
    rows = []
    for conf, section, dp, pp, mbs, seq, secs, mem in POINTS:
        m = POINTS_GLOBAL_BATCH / (dp * mbs)
        rows.append((conf, section, dp, pp, mbs, mbs * seq, secs, secs * m / (m + pp - 1.0), mem))
    scale = {}  # A_c: least squares in log of y = A_c (1 + T_half / T) over the fitted rows of each configuration
    for c in sorted({r[0] for r in rows}):
        fit = [r for r in rows if r[0] == c and r[8] < POINTS_MAX_MEMORY_GB]
        scale[c] = float(np.exp(np.mean([np.log(r[7]) - np.log1p(HALF_TOKENS / r[5]) for r in fit])))
    norm = DEFAULT_UTILISATION / saturation(REFERENCE_TOKENS)
    print("\n| config | source table | DP | PP | MBS | tokens | sec/it | without bubble | u measured | u curve |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for conf, section, dp, pp, mbs, tokens, secs, y, mem in rows:
        u_meas = norm * scale[conf] / y
        left = f" (left out: {mem:.0f} GB)" if mem >= POINTS_MAX_MEMORY_GB else ""
        print(f"| {conf} | {section} | {dp} | {pp} | {mbs} | {tokens:.0f} | {secs:.2f} | {y:.1f} | {u_meas:.3f}{left} "
              f"| {microbatch_efficiency(tokens, DEFAULT_UTILISATION):.3f} |")
    grid = (256, 512, 1024, 2048, 4096, 8192, 16384, 65536)
    print("\n| tokens per micro-batch | " + " | ".join(str(t) for t in grid) + " |")
    print("| efficiency | " + " | ".join(f"{microbatch_efficiency(t, DEFAULT_UTILISATION):.3f}" for t in grid) + " |")


if __name__ == "__main__":
    main()
