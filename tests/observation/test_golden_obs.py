"""Golden observations (Jumanji style): a hand-built instance, every named entry of every observation block
asserted against values computed by hand after each step.

The instance: one node of 4 A100-80GB GPUs, three gpt2 jobs (two submitted at 0 s, one at 5,000 s), 3 queue
slots and 2 running slots, in the cluster layout of env v5 (``interface="cluster"``: the universal grid's own
entries are computed by hand in ``test_universal.py``), so the plan slots are (A100-80GB, 1 / 2 / 4 GPUs). The
seconds per iteration of each (job, plan) come from the throughput model (tested on its own); every scale, offset
and column of the encoding is written out here with literal numbers, so a change to any of them fails this test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from frenzy_env.env import FrenzyEnv
from frenzy_env.observation import GLOBAL_FEATURES, QUEUE_FEATURES, RUNNING_FEATURES
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import ClusterSpec
from frenzy_env.world.models import get_model

STARTUP = 30.0
RESTART = 10.0 + STARTUP  # a resize: restart_overhead (10 s), the checkpoint write (0 s here), then start-up
# the flat start-up of env v2 (no model-size part), so that start-up is STARTUP exactly in the hand values
FLAT = {"checkpoint_bandwidth": math.inf, "load_bandwidth": math.inf}
#: env v5's cluster layout (3 plan slots, the nodes block), which every index and entry here is written for
V5_LAYOUT = {"interface": "cluster"}
JOBS = (  # submit, batch, seq, iterations, requested GPUs
    (0.0, 8, 1024, 20000.0, 1),
    (0.0, 16, 512, 20000.0, 2),
    (5000.0, 4, 256, 500.0, 4),
)


def _best(env, job: int) -> float:
    """Predicted seconds of a job's whole work on its fastest plan (all three plans fit every job)."""
    return JOBS[job][3] * float(env.unwrapped.sim.iter_time[job].min())


def _lt(seconds: float) -> float:
    """The encoding of a time: log1p(seconds) / 16 (float64 before the float32 cast)."""
    return math.log1p(seconds) / 16.0


@pytest.fixture()
def env() -> FrenzyEnv:
    cluster = ClusterSpec.from_counts("one-node", {"A100-80GB": (1, 4)})
    jobs = [
        JobSpec(i, submit, get_model("gpt2"), batch, seq, iters, requested_gpus=req)
        for i, (submit, batch, seq, iters, req) in enumerate(JOBS)
    ]
    return FrenzyEnv(
        cluster=cluster, workload=Workload("golden", jobs), queue_slots=3, running_slots=2, startup_time=STARTUP,
        **FLAT, **V5_LAYOUT,
    )


def _blocks(env: FrenzyEnv, obs: dict) -> tuple[dict, dict, dict]:
    """The queue and running blocks as {row: {name: value}} and the globals as {name: value}."""
    q = obs["queue"].reshape(env.queue_shape)
    r = obs["running"].reshape(env.running_shape)
    queue = {k: dict(zip(QUEUE_FEATURES, q[k])) for k in range(q.shape[0])}
    running = {k: dict(zip(RUNNING_FEATURES, r[k])) for k in range(r.shape[0])}
    return queue, running, dict(zip(GLOBAL_FEATURES, obs["globals"]))


def _check_queued(env, obs_row, plan_tail, job: int, now: float) -> None:
    submit, batch, seq, iters, req = JOBS[job]
    times = iters * env.unwrapped.sim.iter_time[job]  # (P,) seconds on each plan (all three fit)
    want = {
        "present": 1.0,
        "wait": _lt(now - submit),
        "best_time": _lt(times.min()),
        "params": math.log10(get_model("gpt2").num_params) / 12.0,
        "batch": math.log2(batch) / 12.0,
        "seq_len": math.log2(seq) / 16.0,
        "requested_gpus": math.log2(req + 1) / 8.0,
    }
    assert obs_row == pytest.approx(want, rel=1e-6, abs=1e-7)
    assert plan_tail == pytest.approx([_lt(t) for t in times], rel=1e-6)


