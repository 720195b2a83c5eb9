"""Episodes that always end: the env's step and simulated-time budgets (``max_steps``, ``max_sim_hours``), the
honest metrics of a truncated episode, and the budgets the PPO trainer puts on its training and validation
episodes (with the checkpoint written before each validation)."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle

import numpy as np
import pytest

from frenzy_env.errors import ConfigError

TRUNCATION_KEYS = {
    "truncated", "unfinished", "not_arrived", "avg_time_in_system_h", "truncated_at_h", "avg_jct_finished_h",
    "p95_jct_finished_h",
}


#: env v5's pacing, which the hand-played episodes here rest on: no ``resize_cooldown``, so a running job may be
#: resized (the thrashing policy) and the env consults the policy (a cut's decisions) as soon as its start-up ends;
#: under v6's 60 s cooldown the thrashing policy cannot resize before the job makes progress
NO_COOLDOWN = {"resize_cooldown": None}


def _two_jobs(make_job):
    """Two gpt2 jobs of 1,000 iterations, submitted at 0 and 10 s."""
    return [make_job(0, 0.0, 1000.0), make_job(1, 10.0, 1000.0)]


def thrash(env) -> int:
    """A policy that resizes job 0 back and forth between plans 0 and 1 for ever, built from the env's actions
    and masks: start it on plan 0, then at every instant its restart is over resize it to the other plan, with
    a timer (``request_wakeup``) at the end of each start-up so it never makes a step of progress (in an env
    without ``resize_cooldown``: :data:`NO_COOLDOWN`)."""
    view, mask = env.view, env.action_masks()
    run = view.running.get(0)
    if run is None:
        a = env.start_action(0, 0)
        if a is not None and mask[a]:
            env.request_wakeup(view.now + view.startup_seconds(0, 0))
            return a
        return int(np.flatnonzero(mask)[0])
    plan = 1 - run.plan
    a = env.resize_action(0, plan)
    if a is not None and mask[a]:
        env.request_wakeup(view.now + view.restart_seconds(0, plan))
        return a
    return 0  # wait, until the timer


def _play(env, policy, limit: int = 100_000):
    """Play until the episode ends (or ``limit`` steps): (return, steps, terminated, truncated, last info,
    time before the last step)."""
    env.reset(seed=0)
    ret, before, info = 0.0, env.sim.now, {}
    for step in range(1, limit + 1):
        before = env.sim.now
        _, r, term, trunc, info = env.step(policy(env))
        ret += r
        if term or trunc:
            return ret, step, term, trunc, info, before
    return ret, limit, False, False, info, before


def _time_in_system_h(env) -> float:
    """Hand count: each arrived job's JCT if finished, else its time since submission, summed, in hours."""
    sim = env.sim
    total = 0.0
    for j, rec in enumerate(sim.records):
        if float(sim.submit[j]) > sim.now or rec.rejected_reason:
            continue
        end = rec.finish_time if not math.isnan(rec.finish_time) else sim.now
        total += end - float(sim.submit[j])
    return total / 3600.0


def test_a_thrashing_policy_never_ends_without_a_budget(tiny_cluster, make_job, make_env):
    env = make_env(tiny_cluster, _two_jobs(make_job), **NO_COOLDOWN)
    _, steps, term, trunc, _, _ = _play(env, thrash, limit=1500)
    assert steps == 1500 and not term and not trunc
    assert env.sim.restarts > 400 and env.sim.done_iters.sum() == 0  # no progress at all, time goes on
    assert env.sim.now > 3600.0


