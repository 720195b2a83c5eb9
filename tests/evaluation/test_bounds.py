"""Lower bounds on the average JCT (frenzy_env.evaluation.bounds): hand-worked values on tiny instances, and the
bounds' validity against real episodes of several policies (no policy may beat a lower bound)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import frenzy_env  # noqa: F401  (registers the ids)
from baselines import make_policy
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.bounds import (
    BoundInputs,
    _upper_envelope,
    bound_inputs,
    fluid_bound,
    isolated_bound,
    jct_lower_bound,
    list_allocation,
    lp_bound,
    lp_solution,
    relaxed_schedule,
    srpt_flow_times,
)
from frenzy_env.evaluation.episodes import run_episode


def _inputs(release, startup, plan_exec, plan_count, plan_type, capacity) -> BoundInputs:
    return BoundInputs(*(np.asarray(a, dtype=float) for a in (release, startup, plan_exec, plan_count)),
                       np.asarray(plan_type, dtype=np.int64), np.asarray(capacity, dtype=float))


def test_srpt_flow_times_hand_worked():
    # A (0, 4), B (1, 1), C (2, 5): A runs 0-1, B 1-2 (shorter than A's 3 left), A 2-5, C 5-10
    assert srpt_flow_times(np.array([0.0, 1.0, 2.0]), np.array([4.0, 1.0, 5.0])).tolist() == [5.0, 1.0, 8.0]
    # an idle gap: the second job arrives after the first is done
    assert srpt_flow_times(np.array([0.0, 10.0]), np.array([2.0, 3.0])).tolist() == [2.0, 3.0]


def test_isolated_and_fluid_bounds_hand_worked():
    # one type of 10 GPUs; plans of 1 and 10 GPUs. Job 0: 100 s on 1 GPU, 20 s on 10 (1 and 10 x 20 = 200
    # GPU-s: the 1-GPU plan is the efficient one, 100 GPU-s); job 1: 200 s on 1 GPU, 40 s on 10 GPUs.
    inp = _inputs([0.0, 0.0], [5.0, 5.0], [[100.0, 20.0], [200.0, 40.0]], [1, 10], [0, 0], [10])
    assert isolated_bound(inp).tolist() == [25.0, 45.0]  # start-up + fastest plan
    assert inp.gpu_s.tolist() == [[100.0], [200.0]]
    # pooled: 10 GPUs at best efficiency -> 10 s and 20 s of the machine, SRPT from t = 5: flows 10 and 30,
    # plus the start-up 5 each -> JCTs 15 and 35, mean 25
    assert fluid_bound(inp) == pytest.approx(25.0)


def test_lp_bound_single_job_is_its_isolated_time():
    inp = _inputs([100.0], [10.0], [[50.0, 30.0]], [1, 2], [0, 0], [2])
    assert lp_bound(inp, step_s=5.0) == pytest.approx(40.0, rel=1e-6)


def test_lp_bound_sees_contention_the_isolated_bound_misses():
    # two identical jobs at t = 0 on one GPU (one plan: 100 s): any schedule finishes them at 100 and 200
    # (mean JCT 150); alone each takes 100
    inp = _inputs([0.0, 0.0], [0.0, 0.0], [[100.0], [100.0]], [1], [0], [1])
    assert isolated_bound(inp).mean() == 100.0
    lp = lp_bound(inp, step_s=1.0)
    assert 125.0 <= lp <= 150.0 + 1e-6  # mean busy time + e/2 relaxes 150 to no less than 125 (fine grid)
    assert fluid_bound(inp) == pytest.approx(150.0)  # one machine: SRPT is exact here


def test_bound_inputs_validate():
    with pytest.raises(ConfigError, match="startup"):
        _inputs([0.0], [-1.0], [[1.0]], [1], [0], [1])
    with pytest.raises(ConfigError, match="no usable plan"):
        _inputs([0.0], [0.0], [[np.inf]], [1], [0], [1])
    with pytest.raises(ConfigError, match="plan_type"):
        _inputs([0.0], [0.0], [[1.0]], [1], [3], [1])
    with pytest.raises(ConfigError, match="step_s"):
        lp_bound(_inputs([0.0], [0.0], [[1.0]], [1], [0], [1]), step_s=0)


def test_bound_inputs_from_the_simulator_match_its_plans(tiny_env):
    tiny_env.reset(seed=0)
    sim = tiny_env.sim
    inp = bound_inputs(sim)
    assert inp.num_jobs == sim.num_jobs == 3
    cols = np.flatnonzero(sim.plan_present)  # the cluster's plan slots (the universal grid's absent ones left out)
    assert inp.plan_exec.shape == (3, cols.size) and inp.plan_count.tolist() == sim.plan_count[cols].tolist()
    ok = (sim.pred_ok & sim.true_ok)[:, cols]
    j, c = np.argwhere(ok)[0]
    assert inp.plan_exec[j, c] == pytest.approx(sim.work[j] * sim.iter_time[j, cols[c]])
    assert not np.isfinite(inp.plan_exec[~ok]).any()
    assert inp.startup[j] == min(sim.startup_seconds(int(j), int(q)) for q in cols[ok[j]])
    assert inp.capacity.tolist() == [8.0]


@pytest.mark.parametrize("policy", ["fifo", "doubling", "sia_srpt", "srpt_est"])
def test_no_policy_beats_the_bounds(policy):
    """Validity on a real episode: every bound is at most the average JCT a policy reaches."""
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    metrics = run_episode(env, make_policy(policy, env), seed=3).metrics
    env.reset(seed=3)
    b = jct_lower_bound(env.unwrapped.sim, step_s=600.0)
    assert b.jobs == metrics["finished"]
    tight_h = lp_bound(bound_inputs(env.unwrapped.sim), step_s=600.0, plans=True) / 3600.0
    assert b.lp_h <= tight_h + 1e-9  # the plan-level LP is never looser
    for value in (b.isolated_h, b.fluid_h, b.lp_h, tight_h):
        assert 0 < value <= metrics["avg_jct_h"] + 1e-9
    assert b.best_h == max(b.isolated_h, b.fluid_h, b.lp_h)
    assert not math.isnan(b.best_h)


def test_add_jct_bounds_matches_episodes_on_workload_and_seed():
    import pandas as pd

    from frenzy_env.evaluation.episodes import add_jct_bounds

    episodes = pd.DataFrame({"workload": ["a", "a", "b"], "policy": ["x", "y", "x"], "seed": [0, 0, 1],
                             "avg_jct_h": [4.0, 6.0, 3.0]})
    bounds = pd.DataFrame({"workload": ["a", "b"], "seed": [0, 1], "jct_bound_h": [2.0, 1.5]})
    out = add_jct_bounds(episodes, bounds)
    assert out.jct_bound_h.tolist() == [2.0, 2.0, 1.5]
    assert out.jct_over_bound_ratio.tolist() == [2.0, 3.0, 2.0]
    assert out.policy.tolist() == ["x", "y", "x"]  # nothing reordered or lost


def test_evaluate_cli_reports_the_bound(tmp_path, capsys):
    import pandas as pd

    from frenzy_env.cli import main

    out = tmp_path / "ev"
    code = main(["evaluate", "--policies", "fifo,sia_srpt", "--seeds", "1", "--max-jobs", "12", "--bounds",
                 "--no-progress", "--out", str(out)])
    assert code == 0
    assert "jct_over_bound_ratio" in capsys.readouterr().out
    episodes = pd.read_csv(out / "episodes.csv")
    bounds = pd.read_csv(out / "bounds.csv")
    assert len(bounds) == 1 and bounds.jct_bound_h.iloc[0] > 0
    assert (episodes.jct_bound_h == bounds.jct_bound_h.iloc[0]).all()
    assert (episodes.avg_jct_h >= episodes.jct_bound_h).all()  # no policy beats the bound
    assert "jct_over_bound_ratio" in pd.read_csv(out / "summary.csv")


def test_plan_envelope_keeps_only_undominated_plans():
    # speeds 1/100, 1/60, 1/40, 1/35 on 1, 2, 4, 8 GPUs: concave, every plan is a vertex
    env = _upper_envelope(np.array([1.0, 2, 4, 8]), np.array([100.0, 60, 40, 35]))
    assert env == [(1.0, 100.0), (2.0, 60.0), (4.0, 40.0), (8.0, 35.0)]
    # linear speed-up: idling half the time on 8 GPUs matches 4 GPUs, so only the fastest plan is kept
    assert _upper_envelope(np.array([1.0, 2, 4, 8]), np.array([100.0, 50, 25, 12.5])) == [(8.0, 12.5)]
    # a slower plan on more GPUs (8: 1/40 < 1/30 on 4) is dominated, and so is one below the chord of its
    # neighbours (2 GPUs at 1/80 = 0.0125 < 0.0178, the chord's speed from 1 GPU at 1/100 to 4 at 1/30)
    assert _upper_envelope(np.array([1.0, 2, 4, 8]), np.array([100.0, 80, 30, 40])) == [(1.0, 100.0), (4.0, 30.0)]


def test_plan_lp_is_tighter_and_still_a_bound():
    # one type of 2 GPUs, two jobs at t = 0. A: 100 s on 1 GPU, 60 s on 2 (120 GPU-s); B ten times longer.
    # The type-level LP lets A run at 1/60 while paying 100 GPU-s (1.7 GPUs), leaving B a third of a GPU; the
    # plan-level one makes A pay 120 GPU-s for that speed, all of the cluster. A on both GPUs (0-60 s), then B
    # (60-660 s) is a real schedule with mean JCT 360, so both bounds are at most 360
    inp = _inputs([0.0, 0.0], [0.0, 0.0], [[100.0, 60.0], [1000.0, 600.0]], [1, 2], [0, 0], [2])
    loose, tight = lp_bound(inp, step_s=1.0), lp_bound(inp, step_s=1.0, plans=True)
    assert loose < tight - 1.0
    assert tight <= 360.0 + 1e-6
    # with one plan per type the two programs are the same
    one = _inputs([0.0, 0.0], [0.0, 0.0], [[100.0], [100.0]], [1], [0], [1])
    assert lp_bound(one, step_s=1.0, plans=True) == pytest.approx(lp_bound(one, step_s=1.0), rel=1e-6)



def test_relaxed_schedule_hand_worked():
    # the two-job instance above: SRPT gives A both GPUs (0-60 s), then B both (60-660 s)
    inp = _inputs([0.0, 0.0], [0.0, 0.0], [[100.0, 60.0], [1000.0, 600.0]], [1, 2], [0, 0], [2])
    assert relaxed_schedule(inp).tolist() == [60.0, 660.0]
    assert relaxed_schedule(inp, list_allocation(inp, by="work")).tolist() == [60.0, 660.0]  # A: 100 < 1000 GPU-s
    # a static order that puts B first: B 0-600 s, then A 600-660 s
    assert relaxed_schedule(inp, list_allocation(inp, order=np.array([2.0, 1.0]))).tolist() == [660.0, 600.0]
    # preemption at an arrival, after the start-up: one GPU; A (0 s, 100 s of work), B (arrives at 10 s, 5 s of
    # start-up, 20 s of work). A runs 0-15 s; at 15 s B's 20 s beat A's 85 s left: B 15-35 s, A 35-120 s
    pre = _inputs([0.0, 10.0], [0.0, 5.0], [[100.0], [20.0]], [1], [0], [1])
    assert relaxed_schedule(pre).tolist() == pytest.approx([120.0, 35.0])


def test_relaxed_schedule_checks_its_allocation_rule():
    inp = _inputs([0.0, 0.0], [0.0, 0.0], [[100.0, 60.0], [1000.0, np.inf]], [1, 2], [0, 0], [2])
    with pytest.raises(ConfigError, match="over the capacity"):
        relaxed_schedule(inp, lambda t, ready, rem: np.array([1, 0]))  # 2 + 1 GPUs of 2
    with pytest.raises(ConfigError, match="job 1 plan 1, which it cannot use"):
        relaxed_schedule(inp, lambda t, ready, rem: np.array([-1, 1]))
    with pytest.raises(ConfigError, match="one plan per ready job"):
        relaxed_schedule(inp, lambda t, ready, rem: np.array([0]))
    with pytest.raises(ConfigError, match="ran no job"):
        relaxed_schedule(inp, lambda t, ready, rem: np.full(ready.size, -1))
    with pytest.raises(ConfigError, match="by must be"):
        list_allocation(inp, by="speed")
    with pytest.raises(ConfigError, match="order must be"):
        list_allocation(inp, order=np.array([1.0]))


def test_relaxed_schedules_sit_between_the_bounds_and_real_episodes():
    """On a real workload: every relaxed schedule finishes each job no sooner than alone on the cluster, and its
    mean JCT is at least the plan-level LP bound (its world is the one the LP relaxes)."""
    env = gym.make("frenzy/HeteroClusterSmall-v5")
    env.reset(seed=3)
    inp = bound_inputs(env.unwrapped.sim)
    value, completions = lp_solution(inp, step_s=600.0, plans=True)
    assert value == pytest.approx(lp_bound(inp, step_s=600.0, plans=True), rel=1e-9)
    assert (completions >= inp.release + isolated_bound(inp) - 1e-6).all()
    for allocate in (list_allocation(inp), list_allocation(inp, by="work"), list_allocation(inp, order=completions)):
        jct = relaxed_schedule(inp, allocate) - inp.release
        assert (jct >= isolated_bound(inp) - 1e-6).all()
        assert jct.mean() >= value - 1e-6
