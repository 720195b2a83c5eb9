"""How a preemption or a resize stops a job (``SimConfig.stop_mode``) and the periodic checkpoints a stop without
a save falls back to (``SimConfig.checkpoint_interval``): hand-computed instances on one 8-GPU node, env v6's
defaults ("save_first", checkpoints every 1800 s) and env v5's mode kept by its keywords (``stop_mode="v5"``,
``checkpoint_interval=None``), and the invariant checker on random play under each mode."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import make_policy
from frenzy_env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.registration import V5_WORLD
from frenzy_env.simulator import QUEUED, RUNNING, ClusterSimulator, SimConfig
from frenzy_env.simulator.config import RECOMMENDED_CHECKPOINT_INTERVAL
from frenzy_env.testing.checker import InvariantChecker, InvariantViolation
from frenzy_env.workload import make_generator
from frenzy_env.world.cluster import ClusterSpec

A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
# flat costs, so every time below is a sum of these: a start takes 5 s, a stop 10 s (no checkpoint write)
FLAT = dict(startup_time=5.0, restart_overhead=10.0, checkpoint_bandwidth=math.inf, load_bandwidth=math.inf)
WORK = 1e6  # iterations of job 0: it runs for about 30 h, long past every action below
# env v5's stops: a preemption frees the GPUs at once, keeps all progress and charges its stop to the next start
V5_STOP = dict(stop_mode="v5", checkpoint_interval=None)
# any number of actions on a job at one instant (env v5's; v6's default allows one): a job preempted at 355 may
# start again at 355
ANY_ACTIONS = dict(one_action_per_instant=False)


def _sim(make_job, make_workload, **config) -> ClusterSimulator:
    """Job 0 (long) starts at t = 0 on one GPU; job 1 (8 GPUs' worth) arrives at t = 355 s."""
    jobs = make_workload(make_job(0, 0.0, WORK), make_job(1, 355.0, 1e3))
    sim = ClusterSimulator(A100_1x8, jobs, SimConfig(**FLAT, **config))
    assert sim.start(0, sim.plan_index("A100-80GB", 1))
    assert sim.running[0].progress_from == 5.0
    sim.advance()  # t = 355: job 1 arrives
    assert sim.now == 355.0
    return sim


def _finish_job0(sim: ClusterSimulator) -> float:
    while math.isnan(sim.records[0].finish_time):
        sim.advance()
    return sim.records[0].finish_time


def test_defaults_are_v6_and_v5_is_kept_by_its_keywords():
    cfg = SimConfig()
    assert cfg.stop_mode == "save_first" and cfg.checkpoint_interval == RECOMMENDED_CHECKPOINT_INTERVAL
    assert RECOMMENDED_CHECKPOINT_INTERVAL == 1800.0
    v5 = SimConfig(**V5_STOP)
    assert v5.stop_mode == "v5" and v5.checkpoint_interval is None
    assert {k: V5_WORLD[k] for k in V5_STOP} == V5_STOP  # the v5 ids' world has v5's stops


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(stop_mode="drain"), "stop_mode"),
        # a kill needs the checkpoint it falls back to (the default has one: env v6's 1800 s)
        (dict(stop_mode="kill", checkpoint_interval=None), "checkpoint_interval"),
        (dict(checkpoint_interval=0.0), "checkpoint_interval"),
        (dict(checkpoint_interval=-60.0), "checkpoint_interval"),
        (dict(checkpoint_interval=math.inf), "checkpoint_interval"),
        (dict(checkpoint_interval=math.nan), "checkpoint_interval"),
        (dict(checkpoint_interval=True), "checkpoint_interval"),
        (dict(checkpoint_interval="1800"), "checkpoint_interval"),
    ],
)
def test_bad_values_raise_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        SimConfig(**kwargs)


