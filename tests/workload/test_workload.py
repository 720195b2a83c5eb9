from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from frenzy_env.errors import ConfigError, TraceFormatError, UnknownNameError
from frenzy_env.workload import (
    DURATION_QUANTILE_LEVELS,
    DURATION_QUANTILES,
    ITP_EXTRACT,
    WORKLOAD_PRESETS,
    FixedGenerator,
    JobSpec,
    SyntheticGenerator,
    TraceGenerator,
    Workload,
    WorkloadGenerator,
    data_path,
    make_generator,
    offered_load,
    reference_iteration_time,
)
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.memory.planning import plan_resources
from frenzy_env.world.models import get_model
from frenzy_env.world.throughput import iteration_time_array

CLUSTER = ClusterSpec.preset("frenzy-testbed")


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------------------------ shipped data
def test_shipped_extract_and_its_license_are_in_the_package():
    for f in (ITP_EXTRACT, "LICENSE", "ATTRIBUTION.md"):
        assert data_path(f).is_file()
    assert "MIT License" in data_path("LICENSE").read_text()
    w = make_generator("itp-default").generate(0)
    assert len(w) == 570
    assert w.jobs[0].submit_time == 0.0
    assert all(j.assigned == ("model", "batch_size", "seq_len") for j in w)
    assert sorted({j.requested_gpus for j in w}) == [1, 2, 4, 8, 16, 32]


def test_assigned_configurations_are_feasible_at_the_requested_count():
    w = make_generator("itp-default").generate(3)
    seen = {(j.model, j.batch_size, j.seq_len, j.requested_gpus) for j in w}
    for model, b, s, g in seen:
        plans = plan_resources(
            model, batch_size=b, seq_len=s, gpu_types=["A100-80GB"], method="extended", max_gpus=g
        )
        assert any(p.num_gpus == g for p in plans), (model.name, b, s, g)


def test_trace_generator_keeps_recorded_fields_and_redraws_models():
    gen = make_generator("itp-default")
    assert isinstance(gen, TraceGenerator) and isinstance(gen, WorkloadGenerator)
    a, b, a2 = gen.generate(0), gen.generate(1), gen.generate(0)
    rec = [(j.name, j.requested_gpus, j.recorded_duration) for j in a]
    assert rec == [(j.name, j.requested_gpus, j.recorded_duration) for j in b]
    # arrival times: the recorded ones, stretched by one factor per seed to the preset's offered load (the factor
    # depends on the seed's model assignment)
    ta, tb = np.array([j.submit_time for j in a]), np.array([j.submit_time for j in b])
    assert ta[0] == tb[0] == 0.0 and np.allclose(ta[1:] / tb[1:], ta[-1] / tb[-1])
    assert [(j.model, j.batch_size) for j in a] == [(j.model, j.batch_size) for j in a2]
    assert [(j.model, j.batch_size) for j in a] != [(j.model, j.batch_size) for j in b]


