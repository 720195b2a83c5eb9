"""Sia baseline: the integer program on hand-worked instances, and legal full episodes."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest

import frenzy_env  # noqa: F401  (registers the ids)
from baselines import POLICIES, make_policy
from baselines.sia import ZERO_ALLOC_GOODPUT, SiaPolicy, SiaSrptPolicy, solve_sia_milp
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.world.cluster import ClusterSpec

# Two jobs, one GPU type, configurations of 1, 2 and 4 GPUs; goodput normalised per job (row minimum 1).
GOODPUT = np.array([[1.0, 1.8, 3.0], [1.0, 1.9, 3.5]])
COUNTS = np.array([1, 2, 4])
TYPES = np.array([0, 0, 0])


def test_milp_hand_worked_two_jobs():
    # p = -0.5, utilities g**-0.5: job A 1, .745, .577; job B 1, .725, .535; no allocation costs 1e-4**-0.5 = 100.
    # 4 GPUs: A2+B2 = 1.470 beats A1+B2 = 1.725, A2+B1 = 1.745, A1+B1 = 2, and a single job on 4 GPUs (100.5).
    assert solve_sia_milp(GOODPUT, COUNTS, TYPES, np.array([4])).tolist() == [1, 1]
    # 3 GPUs: A1+B2 = 1.725 beats A2+B1 = 1.745 and A1+B1 = 2.
    assert solve_sia_milp(GOODPUT, COUNTS, TYPES, np.array([3])).tolist() == [0, 1]
    # 1 GPU: only one job can run; B's 1-GPU utility equals A's, so either, but exactly one.
    one = solve_sia_milp(GOODPUT, COUNTS, TYPES, np.array([1]))
    assert sorted(one.tolist()) == [-1, 0]
    # 8 GPUs: both jobs on 4 GPUs (0.577 + 0.535).
    assert solve_sia_milp(GOODPUT, COUNTS, TYPES, np.array([8])).tolist() == [2, 2]


def test_milp_positive_p_maximises():
    # p = 0.5, utilities g**0.5: A 1, 1.342, 1.732; B 1, 1.378, 1.871. 4 GPUs: A2+B2 = 2.72 is the maximum
    # (A1+B2 = 2.378, B4 alone = 1.871).
    assert solve_sia_milp(GOODPUT, COUNTS, TYPES, np.array([4]), p=0.5).tolist() == [1, 1]


def _brute_force(good, counts, types, cap, p):
    n, c = good.shape
    best, best_val = None, np.inf
    opts = [[-1] + [k for k in range(c) if good[j, k] > 0] for j in range(n)]
    for combo in itertools.product(*opts):
        used = np.zeros(len(cap))
        for k in combo:
            if k >= 0:
                used[types[k]] += counts[k]
        if (used > cap).any():
            continue
        val = sum(good[j, k] ** p if k >= 0 else ZERO_ALLOC_GOODPUT**p for j, k in enumerate(combo))
        if val < best_val - 1e-9:
            best, best_val = combo, val
    return best, best_val


@pytest.mark.parametrize("seed", range(6))
def test_milp_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    good = rng.uniform(1.0, 4.0, size=(3, 6)) * (rng.random((3, 6)) < 0.8)
    counts = np.array([1, 2, 4, 1, 2, 4])
    types = np.array([0, 0, 0, 1, 1, 1])
    cap = np.array([4, 3])
    choice = solve_sia_milp(good, counts, types, cap)
    used = np.zeros(2)
    for k in choice:
        if k >= 0:
            used[types[k]] += counts[k]
    assert (used <= cap).all()  # capacity; at most one configuration per job by construction of the output
    val = sum(good[j, k] ** -0.5 if k >= 0 else ZERO_ALLOC_GOODPUT**-0.5 for j, k in enumerate(choice))
    _, best = _brute_force(good, counts, types, cap, -0.5)
    assert val == pytest.approx(best, rel=1e-6)


def test_milp_pinned_and_must_allocate():
    # job A pinned to 1 GPU, job B must run: with 4 GPUs, B takes 2 (A1+B2 beats A1+B1; A1+B4 does not fit).
    got = solve_sia_milp(GOODPUT, COUNTS, TYPES, np.array([4]), pinned=np.array([0, -1]),
                         must_allocate=np.array([True, True]))
    assert got.tolist() == [0, 1]


def _check_legal_episode(env, policy, seed=0):
    obs, info = env.reset(seed=seed)
    policy.reset()
    base = env.unwrapped
    done = False
    steps = 0
    while not done:
        mask = base.action_masks()
        action, _ = policy.predict(obs, action_masks=mask)
        assert mask[int(action)], "Sia chose an illegal action"
        obs, _, term, trunc, info = env.step(int(action))
        base.sim.check_invariants()
        done = term or trunc
        steps += 1
        assert steps < 20_000
    return info["metrics"]


def test_sia_plays_a_legal_episode():
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    policy = SiaPolicy(env)
    m = _check_legal_episode(env, policy)
    assert m["finished"] + m["rejected"] == m["jobs"]
    assert m["invalid_actions"] == 0
    assert policy.rounds > 0


def test_sia_partial_node_allocations_stay_on_one_node():
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    policy = SiaPolicy(env)
    obs, _ = env.reset(seed=1)
    policy.reset()
    base = env.unwrapped
    sim = base.sim
    seen = 0
    for _ in range(1000):  # the first part of an episode (a round every 60 s: ~7 h before the first partial node)
        action, _ = policy.predict(obs, action_masks=base.action_masks())
        obs, _, term, trunc, _ = env.step(int(action))
        for run in sim.running.values():
            per_node = int(sim.max_node_gpus[sim.plan_type[run.plan]])
            if sim.plan_count[run.plan] < per_node:
                assert np.count_nonzero(run.counts) == 1
                seen += 1
        if term or trunc:
            break
    assert seen > 0  # the check above did run


def test_sia_requested_only_keeps_requested_counts():
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    policy = SiaPolicy(env, requested_only=True)
    result = run_episode(env, policy, seed=0)
    sim = env.unwrapped.sim
    levels = sim.plan_counts_levels
    for job, row in zip(sim.jobs, result.jobs.itertuples()):
        if row.num_gpus and job.requested_gpus:
            assert row.num_gpus == int(levels[levels <= job.requested_gpus].max())


def test_sia_registered_and_validates():
    assert POLICIES["sia"] is SiaPolicy
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    assert isinstance(make_policy("sia", env, p=-1.0), SiaPolicy)
    with pytest.raises(ConfigError):
        SiaPolicy(env, round_s=0)
    with pytest.raises(ConfigError):
        SiaPolicy(env, p=0)


# ------------------------------------------------------------------------------------------ sia_srpt
A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")


def test_sia_srpt_maximises_summed_completion_rates(make_job, make_env):
    """Two jobs queued at t = 0 on one 8-GPU node, one ten times longer: the round's choice is the pair of
    configurations (or none) that fits and has the largest sum of 1 / (remaining iterations * iter_time),
    found here by enumeration; the short job gets at least as many GPUs as the long one. Sia's own objective
    (no job length) splits the node evenly between the two identical models instead."""
    env = make_env(A100_1x8, [make_job(0, 0.0, 2e5), make_job(1, 0.0, 2e4)], queue_slots="all",
                   running_slots="all")
    env.reset(seed=0)
    policy = make_policy("sia_srpt", env)
    policy.reset()
    view = env.view
    jobs = np.array([0, 1])
    cand = policy.candidates(jobs)
    rates = policy.completion_rates(jobs, cand)
    work = view.work_estimate[jobs]
    expect = np.where(cand, 1.0 / (work[:, None] * view.iter_time[jobs]), 0.0)
    np.testing.assert_allclose(rates, expect, rtol=1e-12)  # nothing done yet, nothing running
    best, best_val = None, -1.0
    for a, b in itertools.product([-1, *np.flatnonzero(cand[0])], [-1, *np.flatnonzero(cand[1])]):
        used = sum(int(view.plan_count[k]) for k in (a, b) if k >= 0)
        val = sum(rates[j, k] for j, k in enumerate((a, b)) if k >= 0)
        if used <= 8 and val > best_val + 1e-15:
            best, best_val = (a, b), val
    steps = policy.plan_round()
    chosen = {job: plan for _, job, plan in steps}
    assert (chosen.get(0, -1), chosen.get(1, -1)) == best
    assert view.plan_count[chosen[1]] >= (view.plan_count[chosen[0]] if 0 in chosen else 0)
    sia = make_policy("sia", env)
    sia.reset()
    even = {job: int(view.plan_count[plan]) for _, job, plan in sia.plan_round()}
    assert even == {0: 4, 1: 4}


def test_sia_srpt_charges_a_restart_to_a_running_job_that_moves(make_job, make_env):
    """A running job's rate on its own configuration is 1 / (remaining * iter_time); on any other it also pays
    the simulator's restart seconds on its current configuration (the cost Sia's restart factor uses); its
    remaining work counts its progress up to now."""
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e7), make_job(1, 3600.0, 1e4)], queue_slots="all",
                   running_slots="all")
    env.reset(seed=0)
    policy = make_policy("sia_srpt", env)
    policy.reset()
    env.step(policy.act(env.action_masks()))
    view = env.view
    while view.now < 3600.0:  # wait for job 1's arrival: job 0 has made progress since its start-up
        env.step(0)
    run = view.running[0]
    assert view.now > run.progress_from
    jobs = np.array([0])
    cand = policy.candidates(jobs)
    cand[0, run.plan] = True
    done = run.done_base + (view.now - run.progress_from) * run.rate
    remaining = view.work_estimate[0] - done
    assert 0 < remaining < view.work_estimate[0]
    assert policy.remaining_estimate(jobs)[0] == pytest.approx(remaining, rel=1e-12)
    rates = policy.completion_rates(jobs, cand)[0]
    for k in np.flatnonzero(cand[0]):
        secs = remaining * view.iter_time[0, k] + (0.0 if k == run.plan else view.restart_seconds(0, run.plan))
        assert rates[k] == pytest.approx(1.0 / secs, rel=1e-9)


def test_sia_srpt_plays_a_legal_episode_and_validates():
    assert POLICIES["sia_srpt"] is SiaSrptPolicy
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    policy = make_policy("sia_srpt", env)
    assert policy.objective == "completion" and policy.name == "sia_srpt"
    m = _check_legal_episode(env, policy)
    assert m["finished"] + m["rejected"] == m["jobs"] and m["invalid_actions"] == 0
    with pytest.raises(ConfigError, match="objective"):
        SiaPolicy(env, objective="jct")


def _shared_node_at_arrival(make_job, make_env, margin):
    """Job 0 (1e5 iterations) runs alone on the 8-GPU node; at 3,600 s job 1 (1e5) arrives and the round
    decides whether job 0 shrinks to let it in."""
    env = make_env(A100_1x8, [make_job(0, 0.0, 1e5), make_job(1, 3600.0, 1e5)], queue_slots="all",
                   running_slots="all")
    env.reset(seed=0)
    policy = make_policy("sia_srpt", env, move_margin=margin)
    policy.reset()
    env.step(policy.act(env.action_masks()))
    while env.view.now < 3600.0:
        env.step(0)
    assert 0 in env.view.running
    return env, policy


def _program_seen(env, policy, monkeypatch):
    """Plan one round of :func:`_shared_node_at_arrival`'s state, recording what the integer program is given:
    ``({"good": values, "p": exponent}, jobs, candidates)`` with the running job's own plan a candidate."""
    import baselines.sia as sia_mod

    seen = {}
    solve = sia_mod.solve_sia_milp

    def recording_solve(good, *args, **kwargs):
        seen["good"], seen["p"] = good.copy(), kwargs["p"]
        return solve(good, *args, **kwargs)

    monkeypatch.setattr(sia_mod, "solve_sia_milp", recording_solve)
    policy.plan_round()
    jobs = np.array([0, 1])
    cand = policy.candidates(jobs)
    cand[0, env.view.running[0].plan] = True
    return seen, jobs, cand


