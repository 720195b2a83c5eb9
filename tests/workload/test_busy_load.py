"""The busy load (frenzy_env.workload.load, "Busy load"): the FIFO model, the busy fraction and wait share, the
stretch bisection, the generators' and suites' ``load_mode``, and the default left as it was."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.workload import SyntheticGenerator, TraceGenerator, make_generator
from frenzy_env.workload.load import (
    BUSY_RTOL,
    busy_fraction,
    busy_stretch,
    fifo_report,
    fifo_schedule,
    offered_load,
    wait_share,
)
from frenzy_env.workload.suites import Suite, SyntheticPart, check_suite, suite_workloads

INF = math.inf


def _instance():
    """Types 0 (2 GPUs) and 1 (1 GPU); five jobs (submit, GPUs, run seconds per type)."""
    submit = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    gpus = np.array([2, 1, 2, 1, 4])
    run = np.array([[10.0, INF], [5.0, 8.0], [4.0, INF], [3.0, 6.0], [INF, INF]])  # job 4 fits no type
    return submit, gpus, run, np.array([2, 1])


def test_fifo_model_schedule_by_hand():
    submit, gpus, run, cap = _instance()
    start, finish, typ = fifo_schedule(submit, gpus, run, cap)
    # t=0 job 0 takes both type-0 GPUs until 10; t=1 job 1 finds type 0 full, takes type 1 (8 s) until 9;
    # t=2 job 2 (type 0 only) waits; t=3 job 3 waits (type 1 busy); t=9 type 1 frees: job 2 still cannot start,
    # job 3 passes it (backfilling) on type 1 until 15; t=10 job 2 starts on type 0 until 14; job 4 never starts
    np.testing.assert_array_equal(start, [0.0, 1.0, 10.0, 9.0, np.nan])
    np.testing.assert_array_equal(finish, [10.0, 9.0, 14.0, 15.0, np.nan])
    np.testing.assert_array_equal(typ, [0, 1, 0, 1, -1])


def test_busy_fraction_and_wait_share_by_hand():
    submit, gpus, run, cap = _instance()
    start, finish, _ = fifo_schedule(submit, gpus, run, cap)
    # window T = (4 - 0) * 5 / 4 = 5 s from t=0: job 0 holds 2 GPUs x 5 s, job 1 1 GPU x 4 s -> 14 / (3 x 5)
    assert busy_fraction(submit, start, finish, gpus, 3) == pytest.approx(14 / 15)
    # an interval still held (end nan) counts up to the window's end; one never held counts nothing
    assert busy_fraction(submit, [0.0, np.nan], [np.nan, 3.0], [1, 1], 1) == pytest.approx(1.0)
    # waits 0, 0, 8, 6 s (job 4 never starts: it waits)
    assert wait_share(submit, start, wait_s=1.0) == pytest.approx(3 / 5)
    assert wait_share(submit[:4], start[:4], wait_s=7.0) == pytest.approx(1 / 4)
    assert math.isnan(wait_share(np.array([]), np.array([])))


def _two_jobs(gap: float = 1.0):
    """One GPU; two 10-s jobs submitted ``gap`` apart. Stretched by s (d = gap x s): the window is 2d, job 0 holds
    [0, 10], job 1 [max(d, 10), +10], so the busy fraction is 1 while d <= 10 and 10 / d after."""
    return np.array([0.0, gap]), np.array([1, 1]), np.array([[10.0], [10.0]]), np.array([1])


def test_busy_stretch_bisects_to_the_hand_computed_stretch():
    submit, gpus, run, cap = _two_jobs()
    s = busy_stretch(submit, gpus, run, cap, 0.8)  # 10 / d = 0.8 -> d = 12.5
    assert 12.5 / (1 + BUSY_RTOL) <= s <= 12.5
    assert busy_stretch(submit * 3.0, gpus, run, cap, 0.8) == pytest.approx(s / 3.0, rel=BUSY_RTOL)
    assert busy_stretch(submit, gpus, run, cap, 0.8) == s  # deterministic (and cached)
    assert busy_stretch(submit, gpus, run, cap, 0.5) == pytest.approx(20.0, rel=BUSY_RTOL)


def test_a_busy_load_fifo_cannot_reach_is_refused_naming_the_most_it_reaches():
    submit, gpus, run, _ = _two_jobs()
    # on 4 GPUs, as the gap goes to 0: job 0 holds 1 GPU over the whole window 2d, job 1 over its second half
    # -> (2d + d) / (4 x 2d) = 3/8
    with pytest.raises(ConfigError, match=r"load 0.5 with load_mode 'busy': FIFO keeps at most 0.375 of the 4 GPUs"):
        busy_stretch(submit, gpus, run, np.array([4]), 0.5)
    with pytest.raises(ConfigError, match="at least two jobs submitted at different times"):
        busy_stretch(np.zeros(2), gpus, run, np.array([1]), 0.5)


def test_bad_load_modes_are_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"load_mode must be one of 'fluid', 'busy', 'wait', got 'full'"):
        SyntheticGenerator(load_mode="full")
    with pytest.raises(ConfigError, match="load_mode must be one of"):
        TraceGenerator("x.csv", cluster="frenzy-testbed", load=0.5, load_mode=None)
    with pytest.raises(ConfigError, match="load_mode 'busy' needs a load"):
        TraceGenerator("x.csv", cluster="frenzy-testbed", load_mode="busy")
    with pytest.raises(ConfigError, match=r"suite 'v9-x': load_mode must be one of"):
        check_suite(Suite("x", "test", "x", synthetic=SyntheticPart((1000,)), version="v9", load_mode="Busy"))


# values of env v5's generators (seed 0, under v5's efficiency "microbatch", by which the fluid load sizes the
# arrivals), taken before the busy load existed
V5_SUBMIT_SUMS = {"synthetic-small": 211070.23432188787, "synthetic": 9162012.63926065,
                  "itp-default": 534868715.7013796}


@pytest.mark.parametrize("preset", sorted(V5_SUBMIT_SUMS))
def test_the_default_load_mode_leaves_workloads_as_they_were(preset):
    assert make_generator(preset).load_mode == "fluid"
    gen = make_generator(preset, efficiency="microbatch")  # v5's efficiency (v6's default is "per_type")
    assert gen.load_mode == "fluid"
    wl = gen.generate(0)
    assert sum(j.submit_time for j in wl.jobs) == pytest.approx(V5_SUBMIT_SUMS[preset], rel=1e-12)
    assert "busy" not in wl.source


def test_synthetic_busy_load_stretches_the_fluid_arrivals_to_the_fifo_busy_share():
    fluid = SyntheticGenerator(num_jobs=100, load=0.6)
    busy = dataclasses.replace(fluid, load_mode="busy")
    a, b = fluid.generate(3), busy.generate(3)
    assert b == busy.generate(3)  # deterministic
    # the same jobs; only the arrival times change, by one factor
    strip = [dataclasses.replace(j, submit_time=0.0) for j in a.jobs]
    assert strip == [dataclasses.replace(j, submit_time=0.0) for j in b.jobs]
    ta, tb = (np.array([j.submit_time for j in w.jobs]) for w in (a, b))
    factor = tb[-1] / ta[-1]
    np.testing.assert_allclose(tb, ta * factor, rtol=1e-12)
    assert factor < 1  # at load 0.6 the fluid load keeps FIFO's GPUs busy less than 60% of the window
    assert fifo_report(a, "frenzy-testbed").busy_frac < 0.6
    assert 0.6 <= fifo_report(b, "frenzy-testbed").busy_frac < 0.62
    assert offered_load(b, "frenzy-testbed") == pytest.approx(0.6 / factor)
    assert "load mode busy" in b.source
    assert busy.history(3) == fluid.history(3)  # a history is read for its jobs' work, not its times


def test_trace_busy_load_keeps_fifo_busy_at_the_load_on_the_shipped_week():
    gen = make_generator("itp-default", load_mode="busy")
    wl = gen.generate(0)
    fluid = make_generator("itp-default").generate(0)
    assert fifo_report(fluid, "frenzy-testbed").busy_frac < 0.6  # issue 52: about half at nominal load 0.8
    report = fifo_report(wl, "frenzy-testbed")
    assert 0.8 <= report.busy_frac < 0.82
    assert report.wait_frac > fifo_report(fluid, "frenzy-testbed").wait_frac
    assert "load_mode busy" in wl.source


def test_an_unreachable_busy_load_names_the_workload():
    gen = SyntheticGenerator(num_jobs=30, load=0.8, load_mode="busy", name="few")
    with pytest.raises(ConfigError, match=r"few, seed 0: load 0.8 with load_mode 'busy': FIFO keeps at most"):
        gen.generate(0)


def test_a_suite_passes_its_load_mode_to_its_generators():
    suite = Suite("x", "test", "x", synthetic=SyntheticPart((1000, 1001), num_jobs=50, load=0.3), load_mode="busy")
    check_suite(suite)
    assert suite.describe().endswith("on frenzy-testbed (load mode busy)")
    assert Suite("x", "test", "x", synthetic=SyntheticPart((1000,))).load_mode == "fluid"
    items = suite_workloads(suite)
    assert [it.generator.load_mode for it in items] == ["busy", "busy"]
    wl = items[0].generator.generate(items[0].seed)
    assert 0.3 <= fifo_report(wl, "frenzy-testbed").busy_frac < 0.32