def test_work_iterations_reproduce_the_recorded_duration():
    w = make_generator("itp-default").generate(0)
    work = w.work_iterations(CLUSTER, efficiency="flat")  # the speed model without the micro-batch curve (below)
    assert work.shape == (570,) and np.all(np.isfinite(work)) and np.all(work > 0)
    job = next(j for j in w if j.requested_gpus == 16)
    i = job.job_id
    # by hand: fastest memory-feasible layout of 16 A100s (8 per node -> 2 nodes) among tp in 1, 2, 4, 8, pp a
    # power of two dividing the layers, and (pp = 1) power-of-two micro-batches of the per-replica batch
    from frenzy_env.world.memory.estimator import estimate_memory

    rows = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8, 16):
            if job.model.heads % tp or job.model.layers % pp or 16 % (tp * pp) or 16 // (tp * pp) > job.batch_size:
                continue
            dp = 16 // (tp * pp)
            rep = -(-job.batch_size // dp)
            for mb in [rep] + [2**k for k in range(12) if 2**k < rep and rep % 2**k == 0] if pp == 1 else [1]:
                rows.append((dp, tp, pp, mb))
    dp, tp, pp, mb = (np.array(c) for c in zip(*rows))
    it = iteration_time_array(
        job.model,
        batch_size=job.batch_size,
        seq_len=job.seq_len,
        gpu="A100-80GB",
        dp=dp,
        tp=tp,
        nodes_spanned=2,
        pp=pp,
        micro_batch=mb,
    )
    ok = np.array([
        estimate_memory(job.model, batch_size=job.batch_size, seq_len=job.seq_len, dp=int(d), tp=int(t), pp=int(p),
                        micro_batch=int(m)).total_bytes <= 80 * 2**30
        for d, t, p, m in rows
    ])
    assert ok.any()
    assert work[i] == pytest.approx(job.recorded_duration / it[ok].min())


# ------------------------------------------------------------------------------------ real traces
def test_itp_trace_window_and_load_scale(cached_trace):
    itp = cached_trace("itp-cluster02")
    full = Workload.from_csv(itp, format="itp")
    assert len(full) == 5778
    w = Workload.from_csv(itp, format="itp", start=86400, end=2 * 86400)
    w2 = Workload.from_csv(itp, format="itp", start=86400, end=2 * 86400, load_scale=2.0)
    assert 0 < len(w) < 1000 and len(w2) == len(w)
    assert w.jobs[0].submit_time == 0.0
    np.testing.assert_allclose([j.submit_time for j in w2], [j.submit_time / 2 for j in w])
    assert len(Workload.from_csv(itp, format="itp", max_jobs=10)) == 10


def test_philly_full_trace_loads_and_resolves_fast(cached_trace):
    philly = cached_trace("philly")
    t0 = time.perf_counter()
    w = Workload.from_csv(philly, format="philly", seed=1)
    work = w.work_iterations(CLUSTER)
    elapsed = time.perf_counter() - t0
    assert len(w) == 82247
    submit = np.array([j.submit_time for j in w])
    assert submit[0] == 0.0 and np.all(np.diff(submit) >= 0)
    assert np.all(np.isfinite(work)) and np.all(work > 0)
    assert elapsed < 10.0
    assert max(j.requested_gpus for j in w) == 128


# ------------------------------------------------------------------------------------ canonical + errors
CANON = "job_id,submit_time,num_gpus,duration\na,0,1,100\nb,10,4,200\nc,10,8,300\n"


def test_canonical_minimal_and_with_recorded_models(tmp_path):
    w = Workload.from_csv(write(tmp_path, CANON))
    assert [j.name for j in w] == ["a", "b", "c"] and [j.job_id for j in w] == [0, 1, 2]
    assert [j.requested_gpus for j in w] == [1, 4, 8]
    text = (
        "job_id,submit_time,num_gpus,duration,model,batch_size,seq_len,group\n"
        "1,0,1,100,gpt2,16,512,7\n2,5,2,100,gpt2-medium,,,\n3,6,1,50,,,,\n"
    )
    w = Workload.from_csv(write(tmp_path, text))
    assert w[0].model is get_model("gpt2") and (w[0].batch_size, w[0].seq_len, w[0].group) == (16, 512, 7)
    assert w[0].assigned == ()
    assert w[1].model.name == "gpt2-medium" and w[1].assigned == ("batch_size", "seq_len")
    assert w[2].assigned == ("model", "batch_size", "seq_len") and w[2].group is None


@pytest.mark.parametrize(
    "text, fmt, row, column, words",
    [
        ("job_id,submit_time,duration\na,0,1\n", "canonical", None, "num_gpus", "missing column"),
        (
            "job_id,submit_time,num_gpus,duration\na,0,1,100\nb,1,1,-5\n",
            "canonical",
            2,
            "duration",
            "positive",
        ),
        (
            "job_id,submit_time,num_gpus,duration\na,0,1,abc\n",
            "canonical",
            1,
            "duration",
            "not a finite number",
        ),
        ("job_id,submit_time,num_gpus,duration\na,0,1,100\nb,1,1,\n", "canonical", 2, "duration", "missing"),
        ("job_id,submit_time,num_gpus,duration\na,0,1,NaN\n", "canonical", 1, "duration", "missing"),
        ("job_id,submit_time,num_gpus,duration\na,0,0,100\n", "canonical", 1, "num_gpus", "positive integer"),
        ("job_id,submit_time,num_gpus,duration\na,0,200000,100\n", "canonical", 1, "num_gpus", "100,000"),
        ("job_id,submit_time,num_gpus,duration\na,0,1.5,100\n", "canonical", 1, "num_gpus", "integer"),
        (
            "job_id,submit_time,num_gpus,duration\na,0,1,100\nb,1,1,9\na,2,1,9\n",
            "canonical",
            3,
            "job_id",
            "duplicate job id 'a' (first at row 1)",
        ),
        (
            "job_id,submit_time,num_gpus,duration\na,5,1,100\nb,9,1,9\nc,3,1,9\n",
            "canonical",
            3,
            "submit_time",
            "sorted",
        ),
        (
            "job_id,submission_time,duration,num_gpu\na,5,100,1\nb,2,100,1\n",
            "itp",
            2,
            "submission_time",
            "sorted",
        ),
        (
            "job_id,submit_time,num_gpus,duration,model\na,0,1,100,gpt5\n",
            "canonical",
            1,
            "model",
            "unknown model",
        ),
        (
            "timestamp,duration,num_gpus\n2017-10-09 07:01:55,66,1\nyesterday,1,1\n",
            "philly",
            2,
            "timestamp",
            "date-time",
        ),
        ("timestamp,duration,num_gpus\n2017-10-09 07:01:55,-1,1\n", "philly", 1, "duration", "positive"),
    ],
)
def test_bad_trace_files_name_file_row_and_column(tmp_path, text, fmt, row, column, words):
    p = write(tmp_path, text)
    with pytest.raises(TraceFormatError) as exc:
        Workload.from_csv(p, format=fmt)
    msg = str(exc.value)
    assert str(p) in msg and words in msg and repr(column) in msg
    if row is not None:
        assert f"row {row}" in msg


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty file"),
        ("job_id,submit_time,num_gpus,duration\n", "no data rows"),
        ("job_id;submit_time;num_gpus;duration\na;0;1;100\n", "';' as the delimiter"),
        ("job_id\tsubmit_time\tnum_gpus\tduration\na\t0\t1\t100\n", "a tab as the delimiter"),
    ],
)
def test_empty_and_wrong_delimiter(tmp_path, text, words):
    p = write(tmp_path, text)
    with pytest.raises(TraceFormatError, match=words) as exc:
        Workload.from_csv(p)
    assert str(p) in str(exc.value)