@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_sia_srpt_move_margin_discounts_a_running_jobs_other_configurations(make_job, make_env, monkeypatch, margin):
    """With ``move_margin`` m the integer program sees a running job's configurations other than its own at
    1 / (1 + m) of their completion rate; its own configuration and queued jobs' rates are unchanged."""

    env, policy = _shared_node_at_arrival(make_job, make_env, margin)
    seen, jobs, cand = _program_seen(env, policy, monkeypatch)
    run = env.view.running[0]
    expect = policy.completion_rates(jobs, cand)
    expect[0, np.arange(expect.shape[1]) != run.plan] /= 1.0 + margin
    np.testing.assert_allclose(seen["good"], expect, rtol=1e-12)


def test_sia_srpt_move_margin_keeps_a_running_job_in_place(make_job, make_env):
    """Without a margin job 0 shrinks so that job 1 starts (two jobs finish faster than one after the other
    by the summed-rate objective); with a huge one its other configurations count nothing and it stays."""
    env, policy = _shared_node_at_arrival(make_job, make_env, 0.0)
    steps = policy.plan_round()
    assert {(kind, job) for kind, job, _ in steps} == {("resize", 0), ("start", 1)}
    env, policy = _shared_node_at_arrival(make_job, make_env, 1e6)
    assert policy.plan_round() == []


