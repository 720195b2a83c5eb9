"""``frenzy benchmark``: a tiny run of every section writes its files; the optimised hot paths agree with the
reference implementations they replace (placement, capacity). No wall-clock time is asserted."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frenzy_env.benchmark import (
    MODES,
    Results,
    fit_exponent,
    machine_info,
    run_benchmark,
    scaled_cluster,
    summary_table,
)
from frenzy_env.benchmark.measure import bench_sia
from frenzy_env.cli import main
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import SyntheticGenerator
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.placement import capacity_by_tp, place

TINY = MODES["quick"].__class__(
    **{
        **MODES["quick"].__dict__,
        "env_steps": 50, "cartpole_steps": 200, "replay_max_jobs": 40, "latency_gpus": (64,),
        "latency_queues": (10,), "latency_calls": 3, "marp_seconds": 0.02, "scaling_jobs": (30, 60),
        "scaling_gpus": (64,), "scaling_gpu_jobs": 30, "sia_jobs": 12, "sia_steps": 30,
    }
)


def test_quick_cli_run_writes_table_csv_json_png(tmp_path, capsys):
    code = main(["benchmark", "--quick", "--sections", "marp", "--out", str(tmp_path), "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert "MARP" in out and "| measurement | value |" in out
    with open(tmp_path / "benchmark.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["section"] for r in rows} == {"startup", "marp"}  # (startup: the compiled kernels' load)
    assert all(math.isfinite(float(r["value"])) and float(r["value"]) > 0 for r in rows)
    meta = json.loads((tmp_path / "benchmark.json").read_text(encoding="utf-8"))
    assert meta["mode"] == "quick" and meta["machine"]["cores"] >= 1
    assert (tmp_path / "benchmark.png").stat().st_size > 0
    assert (tmp_path / "benchmark.md").read_text(encoding="utf-8").startswith("Measured in")


@pytest.mark.slow
def test_every_section_runs_tiny():
    res = run_benchmark(TINY, data_dir=None, policies=["fifo"], log=lambda _m: None)
    sections = {r.section for r in res.rows}
    assert sections == {
        "startup", "steps", "replay", "latency", "marp", "scaling_jobs", "scaling_gpus", "train", "sia",
    }
    assert res.get("startup", "compiled kernels", "seconds") > 0
    kernel_starts = [r.value for r in res.rows if r.metric == "kernels_s"]  # one per scaling child process
    assert len(kernel_starts) == 2 and all(v > 0 for v in kernel_starts)
    ratio = [r.value for r in res.rows if r.metric == "cartpole_steps_per_env_step"]
    assert len(ratio) == 2 and all(v > 0 for v in ratio)
    replay = [r for r in res.rows if r.section == "replay" and r.metric == "complete"]
    assert replay and all(r.value == 1.0 for r in replay)  # the shipped extract, capped at 40 jobs
    rss = [r.value for r in res.rows if r.metric == "peak_rss_mb"]
    assert rss and all(v > 0 for v in rss)
    train_cases = [r.case for r in res.rows if r.section == "train" and r.metric == "decisions_per_s"]
    assert len(train_cases) == 2 and sum(c.startswith("guided") for c in train_cases) == 1  # default and guided
    assert not any("knob" in c for c in train_cases)  # the knob agent is a research model: not measured


def test_unknown_section_and_policy_are_clear_errors(capsys):
    with pytest.raises(SystemExit):
        main(["benchmark", "--sections", "speed"])
    assert "unknown section" in capsys.readouterr().err
    assert main(["benchmark", "--quick", "--sections", "marp", "--policies", "psychic", "--quiet"]) == 2
    assert "unknown policy" in capsys.readouterr().err


def test_fit_exponent_and_scaled_clusters():
    assert fit_exponent([1e3, 1e4, 1e5], [1.0, 10.0, 100.0]) == pytest.approx(1.0)
    assert math.isnan(fit_exponent([10], [1.0]))
    for gpus in (64, 1024, 10_000):
        spec = scaled_cluster(gpus)
        assert spec.num_gpus == gpus and len(spec.gpu_types) == 4


def _rested(sim: ClusterSimulator, job: int) -> bool:
    """The documented pacing rules for ``job`` now: ``resize_cooldown`` seconds since its last start or resize and,
    with ``one_action_per_instant``, no action on it at this instant."""
    cfg, last = sim.config, float(sim.last_action[job])
    return last + (cfg.resize_cooldown or 0.0) <= sim.now and (not cfg.one_action_per_instant or last < sim.now)


@pytest.mark.parametrize("cluster", ["frenzy-testbed", "pai-2020"])
@pytest.mark.parametrize("placement", ["best_fit", "spread"])
def test_fast_paths_agree_with_reference(cluster, placement):
    """The simulator's own placement fast path, incremental capacities and vectorised masks give what
    placement.place / capacity_by_tp and a per-job recomputation give, over a random schedule (under the default
    settings: an absent slot of the universal grid is never legal, and the pacing rules hold starts, resizes and
    preemptions as documented)."""
    spec = ClusterSpec.preset(cluster)
    wl = SyntheticGenerator(num_jobs=60, load=2.0, cluster=spec).generate(1)
    sim = ClusterSimulator(spec, wl, SimConfig(placement=placement, startup_time=5.0))
    one_action = sim.config.one_action_per_instant
    rng = np.random.default_rng(0)
    tpl = sim.tp_levels
    for _ in range(200):
        free = sim.state.free
        assert (sim.state.cap == capacity_by_tp(free, spec.node_type_index, sim.num_types, tpl)).all()
        q = np.array(sim.queue, dtype=np.int64)
        running = np.array(list(sim.running), dtype=np.int64)
        sm, rm = sim.start_mask(q), sim.resize_mask(running)
        for k, job in enumerate(q[:3].tolist()):  # start mask: reference placer succeeds exactly there
            for p in range(sim.num_plans):
                if not sim.plan_present[p]:
                    assert not sm[k, p]
                    continue
                ok = (sim.pred_ok[job, p] and not sim.oom_known[job, p]
                      and (not one_action or sim.last_action[job] < sim.now))
                ref = ok and place(free, spec.node_type_index, int(sim.plan_type[p]), int(sim.plan_count[p]),
                                   int(sim.layout_tp[job, p]), placement) is not None
                assert sm[k, p] == ref
                if ref:
                    got = sim._place(job, p, free)
                    want = place(free, spec.node_type_index, int(sim.plan_type[p]), int(sim.plan_count[p]),
                                 int(sim.layout_tp[job, p]), placement)
                    assert (got == want).all()
        for k, job in enumerate(running[:3].tolist()):  # resize mask: own GPUs count as free
            run = sim.running[job]
            own = free + run.counts
            for p in range(sim.num_plans):
                if not sim.plan_present[p]:
                    assert not rm[k, p]
                    continue
                ok = (sim.pred_ok[job, p] and not sim.oom_known[job, p] and p != run.plan
                      and run.progress_from <= sim.now and _rested(sim, job))
                want = place(own, spec.node_type_index, int(sim.plan_type[p]), int(sim.plan_count[p]),
                             int(sim.layout_tp[job, p]), placement)
                assert rm[k, p] == (ok and want is not None)
                if want is not None:
                    assert (sim._place(job, p, own) == want).all()
        # preemptible: the pacing rules allow it and no save of an earlier preemption is under way
        stoppable = [j for j in running.tolist() if _rested(sim, j) and not sim.saving_until[j] >= sim.now]
        u = rng.random()
        if u < 0.45 and sm.any():
            k, p = divmod(int(rng.choice(np.flatnonzero(sm))), sim.num_plans)
            assert sim.start(int(q[k]), p)
        elif u < 0.7 and rm.any():
            k, p = divmod(int(rng.choice(np.flatnonzero(rm))), sim.num_plans)
            assert sim.resize(int(running[k]), p)
        elif u < 0.75 and len(running):
            job = int(rng.choice(running))
            assert sim.preempt(job) == (job in stoppable)
        else:
            sim.advance()
        sim.check_invariants()
        if sim.done:
            break


def _profile_script(*args: str) -> subprocess.CompletedProcess:
    script = Path(__file__).resolve().parents[2] / "scripts" / "profile_step.py"
    return subprocess.run([sys.executable, str(script), "--env", "frenzy/HeteroClusterSmall-v5", "--steps", "100",
                           *args], capture_output=True, text=True, timeout=300)


def test_profile_script_reports_the_step_cost_and_where_it_goes(tmp_path):
    done = _profile_script("--cprofile", "--no-jit", "--out", str(tmp_path / "p.txt"))
    assert done.returncode == 0, done.stderr
    assert "us per masked-random step (numpy code" in done.stdout
    assert "(step)" in done.stdout and "(resize)" in (tmp_path / "p.txt").read_text(encoding="utf-8")
    bad = _profile_script("--steps", "0")
    assert bad.returncode == 2 and "--steps must be at least 1, got 0" in bad.stderr


def test_profile_script_with_pyinstrument_writes_its_page(tmp_path):
    pytest.importorskip("pyinstrument")
    done = _profile_script("--out", str(tmp_path / "p.html"))
    assert done.returncode == 0, done.stderr
    assert "compiled kernels" in done.stdout or "numpy code" in done.stdout
    assert "FrenzyEnv.step" in done.stdout and (tmp_path / "p.html").read_text(encoding="utf-8").startswith("<")


def test_sia_section_times_every_round():
    cfg = TINY.__class__(**{**TINY.__dict__, "sia_jobs": 6, "sia_steps": 20})
    res = Results()
    bench_sia(cfg, res, lambda _m: None)
    rows = {(r.case, r.metric): r.value for r in res.section("sia")}
    cases = {c for c, _ in rows}
    assert len(cases) == 3 and any("1,024 GPUs" in c for c in cases) and any("sia[requested]" in c for c in cases)
    for c in cases:  # p99 >= median > 0, and the rounds' time is part of the episode's
        assert rows[(c, "rounds")] >= 1 and rows[(c, "round_p99_ms")] >= rows[(c, "round_median_ms")] > 0
        assert 0 < rows[(c, "round_seconds")] <= rows[(c, "episode_seconds")]
    assert "| Sia round frenzy-testbed" in summary_table(res, machine_info(), "quick")
