"""The environment's and the simulator's incremental fast paths against from-scratch references.

The step loop keeps caches everywhere (the visible sets, the queue and running blocks of the observation,
the masks' per-slot rows, the placeable capacities, a fused stop-and-launch for resizes); each test here
recomputes the same thing without them and asserts bit-for-bit equality after every step.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from frenzy_env.env import FrenzyEnv
from frenzy_env.registration import V5_WORLD
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import SyntheticGenerator
from frenzy_env.world.cluster import ClusterSpec, NodeSpec
from frenzy_env.world.placement import place

# (env keywords, steps): shared nodes and multi-node jobs (testbed: 8- and 4-GPU nodes), out-of-memory
# failures (the "frenzy" predictor), restarts without start-up, the spread placer, few slots (jobs beyond the
# visible windows), a second cluster; the current (v6) world by default, whose universal interface has absent
# plan slots and the plans and gpus blocks, and the pacing rules (resize_cooldown, one_action_per_instant)
CASES = [
    ({"cluster": "frenzy-testbed", "workload": "synthetic-small"}, 250),
    ({"cluster": "frenzy-testbed", "workload": "synthetic", "predictor": "frenzy", "oom_delay": 0.0}, 250),
    # the v5 world (the cluster layout, no pacing: restarts without start-up, many actions at one instant)
    ({"cluster": "frenzy-testbed", "workload": "synthetic", "startup_time": 0.0, "restart_overhead": 0.0,
      **V5_WORLD}, 250),
    ({"cluster": "frenzy-testbed", "workload": "synthetic", "placement": "spread", "work_info": "noisy"}, 200),
    ({"cluster": "frenzy-testbed", "workload": "synthetic", "queue_slots": 3, "running_slots": 2}, 250),
    # the cluster layout of v5 on a second cluster
    ({"cluster": "pai-2020", "workload": "synthetic-small", "predictor": "frenzy", "interface": "cluster"}, 150),
    ({"cluster": "frenzy-testbed", "workload": "synthetic", "predictor": "frenzy", "interface": "universal"}, 200),
    ({"cluster": "pai-2020", "workload": "synthetic-small", "interface": "universal", "queue_slots": 3}, 150),
]


def _actions(env: FrenzyEnv, rng: np.random.Generator, obs: dict) -> int:
    """Mostly legal (resizes dominate, as in masked-random play), some waits, a few illegal actions."""
    u = rng.random()
    if u < 0.15 and obs["action_mask"][0]:
        return 0
    if u < 0.18:
        return int(rng.integers(-2, env.action_space.n + 2))
    return int(rng.choice(np.flatnonzero(obs["action_mask"])))


def _from_scratch(env: FrenzyEnv) -> tuple[dict, np.ndarray]:
    """The observation and mask of a copy of ``env`` with every cache dropped (the slow, full paths)."""
    twin = pickle.loads(pickle.dumps(env))  # the simulator's caches are not pickled
    twin._invalidate_views()
    twin._compute_mask()
    return twin._observe(), twin.action_masks()


def _reference_masks(env: FrenzyEnv) -> np.ndarray:
    """The mask from the simulator's own start_mask / resize_mask and the documented action layout."""
    sim, q, r, p = env.sim, env.queue_slots, env.running_slots, env.num_plans
    w = len(env.wait_options)
    mask = np.zeros(1 + w + (q + r) * p, dtype=bool)
    mask[0] = sim.done or sim.has_pending_events()  # "wait" stays legal at the end
    mask[1 : 1 + w] = sim.has_pending_events() and not sim.done  # the timed waits
    queue = np.array(sim.queue[:q], dtype=np.int64)
    running = np.array(list(sim.running)[:r], dtype=np.int64)
    if queue.size:
        mask[1 + w : 1 + w + queue.size * p] = sim.start_mask(queue).ravel()
    if running.size:
        mask[1 + w + q * p : 1 + w + (q + running.size) * p] = sim.resize_mask(running).ravel()
    return mask


def _rested(sim: ClusterSimulator, job: int) -> bool:
    """The pacing rules by their definition (SimConfig): ``resize_cooldown`` seconds (None: 0) have passed since
    ``job``'s last start, resize or preemption and, with ``one_action_per_instant``, that was before this instant."""
    last, cfg = float(sim.last_action[job]), sim.config
    return last + (cfg.resize_cooldown or 0.0) <= sim.now and (not cfg.one_action_per_instant or last < sim.now)


