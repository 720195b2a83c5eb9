"""Shared fixtures: tiny hand-checkable instances (a cluster, a fixed 3-job workload, an env on them), builders
of jobs, workloads and envs for tests that need their own, and the paths of the optional public data.

The builders are fixtures that return functions (``make_job(0, 10.0, 500.0, model="gpt2-large")``), so test
files never import each other. Data: no test reads a path outside the checkout. ``test_data`` is the folder
of small public extracts kept with the tests (``tests/data``, with sources and licences); ``calibration_csv``
the published peak-memory measurements there; ``cached_trace(NAME)`` a public trace from the ``frenzy data``
cache, skipping with the ``frenzy data fetch NAME`` command where it has not been downloaded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from frenzy_env.env import FrenzyEnv
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import ClusterSpec


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
#: small public extracts kept with the tests (tests/data/README.md gives sources and licences)
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def test_data() -> Path:
    """The folder of public extracts kept with the tests (``tests/data``)."""
    return TEST_DATA


@pytest.fixture(scope="session")
def cached_trace() -> Callable[[str], Path]:
    """``cached_trace("itp-cluster02")``: the file of that public trace in the ``frenzy data`` cache; skips the
    test, naming the command that downloads it, where it is not cached."""
    from frenzy_env.workload.datasets import NotCachedError, resolve

    def get(name: str) -> Path:
        try:
            return resolve(name)
        except NotCachedError:
            pytest.skip(f"public trace {name!r} not downloaded: `frenzy data fetch {name}` runs this test")

    return get


@pytest.fixture(scope="session")
def calibration_csv() -> Path:
    """The published peak-memory measurements kept with the tests (``tests/data/memory_calibration.csv``)."""
    return TEST_DATA / "memory_calibration.csv"
