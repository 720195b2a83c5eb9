"""research/scripts/split_tables.py: a config's split as the study scripts read it, and a per-workload table that
resumes."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from split_tables import config_split, fill_table

from agents.ppo.config import TrainConfig
from frenzy_env.errors import ConfigError


def test_config_split_and_a_resumable_table(tmp_path):
    config = tmp_path / "config.json"  # a knob run's config nests the TrainConfig under "train"
    config.write_text(json.dumps({"train": TrainConfig().to_dict(), "levels": [0.0, 0.2]}))
    cfg, items = config_split(config, "validation")
    assert [name for name, _, _ in items[:2]] == ["synthetic#500", "synthetic#501"]
    assert config_split(config, "test")[1][0][0] == "synthetic#1000"
    flat = tmp_path / "flat.json"  # a PPO config: the TrainConfig itself
    flat.write_text(json.dumps(TrainConfig().to_dict()))
    assert [name for name, _, _ in config_split(flat, "validation")[1]] == [name for name, _, _ in items]
    with pytest.raises(ConfigError, match="split must be"):
        config_split(config, "train")
    csv = tmp_path / "out" / "table.csv"
    table = fill_table(csv, cfg, items[:1], lambda sim, seed: {"jobs": sim.num_jobs, "twice": 2 * seed}, "t")
    assert table.to_dict("records") == [{"workload": "synthetic#500", "seed": 500, "jobs": 200, "twice": 1000}]

    def never(sim, seed):
        raise AssertionError("a workload already in the table was played again")

    again = fill_table(csv, cfg, items[:1], never, "t")  # resumed: nothing left to play
    assert again.to_dict("records") == table.to_dict("records")
    assert pd.read_csv(csv).workload.tolist() == ["synthetic#500"]
