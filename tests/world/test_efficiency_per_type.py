"""The opt-in per-GPU-type efficiency curves (``efficiency="per_type"``, frenzy_env.world.efficiency and
frenzy_env.world.efficiency_fits): hand-computed values per type, the default left as it was, bad values
refused, and the fits giving the shipped constants."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.paths import shared_data_dir
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.workload.configs import reference_iteration_time
from frenzy_env.world import efficiency_fits as fits
from frenzy_env.world.cluster import GPU_TYPES, ClusterSpec, GPUType
from frenzy_env.world.efficiency import (
    DEFAULT_EFFICIENCY,
    EFFICIENCY_MODES,
    HALF_TOKENS_BY_TYPE,
    LEVEL_BY_TYPE,
    type_curve,
    type_efficiency,
)
from frenzy_env.world.models import custom_model, get_model
from frenzy_env.world.throughput import DEFAULT_OVERHEAD_S, iteration_time, iteration_time_array

ROOT = Path(__file__).resolve().parents[2]
TINY = custom_model(vocab_size=1000, hidden=64, layers=2, heads=4, max_seq_len=16, name="tiny")
TINY_FLOPS = 998_400.0  # per token at s = 16 (tests/world/test_efficiency.py works it out)
# (type, peak TFLOP/s of the catalogue, T_half, level), written out
TYPES = (
    ("H100-80GB", 989.0, 878.0, 0.662),
    ("A100-80GB", 312.0, 455.0, 1.0),
    ("A100-40GB", 312.0, 597.0, 0.962),
    ("V100-32GB", 125.0, 651.0, 1.145),
    ("V100-16GB", 125.0, 651.0, 1.145),
    ("RTX3090-24GB", 71.0, 226.0, 1.581),
    ("T4-16GB", 65.0, 604.0, 0.887),
    ("P100-16GB", 9.3, 38.0, 2.533),
    ("H200-141GB", 989.0, 613.0, 0.879),
    ("L40S-48GB", 362.0, 1246.0, 0.443),
    ("A10-24GB", 125.0, 619.0, 0.720),
)


def test_every_catalogue_type_has_a_curve():
    assert set(HALF_TOKENS_BY_TYPE) == set(LEVEL_BY_TYPE) == set(GPU_TYPES)
    assert {(n, h, lv) for n, _, h, lv in TYPES} == {(n, *type_curve(n)) for n in GPU_TYPES}
    assert EFFICIENCY_MODES == ("flat", "microbatch", "per_type") and DEFAULT_EFFICIENCY == "per_type"  # env v6


@pytest.mark.parametrize(("name", "peak", "half", "level"), TYPES)
def test_curve_by_hand(name, peak, half, level):
    # u(T) = 0.4 x level x T / (T + T_half) x (16384 + T_half) / 16384, at most 1
    for tokens in (128.0, 2048.0, 16384.0):
        want = min(1.0, 0.4 * level * tokens / (tokens + half) * (16384.0 + half) / 16384.0)
        assert type_efficiency(tokens, 0.4, name) == pytest.approx(want, rel=1e-12)
    assert type_efficiency(16384.0, 0.4, name) == pytest.approx(min(1.0, 0.4 * level), rel=1e-12)
    # TINY, batch 8 of 16 tokens on one GPU: 998,400 x 128 FLOPs at u(128), plus the 49 ms overhead
    u = min(1.0, 0.4 * level * 128.0 / (128.0 + half) * (16384.0 + half) / 16384.0)
    got = iteration_time(TINY, batch_size=8, seq_len=16, gpu=name, dp=1, tp=1, efficiency="per_type")
    assert got == pytest.approx(TINY_FLOPS * 128 / (peak * 1e12 * u) + DEFAULT_OVERHEAD_S, rel=1e-12)


def test_hand_values_of_three_types():
    # RTX 3090 at one 2048-token sequence: 0.4 x 1.581 x 2048 / 2274 x 16610 / 16384 = 0.577406
    assert type_efficiency(2048, 0.4, "RTX3090-24GB") == pytest.approx(0.577406, abs=1e-6)
    # H100 at 512 tokens: 0.4 x 0.662 x 512 / 1390 x 17262 / 16384 = 0.102765
    assert type_efficiency(512, 0.4, "H100-80GB") == pytest.approx(0.102765, abs=1e-6)
    # P100 is capped at its peak from 16384 tokens up: 0.4 x 2.533 = 1.0132 > 1
    assert type_efficiency(np.array([16384.0, 1e6]), 0.4, "P100-16GB").tolist() == [1.0, 1.0]


def test_a100_and_unknown_types_run_the_microbatch_curve():
    kw = dict(batch_size=64, seq_len=1024, dp=np.array([1, 2, 4, 8]), tp=np.array([1, 1, 2, 1]),
              nodes_spanned=1, pp=np.array([1, 1, 1, 2]), micro_batch=np.array([4, 8, 2, 1]))
    toy = GPUType("toy", 16 * 1024**3, peak_tflops=1.0, intra_node_gbps=1.0, node_network_gbps=1.0,
                  cost_per_hour=1.0, source="test")
    for gpu in ("A100-80GB", toy):
        a = iteration_time_array("gpt2-xl", gpu=gpu, efficiency="microbatch", **kw)
        b = iteration_time_array("gpt2-xl", gpu=gpu, efficiency="per_type", **kw)
        assert np.array_equal(a, b)
    assert type_curve("toy") == (455.0, 1.0)


def test_only_compute_changes():
    """Per type, the communication and micro-step costs are those of "microbatch": the difference of the two
    iteration times is the compute's alone, by hand."""
    m = get_model("gpt2")
    kw = dict(batch_size=32, seq_len=1024, gpu="RTX3090-24GB", dp=8, tp=1, nodes_spanned=2, micro_batch=2)
    per, mb = (iteration_time(m, **kw, efficiency=e) for e in ("per_type", "microbatch"))
    flops = m.flops_per_token(1024) * 32 * 1024 / 8  # per GPU
    u_per = 0.4 * 1.581 * 2048 / (2048 + 226) * (16384 + 226) / 16384
    u_mb = 0.4 * 2048 / (2048 + 455) * (16384 + 455) / 16384
    assert per - mb == pytest.approx(flops / 71e12 * (1 / u_per - 1 / u_mb), rel=1e-9)
    assert per < mb  # the 3090's level and flatter curve