def test_kill_preemption_loses_exactly_the_run_since_the_last_checkpoint(make_job, make_workload):
    """Checkpoints every 100 s of run from the first iteration (t = 5): at 105, 205 and 305. A preemption at 355 keeps
    300 s of run, loses 50 s, frees the GPU at once and costs no stop; started again at once, the job pays only its
    5 s start-up, so it finishes 50 + 5 s later than had it never stopped. (Any number of actions per instant, so
    that it starts again at 355.)"""
    sim = _sim(make_job, make_workload, stop_mode="kill", checkpoint_interval=100.0, **ANY_ACTIONS)
    it = float(sim.iter_time[0, sim.plan_index("A100-80GB", 1)])
    assert sim.progress(0) == pytest.approx(350.0 / it, rel=1e-12)
    assert sim.preempt(0)
    assert sim.status[0] == QUEUED and sim.busy_gpus == 0 and sim.resume_extra[0] == 0.0
    assert sim.done_iters[0] == pytest.approx(300.0 / it, rel=1e-12)
    assert sim.attempts[0].rolled_back_s == pytest.approx(50.0) and sim.attempts[0].end_time == 355.0
    assert sim.startup_seconds(0, sim.plan_index("A100-80GB", 1)) == 5.0
    assert sim.start(0, sim.plan_index("A100-80GB", 1))
    assert sim.running[0].progress_from == 360.0
    finish = _finish_job0(sim)
    assert finish == pytest.approx(5.0 + WORK * it + 50.0 + 5.0, rel=1e-12)
    assert sim.metrics()["rolled_back_gpu_hours"] == pytest.approx(50.0 / 3600.0)
    sim.check_invariants()


def test_kill_at_a_checkpoint_loses_nothing_and_v5_loses_nothing(make_job, make_workload):
    """A kill 300 s into the run (t = 305) falls on a checkpoint; v5 (``stop_mode="v5"``) keeps everything and
    charges its 10 s stop to the next start."""
    jobs = make_workload(make_job(0, 0.0, WORK), make_job(1, 305.0, 1e3))
    kill = dict(stop_mode="kill", checkpoint_interval=100.0)
    for config, kept, extra in ((kill, 300.0, 0.0), (V5_STOP, 300.0, 10.0)):
        sim = ClusterSimulator(A100_1x8, jobs, SimConfig(**FLAT, **config))
        plan = sim.plan_index("A100-80GB", 1)
        sim.start(0, plan)
        sim.advance()
        assert sim.now == 305.0 and sim.preempt(0)
        assert sim.done_iters[0] == pytest.approx(kept / sim.iter_time[0, plan], rel=1e-12)
        assert sim.attempts[0].rolled_back_s == 0.0 and sim.resume_extra[0] == extra
        assert "rolled_back_gpu_hours" not in sim.metrics() or config


def test_kill_resize_restarts_from_the_checkpoint_without_a_stop_or_write(make_job, make_workload):
    """A resize under "kill" at t = 355 onto 2 GPUs: the new attempt begins from the 300 s checkpoint and makes
    its first iteration after the 5 s start-up only (v5: 10 s stop + 5 s start-up, all 350 s kept; "save_first",
    the default, resizes as v5 does)."""
    kill = dict(stop_mode="kill", checkpoint_interval=100.0)
    for config, kept, delay in ((kill, 300.0, 5.0), (V5_STOP, 350.0, 15.0), ({}, 350.0, 15.0)):
        sim = _sim(make_job, make_workload, **config)
        one, two = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)
        assert sim.restart_seconds(0, two) == delay
        assert sim.resize(0, two)
        run = sim.running[0]
        assert run.done_base == pytest.approx(kept / sim.iter_time[0, one], rel=1e-12)
        assert run.progress_from == 355.0 + delay
        assert sim.attempts[0].outcome == "resized" and sim.attempts[0].rolled_back_s == pytest.approx(350.0 - kept)


