"""The policy surface: the Policy protocol, the read-only SimView, and baselines that read only the view."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np
import pytest

from baselines import POLICIES, make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.policy import Policy
from frenzy_env.simulator.view import FUTURE, QUEUED, SimView

STATIC_ARRAYS = (
    "plan_type", "plan_count", "plan_counts_levels", "max_node_gpus", "submit", "work", "work_estimate", "pred_ok",
    "layout_tp", "iter_time",
)
STATE = ("now", "arrived", "finished", "rejected", "oom_failures", "status", "done_iters", "oom_known",
         "job_restarts", "running", "free")


@pytest.fixture
def env() -> FrenzyEnv:
    e = FrenzyEnv(workload="synthetic-small")
    e.reset(seed=0)
    return e


def _advance(env: FrenzyEnv, steps: int) -> None:
    """Some legal steps (a start when one is legal, else wait), so that jobs run and time passes."""
    for _ in range(steps):
        legal = np.flatnonzero(env.action_masks())
        _, _, terminated, truncated, _ = env.step(int(legal[-1]))
        if terminated or truncated:
            return


def test_every_policy_satisfies_the_protocol(env):
    for name in POLICIES:
        assert isinstance(make_policy(name, env), Policy), name
    pytest.importorskip("sb3_contrib")
    from agents.ppo import PPOPolicy

    assert isinstance(PPOPolicy(model=None, env=env), Policy)
    from agents.rllib import RLlibPolicy  # imports no Ray

    assert issubclass(RLlibPolicy, Policy)
    assert not isinstance(object(), Policy)


def test_view_follows_the_simulator(env):
    view = env.view
    assert isinstance(view, SimView)
    _advance(env, 40)
    assert env.view is view  # one view per simulator
    sim = env.sim
    assert view.now == sim.now and view.arrived == int((sim.status != FUTURE).sum()) > 0
    assert view.finished == sim.finished and view.oom_failures == sim.oom_failures
    assert view.status is sim.status and view.done_iters is sim.done_iters and view.oom_known is sim.oom_known
    assert dict(view.running) == sim.running and len(view.running) > 0
    assert (view.free == sim.state.free).all() and (view.free_by_type() == sim.state.free_by_type()).all()
    assert view.job_restarts.tolist() == [r.restarts for r in sim.records]
    queued = np.flatnonzero(sim.status == QUEUED)
    assert (view.available_plans(queued) == sim.available_plans(queued)).all()
    assert view.next_event_time() == sim.next_event_time()
    assert view.has_pending_events() == sim.has_pending_events()
    assert [view.progress(j) for j in range(sim.num_jobs)] == [sim.progress(j) for j in range(sim.num_jobs)]
    assert any(view.progress(j) > view.done_iters[j] for j in view.running)  # running jobs: counted to now
    for name in STATIC_ARRAYS:
        assert np.array_equal(getattr(view, name), getattr(sim, name)), name
    assert view.jobs is sim.jobs and view.cluster is sim.cluster and view.config is sim.config
    env.reset(seed=1)  # a generated workload: a new simulator, hence a new view
    assert env.view is not view and env.view.now == env.sim.now


def test_view_is_read_only(env):
    _advance(env, 40)
    view = env.view
    for name in ("num_jobs", "jobs", "config", "brand_new", *STATIC_ARRAYS, *STATE):
        with pytest.raises(AttributeError):
            setattr(view, name, 0)
    with pytest.raises(AttributeError):
        del view.plan_count
    for name in STATIC_ARRAYS:
        array = getattr(view, name)
        assert not array.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            array[(0,) * array.ndim] = array[(0,) * array.ndim]
    assert env.sim.done_iters.flags.writeable  # the simulator's own state arrays are untouched
    job = next(iter(view.running))
    with pytest.raises(TypeError):
        view.running[job] = None  # type: ignore[index]


def test_a_pickled_env_has_a_view_of_its_own_simulator(env):
    _advance(env, 20)
    copy = pickle.loads(pickle.dumps(env))
    _advance(copy, 20)
    assert copy.view.now == copy.sim.now != env.view.now == env.sim.now


def test_baselines_never_read_the_simulator():
    """Baselines read the simulator only through ``env.view`` (no ``.sim``, nothing private of the view)."""
    for path in sorted((Path(__file__).resolve().parents[1] / "baselines").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr != "sim", f"{path.name}:{node.lineno} reads .sim"
                if isinstance(node.value, ast.Name) and node.value.id == "view":
                    assert not node.attr.startswith("_"), f"{path.name}:{node.lineno} reads view.{node.attr}"
            if isinstance(node, ast.ImportFrom):
                assert node.module != "frenzy_env.simulator", f"{path.name}:{node.lineno} imports the simulator"
