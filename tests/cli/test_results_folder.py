"""A results folder holds one run (frenzy_env.cli.results_folder): ``frenzy evaluate``, ``evaluate --suite``,
``reproduce`` and ``benchmark`` refuse an ``--out`` that is not empty unless ``--overwrite`` (which removes the
command's own files and nothing else), and a run that does not finish leaves ``INCOMPLETE`` and says so."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import baselines
from frenzy_env.cli import main
from frenzy_env.cli.results_folder import BENCHMARK_FILES, EVALUATE_FILES, MARKER, REPRODUCE_FILES, owns
from frenzy_env.versions import ENV_VERSION
from frenzy_env.workload.suites import SUITES, Suite, SyntheticPart

SMALL = ["evaluate", "--workload", "synthetic-small", "--max-jobs", "4", "--no-progress"]


def strict_json(text: str):
    """``json.loads`` that refuses NaN, Infinity and -Infinity (not standard JSON)."""

    def refuse(name: str):
        raise ValueError(f"not standard JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def names(folder) -> set[str]:
    return {p.name for p in folder.iterdir()}


def earlier_run(folder, *files: str) -> None:
    """A folder holding ``files`` (each with the text "old") and a file and a folder of the user's own."""
    folder.mkdir()
    for name in files:
        (folder / name).write_text("old")
    (folder / "notes.txt").write_text("mine")
    (folder / "mine").mkdir()


class _StopsInSecondEpisode(baselines.ScriptedPolicy):
    """FIFO, with Ctrl-C pressed (KeyboardInterrupt) during the second episode it plays."""

    episodes = 0

    def __init__(self, env):
        super().__init__(env)
        self._fifo = baselines.make_policy("fifo", env)

    def reset(self):
        type(self).episodes += 1

    def act(self, mask):
        if type(self).episodes >= 2:
            raise KeyboardInterrupt
        return self._fifo.act(mask)


class _FailsInSecondEpisode(_StopsInSecondEpisode):
    def act(self, mask):
        if type(self).episodes >= 2:
            raise RuntimeError("policy exploded")
        return self._fifo.act(mask)


