"""Sizing rule "recorded" (env v5's default): jobs sized like the jobs that were recorded.

The rule is the ``Sizing rule recorded (v5)`` section of :mod:`frenzy_env.workload.configs`. The hand-worked
instances use that the extended estimator is linear in the micro-batch for a fixed layout without pipeline
(model states + micro-batch x per-sequence activations + constants).
"""

from __future__ import annotations

import collections

import numpy as np
import pandas as pd
import pytest

from frenzy_env.errors import TraceFormatError, UnknownNameError
from frenzy_env.workload import (
    GPU_DEMAND_COUNTS,
    ITP_EXTRACT,
    MICRO_BATCH_WEIGHTS,
    SyntheticGenerator,
    Workload,
    assign_configs,
    data_path,
    fits_unaccumulated,
    make_generator,
    recorded_layout,
    recorded_options,
)
from frenzy_env.workload.configs import _fits, _one_layout_bytes
from frenzy_env.workload.generators import cluster_holds
from frenzy_env.world.cluster import ClusterSpec, get_gpu_type
from frenzy_env.world.models import get_model

A100 = "A100-80GB"


def _max_micro_batch(model, seq, tp, gpu):
    """Largest micro-batch that fits one replica of ``tp`` GPUs, from the estimator's two points (it is linear)."""
    m1 = _one_layout_bytes(model, 1, seq, 1, tp, 1, 1)
    slope = _one_layout_bytes(model, 2, seq, 1, tp, 1, 2) - m1
    return int((get_gpu_type(gpu).memory_bytes - m1) // slope) + 1


def test_gpt2_on_a100_by_hand():
    gpt2 = get_model("gpt2")
    # 6.07 GB + 2.03 GB per sequence of 1024 tokens: 40 sequences fit 80 GiB, 41 do not
    assert _max_micro_batch(gpt2, 1024, 1, A100) == 40
    # one GPU: no quarter to avoid; micro-batches 1..32 of MICRO_BATCH_WEIGHTS fit (64 does not), steps 1, 2, 4
    one = recorded_options(gpt2, 1024, 1, A100, 8)
    assert {(mb, a) for _, mb, a, _ in one} == {(mb, a) for mb in (1, 2, 4, 8, 16, 32) for a in (1, 2, 4)}
    assert all(b == mb * a for b, mb, a, _ in one) and max(b for b, *_ in one) == 128
    # four GPUs: layout 4 x 1 (gpt2 needs no tensor parallelism); B = 4 mb a must not fit one GPU as one
    # micro-batch, i.e. mb a > 40 / 4 = 10: the pairs with mb a >= 16
    assert recorded_layout(gpt2, 1024, 4, A100, 8) == (4, 1, 1)
    four = recorded_options(gpt2, 1024, 4, A100, 8)
    want = {(mb, a) for mb in (1, 2, 4, 8, 16, 32) for a in (1, 2, 4) if mb * a >= 16}
    assert {(mb, a) for _, mb, a, _ in four} == want
    assert all(b == 4 * mb * a for b, mb, a, _ in four)
    assert fits_unaccumulated(gpt2, 40, 1024, 1, A100, 8) and not fits_unaccumulated(gpt2, 41, 1024, 1, A100, 8)
    # probabilities: P(mb) P(a) renormalised over the kept pairs; (4, 4) has 0.25 / 3 of 1.125 / 3
    p = {(mb, a): w for _, mb, a, w in four}
    assert sum(p.values()) == pytest.approx(1.0)
    kept_mass = sum(MICRO_BATCH_WEIGHTS[mb] for mb in (4, 8, 8, 16, 16, 16, 32, 32, 32)) / 3
    assert kept_mass == pytest.approx(1.125 / 3)
    assert p[(4, 4)] == pytest.approx(MICRO_BATCH_WEIGHTS[4] / 3 / kept_mass)


def test_llama_7b_needs_tensor_parallelism_on_two_a100s():
    llama = get_model("llama-7b")
    # 20 bytes of model states per parameter: 125.5 GiB on one GPU, 62.8 GiB per GPU at tp 2
    assert llama.num_params * 20 / 2**30 == pytest.approx(125.5, abs=0.1)
    assert recorded_layout(llama, 2048, 1, A100, 8) is None
    assert recorded_layout(llama, 2048, 2, A100, 8) == (1, 2, 1)
    assert _max_micro_batch(llama, 2048, 2, A100) == 1  # 76.7 GiB at micro-batch 1, 89.2 at 2
    assert {(b, mb, a) for b, mb, a, _ in recorded_options(llama, 2048, 2, A100, 8)} == {
        (1, 1, 1),
        (2, 1, 2),
        (4, 1, 4),
    }
    # eight GPUs: layout 4 x 2; B = 4 a must not fit two GPUs (one tp-2 replica) as one micro-batch: it does not,
    # since even 2 sequences do not fit there
    assert recorded_layout(llama, 2048, 8, A100, 8) == (4, 2, 1)
    assert [b for b, *_ in recorded_options(llama, 2048, 8, A100, 8)] == [4, 8, 16]


def test_pipeline_where_tensor_parallelism_is_not_enough():
    # llama-2-70b: tp 8 on 32 A100s leaves 8 x 4 = 32 GPUs only with 4 pipeline stages; micro-batch 1, 4 a
    # micro-batches per iteration
    big = get_model("llama-2-70b")
    assert recorded_layout(big, 2048, 8, A100, 8) is None
    assert recorded_layout(big, 2048, 32, A100, 8) == (1, 8, 4)
    assert [(b, mb, a) for b, mb, a, _ in recorded_options(big, 2048, 32, A100, 8)] == [
        (4, 1, 1),
        (8, 1, 2),
        (16, 1, 4),
    ]


def test_trace_jobs_run_at_their_count_and_not_on_a_quarter():
    w = make_generator("itp-recorded").generate(0)
    assert len(w) == 570 and "sizing" not in w.source  # the default rule (env v5) goes unnamed
    assert "sizing v4" in make_generator("itp-default", sizing="v4").generate(0).source
    mix = [(t, 32, 4 if t.startswith("RTX") else 8) for t in ("A100-80GB", "V100-32GB", "RTX3090-24GB")]
    for job in {(j.model, j.batch_size, j.seq_len, j.requested_gpus) for j in w}:
        m, b, s, g = job
        types = [(t, p) for t, _, p in mix if b in {o[0] for o in recorded_options(m, s, g, t, p)}]
        assert types, job
        # the simulator's plans hold it at its count (with at most 4 accumulation steps), not on a quarter
        assert all(_fits(m, b, s, g, t, p) and not fits_unaccumulated(m, b, s, g // 4, t, p) for t, p in types)
    one = np.array([j.batch_size for j in w if j.requested_gpus == 1])
    assert one.max() <= 256 and (one >= 256).mean() < 0.05


def test_seeded_and_reproducible_and_recorded_the_default():
    counts = np.array([1, 1, 2, 4, 8, 1, 4, 16])
    a = assign_configs(counts, seed=7, sizing="recorded")
    b = assign_configs(counts, seed=7, sizing="recorded")
    c = assign_configs(counts, seed=8, sizing="recorded")
    assert [m.name for m in a[0]] == [m.name for m in b[0]] and (a[1] == b[1]).all() and (a[2] == b[2]).all()
    assert [m.name for m in a[0]] != [m.name for m in c[0]] or not (a[1] == c[1]).all()
    default = assign_configs(counts, seed=7)  # env v5: "recorded" is the default
    assert [m.name for m in default[0]] == [m.name for m in a[0]] and (default[1] == a[1]).all()
    v4 = assign_configs(counts, seed=7, sizing="v4")
    assert [m.name for m in v4[0]] != [m.name for m in a[0]] or not (v4[1] == a[1]).all()
    gen = make_generator("itp-default", sizing="recorded")
    assert gen.sizing == "recorded" and make_generator("itp-default").sizing == "recorded"
    w1, w2 = gen.generate(1), make_generator("itp-recorded").generate(1)
    assert [(j.model, j.batch_size) for j in w1] == [(j.model, j.batch_size) for j in w2]
    with pytest.raises(UnknownNameError, match="sizing rule"):
        assign_configs(counts, seed=0, sizing="v5")
    with pytest.raises(UnknownNameError, match="sizing rule"):
        make_generator("synthetic", sizing="real")


def test_a_row_no_configuration_can_satisfy_names_row_job_and_value(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "job_id,submit_time,num_gpus,duration,model,batch_size\na,0,1,100,gpt2,\nbig,5,1,100,llama-2-70b,\n"
    )
    Workload.from_csv(path, seed=0, sizing="v4")  # v4 falls back to the recorded model's candidates
    with pytest.raises(TraceFormatError) as exc:
        Workload.from_csv(path, seed=0)  # the default rule (env v5)
    msg = str(exc.value)
    assert "row 2" in msg and "'num_gpus'" in msg and "job 'big'" in msg and "1 GPUs" in msg and "llama-2-70b" in msg
    path.write_text("job_id,submit_time,num_gpus,duration,model,batch_size\nhuge,0,1,100,gpt2,4096\n")
    with pytest.raises(TraceFormatError, match=r"row 1.*job 'huge'.*global batch 4096"):
        Workload.from_csv(path, seed=0, sizing="recorded")
    path.write_text("job_id,submit_time,num_gpus,duration,model,batch_size\nok,0,1,100,gpt2,64\n")
    assert Workload.from_csv(path, seed=0, sizing="recorded").jobs[0].batch_size == 64


def test_synthetic_gpu_demand_is_the_shipped_weeks_and_the_mix_fits_the_cluster():
    recorded = pd.read_csv(data_path(ITP_EXTRACT))["num_gpu"].value_counts().sort_index()
    assert {int(k): int(v) for k, v in recorded.items()} == GPU_DEMAND_COUNTS
    testbed = ClusterSpec.preset("frenzy-testbed")
    mix = [(t, testbed.gpus_of_type(t), testbed.max_gpus_per_node(t)) for t in testbed.gpu_types]
    assert not cluster_holds(get_model("llama-2-70b"), mix) and cluster_holds(get_model("llama-13b"), mix)
    big = ClusterSpec.preset("large-1024")
    assert cluster_holds(get_model("llama-2-70b"), [(t, big.gpus_of_type(t), 8) for t in big.gpu_types])
    gen = SyntheticGenerator(num_jobs=40, sizing="recorded")
    w, w2 = gen.generate(3), gen.generate(3)
    assert [(j.model, j.batch_size, j.requested_gpus) for j in w] == [
        (j.model, j.batch_size, j.requested_gpus) for j in w2
    ]
    counts = collections.Counter(j.requested_gpus for j in w)
    assert set(counts) <= set(GPU_DEMAND_COUNTS) and counts[1] > len(w) / 2
    assert all(j.model.num_params < 30e9 for j in w)
    for j in w:
        assert any(
            j.batch_size in {o[0] for o in recorded_options(j.model, j.seq_len, j.requested_gpus, t, p)}
            for t, _, p in mix
        ), (j.model.name, j.batch_size, j.requested_gpus)


def test_synthetic_gpu_demand_option_draws_only_the_named_counts_in_proportion():
    gen = SyntheticGenerator(num_jobs=400, cluster="doubling-64", max_gpus=8, recurring_fraction=0.0,
                             gpu_demand=((2, 1.0), (8, 3.0)))
    counts = collections.Counter(j.requested_gpus for j in gen.generate(0))
    assert set(counts) == {2, 8}
    assert counts[8] / 400 == pytest.approx(0.75, abs=0.07)  # binomial sd 0.022: 3 sd
    # the default is the shipped week's counts; a dict works as well as pairs
    assert SyntheticGenerator(gpu_demand={4: 1}).gpu_demand == ((4, 1.0),)
    assert SyntheticGenerator().generate(0).jobs == SyntheticGenerator(gpu_demand=None).generate(0).jobs


@pytest.mark.parametrize(
    ("demand", "match"),
    [
        (((3, 1.0),), "power of two >= 1, got 3"),
        (((2, 0.0),), "weight of 2 GPUs must be positive, got 0.0"),
        (((2, 1.0), (2, 2.0)), "names a GPU count twice"),
        ((), "at least one GPU count"),
        ("2", "GPU count must be a power of two|pairs"),
    ],
)
def test_synthetic_gpu_demand_bad_input_names_the_field_and_value(demand, match):
    from frenzy_env.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        SyntheticGenerator(gpu_demand=demand)
    with pytest.raises(ConfigError, match="gpu_demand applies to sizing 'recorded' only"):
        SyntheticGenerator(gpu_demand=((2, 1.0),), sizing="v4")


def test_synthetic_gpu_demand_that_no_cluster_type_holds_is_an_error():
    from frenzy_env.errors import ConfigError

    with pytest.raises(ConfigError, match=r"no count fits max_gpus=4 .*doubling-64"):
        SyntheticGenerator(cluster="doubling-64", max_gpus=4, gpu_demand=((8, 1.0),)).generate(0)
