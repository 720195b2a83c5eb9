"""frenzy reproduce: verdict logic, MARP rows from a calibration CSV, and a tiny end-to-end run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from frenzy_env.cli import main
from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.reproduce import (
    ClaimRow,
    CopiesGenerator,
    HistorySplit,
    ReproduceConfig,
    claim_from_values,
    marp_accuracy,
    reason,
    run_reproduce,
    verdict,
)
from frenzy_env.reproduce_report import claims_markdown

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
        "Frenzy avg JCT lower than Sia (requested GPU counts)",
        "Frenzy avg JCT vs elastic Sia (context)",
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
    # Sia (requested counts and elastic) and fifo always exist: their episodes ran on both seeds
    ran = {(e["policy"], e["seed"]) for e in result.episodes}
    assert {("sia[requested]", 0), ("sia[requested]", 1), ("sia", 0), ("fifo", 0), ("fifo", 1)} <= ran
    headline = next(r for r in result.rows if r.claim == "Frenzy avg JCT lower than Sia (requested GPU counts)")
    assert headline.comparator.startswith("sia[requested]") and headline.n == 2 and headline.reason
    md = claims_markdown(result)
    assert md.count("\n| ") >= 1 + len(result.rows)
    assert "| claim | paper | ours (mean ± 95% CI) | comparator | scenario | verdict | reason |" in md
    # every row with a number says why its verdict follows
    assert all(r.reason for r in result.rows if r.n)


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


def test_reason_names_the_interval_and_the_paper():
    assert reason("reproduced", "10%", "20%", "12%", "18%", "0%", 5) == (
        "our 95% CI 10% to 20% (n=5) overlaps the paper's 12% to 18%"
    )
    assert reason("same direction, smaller effect", "1%", "5%", "58%", "58%", "0%", 3).endswith("below the paper's 58%")
    assert "contains 0%" in reason("not significant (CI includes no effect)", "-1%", "5%", "12%", "18%", "0%", 3)
    row = claim_from_values(ClaimRow("c", "p", "s"), [0.30, 0.32, 0.31], 0.58, 0.58, note="a cause")
    assert row.verdict == "same direction, smaller effect"
    assert row.reason.startswith("our 95% CI 28.5% to 33.5% (n=3) lies below the paper's 58%") and row.reason.endswith(
        "; a cause"
    )


def test_history_split_cuts_one_draw_in_two():
    from frenzy_env.workload import SyntheticGenerator

    base = SyntheticGenerator(num_jobs=50, load=1.2, cluster="doubling-64", recurring_fraction=0.8, max_gpus=8)
    split = HistorySplit(base)
    full = base.generate(3)
    hist, tail = split.history(3), split.generate(3)
    assert len(hist) == 40 and len(tail) == split.num_jobs == 10
    assert [j.job_id for j in tail] == list(range(10)) and tail[0].submit_time == 0.0
    shift = full[40].submit_time
    for job, orig in zip(tail, full.jobs[40:]):
        assert job.submit_time == pytest.approx(orig.submit_time - shift)
        assert (job.group, job.model, job.iterations) == (orig.group, orig.model, orig.iterations)
    assert hist.jobs == full.jobs[:40]
    with pytest.raises(ConfigError, match="fraction"):
        HistorySplit(base, fraction=1.0)


def test_copies_generator_is_one_job_under_poisson_arrivals():
    from frenzy_env.cluster import ClusterSpec
    from frenzy_env.env import FrenzyEnv

    gen = CopiesGenerator(num_jobs=400, load=0.5)
    wl = gen.generate(0)
    assert len({(j.model.name, j.batch_size, j.iterations, j.requested_gpus) for j in wl}) == 1
    env = FrenzyEnv(cluster="doubling-64", workload=gen)
    env.reset(seed=0)
    sim = env.unwrapped.sim
    one = sim.plan_index(sim.gpu_types[0], 1)
    assert sim.iter_time[0, one] * sim.work[0] == pytest.approx(8 * 3600, rel=1e-6)  # 8 h on one V100
    # rate = load x 64 GPUs / 8 h = 4 jobs per hour: mean gap 900 s (399 gaps: within 15%)
    gaps = np.diff([j.submit_time for j in wl])
    assert ClusterSpec.preset("doubling-64").num_gpus == 64
    assert gaps.mean() == pytest.approx(900.0, rel=0.15)
    assert gen.generate(0).jobs == wl.jobs and gen.generate(1).jobs != wl.jobs
    with pytest.raises(ConfigError, match="load"):
        CopiesGenerator(num_jobs=3, load=0)


def test_tiny_run_of_the_papers_own_settings():
    cfg = ReproduceConfig(quick=True, seeds=2, jobs=6, scenarios=("asrpt", "doubling", "predictors"), progress=False,
                          episode_budget_s=60)
    result = run_reproduce(cfg, log=lambda _msg: None)
    claims = {(r.claim, r.scenario): r for r in result.rows}
    strict = claims[("A-SRPT total JCT lower than strict FIFO", "asrpt-testbed-6")]
    assert strict.comparator.startswith("fifo_strict") and strict.n == 2
    assert claims[("A-SRPT forest (trained on history) vs perfect prediction (testbed)", "asrpt-testbed-6")].n == 2
    assert claims[("A-SRPT forest (cold start) vs perfect prediction (testbed)", "asrpt-testbed-6")].n == 2
    moderate = claims[("Doubling precompute vs eight GPUs, moderate contention (load 0.5)", "doubling64-moderate-6")]
    assert moderate.n == 2 and moderate.comparator.startswith("doubling[eight]")
    ran = {e["policy"] for e in result.episodes}
    assert {"asrpt[forest,history]", "asrpt[forest,cold]", "asrpt[perfect]", "fifo_strict", "fifo"} <= ran
    assert {"frenzy[pred=frenzy]", "frenzy", "frenzy[pred=oracle]", "fifo[pred=frenzy]", "fifo[pred=oracle]"} <= ran
    table = result.tables["predictors"]
    assert len(table) == 2 + 2 * 3  # header, rule, (frenzy, fifo) x 3 predictors
    assert "| policy | predictor | avg JCT (h) | GPU-hours | OOM failures | lost GPU-hours |" in claims_markdown(result)
    oracle = [e for e in result.episodes if e["policy"].endswith("[pred=oracle]")]
    assert oracle and all(e["ooms"] == 0 for e in oracle)  # the truth never runs out of memory