def test_a_thrashing_policy_is_truncated_at_the_simulated_time_budget(tiny_cluster, make_job, make_env):
    env = make_env(tiny_cluster, _two_jobs(make_job), max_sim_hours=2.0, **NO_COOLDOWN)
    ret, steps, term, trunc, info, before = _play(env, thrash)
    assert trunc and not term
    # the first step whose clock passes the budget (counted from reset, at t = 0 here)
    assert env.sim.now >= 2 * 3600.0 > before
    m = info["metrics"]
    assert m.keys() >= TRUNCATION_KEYS and m["truncated"] == 1.0
    assert m["unfinished"] == 2 and m["not_arrived"] == 0 and m["finished"] == 0
    assert math.isnan(m["avg_jct_finished_h"])  # over finished jobs: none
    # every job counts its time in the system so far plus the episode's length at the cut (now - 0)
    now = env.sim.now
    assert m["avg_jct_h"] == pytest.approx(((now + now) + (now - 10.0 + now)) / 2 / 3600.0, rel=1e-12)
    # the lower bound on the average JCT: each job's time in the system so far
    expected = ((env.sim.now - 0.0) + (env.sim.now - 10.0)) / 2 / 3600.0
    assert m["avg_time_in_system_h"] == pytest.approx(expected, rel=1e-12)
    assert m["truncated_at_h"] == pytest.approx(env.sim.now / 3600.0)
    assert m["restarts"] > 100 and m["steps"] == steps
    # the return is minus the total time jobs spent in the system up to the cut (reward_scale: one hour)
    assert ret == pytest.approx(-2 * m["avg_time_in_system_h"], rel=1e-9)
    assert ret == pytest.approx(-_time_in_system_h(env), rel=1e-9)
    assert info["action_mask"][0] == 1  # the final mask allows "wait", as at termination
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_the_invariant_checker_agrees_with_a_truncated_episode(tiny_cluster, make_job, make_env):
    """The independent checker recomputes the truncation metrics and the return from the per-job records."""
    from frenzy_env.testing.checker import InvariantChecker

    env = make_env(tiny_cluster, _two_jobs(make_job), max_sim_hours=0.5, **NO_COOLDOWN)
    checker = InvariantChecker(env, check_space=True)
    checker.on_reset(*env.reset(seed=0))
    trunc = False
    while not trunc:
        action = thrash(env)
        checker.before_step(action)
        obs, reward, term, trunc, info = env.step(action)
        checker.after_step(action, obs, reward, term, trunc, info)
        assert not term
    assert checker.episodes_checked == 1


def test_a_thrashing_policy_is_truncated_at_the_step_budget(tiny_cluster, make_job, make_env):
    env = make_env(tiny_cluster, _two_jobs(make_job), max_steps=40, **NO_COOLDOWN)
    ret, steps, term, trunc, info, _ = _play(env, thrash)
    assert (steps, term, trunc) == (40, False, True)
    m = info["metrics"]
    assert m["truncated"] == 1.0 and m["unfinished"] == 2 and m["steps"] == 40
    assert ret == pytest.approx(-_time_in_system_h(env), rel=1e-9)
    # and a budget of either kind: whichever comes first
    both = make_env(tiny_cluster, _two_jobs(make_job), max_steps=40, max_sim_hours=100.0, **NO_COOLDOWN)
    assert _play(both, thrash)[1:4] == (40, False, True)


def test_a_cut_counts_finished_and_future_jobs_honestly(tiny_cluster, make_job, make_env):
    """A budget that cuts a normal episode midway: finished jobs count their JCT, running and queued ones their
    time so far, jobs not yet submitted are counted apart. Without a cooldown (:data:`NO_COOLDOWN`): job 1 is
    resizable once its start-up ends, so the policy is consulted at job 0's finish and waits a minute at a time
    until the cut (under v6's cooldown the env would advance from job 0's finish to job 2's arrival at once)."""
    jobs = [make_job(0, 0.0, 200.0), make_job(1, 0.0, 1e8), make_job(2, 5e5, 100.0)]
    env = make_env(tiny_cluster, jobs, max_sim_hours=1.0, **NO_COOLDOWN)

    def first_legal_start_else_wait_a_minute(env):
        mask = env.action_masks()
        starts = np.flatnonzero(mask[env.first_start : env.first_resize])
        return env.first_start + int(starts[0]) if starts.size else 1

    ret, _, term, trunc, info, _ = _play(env, first_legal_start_else_wait_a_minute)
    m = info["metrics"]
    assert trunc and not term and m["finished"] == 1 and m["unfinished"] == 1 and m["not_arrived"] == 1
    jct0, now = env.sim.records[0].finish_time, env.sim.now
    assert m["avg_jct_finished_h"] == m["p95_jct_finished_h"] == pytest.approx(jct0 / 3600.0)
    # job 0 its JCT, job 1 (running since 0) now + now, job 2 (not arrived) the cut's length, now
    charged = np.array([jct0, 2 * now, now])
    assert m["avg_jct_h"] == pytest.approx(charged.mean() / 3600.0, rel=1e-12)
    assert m["p95_jct_h"] == pytest.approx(np.percentile(charged, 95) / 3600.0, rel=1e-12)
    assert m["avg_jct_h"] >= m["avg_jct_finished_h"]
    assert m["avg_time_in_system_h"] == pytest.approx((jct0 + env.sim.now) / 2 / 3600.0, rel=1e-12)
    assert ret == pytest.approx(-(jct0 + env.sim.now) / 3600.0, rel=1e-9)


