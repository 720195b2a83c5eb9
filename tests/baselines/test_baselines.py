"""Scripted baselines: tiny hand-computed instances, registry, and full episodes through run_episode."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import POLICIES, make_policy
from baselines.asrpt import AsrptPolicy, IterationForest
from baselines.doubling import DoublingPolicy, greedy_allocation
from baselines.frenzy import FrenzyPolicy
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.world.cluster import ClusterSpec
from tests.episodes import play_episode as _play
from tests.episodes import play_out

A100_3x8 = ClusterSpec.from_counts("t3", {"A100-80GB": (3, 8)}, reference_gpu_type="A100-80GB")
A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
FLAT = {"checkpoint_bandwidth": math.inf, "load_bandwidth": math.inf}  # the flat start-up of env v2


# ----------------------------------------------------------------------------------------------- registry
def test_registry_and_keywords():
    assert {"frenzy", "asrpt", "doubling", "fifo", "fifo_strict", "sjf", "sjf_greedy", "srpt_est", "random"} <= set(
        POLICIES
    )
    env = FrenzyEnv(workload="synthetic-small")
    assert isinstance(make_policy("frenzy", env, ranking="min_est_time", predictor="frenzy"), FrenzyPolicy)
    p = make_policy("asrpt", env, comm_heavy=1.5, tau=2.0, predictor="perfect", backfill=False)
    assert isinstance(p, AsrptPolicy) and p.oracle
    for s in ("precompute", "exploratory", "eight", "unit_step"):
        assert make_policy("doubling", env, strategy=s).strategy == s
    with pytest.raises(UnknownNameError, match="ranking"):
        make_policy("frenzy", env, ranking="fastest")
    with pytest.raises(UnknownNameError, match="strategy"):
        make_policy("doubling", env, strategy="tripling")
    with pytest.raises(UnknownNameError, match="predictor"):
        make_policy("asrpt", env, predictor="psychic")
    with pytest.raises(ConfigError, match="bad keyword"):
        make_policy("frenzy", env, rankin="min_gpus")
    with pytest.raises(ConfigError, match="tau"):
        make_policy("asrpt", env, tau=-1)


# ----------------------------------------------------------------------------------------------- Frenzy
def test_frenzy_picks_tightest_node(make_job, make_env):
    # setup through the env's own actions: j0 8 GPUs -> node 0, j1 8 -> node 1, j2 4 -> node 2 (free 4);
    # j0 is short and finishes at ~30 s, so node 0 is empty again when j3 (1 GPU) arrives at t=1000.
    jobs = [make_job(0, 0, 1), make_job(1, 0, 1e6), make_job(2, 0, 1e6), make_job(3, 1000, 1e6)]
    env = make_env(A100_3x8, jobs)
    env.reset(seed=0)
    sim = env.sim
    for j, n in ((0, 8), (1, 8), (2, 4)):
        env.step(env.start_action(j, sim.plan_index("A100-80GB", n)))
    assert sim.running[1].counts.tolist() == [0, 8, 0] and sim.running[2].counts.tolist() == [0, 0, 4]
    while sim.now < 1000:
        env.step(0)
    assert sim.state.free.tolist() == [8, 0, 4] and 3 in sim.queue
    policy = FrenzyPolicy(env)
    action, _ = policy.predict(None, action_masks=env.action_masks())
    assert int(action) == env.start_action(3, sim.plan_index("A100-80GB", 1))  # min_gpus: 1 GPU fits
    env.step(int(action))
    assert sim.running[3].counts.tolist() == [0, 0, 1]  # the tightest node (4 free), not the empty one
    assert sim.state.free.tolist() == [8, 0, 3]


def test_frenzy_ranking_chooses_gpu_type(make_job, make_env):
    cluster = ClusterSpec.from_counts("het", {"A100-80GB": (1, 8), "V100-32GB": (1, 8)}, reference_gpu_type="A100-80GB")
    env = make_env(cluster, [make_job(0, 0, 100)])
    env.reset(seed=0)
    sim = env.sim
    small = FrenzyPolicy(env, ranking="min_gpus").predict(None, action_masks=env.action_masks())[0]
    assert int(small) == env.start_action(0, sim.plan_index("V100-32GB", 1))  # smallest GPU that holds it
    default = FrenzyPolicy(env).predict(None, action_masks=env.action_masks())[0]  # min_gpus_fastest
    assert int(default) == env.start_action(0, sim.plan_index("A100-80GB", 1))  # fewest GPUs, the faster type
    fast = FrenzyPolicy(env, ranking="min_est_time").predict(None, action_masks=env.action_masks())[0]
    best = int(np.argmin(np.where(sim.pred_ok[0], sim.iter_time[0], np.inf)))
    assert int(fast) == env.start_action(0, best) and sim.plan_count[best] > 1


def test_frenzy_waits_when_nothing_fits_and_ends(make_job, make_env):
    jobs = [make_job(0, 0, 2e4), make_job(1, 0, 2e4), make_job(2, 0, 2e4)]
    env = make_env(A100_1x8, jobs)
    env.reset(seed=0)
    policy = FrenzyPolicy(env)
    mask = env.action_masks()
    mask[env.first_start : env.first_resize] = False  # no start can be placed now
    assert policy.act(mask) < env.first_start  # the job waits (nothing is pending: a timed wait)
    info = _play(env, policy, max_steps=200)
    assert info["metrics"]["finished"] == 3 and info["metrics"]["invalid_actions"] == 0
    assert info["metrics"]["restarts"] == 0  # no preemption, no resizing


# ----------------------------------------------------------------------------------------------- A-SRPT
def test_asrpt_three_job_order_and_start_times(make_job, make_env):
    """Virtual works (G = g = 8 GPUs, perfect prediction): A=100 s at t=0, B=95 s at t=10, C=50 s at t=20.

    Virtual SRPT: A runs 0-20 (B's 95 > A's 90 left at t=10); C (50) preempts A (80 left) at 20 and completes
    at 70; A completes at 150; B at 245. Release order C, A, B, each at its virtual completion (the default
    timer release). Real (startup 30 s flat: infinite bandwidths, no model-size part; run = virtual work, each job
    on all 8 GPUs): C starts 70, ends 150; A starts 150, ends 280; B (released at 245) starts when A is done,
    280, ends 405.
    """
    probe = make_env(A100_1x8, [make_job(0, 0, 1, requested_gpus=8)])
    alpha = float(probe.sim.iter_time[0, probe.sim.plan_index("A100-80GB", 8)])
    works = {"A": 100.0, "B": 95.0, "C": 50.0}
    jobs = [make_job(i, t, works[k] / alpha, requested_gpus=8) for i, (t, k) in enumerate(zip((0, 10, 20), "ABC"))]
    env = make_env(A100_1x8, jobs, **FLAT)
    policy = make_policy("asrpt", env, predictor="perfect")
    info = _play(env, policy)
    assert info["metrics"]["finished"] == 3
    assert policy.release_seq.tolist() == [1, 2, 0]  # C first, then A, then B
    np.testing.assert_allclose(policy.release_time, [150.0, 245.0, 70.0])
    rec = env.sim.records
    np.testing.assert_allclose([rec[2].start_time, rec[0].start_time, rec[1].start_time], [70, 150, 280], atol=1e-6)
    np.testing.assert_allclose([rec[2].finish_time, rec[0].finish_time, rec[1].finish_time], [150, 280, 405],
                               atol=1e-6)
    # lookahead (env v0's default): at t=20 nothing else can happen before the releases, so all three are
    # released then: C starts 20, ends 100; A starts 100, ends 230; B starts 230, ends 355
    env = make_env(A100_1x8, jobs, **FLAT)
    _play(env, make_policy("asrpt", env, predictor="perfect", release="lookahead"))
    rec = env.sim.records
    np.testing.assert_allclose([rec[2].start_time, rec[0].start_time, rec[1].start_time], [20, 100, 230], atol=1e-6)


def test_asrpt_strict_order_blocks_and_backfill_does_not(make_job, make_env):
    # j0 (4 GPUs, ~1500 s; virtual work (4/8) x 1500 = 750 s) is released and starts at 750 s (alone until
    # t=1000). j1 (8 GPUs, tiny) arrives at 1000 and heads the pending queue but cannot start before j0 ends; j2
    # (1 GPU) arrives at 1010 behind it.
    probe = make_env(A100_1x8, [make_job(0, 0, 1, requested_gpus=4)])
    alpha4 = float(probe.sim.iter_time[0, probe.sim.plan_index("A100-80GB", 4)])
    jobs = [make_job(0, 0, 1500 / alpha4, requested_gpus=4), make_job(1, 1000, 1.0, requested_gpus=8),
            make_job(2, 1010, 100.0, requested_gpus=1)]
    for backfill in (False, True):
        env = make_env(A100_1x8, jobs)
        policy = make_policy("asrpt", env, predictor="perfect", backfill=backfill)
        info = _play(env, policy)
        rec = env.sim.records
        assert info["metrics"]["finished"] == 3 and rec[0].start_time == pytest.approx(750.0)
        assert policy.release_seq.tolist() == [0, 1, 2]
        if backfill:  # starts beside j0 at its release (its virtual completion) while j1 waits
            assert rec[2].start_time == pytest.approx(policy.release_time[2]) and 1010 < rec[2].start_time < 1020
        else:
            assert rec[1].start_time == pytest.approx(rec[0].finish_time)  # j1 when j0 is done
            assert rec[2].start_time >= rec[1].finish_time  # j2 strictly after j1


def test_asrpt_comm_heavy_waits_for_consolidation_until_tau(make_job, make_env):
    # 2 nodes x 8 V100 (G = 16). 4-GPU jobs jA (5,000 s), jB and jC (8,000 s) at 0 have virtual works 1,250,
    # 2,000 and 2,000 s: released (and started) at 1,250 (node 0), 3,250 (node 0, best fit) and 5,250 (node 1);
    # jA ends at 6,280, so from then on the free GPUs are 4 + 4. The heavy 8-GPU gpt2-large job arriving at
    # 7,000 finds only that spread placement.
    cluster = ClusterSpec.from_counts("v2", {"V100-32GB": (2, 8)}, reference_gpu_type="V100-32GB")
    probe = make_env(cluster, [make_job(0, 0, 1, requested_gpus=4)], efficiency="flat")
    alpha4 = float(probe.sim.iter_time[0, probe.sim.plan_index("V100-32GB", 4)])
    jobs = [make_job(0, 0, 5000 / alpha4, requested_gpus=4), make_job(1, 0, 8000 / alpha4, requested_gpus=4),
            make_job(2, 0, 8000 / alpha4, requested_gpus=4),
            make_job(3, 7000, 2e3, model="gpt2-large", requested_gpus=8)]
    # Across DGX-1V nodes (4 x EDR per node) the spread 4 + 4 placement costs gpt2-large ~1.25x its consolidated
    # iteration time (3.7x under a per-GPU share of the network), so the threshold is 1.2 here (under
    # efficiency="flat", env v4's speed: v5's micro-batch efficiency makes 1-sequence micro-batches compute longer).
    for tau in (0.0, 1e6):
        env = make_env(cluster, jobs, efficiency="flat")
        policy = make_policy("asrpt", env, predictor="perfect", tau=tau, comm_heavy=1.2)
        info = _play(env, policy)
        rec = env.sim.records
        assert policy.heavy[3] and not policy.heavy[1]
        assert info["metrics"]["finished"] == 4
        if tau == 0.0:  # no wait: starts at its release, spread over both nodes
            assert rec[3].start_time == pytest.approx(policy.release_time[3]) and rec[3].start_time > 7000
        else:  # waits for a consolidated node, i.e. until jB finishes
            assert rec[3].start_time == pytest.approx(min(rec[1].finish_time, rec[2].finish_time))


def test_iteration_forest_unseen_zero_then_learns(make_job):
    f = IterationForest()
    a, b = make_job(0, 0, 500, group=1), make_job(1, 0, 900, group=2)
    assert f.predict(a) == 0.0
    f.observe(a, 500.0)
    assert f.predict(make_job(2, 5, 1, group=1)) == pytest.approx(500.0)
    assert f.predict(b) == 0.0
    g = IterationForest(unseen="mean")
    g.observe(a, 500.0)
    g.observe(make_job(3, 0, 300, group=1), 300.0)
    assert g.predict(b) == pytest.approx(400.0)


# ----------------------------------------------------------------------------------------------- doubling
def test_greedy_doubling_two_jobs_by_hand():
    # f1(w) = w (linear), f2 = 1, 1.5, 1.8, 1.9 at 1, 2, 4, 8 GPUs; Q = 100 each; 8 GPUs.
    # admit both at 1 (6 free). gains per added GPU: J1 1->2: 50, J2 1->2: 33.3 -> J1=2 (5 free);
    # J2=2 (4 free); J1 2->4: 12.5 -> J1=4 (2 free); J2 2->4: 5.56 -> J2=4 (0 free); nothing else fits.
    speed = np.array([[1, 2, 4, 8], [1, 1.5, 1.8, 1.9]], dtype=float)
    sizes = np.array([1, 2, 4, 8])
    out = greedy_allocation(np.array([100.0, 100.0]), speed, sizes, np.zeros(2, dtype=int), np.array([8]))
    assert out.tolist() == [4, 4]
    # with 16 GPUs: J1 4->8 (3.125) fits, J2 4->8 (0.73) then fits too
    out = greedy_allocation(np.array([100.0, 100.0]), speed, sizes, np.zeros(2, dtype=int), np.array([16]))
    assert out.tolist() == [8, 8]
    # a size that does not fit in memory is skipped (2 GPUs infeasible for J2 -> its step is 1 -> 4)
    speed2 = speed.copy()
    speed2[1, 1] = 0.0
    out = greedy_allocation(np.array([100.0, 100.0]), speed2, sizes, np.zeros(2, dtype=int), np.array([7]))
    # 7 GPUs: both at 1 (5 free); J1 1->2 (50) -> 4 free; J2 1->4 gain 100*(1-1/1.8)/3 = 14.8 beats J1 2->4
    # (12.5) -> J2=4 (1 free); J1 2->4 needs 2: passed over; J2 4->8 needs 4: passed over.
    assert out.tolist() == [2, 4]


def test_unit_step_stops_where_the_hand_computation_says():
    # 1/f(w) = 1/w + 0.1 w: the +1 gain 1/(w(w+1)) - 0.1 is positive for w = 1, 2 and negative from 3.
    w = np.arange(1, 9, dtype=float)
    speed = 1.0 / (1.0 / w + 0.1 * w)
    one = greedy_allocation(np.array([1.0]), speed[None, :], np.arange(1, 9), np.zeros(1, dtype=int), np.array([8]))
    assert one.tolist() == [3]
    # two such jobs, 5 GPUs: both at 1 (3 free), equal gains -> earlier job first: J1=2, J2=2, J1=3, then full
    two = greedy_allocation(np.ones(2), np.stack([speed, speed]), np.arange(1, 9), np.zeros(2, dtype=int),
                            np.array([5]))
    assert two.tolist() == [3, 2]
    # the doubling on the same f goes to 4: 2->4 gains (0.7 - 0.65)/2 > 0, 4->8 loses
    levels = np.array([1, 2, 4, 8])
    dbl = greedy_allocation(np.array([1.0]), speed[None, levels - 1], levels, np.zeros(1, dtype=int), np.array([8]))
    assert dbl.tolist() == [4]


def test_doubling_policy_reaches_greedy_allocation_then_resizes_on_completion(make_job, make_env):
    jobs = [make_job(0, 0, 2e4), make_job(1, 0, 2e5)]
    env = make_env(A100_1x8, jobs, restart_overhead=10.0)
    env.reset(seed=0)
    sim = env.sim
    policy = DoublingPolicy(env)
    policy.reset()
    plans = [sim.plan_index("A100-80GB", n) for n in (1, 2, 4, 8)]
    speed = 1.0 / sim.iter_time[:, plans]
    expect = greedy_allocation(sim.work, speed, np.array([1, 2, 4, 8]), np.zeros(2, dtype=int), np.array([8]))
    started = {}
    while sim.now == 0.0:  # decisions at t = 0: both jobs start directly at their targets
        action = int(policy.predict(None, action_masks=env.action_masks())[0])
        assert env.first_start <= action < env.first_resize
        k, plan = divmod(action - env.first_start, env.num_plans)
        started[int(env.visible_queue[k])] = int(sim.plan_count[plan])
        env.step(action)
    assert [started[0], started[1]] == expect.tolist() and sum(expect) <= 8
    held = expect.tolist()
    info = play_out(env, policy)
    assert info["metrics"]["finished"] == 2
    # when job 0 finished, job 1 was recomputed alone and grew (one resize, restart overhead paid)
    assert sim.records[0].restarts == 0
    assert sim.records[1].restarts == 1 and sim.records[1].num_gpus > held[1]




@pytest.mark.parametrize("strategy", ["precompute", "exploratory", "eight", "unit_step"])
def test_doubling_strategies_finish(strategy):
    env = FrenzyEnv(workload="synthetic-small")
    info = _play(env, make_policy("doubling", env, strategy=strategy))
    m = info["metrics"]
    assert m["finished"] + m["rejected"] == m["jobs"] and m["invalid_actions"] == 0
    if strategy == "eight":
        assert m["restarts"] == 0


def test_exploratory_measures_then_fits(make_job, make_env):
    # decisions happen at events only: tiny jobs arriving every 20 s give the policy chances to move on
    tiny = [make_job(i, 10.0 + 20 * i, 1.0) for i in range(1, 31)]
    env = make_env(ClusterSpec.from_counts("t2", {"A100-80GB": (2, 8)}, reference_gpu_type="A100-80GB"),
               [make_job(0, 0, 3e4), *tiny])
    policy = make_policy("doubling", env, strategy="exploratory", explore_time=5.0)
    info = _play(env, policy)
    assert info["metrics"]["finished"] == 31
    assert 0 in policy.fitted  # measured at 1, 2, 4, 8 GPUs, then fitted by NNLS
    assert env.sim.records[0].restarts >= 3


# ----------------------------------------------------------------------------------------------- all
@pytest.mark.parametrize(
    "name", ["frenzy", "asrpt", "doubling", "fifo", "fifo_strict", "sjf", "sjf_greedy", "srpt_est"]
)
def test_every_baseline_runs_through_run_episode(name):
    env = FrenzyEnv(workload="synthetic-small", predictor="frenzy")  # the frenzy predictor causes OOMs
    result = run_episode(env, make_policy(name, env), seed=1)
    m = result.metrics
    assert m["finished"] + m["rejected"] == m["jobs"] == len(result.jobs)
    assert m["invalid_actions"] == 0
    env.sim.check_invariants()
    again = run_episode(env, make_policy(name, env), seed=1)  # deterministic
    assert again.metrics["avg_jct_h"] == m["avg_jct_h"]


# ------------------------------------------------------------------------------------ batched (VecEnv) input
@pytest.mark.parametrize("name", ["frenzy", "sia", "random"])
def test_sb3_contrib_evaluate_policy_runs_a_scripted_policy_on_a_vec_env_of_one(name):
    from sb3_contrib.common.maskable.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from frenzy_env.workload import make_generator

    env = Monitor(FrenzyEnv(workload=make_generator("synthetic-small", num_jobs=6)))
    policy = make_policy(name, env)
    rewards, lengths = evaluate_policy(
        policy, DummyVecEnv([lambda: env]), n_eval_episodes=2, use_masking=True, return_episode_rewards=True
    )
    assert len(rewards) == 2 and all(r < 0 for r in rewards) and all(n > 0 for n in lengths)
    assert env.unwrapped.episode_metrics()["invalid_actions"] == 0


def test_a_scripted_policy_keeps_the_batch_dimension_and_refuses_a_batch_of_several():
    env = FrenzyEnv(workload="synthetic-small")
    obs, _ = env.reset(seed=0)
    policy = make_policy("frenzy", env)
    single, _ = policy.predict(obs, action_masks=env.action_masks())
    assert single.shape == ()
    batched_obs = {k: v[None] for k, v in obs.items()}
    for masks in (env.action_masks()[None], None):  # the masks given, or read from the batched observation
        action, _ = policy.predict(batched_obs, action_masks=masks, episode_start=np.ones(1, dtype=bool))
        assert action.shape == (1,) and int(action[0]) == int(single)
    with pytest.raises(ValueError, match="batch of 2"):
        policy.predict({k: np.stack([v, v]) for k, v in obs.items()}, action_masks=np.stack([obs["action_mask"]] * 2))


def test_evaluate_policy_episodes_equal_fresh_ones_since_a_batched_episode_start_resets_the_policy():
    from sb3_contrib.common.maskable.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from frenzy_env.workload import make_generator

    workload = make_generator("synthetic-small", num_jobs=6)
    env = Monitor(FrenzyEnv(workload=workload))
    seeds: list[int] = []  # the workload seed of each episode evaluate_policy played

    def note(locals_: dict, _: dict) -> None:
        if not locals_["done"] and env.unwrapped.episode_seed not in seeds:
            seeds.append(env.unwrapped.episode_seed)

    rewards, _ = evaluate_policy(make_policy("sia", env), DummyVecEnv([lambda: env]), n_eval_episodes=3,
                                 use_masking=True, return_episode_rewards=True, callback=note)
    assert len(seeds) == 3
    for seed, reward in zip(seeds, rewards):
        fresh = FrenzyEnv(workload=workload)
        policy = make_policy("sia", fresh)
        fresh.reset(seed=seed)
        policy.reset()
        total, done = 0.0, False
        while not done:
            action, _ = policy.predict(None)
            _, r, terminated, truncated, _ = fresh.step(int(action))
            total, done = total + r, terminated or truncated
        assert reward == pytest.approx(total, abs=1e-5)


def test_asrpt_spread_ratio_uses_the_plans_pipeline_layout():
    """A-SRPT's communication ratio reads the simulator's spread iteration time, which keeps the plan's
    pipeline stages and micro-batch (found by the fuzzer: on the overloaded week a pipelined plan's dp = count
    / tp exceeded the batch and raised); the consolidated span gives back ``iter_time`` exactly."""
    env = FrenzyEnv(cluster="frenzy-testbed", workload="itp-overloaded")
    policy = make_policy("asrpt", env)
    obs, _ = env.reset(seed=539792114)
    policy.reset()
    for _ in range(400):
        action, _ = policy.predict(obs, action_masks=env.action_masks())
        obs, _, term, trunc, _ = env.step(int(action))
        if term or trunc:
            break
    sim = env.sim
    ok = np.argwhere(np.isfinite(sim.iter_time) & sim.pred_ok)
    piped = [(int(j), int(p)) for j, p in ok if sim._row_pp_l[sim._row_key_l[j]][p] > 1]
    assert piped, "the overloaded week has pipelined plans"
    for j, p in piped[:50]:
        assert sim.spread_iter_time(j, p, int(sim._plan_span_l[p])) == pytest.approx(float(sim.iter_time[j, p]))
