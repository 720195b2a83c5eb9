"""The ``frenzy`` command's package: every subcommand is registered, a missing package is reported as one line
naming it and its pip extra (exit 2), and the benchmark's child process answers its one JSON line."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from frenzy_env.cli import COMMANDS, build_parser, main
from frenzy_env.cli.common import missing_package, run_command


def test_every_subcommand_is_registered():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == ["memory", "plan", "evaluate", "benchmark", "train", "reproduce", "data"]
    assert all(callable(c.add_parser) and callable(c.run) for c in COMMANDS)


@pytest.mark.parametrize(
    ("module", "words"),
    [
        ("ray", ["'ray'", 'pip install -e ".[ray]"']),
        ("ray.rllib", ["'ray'", 'pip install -e ".[ray]"']),
        ("sklearn", ["'scikit-learn'", "pip install -e ."]),
        ("sb3_contrib", ["'sb3-contrib'", "pip install -e ."]),
    ],
)
def test_a_missing_package_is_one_line_naming_it_and_exit_2(module, words, monkeypatch, capsys):
    for name in {module.split(".")[0], module}:  # an import of it now fails, even where it was imported before
        monkeypatch.setitem(sys.modules, name, None)
    args = argparse.Namespace(command="train")
    assert run_command(lambda _args: importlib.import_module(module), args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("frenzy: error: frenzy train needs the package")
    assert all(w in err for w in words), err


def test_a_missing_module_of_this_project_is_a_bug_not_a_dependency():
    exc = ModuleNotFoundError("No module named 'baselines.nothing'", name="baselines.nothing")
    assert missing_package(exc, "evaluate") is None
    assert missing_package(ImportError("cannot import name 'x'"), "evaluate") is None


def test_a_command_whose_dependency_is_missing_reports_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sb3_contrib", None)
    for name in [m for m in sys.modules if m == "agents.ppo" or m.startswith("agents.ppo.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, without sb3_contrib
    assert main(["train", "--timesteps", "1", "--no-progress", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "'sb3-contrib'" in err and "Traceback" not in err and err.count("\n") == 1


def test_benchmark_child_process_prints_its_figures():
    spec = {"jobs": 20, "gpus": 64, "policy": "fifo", "budget_s": 60.0}
    proc = subprocess.run(
        [sys.executable, "-m", "frenzy_env.benchmark", "--child", json.dumps(spec)],
        capture_output=True, text=True, timeout=300, check=True,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["complete"] == 1.0 and out["jobs_done"] == 20 and out["peak_rss_mb"] > 0
    bad = subprocess.run([sys.executable, "-m", "frenzy_env.benchmark"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "frenzy benchmark" in bad.stderr


def test_data_command_lists_locates_and_names_traces(tmp_path, capsys, monkeypatch) -> None:
    """`frenzy data list/path` on an empty cache, then a trace placed in the cache used by name in evaluate."""
    from frenzy_env.workload import data_path

    assert main(["data", "--cache-dir", str(tmp_path), "list"]) == 0
    out = capsys.readouterr().out
    assert "itp-cluster02" in out and "philly" in out and "not cached" in out
    assert main(["data", "--cache-dir", str(tmp_path), "path", "itp-cluster02"]) == 2
    assert "frenzy data fetch itp-cluster02" in capsys.readouterr().err
    assert main(["data", "--cache-dir", str(tmp_path), "fetch", "no-such-trace"]) == 2
    assert "no-such-trace" in capsys.readouterr().err
    # a cached trace (here the shipped ITP extract, in the itp format) is found by name, with its format
    (tmp_path / "itp-cluster02.csv").write_bytes(data_path("itp_cluster02_extract.csv").read_bytes())
    monkeypatch.setenv("FRENZY_ENV_CACHE", str(tmp_path))
    assert main(["data", "path", "itp-cluster02"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "itp-cluster02.csv")
    code = main(["evaluate", "--trace", "itp-cluster02", "--policies", "fifo", "--seeds", "1", "--max-jobs", "8",
                 "--json"])
    assert code == 0
    assert '"itp-cluster02"' in capsys.readouterr().out
    assert main(["evaluate", "--trace", "itp-clustr02", "--policies", "fifo", "--seeds", "1"]) == 2
    assert "did you mean 'itp-cluster02'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--num-env-runners", "0"], ["--num-cpus", "1"], ["--iterations", "1"]])
def test_train_refuses_rllib_flags_without_ray(tmp_path, capsys, argv):
    """An RLlib-only flag given to the default sb3 backend is an error before any training starts, also when its
    value is 0 (which compares equal to False); needs no Ray."""
    assert main(["train", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert argv[0] in err and "only to --backend rllib" in err
    assert not (tmp_path / "o").exists()


def test_train_agent_knob_is_an_argparse_error_saying_it_is_a_research_model(tmp_path, capsys):
    """``frenzy train --agent knob`` fails in argparse (exit 2, nothing written), saying the knob agent is a
    research model the product does not train, and how to train it; ``--agent ppo`` parses."""
    out = tmp_path / "knob"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--agent", "knob", "--quick", "--out", str(out)])
    assert exc.value.code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "--agent" in err and "research/knob" in err and "research/scripts/train_knob.py" in err
    assert build_parser().parse_args(["train", "--agent", "ppo", "--quick"]).agent == "ppo"


def test_env_keywords_reach_every_env_and_the_manifest(tmp_path, capsys):
    """``--env KEY=VALUE`` passes a FrenzyEnv keyword to every env (recorded in the manifest's simulator
    options); a misspelt key fails before any episode, naming it; a key with a flag of its own is refused."""
    out = tmp_path / "run"
    argv = ["evaluate", "--policies", "fifo", "--workload", "synthetic-small", "--max-jobs", "6", "--seeds", "1",
            "--no-progress", "--out", str(out), "--env", "memory_margin=0.1", "--env", "efficiency=microbatch"]
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert json.dumps(manifest["env"]).count('"memory_margin": 0.1') == 1
    assert '"efficiency": "microbatch"' in json.dumps(manifest["env"])
    capsys.readouterr()
    assert main([*argv[:-4], "--env", "efficency=microbatch"]) == 2
    assert "did you mean 'efficiency'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["evaluate", "--env", "predictor=frenzy"])
    assert "use --predictor" in capsys.readouterr().err
