"""``research/scripts/train_knob.py`` (``frenzy train --agent knob`` until the knob left the product)."""

from __future__ import annotations

import importlib
import json

from agents.model_record import agent_of


def test_a_quick_run_writes_a_knob_model_and_resume_takes_the_new_budget(tmp_path, capsys):
    """A quick run writes a model recorded as the knob agent; ``--resume`` continues it in place with a larger
    ``--timesteps``; a missing ``--config`` file is an error before anything is written."""
    from stable_baselines3 import PPO

    script = importlib.import_module("train_knob")  # research/scripts is on sys.path (conftest.py)
    out = tmp_path / "knob"
    assert script.main(["--config", str(tmp_path / "none.json"), "--out", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err and not out.exists()
    assert script.main(["--quick", "--out", str(out), "--no-progress"]) == 0
    assert agent_of(out / "model.zip") == "knob" and json.loads((out / "config.json").read_text())["agent"] == "knob"
    assert script.main(["--out", str(out), "--resume", "--timesteps", "384", "--no-progress"]) == 0
    assert PPO.load(out / "model.zip").num_timesteps == 384
