"""The compiled kernels (frenzy_env.kernels) against hand-computed values and against the numpy code they
replace: the same masks, observations, rewards and infos, step for step."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frenzy_env import kernels
from frenzy_env.env import FrenzyEnv
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import SyntheticGenerator
from frenzy_env.world.cluster import ClusterSpec

pytest.importorskip("numba")


@pytest.fixture
def restore_jit():
    """Put the kernels switch back as it was after the test."""
    before = kernels.enabled()
    yield
    kernels.set_enabled(False)  # (drops the kernels a test made active)
    kernels.set_enabled(before)


@pytest.fixture
def jit_on(restore_jit):
    """The compiled kernels on for this test (whatever FRENZY_ENV_JIT says)."""
    assert kernels.set_enabled(True)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python source"])
def test_legal_masks_kernel_on_a_hand_computed_instance(jit_on, compiled):
    """One GPU type, tp levels (1, 2); 2 plans (1 and 2 GPUs); one queued job, two running jobs (slots 1, 0).
    The kernel's Python source, run as Python, gives the same."""
    legal_masks = kernels.legal_masks if compiled else kernels._legal_masks
    cap = np.array([[3, 2]], dtype=np.int64)  # 3 GPUs placeable one by one, 2 in groups of 2
    tl = np.array([[0, 1], [0, 0]], dtype=np.intp)  # queued job: plan 0 at level 1 (cell 0), plan 1 at level 2
    thr = np.array([[1, 4], [9, 9]], dtype=np.intp)  # it needs 1 GPU, and 4 (an unreachable count) for plan 1
    plans = np.zeros((4, 2, 2), dtype=np.intp)
    plans[0] = [[0, 1], [0, 1]]  # cells of each plan, per slot
    plans[1] = [[0, 1], [0, 1]]  # gain columns: its own type
    plans[2] = [[1, 4], [1, 3]]  # GPUs each plan needs (slot 0's plan 1: 4, more than it can get)
    plans[3] = [[0, 0], [1, 0]]  # slot 1 holds a whole node giving back 1 GPU at level 1
    pairs = np.array([[-1, 0], [2, 5]], dtype=np.intp)  # slot 1 shares node 2: gain row 5 + free[2]
    gain = np.zeros((8, 3), dtype=np.int64)
    gain[5 + 1] = [1, 2, 0]  # node 2 has 1 free GPU: freeing the job's gives 1 GPU, 2 in pairs
    free = np.array([0, 0, 1], dtype=np.int64)
    pf = np.array([0.0, 50.0])  # slot 1 started up at 50
    out = np.ones((4, 2), dtype=bool)
    slots = np.array([1, 0], dtype=np.int64)  # running row 0 is slot 1, row 1 is slot 0
    # the pacing rules off: job 0 queued, jobs 1 and 2 running (last acted on at 40 and 0)
    pacing = (np.array([0]), np.array([1, 2]), np.array([-math.inf, 40.0, 0.0]), 0.0, False)
    # queue rows: 1 row (q_rows 2: row 1 is an empty queue slot); running rows 2, 3
    count = legal_masks(cap, tl, thr, 1, 2, slots, plans, pairs, pf, 100.0, free, gain, out, *pacing)
    # row 0: 3 >= 1, 2 >= 4 -> [T, F]; row 1 empty -> [F, F]
    # row 2 (slot 1): plan 0: 3 + 1 + 1 = 5 >= 1; plan 1: 2 + 0 + 2 = 4 >= 3 -> [T, T]
    # row 3 (slot 0): plan 0: 3 + 0 + 0 >= 1; plan 1: 2 + 0 + 0 >= 4 is False -> [T, F]
    assert out.tolist() == [[True, False], [False, False], [True, True], [True, False]]
    assert count == 4
    # a 60 s cooldown: job 1 (acted on at 40) is held until 100, job 2 (at 0) is not; at 100 both may move
    last = pacing[2]
    count = legal_masks(cap, tl, thr, 1, 2, slots, plans, pairs, pf, 99.0, free, gain, out, *pacing[:3], 60.0, False)
    assert out.tolist() == [[True, False], [False, False], [False, False], [True, False]] and count == 2
    count = legal_masks(cap, tl, thr, 1, 2, slots, plans, pairs, pf, 100.0, free, gain, out, *pacing[:3], 60.0, False)
    assert out[2].tolist() == [True, True] and count == 4
    # one action per instant at 100: job 0 preempted at 100 (no start), job 2 resized at 100 (no resize)
    last[[0, 2]] = 100.0
    count = legal_masks(cap, tl, thr, 1, 2, slots, plans, pairs, pf, 100.0, free, gain, out, *pacing[:3], 0.0, True)
    assert out.tolist() == [[False, False], [False, False], [True, True], [False, False]] and count == 2
    last[[0, 2]] = [-math.inf, 0.0]
    pf[1] = 150.0  # slot 1 is still starting at 100: no resize
    count = legal_masks(cap, tl, thr, 1, 2, slots, plans, pairs, pf, 100.0, free, gain, out, *pacing)
    assert out[2].tolist() == [False, False] and count == 2
    slots[1] = -1  # a job that does not run: reported, nothing written
    before = out.copy()
    assert legal_masks(cap, tl, thr, 1, 2, slots, plans, pairs, pf, 100.0, free, gain, out, *pacing) == -2
    assert (out == before).all()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python source"])