# the committed code's values under env v5's default (efficiency="microbatch"), computed before "per_type" existed
DEFAULT_CASES = (
    ("gpt2", 32, 1024, "RTX3090-24GB", [1, 2, 4, 8], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 2], None,
     [1.021534253742504, 0.5522428916324614, 0.31825721057744005, 0.35951679458326263]),
    ("llama-7b", 512, 2048, "A100-80GB", [8, 16, 8], [8, 4, 8], [1, 1, 2], [1, 2, 1], [1, 2, 1],
     [7.884114497006095, 6.75641522066503, 4.094309384952575]),
    ("gpt2-xl", 64, 1024, "V100-32GB", [4, 8], [2, 1], [1, 1], [1, 1], [4, 2],
     [1.9793386235237966, 2.1050989867501926]),
    ("bert-large", 64, 512, "T4-16GB", [2, 4], [1, 1], [1, 1], [1, 1], [8, 16],
     [1.5736072925038964, 0.825984564663649]),
    ("gpt2-medium", 16, 1024, "P100-16GB", [1, 2], [1, 1], [1, 1], [1, 1], [4, 8],
     [11.59029333579273, 5.585088839085167]),
    ("llama-13b", 1024, 2048, "H100-80GB", [16, 32], [8, 8], [1, 1], [2, 4], [2, 1],
     [4.991808897822897, 2.826941373587597]),
)


@pytest.mark.parametrize("case", DEFAULT_CASES, ids=[c[0] + "/" + c[3] for c in DEFAULT_CASES])
def test_v5_microbatch_iteration_times_unchanged(case):
    model, batch, seq, gpu, dp, tp, pp, span, mb, want = case
    kw = dict(batch_size=batch, seq_len=seq, gpu=gpu, dp=np.array(dp), tp=np.array(tp), pp=np.array(pp),
              nodes_spanned=np.array(span), micro_batch=None if mb is None else np.array(mb))
    assert iteration_time_array(model, efficiency="microbatch", **kw).tolist() == pytest.approx(want, rel=1e-14)


