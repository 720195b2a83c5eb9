"""The JCT tails of the per-instant plan (margin 0.2) with and without preemption on the validation workloads:
average, p95 and largest JCT and restarts per workload, written to ``tails_validation.csv`` beside this file.

    python research/results/ppo/v13/tails.py --run runs/knob2d     # from the repository root; about 15 minutes
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from agents.ppo.workloads import make_env, validation_workloads  # noqa: E402
from research.knob import KnobConfig, play_plan  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a knob run folder (its config.json gives the splits)")
    args = ap.parse_args()
    cfg = KnobConfig.from_dict(json.loads((args.run / "config.json").read_text())).train
    rows = []
    for name, workload, seed in validation_workloads(cfg):
        for preempt in (False, True):
            env = make_env(cfg, workload, preemption=preempt)
            play_plan(env, seed, "completion", 0.2, preempt=preempt)
            jct = np.array([r.finish_time - r.submit_time for r in env.sim.records if np.isfinite(r.finish_time)])
            jct /= 3600.0
            rows.append((name, preempt, jct.mean(), np.percentile(jct, 95), jct.max(), env.sim.restarts))
            print(*rows[-1], flush=True)
    table = pd.DataFrame(rows, columns=["workload", "preempt", "avg_jct_h", "p95_jct_h", "max_jct_h", "restarts"])
    table.to_csv(Path(__file__).with_name("tails_validation.csv"), index=False)
    wide = table.pivot(index="workload", columns="preempt")
    for col in ("avg_jct_h", "p95_jct_h", "max_jct_h"):
        ratio = wide[col][True] / wide[col][False]
        print(f"{col} preempt / no preempt: mean ratio {ratio.mean():.3f}, median {ratio.median():.3f}, "
              f"largest {ratio.max():.3f}, above 1 on {int((ratio > 1).sum())} of {ratio.size}")


if __name__ == "__main__":
    main()
