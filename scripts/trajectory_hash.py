"""Digests of trajectories, to check that a refactoring leaves behaviour unchanged.

For each configuration it plays masked-random episodes (with some illegal actions mixed in) and one episode
of every registered scripted baseline and of the shipped learned agent (``ppo``, the action-level MaskablePPO
model), and hashes every observation, mask, reward, flag, info entry and per-job record (decision latencies
excluded). (The knob agent, a research model in research/knob, is not hashed: nothing here imports
research.) Run it before and after a change and compare::

    python scripts/trajectory_hash.py --out before.json
    ...change...
    python scripts/trajectory_hash.py --compare before.json

The digests depend on the environment's dynamics and spaces, so they change, by design, whenever the env
version changes; they are not pinned in a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np

from frenzy_env.paths import atomic_write_json

CONFIGS = {
    "default": dict(),
    "small-frenzy-predictor": dict(workload="synthetic-small", predictor="frenzy"),
    "mixed-noisy-q4": dict(
        cluster={"A100-40GB": (1, 4), "RTX3090-24GB": (2, 2), "T4-16GB": (1, 3)},
        workload="synthetic-small", work_info="noisy", queue_slots=4, running_slots=3,
    ),
    "pai-2020": dict(cluster="pai-2020", workload="synthetic"),
    "large-1024": dict(cluster="large-1024", workload="synthetic"),
    "doubling-64-none": dict(cluster="doubling-64", workload="synthetic", work_info="none"),
}
AGENTS = ("ppo",)


def policy_names() -> list[str]:
    """Every registered scripted baseline, then the shipped learned agent."""
    import baselines

    return sorted(baselines.POLICIES) + list(AGENTS)


def _load_agent(name: str, env):
    """The shipped learned agent ``name`` (``ppo``) bound to ``env``."""
    from agents.ppo.loading import DEFAULT_MODEL_PATH, load_policy

    return load_policy(env, DEFAULT_MODEL_PATH)


def _make_env(kwargs: dict):
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.world.cluster import ClusterSpec

    kwargs = dict(kwargs)
    if isinstance(kwargs.get("cluster"), dict):
        kwargs["cluster"] = ClusterSpec.from_counts("mixed", kwargs["cluster"])
    return FrenzyEnv(**kwargs)


def _feed(h, *items) -> None:
    for x in items:
        if isinstance(x, np.ndarray):
            h.update(str(x.dtype).encode() + str(x.shape).encode() + x.tobytes())
        elif isinstance(x, dict):
            for k in sorted(x):
                if not str(k).startswith("latency"):
                    _feed(h, k, x[k])
        else:
            h.update(repr(x).encode())


def random_digest(kwargs: dict, seed: int, steps: int) -> str:
    """Masked-random play (20% arbitrary, possibly illegal, actions) over ``steps`` steps."""
    env = _make_env(kwargs)
    h = hashlib.sha256()
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    _feed(h, obs, info)
    episode = 0
    for _ in range(steps):
        mask = env.action_masks()
        if rng.random() < 0.2:
            a = int(rng.integers(-2, mask.size + 2))
        else:
            a = int(rng.choice(np.flatnonzero(mask)))
        obs, reward, terminated, truncated, info = env.step(a)
        _feed(h, obs, reward, terminated, truncated, info)
        if terminated or truncated:
            episode += 1
            obs, info = env.reset(seed=seed + episode)
            _feed(h, obs, info)
    return h.hexdigest()


def policy_digest(kwargs: dict, name: str, seed: int, max_jobs: int | None) -> str:
    import baselines
    from frenzy_env.evaluation.episodes import run_episode
    from frenzy_env.workload import make_generator

    kwargs = dict(kwargs)
    name_ = kwargs.get("workload", "itp-default")
    if max_jobs is not None and isinstance(name_, str):
        key = "max_jobs" if name_.startswith("itp") else "num_jobs"
        kwargs["workload"] = make_generator(name_, **{key: max_jobs})
    env = _make_env(kwargs)
    if name in AGENTS:
        try:
            policy = _load_agent(name, env)
        except Exception as exc:  # the shipped action-level model fits only the default spaces
            return f"not available: {type(exc).__name__}"
    else:
        policy = baselines.make_policy(name, env)
    result = run_episode(env, policy, seed=seed, max_steps=20_000)
    h = hashlib.sha256()
    _feed(h, result.jobs.to_csv(index=False), result.metrics, *result.utilisation)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000, help="masked-random steps per configuration")
    parser.add_argument("--max-jobs", type=int, default=60, help="jobs per baseline episode (default 60)")
    parser.add_argument("--out", help="write the digests to this JSON file")
    parser.add_argument("--configs", help="comma-separated configuration names (default: all)")
    parser.add_argument("--policies", help="comma-separated policy names (default: every baseline and agent)")
    parser.add_argument("--compare", help="compare with the digests in this JSON file; exit 1 on a difference")
    args = parser.parse_args(argv)
    digests: dict[str, str] = {}
    names = args.policies.split(",") if args.policies else policy_names()
    chosen = args.configs.split(",") if args.configs else list(CONFIGS)
    for cname in chosen:
        kwargs = CONFIGS[cname]
        key = f"{cname}/masked-random"
        digests[key] = random_digest(kwargs, seed=7, steps=args.steps)
        print(f"{key} {digests[key]}", flush=True)
        if cname in ("large-1024",):
            continue
        for name in names:
            key = f"{cname}/{name}"
            digests[key] = policy_digest(kwargs, name, seed=3, max_jobs=args.max_jobs)
            print(f"{key} {digests[key]}", flush=True)
    if args.out:
        atomic_write_json(args.out, digests, indent=1)
    if args.compare:
        with open(args.compare) as fh:
            before = json.load(fh)
        diff = sorted(k for k in digests if before.get(k) != digests[k])
        for k in diff:
            print(f"DIFFERENT {k}: {before.get(k)} -> {digests.get(k)}")
        print(f"{len(digests) - len(diff)} of {len(digests)} digests identical")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