def _placer_masks(env: FrenzyEnv) -> np.ndarray:
    """The mask from the placer itself (placement.place on the free GPUs, the job's own counted as free for a
    resize), availability, start-up and the pacing rules: no table of the simulator's."""
    sim, q, r, p = env.sim, env.queue_slots, env.running_slots, env.num_plans
    spec = env.cluster
    w = len(env.wait_options)
    mask = np.zeros(1 + w + (q + r) * p, dtype=bool)
    mask[0] = sim.done or sim.has_pending_events()  # "wait" stays legal at the end
    mask[1 : 1 + w] = sim.has_pending_events() and not sim.done  # the timed waits
    strategy = sim.config.placement

    def fits(job: int, plan: int, free: np.ndarray) -> bool:
        return place(free, spec.node_type_index, int(sim.plan_type[plan]), int(sim.plan_count[plan]),
                     int(sim.layout_tp[job, plan]), strategy) is not None

    one_action = sim.config.one_action_per_instant
    for k, job in enumerate(sim.queue[:q]):
        again = one_action and sim.last_action[job] >= sim.now  # acted on (preempted) at this instant
        for plan in range(p):
            mask[1 + w + k * p + plan] = sim.pred_ok[job, plan] and not sim.oom_known[job, plan] and not again and fits(
                job, plan, sim.state.free)
    for k, job in enumerate(list(sim.running)[:r]):
        run = sim.running[job]
        for plan in range(p):
            ok = sim.pred_ok[job, plan] and not sim.oom_known[job, plan] and plan != run.plan
            ok = ok and run.progress_from <= sim.now and _rested(sim, job)
            ok = ok and fits(job, plan, sim.state.free + run.counts)
            mask[1 + w + (q + k) * p + plan] = ok
    return mask


@pytest.mark.parametrize("kwargs,steps", CASES, ids=[str(i) for i in range(len(CASES))])
def test_observation_and_mask_equal_a_from_scratch_computation_after_every_step(kwargs, steps):
    env = FrenzyEnv(**kwargs)
    rng = np.random.default_rng(7)
    obs, info = env.reset(seed=1)
    for step in range(steps):
        ref_obs, ref_mask = _from_scratch(env)
        assert list(obs) == list(ref_obs)
        for key in obs:
            assert obs[key].dtype == ref_obs[key].dtype and obs[key].tobytes() == ref_obs[key].tobytes(), key
        assert (env.action_masks() == ref_mask).all()
        assert (env.action_masks() == _reference_masks(env)).all()
        if step % 10 == 0:
            assert (env.action_masks() == _placer_masks(env)).all()
        assert (info["action_mask"] == obs["action_mask"]).all() and info["action_mask"].dtype == np.int8
        obs, _, term, trunc, info = env.step(_actions(env, rng, obs))
        env.sim.check_invariants()
        if term or trunc:
            obs, info = env.reset(seed=int(rng.integers(100)))


def test_observations_are_fresh_arrays():
    """Returned arrays share memory with nothing of the environment's nor of other observations: writing into
    them changes nothing (a twin environment, left alone, sees the same)."""
    env, twin = (FrenzyEnv(cluster="frenzy-testbed", workload="synthetic-small") for _ in range(2))
    obs, info = env.reset(seed=0)
    twin.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        for value in (*obs.values(), info["action_mask"]):
            value[...] = 1  # scribble over the last observation
        new, _, _, _, info = env.step(action)
        ref, *_ = twin.step(action)
        for key in new:
            assert new[key].tobytes() == ref[key].tobytes()
            assert not any(np.shares_memory(new[key], other) for other in obs.values())
            assert not any(np.shares_memory(new[key], new[k]) for k in new if k != key)
        assert not np.shares_memory(info["action_mask"], new["action_mask"])
        obs = new