def test_move_margin_validates():
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    for bad in (-0.1, float("nan"), "0.2"):
        with pytest.raises(ConfigError, match="move_margin"):
            SiaPolicy(env, move_margin=bad)


def test_rate_and_efficiency_powers_validate():
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    for bad in (0, -1.0, float("inf"), "2"):
        with pytest.raises(ConfigError, match="rate_power"):
            SiaPolicy(env, objective="completion", rate_power=bad)
    for bad in (-0.5, float("nan"), None):
        with pytest.raises(ConfigError, match="efficiency_power"):
            SiaPolicy(env, objective="completion", efficiency_power=bad)
    with pytest.raises(ConfigError, match="objective='completion' only, got objective='goodput'"):
        SiaPolicy(env, rate_power=2.0)


def test_plan_efficiency_by_hand(make_job, make_env):
    """Each candidate's efficiency is the job's fewest GPU-seconds per iteration over its candidates divided by
    the candidate's own: computed here from the view's iteration times and plan counts."""
    env, policy = _shared_node_at_arrival(make_job, make_env, 0.0)
    jobs = np.array([0, 1])
    cand = policy.candidates(jobs)
    eff = policy.plan_efficiency(jobs, cand)
    view = env.view
    for row, j in enumerate(jobs.tolist()):
        plans = np.flatnonzero(cand[row])
        gpu_s = {int(k): float(view.iter_time[j, k]) * int(view.plan_count[k]) for k in plans}
        best = min(gpu_s.values())
        for k in range(cand.shape[1]):
            assert eff[row, k] == pytest.approx(best / gpu_s[k] if k in gpu_s else 0.0, rel=1e-12)
        assert eff[row, plans].max() == pytest.approx(1.0)
    assert ((eff > 0) == cand).all()


