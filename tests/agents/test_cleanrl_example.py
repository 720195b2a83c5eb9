"""The single-file PPO example (agents/cleanrl_ppo.py) runs in its short mode: finite losses, an evaluation row
per seed next to FIFO's, and never an illegal action (in training or in evaluation)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from agents import cleanrl_ppo

ROOT = Path(__file__).resolve().parents[2]


def test_quick_mode_trains_and_evaluates(capsys):
    result = cleanrl_ppo.main(["--quick"])
    assert result["args"].quick and result["decisions"] >= 512
    assert result["losses"], "no update ran"
    for row in result["losses"]:
        assert all(math.isfinite(row[k]) for k in ("pg", "v", "entropy", "kl", "clipfrac")), row
    assert result["illegal"] == 0
    assert len(result["eval"]) == result["args"].eval_seeds == 2
    for row in result["eval"]:
        assert row["ppo_invalid"] == 0  # the env counted no illegal action of the policy
        assert math.isfinite(row["ppo_jct_h"]) and math.isfinite(row["fifo_jct_h"]) and row["fifo_jct_h"] > 0
    assert math.isfinite(result["ppo_avg_jct_h"]) and math.isfinite(result["fifo_avg_jct_h"])
    out = capsys.readouterr().out
    assert "PPO avg JCT h" in out and "FIFO avg JCT h" in out and "PPO/FIFO" in out


def test_flags_come_from_the_dataclass():
    args = cleanrl_ppo.parse_args(["--quick", "--num-envs", "3", "--anneal-lr", "false"])
    assert args.num_envs == 3 and args.anneal_lr is False and args.num_steps == cleanrl_ppo.QUICK["num_steps"]
    assert cleanrl_ppo.parse_args([]).total_timesteps == cleanrl_ppo.Args().total_timesteps


def test_runs_as_a_script():
    proc = subprocess.run(
        [sys.executable, "agents/cleanrl_ppo.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "--total-timesteps" in proc.stdout and "--quick" in proc.stdout