def test_copies_and_pickles_mid_episode_continue_identically():
    env = FrenzyEnv(cluster="frenzy-testbed", workload="synthetic", predictor="frenzy")
    rng = np.random.default_rng(3)
    obs, _ = env.reset(seed=2)
    for _ in range(150):
        obs, *_ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    twins = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    for _ in range(300):
        action = _actions(env, rng, obs)
        outs = [e.step(action) for e in [env, *twins]]
        for out in outs[1:]:
            assert out[1:4] == outs[0][1:4]
            assert all(out[0][k].tobytes() == outs[0][0][k].tobytes() for k in out[0])
        obs = outs[0][0]
        if outs[0][2] or outs[0][3]:
            break


def _state(sim: ClusterSimulator) -> tuple:
    """Everything observable of a simulator's state, for equality (the running jobs by index: a resize keeps
    the job's place in ``running``, a stop and a launch move it to the end)."""
    runs = [(j, r.plan, r.tp, r.counts.tolist(), r.held_since, r.progress_from, r.done_base, r.rate, r.will_oom,
             r.version) for j, r in sorted(sim.running.items())]
    records = [repr(r) for r in sim.records]  # (repr: nan equals nan)
    attempts = [repr(a) for a in sim.attempts]
    st = sim.state
    return (runs, records, attempts, sorted(sim._events), sim.now, sim.busy_gpus, sim.restarts,
            list(sim.util_times), list(sim.util_busy), st.free.tolist(), st.owner.tolist(), st.cap.tolist(),
            st.free_t.tolist(), [list(g) for g in st._free_gpus], sim.run_plan.tolist(), sim.run_version.tolist(),
            sim.run_floats.tobytes(), sim.restart_count.tolist(), sim.status.tolist(), sim.queue)


@pytest.mark.parametrize("placement", ["best_fit", "spread"])
def test_resize_is_stop_then_launch(placement):
    """resize() does in one pass what _stop then _launch (and the restart counters) do."""
    spec = ClusterSpec.preset("frenzy-testbed")
    wl = SyntheticGenerator(num_jobs=80, load=3.0, cluster=spec).generate(4)
    sim = ClusterSimulator(spec, wl, SimConfig(placement=placement, startup_time=0.0, restart_overhead=5.0))
    rng = np.random.default_rng(1)
    for _ in range(300):
        running = np.array(list(sim.running), dtype=np.int64)
        queue = np.array(sim.queue, dtype=np.int64)
        rm = sim.resize_mask(running) if running.size else np.zeros((0, sim.num_plans), dtype=bool)
        sm = sim.start_mask(queue) if queue.size else np.zeros((0, sim.num_plans), dtype=bool)
        if rm.any() and rng.random() < 0.7:
            k, plan = divmod(int(rng.choice(np.flatnonzero(rm))), sim.num_plans)
            job = int(running[k])
            twin = copy.deepcopy(sim)
            run = twin.running[job]
            placed = twin._placement(job, plan, (twin.state.free + run.counts).tolist())
            done = twin._stop(job, "resized")
            twin.restarts += 1
            twin.records[job].restarts += 1
            twin.restart_count[job] += 1
            twin._launch(job, plan, placed, done, twin._row_save_l[twin._row_key_l[job]][run.plan])  # overhead + write
            order = list(sim.running)
            assert sim.resize(job, plan)
            assert _state(sim) == _state(twin)
            assert list(sim.running) == order  # the resized job keeps its place (its running slot)
        elif sm.any() and rng.random() < 0.8:
            k, plan = divmod(int(rng.choice(np.flatnonzero(sm))), sim.num_plans)
            assert sim.start(int(queue[k]), plan)
        else:
            sim.advance()
        sim.check_invariants()
        if sim.done:
            break