def test_every_entry_by_hand(env: FrenzyEnv) -> None:
    sim = env.unwrapped.sim
    assert sim.num_plans == 3 and [sim.plan_label(p) for p in range(3)] == [
        "A100-80GBx1", "A100-80GBx2", "A100-80GBx4",
    ]
    assert np.isfinite(sim.iter_time[:, :3]).all()
    nf_q, nf_r = len(QUEUE_FEATURES), len(RUNNING_FEATURES)

    # reset: jobs 0 and 1 have arrived at 0 s, the cluster is empty
    obs, info = env.reset(seed=0)
    queue, running, glob = _blocks(env, obs)
    qb = obs["queue"].reshape(env.queue_shape)
    _check_queued(env, queue[0], qb[0, nf_q:], 0, now=0.0)
    _check_queued(env, queue[1], qb[1, nf_q:], 1, now=0.0)
    assert not qb[2].any() and not obs["running"].any()
    assert obs["gpus"].tolist() == [1.0, 1.0]  # free fraction, capacity share of the one type
    assert obs["nodes"].tolist() == [1.0]
    assert glob == pytest.approx(
        {
            "queue_length": math.log1p(2) / 10.0,
            "running": 0.0,
            "backlog": 0.0,
            "arrived": 2 / 3,
            "next_arrival": _lt(5000.0),
            "busy": 0.0,
            "next_event": _lt(5000.0),  # the arrival
            "running_total": 0.0,
            "running_beyond": 0.0,
            "queued_work": _lt(_best(env, 0) + _best(env, 1)),
            "running_work": 0.0,
            "queued_gpus": 2 / 4,  # each could start on 1 GPU
        },
        rel=1e-6,
    )
    # start job 1 (queue slot 1) on 2 GPUs: it runs, in start-up, and job 0 waits in queue slot 0
    w0 = env.first_start
    assert w0 == 4 and obs["action_mask"][:w0].all()  # "wait" and the three timed waits
    assert obs["action_mask"][w0 : w0 + 6].all()
    obs, reward, _, _, info = env.step(w0 + 1 * 3 + 1)
    assert reward == 0.0 and info["time"] == 0.0
    queue, running, glob = _blocks(env, obs)
    _check_queued(env, queue[0], qb[0, nf_q:], 0, now=0.0)
    rb = obs["running"].reshape(env.running_shape)
    times1 = JOBS[1][3] * sim.iter_time[1]
    # time left: its start-up (all 30 s of it still to pay) then its work on plan 1; a move to plan 0 or 2
    # would cost a restart there instead
    left1 = [RESTART + times1[0], STARTUP + times1[1], RESTART + times1[2]]
    assert running[0] == pytest.approx(
        {"present": 1.0, "elapsed": 0.0, "remaining_time": _lt(left1[1]), "num_gpus": math.log2(3) / 8.0,
         "gpu_type": 0.0, "restarts": 0.0, "progress": 0.0},
        rel=1e-6, abs=1e-7,
    )
    assert rb[0, nf_r:] == pytest.approx([_lt(t) for t in left1], rel=1e-6)  # every plan is available
    assert not rb[1].any()
    assert obs["gpus"].tolist() == [0.5, 1.0] and obs["nodes"].tolist() == [0.5]
    assert glob == pytest.approx(
        {"queue_length": math.log1p(1) / 10.0, "running": 0.5, "backlog": 0.0, "arrived": 2 / 3,
         "next_arrival": _lt(5000.0), "busy": 0.5,
         "next_event": _lt(STARTUP + times1[1]),  # job 1's finish, before the arrival
         "running_total": math.log1p(1) / 10.0, "running_beyond": 0.0,
         "queued_work": _lt(_best(env, 0)), "running_work": _lt(left1[1]), "queued_gpus": 1 / 4},
        rel=1e-6, abs=1e-7,
    )
    mask = obs["action_mask"].astype(bool)
    assert mask[w0 : w0 + 3].tolist() == [True, True, False]  # job 0 on 1 or 2 GPUs (2 are free), not on 4
    assert not mask[env.first_resize :].any()  # no resize during start-up

    # start job 0 on 1 GPU: nothing but "wait" is legal until job 1 finishes, so time runs to that finish
    finish1 = STARTUP + JOBS[1][3] * sim.iter_time[1, 1]
    finish0 = STARTUP + JOBS[0][3] * sim.iter_time[0, 0]
    assert finish1 < finish0 < 5000.0
    obs, reward, terminated, _, info = env.step(w0 + 0 * 3 + 0)
    assert info["time"] == pytest.approx(finish1) and not terminated
    assert reward == pytest.approx(-2 * finish1 / 3600.0)  # two jobs in the system all along
    queue, running, glob = _blocks(env, obs)
    assert not obs["queue"].any()
    done = (finish1 - STARTUP) / sim.iter_time[0, 0]
    rem = JOBS[0][3] - done
    assert running[0] == pytest.approx(
        {"present": 1.0, "elapsed": _lt(finish1), "remaining_time": _lt(rem * sim.iter_time[0, 0]),
         "num_gpus": math.log2(2) / 8.0, "gpu_type": 0.0, "restarts": 0.0, "progress": done / JOBS[0][3]},
        rel=1e-5, abs=1e-7,
    )
    rb = obs["running"].reshape(env.running_shape)
    # past its start-up: the work left on plan 0, or a restart and the work at plan 1's or 2's speed
    restart = [0.0, RESTART, RESTART]
    assert rb[0, nf_r:] == pytest.approx([_lt(c + rem * t) for c, t in zip(restart, sim.iter_time[0])], rel=1e-5)
    assert obs["gpus"].tolist() == [0.75, 1.0] and obs["nodes"].tolist() == [0.75]
    assert glob == pytest.approx(
        {"queue_length": 0.0, "running": 0.5, "backlog": 0.0, "arrived": 2 / 3,
         "next_arrival": _lt(5000.0 - finish1), "busy": 0.25, "next_event": _lt(finish0 - finish1),
         "running_total": math.log1p(1) / 10.0, "running_beyond": 0.0, "queued_work": 0.0,
         "running_work": _lt(rem * sim.iter_time[0, 0]), "queued_gpus": 0.0},
        rel=1e-5, abs=1e-7,
    )
    assert obs["action_mask"][env.first_resize :].astype(bool).tolist()[:3] == [False, True, True]  # resize job 0

    # wait: job 0 finishes, the cluster is empty until job 2 arrives at 5,000 s (only "wait" is legal)
    obs, reward, terminated, _, info = env.step(0)
    assert info["time"] == 5000.0 and not terminated
    assert reward == pytest.approx(-(finish0 - finish1) / 3600.0)
    queue, running, glob = _blocks(env, obs)
    qb = obs["queue"].reshape(env.queue_shape)
    _check_queued(env, queue[0], qb[0, nf_q:], 2, now=5000.0)
    assert not obs["running"].any() and obs["gpus"].tolist() == [1.0, 1.0]
    assert glob == pytest.approx(
        {"queue_length": math.log1p(1) / 10.0, "running": 0.0, "backlog": 0.0, "arrived": 1.0,
         "next_arrival": 0.0, "busy": 0.0, "next_event": 0.0, "running_total": 0.0, "running_beyond": 0.0,
         "queued_work": _lt(_best(env, 2)), "running_work": 0.0, "queued_gpus": 1 / 4},
        rel=1e-6, abs=1e-7,
    )

    # job 2 on 4 GPUs; the episode ends when it finishes, and the return is minus the total JCT in hours
    obs, reward, terminated, _, info = env.step(w0 + 0 * 3 + 2)
    finish2 = 5000.0 + STARTUP + JOBS[2][3] * sim.iter_time[2, 2]
    assert terminated and info["time"] == pytest.approx(finish2)
    assert reward == pytest.approx(-(finish2 - 5000.0) / 3600.0)
    jct = [r.finish_time - r.submit_time for r in sim.records]
    assert jct == pytest.approx([finish0, finish1, finish2 - 5000.0])


