"""The benchmark's measurements: what each section runs and times (see :mod:`frenzy_env.benchmark`).

:class:`BenchConfig` says how much of each section to run (:data:`MODES`: quick, default, full); the
``bench_*`` functions add their measurements to a :class:`Results`; :func:`run_benchmark` runs the chosen
sections in order. The scaling section runs each replay in a fresh process (``python -m frenzy_env.benchmark
--child SPEC``, :func:`child_replay`), so that its peak memory is that run's alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frenzy_env.errors import FrenzyError

SECTIONS = ("steps", "replay", "latency", "marp", "scaling", "train", "sia")
TARGET_POLICY = "frenzy"  # the policy of the Philly target (fifo stands in when it is not registered)
REPLAY_CLUSTER = "large-1024"


@dataclass(frozen=True)
class BenchConfig:
    """How much of each section to run (see :data:`MODES`)."""

    mode: str
    env_steps: int  # masked-random steps per round and env id
    cartpole_steps: int
    repeats: int  # interleaved rounds; the best rate of each counts
    replay_max_jobs: int | None  # jobs per trace for every policy (None: whole traces)
    replay_itp: int  # how many ITP cluster traces (largest first)
    replay_target_full: bool  # the target row: the target policy on the whole Philly trace
    replay_budget_s: float  # one replay stops (reported incomplete) past this wall time
    latency_gpus: tuple[int, ...]
    latency_queues: tuple[int, ...]
    latency_calls: int
    marp_seconds: float
    scaling_jobs: tuple[int, ...]
    scaling_gpus: tuple[int, ...]
    scaling_gpu_jobs: int
    sia_jobs: int  # jobs of the ITP week on frenzy-testbed (96 GPUs) in the Sia round timing
    sia_steps: int  # decisions of the synthetic large-1024 episode in the Sia round timing


MODES: dict[str, BenchConfig] = {
    "quick": BenchConfig(
        "quick", env_steps=1_000, cartpole_steps=5_000, repeats=1, replay_max_jobs=300, replay_itp=1,
        replay_target_full=False, replay_budget_s=60.0, latency_gpus=(64, 1024), latency_queues=(10, 100),
        latency_calls=20, marp_seconds=0.2, scaling_jobs=(200, 600), scaling_gpus=(64, 256), scaling_gpu_jobs=200,
        sia_jobs=40, sia_steps=100,
    ),
    "default": BenchConfig(
        "default", env_steps=20_000, cartpole_steps=100_000, repeats=3, replay_max_jobs=5_000, replay_itp=2,
        replay_target_full=True, replay_budget_s=600.0, latency_gpus=(64, 1024, 10_000),
        latency_queues=(10, 100, 1_000), latency_calls=200, marp_seconds=1.0, scaling_jobs=(1_000, 10_000, 100_000),
        scaling_gpus=(64, 256, 1024, 4096), scaling_gpu_jobs=5_000, sia_jobs=150, sia_steps=20_000,
    ),
    "full": BenchConfig(
        "full", env_steps=100_000, cartpole_steps=300_000, repeats=5, replay_max_jobs=None, replay_itp=8,
        replay_target_full=True, replay_budget_s=3600.0, latency_gpus=(64, 1024, 10_000),
        latency_queues=(10, 100, 1_000), latency_calls=1_000, marp_seconds=3.0,
        scaling_jobs=(1_000, 3_000, 10_000, 30_000, 100_000), scaling_gpus=(64, 256, 1024, 4096, 10_000),
        scaling_gpu_jobs=20_000, sia_jobs=570, sia_steps=100_000,
    ),
}


@dataclass
class Row:
    """One measurement."""

    section: str
    case: str
    metric: str
    value: float
    unit: str


class Results:
    """Collected rows (and the order sections were run in)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, section: str, case: str, metric: str, value: float, unit: str = "") -> None:
        self.rows.append(Row(section, case, metric, float(value), unit))

    def get(self, section: str, case: str, metric: str) -> float:
        for r in self.rows:
            if (r.section, r.case, r.metric) == (section, case, metric):
                return r.value
        return math.nan

    def section(self, name: str) -> list[Row]:
        return [r for r in self.rows if r.section == name]