def test_budgets_are_off_by_default_and_a_terminated_episode_keeps_its_metric_names(tiny_env):
    assert tiny_env.max_steps is None and tiny_env.max_sim_hours is None
    tiny_env.reset(seed=0)
    done, info = False, {}
    while not done:
        mask = tiny_env.action_masks()
        starts = np.flatnonzero(mask[tiny_env.first_start : tiny_env.first_resize])
        _, _, term, trunc, info = tiny_env.step(tiny_env.first_start + int(starts[0]) if starts.size else 0)
        done = term or trunc
    assert term and not trunc and not (TRUNCATION_KEYS & info["metrics"].keys())
    # a caller that stops early asks for the same honest metrics
    assert tiny_env.episode_metrics(truncated=True).keys() >= TRUNCATION_KEYS


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "2", True, [1.0]])
def test_max_sim_hours_is_checked(tiny_cluster, tiny_workload, bad):
    from frenzy_env.env import FrenzyEnv

    with pytest.raises(ConfigError, match=r"max_sim_hours.*" + repr(bad).replace("[", r"\[").replace("]", r"\]")):
        FrenzyEnv(cluster=tiny_cluster, workload=tiny_workload, max_sim_hours=bad)
    assert FrenzyEnv(cluster=tiny_cluster, workload=tiny_workload, max_sim_hours=1).max_sim_hours == 1.0


def test_an_env_pickled_before_the_time_budget_loads(tiny_env):
    tiny_env.reset(seed=0)
    state = tiny_env.__getstate__()  # as pickled before the time budget: the step budget under its old name
    state["max_steps"] = state.pop("_max_steps")
    for key in ("_max_sim_hours", "_t_reset", "_step_budget", "_time_budget_s"):
        del state[key]
    old = type(tiny_env).__new__(type(tiny_env))
    old.__setstate__(pickle.loads(pickle.dumps(state)))
    assert old.max_sim_hours is None and old.max_steps is None and old.budgets["max_steps"] is None
    old.step(0)


# ------------------------------------------------------------------------------------------- "auto" budgets
def test_auto_budgets_scale_to_the_episode_workload(tiny_cluster, make_job, make_env):
    """``"auto"``: twice the arrival span plus every job's run time on its fastest offered plan, recomputed here
    from the plan table (and an hour at the least); 100 decisions per job plus one per minute of that time."""
    jobs = [make_job(0, 0.0, 2e6), make_job(1, 7200.0, 1e6), make_job(2, 9000.0, 5e5)]
    env = make_env(tiny_cluster, jobs, max_steps="auto", max_sim_hours="auto")
    assert env.budgets == {"max_steps": None, "max_sim_hours": None}  # not before the first reset
    env.reset(seed=0)
    sim = env.sim
    fastest = [
        min(sim.work[j] * sim.iter_time[j, p] for p in range(env.num_plans) if sim.pred_ok[j, p]) for j in range(3)
    ]
    assert min(fastest) > 600.0  # hours of work: the formula, not the floor
    hours = 2 * (9000.0 + sum(fastest)) / 3600.0
    assert env.budgets["max_sim_hours"] == pytest.approx(hours, rel=1e-12)
    assert env.budgets["max_steps"] == 100 * 3 + math.ceil(hours * 60)
    # a workload of two short jobs: the step budget follows the count, the time budget its floor of an hour
    short = make_env(tiny_cluster, _two_jobs(make_job), max_steps="auto", max_sim_hours="auto")
    short.reset(seed=0)
    assert short.budgets == {"max_steps": 200 + 60, "max_sim_hours": 1.0}
    # one auto, one set: each as given
    mixed = make_env(tiny_cluster, jobs, max_steps=50, max_sim_hours="auto")
    mixed.reset(seed=0)
    assert mixed.budgets == {"max_steps": 50, "max_sim_hours": env.budgets["max_sim_hours"]}


