"""Speed of MARP: plan enumeration per job and vectorised estimates (prints numbers; nothing is asserted).

Targets (issue 2): all plans of one job on all GPU types, median at most 50 microseconds; at least
1,000,000 single estimates per second vectorised.

- ``plan_resources``: every (gpu_type, dp, tp) plan of one job on the 8 catalogue GPU types (max_gpus=64,
  8 GPUs per node), default ranking, over a job mix (every catalogue model x batch 8..512 x seq 512..4096).
  "warm": the per-(model, seq, options) constants are cached (the simulator's steady state, where the same
  model and sequence length recur); "cold": the caches are cleared before every call.
- ``feasible_plans``: the numpy core (masks, no ResourcePlan objects).
- ``plan_resources(ranking="min_est_time")``: adds one throughput-model call per GPU type.
- ``estimate_memory_array``: plans per second on 1,000,000 (dp, tp) pairs, both methods.

Usage: ``python research/scripts/benchmark_memory.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from frenzy_env.world.memory import estimator as memory
from frenzy_env.world.memory import planning
from frenzy_env.world.memory.estimator import estimate_memory, estimate_memory_array
from frenzy_env.world.memory.planning import feasible_plans, plan_resources
from frenzy_env.world.models import list_models


def _jobs() -> list[tuple[str, int, int]]:
    return [(m, b, s) for m in list_models() for b in (8, 32, 128, 512) for s in (512, 1024, 2048, 4096)]


def _clear_caches() -> None:
    for fn in (memory._coefficients, memory._closed_form, memory._resolved_cached, planning._grid):
        fn.cache_clear()


def _median_us(fn, jobs, repeat: int, cold: bool) -> tuple[float, float]:
    samples = []
    for model, b, s in jobs:
        fn(model, b, s)  # first call outside the timing (imports, caches)
        for _ in range(repeat):
            if cold:
                _clear_caches()
            t0 = time.perf_counter_ns()
            fn(model, b, s)
            samples.append((time.perf_counter_ns() - t0) / 1e3)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20, help="timed calls per job")
    args = ap.parse_args(argv)
    jobs = _jobs()
    print(
        f"job mix: {len(jobs)} jobs ({len(list_models())} models x 4 batch sizes x 4 sequence lengths), "
        f"8 GPU types, max_gpus=64"
    )

    def plans(m, b, s):
        return plan_resources(m, batch_size=b, seq_len=s)

    def core(m, b, s):
        return feasible_plans(m, batch_size=b, seq_len=s)

    def timed(m, b, s):
        return plan_resources(m, batch_size=b, seq_len=s, ranking="min_est_time")

    def frenzy(m, b, s):
        return plan_resources(m, batch_size=b, seq_len=s, method="frenzy")

    n_plans = [len(plans(m, b, s)) for m, b, s in jobs]
    print(f"feasible plans per job: median {statistics.median(n_plans):.0f}, max {max(n_plans)}")
    rows = [
        ("plan_resources (extended, min_gpus), warm", plans, False),
        ("plan_resources (extended, min_gpus), cold", plans, True),
        ("plan_resources (frenzy, min_gpus), warm", frenzy, False),
        ("feasible_plans (numpy core), warm", core, False),
        ("plan_resources (min_est_time, + throughput), warm", timed, False),
    ]
    for label, fn, cold in rows:
        med, p95 = _median_us(fn, jobs, args.repeat if not cold else max(1, args.repeat // 4), cold)
        print(f"{label:<52} median {med:8.1f} us   p95 {p95:8.1f} us")

    n = 1_000_000
    rng = np.random.default_rng(0)
    dp = 2.0 ** rng.integers(0, 7, n)
    tp = 2.0 ** rng.integers(0, 4, n)
    for method in ("extended", "frenzy"):
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            estimate_memory_array("llama-7b", batch_size=512, seq_len=2048, dp=dp, tp=tp, method=method)
            best = min(best, time.perf_counter() - t0)
        print(
            f"estimate_memory_array ({method}), {n:,} plans: {best * 1e3:.1f} ms -> {n / best:,.0f} estimates/s"
        )
    t0 = time.perf_counter()
    k = 2000
    for i in range(k):
        estimate_memory("gpt2", batch_size=8 + i % 8, seq_len=1024, dp=2, tp=2)
    print(
        f"estimate_memory (one plan, with breakdown): {(time.perf_counter() - t0) / k * 1e6:.1f} us per call"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