def test_legal_masks_equal_start_and_resize_masks():
    """The environment's one-call masks against the simulator's separate ones, for windows of every size (the
    current world's pacing rules on: the placer's reference applies them by their definition)."""
    spec = ClusterSpec.preset("frenzy-testbed")
    wl = SyntheticGenerator(num_jobs=120, load=3.0, cluster=spec).generate(2)
    sim = ClusterSimulator(spec, wl, SimConfig(predictor="frenzy", startup_time=10.0))
    rng = np.random.default_rng(5)
    p = sim.num_plans
    for step in range(400):
        queue = np.array(sim.queue, dtype=np.int64)
        running = np.array(list(sim.running), dtype=np.int64)
        q_rows, r_rows = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        qv, rv = queue[:q_rows], running[:r_rows]
        out = np.ones((q_rows + r_rows, p), dtype=bool)
        sim.legal_masks(qv, rv, q_rows, out)
        want = np.zeros_like(out)
        if qv.size:
            want[: qv.size] = sim.start_mask(qv)
        if rv.size:
            want[q_rows : q_rows + rv.size] = sim.resize_mask(rv)
        assert (out == want).all(), step
        for k, job in enumerate(rv[:2].tolist()):  # and the placer agrees: own GPUs count as free
            run = sim.running[job]
            for plan in range(p):
                ok = (sim.avail[job, plan] and plan != run.plan and run.progress_from <= sim.now and _rested(sim, job)
                      and place(sim.state.free + run.counts, spec.node_type_index, int(sim.plan_type[plan]),
                                int(sim.plan_count[plan]), int(sim.layout_tp[job, plan]), "best_fit") is not None)
                assert out[q_rows + k, plan] == ok
        # any running job the pacing rules allow to preempt, unless it is saving already (stop_mode="save_first")
        stoppable = [j for j in running.tolist() if _rested(sim, j) and not sim.saving_until[j] >= sim.now]
        u = rng.random()
        if u < 0.4 and want[q_rows:].any():
            k, plan = divmod(int(rng.choice(np.flatnonzero(want[q_rows:]))), p)
            assert sim.resize(int(rv[k]), plan)
        elif u < 0.75 and want[:q_rows].any():
            k, plan = divmod(int(rng.choice(np.flatnonzero(want[:q_rows]))), p)
            assert sim.start(int(qv[k]), plan)
        elif u < 0.8 and stoppable:
            assert sim.preempt(int(rng.choice(stoppable)))
        else:
            sim.advance()
        if sim.done:
            break


def test_allocations_across_gpu_types_and_released_counts():
    """ClusterState's public allocate/release on the simulator's state: any counts, several GPU types."""
    spec = ClusterSpec("mixed", (NodeSpec("A100-80GB", 8), NodeSpec("V100-32GB", 4), NodeSpec("A100-80GB", 8)),
                       reference_gpu_type="A100-80GB")
    wl = SyntheticGenerator(num_jobs=5, load=1.0, cluster=spec).generate(0)
    st = ClusterSimulator(spec, wl).state
    idx = st.allocate(7, np.array([3, 2, 8]))
    assert isinstance(idx, np.ndarray) and len(idx) == 13 and st.free.tolist() == [5, 2, 0]
    st.check()
    assert st.release(7).tolist() == [3, 2, 8] and st.free.tolist() == [8, 4, 8]
    st.check()


@pytest.mark.parametrize("cluster", ["large-1024", "frenzy-testbed", "odd"])
def test_placer_fast_paths_agree_with_placement_place(cluster):
    """The simulator's best-fit placer (single node, whole empty nodes, the general fewest-nodes spread)
    gives what placement.place gives, on random free GPUs; "odd" has 6- and 3-GPU nodes (tp groups of 4 do
    not fill a node)."""
    if cluster == "odd":
        counts = {"A100-80GB": (6, 6), "V100-32GB": (5, 3)}
        spec = ClusterSpec.from_counts("odd", counts, reference_gpu_type="A100-80GB")
    else:
        spec = ClusterSpec.preset(cluster)
    wl = SyntheticGenerator(num_jobs=40, load=1.0, cluster=spec).generate(3)
    sim = ClusterSimulator(spec, wl, SimConfig(max_plan_gpus=64))
    rng = np.random.default_rng(2)
    cap = spec.node_capacity
    present = np.flatnonzero(sim.plan_present).tolist()  # the universal grid's absent slots hold no plan
    for trial in range(60):
        free = np.where(rng.random(len(cap)) < 0.5, cap, rng.integers(0, cap + 1))  # many empty nodes
        for job in rng.choice(sim.num_jobs, 3, replace=False).tolist():
            for plan in present:
                want = place(free, spec.node_type_index, int(sim.plan_type[plan]), int(sim.plan_count[plan]),
                             int(sim.layout_tp[job, plan]), "best_fit")
                got = sim._place(job, plan, free)
                assert (got is None) == (want is None), (trial, job, plan)
                if want is not None:
                    assert (got == want).all(), (trial, job, plan)