def test_powers_reweight_what_the_program_sees(make_job, make_env, monkeypatch):
    """With rate power q and efficiency power e the program maximises (rate * efficiency ** (e / q)) ** q,
    normalised so the largest value is 1: it sees ``rate ** q * efficiency ** e`` up to a constant."""
    env, policy = _shared_node_at_arrival(make_job, make_env, 0.0)
    policy.rate_power, policy.efficiency_power = 0.5, 2.0
    seen, jobs, cand = _program_seen(env, policy, monkeypatch)
    value = policy.completion_rates(jobs, cand) ** 0.5 * policy.plan_efficiency(jobs, cand) ** 2.0
    assert seen["p"] == 0.5
    assert seen["good"].max() == pytest.approx(1.0)
    np.testing.assert_allclose(seen["good"] ** 0.5, value / value.max(), rtol=1e-9)


def test_efficiency_power_trades_a_lone_jobs_speed_for_gpus(make_job, make_env):
    """One job on an idle 8-GPU node: the completion rate alone takes its fastest plan; a large efficiency
    power takes its most GPU-efficient one (fewer GPUs)."""
    def first_start(**kwargs):
        env = make_env(A100_1x8, [make_job(0, 0.0, 1e5)], queue_slots="all", running_slots="all")
        env.reset(seed=0)
        policy = make_policy("sia_srpt", env, **kwargs)
        policy.reset()
        steps = policy.plan_round()
        assert [kind for kind, *_ in steps] == ["start"]
        return env, int(steps[0][2])

    env, fast = first_start()
    view, j = env.view, 0
    cand = np.flatnonzero(view.available_plans(np.array([0]))[0])
    assert view.iter_time[j, fast] == pytest.approx(view.iter_time[j, cand].min())
    env, lean = first_start(efficiency_power=50.0)
    view = env.view
    gpu_s = view.iter_time[j, cand] * view.plan_count[cand]
    assert lean == int(cand[np.argmin(gpu_s)])
    assert view.plan_count[lean] < view.plan_count[fast]


