"""The wait load (frenzy_env.workload.load, "Wait load"): the stretch bisection on the FIFO model's wait share, the
generators' and suites' ``load_mode="wait"``, and the busy load and the default left as they were."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from frenzy_env.errors import ConfigError
from frenzy_env.workload import SyntheticGenerator, TraceGenerator, make_generator
from frenzy_env.workload.load import (
    BUSY_RTOL,
    LOAD_MODES,
    WAIT_S,
    busy_stretch,
    delay_share,
    fifo_report,
    fifo_schedule,
    pressure_stretch,
    wait_share,
)
from frenzy_env.workload.suites import Suite, SyntheticPart, check_suite, suite_workloads


def _three_jobs():
    """One GPU; three 100-s jobs submitted 0, 1, 2. Stretched by s (gap d = s): job 1 starts at 100 and waits
    100 - d (over 60 s while d < 40), job 2 starts at 200 and waits 200 - 2d (over 60 s while d < 70), so the wait
    share is 2/3 for d < 40, 1/3 for 40 <= d < 70 and 0 from 70."""
    return np.array([0.0, 1.0, 2.0]), np.array([1, 1, 1]), np.array([[100.0], [100.0], [100.0]]), np.array([1])


def test_the_wait_share_of_the_hand_computed_instance():
    submit, gpus, run, cap = _three_jobs()
    for d, share in ((39.0, 2 / 3), (41.0, 1 / 3), (69.0, 1 / 3), (71.0, 0.0)):
        start, _, _ = fifo_schedule(submit * d, gpus, run, cap)
        assert wait_share(submit * d, start) == pytest.approx(share)


def test_the_delay_share_of_the_hand_computed_instance():
    submit, gpus, run, cap = _three_jobs()
    start, finish, _ = fifo_schedule(submit * 39.0, gpus, run, cap)
    # waits 0, 61, 122 s; each runs 100 s: 183 of 483 s in the system are waiting
    assert delay_share(submit * 39.0, start, finish) == pytest.approx(183 / 483)
    assert delay_share(submit * 39.0, np.append(start[:2], np.nan), finish) == pytest.approx(61 / 261)  # never started
    assert np.isnan(delay_share(np.array([]), np.array([]), np.array([])))


def test_wait_stretch_bisects_to_the_hand_computed_stretch():
    submit, gpus, run, cap = _three_jobs()
    s = pressure_stretch(submit, gpus, run, cap, 0.5, measure="wait")  # 2/3 >= 0.5 while d < 40
    assert 40.0 / (1 + BUSY_RTOL) <= s < 40.0
    assert pressure_stretch(submit, gpus, run, cap, 0.3, measure="wait") == pytest.approx(70.0, rel=BUSY_RTOL)
    assert pressure_stretch(submit, gpus, run, cap, 0.5, measure="wait") == s  # deterministic (and cached)
    # counted from the first submission: a shifted stream gets the same factor
    assert pressure_stretch(submit + 5.0, gpus, run, cap, 0.5, measure="wait") == s
    # the same inputs with the busy measure are a separate entry: the busy share is 1 while d <= 100 (the GPU never
    # idles), 300 / (3 d) after, so busy 0.5 is d = 200
    assert pressure_stretch(submit, gpus, run, cap, 0.5, measure="busy") == pytest.approx(200.0, rel=BUSY_RTOL)
    assert busy_stretch(submit, gpus, run, cap, 0.5) == pressure_stretch(submit, gpus, run, cap, 0.5, measure="busy")


def test_an_unreachable_wait_load_is_refused_naming_the_most_it_reaches():
    submit, gpus, run, cap = _three_jobs()
    with pytest.raises(ConfigError, match=r"load 0.7 with load_mode 'wait': FIFO makes at most 0.667 of the jobs "
                                          r"wait over 60 s of these 3 jobs"):
        pressure_stretch(submit, gpus, run, cap, 0.7, measure="wait")
    with pytest.raises(ConfigError, match=r"load_mode 'wait' needs at least two jobs"):
        pressure_stretch(np.zeros(3), gpus, run, cap, 0.5, measure="wait")
    with pytest.raises(ConfigError, match=r"measure must be one of 'busy', 'wait', got 'fluid'"):
        pressure_stretch(submit, gpus, run, cap, 0.5, measure="fluid")


def test_a_job_no_type_holds_is_not_counted_as_waiting():
    submit, gpus, run, cap = _three_jobs()
    run = np.vstack([run, [[np.inf]]])  # a fourth job that fits no type: never starts, left out of the share
    for g in (0, 2):  # fifo_plans gives such a job 0 GPUs; a count with no finite run time is the same job
        s = pressure_stretch(np.append(submit, 3.0), np.append(gpus, g), run, cap, 0.5, measure="wait")
        assert 40.0 / (1 + BUSY_RTOL) <= s < 40.0


def test_the_wait_mode_is_a_load_mode_and_needs_a_load_on_traces():
    assert LOAD_MODES == ("fluid", "busy", "wait")
    assert WAIT_S == 60.0
    with pytest.raises(ConfigError, match="load_mode 'wait' needs a load"):
        TraceGenerator("x.csv", cluster="frenzy-testbed", load_mode="wait")
    with pytest.raises(ConfigError, match=r"load_mode must be one of 'fluid', 'busy', 'wait', got 'queue'"):
        SyntheticGenerator(load_mode="queue")


def test_synthetic_wait_load_stretches_the_fluid_arrivals_to_the_fifo_wait_share():
    fluid = SyntheticGenerator(num_jobs=100, load=0.3)  # these jobs all at once: 39% wait under FIFO
    wait = dataclasses.replace(fluid, load_mode="wait")
    a, b = fluid.generate(3), wait.generate(3)
    assert b == wait.generate(3)  # deterministic
    strip = [dataclasses.replace(j, submit_time=0.0) for j in a.jobs]
    assert strip == [dataclasses.replace(j, submit_time=0.0) for j in b.jobs]  # the same jobs
    ta, tb = (np.array([j.submit_time for j in w.jobs]) for w in (a, b))
    factor = tb[-1] / ta[-1]
    np.testing.assert_allclose(tb, ta * factor, rtol=1e-12)
    assert factor < 1
    assert fifo_report(a, "frenzy-testbed").wait_frac < 0.1  # the fluid load: few jobs wait
    assert fifo_report(b, "frenzy-testbed").wait_frac >= 0.3
    # one crossing: a stretch (1 + rtol) larger leaves the share below the load
    later = dataclasses.replace(b, jobs=tuple(dataclasses.replace(j, submit_time=j.submit_time * (1 + 2 * BUSY_RTOL))
                                              for j in b.jobs))
    assert fifo_report(later, "frenzy-testbed").wait_frac < 0.3
    assert "load mode wait" in b.source
    assert wait.history(3) == fluid.history(3)


def test_trace_wait_load_makes_the_share_of_jobs_wait_on_the_shipped_week():
    wl = make_generator("itp-default", load_mode="wait", load=0.6).generate(0)
    assert 0.6 <= fifo_report(wl, "frenzy-testbed").wait_frac < 0.65
    assert fifo_report(make_generator("itp-default").generate(0), "frenzy-testbed").wait_frac < 0.45  # fluid 0.8
    assert "load_mode wait: 0.6 of the jobs wait over a minute under FIFO" in wl.source


def test_a_suite_passes_the_wait_mode_to_its_generators():
    suite = Suite("x", "test", "x", synthetic=SyntheticPart((1000,), num_jobs=200, load=0.3), load_mode="wait")
    check_suite(suite)
    assert suite.describe().endswith("on frenzy-testbed (load mode wait)")
    (item,) = suite_workloads(suite)
    assert item.generator.load_mode == "wait"
    assert fifo_report(item.generator.generate(item.seed), "frenzy-testbed").wait_frac >= 0.3


@pytest.mark.parametrize("preset", ["synthetic-small", "itp-default"])
def test_the_default_is_the_fluid_load(preset):
    gen = make_generator(preset)
    assert gen.load_mode == "fluid"
    assert "wait" not in gen.generate(0).source
