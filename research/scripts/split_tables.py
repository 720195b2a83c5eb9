"""Per-workload tables of the validation and test splits, shared by the study scripts that fill them
(``jct_bounds.py``, ``relaxed_gap.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents.ppo.config import TrainConfig
from agents.ppo.workloads import make_env, test_workloads, validation_workloads
from frenzy_env.errors import ConfigError


def config_split(path, split: str) -> tuple[TrainConfig, list[tuple[str, Any, int]]]:
    """The TrainConfig in the json at ``path`` (a PPO config, or a knob run's ``config.json``, which nests it
    under ``"train"``) and its ``split`` (``"validation"`` or ``"test"``) workloads, as the study scripts
    read them."""
    if split not in ("validation", "test"):
        raise ConfigError(f"split must be 'validation' or 'test', got {split!r}")
    data = json.loads(Path(path).read_text())
    cfg = TrainConfig.from_dict(data.get("train", data))
    return cfg, (test_workloads if split == "test" else validation_workloads)(cfg)


def fill_table(csv, cfg: TrainConfig, items: list[tuple[str, Any, int]], row_of, desc: str):
    """A per-workload table that resumes: plays each workload of ``items`` not yet in ``csv`` (by its
    ``workload`` column) to its reset, appends ``{"workload": name, "seed": seed, **row_of(sim, seed)}`` (``sim`` its
    :class:`~frenzy_env.simulator.ClusterSimulator`) and rewrites ``csv`` after each; returns the table."""
    import pandas as pd

    from frenzy_env.progress import progress_bar

    csv = Path(csv)
    csv.parent.mkdir(parents=True, exist_ok=True)
    table = pd.read_csv(csv) if csv.is_file() else pd.DataFrame()
    done = set(table.workload) if len(table) else set()
    todo = [i for i in items if i[0] not in done]
    with progress_bar(len(todo), desc=desc, unit="workload") as bar:
        for name, wl, seed in todo:
            env = make_env(cfg, wl)
            env.reset(seed=seed)
            row = {"workload": name, "seed": seed, **row_of(env.sim, seed)}
            table = pd.concat([table, pd.DataFrame([row])], ignore_index=True)
            table.to_csv(csv, index=False)
            bar.update(1)
    return table