def test_a_thrashing_policy_is_cut_by_the_auto_budgets(tiny_cluster, make_job, make_env):
    env = make_env(tiny_cluster, _two_jobs(make_job), max_steps="auto", **NO_COOLDOWN)
    ret, steps, term, trunc, info, _ = _play(env, thrash)
    assert (steps, term, trunc) == (260, False, True) and info["metrics"]["truncated"] == 1.0
    timed = make_env(tiny_cluster, _two_jobs(make_job), max_sim_hours="auto", **NO_COOLDOWN)
    _, steps, term, trunc, info, before = _play(timed, thrash)
    assert trunc and not term and timed.sim.now >= 3600.0 > before  # the floor: one simulated hour


@pytest.mark.parametrize("key, bad", [("max_steps", "Auto"), ("max_steps", 2.5), ("max_steps", True),
                                      ("max_sim_hours", "AUTO")])
def test_budget_keywords_are_checked(tiny_cluster, tiny_workload, key, bad):
    from frenzy_env.env import FrenzyEnv

    with pytest.raises(ConfigError, match=rf"{key} must be .*'auto'.*{bad!r}"):
        FrenzyEnv(cluster=tiny_cluster, workload=tiny_workload, **{key: bad})


def test_a_pickled_env_keeps_its_budgets(tiny_cluster, make_job, make_env):
    env = make_env(tiny_cluster, _two_jobs(make_job), max_steps="auto", max_sim_hours=3.0)
    env.reset(seed=0)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.budgets == env.budgets == {"max_steps": 260, "max_sim_hours": 3.0}


# ------------------------------------------------------------------------------------------------ the trainer
def _tiny(tmp_path, name: str, **kw):
    from agents.ppo import PPOConfig, TrainConfig

    base = dict(
        timesteps=384, n_envs=3, jobs_range=(6, 10), validation_jobs=8, validation_episodes=2, train_workloads=6,
        eval_freq=128, checkpoint_minutes=60.0, threads=1, out_dir=str(tmp_path / name), progress=False, seed=5,
        ppo=PPOConfig(n_steps=64, batch_size=96, bc_episodes=1, bc_epochs=1, horizon_h=2.0),
    )
    return TrainConfig(**{**base, **kw})


def test_train_config_budgets_defaults_checks_and_old_configs():
    from agents.ppo import TrainConfig
    from agents.ppo.loading import DEFAULT_MODEL_PATH

    cfg = TrainConfig()
    assert (cfg.max_steps_per_job, cfg.validation_max_steps_per_job) == (200.0, 200.0)
    assert cfg.max_sim_hours is None and cfg.validation_max_sim_hours is None
    assert cfg.validation_time_budget_s == 900.0
    for name in ("max_steps_per_job", "max_sim_hours", "validation_max_steps_per_job", "validation_max_sim_hours",
                 "validation_time_budget_s"):
        with pytest.raises(ConfigError, match=f"{name} must be a positive number or None, got -1"):
            TrainConfig(**{name: -1})
    assert TrainConfig(max_steps_per_job=None, validation_time_budget_s=None).max_steps_per_job is None
    # a config.json written before the budgets (the shipped model's record without them) loads, with the defaults
    shipped = json.loads(DEFAULT_MODEL_PATH.with_suffix(".json").read_text())["train_config"]
    assert shipped["max_steps_per_job"] == 200.0  # the env-v5 model was trained with them
    budgets = ("max_steps_per_job", "max_sim_hours", "validation_max_steps_per_job", "validation_max_sim_hours",
               "validation_time_budget_s")
    old = {k: v for k, v in shipped.items() if k not in budgets}
    loaded = TrainConfig.from_dict(old)
    assert loaded.max_steps_per_job == 200.0 and loaded.validation_time_budget_s == 900.0
    assert TrainConfig.from_dict(dataclasses.asdict(loaded)) == loaded


