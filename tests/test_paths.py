"""How the package writes files (frenzy_env.paths): whole or not at all, JSON without NaN, JSON Lines flushed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from frenzy_env.paths import (
    append_json_line,
    atomic_open,
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    json_ready,
    json_text,
)


def strict_loads(text: str):
    """``json.loads`` that refuses NaN, Infinity and -Infinity (which standard JSON does not have)."""

    def refuse(name: str):
        raise ValueError(f"not standard JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_strict_loads_refuses_what_json_dumps_writes_by_default():
    with pytest.raises(ValueError, match="NaN"):
        strict_loads(json.dumps({"x": float("nan")}))


def test_a_write_that_raises_leaves_the_earlier_file_whole_and_no_temporary_file(tmp_path):
    path = tmp_path / "table.csv"
    atomic_write_text(path, "a,b\n1,2\n")
    with pytest.raises(RuntimeError, match="killed"), atomic_open(path) as fh:
        fh.write("a,b\n3,")
        raise RuntimeError("killed half way")
    assert path.read_text() == "a,b\n1,2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_the_temporary_file_is_in_the_same_folder_and_replaces_the_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with atomic_open(path) as fh:
        fh.write("new")
        (temporary,) = [p for p in tmp_path.iterdir() if p.name != "out.txt"]
        assert temporary.name.startswith(".out.txt.") and temporary.suffix == ".tmp"
        assert path.read_text() == "old"  # untouched until the block ends
    assert path.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_mode_other_than_write_is_refused(tmp_path):
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb', got 'a'"), atomic_open(tmp_path / "x", "a") as fh:
        fh.write("never written: the mode is refused on entry")


def test_csv_of_a_frame_without_its_index(tmp_path):
    frame = pd.DataFrame({"policy": ["fifo", "srpt"], "avg_jct_h": [1.5, np.nan]})
    atomic_write_csv(tmp_path / "t.csv", frame)
    assert (tmp_path / "t.csv").read_text() == "policy,avg_jct_h\nfifo,1.5\nsrpt,\n"


def test_json_writes_nan_and_infinities_as_null_at_any_depth():
    value = {"a": float("nan"), "b": [1.0, float("inf"), (np.float32(2.5), -np.inf)], "c": {"d": np.float64("nan")},
             "e": np.array([1.0, np.nan]), "f": np.int64(3), "g": "NaN", "h": None}
    assert json_ready(value) == {"a": None, "b": [1.0, None, [2.5, None]], "c": {"d": None}, "e": [1.0, None],
                                 "f": 3, "g": "NaN", "h": None}
    assert strict_loads(json_text(value)) == json_ready(value)


def test_json_file_is_strict_and_ends_in_a_newline(tmp_path):
    path = atomic_write_json(tmp_path / "m.json", {"x": float("-inf"), "p": tmp_path}, default=str)
    text = path.read_text()
    assert text.endswith("}\n") and strict_loads(text) == {"x": None, "p": str(tmp_path)}


def test_json_lines_are_appended_whole_and_strict(tmp_path):
    path = tmp_path / "updates.jsonl"
    append_json_line(path, {"update": 1, "teacher_ce": float("nan")})
    assert path.read_text() == '{"update": 1, "teacher_ce": null}\n'  # on disk when the call returns
    append_json_line(path, {"update": 2, "teacher_ce": 0.5})
    assert [strict_loads(line) for line in path.read_text().splitlines()] == [
        {"update": 1, "teacher_ce": None}, {"update": 2, "teacher_ce": 0.5}]