def test_running_rows_kernel_on_a_hand_computed_instance(jit_on, compiled):
    """Job 1 on plan 0, first started at 10; its attempt makes progress from 50 with 10 iterations done
    before, 2 per second; estimate 200; 1 s per iteration on plan 0, 0.5 s on plan 1, plan 2 not available;
    3 restarts; configuration row 1: start-up 40 s on plan 1, 15 s of restart overhead and checkpoint write
    away from plan 0. At 100 (past its start-up) and at 40 (10 s of start-up still to pay)."""
    kernel = kernels.running_rows if compiled else kernels._running_rows
    run_floats = np.array([[0, 0, 0, 0], [10.0, 50.0, 2.0, 10.0]])
    start_s = np.array([[1.0, 1.0, 1.0], [35.0, 40.0, 60.0]])  # (K, P)
    save_s = np.array([[1.0, 1.0, 1.0], [15.0, 25.0, 35.0]])

    def rows(now):
        out = np.zeros((2, 10), dtype=np.float32)
        kernel(
            out, 1, np.array([1]), np.array([-1, 0]), run_floats, np.array([0, 3]), np.array([0.0, 200.0]),
            np.array([[0.0, 0.0, 0.0], [1.0, 0.5, 0.0]]), np.array([0, 1]), start_s, save_s,
            np.array([[0.125, 0.5], [0.25, 0.5]]), now, 16.0,
        )
        assert out[0].tolist() == [0.0] * 10  # other rows untouched
        return out[1].tolist()

    def lt(seconds):
        return math.log1p(seconds) / 16

    rem = 200.0 - (10.0 + 50.0 * 2.0)  # 90 iterations left at 100
    # plan 0: its work (90 s); plan 1: a restart (40 s start-up there + 15 s away from plan 0) then 45 s
    want = [1.0, lt(90.0), lt(90.0), 0.125, 0.5, 0.3, 1 - rem / 200.0, lt(90.0), lt(55.0 + 45.0), 0.0]
    assert rows(100.0) == np.array(want, dtype=np.float32).tolist()
    # at 40: 190 iterations left and 10 s of start-up: 200 s on plan 0; 55 s + 95 s on plan 1
    want = [1.0, lt(30.0), lt(200.0), 0.125, 0.5, 0.3, 1 - 190.0 / 200.0, lt(200.0), lt(150.0), 0.0]
    assert rows(40.0) == np.array(want, dtype=np.float32).tolist()


