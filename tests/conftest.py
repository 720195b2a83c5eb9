"""Shared fixtures: tiny hand-checkable instances (a cluster, a fixed 3-job workload, an env on them), builders
of jobs, workloads and envs for tests that need their own, and the paths of the optional public data.

The builders are fixtures that return functions (``make_job(0, 10.0, 500.0, model="gpt2-large")``), so test
files never import each other. Data: ``shared_data`` is :func:`frenzy_env.paths.shared_data_dir` (None on a
clean checkout; ``FRENZY_ENV_DATA=/nonexistent`` simulates one); ``calibration_csv`` is the shared
``memory/calibration.csv`` when present, else the sample shipped in ``frenzy_env/data``, so calibration tests
never skip.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from frenzy_env.cluster import ClusterSpec
from frenzy_env.env import FrenzyEnv
from frenzy_env.paths import shared_data_dir
from frenzy_env.workload import JobSpec, Workload, data_path

CALIBRATION_SAMPLE = "calibration_sample.csv"


def _job(job_id: int, submit_time: float = 0.0, iterations: float | None = 1000.0, *, model="gpt2", batch_size=8,
         seq_len=1024, **kw) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time=submit_time, model=model, batch_size=batch_size, seq_len=seq_len,
                   iterations=iterations, **kw)


def _workload(*jobs: JobSpec, name: str = "tiny") -> Workload:
    return Workload(name, tuple(jobs))


def _env(cluster: ClusterSpec | str, jobs: list[JobSpec] | tuple[JobSpec, ...], **kw) -> FrenzyEnv:
    return FrenzyEnv(cluster=cluster, workload=_workload(*jobs), **kw)


# ------------------------------------------------------------------------------------------- builders
@pytest.fixture
def make_job() -> Callable[..., JobSpec]:
    """``make_job(job_id, submit_time=0, iterations=1000, *, model="gpt2", batch_size=8, seq_len=1024, **kw)``."""
    return _job


@pytest.fixture
def make_workload() -> Callable[..., Workload]:
    """``make_workload(*jobs, name="tiny")``: a fixed workload of the given jobs."""
    return _workload


@pytest.fixture
def make_env() -> Callable[..., FrenzyEnv]:
    """``make_env(cluster, jobs, **env_kwargs)``: a FrenzyEnv on a fixed workload of ``jobs``."""
    return _env


# ------------------------------------------------------------------------------------- tiny instances
@pytest.fixture
def tiny_cluster() -> ClusterSpec:
    """2 nodes x 4 A100-80GB: every plan of a gpt2 job fits."""
    return ClusterSpec.homogeneous("A100-80GB", 2, 4)


@pytest.fixture
def tiny_workload() -> Workload:
    """3 gpt2 jobs (batch 8, sequence 1024) of 1000, 2000 and 500 iterations, submitted at t = 0, 10 and 20 s."""
    return _workload(_job(0, 0.0, 1000.0), _job(1, 10.0, 2000.0), _job(2, 20.0, 500.0))


@pytest.fixture
def tiny_env(tiny_cluster: ClusterSpec, tiny_workload: Workload) -> FrenzyEnv:
    """The env on the tiny cluster and workload (default settings)."""
    return FrenzyEnv(cluster=tiny_cluster, workload=tiny_workload)


# ----------------------------------------------------------------------------------------------- data
@pytest.fixture(scope="session")
def shared_data() -> Path | None:
    """The optional public data folder, or None (see :mod:`frenzy_env.paths`)."""
    return shared_data_dir()


@pytest.fixture(scope="session")
def shared_file(shared_data: Path | None) -> Callable[[str], Path]:
    """``shared_file("traces/itp/cluster02.csv")``: that file of the shared data folder; skips the test where
    it is absent."""

    def get(relative: str) -> Path:
        path = shared_data / relative if shared_data is not None else None
        if path is None or not path.exists():
            pytest.skip(f"shared data absent: {relative} (see FRENZY_ENV_DATA)")
        return path

    return get


@pytest.fixture(scope="session")
def calibration_csv(shared_data: Path | None) -> Path:
    """The shared ``memory/calibration.csv`` when present, else the shipped 5-row sample."""
    if shared_data is not None and (shared_data / "memory" / "calibration.csv").is_file():
        return shared_data / "memory" / "calibration.csv"
    return data_path(CALIBRATION_SAMPLE)


def play_out(env, policy, max_steps: int = 1000) -> dict:
    """Step ``env`` with ``policy`` from where it stands (invariants checked after each step) until the episode
    ends; the last info. Fails if it does not end within ``max_steps`` (the policy loops). Test modules import
    it (``from conftest import play_out``: pytest puts the tests folder on the path)."""
    for _ in range(max_steps):
        action, _ = policy.predict(None, action_masks=env.action_masks())
        _, _, term, trunc, info = env.step(int(action))
        env.sim.check_invariants()
        if term or trunc:
            return info
    raise AssertionError("episode did not end: the policy loops")


def play_episode(env, policy, max_steps: int = 10_000) -> dict:
    """Reset ``env`` (seed 0) and ``policy``, then :func:`play_out`."""
    env.reset(seed=0)
    policy.reset()
    return play_out(env, policy, max_steps)