def test_save_first_preemption_holds_its_gpus_for_the_save(make_job, make_workload):
    """Under "save_first" a preemption at t = 355 keeps the GPU for the 10 s stop (no write at infinite
    bandwidth): the job stays RUNNING without progress until 365, may be neither resized nor preempted meanwhile,
    and job 1 (8 GPUs) may not start before the GPU is free. Then it is queued with all 350 s of progress and its
    next start pays only the 5 s start-up: it finishes 15 s late, as under v5, but held the GPU 10 s longer."""
    sim = _sim(make_job, make_workload, stop_mode="save_first", checkpoint_interval=100.0)
    one, eight = sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 8)
    it = float(sim.iter_time[0, one])
    assert sim.preempt(0)
    assert sim.status[0] == RUNNING and sim.saving_until[0] == 365.0 and sim.busy_gpus == 1
    assert sim.progress(0) == pytest.approx(350.0 / it, rel=1e-12)
    assert not sim.preempt(0) and not sim.resize(0, sim.plan_index("A100-80GB", 2))
    assert not sim.resize_mask(np.array([0])).any() and not sim.resize_ready(np.array([0]))[0]
    assert not sim.start_mask(np.array([1]))[0, eight] and not sim.start(1, eight)
    assert sim.next_event_time() == 365.0
    sim.advance()
    assert sim.now == 365.0 and sim.status[0] == QUEUED and sim.busy_gpus == 0
    assert np.isnan(sim.saving_until[0]) and sim.resume_extra[0] == 0.0
    assert sim.done_iters[0] == pytest.approx(350.0 / it, rel=1e-12)
    first = sim.attempts[0]
    assert (first.outcome, first.saving_from, first.end_time) == ("preempted", 355.0, 365.0)
    assert sim.records[0].gpu_seconds == pytest.approx(365.0) and sim.records[0].restarts == 1
    assert sim.start_mask(np.array([1]))[0, eight]
    assert sim.start(0, one)
    assert sim.running[0].progress_from == 370.0
    finish = _finish_job0(sim)
    assert finish == pytest.approx(5.0 + WORK * it + 15.0, rel=1e-12)
    # overhead: the two 5 s start-ups and the 10 s save, on one GPU
    assert sim.metrics()["overhead_gpu_hours"] == pytest.approx(20.0 / 3600.0)


def test_v5_preemption_frees_at_once_and_costs_the_job_the_same(make_job, make_workload):
    """``stop_mode="v5"`` (env v5's; v6's default is "save_first", above): the GPU is free at 355, and the 10 s stop
    is paid by the next start (finish 15 s late; any number of actions per instant, so that it starts at 355)."""
    sim = _sim(make_job, make_workload, **V5_STOP, **ANY_ACTIONS)
    it = float(sim.iter_time[0, sim.plan_index("A100-80GB", 1)])
    assert sim.preempt(0)
    assert sim.status[0] == QUEUED and sim.busy_gpus == 0 and np.isnan(sim.saving_until).all()
    assert sim.start(0, sim.plan_index("A100-80GB", 1)) and sim.running[0].progress_from == 370.0
    assert _finish_job0(sim) == pytest.approx(5.0 + WORK * it + 15.0, rel=1e-12)
    assert sim.records[0].gpu_seconds > 0 and sim.attempts[0].end_time == 355.0


@pytest.mark.parametrize("policy", ["doubling", "srpt_est"])
def test_default_and_inert_settings_leave_episodes_as_they_were(policy):
    """Without preemptions no stop saves first and no kill happens: ``stop_mode="save_first"`` (resizes are v5's)
    and a ``checkpoint_interval`` under v5 play the same episode, job for job, as the default."""
    runs = []
    inert = dict(checkpoint_interval=600.0)
    for kw in ({}, dict(stop_mode="v5", **inert), dict(stop_mode="save_first", **inert)):
        env = FrenzyEnv(workload=make_generator("synthetic-small", num_jobs=25), **kw)
        result = run_episode(env, make_policy(policy, env), seed=1)
        metrics = {k: v for k, v in result.metrics.items() if not k.startswith("latency")}  # (wall-clock)
        runs.append((result.jobs.to_csv(index=False), metrics))
    assert runs[0][0] == runs[1][0] == runs[2][0]
    assert runs[0][1] == runs[1][1] == runs[2][1]
    assert runs[0][1]["restarts"] > 0 or policy != "doubling"