# ------------------------------------------------------------------------------------ frenzy evaluate
def test_a_folder_that_is_not_empty_is_refused_and_left_as_it_was(tmp_path, capsys):
    out = tmp_path / "results"
    earlier_run(out, "summary.csv")
    code = main([*SMALL, "--policies", "fifo", "--seeds", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"frenzy: error: --out {str(out)!r} is not empty (3 entries: mine, notes.txt, summary.csv): give a new or "
        "empty folder, or add --overwrite to remove what frenzy evaluate writes there first\n"
    )
    assert names(out) == {"mine", "notes.txt", "summary.csv"} and (out / "summary.csv").read_text() == "old"


def test_a_folder_with_many_entries_is_named_with_the_first_four(tmp_path, capsys):
    out = tmp_path / "results"
    earlier_run(out, "a.csv", "b.csv", "c.csv", "d.csv")
    assert main([*SMALL, "--policies", "fifo", "--seeds", "1", "--out", str(out)]) == 2
    assert "(6 entries: a.csv, b.csv, c.csv, d.csv and 2 more)" in capsys.readouterr().err


def test_overwrite_removes_the_commands_files_of_any_earlier_run_and_keeps_the_rest(tmp_path, capsys):
    out = tmp_path / "results"
    # an earlier run with --bounds and another policy, interrupted: files this run would not write itself
    earlier_run(out, "bounds.csv", "schedule_synthetic-small_srpt.png", "summary.md", "suite.csv", MARKER)
    code = main([*SMALL, "--policies", "fifo", "--seeds", "1", "--out", str(out), "--overwrite"])
    assert code == 0, capsys.readouterr().err
    written = names(out) - {"notes.txt", "mine"}
    assert written == {"manifest.json", "jobs.csv", "episodes.csv", "summary.csv", "summary.md", "jct_cdf.png",
                       "utilisation.png", "bars.png", "schedule_synthetic-small_fifo.png"}
    assert all(owns(name, EVALUATE_FILES) for name in written)  # every file it writes is one --overwrite removes
    assert (out / "notes.txt").read_text() == "mine" and (out / "mine").is_dir()
    assert (out / "summary.md").read_text() != "old"
    manifest = strict_json((out / "manifest.json").read_text())
    assert manifest["seeds"] == [0] and [p["name"] for p in manifest["policies"]] == ["fifo"]


def test_overwrite_without_out_is_refused(capsys):
    assert main([*SMALL, "--policies", "fifo", "--seeds", "1", "--overwrite"]) == 2
    assert capsys.readouterr().err == "frenzy: error: --overwrite applies to --out only\n"


def test_an_interrupted_run_leaves_the_marker_and_says_its_folder_is_incomplete(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(baselines.POLICIES, "stops", _StopsInSecondEpisode)
    monkeypatch.setattr(_StopsInSecondEpisode, "episodes", 0)
    out = tmp_path / "results"
    argv = [*SMALL, "--policies", "stops", "--seeds", "2", "--out", str(out)]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 130
    assert err.splitlines() == [
        f"frenzy: 1 finished episode(s) are saved in {out}",
        f"frenzy: interrupted; {out} is incomplete ({out / MARKER} marks it)",
    ]
    assert names(out) == {MARKER, "manifest.json", "jobs.csv", "episodes.csv"}
    marker = (out / MARKER).read_text()
    assert marker.startswith("frenzy evaluate started writing here at ") and "has not finished" in marker
    assert " ".join(["frenzy", *argv]) in marker
    assert pd.read_csv(out / "episodes.csv")[["policy", "seed"]].values.tolist() == [["stops", 0]]
    assert strict_json((out / "manifest.json").read_text())["seeds"] == [0, 1]
    # the incomplete folder is refused as any other; --overwrite replaces it with a whole run
    assert main(argv) == 2
    assert f"is not empty (an incomplete earlier run: {MARKER}, episodes.csv, jobs.csv, manifest.json)" in (
        capsys.readouterr().err)
    monkeypatch.setitem(baselines.POLICIES, "stops", baselines.POLICIES["fifo"])
    assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    assert MARKER not in names(out) and len(pd.read_csv(out / "episodes.csv")) == 2


def test_a_failed_run_leaves_the_marker_and_its_one_line_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(baselines.POLICIES, "fails", _FailsInSecondEpisode)
    monkeypatch.setattr(_FailsInSecondEpisode, "episodes", 0)
    out = tmp_path / "results"
    assert main([*SMALL, "--policies", "fails", "--seeds", "2", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == (
        "frenzy: error: episode 2 (synthetic-small, policy fails, seed 1) failed: RuntimeError: policy exploded; the 1 "
        f"finished episode(s) are saved in {out}; {out} is incomplete ({out / MARKER} marks it) (FRENZY_DEBUG=1 "
        "shows the traceback)\n"
    )
    assert (out / MARKER).is_file() and not (out / "summary.csv").exists()


# ------------------------------------------------------------------------------------- evaluate --suite
def test_a_suite_refuses_a_folder_that_is_not_empty_and_overwrites_plain_evaluate_files(tmp_path, capsys,
                                                                                       monkeypatch):
    tiny = Suite("tiny", "validation", "a test suite", synthetic=SyntheticPart((500,), num_jobs=4, load=0.7))
    monkeypatch.setitem(SUITES, f"{ENV_VERSION}-tiny", tiny)
    out = tmp_path / "suite"
    earlier_run(out, "summary.csv", "bars.png")
    argv = ["evaluate", "--suite", tiny.name, "--policies", "fifo,srpt_est", "--no-progress", "--out", str(out)]
    assert main(argv) == 2
    assert f"--out {str(out)!r} is not empty (4 entries: bars.png, mine, notes.txt, summary.csv)" in (
        capsys.readouterr().err)
    assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    written = names(out) - {"notes.txt", "mine"}
    assert written == {"manifest.json", "jobs.csv", "episodes.csv", "suite.csv", "suite.md", "pressure.csv"}
    assert all(owns(name, EVALUATE_FILES) for name in written)
    assert strict_json((out / "manifest.json").read_text())["suite"] == tiny.name


# ------------------------------------------------------------------------------- reproduce and benchmark
def test_reproduce_refuses_a_folder_that_is_not_empty_and_overwrites_its_own_files(tmp_path, capsys):
    out = tmp_path / "rep"
    earlier_run(out, "claims.md", "jct_asrpt.png")
    argv = ["reproduce", "--scenarios", "marp", "--data-dir", str(tmp_path), "--out", str(out)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"frenzy: error: --out {str(out)!r} is not empty (4 entries: claims.md, jct_asrpt.png, mine, notes.txt): give "
        "a new or empty folder, or add --overwrite to remove what frenzy reproduce writes there first\n"
    )
    assert main([*argv, "--overwrite", "--no-progress"]) == 0, capsys.readouterr().err
    written = names(out) - {"notes.txt", "mine"}
    assert "claims.md" in written and "jct_asrpt.png" not in written and MARKER not in written  # marp only
    assert all(owns(name, REPRODUCE_FILES) for name in written)
    assert (out / "claims.md").read_text() != "old"


def test_benchmark_refuses_a_folder_that_is_not_empty_and_overwrites_its_own_files(tmp_path, capsys):
    out = tmp_path / "bench"
    earlier_run(out, "benchmark.png", "benchmark.json")
    argv = ["benchmark", "--quick", "--sections", "marp", "--no-plot", "--quiet", "--out", str(out)]
    assert main(argv) == 2
    assert "what frenzy benchmark writes there first" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0, capsys.readouterr().err
    written = names(out) - {"notes.txt", "mine"}
    assert written == {"benchmark.csv", "benchmark.json", "benchmark.md"}  # the earlier plot is gone
    assert all(owns(name, BENCHMARK_FILES) for name in written)
    assert strict_json((out / "benchmark.json").read_text())["mode"] == "quick"


def _stubbed(monkeypatch, command: str, write) -> list[str]:
    """``frenzy COMMAND``'s argv with its run stubbed out and its writer replaced by ``write(out)``."""
    if command == "reproduce":
        monkeypatch.setattr("frenzy_env.reproduce.runner.run_reproduce", lambda *_a, **_k: None)
        monkeypatch.setattr("frenzy_env.reproduce.report.write_outputs", lambda _result, out: write(out))
        return ["reproduce", "--scenarios", "marp"]
    monkeypatch.setattr("frenzy_env.cli.benchmark.run_benchmark", lambda *_a, **_k: None)
    monkeypatch.setattr("frenzy_env.cli.benchmark.write_outputs", lambda _res, _machine, out, *_a, **_k: write(out))
    return ["benchmark", "--quick", "--sections", "marp", "--quiet"]


@pytest.mark.parametrize("command", ["reproduce", "benchmark"])
def test_reproduce_or_benchmark_interrupted_while_writing_leaves_the_marker_and_says_so(tmp_path, capsys,
                                                                                       monkeypatch, command):
    first = {"reproduce": "claims.md", "benchmark": "benchmark.csv"}[command]

    def write_one_then_stop(out):
        (out / first).write_text("new")
        raise KeyboardInterrupt

    argv = _stubbed(monkeypatch, command, write_one_then_stop)
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 130
    assert capsys.readouterr().err == f"frenzy: interrupted; {out} is incomplete ({out / MARKER} marks it)\n"
    assert names(out) == {MARKER, first}
    assert (out / MARKER).read_text().startswith(f"frenzy {command} started writing here at ")


@pytest.mark.parametrize("command", ["reproduce", "benchmark"])
def test_reproduce_or_benchmark_interrupted_before_writing_leaves_the_folder_as_it_was(tmp_path, capsys,
                                                                                       monkeypatch, command):
    first = {"reproduce": "claims.md", "benchmark": "benchmark.csv"}[command]
    argv = _stubbed(monkeypatch, command, lambda out: [])
    monkeypatch.setattr("frenzy_env.reproduce.runner.run_reproduce" if command == "reproduce"
                        else "frenzy_env.cli.benchmark.run_benchmark", _interrupt)
    out = tmp_path / "out"
    earlier_run(out, first)
    assert main([*argv, "--out", str(out), "--overwrite"]) == 130
    assert capsys.readouterr().err == "frenzy: interrupted\n"  # the earlier run's files are still whole
    assert names(out) == {first, "notes.txt", "mine"} and (out / first).read_text() == "old"


@pytest.mark.parametrize("bad", [["reproduce", "--calibration", "none.csv"],
                                 ["benchmark", "--quick", "--sections", "marp", "--policies", "psychic", "--quiet"]])
def test_reproduce_or_benchmark_with_a_bad_value_never_creates_the_folder(tmp_path, capsys, monkeypatch, bad):
    monkeypatch.chdir(tmp_path)
    assert main([*bad, "--out", "out"]) == 2
    assert "is incomplete" not in capsys.readouterr().err and not (tmp_path / "out").exists()


def _interrupt(*_args, **_kwargs):
    raise KeyboardInterrupt