def test_running_work_kernel_counts_the_pending_start_up(jit_on):
    """The summed time left of two running jobs, both making progress from 50 with 10 iterations done, job 0
    at 2 per second and job 1 at 1: at 100, 90 s + 140 s of work; at 40, each still has 10 s of start-up to
    pay and 190 iterations at 1 s."""
    run_floats = np.array([[10.0, 50.0, 2.0, 10.0], [10.0, 50.0, 1.0, 10.0]])
    args = (np.array([0, 1]), np.array([0, 0]), run_floats, np.array([200.0, 200.0]), np.array([[1.0], [1.0]]))
    assert kernels.running_work(*args, 100.0) == 90.0 + 140.0
    assert kernels.running_work(*args, 40.0) == 200.0 + 200.0
    assert kernels._running_work(*args, 40.0) == 400.0


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python source"])
def test_running_rows_kernel_with_three_plan_features(jit_on, compiled):
    """The universal layout's running row: the plan's 3 features (GPUs, speed, memory) after remaining_time, then
    restarts, progress and the plan times one column further right than with 2."""
    kernel = kernels.running_rows if compiled else kernels._running_rows
    out = np.zeros((1, 10), dtype=np.float32)
    kernel(out, 0, np.array([0]), np.array([1]), np.array([[0.0, 0.0, 1.0, 0.0]]), np.array([2]),
           np.array([100.0]), np.array([[0.0, 2.0]]), np.array([0]), np.zeros((1, 2)), np.zeros((1, 2)),
           np.array([[0.0, 0.0, 0.0], [0.25, 0.5, 0.75]]), 10.0, 16.0)
    lt = math.log1p(180.0) / 16  # 90 iterations left at 2 s on its plan (plan 1); plan 0 not available
    want = [1.0, math.log1p(10.0) / 16, lt, 0.25, 0.5, 0.75, 0.2, 0.1, 0.0, lt]
    assert out[0].tolist() == np.array(want, dtype=np.float32).tolist()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python source"])
def test_type_state_kernel_on_a_hand_computed_instance(jit_on, compiled):
    """Type 0: nodes of 4 and 4 GPUs with 4 and 1 free; type 1: one 8-GPU node with 3 free. Plans: type 0 x 4,
    type 1 x 4, and an absent slot (type 0, 0 GPUs)."""
    kernel = kernels.type_state if compiled else kernels._type_state
    gpus, plans = np.zeros((4, 9), np.float32), np.zeros((3, 5), np.float32)
    full, largest = np.full(2, 7), np.full(2, 7)  # scratch, overwritten
    kernel(np.array([4, 1, 3]), np.array([0, 0, 1]), np.array([4, 4, 8]), np.array([8, 8]), np.array([2, 1]),
           np.array([4, 8]), np.array([5, 3]), full, largest, np.array([0, 1, 0]), np.array([4, 4, 0]),
           np.array([True, True, False]), gpus, plans)
    assert full.tolist() == [1, 0] and largest.tolist() == [4, 3]
    assert gpus[:2, [2 - 1, 7, 8]].tolist() == [[5 / 8, 0.5, 1.0], [3 / 8, 0.0, 3 / 8]]  # free, free_nodes, largest
    assert plans[:, 4].tolist() == [1.0, 0.0, 0.0] and not gpus[2:].any()


def test_free_fractions_kernel(jit_on):
    tf, nf = np.array([0, 0.5, 1, 0, 0.25, 0.5, 0.75, 1], np.float32), np.array([0, 1, 0, 0.5, 1], np.float32)
    out_t, out_n = np.zeros(2, np.float32), np.zeros(2, np.float32)
    kernels.free_fractions(tf, np.array([0, 3]), np.array([1, 3]), out_t, nf, np.array([0, 2]), np.array([1, 1]),
                           out_n)
    assert out_t.tolist() == [0.5, 0.75] and out_n.tolist() == [1.0, 0.5]


CASES = [
    {"cluster": "frenzy-testbed", "workload": "synthetic"},
    {"cluster": "frenzy-testbed", "workload": "synthetic", "predictor": "frenzy", "startup_time": 0.0},
    {"cluster": "frenzy-testbed", "workload": "synthetic", "placement": "spread", "work_info": "noisy"},
    {"cluster": "frenzy-testbed", "workload": "synthetic", "queue_slots": 3, "running_slots": 2},
    {"cluster": "large-1024", "workload": "synthetic-small"},
    {"cluster": "pai-2020", "workload": "synthetic-small", "predictor": "frenzy"},
    # the pacing rules, with preemption; then with free starts and restarts (progress_from == the action's time)
    {"cluster": "frenzy-testbed", "workload": "synthetic", "resize_cooldown": 60.0, "one_action_per_instant": True,
     "preemption": True},
    {"cluster": "frenzy-testbed", "workload": "synthetic", "one_action_per_instant": True, "preemption": True,
     "startup_time": 0.0, "restart_overhead": 0.0, "load_bandwidth": math.inf, "checkpoint_bandwidth": math.inf},
    # the universal interface: the padded plan grid, the plans and gpus blocks, the running rows' type features
    {"cluster": "frenzy-testbed", "workload": "synthetic", "interface": "universal", "preemption": True},
    {"cluster": "pai-2020", "workload": "synthetic-small", "interface": "universal", "queue_slots": 3,
     "running_slots": 2},
]


