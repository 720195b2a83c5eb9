"""The fresh process of one scaling run: ``python -m frenzy_env.benchmark --child SPEC_JSON`` replays the
synthetic workload SPEC_JSON describes (:func:`~frenzy_env.benchmark.measure.child_replay`) and prints its
figures as one JSON line, which :func:`~frenzy_env.benchmark.measure.bench_scaling` reads."""

from __future__ import annotations

import json
import sys

from frenzy_env.benchmark.measure import child_replay


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "--child":
        print("usage: python -m frenzy_env.benchmark --child SPEC_JSON (the scaling section's child process; "
              "the benchmark itself is `frenzy benchmark`)", file=sys.stderr)
        return 2
    print(json.dumps(child_replay(json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
