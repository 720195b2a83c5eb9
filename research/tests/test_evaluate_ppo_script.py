"""``research/scripts/evaluate_ppo.py``: merging the shards of a test split (``--policies '' --combine``)."""

from __future__ import annotations

import importlib
import sys

import pandas as pd
import pytest

from baselines import make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation.episodes import evaluate


def _script():
    """research/scripts/evaluate_ppo.py as a module (conftest.py puts research/scripts on sys.path)."""
    return importlib.import_module("evaluate_ppo")


def _episodes(seed: int) -> pd.DataFrame:
    _, episodes = evaluate(
        lambda wl, **kw: FrenzyEnv(workload=wl, **kw),
        {"fifo": lambda env: make_policy("fifo", env), "srpt_est": lambda env: make_policy("srpt_est", env)},
        ["synthetic-small"], [seed], progress=False,
    )
    return episodes


def test_combine_alone_merges_shards_without_playing(tmp_path, monkeypatch):
    parts = [_episodes(0), _episodes(1)]
    paths = []
    for k, part in enumerate(parts):
        paths.append(tmp_path / f"shard{k}.csv")
        part.to_csv(paths[-1], index=False)
    out = tmp_path / "out"
    argv = ["evaluate_ppo.py", "--policies", "", "--combine", str(paths[0]), "--combine", str(paths[1]),
            "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    _script().main()
    merged = pd.read_csv(out / "episodes.csv")
    assert len(merged) == 4 and sorted(merged.seed.unique()) == [0, 1]  # both shards' rows, nothing played
    expected = pd.concat(parts, ignore_index=True)
    assert merged.avg_jct_h.tolist() == pytest.approx(expected.avg_jct_h.tolist())
    assert (out / "summary.md").read_text().count("| synthetic-small |") == 2  # one row per policy


def test_an_empty_policy_list_without_files_to_merge_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["evaluate_ppo.py", "--policies", "", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        _script().main()
    assert "--combine" in capsys.readouterr().err


def test_preemption_gives_every_env_preempt_actions(tmp_path, monkeypatch):
    """``--preemption`` plays in envs that offer preempt actions: the preempting planner runs there, and is
    refused (an error naming preemption) without the flag."""
    from frenzy_env.errors import FrenzyError

    argv = ["evaluate_ppo.py", "--workloads", "synthetic-small", "--seeds", "1", "--policies",
            "sia_srpt:preempt=True:move_margin=0.2", "--out", str(tmp_path / "with")]
    monkeypatch.setattr(sys, "argv", [*argv, "--preemption"])
    _script().main()
    played = pd.read_csv(tmp_path / "with" / "episodes.csv")
    assert list(played.policy) == ["sia_srpt:preempt=True:move_margin=0.2"]
    assert (played.finished == played.jobs).all() and (played.invalid_actions == 0).all()
    monkeypatch.setattr(sys, "argv", argv[:-1] + [str(tmp_path / "without")])
    with pytest.raises(FrenzyError, match="preemption"):
        _script().main()
