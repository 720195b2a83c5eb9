"""The invariant checker's pacing rules (``SimConfig.resize_cooldown``, ``one_action_per_instant``): a job acted
on twice at one instant and a resize or preemption inside the cooldown are violations; legal play is not. The
violations are made by switching the simulator's own rules off behind its config's back (a simulator bug)."""

from __future__ import annotations

import math

import pytest

from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.testing.checker import InvariantChecker, InvariantViolation
from frenzy_env.world.cluster import ClusterSpec

A100_1x8 = ClusterSpec.from_counts("t1", {"A100-80GB": (1, 8)}, reference_gpu_type="A100-80GB")
FREE = dict(startup_time=0.0, restart_overhead=0.0, load_bandwidth=math.inf, checkpoint_bandwidth=math.inf)
# the one-action rule alone: no cooldown (env v5's; v6's default of 60 s would be the first rule broken)
ONE_ACTION_ONLY = dict(one_action_per_instant=True, resize_cooldown=None)


def _checked(make_job, make_workload, **config) -> tuple[ClusterSimulator, InvariantChecker, int, int]:
    sim = ClusterSimulator(A100_1x8, make_workload(make_job(0, 0.0, 1e6)), SimConfig(**FREE, **config))
    return sim, InvariantChecker.for_simulator(sim), sim.plan_index("A100-80GB", 1), sim.plan_index("A100-80GB", 2)


def _unruled(sim: ClusterSimulator) -> None:
    """A simulator that ignores the pacing rules its config sets."""
    sim._paced = sim._one_action = False
    sim._cooldown = 0.0


def _wait(sim: ClusterSimulator, checker: InvariantChecker, t: float) -> None:
    sim.request_wakeup(t)
    sim.advance()
    checker.after_sim_action()


def test_a_resize_at_the_instant_of_the_start_is_a_violation(make_job, make_workload):
    """(Without a cooldown: the one-action rule alone.)"""
    sim, checker, p1, p2 = _checked(make_job, make_workload, **ONE_ACTION_ONLY)
    _unruled(sim)
    assert sim.start(0, p1)
    checker.after_sim_action()
    assert sim.resize(0, p2)
    with pytest.raises(InvariantViolation, match="job 0 acted on twice at 0.0"):
        checker.after_sim_action()


def test_a_restart_at_the_instant_of_a_preemption_is_a_violation(make_job, make_workload):
    """(Without a cooldown, so that the job may be preempted at 5: the one-action rule alone.)"""
    sim, checker, p1, _ = _checked(make_job, make_workload, **ONE_ACTION_ONLY)
    assert sim.start(0, p1)
    checker.after_sim_action()
    _wait(sim, checker, 5.0)
    assert sim.preempt(0)
    checker.after_sim_action()  # legal: the first action at 5
    _unruled(sim)
    assert sim.start(0, p1)
    with pytest.raises(InvariantViolation, match="job 0 acted on twice at 5.0"):
        checker.after_sim_action()


@pytest.mark.parametrize("action", ["resize", "preempt"])
def test_a_resize_or_preemption_inside_the_cooldown_is_a_violation(action, make_job, make_workload):
    sim, checker, p1, p2 = _checked(make_job, make_workload, resize_cooldown=60.0)
    assert sim.start(0, p1)
    checker.after_sim_action()
    _wait(sim, checker, 59.0)
    _unruled(sim)
    assert sim.resize(0, p2) if action == "resize" else sim.preempt(0)
    word = "resized" if action == "resize" else "preempted"
    with pytest.raises(InvariantViolation, match=f"job 0 {word} at 59.0, within the 60.0 s cooldown"):
        checker.after_sim_action()


def test_legal_play_under_both_rules_passes(make_job, make_workload):
    """Start at 0, resize at 60, preempt at 120, start again at 121 (the preemption's wake-up) and resize at
    181: every action after the cooldown and one per instant."""
    sim, checker, p1, p2 = _checked(make_job, make_workload, resize_cooldown=60.0, one_action_per_instant=True)
    assert sim.start(0, p1)
    checker.after_sim_action()
    for t, act in ((60.0, lambda: sim.resize(0, p2)), (120.0, lambda: sim.preempt(0)),
                   (121.0, lambda: sim.start(0, p1)), (181.0, lambda: sim.resize(0, p2))):
        _wait(sim, checker, t)
        assert act()
        checker.after_sim_action()
    assert [a.outcome for a in sim.attempts] == ["resized", "preempted", "resized", "running"]
