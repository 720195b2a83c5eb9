"""The trace's own job ids survive into EpisodeResult.jobs and jobs.csv (column ``name``)."""

from __future__ import annotations

import baselines
from frenzy_env.env import FrenzyEnv
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.workload import TraceGenerator, data_path
from frenzy_env.workload.traces import ITP_EXTRACT


def test_trace_job_ids_are_kept_in_the_jobs_table(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text(
        "job_id,submit_time,num_gpus,duration\n"
        "alpha-7,0,1,1200\n"
        "beta-3,60,2,900\n"
        "gamma-1,120,1,3000\n"
    )
    env = FrenzyEnv(workload=TraceGenerator(str(path), format="canonical"))
    result = run_episode(env, baselines.make_policy("fifo", env), seed=0)
    assert result.jobs["name"].tolist() == ["alpha-7", "beta-3", "gamma-1"]
    assert result.jobs["job_id"].tolist() == [0, 1, 2]  # positions in the workload


def test_itp_uuids_are_kept():
    env = FrenzyEnv(workload=TraceGenerator(str(data_path(ITP_EXTRACT)), format="itp", max_jobs=5))
    result = run_episode(env, baselines.make_policy("fifo", env), seed=0)
    first = data_path(ITP_EXTRACT).read_text().splitlines()[1].split(",")[0]
    assert result.jobs["name"].iloc[0] == first and result.jobs["name"].str.len().min() == len(first)