def _testbed_sim(**cfg):
    jobs = (JobSpec(job_id=0, submit_time=0.0, model="gpt2", batch_size=32, seq_len=1024, iterations=1000.0),
            JobSpec(job_id=1, submit_time=5.0, model="gpt2-xl", batch_size=64, seq_len=1024, iterations=None,
                    requested_gpus=4, recorded_duration=3600.0))
    spec = ClusterSpec.preset("frenzy-testbed")
    return ClusterSimulator(spec, Workload("t", jobs), SimConfig(max_plan_gpus=8, **cfg))


def test_v5_simulator_unchanged():
    """The plan table of env v5's default SimConfig (efficiency "microbatch", the cluster layout: A100-80GB,
    V100-32GB, RTX 3090 x 1, 2, 4, 8 GPUs), as the committed code gave it."""
    t = _testbed_sim(efficiency="microbatch", interface="cluster").plan_table
    assert SimConfig().efficiency == "per_type"  # env v6's default
    want0 = [0.270313884666, 0.162649424246, 0.109477194036, 0.0824151794182, 0.630095337221, 0.34106166541,
             0.197204829505, 0.128795579553, 1.06749179088, 0.567562070679, 0.318257210577, 0.344125879784]
    want1 = [5.91125129335, 2.99254574001, 1.53385296334, 0.805826575002, 13.241852304, 9.7901233828,
             4.49911062727, 2.47051688718, 23.2758526479, 11.8665594367, 8.91777144832, 4.99490578141]
    assert t.iter_time[0].tolist() == pytest.approx(want0, rel=1e-10)
    assert t.iter_time[1].tolist() == pytest.approx(want1, rel=1e-10)
    assert float(t.work[1]) == pytest.approx(2347.030703757565, rel=1e-12)
    assert reference_iteration_time(get_model("gpt2"), 32, 1024, 8, gpu="A100-80GB") == pytest.approx(
        0.08241517941817483, rel=1e-14)