@pytest.mark.parametrize("kwargs", CASES, ids=[str(i) for i in range(len(CASES))])
def test_compiled_and_numpy_paths_give_the_same_episode(kwargs, restore_jit):
    """Two environments, one stepped with the kernels and one with the numpy code: equal observations (bytes),
    rewards, flags and infos after every step of mostly-resize random play with waits and illegal actions."""
    envs = [FrenzyEnv(**kwargs), FrenzyEnv(**kwargs)]
    rng = np.random.default_rng(3)

    def both(method, *args, **kw):
        outs = []
        for i, env in enumerate(envs):
            kernels.set_enabled(i == 0)
            outs.append(getattr(env, method)(*args, **kw))
        return outs

    outs = both("reset", seed=5)
    steps = 0
    for _ in range(400):
        obs = outs[0][0]
        u = rng.random()
        legal = np.flatnonzero(obs["action_mask"])
        action = 0 if u < 0.1 else int(rng.integers(-1, envs[0].action_space.n + 1)) if u < 0.13 else int(
            rng.choice(legal))
        outs = both("step", action)
        (o0, *rest0), (o1, *rest1) = outs
        assert list(o0) == list(o1)
        for key in o0:
            assert o0[key].tobytes() == o1[key].tobytes(), (steps, key)
        assert rest0[:3] == rest1[:3]
        info0, info1 = rest0[3], rest1[3]
        assert info0.keys() == info1.keys() and info0["action_mask"].tobytes() == info1["action_mask"].tobytes()
        assert {k: v for k, v in info0.items() if k != "action_mask"} == {
            k: v for k, v in info1.items() if k != "action_mask"}
        steps += 1
        if rest0[1] or rest0[2]:
            outs = both("reset", seed=int(rng.integers(100)))
    assert steps == 400


FREE_RESTARTS = dict(startup_time=0.0, restart_overhead=0.0, load_bandwidth=math.inf, checkpoint_bandwidth=math.inf)


@pytest.mark.parametrize("config", [
    SimConfig(startup_time=5.0), SimConfig(**FREE_RESTARTS, resize_cooldown=30.0, one_action_per_instant=True),
], ids=["default", "pacing"])
def test_switching_paths_mid_episode_keeps_the_masks_right(config, restore_jit):
    """The simulator chooses the path at each call: toggling between steps still gives the reference masks."""
    spec = ClusterSpec.preset("frenzy-testbed")
    wl = SyntheticGenerator(num_jobs=60, load=3.0, cluster=spec).generate(1)
    sim = ClusterSimulator(spec, wl, config)
    rng = np.random.default_rng(0)
    for step in range(300):
        kernels.set_enabled(step % 3 != 0)
        queue = np.array(sim.queue[:6], dtype=np.int64)
        running = np.array(list(sim.running)[:5], dtype=np.int64)
        out = np.ones((11, sim.num_plans), dtype=bool)
        count = sim.legal_masks(queue, running, 6, out)
        want = np.zeros_like(out)
        if queue.size:
            want[: queue.size] = sim.start_mask(queue)
        if running.size:
            want[6 : 6 + running.size] = sim.resize_mask(running)
        assert (out == want).all(), step
        assert count == int(want.sum())
        cells = np.flatnonzero(out)
        if cells.size and rng.random() < 0.8:
            row, plan = divmod(int(rng.choice(cells)), sim.num_plans)
            ok = sim.start(int(queue[row]), plan) if row < 6 else sim.resize(int(running[row - 6]), plan)
            assert ok
        elif sim.has_pending_events():
            sim.advance()
        else:
            break
        sim.check_invariants()