def test_waiting_jobs_by_hand(env: FrenzyEnv) -> None:
    """"Wait" on an empty cluster: time runs to job 2's arrival, and the two first jobs show 5,000 s waited."""
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(0)
    assert info["time"] == 5000.0 and not terminated
    assert reward == pytest.approx(-2 * 5000.0 / 3600.0)
    queue, running, glob = _blocks(env, obs)
    qb = obs["queue"].reshape(env.queue_shape)
    for slot, job in enumerate((0, 1, 2)):
        _check_queued(env, queue[slot], qb[slot, len(QUEUE_FEATURES) :], job, now=5000.0)
    assert queue[0]["wait"] == pytest.approx(math.log1p(5000.0) / 16.0) and queue[2]["wait"] == 0.0
    assert glob == pytest.approx(
        {"queue_length": math.log1p(3) / 10.0, "running": 0.0, "backlog": 0.0, "arrived": 1.0,
         "next_arrival": 0.0, "busy": 0.0, "next_event": 0.0, "running_total": 0.0, "running_beyond": 0.0,
         "queued_work": _lt(_best(env, 0) + _best(env, 1) + _best(env, 2)), "running_work": 0.0,
         "queued_gpus": 3 / 4},
        rel=1e-6, abs=1e-7,
    )
    # one queue slot fewer than jobs: the backlog counts the job beyond the window
    env2 = FrenzyEnv(cluster=env.cluster, workload=env.unwrapped.sim.workload, queue_slots=2, running_slots=2,
                     startup_time=STARTUP, **FLAT, **V5_LAYOUT)
    env2.reset(seed=0)
    obs2, *_ = env2.step(0)
    assert dict(zip(GLOBAL_FEATURES, obs2["globals"]))["backlog"] == pytest.approx(math.log1p(1) / 10.0)
