"""Short runs of the fuzzer (``scripts/fuzz.py`` plays 1,000,000 steps): every policy kind, setting and budget
reached, crashes and refusals counted with their place, the memory check's warm-up; full baseline episodes under
the invariant checker, a leak check, and proof that the checker does catch corrupted states."""

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
from agents.ppo.loading import DEFAULT_MODEL_PATH, load_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.simulator import DONE, QUEUED, REJECTED
from frenzy_env.testing import fuzzing
from frenzy_env.testing.checker import InvariantChecker, InvariantViolation
from frenzy_env.testing.fuzzing import BUDGETS, MASKED_RANDOM, RANDOM_INSTANCES, UNMASKED_RANDOM, few_jobs, fuzz
from frenzy_env.workload import make_generator

FUZZ_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz.py"
SMALL = "frenzy/HeteroClusterSmall-v6"  # a small preset of the current env version
# the shipped agent is a v5, cluster-layout model: it fits the v5 world's id of the preset (frenzy-testbed, v5's
# slots) without preemption, and no v6 id (universal slots)
AGENT_SMALL = "frenzy/HeteroClusterSmall-v5"


def agent_factory(env):
    return load_policy(env, DEFAULT_MODEL_PATH)


def _policies(*names):
    return {name: partial(baselines.make_policy, name) for name in names}


def test_short_fuzz_run_reaches_every_policy_kind_setting_and_budget():
    policies = {**_policies("fifo"), "ppo": agent_factory}
    report = fuzz(
        2000, seed=2, policies=policies, presets=[AGENT_SMALL], episode_steps=60, warmup_episodes=5, warmup_steps=100
    )
    assert report.crashes == 0 and report.violations == 0, "\n".join(f["traceback"] for f in report.failures)
    assert report.steps == 2000 and report.policies == [MASKED_RANDOM, UNMASKED_RANDOM, "fifo", "ppo"]
    assert report.presets == [AGENT_SMALL, RANDOM_INSTANCES]
    for policy in report.policies:  # every kind played, on the preset and (but the agent) on random instances
        assert report.episodes_by_pair[policy][AGENT_SMALL] > 0 and report.steps_by_policy[policy] > 0, policy
        assert policy == "ppo" or report.episodes_by_pair[policy][RANDOM_INSTANCES] > 0, policy
    assert RANDOM_INSTANCES not in report.episodes_by_pair["ppo"]  # it fits no random instance
    assert report.refusals == sum(sum(v.values()) for v in report.refusals_by_pair.values())
    assert set(report.refusals_by_pair) == {"ppo"} and report.refusals_by_pair["ppo"][AGENT_SMALL] == 1  # preemption on
    assert report.episodes_by_preemption["on"] > 0 and report.episodes_by_preemption["off"] > 0
    assert report.preemptions > 0
    assert all(report.episodes_by_budget[b] > 0 for b in BUDGETS)
    assert report.truncations["max_steps"] > 0 and report.truncations["max_sim_hours"] > 0
    assert report.terminations > 0 and report.capped > 0 and report.cut_by_run_end == 1
    ended = report.terminations + report.truncated_episodes + report.capped + report.cut_by_run_end
    assert ended == report.episodes == sum(report.episodes_by_policy.values())
    assert sum(report.steps_by_policy.values()) == sum(report.steps_by_preset.values()) == report.steps
    assert sum(report.episodes_by_random_kind.values()) == report.episodes_by_preset[RANDOM_INSTANCES]
    assert all(k.startswith("random/") for k in report.episodes_by_random_kind)
    assert report.illegal_actions > 0.1 * report.steps
    assert report.pairs_not_played() == ["ppo x random (refused)"] and report.refusals_by_pair["ppo"][RANDOM_INSTANCES]
    text = report.summary()
    assert "invariant violations 0" in text and f"refusals {report.refusals} (ppo {report.refusals})" in text
    assert "not played: ppo x random (refused)" in text
    assert json.loads(json.dumps(report.to_dict()))["episodes_by_pair"]["ppo"] == report.episodes_by_pair["ppo"]


def test_settings_on_and_off_are_kept():
    report = fuzz(400, seed=0, presets=[SMALL], custom=False, preemption="off", budgets="off", episode_steps=30)
    assert report.episodes_by_preemption == {"off": report.episodes} and report.preemptions == 0
    assert report.episodes_by_budget == {"none": report.episodes} and report.truncated_episodes == 0
    report = fuzz(400, seed=0, presets=[SMALL], custom=False, preemption="on", budgets="on", episode_steps=30)
    assert report.episodes_by_preemption == {"on": report.episodes}
    assert "none" not in report.episodes_by_budget and report.truncated_episodes > 0


