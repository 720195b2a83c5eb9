"""The universal interface (``interface="universal"``): one observation and action layout on every cluster, the
same dynamics as the cluster layout, features computed by hand, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium.spaces.utils import flatdim, flatten

from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.observation import (
    GLOBAL_FEATURES,
    GPU_FEATURES,
    GT,
    GU,
    PL,
    PLAN_FEATURES,
    QUEUE_FEATURES,
    RU,
    RUNNING_FEATURES,
    UNIVERSAL_GLOBAL_FEATURES,
    UNIVERSAL_LEVELS,
    UNIVERSAL_PLANS,
    UNIVERSAL_RUNNING_FEATURES,
    UNIVERSAL_TYPES,
    R,
)
from frenzy_env.simulator import SimConfig
from frenzy_env.world.cluster import CLUSTER_PRESETS, ClusterSpec, NodeSpec

PRESETS = ("frenzy-testbed", "doubling-64", "pai-2020", "large-1024")


def test_the_default_is_the_universal_layout_and_the_cluster_layout_is_v5s():
    """interface="universal" is the default (env v6's): frenzy-testbed on the 28-slot grid, Discrete(3,588), the
    plans and gpus blocks and no nodes; interface="cluster" (passed) is env v5's layout: frenzy-testbed's 18
    slots, Discrete(2,308)."""
    assert SimConfig().interface == "universal"
    default = FrenzyEnv(workload="synthetic-small")
    assert default.sim.num_plans == UNIVERSAL_PLANS == 28 and default.action_space.n == 3588
    assert default.sim.plan_grid == (UNIVERSAL_TYPES, UNIVERSAL_LEVELS)
    assert sorted(default.observation_space) == ["action_mask", "globals", "gpus", "plans", "queue", "running"]
    assert default.plans_shape == (UNIVERSAL_PLANS, len(PLAN_FEATURES))
    env = FrenzyEnv(workload="synthetic-small", interface="cluster")
    assert env.sim.num_plans == 18 and env.action_space.n == 2308 and env.sim.plan_grid == (3, 6)
    assert sorted(env.observation_space) == ["action_mask", "globals", "gpus", "nodes", "queue", "running"]
    assert env.running_shape == (64, len(RUNNING_FEATURES) + 18) and env.gpus_shape == (6,)
    assert env.sim.plan_present.all() and env.plans_shape is None


def test_one_observation_and_action_space_on_every_preset():
    """The spaces are equal objects on every cluster preset (the four of env v5 and any added since); one fixed
    linear layer (an MLP's first layer, as sb3's MultiInputPolicy flattens a Dict) takes each one's observation."""
    assert set(PRESETS) <= set(CLUSTER_PRESETS)
    envs = [FrenzyEnv(cluster=c, workload="synthetic-small", interface="universal") for c in CLUSTER_PRESETS]
    first = envs[0]
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((flatdim(first.observation_space), 8))
    for env in envs:
        assert env.observation_space == first.observation_space and env.action_space == first.action_space
        assert env.num_plans == UNIVERSAL_PLANS == UNIVERSAL_TYPES * UNIVERSAL_LEVELS
        assert env.queue_shape == first.queue_shape and env.running_shape == first.running_shape
        assert env.gpus_shape == (UNIVERSAL_TYPES, len(GPU_FEATURES))
        assert env.plans_shape == (UNIVERSAL_PLANS, len(PLAN_FEATURES))
        obs, _ = env.reset(seed=0)
        for _ in range(30):
            obs, *_ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        assert env.observation_space.contains(obs)
        hidden = np.tanh(flatten(env.observation_space, obs) @ weights)
        assert hidden.shape == (8,) and np.isfinite(hidden).all()
    assert sorted(first.observation_space) == ["action_mask", "globals", "gpus", "plans", "queue", "running"]


def test_the_grid_on_frenzy_testbed():
    """3 types x counts 1..32 of the cluster layout in a 4 x 7 grid: slot t * 7 + k; the 64-GPU column and the
    fourth type slot are absent (0 GPUs, never feasible)."""
    env = FrenzyEnv(workload="synthetic-small", interface="universal")
    sim = env.sim
    assert sim.plan_grid == (4, 7) and sim.plan_counts_levels.tolist() == [1, 2, 4, 8, 16, 32]
    assert sim.plan_index("V100-32GB", 8) == 1 * 7 + 3 and sim.plan_label(10) == "V100-32GBx8"
    absent = [6, 13, 20, *range(21, 28)]
    assert np.flatnonzero(~sim.plan_present).tolist() == absent and sim.plan_label(6) == "absent"
    assert (sim.plan_count[absent] == 0).all() and (sim.plan_type[absent] == 0).all()
    assert not sim.pred_ok[:, absent].any() and not sim.true_ok[:, absent].any()
    assert np.isinf(sim.iter_time[:, absent]).all()
    cluster = FrenzyEnv(workload="synthetic-small", interface="cluster").sim
    present = np.flatnonzero(sim.plan_present)
    for name in ("pred_ok", "true_ok", "iter_time", "layout_tp", "plan_count", "plan_type"):
        assert np.array_equal(getattr(sim, name)[..., present], getattr(cluster, name)), name
    assert np.array_equal(sim.config_start_s[:, present], cluster.config_start_s)


def _mapped(universal: np.ndarray, present: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A block's per-plan columns at the cluster layout's slots, and at the absent ones."""
    per_plan = universal[:, width:]
    return per_plan[:, present], per_plan[:, ~present]


@pytest.mark.parametrize("cluster", ["frenzy-testbed", "pai-2020"])
def test_the_same_episode_in_both_layouts(cluster):
    """Masked-random play (the k-th legal action of one layout is the k-th of the other): every step the same
    reward, and the universal observation is the cluster one's numbers moved to the grid (0 on absent slots)."""
    envs = [FrenzyEnv(cluster=cluster, workload="synthetic-small", interface=i) for i in ("cluster", "universal")]
    (oc, _), (ou, _) = (e.reset(seed=3) for e in envs)
    sim = envs[1].sim
    present = sim.plan_present
    rng = np.random.default_rng(1)
    rf, urf = len(RUNNING_FEATURES), len(UNIVERSAL_RUNNING_FEATURES)
    for step in range(300):
        legal_c, legal_u = np.flatnonzero(oc["action_mask"]), np.flatnonzero(ou["action_mask"])
        assert legal_c.size == legal_u.size, step
        q_c, q_u = oc["queue"].reshape(envs[0].queue_shape), ou["queue"].reshape(envs[1].queue_shape)
        assert np.array_equal(q_c[:, : len(QUEUE_FEATURES)], q_u[:, : len(QUEUE_FEATURES)])
        shown, hidden = _mapped(q_u, present, len(QUEUE_FEATURES))
        assert np.array_equal(shown, q_c[:, len(QUEUE_FEATURES) :]) and not hidden.any()
        r_c, r_u = oc["running"].reshape(envs[0].running_shape), ou["running"].reshape(envs[1].running_shape)
        for name in ("present", "elapsed", "remaining_time", "num_gpus", "restarts", "progress"):
            assert np.array_equal(r_c[:, getattr(R, name)], r_u[:, getattr(RU, name)]), name
        shown, hidden = _mapped(r_u, present, urf)
        assert np.array_equal(shown, r_c[:, rf:]) and not hidden.any()
        assert np.array_equal(oc["globals"], ou["globals"][: len(GLOBAL_FEATURES)])
        t = sim.num_types
        assert np.array_equal(oc["gpus"][:t], ou["gpus"].reshape(envs[1].gpus_shape)[:t, GT.free])
        k = int(rng.integers(legal_c.size))
        (oc, rc, tc, trc, _), (ou, ru, tu, tru, _) = envs[0].step(int(legal_c[k])), envs[1].step(int(legal_u[k]))
        assert (rc, tc, trc) == (ru, tu, tru)
        assert not ou["action_mask"][envs[1].first_start :].reshape(-1, UNIVERSAL_PLANS)[:, ~present].any()
        if tc or trc:
            break


def test_features_by_hand(make_job, make_env):
    """Two 4-GPU A100-80GB nodes and one 8-GPU V100-32GB node; job 0 started on A100 x 4 (node 0, best fit),
    then the env moves to job 1's arrival at 10 s."""
    spec = ClusterSpec("h", (NodeSpec("A100-80GB", 4), NodeSpec("A100-80GB", 4), NodeSpec("V100-32GB", 8)))
    env = make_env(spec, [make_job(0, 0.0, 1e6), make_job(1, 10.0, 1e6)], interface="universal")
    obs, _ = env.reset(seed=0)
    sim = env.sim
    assert sim.plan_grid == (4, 7) and sim.plan_counts_levels.tolist() == [1, 2, 4, 8]
    obs, *_ = env.step(env.start_action(0, sim.plan_index("A100-80GB", 4)))
    assert sim.now == 10.0 and sim.state.free.tolist() == [0, 4, 8]
    gpus = obs["gpus"].reshape(env.gpus_shape)
    lg = math.log2
    a100 = [1, 0.5, lg(9) / 16, lg(313) / 10, 80 / 128, lg(5) / 8, math.log1p(2) / 10, 0.5, 1.0]
    v100 = [1, 1.0, lg(9) / 16, lg(126) / 10, 32 / 128, lg(9) / 8, math.log1p(1) / 10, 1.0, 1.0]
    want = np.array([a100, v100, [0] * 9, [0] * 9], dtype=np.float32)
    assert GPU_FEATURES[:2] == ("present", "free") and gpus.tolist() == want.tolist()
    plans = obs["plans"].reshape(env.plans_shape)
    for slot in range(UNIVERSAL_PLANS):
        t, k = divmod(slot, 7)
        if t < 2 and k < 4:
            speed, memory = (a100[3], a100[4]) if t == 0 else (v100[3], v100[4])
            fits = 1.0 if t == 1 or 2**k <= 4 else 0.0  # A100: 4 GPUs free; V100: 8
            row = [1.0, lg(2**k + 1) / 8, speed, memory, fits]
        else:
            row = [0.0] * 5
        assert plans[slot].tolist() == np.array(row, dtype=np.float32).tolist(), slot
    run = obs["running"].reshape(env.running_shape)[0]
    assert run[[RU.present, RU.num_gpus, RU.gpu_speed, RU.gpu_memory, RU.restarts]].tolist() == np.array(
        [1.0, lg(5) / 8, a100[3], a100[4], 0.0], dtype=np.float32).tolist()
    assert RU.restarts == RU.num_gpus + 3 and RU.progress == RU.restarts + 1  # (the kernel's column rule)
    assert R.restarts == R.num_gpus + 2 and R.progress == R.restarts + 1
    g = obs["globals"]
    assert len(g) == len(UNIVERSAL_GLOBAL_FEATURES) == len(GLOBAL_FEATURES) + 2
    assert g[[GU.startup_time, GU.restart_overhead]].tolist() == np.array(
        [math.log1p(30) / 16, math.log1p(10) / 16], dtype=np.float32).tolist()
    cheap = make_env(spec, [make_job(0)], interface="universal", startup_time=0.0, restart_overhead=100.0)
    g = cheap.reset(seed=0)[0]["globals"]
    assert g[GU.startup_time] == 0.0 and g[GU.restart_overhead] == np.float32(math.log1p(100) / 16)
    assert PLAN_FEATURES[PL.fits_free] == "fits_free"


def test_counts_above_a_type_are_shown_absent():
    """pai-2020's T4 type has 62 GPUs: its 64-GPU slot exists in the cluster layout (never feasible) and is
    shown absent (all zeros) in the universal one."""
    env = FrenzyEnv(cluster="pai-2020", workload="synthetic-small", interface="universal")
    sim = env.sim
    t4 = sim.gpu_types.index("T4-16GB")
    assert int(env.cluster.type_capacity[t4]) < 64 and sim.plan_present[t4 * 7 + 6]
    obs, _ = env.reset(seed=0)
    assert not obs["plans"].reshape(env.plans_shape)[t4 * 7 + 6].any()
    assert obs["plans"].reshape(env.plans_shape)[t4 * 7 + 5, PL.present] == 1.0


def test_refusals_name_the_field_and_the_value():
    with pytest.raises(ConfigError, match="interface.*'grid'"):
        FrenzyEnv(workload="synthetic-small", interface="grid")
    with pytest.raises(ConfigError, match="max_plan_gpus.*128"):
        FrenzyEnv(workload="synthetic-small", interface="universal", max_plan_gpus=128)
    with pytest.raises(ConfigError, match="max_plan_gpus.*128"):  # the default interface is the universal one
        SimConfig(max_plan_gpus=128)
    assert SimConfig(max_plan_gpus=128, interface="cluster").max_plan_gpus == 128  # the cluster layout: no limit
    five = ClusterSpec("five", tuple(NodeSpec(t, 4) for t in (
        "H100-80GB", "A100-80GB", "A100-40GB", "V100-32GB", "T4-16GB")))
    with pytest.raises(ConfigError, match="interface='universal' holds at most 4 GPU types.*'five' has 5"):
        FrenzyEnv(cluster=five, workload="synthetic-small", interface="universal")


def test_fewer_plan_gpus_leave_more_slots_absent():
    env = FrenzyEnv(cluster="doubling-64", workload="synthetic-small", interface="universal", max_plan_gpus=8)
    assert env.action_space.n == FrenzyEnv(cluster="large-1024", workload="synthetic-small",
                                           interface="universal").action_space.n
    assert np.flatnonzero(env.sim.plan_present).tolist() == [0, 1, 2, 3]
