"""A short run of the fuzzer (``scripts/fuzz.py`` plays 1,000,000 steps), full baseline episodes under the
invariant checker, a leak check, and proof that the checker does catch corrupted states."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import baselines
from frenzy_env.env import FrenzyEnv
from frenzy_env.simulator import DONE, QUEUED, REJECTED
from frenzy_env.testing.checker import InvariantChecker, InvariantViolation
from frenzy_env.testing.fuzzing import env_factories, fuzz
from frenzy_env.workload import make_generator

FUZZ_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz.py"


@pytest.mark.slow
def test_short_fuzz_run_every_preset_and_baseline():
    configs = len(env_factories(None, custom=True))
    drivers = 1 + len(baselines.POLICIES)
    policies = {name: partial(baselines.make_policy, name) for name in baselines.POLICIES}
    report = fuzz(configs * drivers * 12, seed=1, policies=policies, episode_steps=12)  # every (config, driver) once
    assert report.crashes == 0 and report.violations == 0, "\n".join(report.failures)
    assert report.steps == configs * drivers * 12 and report.episodes >= configs * drivers
    assert set(report.steps_by_driver) == {"masked-random", *baselines.POLICIES}
    assert report.illegal_actions > 0.1 * report.steps


@pytest.mark.parametrize("policy", sorted(baselines.POLICIES))
def test_baseline_episodes_to_the_end_keep_every_invariant(policy):
    rng = np.random.default_rng(0)
    for predictor in ("extended", "frenzy"):
        env = FrenzyEnv(
            cluster="frenzy-testbed", workload=make_generator("synthetic-small", num_jobs=8), predictor=predictor
        )
        agent = baselines.make_policy(policy, env)
        checker = InvariantChecker(env, full_every=10)
        obs, info = env.reset(seed=3)
        agent.reset()
        checker.on_reset(obs, info)
        for _ in range(5000):
            mask = env.action_masks()
            if rng.random() < 0.1:  # an illegal (or random) action now and then
                action = int(rng.integers(-3, mask.size + 3))
            else:
                action = int(np.asarray(agent.predict(obs, action_masks=mask)[0]).reshape(-1)[0])
            checker.before_step(action)
            obs, reward, terminated, truncated, info = env.step(action)
            checker.after_step(action, obs, reward, terminated, truncated, info)
            if terminated or truncated:
                break
        assert terminated and checker.episodes_checked == 1


def test_fuzz_script_writes_its_report(tmp_path):
    out = tmp_path / "fuzz.json"
    args = ["--steps", "200", "--episode-steps", "20", "--policies", "fifo", "--json", str(out)]
    proc = subprocess.run([sys.executable, str(FUZZ_SCRIPT), *args], capture_output=True, text=True, timeout=300)
    report = json.loads(out.read_text())
    assert proc.returncode == 0, proc.stderr
    assert report["steps"] == 200 and report["crashes"] == 0 and report["violations"] == 0
    assert "rss_growth_mb" in report


def test_no_python_memory_growth_over_repeated_episodes():
    env = FrenzyEnv(cluster="frenzy-testbed", workload="synthetic-small", predictor="frenzy", queue_slots=8)

    def episodes() -> None:
        for seed in range(2):
            rng = np.random.default_rng(seed)
            env.reset(seed=seed)
            for _ in range(200):
                mask = env.action_masks()
                action = int(rng.choice(np.flatnonzero(mask))) if rng.random() < 0.8 else int(rng.integers(mask.size))
                if any(env.step(action)[2:4]):
                    break

    episodes()  # warm-up: caches and lazily built tables
    gc.collect()
    tracemalloc.start()
    try:
        # tracemalloc counts only what is allocated after start(): the env's live state (masks, rows, records
        # of the last episode, ~250 KiB) is re-allocated by the first traced pass and would read as growth,
        # so the baseline is taken after one traced pass; what the next passes add is growth.
        episodes()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        episodes()
        episodes()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown / 1024:.0f} KiB more Python memory after the same episodes again"


# ---------------------------------------------------------------------- the checker catches corruption
def _corrupt_running(sim):
    j = next(iter(sim.running))
    sim.running[j].counts[np.flatnonzero(sim.running[j].counts)[0]] += 1


def _double_book(sim):
    sim.state.owner[np.flatnonzero(sim.state.owner < 0)[0]] = next(iter(sim.running))


def _rejected_without_reason(sim):
    j = sim.queue.pop(0)
    sim.status[j] = REJECTED
    sim.rejected += 1


def _done_back_to_queue(sim):
    j = int(np.flatnonzero(sim.status == DONE)[0])
    sim.status[j] = QUEUED
    sim.queue = sorted([*sim.queue, j])
    sim.finished -= 1


def _finish_twice(sim):
    sim.records[int(np.flatnonzero(sim.status == DONE)[0])].finish_time += 1.0


def _too_much_work(sim):
    sim.done_iters[sim.queue[0]] = sim.work[sim.queue[0]] * 2


def _time_back(sim):
    sim.now -= 1.0


def _lose_queued_job(sim):
    sim.queue.pop()


CORRUPTIONS = {
    "allocation-drift": _corrupt_running,
    "double-booking": _double_book,
    "negative-free": lambda sim: sim.state.free.__setitem__(0, -1),
    "free-above-capacity": lambda sim: sim.state.free.__setitem__(0, sim.cluster.node_capacity[0] + 1),
    "rejected-without-reason": _rejected_without_reason,
    "done-back-to-queue": _done_back_to_queue,
    "finished-twice": _finish_twice,
    "work-above-asked": _too_much_work,
    "time-back": _time_back,
    "lost-job": _lose_queued_job,
}


@pytest.fixture(scope="module")
def busy_env():
    """An env mid-episode with jobs running, queued and done."""
    env = FrenzyEnv(cluster="doubling-64", workload="synthetic-small", predictor="frenzy")
    rng = np.random.default_rng(0)
    env.reset(seed=4)
    sim = env.sim
    for _ in range(3000):
        if sim.running and len(sim.queue) >= 2 and sim.finished:
            return env
        mask = env.action_masks()
        env.step(0 if mask[0] and rng.random() < 0.3 else int(rng.choice(np.flatnonzero(mask))))
    pytest.fail("no state with running, queued and done jobs")


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_the_checker_catches_a_corrupted_state(busy_env, name, monkeypatch):
    import copy

    env = copy.deepcopy(busy_env)
    checker = InvariantChecker.for_simulator(env.sim)  # checks the state: the uncorrupted state passes
    monkeypatch.setattr(env.sim, "check_invariants", lambda: None)  # our checks alone must catch it
    CORRUPTIONS[name](env.sim)
    with pytest.raises(InvariantViolation):
        checker.after_sim_action()


def test_the_checker_catches_metrics_that_disagree_with_the_records(busy_env):
    import copy

    env = copy.deepcopy(busy_env)
    checker = InvariantChecker.for_simulator(env.sim)
    checker.check_metrics(env.sim.metrics(), terminated=False)
    env.sim.records[0].gpu_seconds += 100.0  # GPU-seconds no longer match the busy-GPU timeline
    with pytest.raises(InvariantViolation, match="timeline"):
        checker.check_metrics(env.sim.metrics(), terminated=False)