def test_philly_rows_are_sorted_stably(tmp_path):
    text = (
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:00:10,10,1,10,x\n2017-10-09 07:00:00,20,2,40,y\n2017-10-09 07:00:10,30,1,30,z\n"
    )
    w = Workload.from_csv(write(tmp_path, text), format="philly")
    assert [j.submit_time for j in w] == [0.0, 10.0, 10.0]
    assert [j.name for j in w] == ["y-2", "x-1", "z-3"]
    assert [j.recorded_duration for j in w] == [20.0, 10.0, 30.0]


def test_window_and_argument_errors(tmp_path):
    p = write(tmp_path, CANON)
    with pytest.raises(ConfigError, match="no jobs in the window"):
        Workload.from_csv(p, start=1000)
    with pytest.raises(ConfigError, match="load_scale"):
        Workload.from_csv(p, load_scale=0)
    with pytest.raises(ConfigError, match="max_jobs"):
        Workload.from_csv(p, max_jobs=0)
    with pytest.raises(UnknownNameError, match="trace format"):
        Workload.from_csv(p, format="csv")
    with pytest.raises(FileNotFoundError):
        Workload.from_csv(tmp_path / "missing.csv")
    w = Workload.from_csv(p, start=5, end=20)
    assert [j.name for j in w] == ["b", "c"] and w[0].submit_time == 0.0


