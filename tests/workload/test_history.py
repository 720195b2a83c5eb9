"""Generators' histories: the jobs before an episode, never one of its jobs (``generator.history(seed)``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frenzy_env.workload import ITP_EXTRACT, SyntheticGenerator, TraceGenerator, data_path
from frenzy_env.workload.generators import HISTORY_STREAM, history_seed, history_size
from frenzy_env.world.cluster import ClusterSpec

CLUSTER = ClusterSpec.preset("frenzy-testbed")


def trace(tmp_path: Path, n: int = 30) -> Path:
    """A canonical trace of ``n`` jobs, ``j0`` ... at 100 s apart, durations 1000 + i s."""
    rows = "".join(f"j{i},{100 * i},1,{1000 + i}\n" for i in range(n))
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,num_gpus,duration\n" + rows)
    return path


def test_history_size_is_the_papers_80_20_split():
    # A-SRPT trains on the first 80% of its trace and evaluates on the last 20%: 4 history jobs per job
    assert history_size(10) == 40 and history_size(570) == 2280 and history_size(1) == 4
    assert history_seed(0) == history_seed(0) != 0 and history_seed(1) != history_seed(0)


def test_trace_history_is_the_rows_before_the_window(tmp_path):
    gen = TraceGenerator(str(trace(tmp_path)), format="canonical", start=2000.0, max_jobs=5)  # rows j20 ... j24
    episode = gen.generate(3)
    history = gen.history(3)
    assert [j.name for j in episode.jobs] == [f"j{i}" for i in range(20, 25)]
    assert [j.name for j in history.jobs] == [f"j{i}" for i in range(0, 20)]  # all 20 before (fewer than 4 x 5)
    assert history.jobs[0].submit_time == 0.0 and "before the window" in history.source
    gen = TraceGenerator(str(trace(tmp_path)), format="canonical", start=2000.0, max_jobs=2)  # j20, j21
    assert [j.name for j in gen.history(0).jobs] == [f"j{i}" for i in range(12, 20)]  # the 4 x 2 just before


def test_trace_history_of_a_window_at_the_start_is_the_rows_after_it(tmp_path):
    gen = TraceGenerator(str(trace(tmp_path)), format="canonical", max_jobs=4)  # j0 ... j3
    names = {j.name for j in gen.generate(0).jobs}
    history = gen.history(0)
    assert [j.name for j in history.jobs] == [f"j{i}" for i in range(4, 20)]  # 16 = 4 x 4 after it
    assert not names & {j.name for j in history.jobs} and "after the window" in history.source


def test_trace_history_of_the_whole_file_is_a_synthetic_stand_in():
    # itp-default's window is its whole extract: no row of the file is outside it
    gen = TraceGenerator(str(data_path(ITP_EXTRACT)), format="itp", cluster=CLUSTER)
    episode = gen.generate(0)
    history = gen.history(0)
    assert len(history) == history_size(len(episode)) == 2280
    assert all(j.iterations is not None and j.recorded_duration is None for j in history.jobs)  # no trace row
    assert {j.group for j in history.jobs} == {None}  # trace jobs record no groups, so neither does the stand-in
    assert "stand-in" in history.source
    assert gen.history(0) == history and gen.history(1) != history  # a fixed function of the seed
    assert TraceGenerator(str(data_path(ITP_EXTRACT)), format="itp").history(0) is None  # no cluster: none


def test_synthetic_history_shares_the_groups_not_the_jobs():
    gen = SyntheticGenerator(num_jobs=40, cluster=CLUSTER, recurring_fraction=0.5, mean_group_size=4.0)
    episode, history = gen.generate(7), gen.history(7)
    assert gen.generate(7) == episode  # the episode's own draw is untouched
    assert len(history) == history_size(40) and history.name == "synthetic-history"

    def templates(wl):
        out = {}
        for j in wl.jobs:
            if j.group is not None:
                out.setdefault(j.group, set()).add((j.model.name, j.batch_size, j.seq_len, j.requested_gpus))
        return out

    ep, hi = templates(episode), templates(history)
    assert set(ep) & set(hi) and all(ep[g] == hi[g] for g in set(ep) & set(hi))  # the same recurring groups
    assert all(len(v) == 1 for v in hi.values())
    # none of the episode's jobs: its work (drawn duration x lognormal noise) is never repeated
    assert not {j.iterations for j in episode.jobs} & {j.iterations for j in history.jobs}
    # the stream is the history's own, not the episode's
    assert np.random.default_rng([7, HISTORY_STREAM]).random() != np.random.default_rng(7).random()


@pytest.mark.parametrize("seed", [0, 5])
def test_history_of_another_seed_is_another_history(seed):
    gen = SyntheticGenerator(num_jobs=10, cluster=CLUSTER)
    assert gen.history(seed) == gen.history(seed) != gen.history(seed + 1)