def test_move_cooldown_pins_a_job_that_moved_recently(make_job, make_env):
    """Job 0 has held its configuration for 3,600 s when job 1 arrives: a cooldown shorter than that lets the
    plan shrink it (and start job 1), a longer one pins it, so nothing can change."""
    env, policy = _shared_node_at_arrival(make_job, make_env, 0.0)
    run = env.view.running[0]
    held = env.view.now - run.held_since
    per_restart = env.view.restart_seconds(0, run.plan)
    assert held > 0 and per_restart > 0
    policy.move_cooldown = 0.5 * held / per_restart
    assert {(kind, job) for kind, job, _ in policy.plan_round()} == {("resize", 0), ("start", 1)}
    policy.move_cooldown = 2.0 * held / per_restart
    assert policy.plan_round() == []
    env2 = gym.make("frenzy/HeteroClusterSmall-v5")
    for bad in (-1.0, float("inf"), "1"):
        with pytest.raises(ConfigError, match="move_cooldown"):
            SiaPolicy(env2, move_cooldown=bad)


def test_lookahead_oracle_validates():
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    for bad in (-1.0, float("inf"), "60"):
        with pytest.raises(ConfigError, match="lookahead_s"):
            make_policy("sia_srpt", env, lookahead_s=bad)
    with pytest.raises(ConfigError, match="lookahead_s"):
        make_policy("sia", env, lookahead_s=60.0)


@pytest.mark.parametrize("horizon, weight", [(7200.0, 0.5), (1800.0, None)])
def test_lookahead_oracle_reserves_gpus_for_an_arrival_within_its_horizon(make_job, make_env, monkeypatch, horizon,
                                                                          weight):
    """At t = 0 job 0 is queued and job 1 arrives at 3,600 s. With a 7,200 s horizon the program sees job 1 too,
    its completion rates weighted by 1 - 3600 / 7200 = 0.5; it holds GPUs for job 1 (job 0 starts on fewer than
    the 8 plain ``sia_srpt`` gives it) and no step touches job 1. With a 1,800 s horizon job 1 is not in the
    program."""
    import baselines.sia as sia_mod

    env = make_env(A100_1x8, [make_job(0, 0.0, 1e5), make_job(1, 3600.0, 1e5)], queue_slots="all",
                   running_slots="all")
    env.reset(seed=0)
    policy = make_policy("sia_srpt", env, lookahead_s=horizon)
    seen = {}
    solve = sia_mod.solve_sia_milp

    def recording_solve(good, *args, **kwargs):
        seen["good"] = good.copy()
        seen["choice"] = solve(good, *args, **kwargs)
        return seen["choice"]

    monkeypatch.setattr(sia_mod, "solve_sia_milp", recording_solve)
    steps = policy.plan_round()
    if weight is None:
        assert seen["good"].shape[0] == 1
        return
    jobs = np.array([0, 1])
    expect = policy.completion_rates(jobs, policy.candidates(jobs))
    expect[1] *= weight
    np.testing.assert_allclose(seen["good"], expect, rtol=1e-12)
    c0, c1 = seen["choice"]
    counts = env.view.plan_count
    assert steps == [("start", 0, int(c0))] and c1 >= 0 and counts[c0] + counts[c1] <= 8  # 4 GPUs held for job 1
    monkeypatch.undo()
    (kind, job, plan), = make_policy("sia_srpt", env).plan_round()  # without the oracle: all 8 GPUs to job 0
    assert (kind, job, int(counts[plan])) == ("start", 0, 8) and counts[c0] < 8