# ------------------------------------------------------------------------------------------ helpers
def machine_info() -> dict[str, Any]:
    """CPU, cores, memory, load and library versions of this machine."""
    import gymnasium

    cpu = platform.processor() or platform.machine()
    # without /proc (not Linux) the platform's name stays
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gb = math.nan
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo", encoding="utf-8") as fh:
        mem_gb = int(fh.readline().split()[1]) / 2**20  # (unknown memory stays nan)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(mem_gb, 1),
        "load_average_1m": round(load[0], 2),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gymnasium": gymnasium.__version__,
        "kernels": _kernels_version(),
    }


def _kernels_version() -> str:
    """"numba X.Y" when the compiled kernels are in use, else "numpy (FRENZY_ENV_JIT=0 or no numba)"."""
    from frenzy_env import kernels

    if not kernels.enabled():
        return "numpy (FRENZY_ENV_JIT=0 or no numba)"
    import numba

    return f"numba {numba.__version__}"


def warm_kernels() -> float:
    """Load (or compile) the compiled kernels by stepping a tiny environment; returns the seconds it took (a
    once-per-process cost, kept out of the timings that follow)."""
    from frenzy_env.env import FrenzyEnv

    t0 = time.perf_counter()
    env = FrenzyEnv(cluster="frenzy-testbed", workload="synthetic-small")
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        obs, _, term, trunc, _ = env.step(int(np.flatnonzero(obs["action_mask"])[-1]))
        if term or trunc:
            break
    return time.perf_counter() - t0


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (nan where the OS does not say).

    Linux: ``VmHWM`` of /proc/self/status (``ru_maxrss`` survives ``exec`` and would include the parent's).
    """
    # not Linux: ru_maxrss below
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/status", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**10
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return math.nan
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def fit_exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x) (nan with fewer than two usable points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0 and math.isfinite(y)]
    if len(pts) < 2:
        return math.nan
    lx, ly = np.array(pts).T
    return float(np.polyfit(lx, ly, 1)[0])


def scaled_cluster(num_gpus: int) -> Any:
    """A cluster of ``num_gpus`` GPUs (8 per node) with large-1024's GPU-type mix (large-1024 itself at 1,024)."""
    from frenzy_env.world.cluster import ClusterSpec

    base = ClusterSpec.preset(REPLAY_CLUSTER)
    if num_gpus == base.num_gpus:
        return base
    nodes = max(1, num_gpus // 8)
    types = base.gpu_types
    share = np.array([base.gpus_of_type(t) for t in types], dtype=float)
    share /= share.sum()
    counts = np.floor(share * nodes).astype(int)
    for i in np.argsort(-(share * nodes - counts), kind="stable")[: nodes - int(counts.sum())]:
        counts[i] += 1
    spec = {t: (int(c), 8) for t, c in zip(types, counts) if c > 0}
    return ClusterSpec.from_counts(f"scaled-{num_gpus}", spec, reference_gpu_type=base.reference_gpu_type)


def target_policy() -> str:
    from baselines import POLICIES

    return TARGET_POLICY if TARGET_POLICY in POLICIES else "fifo"


def replay(env: Any, policy: Any, *, seed: int = 0, budget_s: float = math.inf) -> dict[str, float]:
    """Play one episode with :func:`~frenzy_env.evaluation.episodes.play` (the evaluation loop), stopping after
    ``budget_s`` wall seconds. Returns wall and CPU seconds, decisions, latencies and the metrics."""
    from frenzy_env.evaluation.episodes import play

    t0, c0 = time.perf_counter(), time.process_time()
    _, terminated, lat = play(env, policy, seed, time_budget_s=None if math.isinf(budget_s) else budget_s)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    lat = lat * 1e3
    m = env.unwrapped.sim.metrics()
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "complete": float(terminated),
        "jobs_done": m["finished"] + m["rejected"],
        "decisions": float(lat.size),
        "latency_median_ms": float(np.median(lat)) if lat.size else math.nan,
        "latency_p99_ms": float(np.percentile(lat, 99)) if lat.size else math.nan,
        "avg_jct_h": m["avg_jct_h"],
    }


# ------------------------------------------------------------------------------------------ sections
def bench_steps(cfg: BenchConfig, res: Results, log: Callable[[str], None]) -> None:
    """Masked-random env steps per second vs CartPole-v1, best of interleaved rounds."""
    import gymnasium as gym

    import frenzy_env  # noqa: F401  (registers the ids)

    def cartpole(n: int) -> tuple[float, float]:
        env = gym.make("CartPole-v1")
        env.action_space.seed(0)
        env.reset(seed=0)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        return n / (time.perf_counter() - t0), n / max(time.process_time() - c0, 1e-9)

    from frenzy_env.versions import ENV_VERSION

    v = ENV_VERSION
    envs = {f"default (HeteroCluster-{v})": gym.make(f"frenzy/HeteroCluster-{v}"),
            f"large-1024 (Large1024-{v})": gym.make(f"frenzy/Large1024-{v}")}
    state = {}
    for name, env in envs.items():
        obs, _ = env.reset(seed=0)
        state[name] = [obs, np.random.default_rng(0)]

    def masked_random(name: str, n: int) -> tuple[float, float]:
        env = envs[name]
        obs, rng = state[name]
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            legal = np.flatnonzero(obs["action_mask"])
            obs, _, term, trunc, _ = env.step(int(legal[rng.integers(legal.size)]))
            if term or trunc:
                obs, _ = env.reset()
        state[name][0] = obs
        return n / (time.perf_counter() - t0), n / max(time.process_time() - c0, 1e-9)

    for name in envs:  # warm-up: first resets, caches
        masked_random(name, min(200, cfg.env_steps))
    best: dict[str, list[float]] = {}
    for r in range(cfg.repeats):
        rates = {"CartPole-v1": cartpole(cfg.cartpole_steps)}
        for name in envs:
            rates[name] = masked_random(name, cfg.env_steps)
        for name, (wall, cpu) in rates.items():
            prev = best.get(name, [0.0, 0.0])
            best[name] = [max(prev[0], wall), max(prev[1], cpu)]
        log(f"  steps round {r + 1}/{cfg.repeats}: " + ", ".join(f"{k} {v[0]:,.0f}/s" for k, v in rates.items()))
    cart_wall, cart_cpu = best.pop("CartPole-v1")
    res.add("steps", "CartPole-v1", "steps_per_s", cart_wall, "1/s")
    for name, (wall, cpu) in best.items():
        res.add("steps", name, "steps_per_s", wall, "1/s")
        res.add("steps", name, "cartpole_steps_per_env_step", cart_wall / wall, "x")
        res.add("steps", name, "cartpole_steps_per_env_step_cpu", cart_cpu / cpu, "x")


def _trace_workloads(cfg: BenchConfig, data_dir: Path | None) -> list[tuple[str, Any, bool]]:
    """(name, workload, is_target) of the replay section; the target is the whole Philly trace."""
    from frenzy_env.workload import Workload, make_generator

    out: list[tuple[str, Any, bool]] = []
    cap = cfg.replay_max_jobs
    philly = data_dir / "traces" / "philly" / "philly.csv" if data_dir else None
    if philly is not None and philly.is_file():
        if cfg.replay_target_full or cap is None:
            full = Workload.from_csv(philly, format="philly", name="philly")
            out.append((f"philly ({len(full):,} jobs)", full, cfg.replay_target_full))
        if cap is not None:
            part = Workload.from_csv(philly, format="philly", max_jobs=cap, name="philly")
            out.append((f"philly first {len(part):,}", part, False))
    itp_dir = data_dir / "traces" / "itp" if data_dir else None
    files = sorted(itp_dir.glob("cluster*.csv")) if itp_dir is not None and itp_dir.is_dir() else []
    files = sorted(files, key=lambda p: -p.stat().st_size)[: cfg.replay_itp]
    for path in sorted(files):
        wl = Workload.from_csv(path, format="itp", max_jobs=cap, name=f"itp-{path.stem}")
        label = f"itp {path.stem} ({len(wl):,} jobs)" if cap is None else f"itp {path.stem} first {len(wl):,}"
        out.append((label, wl, False))
    if not out:
        wl = make_generator("itp-default").generate(0)
        out.append((f"itp-default extract ({len(wl):,} jobs)", wl, False))
    return out


def bench_replay(
    cfg: BenchConfig, res: Results, log: Callable[[str], None], data_dir: Path | None, policies: list[str]
) -> None:
    """Every policy replaying every trace on large-1024 through the env."""
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv

    target = target_policy()
    for label, wl, is_target in _trace_workloads(cfg, data_dir):
        names = [target] if is_target else policies
        for name in names:
            env = FrenzyEnv(cluster=REPLAY_CLUSTER, workload=wl)
            out = replay(env, make_policy(name, env), budget_s=cfg.replay_budget_s)
            case = f"{label} / {name}"
            jobs = out["jobs_done"]
            res.add("replay", case, "wall_s", out["wall_s"], "s")
            res.add("replay", case, "cpu_s", out["cpu_s"], "s")
            res.add("replay", case, "jobs_per_s", jobs / out["wall_s"], "1/s")
            res.add("replay", case, "jobs", jobs, "")
            res.add("replay", case, "complete", out["complete"], "")
            res.add("replay", case, "decisions", out["decisions"], "")
            res.add("replay", case, "latency_median_ms", out["latency_median_ms"], "ms")
            res.add("replay", case, "latency_p99_ms", out["latency_p99_ms"], "ms")
            done = "" if out["complete"] else f" INCOMPLETE after {cfg.replay_budget_s:.0f} s"
            log(f"  replay {case}: {out['wall_s']:.1f} s wall, {jobs / out['wall_s']:,.0f} jobs/s{done}")
            del env


def _latency_env(num_gpus: int, queue: int, seed: int = 0) -> Any:
    """An env on a ``num_gpus`` cluster about half busy with exactly ``queue`` jobs waiting (all at t=0).

    Filler jobs (synthetic, each on its largest legal plan of at most 8 GPUs) occupy about half the GPUs;
    a dry run with fillers alone says how many it takes, so none of them is left in the queue.
    """
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.workload import SyntheticGenerator, Workload

    spec = scaled_cluster(num_gpus)
    pool = SyntheticGenerator(num_jobs=max(1, num_gpus // 4), cluster=spec, load=0.7).generate(seed).jobs
    waiting = SyntheticGenerator(num_jobs=queue, cluster=spec, load=0.7).generate(seed + 1).jobs

    def build(fillers: tuple, extra: tuple) -> tuple[Any, Any, int]:
        jobs = tuple(dataclasses.replace(j, job_id=i, submit_time=0.0) for i, j in enumerate(fillers + extra))
        env = FrenzyEnv(cluster=spec, workload=Workload("latency", jobs))
        obs, _ = env.reset(seed=seed)
        sim, p = env.sim, env.num_plans
        started = 0
        while sim.busy_gpus < num_gpus // 2:
            mask = env.action_masks()
            qv = env.visible_queue
            nq = int((qv < len(fillers)).sum())  # filler rows come first
            legal = env.start_rows(mask)[:nq]
            rows = np.flatnonzero(legal.any(axis=1))
            if rows.size == 0:
                break
            k = int(rows[0])
            plans = np.flatnonzero(legal[k])
            small = plans[sim.plan_count[plans] <= 8]
            plan = int(small[np.argmax(sim.plan_count[small])]) if small.size else int(plans[0])
            obs, *_ = env.step(env.first_start + k * p + plan)
            started += 1
        return env, obs, started

    _, _, started = build(pool, ())
    env, obs, _ = build(pool[:started], waiting)
    return env, obs


def bench_latency(cfg: BenchConfig, res: Results, log: Callable[[str], None], policies: list[str]) -> None:
    """predict() latency of each policy on half-busy clusters with queues of several lengths."""
    from baselines import make_policy

    for gpus in cfg.latency_gpus:
        for queue in cfg.latency_queues:
            env, obs = _latency_env(gpus, queue)
            mask = env.action_masks()
            qlen = len(env.sim.queue)
            for name in policies:
                policy = make_policy(name, env)
                policy.reset()
                policy.predict(obs, action_masks=mask)  # warm-up (per-simulator caches)
                lat = np.empty(cfg.latency_calls)
                for i in range(cfg.latency_calls):
                    t = time.perf_counter()
                    policy.predict(obs, action_masks=mask)
                    lat[i] = time.perf_counter() - t
                case = f"{gpus:,} GPUs, queue {queue:,} / {name}"
                res.add("latency", case, "latency_median_ms", float(np.median(lat)) * 1e3, "ms")
                res.add("latency", case, "latency_p99_ms", float(np.percentile(lat, 99)) * 1e3, "ms")
                res.add("latency", case, "queued", qlen, "")
            log(f"  latency {gpus:,} GPUs, queue {qlen:,}: done")


def bench_marp(cfg: BenchConfig, res: Results, log: Callable[[str], None]) -> None:
    """MARP estimates per second (scalar, vectorised over plans, whole plan searches)."""
    from frenzy_env.world.memory.estimator import estimate_memory, estimate_memory_array
    from frenzy_env.world.memory.planning import plan_resources
    from frenzy_env.world.models import get_model, list_models

    models = [get_model(m) for m in list_models()]
    cases = [(m, 8, min(m.max_seq_len, 2048)) for m in models]

    def rate(fn: Callable[[int], None]) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < cfg.marp_seconds:
            fn(n)
            n += 1
        return n / (time.perf_counter() - t0)

    def scalar(i: int) -> None:
        m, b, s = cases[i % len(cases)]
        estimate_memory(m, batch_size=b, seq_len=s, dp=1 + (i % 2), tp=1)

    dp = np.repeat(2 ** np.arange(4), 4).astype(float)  # 16 layouts: dp 1..8 x tp 1..8
    tp = np.tile(2 ** np.arange(4), 4).astype(float)

    def vectorised(i: int) -> None:
        m, b, s = cases[i % len(cases)]
        estimate_memory_array(m, batch_size=b, seq_len=s, dp=dp, tp=tp)

    def plans(i: int) -> None:
        m, b, s = cases[i % len(cases)]
        plan_resources(m, batch_size=b + (i // len(cases)) % 4, seq_len=s)

    res.add("marp", "estimate_memory (one plan)", "estimates_per_s", rate(scalar), "1/s")
    res.add("marp", "estimate_memory_array (16 plans a call)", "estimates_per_s", 16 * rate(vectorised), "1/s")
    res.add("marp", "plan_resources (all GPU types, up to 64 GPUs)", "searches_per_s", rate(plans), "1/s")
    log("  marp: done")


def child_replay(spec: dict[str, Any]) -> dict[str, float]:
    """Run in a fresh process: one synthetic replay (see :func:`bench_scaling`); returns its figures."""
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.workload import SyntheticGenerator

    kernels_s = warm_kernels()
    cluster = scaled_cluster(int(spec["gpus"]))
    t0 = time.perf_counter()
    wl = SyntheticGenerator(num_jobs=int(spec["jobs"]), cluster=cluster, load=0.7, name="scaling").generate(0)
    t1 = time.perf_counter()
    env = FrenzyEnv(cluster=cluster, workload=wl)
    t2 = time.perf_counter()
    out = replay(env, make_policy(spec["policy"], env), budget_s=float(spec["budget_s"]))
    out["generate_s"] = t1 - t0
    out["build_s"] = t2 - t1
    out["kernels_s"] = kernels_s
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def _run_child(spec: dict[str, Any]) -> dict[str, float]:
    cmd = [sys.executable, "-m", "frenzy_env.benchmark", "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise FrenzyError(f"benchmark child process failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_scaling(cfg: BenchConfig, res: Results, log: Callable[[str], None]) -> None:
    """Wall time against jobs (on large-1024) and against GPUs; fitted exponents; peak memory per run."""
    policy = target_policy()
    budget = cfg.replay_budget_s
    walls = []
    for jobs in cfg.scaling_jobs:
        out = _run_child({"jobs": jobs, "gpus": 1024, "policy": policy, "budget_s": budget})
        case = f"{jobs:,} jobs, 1,024 GPUs / {policy}"
        res.add("scaling_jobs", case, "jobs", jobs, "")
        for key, unit in (("wall_s", "s"), ("cpu_s", "s"), ("build_s", "s"), ("generate_s", "s"),
                          ("kernels_s", "s"), ("peak_rss_mb", "MiB"), ("complete", ""), ("decisions", "")):
            res.add("scaling_jobs", case, key, out[key], unit)
        res.add("scaling_jobs", case, "jobs_per_s", out["jobs_done"] / out["wall_s"], "1/s")
        res.add("scaling_jobs", case, "total_s", out["wall_s"] + out["build_s"], "s")
        walls.append(out["wall_s"] + out["build_s"])
        log(f"  scaling {case}: {out['wall_s']:.1f} s, peak {out['peak_rss_mb']:,.0f} MiB")
    jobs = list(cfg.scaling_jobs)
    res.add("scaling_jobs", "all points", "exponent", fit_exponent(jobs, walls), "")
    if 10_000 in jobs and 100_000 in jobs:
        i, k = jobs.index(10_000), jobs.index(100_000)
        res.add("scaling_jobs", "10k -> 100k jobs", "exponent", fit_exponent([jobs[i], jobs[k]], [walls[i], walls[k]]))
    walls = []
    for gpus in cfg.scaling_gpus:
        out = _run_child({"jobs": cfg.scaling_gpu_jobs, "gpus": gpus, "policy": policy, "budget_s": budget})
        case = f"{cfg.scaling_gpu_jobs:,} jobs, {gpus:,} GPUs / {policy}"
        res.add("scaling_gpus", case, "gpus", gpus, "")
        for key, unit in (("wall_s", "s"), ("cpu_s", "s"), ("build_s", "s"), ("peak_rss_mb", "MiB")):
            res.add("scaling_gpus", case, key, out[key], unit)
        res.add("scaling_gpus", case, "total_s", out["wall_s"] + out["build_s"], "s")
        walls.append(out["wall_s"] + out["build_s"])
        log(f"  scaling {case}: {out['wall_s']:.1f} s")
    res.add("scaling_gpus", "all points", "exponent", fit_exponent(list(cfg.scaling_gpus), walls), "")


#: PPO training runs of the ``train`` section per mode: (decisions per env per rollout, updates); the rest of
#: the configuration is the shipped one (:class:`agents.ppo.TrainConfig`'s defaults)
TRAIN_RUNS = {"quick": (32, 2), "default": (1024, 3), "full": (1024, 6)}
#: the same for the guided recipe (``ppo.guide = "sia_srpt"``: the planner runs at every decision, so fewer)
GUIDED_TRAIN_RUNS = {"quick": (8, 1), "default": (64, 2), "full": (256, 2)}


def bench_train(cfg: BenchConfig, res: Results, log: Callable[[str], None]) -> None:
    """End-to-end PPO training throughput (16 in-process envs, the reference runs of new workloads, rollouts
    and updates; the warm start and validations left out): decisions per second of wall time over the run's
    updates, with :class:`agents.ppo.TrainConfig`'s defaults and with them guided by ``sia_srpt``
    (``ppo.guide = "sia_srpt"``: its planner solves an integer program at every decision instant).
    agents.ppo is imported here only (it lives outside the package)."""
    import dataclasses
    import json
    import tempfile

    from agents.ppo import TrainConfig, train

    shipped = TrainConfig()
    for label, runs, guide in (("ppo training", TRAIN_RUNS, None),
                               ("ppo training guided by sia_srpt", GUIDED_TRAIN_RUNS, "sia_srpt")):
        n_steps, updates = runs.get(cfg.mode, runs["default"])
        with tempfile.TemporaryDirectory() as tmp:
            tc = dataclasses.replace(
                shipped, timesteps=updates * n_steps * shipped.n_envs, eval_freq=10**12, out_dir=tmp, progress=False,
                validation_episodes=1, validation_jobs=20,
                ppo=dataclasses.replace(shipped.ppo, n_steps=n_steps, bc_episodes=0, guide=guide,
                                        batch_size=min(shipped.ppo.batch_size, n_steps * shipped.n_envs)),
            )
            train(tc)
            lines = [json.loads(x) for x in (Path(tmp) / "updates.jsonl").read_text().splitlines()]
        decisions = updates * n_steps * shipped.n_envs
        wall = sum(x["rollout_s"] + x["update_s"] for x in lines)
        rollout = sum(x["rollout_s"] for x in lines)
        case = f"{'guided, ' if guide else ''}{shipped.n_envs} envs x {n_steps} decisions, {updates} updates"
        res.add("train", case, "decisions_per_s", decisions / wall, "1/s")
        res.add("train", case, "rollout_decisions_per_s", decisions / rollout, "1/s")
        res.add("train", case, "reference_runs", float(lines[-1]["reference_runs"]), "")
        log(f"  {label}: {decisions / wall:,.0f} decisions/s ({case}; rollouts alone {decisions / rollout:,.0f}/s, "
            f"{lines[-1]['reference_runs']} reference runs; torch threads {shipped.threads})")


#: (case, policy, its keywords, cluster, workload overrides) of the Sia round timing; "itp" and "synthetic" cut
#: by :attr:`BenchConfig.sia_jobs` and :attr:`BenchConfig.sia_steps`
SIA_CASES = (
    ("frenzy-testbed, 96 GPUs (itp-default)", "sia", {}, "frenzy-testbed", "itp"),
    ("frenzy-testbed, 96 GPUs (itp-default)", "sia[requested]", {"requested_only": True}, "frenzy-testbed", "itp"),
    ("large-1024, 1,024 GPUs (synthetic)", "sia", {}, "large-1024", "synthetic"),
)


def bench_sia(cfg: BenchConfig, res: Results, log: Callable[[str], None]) -> None:
    """Wall time of each Sia round (``SiaPolicy.plan_round``: the goodput matrix, the integer program and the
    carry-out) over one episode: on frenzy-testbed with the first ``sia_jobs`` jobs of the ITP week, and on
    large-1024 with the synthetic preset for ``sia_steps`` decisions. Median and p99 per round, rounds, and the
    episode's policy seconds."""
    from baselines import make_policy
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import run_episode, step_limit
    from frenzy_env.workload import make_generator

    for case, label, kwargs, cluster, wl in SIA_CASES:
        if wl == "itp":
            gen, steps = make_generator("itp-default", max_jobs=cfg.sia_jobs), step_limit(cfg.sia_jobs)
        else:
            gen, steps = make_generator("synthetic"), cfg.sia_steps
        env = FrenzyEnv(cluster=cluster, workload=gen)
        policy = make_policy("sia", env, **kwargs)
        rounds: list[float] = []
        plan_round = policy.plan_round

        def timed(plan_round: Callable[[], Any] = plan_round, rounds: list[float] = rounds) -> Any:
            t = time.perf_counter()
            out = plan_round()
            rounds.append(time.perf_counter() - t)
            return out

        policy.plan_round = timed  # type: ignore[method-assign]
        t0 = time.perf_counter()
        run_episode(env, policy, seed=0, max_steps=steps)
        wall = time.perf_counter() - t0
        sec = np.asarray(rounds) if rounds else np.zeros(1)
        key = f"{case} / {label}"
        res.add("sia", key, "round_median_ms", float(np.median(sec)) * 1e3, "ms")
        res.add("sia", key, "round_p99_ms", float(np.percentile(sec, 99)) * 1e3, "ms")
        res.add("sia", key, "rounds", len(rounds), "")
        res.add("sia", key, "round_seconds", float(sec.sum()) if rounds else 0.0, "s")
        res.add("sia", key, "episode_seconds", wall, "s")
        log(f"  {key}: {len(rounds)} rounds, median {np.median(sec) * 1e3:.2f} ms, p99 "
            f"{np.percentile(sec, 99) * 1e3:.1f} ms ({wall:.0f} s)")


def run_benchmark(
    cfg: BenchConfig,
    sections: tuple[str, ...] = SECTIONS,
    *,
    data_dir: Path | None = None,
    policies: list[str] | None = None,
    log: Callable[[str], None] = print,
) -> Results:
    """Run the chosen sections; returns every measurement."""
    from baselines import POLICIES

    known = list(POLICIES)
    if policies is not None:
        bad = [p for p in policies if p not in known]
        if bad:
            raise FrenzyError(f"unknown policy {', '.join(map(repr, bad))}; known: {', '.join(known)}")
    replay_policies = policies or [p for p in known if p != "random"]
    latency_policies = policies or known
    if cfg.mode == "quick" and policies is None:
        replay_policies = [p for p in (target_policy(), "fifo") if p in known][:2]
    res = Results()
    # the compiled kernels' once-per-process load (or first compile), kept out of every timing below
    res.add("startup", "compiled kernels", "seconds", warm_kernels(), "s")
    for name in SECTIONS:
        if name not in sections:
            continue
        t0 = time.perf_counter()
        log(f"[{name}]")
        if name == "steps":
            bench_steps(cfg, res, log)
        elif name == "replay":
            bench_replay(cfg, res, log, data_dir, replay_policies)
        elif name == "latency":
            bench_latency(cfg, res, log, latency_policies)
        elif name == "marp":
            bench_marp(cfg, res, log)
        elif name == "train":
            bench_train(cfg, res, log)
        elif name == "sia":
            bench_sia(cfg, res, log)
        else:
            bench_scaling(cfg, res, log)
        log(f"  ({time.perf_counter() - t0:.0f} s)")
    return res
