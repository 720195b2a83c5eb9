"""Property-based tests: random clusters, workloads and action sequences, legal and illegal.

After every step the independent :class:`frenzy_env.testing.checker.InvariantChecker` checks: no GPU booked
twice (the owner array agrees with every running job's allocation), free GPUs within [0, capacity], valid
status transitions, every job finished exactly once or rejected with a reason, time never going back, work
done never above work asked, illegal actions changing nothing, and at the end the episode metrics agreeing
with the per-job records. The env's mask is also recomputed here from the simulator's own masks, and on a
bare simulator every action's result must equal what its mask promised.
"""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frenzy_env.env import FrenzyEnv
from frenzy_env.simulator import QUEUED, ClusterSimulator, SimConfig
from frenzy_env.testing.checker import InvariantChecker, snapshot_changes
from frenzy_env.world.cluster import ClusterSpec, NodeSpec
from tests.strategies import ENV_OPTIONS, SIM_OPTIONS, clusters, workloads

# FRENZY_PROPERTY_EXAMPLES=2000 pytest tests/test_properties.py runs a longer hunt
PROPS = settings(
    max_examples=int(os.environ.get("FRENZY_PROPERTY_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# (kind, raw): "legal" picks raw % (number of legal actions); "any" raw % (n + 6) - 3 (mostly illegal);
# "huge" an action far out of range; "wait" action 0 (legal or not)
ACTIONS = st.lists(
    st.tuples(st.sampled_from(["legal", "legal", "legal", "any", "wait", "huge"]), st.integers(0, 2**20)),
    min_size=20,
    max_size=200,
)


def pick(kind: str, raw: int, mask: np.ndarray) -> int:
    if kind == "legal":
        legal = np.flatnonzero(mask)
        return int(legal[raw % legal.size]) if legal.size else 0
    if kind == "any":
        return raw % (mask.size + 6) - 3
    if kind == "huge":
        return mask.size + raw if raw % 2 else -1 - raw
    return 0


def expected_mask(env: FrenzyEnv) -> np.ndarray:
    """The mask rebuilt from the simulator's masks and the documented action layout."""
    sim = env.sim
    q, r, p = env.queue_slots, env.running_slots, env.num_plans
    w = len(env.wait_options)
    mask = np.zeros(1 + w + q * p + r * p, dtype=bool)
    mask[0] = sim.done or sim.has_pending_events()  # "wait" stays legal at the end
    mask[1 : 1 + w] = sim.has_pending_events() and not sim.done  # the timed waits
    queue = np.array(sim.queue[:q], dtype=np.int64)
    running = np.array(list(sim.running)[:r], dtype=np.int64)  # start order
    assert (queue == env.visible_queue).all() and (running == env.visible_running).all()
    if queue.size:
        mask[1 + w : 1 + w + queue.size * p] = sim.start_mask(queue).ravel()
    if running.size:
        lo = 1 + w + q * p
        mask[lo : lo + running.size * p] = sim.resize_mask(running).ravel()
    return mask


def play_checked(env: FrenzyEnv, seed: int, actions: list[tuple[str, int]]) -> InvariantChecker:
    """Play ``actions`` then drain the episode (wait first, else the first legal action), checking all."""
    checker = InvariantChecker(env, check_space=True)
    obs, info = env.reset(seed=seed)
    checker.on_reset(obs, info)

    def step(action: int) -> bool:
        assert (env.action_masks() == expected_mask(env)).all(), "env mask != simulator masks"
        checker.before_step(action)
        obs, reward, terminated, truncated, info = env.step(action)
        checker.after_step(action, obs, reward, terminated, truncated, info)
        return terminated or truncated

    for kind, raw in actions:
        if step(pick(kind, raw, env.action_masks())):
            return checker
    # drain: every wait processes at least one event, so the episode must end within a bounded number of steps
    bound = 20 * env.sim.num_jobs * (env.num_plans + 2) + 50
    for _ in range(bound):
        mask = env.action_masks()
        moves = np.flatnonzero(mask[env.first_start :])  # a start or resize when "wait" is not legal
        if step(0 if mask[0] else env.first_start + int(moves[0]) if moves.size else 1):
            return checker
    raise AssertionError(f"episode did not end within {bound} draining steps")


@PROPS
@given(
    cluster=clusters(),
    workload=workloads(),
    sim_options=SIM_OPTIONS,
    env_options=ENV_OPTIONS,
    seed=st.integers(0, 2**31 - 2),
    actions=ACTIONS,
)
def test_env_invariants_hold_after_every_step(cluster, workload, sim_options, env_options, seed, actions):
    env = FrenzyEnv(cluster=cluster, workload=workload, **sim_options, **env_options)
    checker = play_checked(env, seed, actions)
    assert checker.episodes_checked >= 1
    assert env.action_space.contains(0)


SIM_OPS = st.lists(
    st.tuples(
        st.sampled_from(["start", "start", "start", "resize", "preempt", "advance", "advance"]),
        st.integers(-2, 20),  # job index, out of range included
        st.integers(-2, 40),  # plan slot, out of range included
    ),
    min_size=20,
    max_size=200,
)


def preempt_allowed(sim: ClusterSimulator, job: int) -> bool:
    """The documented rules of :meth:`ClusterSimulator.preempt` for running ``job`` (its start-up is the env's
    rule, not the simulator's): the pacing rules (``resize_cooldown`` seconds since its last start or resize and,
    with ``one_action_per_instant``, no action on it at this instant) and no save of an earlier preemption under
    way (``stop_mode="save_first"``)."""
    cfg, last, now = sim.config, float(sim.last_action[job]), sim.now
    rested = last + (cfg.resize_cooldown or 0.0) <= now and (not cfg.one_action_per_instant or last < now)
    return bool(rested and not sim.saving_until[job] >= now)


@PROPS
@given(cluster=clusters(), workload=workloads(), sim_options=SIM_OPTIONS, seed=st.integers(0, 1000), ops=SIM_OPS)
def test_simulator_actions_do_exactly_what_the_masks_promise(cluster, workload, sim_options, seed, ops):
    sim = ClusterSimulator(cluster, workload, SimConfig(**sim_options), seed=seed)
    checker = InvariantChecker.for_simulator(sim)
    for op, job, plan in ops:
        valid_plan = 0 <= plan < sim.num_plans
        snapshot = checker.state_snapshot()
        if op == "start":
            queued = 0 <= job < sim.num_jobs and sim.status[job] == QUEUED
            expect = bool(queued and valid_plan and sim.start_mask(np.array([job]))[0, plan])
            result = sim.start(job, plan)
        elif op == "resize":
            expect = bool(job in sim.running and valid_plan and sim.resize_mask(np.array([job]))[0, plan])
            result = sim.resize(job, plan)
        elif op == "preempt":
            expect = job in sim.running and preempt_allowed(sim, job)
            result = sim.preempt(job)
        else:
            expect = sim.has_pending_events()
            dt = sim.advance()
            assert dt >= 0 and (expect or dt == 0)
        if op != "advance":
            assert result == expect, f"{op}({job}, {plan}) returned {result}, its mask said {expect}"
        if not expect:
            assert not snapshot_changes(snapshot, checker.state_snapshot()), f"refused {op} changed the state"
        checker.after_sim_action()
    for _ in range(20 * sim.num_jobs * (sim.num_plans + 2) + 50):  # drain: start what fits, else advance
        if sim.done:
            break
        queued = np.array(sim.queue, dtype=np.int64)
        legal = np.argwhere(sim.start_mask(queued)) if queued.size else np.zeros((0, 2), dtype=np.int64)
        if legal.size:
            assert sim.start(int(queued[legal[0, 0]]), int(legal[0, 1]))
        else:
            assert sim.has_pending_events(), "nothing can start and nothing is pending, but jobs remain"
            sim.advance()
        checker.after_sim_action()
    assert sim.done


def test_doomed_attempt_progress_never_exceeds_work(make_job, make_workload):
    # gpt2-large at batch 1 fits one P100-16GB under the "frenzy" formula but not in truth (the extended
    # estimate); the second job only makes time advance to t = 45 s, before the OOM at t = 90 s
    cluster = ClusterSpec.homogeneous("P100-16GB", 1, 1)
    jobs = (
        make_job(0, 0.0, 1.0, model="gpt2-large", batch_size=1, seq_len=128),
        make_job(1, 45.0, 1.0, batch_size=1, seq_len=128),
    )
    sim = ClusterSimulator(cluster, make_workload(*jobs), SimConfig(predictor="frenzy", startup_time=0, oom_delay=90))
    assert sim.pred_ok[0, 0] and not sim.true_ok[0, 0]
    assert sim.start(0, 0)
    sim.advance()
    assert sim.now == 45.0 and 0 in sim.running
    assert sim.progress(0) <= sim.work[0], (
        f"progress {sim.progress(0):.1f} iterations of a {sim.work[0]:.0f}-iteration job"
    )


def test_doomed_attempt_progress_is_not_banked_by_a_resize(make_job, make_workload):
    # gpt2-large at batch 1: plan 0 (A100-80GB x1) fits; plan 1 (P100-16GB x1) fits only under the "frenzy"
    # formula. Start on the doomed plan, let time pass, resize to the good plan before the OOM at t = 90 s (at
    # t = 60 s, the first instant the default 60 s resize_cooldown allows).
    cluster = ClusterSpec(
        "two", (NodeSpec("A100-80GB", 1), NodeSpec("P100-16GB", 1)), reference_gpu_type="A100-80GB"
    )
    jobs = (
        make_job(0, 0.0, 1e6, model="gpt2-large", batch_size=1, seq_len=128),
        make_job(1, 60.0, 1.0, batch_size=1, seq_len=128),
    )
    sim = ClusterSimulator(cluster, make_workload(*jobs), SimConfig(predictor="frenzy", startup_time=0, oom_delay=90))
    good, doomed = sim.plan_index("A100-80GB", 1), sim.plan_index("P100-16GB", 1)
    assert sim.true_ok[0, good] and sim.pred_ok[0, doomed] and not sim.true_ok[0, doomed]
    assert sim.start(0, doomed)
    sim.advance()  # t = 60: the second job arrives
    assert sim.now == 60.0 and sim.resize(0, good)
    assert sim.progress(0) == 0.0, f"{sim.progress(0):.0f} iterations banked from an attempt that cannot run"