@pytest.mark.parametrize("on", [True, False])
def test_legal_masks_refuse_a_job_that_is_not_running(on, restore_jit):
    kernels.set_enabled(on)
    spec = ClusterSpec.preset("frenzy-testbed")
    sim = ClusterSimulator(spec, SyntheticGenerator(num_jobs=5, load=1.0, cluster=spec).generate(0))
    with pytest.raises(KeyError):
        sim.legal_masks(np.zeros(0, np.int64), np.array([0]), 2, np.zeros((3, sim.num_plans), dtype=bool))


def test_kernel_functions_refuse_to_run_when_the_kernels_are_off(restore_jit):
    kernels.set_enabled(False)
    assert kernels.get("legal_masks") is None
    with pytest.raises(ValueError, match="FRENZY_ENV_JIT"):
        kernels.free_fractions(*[np.zeros(1)] * 8)


def test_without_a_writable_cache_folder_the_kernels_compile_uncached(restore_jit, monkeypatch, tmp_path):
    """numba refuses ``cache=True`` (RuntimeError) where no cache folder is writable: compile without it."""
    import numba

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))

    real, calls = numba.njit, []

    def njit(*args, **kw):
        calls.append(kw.get("cache", False))
        if kw.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real(*args, **kw)

    monkeypatch.setattr(numba, "njit", njit)
    monkeypatch.setattr(kernels, "_COMPILED", {})
    kernels.set_enabled(False)  # (clears the active kernels)
    assert kernels.set_enabled(True)
    out_t, out_n = np.zeros(1, np.float32), np.zeros(1, np.float32)
    kernels.free_fractions(np.array([0, 1], np.float32), np.array([0]), np.array([1]), out_t,
                           np.array([0, 0.5, 1], np.float32), np.array([0]), np.array([2]), out_n)
    assert out_t.tolist() == [1.0] and out_n.tolist() == [1.0]
    assert calls == [True, False]  # asked for the cache, then compiled without it


def test_the_kernels_are_cached_in_the_user_cache_never_in_the_package(monkeypatch, tmp_path):
    package = Path(kernels.__file__).resolve().parent
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert not kernels.cache_dir().resolve().is_relative_to(package.parent)  # not in the source tree
    assert kernels.cache_dir().parts[-2:] == ("frenzy-env", "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernels.cache_dir() == tmp_path
    before = {p.name for p in (package / "__pycache__").glob("*")} if (package / "__pycache__").is_dir() else set()
    kernel = kernels._compile(kernels._SOURCES["free_fractions"])
    out_t, out_n = np.zeros(1, np.float32), np.zeros(1, np.float32)
    kernel(np.array([0, 1], np.float32), np.array([0]), np.array([1]), out_t,
           np.array([0, 0.5, 1], np.float32), np.array([0]), np.array([2]), out_n)
    assert Path(kernel._cache._cache_path).is_relative_to(tmp_path)
    assert any(tmp_path.rglob("*.nbi"))  # the index numba wrote
    after = {p.name for p in (package / "__pycache__").glob("*")} if (package / "__pycache__").is_dir() else set()
    assert not [name for name in after - before if name.endswith((".nbi", ".nbc"))]


def test_an_unwritable_cache_folder_means_no_cache_not_the_source_tree(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker / "numba"))  # cannot be created
    kernel = kernels._compile(kernels._SOURCES["free_fractions"])
    assert type(kernel._cache).__name__ == "NullCache"  # compiled uncached (numba would pick the package folder)


def _enabled_in_subprocess(env_value: str | None, block_numba: bool = False) -> str:
    code = ("import sys\n"
            + ("sys.modules['numba'] = None\n" if block_numba else "")
            + "from frenzy_env import kernels\nfrom frenzy_env.env import FrenzyEnv\n"
            "env = FrenzyEnv(workload='synthetic-small')\nobs, _ = env.reset(seed=0)\nenv.step(0)\n"
            "print(kernels.enabled(), kernels.get('legal_masks') is None)\n")
    environ = {k: v for k, v in os.environ.items() if k != "FRENZY_ENV_JIT"}
    if env_value is not None:
        environ["FRENZY_ENV_JIT"] = env_value
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_switch_follows_the_environment_variable_and_numba_availability():
    assert _enabled_in_subprocess(None) == "True False"
    assert _enabled_in_subprocess("0") == "False True"
    assert _enabled_in_subprocess(None, block_numba=True) == "False True"  # no numba: the numpy code runs
