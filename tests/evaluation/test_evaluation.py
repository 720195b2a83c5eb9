"""The evaluation loop: step limits, time budgets, episode records and confidence intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import make_policy
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation.episodes import confidence_interval, episode_record, play, run_episode
from frenzy_env.workload import make_generator


@pytest.fixture
def env() -> FrenzyEnv:
    return FrenzyEnv(cluster="frenzy-testbed", workload=make_generator("synthetic", num_jobs=400, load=1.5))


def test_play_stops_after_max_steps(env):
    info, terminated, lat = play(env, make_policy("random", env), seed=0, max_steps=7)
    assert lat.size == 7 and not terminated
    assert env.unwrapped._steps == 7


def test_play_time_budget_checked_every_1024_decisions(env):
    _, terminated, lat = play(env, make_policy("random", env), seed=0, time_budget_s=0.0)
    assert not terminated and lat.size == 1024


def test_run_episode_metrics_and_record(env):
    result = run_episode(env, make_policy("fifo", env), seed=3)
    assert result.metrics["decisions"] == result.latencies.size > 0
    assert result.metrics["latency_median_ms"] == pytest.approx(np.median(result.latencies) * 1e3)
    jobs, row = episode_record(result, "w", "fifo", 3)
    assert len(jobs) == 400 and set(jobs[["workload", "policy", "seed"]].drop_duplicates().itertuples(index=False)) == {
        ("w", "fifo", 3)
    }
    assert row["avg_jct_h"] == result.metrics["avg_jct_h"] and (row["workload"], row["seed"]) == ("w", 3)


def test_confidence_interval_by_hand():
    mean, half = confidence_interval([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))  # t(0.975, df=2) * s / sqrt(n)
    assert math.isnan(confidence_interval([5.0])[1]) and confidence_interval([5.0])[0] == 5.0
    assert all(math.isnan(v) for v in confidence_interval([]))


# ------------------------------------------------------------------ units, numbers and intervals
COUNTS = {"jobs", "finished", "rejected", "ooms", "restarts", "invalid_actions", "steps", "decisions"}
UNITS = ("_h", "_s", "_ms", "_frac", "_ratio", "gpu_hours")


def _says_its_unit(name: str) -> bool:
    return name in COUNTS or name.endswith(UNITS)


def test_metric_names_end_in_their_unit(tiny_env):
    from frenzy_env.evaluation.episodes import ATTEMPT_COLUMNS, JOB_COLUMNS, SUMMARY_METRICS

    result = run_episode(tiny_env, make_policy("fifo", tiny_env), seed=0)
    m = result.metrics
    assert all(_says_its_unit(k) for k in m), [k for k in m if not _says_its_unit(k)]
    assert all(_says_its_unit(k) for k in SUMMARY_METRICS)
    labels = {"job_id", "name", "gpu_type", "num_gpus", "dp", "tp", "restarts", "oom_failures", "rejected_reason"}
    assert all(_says_its_unit(c) or c in labels for c in JOB_COLUMNS)
    timed = {c for c in ATTEMPT_COLUMNS if "time" in c or "from" in c}
    assert timed == {"start_time_s", "progress_from_s", "end_time_s"}
    # the values in hours are the records' seconds / 3600; the utilisation is a fraction
    sim = tiny_env.unwrapped.sim
    jct_s = [r.finish_time - r.submit_time for r in sim.records]
    assert m["avg_jct_h"] == pytest.approx(np.mean(jct_s) / 3600)
    assert m["makespan_h"] == pytest.approx(max(r.finish_time for r in sim.records) / 3600)
    assert 0 < m["utilisation_frac"] <= 1
    np.testing.assert_allclose(result.jobs["jct_h"], np.array(jct_s) / 3600)
    assert result.jobs["submit_time_s"].tolist() == [0.0, 10.0, 20.0]


def test_attempts_table_numbers_each_jobs_attempts(tiny_env):
    from frenzy_env.evaluation.episodes import ATTEMPT_COLUMNS

    result = run_episode(tiny_env, make_policy("doubling", tiny_env), seed=0)
    att = result.attempts
    assert tuple(att.columns) == ATTEMPT_COLUMNS
    sim = tiny_env.unwrapped.sim
    assert len(att) == len(sim.attempts) == 3 + result.metrics["restarts"] + result.metrics["ooms"]
    for _, rows in att.groupby("job_id"):
        assert rows["attempt"].tolist() == list(range(len(rows)))
        assert rows["outcome"].iloc[-1] == "finished" and (rows["outcome"].iloc[:-1] != "finished").all()
    assert result.metrics["restarts"] > 0 and (att["outcome"] == "resized").sum() == result.metrics["restarts"]
    assert (att["end_time_s"] >= att["start_time_s"]).all()
    ran = att[att["outcome"] != "oom"]
    assert (ran["end_time_s"] >= ran["progress_from_s"]).all()  # a resize waits for the start-up
    assert [len(g) for g in att["gpus"]] == att["num_gpus"].tolist()


@pytest.mark.parametrize(
    "mean, half, text",
    [
        (30412.0, 3456.0, "30,400 ± 3,500"),  # two digits of the half-width (its first three are 100-354)
        (22.63, 0.81, "22.6 ± 0.8"),  # one digit (355-949), the mean to the same place
        (0.2134, 0.0391, "0.21 ± 0.04"),
        (0.2134, 0.0291, "0.213 ± 0.029"),
        (1234567.8, 96000.0, "1,230,000 ± 100,000"),  # 950-999 rounds up to two digits of the next power
        (0.2, 1.27, "0.2 ± 1.3"),
        (5.0, 0.0, "5 ± 0"),
        (0.79999999999999993, 2.8e-16, "0.800 ± 0"),  # floating-point noise around a value the workload fixes
        (-0.01, 0.02, "-0.010 ± 0.020"),
        (30412.4, math.nan, "30,412"),  # no interval (one seed): the mean alone, every integer digit
        (22.634, math.nan, "22.6"),
        (0.001234, math.nan, "0.00123"),
        (math.nan, math.nan, "n/a"),
    ],
)
def test_format_ci_reads_like_a_paper(mean, half, text):
    from frenzy_env.evaluation.episodes import format_ci

    assert format_ci(mean, half) == text
    assert "e+" not in text and "e-" not in text


def _summary(n: int):
    import pandas as pd

    from frenzy_env.evaluation.episodes import summarise

    rows = [{"workload": "w", "policy": "p", "seed": s, "avg_jct_h": 20.0 + s, "utilisation_frac": 0.2 + 0.05 * s,
             "gpu_hours": 30000.0 + 1000 * s} for s in range(n)]
    return summarise(pd.DataFrame(rows))


def test_summary_markdown_says_n_and_warns_below_three_seeds():
    from frenzy_env.evaluation.episodes import interval_note, summary_markdown

    one, two, three = _summary(1), _summary(2), _summary(3)
    md = summary_markdown(one)
    assert "| workload | policy | n | avg_jct_h | gpu_hours | utilisation_frac |" in md
    assert "| w | p | 1 | 20 | 30,000 | 0.200 |" in md and "±" not in md.split("\n\n")[0]
    assert interval_note(one).startswith("n=1: one seed, so no confidence interval") and "n=1" in md
    md = summary_markdown(two)
    # half-widths 12.7 x 0.707 / sqrt(2) = 6.35 (one digit), 6,353 (one digit), 0.318 (two digits)
    assert "| w | p | 2 | 20 ± 6 | 30,000 ± 6,000 | 0.23 ± 0.32 |" in md
    assert "**Warning:** n=2: a 95% t-interval from 2 seeds is unreliable (t=12.7" in md
    md = summary_markdown(three)
    assert interval_note(three) is None and "Warning" not in md
    assert "| w | p | 3 | 21.0 ± 2.5 | 31,000 ± 2,500 | 0.25 ± 0.12 |" in md
    assert "_h hours, _frac a fraction of 1, _ms milliseconds" in md


def test_evaluate_cli_warns_of_few_seeds_and_draws_schedules(tmp_path, capsys):
    import pandas as pd

    from frenzy_env.cli import main
    from frenzy_env.evaluation.plots import schedule_file

    out = tmp_path / "out"
    code = main(["evaluate", "--workload", "synthetic-small", "--max-jobs", "6", "--policies", "fifo,doubling",
                 "--seeds", "2", "--no-progress", "--out", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert captured.err.count("frenzy: warning: n=2: a 95% t-interval from 2 seeds is unreliable") == 1
    assert "e+0" not in captured.out and "Warning:** n=2" in (out / "summary.md").read_text()
    for policy in ("fifo", "doubling"):
        png = out / schedule_file("synthetic-small", policy)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"avg_jct_h", "avg_jct_h_ci95", "utilisation_frac"} <= set(pd.read_csv(out / "summary.csv").columns)
    assert {"jct_h", "submit_time_s"} <= set(pd.read_csv(out / "jobs.csv").columns)


def test_the_summary_shows_cut_episodes_per_policy_and_a_cut_counts_every_job(env):
    """run_episode with a step limit: the cut's avg_jct_h counts every job (never below its finished jobs'),
    and the summary table gains the columns truncated and unfinished, only when an episode was cut."""
    import pandas as pd

    from frenzy_env.evaluation.episodes import CUT_NOTE, summarise, summary_markdown

    cut = run_episode(env, make_policy("fifo", env), seed=0, max_steps=60).metrics
    left = int(cut["jobs"] - cut["finished"] - cut["rejected"])
    assert cut["truncated"] == 1.0 and left == cut["unfinished"] + cut["not_arrived"] > 0
    assert cut["avg_jct_h"] >= cut["truncated_at_h"] * (cut["unfinished"] + cut["not_arrived"]) / (
        cut["jobs"] - cut["rejected"])
    if cut["finished"]:
        assert cut["avg_jct_h"] >= cut["avg_jct_finished_h"]
    full = {"jobs": 400.0, "finished": 400.0, "rejected": 0.0, "avg_jct_h": 3.0}
    episodes = pd.DataFrame([
        {"workload": "w", "policy": "fifo", "seed": 0, **full},
        {"workload": "w", "policy": "fifo", "seed": 1, **full},
        {"workload": "w", "policy": "random", "seed": 0, **{k: cut[k] for k in (*full, "truncated")}},
        {"workload": "w", "policy": "random", "seed": 1, **full},
    ])
    md = summary_markdown(summarise(episodes))
    assert md.startswith("| workload | policy | n | truncated | unfinished | avg_jct_h |")
    assert "| w | fifo | 2 | 0 | 0 | 3 ± 0 |" in md and f"| w | random | 2 | 1 | {left:,} |" in md
    assert CUT_NOTE in md
    finished = summary_markdown(summarise(episodes[episodes["policy"] == "fifo"]))
    assert finished.startswith("| workload | policy | n | avg_jct_h |") and "truncated" not in finished