def test_training_and_validation_episodes_are_cut_by_their_budgets(tmp_path):
    """Budgets small enough to cut every episode: training episodes are truncated (counted in updates.jsonl),
    validation episodes too (val_truncated in the learning curve), and the run still saves a best model."""
    from agents.ppo import train

    cfg = _tiny(tmp_path, "cut", max_steps_per_job=1.0, validation_max_steps_per_job=0.5, timesteps=192)
    out = train(cfg)
    lines = [json.loads(x) for x in (out / "updates.jsonl").read_text().splitlines()]
    assert lines[0]["episodes"] > 0 and lines[0]["train_truncated"] == lines[0]["episodes"]
    rows = (out / "learning_curve.csv").read_text().splitlines()
    assert rows[0].split(",")[-1] == "val_truncated"
    episodes = cfg.validation_episodes * cfg.validation_samples
    assert all(int(float(r.split(",")[-1])) == episodes for r in rows[1:])
    assert (out / "best_model.zip").is_file()
    assert json.loads((out / "train_log.json").read_text())["best_val_truncated"] == episodes


def test_a_validation_past_its_wall_clock_budget_is_cut(tmp_path):
    from agents.ppo.training import Validator, _container
    from agents.ppo.workloads import make_env, training_generator

    cfg = _tiny(tmp_path, "v", validation_time_budget_s=1e-9)
    model = _container(cfg, make_env(cfg, training_generator(cfg)))
    validator = Validator(cfg)
    jct = validator.run(model.policy)
    assert validator.truncated.all() and jct.shape == validator.truncated.shape
    assert np.all(jct >= 0) and np.all(jct < validator.ref_jct)  # lower bounds from the first instant
    uncut = Validator(dataclasses.replace(cfg, validation_time_budget_s=None))
    assert np.all(uncut.run(model.policy) > 0) and not uncut.truncated.any()


def test_the_checkpoint_is_written_before_validation_and_a_kill_during_it_resumes(tmp_path, monkeypatch):
    """``model.zip`` and ``checkpoint.pt`` exist when a validation starts (marked as owing it); a run killed
    during its second validation resumes by running that validation, and ends as an uninterrupted run."""
    import torch as th

    from agents.ppo import train
    from agents.ppo.training import Validator

    straight = train(_tiny(tmp_path, "a"))
    real_run, calls = Validator.run, []

    def run(self, policy):
        out = tmp_path / "b"
        assert (out / "model.zip").is_file() and (out / "checkpoint.pt").is_file()
        assert th.load(out / "checkpoint.pt", weights_only=False)["validation_pending"]
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed during validation")
        return real_run(self, policy)

    monkeypatch.setattr(Validator, "run", run)
    with pytest.raises(KeyboardInterrupt):
        train(_tiny(tmp_path, "b"))
    monkeypatch.undo()
    resumed = train(None, resume=tmp_path / "b")

    def curve(d):
        lines = (d / "learning_curve.csv").read_text().splitlines()
        return [line.split(",")[:2] + line.split(",")[3:] for line in lines]  # (not wall_s)

    assert curve(straight) == curve(resumed) and len(curve(straight)) == 4
    a, b = (th.load(d / "checkpoint.pt", weights_only=False)["policy"] for d in (straight, resumed))
    assert all(th.equal(a[k], b[k]) for k in a)