def test_type_power_validates_and_weights_jobs_by_their_gpu_types(monkeypatch):
    """``type_power`` t: the program sees each job's completion rates times ``k ** -t``, ``k`` the number of GPU
    types with a plan the predictor admits for it (counted here by hand from the view)."""
    with warnings.catch_warnings():  # env v4's world: its synthetic jobs include models one GPU type holds
        warnings.simplefilter("ignore")  # (in v5's every synthetic job of this preset fits all three types)
        env = gym.make("frenzy/HeteroClusterSmall-v4")
    for bad in (-1.0, float("nan"), "1"):
        with pytest.raises(ConfigError, match="type_power"):
            SiaPolicy(env, objective="completion", type_power=bad)
    with pytest.raises(ConfigError, match="objective='completion' only, got objective='goodput'"):
        SiaPolicy(env, type_power=1.0)
    env.reset(seed=1)
    raw = env.unwrapped
    policy = make_policy("sia_srpt", env, type_power=2.0)
    policy.reset()
    view = raw.view
    jobs = np.arange(view.num_jobs)
    by_hand = np.array([max(len({int(view.plan_type[k]) for k in np.flatnonzero(view.pred_ok[j])}), 1)
                        for j in jobs.tolist()], dtype=float)
    assert (policy.type_counts(jobs) == by_hand).all()
    assert by_hand.min() == 1 and by_hand.max() > 1  # the small preset has jobs bound to one type and others not
    import baselines.sia as sia_mod

    seen = {}
    solve = sia_mod.solve_sia_milp

    def recording_solve(good, *args, **kwargs):
        seen.setdefault("good", good.copy())
        return solve(good, *args, **kwargs)

    monkeypatch.setattr(sia_mod, "solve_sia_milp", recording_solve)
    while len(raw.visible_queue) == 0:  # nothing runs yet: the program sees the queued jobs only
        raw.step(0)
    queued = np.asarray(raw.visible_queue, dtype=np.int64)
    assert by_hand[queued].max() > 1  # the weights differ from sia_srpt's here
    policy.plan_round()
    want = policy.completion_rates(queued, policy.candidates(queued)) * by_hand[queued][:, None] ** -2.0
    np.testing.assert_allclose(seen["good"], want, rtol=1e-12)


def _random_programs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for it in range(n):
        jobs, n_types = int(rng.integers(1, 7)), int(rng.integers(1, 3))
        counts, types = np.tile([1, 2, 4, 8], n_types), np.repeat(np.arange(n_types), 4)
        good = rng.uniform(1, 4, (jobs, 4 * n_types)) * (rng.random((jobs, 4 * n_types)) < 0.6)
        if it % 3 == 0:  # ties
            good = np.round(good, 1)
        p = -0.5 if it % 2 else 1.0
        if p > 0:  # completion rates are small numbers
            good = good * 1e-4
        capacity = rng.integers(1, 20, n_types).astype(float)
        must = rng.random(jobs) < 0.4
        pinned = np.where(rng.random(jobs) < 0.2, rng.integers(0, 4 * n_types, jobs), -1)
        yield good, counts, types, capacity, dict(p=p, must_allocate=must, pinned=pinned)


