"""frenzy reproduce: verdict logic, MARP rows from a calibration CSV, and a tiny end-to-end run."""

from __future__ import annotations

import math

import pytest

from frenzy_env.cli import main
from frenzy_env.errors import UnknownNameError
from frenzy_env.reproduce import (
    ReproduceConfig,
    claims_markdown,
    marp_accuracy,
    run_reproduce,
    verdict,
)

CSV_TEXT = (
    "case,model,arch,params,vocab,hidden,layers,heads,seq_len,micro_batch,grad_accum,dp,tp,precision,optimizer,"
    "recompute,zero_stage,gpu,metric,measured_mib,source\n"
    "A1,bert-large-uncased,encoder,335000000,30522,1024,24,16,512,4,1,1,1,fp32,adamw,none,0,V100,"
    "nvidia-smi used (includes 1343 MiB CUDA context),14949,test\n"
    "C1,gpt2-124M,decoder,124475904,50257,768,12,12,1024,32,1,4,1,bf16,adamw,none,0,A100,"
    "static allocation per GPU (llm.c),16661,test\n"
)


@pytest.mark.parametrize(
    ("mean", "half", "lo", "hi", "null", "expected"),
    [
        (0.15, 0.02, 0.12, 0.18, 0.0, "reproduced"),
        (0.05, 0.02, 0.12, 0.18, 0.0, "same direction, smaller effect"),
        (0.40, 0.05, 0.12, 0.18, 0.0, "same direction, larger effect"),
        (0.01, 0.05, 0.12, 0.18, 0.0, "not significant (CI includes no effect)"),
        (-0.20, 0.05, 0.12, 0.18, 0.0, "NOT reproduced: opposite direction"),
        (3.0, 0.5, 10.0, 10.0, 1.0, "same direction, smaller effect"),
        (0.95, 0.01, 0.92, 0.98, None, "reproduced"),
        (0.80, 0.05, 0.92, 0.98, None, "differs: ours lower"),
        (math.nan, math.nan, 0.1, 0.2, 0.0, "not available"),
    ],
)
def test_verdict(mean, half, lo, hi, null, expected):
    assert verdict(mean, half, lo, hi, null) == expected


def test_marp_accuracy_rows(tmp_path):
    path = tmp_path / "cal.csv"
    path.write_text(CSV_TEXT)
    recs = marp_accuracy(path)
    assert [r["case"] for r in recs] == ["A1", "C1"]
    for r in recs:
        for method in ("frenzy", "extended"):
            acc = r[f"{method}_acc"]
            assert acc == pytest.approx(1 - abs(r[f"{method}_mib"] - r["measured_mib"]) / r["measured_mib"])


def test_unknown_scenario():
    with pytest.raises(UnknownNameError):
        ReproduceConfig(scenarios=("nope",))


def test_tiny_run_has_expected_rows(tmp_path):
    cal = tmp_path / "cal.csv"
    cal.write_text(CSV_TEXT)
    cfg = ReproduceConfig(
        quick=True, seeds=2, jobs=6, scenarios=("frenzy_sia", "marp"), data_dir=None, calibration=cal,
        progress=False, episode_budget_s=30,
    )
    result = run_reproduce(cfg, log=lambda _msg: None)
    claims = [(r.claim, r.scenario) for r in result.rows]
    wl = "itp-default-6"
    for claim in (
        "Frenzy avg JCT lower than Sia",
        "Frenzy GPU-hours vs Sia (control)",
        "Frenzy avg JCT lower than opportunistic (fifo)",
        "Scheduling overhead per decision, Sia / Frenzy",
    ):
        assert (claim, wl) in claims
    assert ("MARP accuracy (frenzy method)", "marp (2 cases)") in claims
    assert ("MARP accuracy (extended method)", "marp (2 cases)") in claims
    marp = {r.claim: r for r in result.rows if r.claim.startswith("MARP")}
    assert marp["MARP accuracy (frenzy method)"].n == 2
    assert marp["MARP accuracy (extended method)"].n == 2
    assert marp["MARP accuracy (extended, held-out cases only)"].n == 1  # A1 is a fitted case
    assert all(not math.isnan(r.mean) for r in marp.values())
    # Sia and fifo always exist: their episodes ran on both seeds
    ran = {(e["policy"], e["seed"]) for e in result.episodes}
    assert {("sia", 0), ("sia", 1), ("fifo", 0), ("fifo", 1)} <= ran
    md = claims_markdown(result)
    assert md.count("\n| ") >= 1 + len(result.rows)
    assert "| claim | paper | ours (mean ± 95% CI) | scenario | verdict |" in md


def test_cli_writes_table_and_skips_missing_calibration(tmp_path, capsys):
    out = tmp_path / "out"
    code = main([
        "reproduce", "--scenarios", "marp", "--calibration", str(tmp_path / "none.csv"), "--out", str(out),
    ])
    assert code == 2  # a named file that does not exist is a user error
    code = main(["reproduce", "--scenarios", "marp", "--data-dir", str(tmp_path), "--out", str(out)])
    assert code == 0
    text = (out / "claims.md").read_text()
    assert "skipped: no calibration CSV" in text
    assert (out / "claims.csv").is_file()


def test_marp_on_calibration_cases(calibration_csv):
    recs = marp_accuracy(calibration_csv)
    assert len(recs) >= 4
    assert all(r["measured_mib"] > 0 for r in recs)
