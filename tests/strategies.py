"""Hypothesis strategies of random small instances (clusters, workloads, simulator and env options), shared by
the property tests (``test_properties.py``) and the determinism tests (``test_determinism.py``)."""

from __future__ import annotations

from hypothesis import strategies as st

from frenzy_env.testing.fuzzing import HUGE_MODELS, MEDIUM_MODELS, SMALL_MODELS
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import GPU_TYPES, ClusterSpec, NodeSpec
from frenzy_env.world.models import get_model

# mostly small models; a few that fit nowhere on these small clusters
MODEL_POOL = SMALL_MODELS * 4 + MEDIUM_MODELS + HUGE_MODELS


@st.composite
def clusters(draw) -> ClusterSpec:
    """1-4 nodes of 1-8 GPUs (any count, not only powers of two) of 1-3 GPU types."""
    types = draw(st.lists(st.sampled_from(sorted(GPU_TYPES)), min_size=1, max_size=3, unique=True))
    n_nodes = draw(st.integers(1, 4))
    nodes = tuple(NodeSpec(draw(st.sampled_from(types)), draw(st.integers(1, 8))) for _ in range(n_nodes))
    return ClusterSpec("prop", nodes)


@st.composite
def workloads(draw) -> Workload:
    """1-15 jobs, unsorted and tied submit times, a few trace-like jobs (recorded duration, no iterations)."""
    jobs = []
    for i in range(draw(st.integers(1, 15))):
        requested = draw(st.none() | st.integers(1, 16))
        common = dict(
            job_id=i,
            submit_time=draw(st.sampled_from([0.0, 0.0, 1.0, 60.0, 600.0]) | st.floats(0.0, 5e4)),
            model=get_model(draw(st.sampled_from(MODEL_POOL))),
            batch_size=draw(st.sampled_from([1, 2, 3, 8, 16, 64])),
            seq_len=draw(st.sampled_from([128, 512, 1024])),
            requested_gpus=requested,
        )
        if requested is not None and draw(st.booleans()):
            jobs.append(JobSpec(**common, iterations=None, recorded_duration=draw(st.floats(1.0, 1e5))))
        else:
            jobs.append(JobSpec(**common, iterations=draw(st.floats(0.01, 1e5))))
    return Workload("prop", tuple(jobs))


SIM_OPTIONS = st.fixed_dictionaries(
    {
        "predictor": st.sampled_from(["frenzy", "extended", "oracle"]),
        "startup_time": st.sampled_from([0.0, 30.0]),
        "restart_overhead": st.sampled_from([0.0, 10.0]),
        "oom_delay": st.sampled_from([0.0, 30.0, 90.0]),
        "max_plan_gpus": st.sampled_from([1, 2, 4, 64]),
        "placement": st.sampled_from(["best_fit", "spread"]),
        "work_info": st.sampled_from(["exact", "noisy", "none"]),
    }
)
ENV_OPTIONS = st.fixed_dictionaries(
    {
        "queue_slots": st.integers(1, 4),
        "running_slots": st.integers(1, 4),
        "max_steps": st.none() | st.integers(1, 200) | st.just("auto"),
        "max_sim_hours": st.none() | st.floats(0.01, 20.0) | st.just("auto"),
    }
)
