"""The Ray backend of evaluation sweeps: same results as the local loop, retries, failure reports, CLI.

Tests that need Ray skip where it is not installed (the main CI environment); CI runs them in a second
environment with the ``[ray]`` extra. A local Ray instance with 2 CPUs is started once for the module.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from baselines import make_policy
from frenzy_env.cli import main
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import TIMING_METRICS, evaluate
from frenzy_env.workload import make_generator

SEEDS = (0, 1)
WORKLOADS = ("tiny-a", "tiny-b")


def make_env(workload: str) -> FrenzyEnv:
    load = {"tiny-a": 0.7, "tiny-b": 1.2}[workload]
    gen = make_generator("synthetic-small", num_jobs=16, load=load)
    return FrenzyEnv(cluster="frenzy-testbed", workload=gen)


def policies() -> dict:
    return {name: (lambda env, name=name: make_policy(name, env)) for name in ("frenzy", "fifo", "random")}


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    from ray import cloudpickle  # Ray's own copy

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test file
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_results():
    return evaluate(make_env, policies(), WORKLOADS, SEEDS, progress=False)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    keep = [c for c in a.columns if c not in TIMING_METRICS]
    pd.testing.assert_frame_equal(a[keep].reset_index(drop=True), b[keep].reset_index(drop=True))


def test_ray_results_equal_local(ray_local, local_results):
    from frenzy_env.evaluation.distributed import evaluate_ray

    jobs, episodes = local_results
    seen = []
    rjobs, repisodes, failures = evaluate_ray(
        make_env, policies(), WORKLOADS, SEEDS, progress=False, on_episode=lambda j, e: seen.append(len(e))
    )
    assert failures == []
    assert len(repisodes) == len(WORKLOADS) * 3 * len(SEEDS)
    _same(episodes, repisodes)  # same order, same values (but the wall-clock latencies)
    _same(jobs, rjobs)
    assert seen == list(range(1, len(repisodes) + 1))  # partial results reported as each task finished
    assert episodes["avg_jct_h"].nunique() > 1  # the sweep really differs by workload and seed


def test_random_policy_episode_independent_of_history(local_results):
    """The random baseline draws its actions from (its seed, the episode's seed), so one episode run alone
    equals the same episode run after others (what makes the backends agree)."""
    _, episodes = local_results
    _, alone = evaluate(make_env, {"random": policies()["random"]}, ["tiny-b"], [1], progress=False)
    want = episodes[(episodes.policy == "random") & (episodes.workload == "tiny-b") & (episodes.seed == 1)]
    _same(want[alone.columns], alone)


def test_failed_task_is_retried_once(ray_local, local_results, tmp_path, capsys):
    from frenzy_env.evaluation.distributed import evaluate_ray

    marker = tmp_path / "failed-once"

    def flaky(env, marker=str(marker)):  # fails on the first call only, in whichever worker runs it
        if not Path(marker).exists():
            Path(marker).write_text("x")
            raise RuntimeError("transient failure")
        return make_policy("fifo", env)

    _, episodes, failures = evaluate_ray(make_env, {"fifo": flaky}, ["tiny-a"], [0], progress=True)
    assert failures == []
    assert marker.exists()
    want = local_results[1]
    _same(want[(want.policy == "fifo") & (want.workload == "tiny-a") & (want.seed == 0)], episodes)
    assert "seed 0 failed (RuntimeError: transient failure); retrying" in capsys.readouterr().err


def test_task_failing_twice_is_reported_and_others_kept(ray_local, local_results):
    from frenzy_env.evaluation.distributed import evaluate_ray

    def broken(env):
        raise ValueError("this policy never works")

    pols = {"fifo": policies()["fifo"], "broken": broken}
    jobs, episodes, failures = evaluate_ray(make_env, pols, ["tiny-a"], SEEDS, progress=False)
    assert [(f.workload, f.policy, f.seed) for f in failures] == [("tiny-a", "broken", 0), ("tiny-a", "broken", 1)]
    assert all("ValueError: this policy never works" in f.error for f in failures)
    want = local_results[1]
    _same(want[(want.policy == "fifo") & (want.workload == "tiny-a")], episodes)
    assert set(jobs["policy"]) == {"fifo"}


def test_cli_ray_backend_matches_local(ray_local, tmp_path):
    common = ["evaluate", "--policies", "fifo,sjf", "--workload", "synthetic-small", "--max-jobs", "12",
              "--seeds", "2", "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--backend", "ray", "--out", str(tmp_path / "ray")]) == 0
    for name in ("episodes.csv", "jobs.csv"):
        _same(pd.read_csv(tmp_path / "local" / name), pd.read_csv(tmp_path / "ray" / name))
    assert (tmp_path / "ray" / "summary.md").is_file()
    assert ray_local.is_initialized()  # the CLI leaves a Ray it did not start running


def test_connect_when_already_initialised(ray_local):
    from frenzy_env.evaluation.distributed import connect

    assert connect() is False  # already initialised: nothing to do, nothing to shut down later


def test_connect_rejects_num_cpus_with_address():
    from frenzy_env.evaluation.distributed import connect

    with pytest.raises(ConfigError, match="num_cpus"):
        connect(address="127.0.0.1:1", num_cpus=2)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_address_where_nothing_listens_is_a_clear_error_not_a_wait():
    """ray.init would wait minutes for a cluster that is not there; connect() checks the port first."""
    from frenzy_env.evaluation.distributed import _check_listening

    port = _closed_port()
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(ConfigError, match=f"no Ray cluster at address '{address}'.*ray start --head"):
            _check_listening(address)
    with socket.socket() as sock:  # something listening: no complaint
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        _check_listening(f"127.0.0.1:{sock.getsockname()[1]}")
    _check_listening("auto")  # (left to Ray: the address ray start wrote on this machine)


def test_cli_with_a_dead_address_exits_2_naming_it():
    pytest.importorskip("ray")
    port = _closed_port()
    done = subprocess.run(
        [sys.executable, "-m", "frenzy_env.cli", "evaluate", "--backend", "ray", "--address", f"127.0.0.1:{port}",
         "--policies", "fifo", "--workload", "synthetic-small", "--seeds", "1", "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"no Ray cluster at address '127.0.0.1:{port}'" in done.stderr


# ------------------------------------------------------------------ without Ray
def test_ray_backend_without_ray_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code = main(["evaluate", "--backend", "ray", "--policies", "fifo", "--workload", "synthetic-small",
                 "--max-jobs", "5", "--seeds", "1", "--no-progress"])
    assert code == 2
    assert 'pip install -e ".[ray]"' in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--address", "auto"], ["--num-cpus", "2"]])
def test_ray_flags_need_ray_backend(flag, capsys):
    assert main(["evaluate", "--policies", "fifo", *flag, "--no-progress"]) == 2
    assert "--backend ray" in capsys.readouterr().err


def test_core_package_does_not_import_ray():
    code = (
        "import sys, frenzy_env, frenzy_env.cli, frenzy_env.evaluation.episodes, frenzy_env.evaluation.distributed;"
        "import baselines, agents.ppo;"
        "from frenzy_env.cli import build_parser; build_parser();"
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