def test_run_episode_stopped_by_its_max_steps_reports_a_truncated_episode():
    """``run_episode(max_steps=N)`` that stops an episode before its end says so in the metrics, as the env's
    own budgets do; an episode that ends is reported as before (no truncation keys)."""
    import baselines
    from frenzy_env.env import FrenzyEnv
    from frenzy_env.evaluation.episodes import run_episode

    env = FrenzyEnv(workload="synthetic-small")
    cut = run_episode(env, baselines.make_policy("fifo", env), seed=0, max_steps=5).metrics
    assert cut["truncated"] == 1.0 and cut["decisions"] == 5.0 and cut["unfinished"] + cut["not_arrived"] > 0
    whole = run_episode(env, baselines.make_policy("fifo", env), seed=0).metrics
    assert "truncated" not in whole and whole["finished"] + whole["rejected"] == whole["jobs"]


def _fifo_env(tiny_cluster, make_job, make_env, **kwargs):
    jobs = [make_job(0, 0.0, 3000.0), make_job(1, 0.0, 2000.0), make_job(2, 600.0, 1000.0),
            make_job(3, 4000.0, 500.0)]
    return make_env(tiny_cluster, jobs, **kwargs)


def test_a_cut_never_scores_below_the_same_play_finished(tiny_cluster, make_job, make_env):
    """fifo played to the end, and the same play cut after k steps for every k: the cut's avg_jct_h is never
    below its finished jobs' average, and from the point the cut's length reaches the longest JCT of the
    finished play (each unfinished job is then charged at least its final JCT) never below the finished
    episode's avg_jct_h and p95_jct_h."""
    from baselines import make_policy
    from frenzy_env.evaluation.episodes import run_episode

    env = _fifo_env(tiny_cluster, make_job, make_env)
    result = run_episode(env, make_policy("fifo", env), seed=0)
    full = result.metrics
    assert "truncated" not in full and "avg_jct_finished_h" not in full and full["finished"] == 4
    longest = float(result.jobs["jct_h"].max())
    steps = int(full["steps"])
    late = 0
    for k in range(1, steps):
        cut = run_episode(env, make_policy("fifo", env), seed=0, max_steps=k).metrics
        assert cut["truncated"] == 1.0 and cut["finished"] < 4, k
        if cut["finished"]:
            assert cut["avg_jct_h"] >= cut["avg_jct_finished_h"], k
        if cut["truncated_at_h"] >= longest:
            late += 1
            assert cut["avg_jct_h"] >= full["avg_jct_h"], (k, cut["avg_jct_h"], full["avg_jct_h"])
            assert cut["p95_jct_h"] >= full["p95_jct_h"], k
    assert late >= 1  # the instance has cuts past the longest JCT


def test_a_stock_time_limit_cut_reports_the_metrics(tiny_cluster, make_job, make_workload):
    """gym.make(..., max_episode_steps=50): the step TimeLimit truncates carries the cut's metrics."""
    import gymnasium as gym

    from frenzy_env.testing.checker import InvariantChecker

    gym.register(id="frenzy-test/TimeLimitTwoJobs-v0", entry_point="frenzy_env.env:FrenzyEnv",
                 kwargs={"cluster": tiny_cluster, "workload": make_workload(*_two_jobs(make_job)), **NO_COOLDOWN},
                 disable_env_checker=True)
    try:
        env = gym.make("frenzy-test/TimeLimitTwoJobs-v0", max_episode_steps=50)
        base = env.unwrapped
        checker = InvariantChecker(base)
        checker.on_reset(*env.reset(seed=0))
        steps, trunc, term = 0, False, False
        while not (trunc or term):
            action = thrash(base)
            checker.before_step(action)
            obs, reward, term, trunc, info = env.step(action)
            checker.after_step(action, obs, reward, term, trunc, info)
            steps += 1
            if steps < 50:
                assert "metrics" not in info
        assert (steps, term, trunc) == (50, False, True)
        m = info["metrics"]
        assert m.keys() >= TRUNCATION_KEYS and m["truncated"] == 1.0 and m["steps"] == 50
        now = base.sim.now
        assert m["unfinished"] == 2 and m["avg_jct_h"] == pytest.approx((4 * now - 10.0) / 2 / 3600.0, rel=1e-12)
        assert checker.episodes_checked == 1
    finally:
        gym.registry.pop("frenzy-test/TimeLimitTwoJobs-v0", None)