def test_the_same_seed_draws_the_same_run():
    def counts(seed):
        d = fuzz(300, seed=seed, presets=[SMALL], episode_steps=30, warmup_episodes=0, warmup_steps=0).to_dict()
        return {k: v for k, v in d.items() if not k.startswith(("rss", "seconds"))}

    assert counts(5) == counts(5) != counts(6)


class _Boom:
    """A policy that raises at its third action."""

    def __init__(self, env):
        self.calls = 0

    def predict(self, obs, action_masks=None, deterministic=True):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("boom at the third action")
        return int(np.flatnonzero(action_masks)[0]), None


def test_a_crashing_policy_is_counted_as_a_crash_with_its_place():
    report = fuzz(
        200, seed=0, policies={"boom": _Boom}, random_drivers=(), presets=[SMALL], custom=False, budgets="off",
        preset_jobs=(12,), eps_choices=(0.0,),
    )
    assert report.violations == 0 and report.refusals == 0
    assert report.crashes == report.episodes - report.cut_by_run_end > 1 and report.steps == 200
    first = report.failures[0]
    assert (first["kind"], first["policy"], first["env"], first["stage"], first["step"]) == (
        "crash", "boom", SMALL, "policy", 2
    )
    assert first["error"] == "RuntimeError: boom at the third action" and "_Boom" not in first["error"]
    assert first["place"].startswith(f"{SMALL} policy=boom seed={first['plan']['seed']} preemption=")
    assert first["place"].endswith("(policy) step 2") and len(first["actions"]) >= 2
    assert f"crash in {first['place']}: RuntimeError: boom at the third action" in report.summary()


def test_a_factory_that_crashes_is_a_crash_and_one_that_refuses_is_a_refusal():
    def broken(env):
        raise ValueError("no policy today")

    def picky(env):
        raise ConfigError("picky refuses every env")

    report = fuzz(300, seed=0, policies={"broken": broken, "picky": picky}, presets=[SMALL], custom=False,
                  episode_steps=50)
    assert report.steps == 300 and report.crashes > 0 and report.violations == 0
    assert {f["stage"] for f in report.failures} == {"policy factory"}
    assert all(f["error"] == "ValueError: no policy today" for f in report.failures)
    assert report.refusals_by_pair == {"picky": {SMALL: report.refusals}} and 1 <= report.refusals <= 2  # per spaces
    assert "picky" not in report.episodes_by_policy
    assert report.refused[0].startswith(f"picky on {SMALL} (preemption=")
    assert report.refused[0].endswith("picky refuses every env")
    stalled = fuzz(100, policies={"picky": picky}, random_drivers=(), presets=[SMALL], custom=False)
    assert stalled.stalled and stalled.steps == 0 and stalled.crashes == 0 and stalled.episodes == 0
    assert "STALLED" in stalled.summary()


def test_a_warm_up_that_does_not_complete_is_reported_so():
    report = fuzz(200, seed=0, presets=[SMALL], custom=False, episode_steps=30, warmup_episodes=10**6)
    assert not report.warmup_completed and report.warmed_at_episode is None
    assert report.rss_warm_mb is None and report.rss_growth_mb is None and report.rss_max_after_warmup_mb is None
    assert report.rss_start_mb > 0 and report.rss_end_mb > 0
    assert report.to_dict()["rss_growth_mb"] is None and report.to_dict()["warmup_completed"] is False
    assert (
        f"memory: NOT CHECKED: the warm-up did not complete ({report.episodes:,} of 1,000,000 episodes, 200 of 20 "
        "steps)" in report.summary()
    )


def test_the_memory_check_compares_the_end_with_the_rss_after_a_real_warm_up(monkeypatch):
    reads = []

    def fake_rss():  # every read is 1 MiB above the one before, and remembers when it was taken
        reads.append(len(reads))
        return 100.0 + len(reads)

    monkeypatch.setattr(fuzzing, "resident_mb", fake_rss)
    report = fuzz(2000, seed=1, presets=[SMALL], episode_steps=40, warmup_episodes=8, warmup_steps=500)
    assert report.warmup_completed and report.warmed_at_episode >= 8 and report.warmed_at_step >= 500
    assert report.warmed_at_step < report.steps  # measured during the run, not at its end
    assert report.rss_start_mb == 101.0 and report.rss_end_mb == 100.0 + len(reads)
    assert report.rss_start_mb < report.rss_warm_mb < report.rss_end_mb
    assert report.rss_growth_mb == report.rss_end_mb - report.rss_warm_mb > 0
    assert report.rss_max_after_warmup_mb == report.rss_end_mb
    # the warm-up ended at the first episode's end past both thresholds: fewer episodes or steps do not count
    assert report.warmed_at_episode == 8 or report.warmed_at_step - 40 < 500
    assert f"after the warm-up (episode {report.warmed_at_episode:,}, step {report.warmed_at_step:,})" in (
        report.summary()
    )


