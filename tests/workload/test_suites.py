"""The benchmark protocol: named suites (frenzy_env.workload.suites), ``frenzy evaluate --suite`` with its paired
results table (frenzy_env.evaluation.results) and results page, and ``frenzy evaluate --trace FILE --load X``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from frenzy_env.cli import main
from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.versions import ENV_VERSION
from frenzy_env.workload import suites
from frenzy_env.workload.suites import SPLITS, SUITES, Suite, SyntheticPart, TracePart, get_suite

TINY = f"{ENV_VERSION}-tiny"  # a suite the tests register, named as the version names suites
T95_DF2 = 4.302652729911275  # scipy.stats.t.ppf(0.975, 2)


def _itp_csv(path, n: int = 12) -> None:
    """A small trace in the ITP format: a job every 10 minutes, 1-2 GPUs, 20-60 minutes each."""
    rows = [f"job-{k},{600 * k},{1200 + 300 * (k % 9)},{1 + k % 2}" for k in range(n)]
    path.write_text("job_id,submission_time,duration,num_gpu\n" + "\n".join(rows) + "\n")


def _run(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr()


# ------------------------------------------------------------------------------------------------ registry
def test_suites_are_named_by_the_env_version_and_unknown_names_list_the_known_ones():
    assert ENV_VERSION == "v6"
    kinds = ("quick", "validation", "test", "transfer", "train")  # v6 added transfer (on cloud-mixed)
    assert set(SUITES) == {f"{ENV_VERSION}-{kind}" for kind in kinds}
    assert SUITES[f"{ENV_VERSION}-transfer"].cluster == "cloud-mixed"
    # every suite of v6 at load_mode "wait" 0.6
    assert all(s.load_mode == "wait" for s in SUITES.values())
    import frenzy_env.registration

    assert frenzy_env.registration.ENV_VERSION == ENV_VERSION
    bumped = Suite("quick", "validation", "x", synthetic=SyntheticPart((500,)), version="v99")
    assert bumped.name == "v99-quick"
    with pytest.raises(UnknownNameError) as info:
        get_suite("v4-tset")
    assert all(name in str(info.value) for name in SUITES)


def test_the_test_suite_is_disjoint_from_training_and_validation():
    test = get_suite(f"{ENV_VERSION}-test")
    lo, hi = SPLITS["test"].seeds
    assert lo == suites.TEST_SEED_START and all(s >= 1000 for s in test.seeds)
    for name, suite in SUITES.items():
        if suite.split == "test":
            continue
        assert not set(suite.seeds) & set(test.seeds), name
        assert not set(suite.trace_names) & set(test.trace_names), name
        assert all(s < lo for s in suite.seeds), name
    for a in SPLITS.values():  # seed ranges and clusters of the split never overlap
        for b in SPLITS.values():
            if a is not b:
                assert a.seeds[1] <= b.seeds[0] or b.seeds[1] <= a.seeds[0]
                assert not set(a.traces) & set(b.traces)
    quick, validation = get_suite(f"{ENV_VERSION}-quick"), get_suite(f"{ENV_VERSION}-validation")
    assert set(quick.seeds) <= set(validation.seeds) and set(quick.trace_names) <= set(validation.trace_names)


def test_the_ppo_split_comes_from_the_suites():
    from agents.ppo.config import TEST_SEED_START, TEST_TRACES, TRAIN_SEEDS, TRAIN_TRACES, VALIDATION_TRACES

    assert (SPLITS["train"].seeds, SPLITS["test"].seeds[0]) == (TRAIN_SEEDS, TEST_SEED_START)
    for files, split in ((TRAIN_TRACES, "train"), (VALIDATION_TRACES, "validation"), (TEST_TRACES, "test")):
        assert [f"itp-{f.removesuffix('.csv')}" for f, _ in files] == list(SPLITS[split].traces)


def test_a_suite_must_lie_inside_its_split():
    with pytest.raises(ConfigError, match="outside the test seeds"):
        suites.check_suite(Suite("bad", "test", "x", synthetic=SyntheticPart((999,))))
    with pytest.raises(ConfigError, match="not a validation trace"):
        suites.check_suite(Suite("bad", "validation", "x", traces=(TracePart("itp-cluster01", 2, 500),)))


# ------------------------------------------------------------------------------------------- the command
def test_a_missing_trace_is_one_line_naming_the_fetch_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FRENZY_ENV_CACHE", str(tmp_path))
    code, out = _run(["evaluate", "--suite", f"{ENV_VERSION}-quick", "--policies", "fifo,srpt_est"], capsys)
    assert code == 2 and "Traceback" not in out.err
    assert out.err.strip().count("\n") == 0
    assert "`frenzy data fetch itp-cluster04`" in out.err


def test_suite_flags_are_checked_before_any_episode(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(SUITES, TINY, Suite("tiny", "validation", "x", synthetic=SyntheticPart((500,), 4)))
    code, out = _run(["evaluate", "--suite", TINY, "--seeds", "2"], capsys)
    assert code == 2 and "drop --seeds" in out.err
    code, out = _run(["evaluate", "--suite", TINY, "--policies", "fifo"], capsys)
    assert code == 2 and "--reference srpt_est: not among the policies" in out.err
    code, out = _run(["evaluate", "--results-md", str(tmp_path / "r.md")], capsys)
    assert code == 2 and "applies to --suite only" in out.err


def test_a_tiny_suite_runs_paired_end_to_end_and_writes_a_results_page(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    _itp_csv(cache / "itp-cluster04.csv")
    monkeypatch.setenv("FRENZY_ENV_CACHE", str(cache))
    tiny = Suite("tiny", "validation", "a test suite", synthetic=SyntheticPart((500, 501), num_jobs=5, load=0.7),
                 traces=(TracePart("itp-cluster04", 2, 500, max_jobs=5, load=0.9, only=(1,)),))
    monkeypatch.setitem(SUITES, TINY, tiny)
    page = tmp_path / "docs" / "results.md"
    out_dir = tmp_path / "out"
    code, out = _run(["evaluate", "--suite", TINY, "--policies", "fifo,srpt_est", "--no-progress", "--bounds",
                      "--out", str(out_dir), "--results-md", str(page)], capsys)
    assert code == 0, out.err
    assert f"suite {TINY}: 3 workloads" in out.out and "avg JCT / srpt_est's (paired)" in out.out
    # every suite reports FIFO's pressure: one fifo episode per workload, its wait share and busy fraction
    assert "Pressure under `fifo` (mean over the 3 workloads" in out.out
    pressure = pd.read_csv(out_dir / "pressure.csv")
    assert list(pressure.columns) == ["workload", "seed", "wait_frac", "busy_frac"] and len(pressure) == 3
    assert pressure[["wait_frac", "busy_frac"]].apply(lambda c: c.between(0, 1)).all().all()
    episodes = pd.read_csv(out_dir / "episodes.csv")
    start = suites.window_starts(12, 5, 2)[1]
    assert set(zip(episodes["workload"], episodes["seed"])) == {
        ("synthetic", 500), ("synthetic", 501), (f"itp-cluster04@{start}", 500)}
    loads = episodes.groupby("workload")["offered_load_ratio"].first()
    assert loads["synthetic"] == pytest.approx(0.7) and loads[f"itp-cluster04@{start}"] == pytest.approx(0.9)
    table = pd.read_csv(out_dir / "suite.csv").set_index("policy")
    jct = episodes.pivot_table(index=["workload", "seed"], columns="policy", values="avg_jct_h")
    ratio = math.exp(np.log(jct["fifo"] / jct["srpt_est"]).mean())
    assert table.loc["fifo", "ref_ratio"] == pytest.approx(ratio) and table.loc["srpt_est", "ref_ratio"] == 1
    assert table.loc["fifo", "n"] == 3
    bounds = pd.read_csv(out_dir / "bounds.csv")  # one lower bound per workload, whatever the policies
    assert len(bounds) == 3 and (table["bound_ratio"] >= 1).all()
    assert table.loc["fifo", "avg_jct_h"] == pytest.approx(jct["fifo"].mean())
    text = page.read_text()
    assert text.startswith("# Results") and f"## Suite `{TINY}`" in text and f"env {ENV_VERSION}" in text
    assert "CPU core" in text and "Python " in text and "torch " in text and "- Measured: 20" in text


def test_trace_load_scales_arrivals_to_the_offered_load_asked_for(tmp_path, capsys):
    from frenzy_env.workload import TraceGenerator, offered_load_detail
    from frenzy_env.world.cluster import ClusterSpec

    trace = tmp_path / "mine.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration\na,0,1,1200\nb,600,2,900\nc,1500,1,3000\nd,1800,4,600\n")
    runs = {}
    for load in ("0.5", "2"):
        out_dir = tmp_path / load
        code, out = _run(["evaluate", "--trace", str(trace), "--load", load, "--policies", "fifo", "--seeds", "1",
                          "--no-progress", "--out", str(out_dir)], capsys)
        assert code == 0, out.err
        assert f"offered load {load}" in out.out
        runs[load] = (pd.read_csv(out_dir / "episodes.csv"), pd.read_csv(out_dir / "jobs.csv"))
        assert runs[load][0]["offered_load_ratio"].iloc[0] == pytest.approx(float(load))
    # by hand: the unscaled workload's load rho = sum_j W_j / C_j over T = (last - first) * n / (n - 1)
    cluster = ClusterSpec.preset("frenzy-testbed")
    plain = TraceGenerator(str(trace), format="canonical", cluster=cluster).generate(0)
    report = offered_load_detail(plain, cluster)
    window = (1800 - 0) * 4 / 3
    assert report.window_s == pytest.approx(window)
    rho = float(np.nansum(report.cluster_seconds)) / window
    for load in ("0.5", "2"):
        submit = runs[load][1].sort_values("job_id")["submit_time_s"].to_numpy()
        assert submit == pytest.approx(np.array([0, 600, 1500, 1800]) * rho / float(load))
    for bad in ("0", "-1", "nan", "x"):
        with pytest.raises(SystemExit) as info:
            main(["evaluate", "--trace", str(trace), "--load", bad])
        assert info.value.code == 2
        assert "--load: expected a positive number" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- the table
def test_suite_table_ratios_by_hand():
    from frenzy_env.evaluation.results import paired_ratio, suite_markdown, suite_table

    rows = []
    for k, (ref, mine, bound) in enumerate(((1.0, 2.0, 0.5), (2.0, 2.0, 1.0), (4.0, 2.0, 1.0))):
        for policy, jct in (("ref", ref), ("mine", mine)):
            rows.append({"workload": "w", "seed": k, "policy": policy, "avg_jct_h": jct, "jct_bound_h": bound,
                         "gpu_hours": 10.0 * (k + 1), "ooms": k, "restarts": 1, "latency_median_ms": 9.0,
                         "latency_p99_ms": 9.0})
    episodes = pd.DataFrame(rows)
    latencies = {"ref": np.array([0.001, 0.002, 0.003]), "mine": np.arange(1, 101) / 1000.0}
    table = suite_table(episodes, "ref", latencies).set_index("policy")
    # mine / ref per workload: 2, 1, 0.5 -> logs ln 2, 0, -ln 2: mean 0, sd ln 2, half t * ln 2 / sqrt(3)
    half = T95_DF2 * math.log(2) / math.sqrt(3)
    mine = table.loc["mine"]
    assert mine["ref_ratio"] == pytest.approx(1.0)
    assert mine["ref_ratio_low"] == pytest.approx(math.exp(-half)) and mine["ref_ratio_high"] == pytest.approx(
        math.exp(half))
    assert mine["bound_ratio"] == pytest.approx((4 * 2 * 2) ** (1 / 3))  # 2/0.5, 2/1, 2/1
    # logs 2 ln 2, ln 2, ln 2: mean 4 ln 2 / 3, sd ln 2 / sqrt(3), half t * ln 2 / 3
    low, high = (math.exp(4 * math.log(2) / 3 + sign * T95_DF2 * math.log(2) / 3) for sign in (-1, 1))
    assert (mine["bound_ratio_low"], mine["bound_ratio_high"]) == pytest.approx((low, high))
    assert table.loc["ref", "bound_ratio"] == pytest.approx((2 * 2 * 4) ** (1 / 3))
    assert mine["avg_jct_h"] == 2.0 and mine["avg_jct_h_ci95"] == 0.0
    assert table.loc["ref", "avg_jct_h"] == pytest.approx(7 / 3)
    assert mine["gpu_hours"] == pytest.approx(20.0) and mine["ooms"] == 3 and mine["restarts"] == 3
    assert mine["latency_median_ms"] == pytest.approx(50.5) and mine["latency_p99_ms"] == pytest.approx(99.01)
    assert table.loc["ref", "latency_median_ms"] == pytest.approx(2.0)
    assert paired_ratio([3.0], [1.5])[0] == pytest.approx(2.0) and math.isnan(paired_ratio([3.0], [1.5])[1])
    md = suite_markdown(table.reset_index(), "ref", "three workloads")
    assert "| `mine` | 3 | 2 ± 0 | 1 (0.179 - 5.59) | 2.52 (0.932 - 6.81) |" in md
    assert "avg JCT / lower bound" in md and "Workloads: three workloads." in md
    no_bounds = suite_table(episodes.drop(columns="jct_bound_h"), "ref")
    assert "lower bound" not in suite_markdown(no_bounds, "ref").split("\n")[0]


def test_results_page_keeps_its_intro_and_the_other_suites():
    from frenzy_env.evaluation.results import GENERATED_MARKER, machine_info, results_section, update_results_page

    assert {"cpus", "cpu", "platform", "python", "torch"} <= set(machine_info())
    machine = {"cpus": "2", "cpu": "AMD EPYC", "memory": "24 GiB", "platform": "Linux", "python": "3.11.7",
               "torch": "2.13.0+cpu"}

    def section(name: str, table: str) -> str:
        return results_section(name, table, f"frenzy evaluate --suite {name}", date="2026-12-04",
                               env_version="v4", package_version="0.1.0", machine=machine)

    page = update_results_page(None, "v4-test", section("v4-test", "| a |\n"))
    assert page.startswith("# Results") and GENERATED_MARKER in page
    assert "- Measured: 2026-12-04, env v4, frenzy-env 0.1.0." in page
    assert "- Machine: 2 CPU core(s) (AMD EPYC), 24 GiB; Linux; Python 3.11.7, torch 2.13.0+cpu." in page
    page = update_results_page(page, "v4-quick", section("v4-quick", "| b |\n"))
    page = update_results_page(page, "v4-test", section("v4-test", "| c |\n"))
    assert "| a |" not in page and page.index("| c |") < page.index("| b |")  # replaced in place
    hand = "# Results\n\nHand-written numbers.\n"
    kept = update_results_page(hand, "v4-quick", section("v4-quick", "| b |\n"))
    assert kept.startswith(hand.rstrip("\n")) and kept.count(GENERATED_MARKER) == 1
    assert update_results_page(kept, "v4-quick", section("v4-quick", "| b |\n")) == kept


def test_a_suite_table_shows_cut_episodes_and_pairs_only_finished_ones():
    from frenzy_env.evaluation.results import suite_markdown, suite_table

    rows = []
    for k, (ref, mine) in enumerate(((1.0, 2.0), (2.0, 2.0), (4.0, 0.5))):
        for policy, jct in (("ref", ref), ("mine", mine)):
            cut = policy == "mine" and k == 2  # mine's third episode is cut with 5 jobs left
            rows.append({"workload": "w", "seed": k, "policy": policy, "avg_jct_h": jct, "gpu_hours": 1.0,
                         "ooms": 0, "restarts": 0, "latency_median_ms": 1.0, "latency_p99_ms": 1.0, "jobs": 10,
                         "finished": 4 if cut else 9, "rejected": 1, **({"truncated": 1.0} if cut else {})})
    episodes = pd.DataFrame(rows)
    table = suite_table(episodes, "ref").set_index("policy")
    # the cut workload is no pair: mine / ref over the first two, 2 and 1
    assert table.loc["mine", "ref_ratio"] == pytest.approx(math.sqrt(2.0))
    assert (table.loc["mine", "truncated"], table.loc["mine", "unfinished"]) == (1, 5)
    assert (table.loc["ref", "truncated"], table.loc["ref", "unfinished"]) == (0, 0)
    md = suite_markdown(table.reset_index(), "ref")
    head = md.split("\n")[0]
    assert head.startswith("| policy | n | truncated | unfinished | avg JCT (h) |")
    assert "| `mine` | 3 | 1 | 5 |" in md and "| `ref` | 3 | 0 | 0 |" in md
    assert "leave out the workloads where a budget cut either episode" in md
    # without a cut, the table is as it always was: no such columns, no note
    finished = suite_markdown(suite_table(episodes.drop(columns="truncated"), "ref"), "ref")
    assert finished.split("\n")[0].startswith("| policy | n | avg JCT (h) |") and "truncated" not in finished