@pytest.mark.parametrize("mode", ["v5", "save_first", "kill"])
def test_random_play_with_preemptions_keeps_every_invariant(mode, make_job, make_env):
    """Masked-random play (preempt actions included) on a tiny cluster under each mode, checked step by step."""
    jobs = [make_job(i, 40.0 * i, float(10 ** (2 + i % 3)), model=("gpt2", "gpt2-large")[i % 2]) for i in range(8)]
    env = make_env(ClusterSpec.homogeneous("A100-80GB", 2, 4), jobs, preemption=True, queue_slots=4,
                   running_slots=4, stop_mode=mode, checkpoint_interval=30.0, startup_time=5.0)
    rng = np.random.default_rng(0)
    kills = saves = 0
    for seed in range(4):
        obs, info = env.reset(seed=seed)
        checker = InvariantChecker(env, check_space=True)
        checker.on_reset(obs, info)
        for _ in range(600):
            mask = env.action_masks()
            action = int(rng.choice(np.flatnonzero(mask)))
            checker.before_step(action)
            out = env.step(action)
            checker.after_step(action, *out)
            if out[2] or out[3]:
                break
        kills += sum(a.rolled_back_s > 0 for a in env.sim.attempts)
        saves += sum(a.saving_from == a.saving_from for a in env.sim.attempts)
    assert kills > 0 if mode == "kill" else kills == 0
    assert saves > 0 if mode == "save_first" else saves == 0


def test_checker_catches_a_kill_that_loses_more_than_one_interval(make_job, make_workload):
    """(Any number of actions per instant: the killed job starts again at once.)"""
    sim = _sim(make_job, make_workload, stop_mode="kill", checkpoint_interval=100.0, **ANY_ACTIONS)
    checker = InvariantChecker.for_simulator(sim)
    assert sim.preempt(0)
    checker.after_sim_action()  # 50 s lost: allowed
    sim.start(0, sim.plan_index("A100-80GB", 1))
    checker.after_sim_action()
    sim.advance()  # job 0 runs on (job 1 cannot start: 7 GPUs free)
    checker.after_sim_action()
    sim.running[0].done_base *= 0.5  # a tampered kill: half the progress gone
    sim.preempt(0)
    with pytest.raises(InvariantViolation, match="progress of job 0|lost"):
        checker.after_sim_action()


def test_checker_catches_a_save_of_the_wrong_length(make_job, make_workload):
    sim = _sim(make_job, make_workload, stop_mode="save_first", checkpoint_interval=100.0)
    checker = InvariantChecker.for_simulator(sim)
    assert sim.preempt(0)
    checker.after_sim_action()
    sim.attempts[0].saving_from = 350.0  # recorded 5 s early: the save would have held the GPU 15 s
    sim.advance()
    with pytest.raises(InvariantViolation, match="save of 10"):
        checker.after_sim_action()


def test_fuzzer_random_instances_draw_every_stop_mode():
    from frenzy_env.testing.fuzzing import random_config

    drawn = [random_config(np.random.default_rng(i), i)[2] for i in range(40)]
    assert {kw["stop_mode"] for kw in drawn} == {"v5", "save_first", "kill"}
    assert all(kw["checkpoint_interval"] is not None for kw in drawn if kw["stop_mode"] == "kill")
    assert {kw["checkpoint_interval"] for kw in drawn} == {None, 60.0, 1800.0}
    for kw in drawn:  # every draw is a valid configuration
        SimConfig(stop_mode=kw["stop_mode"], checkpoint_interval=kw["checkpoint_interval"])
