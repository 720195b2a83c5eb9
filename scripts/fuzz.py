"""Fuzz the environment: random actions, illegal ones included, across every preset and baseline.

Usage::

    python scripts/fuzz.py --steps 1000000 [--seed 0] [--json fuzz.json]

Episodes go round-robin over every registered environment preset (each with the "extended" and the
"frenzy" memory predictor, the latter under-estimates and so exercises out-of-memory failures) plus random
small clusters and workloads with odd settings. Each episode is driven by masked-random play or by one of
the registered baselines (``baselines.POLICIES``), with a fraction ``eps`` of the actions replaced by a
uniformly random integer in ``[-3, n + 3)`` (mostly illegal: masked out or out of range).

After every step :class:`InvariantChecker` checks the state independently of the simulator's own
``check_invariants`` (which it also calls): no GPU booked twice, free GPUs within ``[0, capacity]``, the
owner array agrees with every running job's allocation, status transitions are valid, every job finishes
exactly once or is rejected with a reason, time never goes back, work done never exceeds work asked, an
illegal action changes nothing, and at the end of an episode the metrics agree with the per-job records.
Resident memory is sampled after a warm-up and at the end.

The exit status is 1 on any crash, invariant violation or resident-memory growth above ``--max-growth-mb``.
Tests load this file by path (``tests/test_fuzz.py``, ``tests/test_properties.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from frenzy_env.cluster import GPU_TYPES, ClusterSpec, NodeSpec
from frenzy_env.env import ENV_PRESETS, FrenzyEnv
from frenzy_env.models import get_model
from frenzy_env.simulator import DONE, FUTURE, QUEUED, REJECTED, RUNNING
from frenzy_env.workload import JobSpec, Workload

SMALL_MODELS = ("gpt2", "gpt2-medium", "bert-large", "gpt2-large")
MEDIUM_MODELS = ("gpt2-xl", "llama-7b")
HUGE_MODELS = ("llama-2-70b", "llama-3.1-70b")  # fit nowhere on small clusters
REL = 1e-9  # relative tolerance of float comparisons

# allowed status changes within one env step (several events may happen during one step)
_ALLOWED = {
    FUTURE: {FUTURE, QUEUED, REJECTED},
    QUEUED: {QUEUED, RUNNING, DONE, REJECTED},
    RUNNING: {QUEUED, RUNNING, DONE, REJECTED},
    DONE: {DONE},
    REJECTED: {REJECTED},
}


# Known simulator bugs the checker tolerates (and counts in ``known_bug_hits``) so that other bugs stay
# visible; each has a strict xfail test that fails until it is fixed, then delete the entry.
# Known simulator bugs the checker tolerates (and counts) instead of failing; empty now that the one it held
# (an attempt doomed to out-of-memory accruing progress) is fixed.
KNOWN_BUGS: dict[str, bool] = {}


class InvariantViolation(AssertionError):
    """An invariant of the environment state does not hold."""


def _require(cond: Any, message: str) -> None:
    if not cond:
        raise InvariantViolation(message)


def _close(a: float, b: float, tol: float = 1e-6) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


# --------------------------------------------------------------------------------------------- checker
class InvariantChecker:
    """Independent checks of a :class:`FrenzyEnv` after every reset and step.

    Call :meth:`on_reset` after ``env.reset``, :meth:`before_step` just before ``env.step(action)`` and
    :meth:`after_step` with what ``step`` returned. Every failure raises :class:`InvariantViolation`.

    Parameters
    ----------
    env: the environment (wrappers are unwrapped).
    check_space: also check ``observation_space.contains(obs)`` (slower; the property tests use it).
    full_every: scan every per-job record every this many steps (and at each reset and episode end); the
        jobs touched by a step (status change, running, acted on) are checked after every step regardless.
    """

    def __init__(self, env: Any, *, check_space: bool = False, full_every: int = 1) -> None:
        self.env = env.unwrapped
        self.check_space = check_space
        self.full_every = max(1, int(full_every))
        self.steps_checked = 0
        self.episodes_checked = 0
        self.known_bug_hits: dict[str, int] = {}

    # ------------------------------------------------------------------ hooks
    @classmethod
    def for_simulator(cls, sim: Any) -> InvariantChecker:
        """A checker of a bare :class:`ClusterSimulator` (call :meth:`after_sim_action` after each call)."""
        checker = cls.__new__(cls)
        checker.env, checker.check_space, checker.full_every = None, False, 1
        checker.steps_checked = checker.episodes_checked = 0
        checker.known_bug_hits = {}
        checker._begin(sim)
        checker.check_state()
        return checker

    def _begin(self, sim: Any) -> None:
        self.sim = sim
        cap = sim.cluster.node_capacity
        self._node_of_gpu = np.repeat(np.arange(len(cap)), cap)  # (G,) node of each global GPU
        self._prev_now = sim.now
        self._prev_status = sim.status.copy()
        self._index = np.arange(sim.num_jobs)
        self._finish = np.full(sim.num_jobs, np.nan)  # finish time of each job once done
        self._prev_progress = self._progress()
        self._ooms = np.array([r.oom_failures for r in sim.records])  # per job, as of the last check
        self._ooms_full = self._ooms.copy()
        self._invalid = 0
        self._steps = 0
        self._job = -1

    def _known(self, key: str) -> None:
        self.known_bug_hits[key] = self.known_bug_hits.get(key, 0) + 1

    def on_reset(self, obs: dict, info: dict) -> None:
        sim = self.env.sim
        self._begin(sim)
        self._jct_sum = float(info["reward_components"]["jct"])
        _require(self._jct_sum <= 0.0, f"reset: positive JCT reward {self._jct_sum}")
        _require(not sim.running, "reset: a job is running before any action")
        self._check_obs(obs, info)
        self.check_state()

    def after_sim_action(self) -> None:
        """Checks after one call on a bare simulator (start, resize, preempt or advance)."""
        self._steps += 1
        self.steps_checked += 1
        self._check_transitions()
        self.check_state()
        if self.sim.done:
            self.check_metrics(self.sim.metrics(), terminated=True)

    def before_step(self, action: Any) -> None:
        env, sim = self.env, self.sim
        _require(env.sim is sim, "the simulator was replaced mid-episode")
        mask = env.action_masks()
        self._mask = mask
        q, p = env.queue_slots, env.num_plans
        a = int(action)
        self._a = a
        self._legal = 0 <= a < mask.size and bool(mask[a])
        self._kind, self._job, self._plan = "illegal", -1, -1
        if self._legal:
            if a == 0:
                self._kind = "wait"
            elif a <= q * p:
                k, self._plan = divmod(a - 1, p)
                self._kind, self._job = "start", int(env.visible_queue[k])
                _require(sim.status[self._job] == QUEUED, f"start of job {self._job} that is not queued")
            else:
                r, self._plan = divmod(a - 1 - q * p, p)
                self._kind, self._job = "resize", int(env.visible_running[r])
                _require(self._job in sim.running, f"resize of job {self._job} that is not running")
                self._restarts_before = sim.records[self._job].restarts
        else:
            self._snapshot = self._state_snapshot()

    def after_step(self, action: Any, obs: dict, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
        env, sim = self.env, self.sim
        self._steps += 1
        self.steps_checked += 1
        comp = info["reward_components"]
        if not self._legal:
            self._invalid += 1
            _require(comp["invalid"] == -env.invalid_action_penalty, f"illegal action {self._a}: no penalty")
            _require(comp["jct"] == 0.0, f"illegal action {self._a} accrued JCT reward {comp['jct']}")
            after = self._state_snapshot()
            for key, before in self._snapshot.items():
                _require(_same(before, after[key]), f"illegal action {self._a} changed {key}")
        else:
            _require(comp["invalid"] == 0.0, f"legal action {self._a} penalised")
        _require(comp["jct"] <= 0.0, f"positive JCT reward {comp['jct']}")
        _require(reward == comp["jct"] + comp["invalid"], f"reward {reward} != sum of its components {comp}")
        self._jct_sum += comp["jct"]
        _require(
            info["invalid_actions"] == self._invalid,
            f"info invalid_actions {info['invalid_actions']} != {self._invalid} illegal actions played",
        )
        if self._kind in ("start", "resize"):
            j, plan = self._job, self._plan
            rec = sim.records[j]
            _require(
                rec.num_gpus == int(sim.plan_count[plan]) and rec.gpu_type == sim.gpu_types[sim.plan_type[plan]],
                f"{self._kind} of job {j} on plan {sim.plan_label(plan)} recorded {rec.gpu_type}x{rec.num_gpus}",
            )
            _require(rec.dp * rec.tp == rec.num_gpus, f"job {j}: dp {rec.dp} x tp {rec.tp} != {rec.num_gpus}")
            if self._kind == "start":
                _require(
                    sim.status[j] != QUEUED or rec.oom_failures > self._ooms[j],
                    f"job {j} still queued after a legal start",
                )
            else:
                _require(rec.restarts == self._restarts_before + 1, f"resize of job {j} not counted as a restart")
        _require(terminated == sim.done, f"terminated={terminated} but sim.done={sim.done}")
        end = terminated or truncated
        self._check_transitions()
        self._check_obs(obs, info)
        self.check_state(full=end or self._steps % self.full_every == 0)
        if end:
            _require("metrics" in info, "the final info has no metrics")
            self.check_episode_end(info["metrics"], terminated)

    # ------------------------------------------------------------------ state checks
    def _state_snapshot(self) -> dict[str, Any]:
        sim = self.sim
        return {
            "time": sim.now,
            "free GPUs": sim.state.free.copy(),
            "GPU owners": sim.state.owner.copy(),
            "queue": list(sim.queue),
            "running set": list(sim.running),
            "status": sim.status.copy(),
            "work done": sim.done_iters.copy(),
            "next event": sim.next_event_time(),
            "next arrival": sim._next_arrival,
        }

    def _progress(self) -> np.ndarray:
        sim = self.sim
        prog = sim.done_iters.copy()  # (J,)
        for j in sim.running:
            prog[j] = sim.progress(j)
        return prog

    def check_state(self, full: bool = True) -> None:
        """State invariants (valid at any moment). ``full`` adds the O(jobs) scans of every record."""
        sim = self.sim
        if full:  # the simulator's own checks (O(running jobs x nodes)); ours below run every step
            try:
                sim.check_invariants()
            except AssertionError as exc:
                raise InvariantViolation(f"sim.check_invariants: {exc}") from None
        spec = sim.cluster
        cap = spec.node_capacity
        n_nodes, n_jobs = len(cap), sim.num_jobs
        free, owner = sim.state.free, sim.state.owner
        now = sim.now
        # --- GPUs: the owner array is the ground truth; free counts and allocations must agree with it
        _require(free.shape == cap.shape and owner.shape == (spec.num_gpus,), "state array shapes changed")
        _require((free >= 0).all(), f"negative free GPUs: {free.tolist()}")
        _require((free <= cap).all(), f"free GPUs above capacity: {free.tolist()} > {cap.tolist()}")
        held = owner >= 0
        busy = np.bincount(self._node_of_gpu[held], minlength=n_nodes)
        _require((busy == cap - free).all(), f"owner array: {busy.tolist()} busy; free: {(cap - free).tolist()}")
        _require(((owner >= -1) & (owner < n_jobs)).all(), "owner array holds an unknown job index")
        running = sorted(sim.running)
        runs = [sim.running[j] for j in running]
        r = len(runs)
        claimed = np.stack([x.counts for x in runs]) if r else np.zeros((0, n_nodes), dtype=np.int64)  # (R, N)
        if r:
            plans = np.array([x.plan for x in runs])  # (R,)
            tps = np.array([x.tp for x in runs])  # (R,)
            _require(
                (claimed.sum(axis=1) == sim.plan_count[plans]).all(), "a job holds more or fewer GPUs than its plan"
            )
            _require((claimed % tps[:, None] == 0).all(), "a tensor-parallel group spans nodes")
            _require((tps == sim.layout_tp[running, plans]).all(), "a running job's tp is not its plan's layout")
            wrong_type = (claimed > 0) & (spec.node_type_index[None, :] != sim.plan_type[plans][:, None])
            _require(not wrong_type.any(), "a job holds GPUs of a type other than its plan's")
            held_since = np.array([x.held_since for x in runs])
            progress_from = np.array([x.progress_from for x in runs])
            _require((held_since <= now).all() and (progress_from >= held_since).all(), "bad allocation times")
        _require(sorted(np.unique(owner[held]).tolist()) == running, "GPU owners are not exactly the running jobs")
        slot = np.full(n_jobs, -1, dtype=np.int64)
        slot[running] = np.arange(len(running))
        owned = np.bincount(slot[owner[held]] * n_nodes + self._node_of_gpu[held], minlength=len(running) * n_nodes)
        _require(
            (owned.reshape(len(running), n_nodes) == claimed).all(),
            "a GPU is booked twice, leaked, or held by a job that is not running",
        )
        _require(int(claimed.sum()) == sim.busy_gpus == int(held.sum()), "busy GPU counts disagree")
        # --- jobs (numpy over the status arrays)
        st = sim.status
        _require(sim.queue == np.flatnonzero(st == QUEUED).tolist(), "queue disagrees with status")
        _require(running == np.flatnonzero(st == RUNNING).tolist(), "running set disagrees with status")
        future = st == FUTURE
        _require((future == (self._index >= sim._next_arrival)).all(), "FUTURE status disagrees with arrivals")
        _require(
            (sim.submit[future] > now).all() and (sim.submit[~future] <= now).all(),
            "a job arrived before its submit time or is late",
        )
        done = st == DONE
        _require(
            sim.finished == int(done.sum()) and sim.rejected == int((st == REJECTED).sum()),
            "finished/rejected counters disagree with status",
        )
        work = sim.work
        _require((sim.done_iters <= work * (1 + REL)).all(), "work done exceeds work asked")
        _require((sim.done_iters[done] == work[done]).all(), "a done job did not do all its work")
        prog = self._progress()
        over = prog > work * (1 + REL) + REL
        _require(not over.any(), f"progress above work for jobs {np.flatnonzero(over).tolist()}")
        _require((prog >= 0).all(), "negative progress")
        _require(sim.next_event_time() >= now, "an event is due in the past")
        _require(sim.done == (sim.finished + sim.rejected == n_jobs), "done flag")
        if full:
            self._check_records()

    def _check_records(self) -> None:
        """Every per-job record against the status arrays (O(jobs) Python: not every step in the fuzzer)."""
        sim = self.sim
        recs = sim.records
        st = sim.status
        finish = np.array([r.finish_time for r in recs])
        start = np.array([r.start_time for r in recs])
        submit = np.array([r.submit_time for r in recs])
        done = st == DONE
        _require((submit == sim.submit).all(), "a record's submit time changed")
        _require((np.isfinite(finish) == done).all(), "finish time set for a job that is not done (or missing)")
        known = np.isfinite(self._finish)
        _require((finish[known] == self._finish[known]).all(), "a job finished twice")
        self._finish = finish
        rejected = np.array([bool(r.rejected_reason.strip()) for r in recs])
        _require((rejected == (st == REJECTED)).all(), "a job is rejected without a reason, or has one and is not")
        started = (st == RUNNING) | done
        _require(np.isfinite(start[started]).all(), "a running or done job has no start time")
        _require(np.isnan(finish[st == RUNNING]).all(), "a running job has a finish time")
        ok = np.isfinite(start)
        _require((start[ok] >= submit[ok]).all(), "a job started before its submit time")
        _require((finish[done] >= start[done]).all() and (finish[done] <= sim.now).all(), "bad finish time")
        ooms = np.array([r.oom_failures for r in recs])
        restarts = np.array([r.restarts for r in recs])
        _require(int(ooms.sum()) == sim.oom_failures and (ooms >= self._ooms_full).all(), "OOM counters")
        self._ooms_full = ooms
        _require(int(restarts.sum()) == sim.restarts and (restarts >= 0).all(), "restart counters disagree")
        _require(all(r.gpu_seconds >= 0 for r in recs), "negative GPU-seconds")

    def _check_transitions(self) -> None:
        sim = self.sim
        now = sim.now
        _require(now >= self._prev_now, f"time went back from {self._prev_now} to {now}")
        st = sim.status
        changed = np.flatnonzero(st != self._prev_status)
        for j in changed:
            a, b = int(self._prev_status[j]), int(st[j])
            _require(b in _ALLOWED[a], f"job {j}: invalid status change {a} -> {b}")
            if b == DONE:
                _require(np.isnan(self._finish[j]), f"job {j} finished twice")
                self._finish[j] = sim.records[j].finish_time
        # an out-of-memory failure loses the attempt's progress; nothing else may lose progress
        prog = self._progress()
        lost = np.flatnonzero(prog < self._prev_progress * (1 - REL) - REL)
        for j in lost:
            _require(sim.records[j].oom_failures > self._ooms[j], f"progress of job {j} went back")
        touched = set(changed.tolist()) | set(lost.tolist()) | set(sim.running) | {self._job}
        touched.discard(-1)
        for j in touched:
            self._ooms[j] = sim.records[j].oom_failures
        self._prev_now, self._prev_status, self._prev_progress = now, st.copy(), prog

    def _check_obs(self, obs: dict, info: dict) -> None:
        env, sim = self.env, self.sim
        mask = env.action_masks()
        _require(obs["action_mask"].dtype == np.int8 and (obs["action_mask"] == mask).all(), "obs mask != mask")
        _require((info["action_mask"] == mask).all(), "info mask != mask")
        _require(bool(mask[0]) == sim.has_pending_events(), "wait legal iff events are pending")
        _require(mask.any() or sim.done, "no legal action although the episode is not over (deadlock)")
        _require(info["time"] == sim.now, "info time != simulator time")
        _require(
            info["finished"] == sim.finished
            and info["rejected"] == sim.rejected
            and info["running"] == len(sim.running)
            and info["queue_length"] == len(sim.queue),
            "info counters disagree with the simulator",
        )
        for key, value in obs.items():
            _require(np.isfinite(value).all(), f"non-finite observation {key!r}")
        if self.check_space:
            _require(env.observation_space.contains(obs), "observation outside observation_space")

    # ------------------------------------------------------------------ episode end
    def check_episode_end(self, metrics: dict, terminated: bool) -> None:
        """The episode metrics agree with the per-job records and with what was played."""
        sim, env = self.sim, self.env
        self.check_metrics(metrics, terminated)
        if terminated:  # the return is minus the total time jobs spent in the system
            st, recs = sim.status, sim.records
            done = np.flatnonzero(st == DONE)
            in_system = float(sum(recs[j].finish_time - recs[j].submit_time for j in done))
            total = -self._jct_sum * env.reward_scale
            late_rejects = any(recs[j].oom_failures > 0 for j in np.flatnonzero(st == REJECTED))
            if late_rejects:  # jobs rejected after OOM failures spent some (unrecorded) time in the system
                _require(total >= in_system * (1 - 1e-6) - 1e-6, "return is above minus the total JCT")
            else:
                _require(_close(total, in_system), f"-return x scale {total} != total JCT {in_system}")

    def check_metrics(self, metrics: dict, terminated: bool) -> None:
        """The simulator's metrics agree with its per-job records (and, if over, every job is settled)."""
        self.episodes_checked += 1
        self._check_records()
        sim = self.sim
        recs = sim.records
        st = sim.status
        done = st == DONE
        submit = np.array([r.submit_time for r in recs])
        finish = np.array([r.finish_time for r in recs])
        jct = (finish - submit)[done]
        _require(metrics["jobs"] == sim.num_jobs, "metrics jobs")
        _require(
            metrics["finished"] == done.sum() and metrics["rejected"] == (st == REJECTED).sum(),
            "metrics finished/rejected disagree with the records",
        )
        _require(
            _close(metrics["avg_jct"], float(jct.mean()) if jct.size else math.nan),
            f"avg_jct {metrics['avg_jct']} != mean of the records' JCT",
        )
        _require(_close(metrics["p95_jct"], float(np.percentile(jct, 95)) if jct.size else math.nan), "p95_jct")
        makespan = float(finish[done].max() - sim.submit[0]) if done.any() else 0.0
        _require(_close(metrics["makespan"], makespan), f"makespan {metrics['makespan']} != {makespan}")
        gpu_s = sum(r.gpu_seconds for r in recs)
        gpu_s += sum(int(r.counts.sum()) * (sim.now - r.held_since) for r in sim.running.values())
        _require(_close(metrics["gpu_hours"], gpu_s / 3600), "gpu_hours disagree with the records")
        times, busy = sim.utilisation_timeline()
        integral = float(np.sum(busy * np.diff(np.append(times, sim.now))))
        _require(_close(integral, gpu_s), f"busy-GPU timeline integral {integral} != GPU-seconds {gpu_s}")
        util = gpu_s / (sim.cluster.num_gpus * makespan) if makespan > 0 else 0.0
        _require(_close(metrics["utilisation"], util), "utilisation")
        _require(metrics["ooms"] == sum(r.oom_failures for r in recs), "ooms")
        _require(metrics["restarts"] == sum(r.restarts for r in recs), "restarts")
        startup = sim.config.startup_time
        for j in np.flatnonzero(done):
            ok = sim.true_ok[j]
            _require(ok.any(), f"job {j} finished on no plan that fits")
            least = startup + sim.work[j] * float(sim.iter_time[j, ok].min())
            ulps = 8 * np.finfo(float).eps * max(abs(finish[j]), abs(submit[j]))  # absolute rounding of times
            _require(
                finish[j] - submit[j] >= least * (1 - 1e-9) - ulps,
                f"job {j} finished faster ({finish[j] - submit[j]} s) than physically possible ({least} s)",
            )
        from frenzy_env.evaluation import jobs_table

        table = jobs_table(sim)
        _require(
            len(table) == sim.num_jobs and np.allclose(table["jct"].to_numpy(), finish - submit, equal_nan=True),
            "jobs table disagrees with the records",
        )
        if terminated:
            _require(((st == DONE) | (st == REJECTED)).all(), "episode over with unsettled jobs")
            _require(not sim.queue and not sim.running and sim.busy_gpus == 0, "episode over with jobs in the system")
            _require(
                (sim.state.owner == -1).all() and (sim.state.free == sim.cluster.node_capacity).all(),
                "episode over with GPUs held",
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool((a == b).all())
    return a == b


# --------------------------------------------------------------------------------------------- configs
def random_config(rng: np.random.Generator, index: int = 0) -> tuple[ClusterSpec, Workload, dict]:
    """A small random cluster (1-4 nodes of 1-8 GPUs, 1-3 types), 1-15 jobs and odd env settings."""
    types = rng.choice(sorted(GPU_TYPES), size=int(rng.integers(1, 4)), replace=False)
    nodes = tuple(NodeSpec(str(rng.choice(types)), int(rng.integers(1, 9))) for _ in range(int(rng.integers(1, 5))))
    cluster = ClusterSpec(f"fuzz-{index}", nodes)
    jobs = []
    t = 0.0
    for i in range(int(rng.integers(1, 16))):
        u = rng.random()
        pool = SMALL_MODELS if u < 0.75 else (MEDIUM_MODELS if u < 0.9 else HUGE_MODELS)
        model = get_model(str(rng.choice(pool)))
        t += float(rng.choice([0.0, rng.exponential(600.0)]))
        common = dict(
            job_id=i,
            submit_time=t,
            model=model,
            batch_size=int(rng.choice([1, 2, 4, 8, 16, 32, 64])),
            seq_len=int(rng.choice([128, 512, 1024])),
            requested_gpus=int(rng.integers(1, 17)) if rng.random() < 0.7 else None,
        )
        if common["requested_gpus"] and rng.random() < 0.3:  # a trace-like job: recorded duration
            jobs.append(JobSpec(**common, iterations=None, recorded_duration=float(rng.uniform(1.0, 5e4))))
        else:
            jobs.append(JobSpec(**common, iterations=float(10 ** rng.uniform(-1, 5))))
    kwargs = dict(
        predictor=str(rng.choice(["frenzy", "extended", "oracle"])),
        queue_slots=int(rng.integers(1, 5)),
        running_slots=int(rng.integers(1, 5)),
        startup_time=float(rng.choice([0.0, 30.0])),
        restart_overhead=float(rng.choice([0.0, 10.0])),
        oom_delay=float(rng.choice([0.0, 30.0, 90.0])),
        max_plan_gpus=int(rng.choice([1, 2, 4, 64])),
        placement=str(rng.choice(["best_fit", "spread"])),
        work_info=str(rng.choice(["exact", "noisy", "none"])),
    )
    return cluster, Workload(f"fuzz-{index}", tuple(jobs)), kwargs


# --------------------------------------------------------------------------------------------- fuzzer
def resident_mb() -> float:
    """Resident set size of this process in MiB (Linux /proc; else peak RSS from getrusage)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class FuzzReport:
    steps: int = 0
    episodes: int = 0
    episodes_finished: int = 0
    illegal_actions: int = 0
    crashes: int = 0
    violations: int = 0
    configs: list[str] = field(default_factory=list)
    drivers: list[str] = field(default_factory=list)
    steps_by_driver: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    known_bug_hits: dict[str, int] = field(default_factory=dict)
    rss_warm_mb: float = math.nan
    rss_end_mb: float = math.nan
    rss_max_after_warmup_mb: float = math.nan
    seconds: float = 0.0

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_warm_mb

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rss_growth_mb"] = self.rss_growth_mb
        return d

    def summary(self) -> str:
        return (
            f"steps {self.steps:,}  episodes {self.episodes:,} ({self.episodes_finished:,} to the end)  "
            f"illegal actions {self.illegal_actions:,}  crashes {self.crashes}  violations {self.violations}  "
            f"RSS {self.rss_warm_mb:.1f} MiB after warm-up -> {self.rss_end_mb:.1f} MiB at the end "
            f"(growth {self.rss_growth_mb:+.1f} MiB, max {self.rss_max_after_warmup_mb:.1f})  "
            f"{self.seconds:.0f} s"
        )


def _env_factories(presets: list[str] | None, custom: bool) -> list[tuple[str, Any]]:
    out = []
    for preset in ENV_PRESETS:
        if presets is not None and preset.env_id not in presets:
            continue
        for predictor in ("extended", "frenzy"):
            out.append(
                (
                    f"{preset.env_id}/{predictor}",
                    lambda p=preset, pr=predictor: FrenzyEnv(cluster=p.cluster, workload=p.workload, predictor=pr),
                )
            )
    if custom:
        out.append(("custom", None))
    return out


def fuzz(
    steps: int,
    *,
    seed: int = 0,
    presets: list[str] | None = None,
    policies: list[str] | None = None,
    custom: bool = True,
    episode_steps: int = 30_000,
    warmup_fraction: float = 0.1,
    eps_choices: tuple[float, ...] = (0.0, 0.1, 0.5, 0.95),
    full_every: int = 50,
    progress: bool = False,
    max_failures: int = 20,
) -> FuzzReport:
    """Play ``steps`` env steps (see the module docstring); returns a :class:`FuzzReport`."""
    import baselines

    rng = np.random.default_rng(seed)
    names = list(baselines.POLICIES) if policies is None else list(policies)
    drivers = ["masked-random", *names]
    factories = _env_factories(presets, custom)
    report = FuzzReport(configs=[n for n, _ in factories], drivers=drivers)
    envs: dict[str, Any] = {}
    bound: dict[tuple[str, str], Any] = {}
    warm_at = int(steps * warmup_fraction)
    seen_all_at: int | None = None
    pairs_seen: set[tuple[str, str]] = set()
    t0 = time.perf_counter()
    next_report = steps // 10 or steps
    episode = 0

    def fail(kind: str, where: str) -> None:
        if kind == "crash":
            report.crashes += 1
        else:
            report.violations += 1
        if len(report.failures) < max_failures:
            report.failures.append(f"{kind} in {where}:\n{traceback.format_exc(limit=8)}")

    def tick() -> None:
        nonlocal next_report
        if not math.isnan(report.rss_warm_mb):
            gc.collect()
            report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb, resident_mb())
        if progress:
            print(
                f"{report.steps:>10,} steps  {report.episodes:,} episodes  crashes {report.crashes}  "
                f"violations {report.violations}  RSS {resident_mb():.1f} MiB  {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        next_report += steps // 10 or steps

    while report.steps < steps:
        cname, factory = factories[episode % len(factories)]
        driver = drivers[(episode // len(factories)) % len(drivers)]
        eps = float(rng.choice(eps_choices))
        ep_seed = int(rng.integers(2**31 - 1))
        episode += 1
        where = f"{cname} driver={driver} eps={eps} seed={ep_seed}"
        try:
            if factory is None:
                cluster, workload, kwargs = random_config(np.random.default_rng(ep_seed), episode)
                env = FrenzyEnv(cluster=cluster, workload=workload, **kwargs)
                policy = None if driver == "masked-random" else baselines.make_policy(driver, env)
            else:
                if cname not in envs:
                    envs[cname] = factory()
                env = envs[cname]
                policy = None
                if driver != "masked-random":
                    if (cname, driver) not in bound:
                        bound[cname, driver] = baselines.make_policy(driver, env)
                    policy = bound[cname, driver]
        except Exception:
            fail("crash", f"building {where}")
            continue
        pairs_seen.add((cname, driver))
        checker = InvariantChecker(env, full_every=full_every)
        report.episodes += 1
        step_in_ep = 0
        stage = "reset"
        try:
            obs, info = env.reset(seed=ep_seed)
            if policy is not None and hasattr(policy, "reset"):
                policy.reset()
            checker.on_reset(obs, info)
            n = env.action_space.n
            while report.steps < steps and step_in_ep < episode_steps:
                stage = "policy"
                mask = env.action_masks()
                if rng.random() < eps:
                    action = int(rng.integers(-3, n + 3))
                elif policy is None:
                    legal = np.flatnonzero(mask)
                    action = int(rng.choice(legal)) if legal.size else 0
                else:
                    a, _ = policy.predict(obs, action_masks=mask, deterministic=True)
                    action = int(np.asarray(a).reshape(-1)[0])
                report.illegal_actions += not (0 <= action < n and mask[action])
                stage = "step"
                checker.before_step(action)
                obs, reward, terminated, truncated, info = env.step(action)
                report.steps += 1
                step_in_ep += 1
                report.steps_by_driver[driver] = report.steps_by_driver.get(driver, 0) + 1
                checker.after_step(action, obs, reward, terminated, truncated, info)
                if report.steps >= next_report:
                    tick()
                if terminated or truncated:
                    report.episodes_finished += 1
                    break
        except InvariantViolation:
            fail("violation", f"{where} step {step_in_ep}")
        except Exception:
            fail("crash", f"{where} ({stage}) step {step_in_ep}")
        for key, hits in checker.known_bug_hits.items():
            report.known_bug_hits[key] = report.known_bug_hits.get(key, 0) + hits
        if factory is None:
            del env, policy
        if seen_all_at is None and len(pairs_seen) == len(factories) * len(drivers):
            seen_all_at = report.steps
        if math.isnan(report.rss_warm_mb) and report.steps >= warm_at and seen_all_at is not None:
            gc.collect()
            report.rss_warm_mb = report.rss_max_after_warmup_mb = resident_mb()
    gc.collect()
    report.rss_end_mb = resident_mb()
    if math.isnan(report.rss_warm_mb):  # too short a run to warm up: compare with the end itself
        report.rss_warm_mb = report.rss_max_after_warmup_mb = report.rss_end_mb
    report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb, report.rss_end_mb)
    report.seconds = time.perf_counter() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps to play (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episode-steps", type=int, default=30_000, help="cap on the steps of one episode")
    parser.add_argument("--policies", default=None, help="comma list of baselines (default: all registered)")
    parser.add_argument("--max-growth-mb", type=float, default=50.0, help="fail above this RSS growth")
    parser.add_argument("--json", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.episode_steps < 1:
        parser.error("--steps and --episode-steps must be positive")
    policies = None if args.policies is None else [p for p in args.policies.split(",") if p]
    report = fuzz(args.steps, seed=args.seed, policies=policies, episode_steps=args.episode_steps, progress=True)
    print(report.summary())
    print("configs:", ", ".join(report.configs))
    print("steps by driver:", ", ".join(f"{k} {v:,}" for k, v in report.steps_by_driver.items()))
    if report.known_bug_hits:
        print("known simulator bugs tolerated (steps where seen):", report.known_bug_hits)
    for failure in report.failures:
        print(failure, file=sys.stderr)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report.to_dict(), fh, indent=2)
    bad = report.crashes or report.violations or report.rss_growth_mb > args.max_growth_mb
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