def test_fast_solver_matches_milp_on_random_programs():
    # solve_sia_milp(fast=True) (the separable shortcut, else HiGHS called directly) chooses what scipy's milp does
    for good, counts, types, capacity, kw in _random_programs(400):
        fast = solve_sia_milp(good, counts, types, capacity, **kw)
        slow = solve_sia_milp(good, counts, types, capacity, fast=False, **kw)
        assert fast.tolist() == slow.tolist()


def test_separable_shortcut_only_when_unique_and_fitting():
    from baselines.sia import _separable_optimum

    good = np.array([[1.0, 1.8, 3.0], [1.0, 1.9, 3.5]])
    rows, cols = np.nonzero(good > 0)
    c = good[rows, cols] ** -0.5 - ZERO_ALLOC_GOODPUT**-0.5
    must = np.zeros(2, dtype=bool)
    # 8 GPUs hold both jobs' best (4 + 4): the shortcut answers
    assert _separable_optimum(c, rows, cols, 2, COUNTS, TYPES, np.array([8.0]), must, None).tolist() == [2, 2]
    # 4 GPUs do not: HiGHS decides
    assert _separable_optimum(c, rows, cols, 2, COUNTS, TYPES, np.array([4.0]), must, None) is None
    # a tie in a job's best: HiGHS decides
    tied = np.array([[1.0, 3.0, 3.0], [1.0, 1.9, 3.5]])
    rows, cols = np.nonzero(tied > 0)
    c = tied[rows, cols] ** -0.5 - ZERO_ALLOC_GOODPUT**-0.5
    assert _separable_optimum(c, rows, cols, 2, COUNTS, TYPES, np.array([8.0]), must, None) is None


@pytest.mark.parametrize("name,kwargs", [("sia", {}), ("sia", {"requested_only": True}), ("sia_srpt", {})])
def test_fast_solver_same_schedule_in_an_episode(monkeypatch, name, kwargs):
    # every round of a short episode: the fast path's choice equals scipy milp's on the same program, so the
    # actions (and the schedule) are the slow solver's
    import baselines.sia as sia_mod

    orig, rounds = sia_mod.solve_sia_milp, []

    def both(*args, **kw):
        fast = orig(*args, **kw)
        slow = orig(*args, fast=False, **kw)
        assert fast.tolist() == slow.tolist()
        rounds.append(1)
        return fast

    monkeypatch.setattr(sia_mod, "solve_sia_milp", both)
    env = gym.make("frenzy/HeteroCluster-v5", workload="synthetic-small")
    run_episode(env, make_policy(name, env, **kwargs), seed=1, max_steps=300)
    assert len(rounds) > 20


def test_requested_only_falls_back_to_the_smallest_admitted_count(make_job, make_env, tiny_cluster):
    """A 7B model cannot hold its optimizer states on the one A100 it requests: with no plan at its request,
    requested-count Sia gives it the smallest count that has one (2 GPUs here, as ``fifo`` does) instead of
    leaving it without a configuration; a job whose request fits keeps its request."""
    jobs = [make_job(0, model="llama-7b", requested_gpus=1), make_job(1, requested_gpus=2)]
    env = make_env(tiny_cluster, jobs, queue_slots="all", running_slots="all")
    env.reset(seed=0)
    policy = SiaPolicy(env, requested_only=True)
    policy.reset()
    view = policy.view
    avail = view.available_plans(np.array([0, 1]))
    assert not avail[0][view.plan_count == 1].any() and avail[0][view.plan_count == 2].any()
    cand = policy.candidates(np.array([0, 1]))
    assert set(view.plan_count[cand[0]].tolist()) == {2}  # the smallest admitted count, not nothing
    assert set(view.plan_count[cand[1]].tolist()) == {2}  # its request
    fifo = make_policy("fifo", env)
    assert set(view.plan_count[fifo.requested_plans(0)].tolist()) == {2}  # the same rule as fifo's
    result = run_episode(env, policy, seed=0)
    assert result.metrics["finished"] == 2