def test_simulator_per_type():
    """Under "per_type" the A100 slots (the testbed's reference type) and the trace job's work are "microbatch"'s
    (env v5's); the other types' slots are the throughput model's per-type times of the slot's layout."""
    base, per = _testbed_sim(efficiency="microbatch").plan_table, _testbed_sim(efficiency="per_type").plan_table
    a100 = per.plan_type == per.gpu_types.index("A100-80GB")
    assert np.array_equal(per.iter_time[:, a100], base.iter_time[:, a100])
    assert per.work[1] == base.work[1]
    assert not np.allclose(per.iter_time[:, ~a100], base.iter_time[:, ~a100])
    row = per._row_key_l[0]
    for p in np.flatnonzero(~a100):
        gpu, count = per.gpu_types[per.plan_type[p]], int(per.plan_count[p])
        tp, pp, mb = per._row_tp_l[row][p], per._row_pp_l[row][p], per._row_mb_l[row][p]
        span = -(-count // per._max_node_gpus_l[per.plan_type[p]])
        want = iteration_time("gpt2", batch_size=32, seq_len=1024, gpu=gpu, dp=count // (tp * pp), tp=tp, pp=pp,
                              micro_batch=mb, nodes_spanned=span, efficiency="per_type")
        assert per.iter_time[0, p] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("bad", ["per-type", "PER_TYPE", "pertype", None, 1])
def test_bad_efficiency_is_named(bad):
    with pytest.raises(ConfigError, match=r"efficiency must be one of 'flat', 'microbatch', 'per_type', got "):
        SimConfig(efficiency=bad)
    with pytest.raises(ConfigError, match="efficiency"):
        iteration_time("gpt2", batch_size=8, seq_len=64, gpu="A100-80GB", dp=1, tp=1, efficiency=bad)


def test_env_accepts_per_type():
    from frenzy_env.env import FrenzyEnv

    job = JobSpec(job_id=0, submit_time=0.0, model="gpt2", batch_size=64, seq_len=1024, iterations=100.0)
    env = FrenzyEnv(cluster=ClusterSpec.homogeneous("RTX3090-24GB", 1, 4), workload=Workload("one", (job,)),
                    efficiency="per_type")
    env.reset(seed=0)
    assert env.sim_config.efficiency == "per_type"
    with pytest.raises(ConfigError, match="efficiency"):
        FrenzyEnv(cluster=ClusterSpec.homogeneous("RTX3090-24GB", 1, 4), workload=Workload("one", (job,)),
                  efficiency="per-type")


def test_fits_give_the_shipped_constants():
    half, level = fits.fitted_constants()
    assert set(half) == set(GPU_TYPES)
    for name in GPU_TYPES:
        assert half[name] == pytest.approx(HALF_TOKENS_BY_TYPE[name], abs=0.5), name
        assert level[name] == pytest.approx(LEVEL_BY_TYPE[name], abs=5e-4), name
    v100, err, rms, worst = fits.fit_v100_half_tokens()
    assert v100 == pytest.approx(651.0, abs=0.5) and 100 < err < 250 and rms < 0.025 and worst < 0.03
    a, b, worst = fits.fit_level_rule()
    assert (round(a, 3), round(b, 5)) == (0.346, 0.00384) and worst < 0.08


def test_held_out_checks():
    got = {what: pred / meas - 1.0 for what, pred, meas in fits.checks()}
    hf = {k: v for k, v in got.items() if k.startswith("HF V100")}
    assert hf["HF V100 fp32: 'microbatch' curve (A100's)"] == pytest.approx(0.647 / 0.875 - 1, abs=1e-3)  # v5's miss
    assert abs(hf["HF V100 fp32: V100 mixed fit x precision rule"]) < 0.10
    assert abs(hf["HF V100 fp32: V100 fp32 fit"]) < 0.10
    for prefix, bound in (("V100 SQuAD", 0.12), ("width:", 0.12), ("version:", 0.15), ("rule: level", 0.13),
                          ("A100-80GB absolute", 0.05)):
        errs = [v for k, v in got.items() if k.startswith(prefix)]
        assert errs and max(map(abs, errs)) < bound, prefix
    assert got["rule: V100 T_half (mixed) against the V100 fit"] == pytest.approx(-0.366, abs=1e-3)


def _script():
    path = ROOT / "scripts" / "fit_efficiency_per_type.py"
    spec = importlib.util.spec_from_file_location("fit_efficiency_per_type", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_prints_the_fits(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("FRENZY_ENV_DATA", raising=False)
    assert _script().main(["--json", str(tmp_path / "out.json")]) == 0
    out = capsys.readouterr().out
    assert "V100 T_half (mixed precision): 651.0" in out and "skipped: $FRENZY_ENV_DATA unset" in out
    assert (tmp_path / "out.json").is_file()


@pytest.mark.skipif(shared_data_dir() is None, reason="$FRENZY_ENV_DATA unset: Gavel's throughputs not at hand")
def test_gavel_curves_as_quoted():
    """Gavel's FP32 V100 and P100 curves, quoted in docs/world.md: the LSTM's half-saturation batches stand
    as the rule's ridges (0.77 against 0.73), the Transformer's do not (0.40)."""
    mod = _script()
    curves = mod.gavel_curves(shared_data_dir() / mod.GAVEL_FILE)
    ratio = {job: mod.fit_half_batch(*curves[("p100", job)]) / mod.fit_half_batch(*curves[("v100", job)])
             for job in mod.GAVEL_JOBS}
    assert ratio["LM"] == pytest.approx(0.77, abs=0.01) and ratio["Transformer"] == pytest.approx(0.40, abs=0.01)
    assert mod.GAVEL_RIDGES["p100"] / mod.GAVEL_RIDGES["v100"] == pytest.approx(0.728, abs=1e-3)


def test_width_rule_by_hand():
    """The level at model width h: the BERT-large level at h <= 1024, level ** 0.799 at h >= 2048, the exponent
    linear in log2(h) between; the A100-80GB stays at 1 (so "per_type" on it is "microbatch" at every width)."""
    from frenzy_env.world.efficiency import width_exponent

    assert width_exponent(None) == width_exponent(768) == width_exponent(1024) == 1.0
    assert width_exponent(2048) == width_exponent(8192) == pytest.approx(0.799, abs=1e-12)
    assert width_exponent(1448.15) == pytest.approx(1.0 - 0.201 * 0.5, abs=1e-4)  # sqrt(2) x 1024: half-way
    assert type_curve("H100-80GB", 4096) == (878.0, pytest.approx(0.662 ** 0.799, rel=1e-12))  # 0.7192
    assert type_curve("H100-80GB", 768) == (878.0, 0.662) == type_curve("H100-80GB")
    assert type_curve("RTX3090-24GB", 5120)[1] == pytest.approx(1.581 ** 0.799, rel=1e-12)  # 1.442
    assert type_curve("A100-80GB", 8192) == (455.0, 1.0)
    # LLaMA-7B (width 4096) on one H100 at 2048 tokens: 0.4 x 0.662^0.799 x 2048 / 2926 x 17262 / 16384
    assert type_efficiency(2048, 0.4, "H100-80GB", 4096) == pytest.approx(
        0.4 * 0.662 ** 0.799 * 2048 / 2926 * 17262 / 16384, rel=1e-12)
    kw = dict(batch_size=64, seq_len=2048, dp=8, tp=1, micro_batch=2, nodes_spanned=1)
    a100 = [iteration_time("llama-7b", gpu="A100-80GB", efficiency=e, **kw) for e in ("microbatch", "per_type")]
    assert a100[0] == a100[1]


def test_width_rule_speeds_up_llms_on_h100_only_above_1024():
    kw = dict(batch_size=64, seq_len=1024, gpu="H100-80GB", dp=8, tp=1, micro_batch=2, nodes_spanned=1)
    t = {m: iteration_time(m, efficiency="per_type", **kw) for m in ("gpt2-medium", "llama-7b")}
    m = get_model("llama-7b")
    flops = m.flops_per_token(1024) * 64 * 1024 / 8
    u_bert = type_efficiency(2048.0, 0.4, "H100-80GB")
    u_llm = type_efficiency(2048.0, 0.4, "H100-80GB", m.hidden)
    assert u_llm / u_bert == pytest.approx(0.662 ** (0.799 - 1.0), rel=1e-12)  # +8.6%
    # the plan's time is the microbatch one with the compute at the width rule's efficiency
    u_mb = 0.4 * 2048 / (2048 + 455) * (16384 + 455) / 16384
    assert t["llama-7b"] - iteration_time(m, efficiency="microbatch", **kw) == pytest.approx(
        flops / 989e12 * (1 / u_llm - 1 / u_mb), rel=1e-9)
    # GPT-2 medium is 1024 wide: its level is the BERT-large one
    g = get_model("gpt2-medium")
    assert type_curve("H100-80GB", g.hidden)[1] == 0.662


def test_width_fit_gives_the_shipped_exponent():
    from frenzy_env.world.efficiency import WIDTH_EXPONENT

    llm, k, sd, n = fits.fit_width_exponent()
    assert n == 20 and llm == pytest.approx(0.719, abs=5e-4) and sd < 0.05
    assert k == pytest.approx(WIDTH_EXPONENT, abs=5e-4)
    got = {what: pred / meas - 1.0 for what, pred, meas in fits.checks()}
    width = [v for k, v in got.items() if k.startswith("width rule:")]
    assert len(width) == 2 and max(map(abs, width)) < 0.10
    # the two power-limited GDDR6 parts the rule overestimates (documented): A10 +21%, RTX 6000 Ada +26%
    gddr = [v for k, v in got.items() if k.startswith("rule, power-limited GDDR6 part")]
    assert len(gddr) == 2 and all(0.15 < v < 0.30 for v in gddr)


def test_seven_b_h100_over_a100_nearer_published():
    """LLaMA-7B, 8 GPUs of one node, dp 8, micro-batch 4: per-GPU throughput H100 / A100-80GB under "per_type"
    2.22x (MosaicML's MPT-7B, the same code on both: 2.16-2.34x); "microbatch" (peaks alone) 3.15x."""
    kw = dict(batch_size=512, seq_len=2048, dp=8, tp=1, micro_batch=4, nodes_spanned=1)
    ratio = {e: iteration_time("llama-7b", gpu="A100-80GB", efficiency=e, **kw)
             / iteration_time("llama-7b", gpu="H100-80GB", efficiency=e, **kw) for e in ("microbatch", "per_type")}
    assert ratio["per_type"] == pytest.approx(2.22, abs=0.01) and ratio["microbatch"] == pytest.approx(3.15, abs=0.01)