# ------------------------------------------------------------------------------------ synthetic
def test_synthetic_is_deterministic_per_seed():
    gen = make_generator("synthetic-small")
    a, b, c = gen.generate(0), gen.generate(0), gen.generate(1)
    assert len(a) == 30
    assert a == b
    assert a != c
    for j in a:
        assert j.iterations > 0 and j.requested_gpus >= 1 and j.assigned == ()
        plans = plan_resources(
            j.model,
            batch_size=j.batch_size,
            seq_len=j.seq_len,
            gpu_types=["A100-80GB"],
            max_gpus=j.requested_gpus,
        )
        assert any(p.num_gpus == j.requested_gpus for p in plans)


@pytest.mark.parametrize("profile", ["itp", "philly"])
def test_synthetic_durations_match_trace_quantiles(profile):
    gen = SyntheticGenerator(
        num_jobs=4000, load=0.5, cluster=CLUSTER, duration_profile=profile, recurring_fraction=0.0
    )
    w = gen.generate(7)
    ref = CLUSTER.reference_gpu_type
    per_node = CLUSTER.max_gpus_per_node(ref)
    dur = np.array(
        [
            j.iterations
            * reference_iteration_time(
                j.model, j.batch_size, j.seq_len, j.requested_gpus, gpu=ref, gpus_per_node=per_node
            )
            for j in w
        ]
    )
    levels = np.array(DURATION_QUANTILE_LEVELS)
    target = np.array(DURATION_QUANTILES[profile])
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        got = np.quantile(dur, q)
        want = target[np.flatnonzero(levels == q)[0]]
        assert got == pytest.approx(want, rel=0.15), (q, got, want)
    # offered load (frenzy_env.workload.load, speed- and memory-aware): exactly the generator's load
    assert offered_load(w, CLUSTER) == pytest.approx(0.5, rel=1e-9)


def test_recurring_groups_share_configuration_and_similar_work():
    w = SyntheticGenerator(num_jobs=300, cluster=CLUSTER, recurring_fraction=0.5).generate(3)
    groups: dict[int, list[JobSpec]] = {}
    for j in w:
        if j.group is not None:
            groups.setdefault(j.group, []).append(j)
    assert len(groups) >= 5 and sum(len(v) for v in groups.values()) > 100
    for members in groups.values():
        assert len({(j.model, j.batch_size, j.seq_len, j.requested_gpus) for j in members}) == 1
        it = np.array([j.iterations for j in members])
        assert it.max() / it.min() < 2.5  # lognormal sigma 0.1


def test_presets_and_make_generator():
    assert set(WORKLOAD_PRESETS) >= {"itp-default", "synthetic", "synthetic-small"}
    gen = make_generator("synthetic", num_jobs=12, cluster="doubling-64")
    w = gen.generate(0)
    assert len(w) == 12 and gen.cluster == "doubling-64"
    assert isinstance(make_generator(w), FixedGenerator) and make_generator(w).generate(5) is w
    assert make_generator(gen) is gen
    with pytest.raises(UnknownNameError, match="workload preset"):
        make_generator("synthetik")
    with pytest.raises(ConfigError, match="num_job"):
        make_generator("synthetic", num_job=3)
    with pytest.raises(ConfigError, match="load"):
        SyntheticGenerator(load=0)
    w2 = SyntheticGenerator(num_jobs=5, load=1.0, cluster=CLUSTER).generate(2)
    assert len(w2) == 5 and w2.to_frame().shape == (5, 11)


def test_jobspec_validation():
    with pytest.raises(ConfigError, match="batch_size"):
        JobSpec(0, 0.0, get_model("gpt2"), 0, 128, 10.0)
    with pytest.raises(ConfigError, match="iterations"):
        JobSpec(0, 0.0, get_model("gpt2"), 8, 128, None)
    assert JobSpec(0, 0.0, "gpt2", 8, 128, 5.0).model is get_model("gpt2")