def test_preset_workloads_are_cut_to_few_jobs():
    assert len(few_jobs("itp-default", 4).generate(0).jobs) == 4
    assert few_jobs("synthetic", 40).num_jobs == 40 and few_jobs("synthetic-small", 40).num_jobs == 30
    assert len(few_jobs("itp-default", None).generate(0).jobs) == 570


@pytest.mark.slow
def test_fuzz_run_every_preset_and_baseline():
    policies = {**_policies(*baselines.POLICIES), "ppo": agent_factory}
    report = fuzz(60_000, seed=1, policies=policies, episode_steps=100, warmup_episodes=50)
    assert report.crashes == 0 and report.violations == 0, "\n".join(f["traceback"] for f in report.failures)
    assert all(report.episodes_by_policy.get(p) for p in report.policies)
    assert all(report.episodes_by_preset.get(p) for p in report.presets) and report.warmup_completed
    assert set(report.refusals_by_pair) == {"ppo"}  # the baselines take every env


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


def _script(*args):
    return subprocess.run([sys.executable, str(FUZZ_SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_fuzz_script_writes_its_report(tmp_path):
    out = tmp_path / "fuzz.json"
    proc = _script(
        "--steps", "300", "--episode-steps", "20", "--policies", "fifo,unmasked-random", "--presets", SMALL,
        "--no-custom", "--preemption", "on", "--budgets", "off", "--preset-jobs", "3", "--warmup-episodes", "2",
        "--warmup-steps", "40", "--json", str(out),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["steps"] == 300 and report["crashes"] == 0 and report["violations"] == 0
    assert report["policies"] == ["unmasked-random", "fifo"] and report["presets"] == [SMALL]
    assert report["episodes_by_preemption"] == {"on": report["episodes"]}
    assert report["episodes_by_budget"] == {"none": report["episodes"]}
    assert report["warmup_completed"] is True and report["warmed_at_step"] >= 40
    assert report["rss_growth_mb"] == report["rss_end_mb"] - report["rss_warm_mb"]
    assert "memory: RSS " in proc.stdout and " after the warm-up (episode " in proc.stdout


def test_fuzz_script_fails_when_the_warm_up_does_not_complete():
    proc = _script("--steps", "100", "--policies", "masked-random", "--presets", SMALL, "--no-custom")
    assert proc.returncode == 1, proc.stderr
    assert "memory: NOT CHECKED: the warm-up did not complete (" in proc.stdout
    assert " of 100 episodes, 100 of 10 steps)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "fifo,nope"], "--policies: unknown name 'nope'; known: all, masked-random, unmasked-random"),
        (["--presets", "frenzy/Nowhere-v5"], "--presets: unknown name 'frenzy/Nowhere-v5'"),
        (["--preemption", "maybe"], "argument --preemption: invalid choice: 'maybe'"),
        (["--steps", "0"], "--steps must be an integer >= 1, got 0"),
        (["--preset-jobs", "4,x"], "--preset-jobs must be a comma list of positive integers, got '4,x'"),
    ],
)
def test_fuzz_script_refuses_bad_flags(args, message):
    proc = _script(*args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


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


def test_random_instances_draw_every_world_and_pacing_option():
    """Over 60 random instances every memory truth, efficiency model and pacing setting is drawn, and an
    instance's options are a function of its index alone (the same whatever stream drew its cluster)."""
    from frenzy_env.testing.fuzzing import EFFICIENCIES, MEMORY_TRUTHS, random_config

    drawn = [random_config(np.random.default_rng(i), i)[2] for i in range(60)]
    assert {k["memory_truth"] for k in drawn} == set(MEMORY_TRUTHS)
    assert {k["efficiency"] for k in drawn} == set(EFFICIENCIES)
    assert {k["resize_cooldown"] for k in drawn} == {None, 5.0, 60.0}
    assert {k["one_action_per_instant"] for k in drawn} == {False, True}
    other = random_config(np.random.default_rng(999), 7)[2]
    assert {k: other[k] for k in ("memory_truth", "efficiency", "resize_cooldown", "one_action_per_instant")} == {
        k: drawn[7][k] for k in ("memory_truth", "efficiency", "resize_cooldown", "one_action_per_instant")
    }
