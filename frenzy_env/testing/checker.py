"""Independent invariant checks of a :class:`~frenzy_env.env.FrenzyEnv` or a bare simulator, step by step.

Like ``gymnasium.utils.env_checker``, this module only checks: :class:`InvariantChecker` recomputes, from the
simulator's public state, what must hold after every reset, step or simulator call (no GPU booked twice, free
GPUs within ``[0, capacity]``, the owner array agreeing with every running job's allocation, valid status
transitions, every job finished exactly once or rejected with a reason, time never going back, work done never
above work asked, an illegal action changing nothing, and at the end of an episode the metrics agreeing with the
per-job records; with ``SimConfig.resize_cooldown`` or ``one_action_per_instant`` set, the pacing rules over the
attempt log: no resize or preemption within the cooldown of the job's last start or resize, no job acted on twice
at one instant; with ``SimConfig.stop_mode`` "save_first" or "kill", the stops over the attempt log: a preempted
job held its GPUs for exactly its save, a killed one lost less than one checkpoint interval of run, and
progress goes back only by such a kill or an out-of-memory failure), independently of the simulator's own
``check_invariants`` (which it also calls). Every failure raises :class:`InvariantViolation`. The fuzzer
(:mod:`frenzy_env.testing.fuzzing`, ``scripts/fuzz.py``) and the property tests drive it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from frenzy_env.evaluation.episodes import jobs_table
from frenzy_env.simulator import DONE, FUTURE, QUEUED, REJECTED, RUNNING

REL = 1e-9  # relative tolerance of float comparisons

# allowed status changes within one env step (several events may happen during one step)
_ALLOWED = {
    FUTURE: {FUTURE, QUEUED, REJECTED},
    QUEUED: {QUEUED, RUNNING, DONE, REJECTED},
    RUNNING: {QUEUED, RUNNING, DONE, REJECTED},
    DONE: {DONE},
    REJECTED: {REJECTED},
}


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

    # ------------------------------------------------------------------ hooks
    @classmethod
    def for_simulator(cls, sim: Any) -> InvariantChecker:
        """A checker of a bare :class:`ClusterSimulator` (call :meth:`after_sim_action` after each call)."""
        checker = cls.__new__(cls)
        checker.env, checker.check_space, checker.full_every = None, False, 1
        checker.steps_checked = checker.episodes_checked = 0
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
        self._restarts = np.array([r.restarts for r in sim.records])  # per job, as of the last check
        self._prev_rate = self._rates()  # (J,) iterations per second of the running jobs at the last check
        self._stops_read = 0  # stop_mode: attempts read so far, and the open ones (see _check_stops)
        self._index_of_id = {r.job_id: i for i, r in enumerate(sim.records)}  # an attempt's job_id -> job index
        self._open_stops: list[Any] = []
        self._invalid = 0
        self._steps = 0
        self._job = -1
        # the pacing rules over the attempt log (see _check_pacing): attempts read so far, the open ones, and
        # the time of each job's last action (by job id)
        self._attempts_read = 0
        self._open_attempts: list[Any] = []
        self._acted: dict[int, float] = {}

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
        p = env.num_plans
        a = int(action)
        self._a = a
        self._legal = 0 <= a < mask.size and bool(mask[a])
        self._kind, self._job, self._plan = "illegal", -1, -1
        if self._legal:
            if a < env.first_start:
                self._kind = "wait"  # until the next event, or a timed wait
            elif a < env.first_resize:
                k, self._plan = divmod(a - env.first_start, p)
                self._kind, self._job = "start", int(env.visible_queue[k])
                _require(sim.status[self._job] == QUEUED, f"start of job {self._job} that is not queued")
            elif a >= env.first_preempt:
                self._kind, self._job = "preempt", int(env.visible_running[a - env.first_preempt])
                _require(self._job in sim.running, f"preemption of job {self._job} that is not running")
                self._restarts_before = sim.records[self._job].restarts
            else:
                r, self._plan = divmod(a - env.first_resize, p)
                self._kind, self._job = "resize", int(env.visible_running[r])
                _require(self._job in sim.running, f"resize of job {self._job} that is not running")
                self._restarts_before = sim.records[self._job].restarts
        else:
            self._snapshot = self.state_snapshot()

    def after_step(self, action: Any, obs: dict, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
        env, sim = self.env, self.sim
        self._steps += 1
        self.steps_checked += 1
        comp = info["reward_components"]
        if not self._legal:
            self._invalid += 1
            _require(comp["invalid"] == -env.invalid_action_penalty, f"illegal action {self._a}: no penalty")
            _require(comp["jct"] == 0.0, f"illegal action {self._a} accrued JCT reward {comp['jct']}")
            changed = snapshot_changes(self._snapshot, self.state_snapshot())
            _require(not changed, f"illegal action {self._a} changed {', '.join(changed)}")
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
        elif self._kind == "preempt":
            j = self._job
            _require(
                sim.records[j].restarts == self._restarts_before + 1, f"preemption of job {j} not counted as a restart"
            )
            saving = sim.status[j] == RUNNING and sim.saving_until[j] > sim.now  # (stop_mode "save_first")
            _require(
                sim.status[j] == QUEUED or saving,
                f"job {j} not back in the queue (nor saving) after a legal preemption",
            )
        _require(terminated == sim.done, f"terminated={terminated} but sim.done={sim.done}")
        end = terminated or truncated
        self._check_transitions()
        self._check_obs(obs, info, truncated)
        self.check_state(full=end or self._steps % self.full_every == 0)
        if end:
            _require("metrics" in info, "the final info has no metrics")
            self.check_episode_end(info["metrics"], terminated)

    # ------------------------------------------------------------------ state checks
    def state_snapshot(self) -> dict[str, Any]:
        """What an illegal action or a refused simulator call must leave unchanged (compare with
        :func:`snapshot_changes`)."""
        sim = self.sim
        return {
            "time": sim.now,
            "free GPUs": sim.state.free.copy(),
            "GPU owners": sim.state.owner.copy(),
            "queue": list(sim.queue),
            "running set": list(sim.running),
            "status": sim.status.copy(),
            "work done": sim.done_iters.copy(),
            "saves": np.nan_to_num(sim.saving_until, nan=-1.0),
            "next event": sim.next_event_time(),
            "next arrival": sim._next_arrival,
        }

    def _rates(self) -> np.ndarray:
        sim = self.sim
        rate = np.zeros(sim.num_jobs)
        for j, run in sim.running.items():
            rate[j] = run.rate
        return rate

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
        if sim.config.resize_cooldown or sim.config.one_action_per_instant:
            self._check_pacing()
        if sim.config.stop_mode != "v5":
            self._check_stops()
        if full:
            self._check_records()

    def _check_pacing(self) -> None:
        """The pacing rules, from the attempt log (an attempt begins with a start or a resize; one that ends
        "resized" or "preempted" ends with a resize or a preemption): with ``resize_cooldown`` c, every attempt
        ended by a resize or a preemption lasted at least c; with ``one_action_per_instant``, each job's action
        times strictly increase. Reads only the attempts that are new or were open at the last check."""
        sim = self.sim
        cooldown = float(sim.config.resize_cooldown or 0.0)
        one = bool(sim.config.one_action_per_instant)
        still_open = []
        for a in self._open_attempts:  # ended since the last check: by a resize, a preemption, a finish or an OOM
            if a.outcome == "running":
                still_open.append(a)
            else:
                self._pacing_end(a, cooldown, one)
        attempts = sim.attempts
        for a in attempts[self._attempts_read :]:
            last = self._acted.get(a.job_id, -math.inf)
            _require(
                not one or a.start_time > last,
                f"job {a.job_id} acted on twice at {a.start_time} (a start or resize after an action at that instant)",
            )
            self._acted[a.job_id] = a.start_time
            if a.outcome == "running":
                still_open.append(a)
            else:
                self._pacing_end(a, cooldown, one)
        self._attempts_read = len(attempts)
        self._open_attempts = still_open

    def _check_stops(self) -> None:
        """The stops of ``stop_mode`` "save_first" and "kill", from the attempt log: a job saving holds its GPUs
        without progress until ``saving_until``; an attempt that ended by a save_first preemption held its GPUs
        from the preemption (``saving_from``) for exactly the save of its plan (``config_save_s``: the stop
        overhead and the checkpoint write); one that ended by a kill (a preemption or resize under "kill") lost
        ``rolled_back_s`` in [0, checkpoint_interval) seconds of run, and no other attempt lost any."""
        sim = self.sim
        now = sim.now
        saving = np.flatnonzero(np.isfinite(sim.saving_until))
        _require((sim.status[saving] == RUNNING).all(), "a job saves without holding its GPUs")
        _require((sim.saving_until[saving] > now).all(), "a save ended without freeing the job's GPUs")
        for j in saving.tolist():
            run = sim.running[j]
            _require(run.rate == 0.0 and run.progress_from == sim.saving_until[j], f"job {j} progresses while saving")
        still_open = []
        for a in [*self._open_stops, *sim.attempts[self._stops_read :]]:
            if a.outcome == "running":
                still_open.append(a)
                continue
            kill = sim.config.stop_mode == "kill" and a.outcome in ("preempted", "resized")
            interval = sim.config.checkpoint_interval
            plan = sim.plan_index(a.gpu_type, a.num_gpus)
            job = self._index_of_id[a.job_id]
            _require(
                a.rolled_back_s == 0.0 or (kill and 0.0 < a.rolled_back_s < interval * (1 + REL)),
                f"job {a.job_id}'s attempt ending {a.outcome!r} at {a.end_time} lost {a.rolled_back_s} s of run",
            )
            if kill and sim.true_ok[job, plan]:  # (an attempt that does not fit makes no progress to lose)
                ran = max(0.0, a.end_time - a.progress_from)
                _require(
                    _close(a.rolled_back_s, ran - math.floor(ran / interval + 1e-9) * interval),
                    f"job {a.job_id} killed after {ran} s of run lost {a.rolled_back_s} s, not the run since its "
                    f"last checkpoint (every {interval} s)",
                )
            if a.saving_from == a.saving_from:  # (not nan) a save_first preemption
                _require(a.outcome == "preempted", f"job {a.job_id}: a save that did not end in a preemption")
                save = float(sim.config_save_s[sim.config_row[job], plan])
                _require(
                    _close(a.end_time - a.saving_from, save),
                    f"job {a.job_id} held its GPUs {a.end_time - a.saving_from} s after its preemption, not its "
                    f"save of {save} s",
                )
        self._stops_read = len(sim.attempts)
        self._open_stops = still_open

    def _pacing_end(self, attempt: Any, cooldown: float, one: bool) -> None:
        """The pacing rules at the end of ``attempt`` (see :meth:`_check_pacing`)."""
        if attempt.outcome not in ("resized", "preempted"):
            return
        # the action's time: the end, or a save_first preemption's own time (its GPUs are freed after its save)
        acted = attempt.end_time if attempt.saving_from != attempt.saving_from else attempt.saving_from
        _require(
            attempt.start_time + cooldown <= acted,
            f"job {attempt.job_id} {attempt.outcome} at {acted}, within the {cooldown} s cooldown of its "
            f"start or resize at {attempt.start_time}",
        )
        if attempt.outcome == "preempted":
            _require(
                not one or acted > attempt.start_time,
                f"job {attempt.job_id} acted on twice at {acted} (preempted at the instant it started)",
            )
            self._acted[attempt.job_id] = acted

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
        # an out-of-memory failure loses the attempt's progress, and under stop_mode "kill" a preemption or resize
        # at most one checkpoint interval of run; nothing else may lose progress
        prog = self._progress()
        lost = np.flatnonzero(prog < self._prev_progress * (1 - REL) - REL)
        kill = sim.config.stop_mode == "kill"
        for j in lost:
            if sim.records[j].oom_failures > self._ooms[j]:
                continue
            killed = kill and sim.records[j].restarts > self._restarts[j]
            _require(killed, f"progress of job {j} went back")
            bound = sim.config.checkpoint_interval * self._prev_rate[j]
            _require(
                self._prev_progress[j] - prog[j] <= bound * (1 + 1e-6) + REL,
                f"job {j} killed lost {self._prev_progress[j] - prog[j]} iterations, more than one checkpoint "
                f"interval of run ({bound})",
            )
        touched = set(changed.tolist()) | set(lost.tolist()) | set(sim.running) | {self._job}
        touched.discard(-1)
        for j in touched:
            self._ooms[j] = sim.records[j].oom_failures
            self._restarts[j] = sim.records[j].restarts
        self._prev_now, self._prev_status, self._prev_progress = now, st.copy(), prog
        self._prev_rate = self._rates()

    def _check_obs(self, obs: dict, info: dict, truncated: bool = False) -> None:
        env, sim = self.env, self.sim
        mask = env.action_masks()
        _require(obs["action_mask"].dtype == np.int8 and (obs["action_mask"] == mask).all(), "obs mask != mask")
        _require((info["action_mask"] == mask).all(), "info mask != mask")
        _require(
            bool(mask[0]) == (sim.has_pending_events() or sim.done or truncated),
            "wait legal iff events are pending or the episode is over",
        )
        _require(not sim.done or not mask[1:].any(), "a start or resize is legal after the last job")
        _require(mask.any(), "no legal action (a deadlock, or an empty final mask)")
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
        # the return is minus the total time jobs spent in the system (up to the cut, when truncated)
        st, recs = sim.status, sim.records
        done = np.flatnonzero(st == DONE)
        in_system = float(sum(recs[j].finish_time - recs[j].submit_time for j in done))
        if not terminated:  # a budget cut it: the metrics count the unfinished jobs' time so far
            inside = np.flatnonzero((st == QUEUED) | (st == RUNNING))
            in_system += float(sum(sim.now - recs[j].submit_time for j in inside))
            counted = len(done) + len(inside)
            _require(metrics.get("truncated") == 1.0, "a truncated episode's metrics do not say truncated")
            _require(metrics["unfinished"] == len(inside), "metrics unfinished != queued and running jobs")
            _require(metrics["not_arrived"] == int((st == FUTURE).sum()), "metrics not_arrived != future jobs")
            _require(
                _close(metrics["avg_time_in_system_h"] * 3600, in_system / counted if counted else math.nan),
                f"avg_time_in_system_h {metrics['avg_time_in_system_h']} != the records' mean time in the system",
            )
            elapsed = sim.now - float(sim.submit[0])
            charged = [recs[j].finish_time - recs[j].submit_time for j in done]
            charged += [sim.now - recs[j].submit_time + elapsed for j in inside]
            charged += [elapsed] * int((st == FUTURE).sum())
            _require(
                _close(metrics["avg_jct_h"] * 3600, float(np.mean(charged)) if charged else math.nan),
                f"avg_jct_h {metrics['avg_jct_h']} of a cut != the mean over its jobs not rejected",
            )
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
        # a cut episode's avg_jct_h and p95_jct_h count the unfinished jobs too (check_episode_end); these are
        # over the finished jobs
        avg, p95_key = ("avg_jct_finished_h", "p95_jct_finished_h") if "truncated" in metrics else (
            "avg_jct_h", "p95_jct_h")
        _require(
            _close(metrics[avg] * 3600, float(jct.mean()) if jct.size else math.nan),
            f"{avg} {metrics[avg]} != mean of the records' JCT",
        )
        p95 = float(np.percentile(jct, 95)) if jct.size else math.nan
        _require(_close(metrics[p95_key] * 3600, p95), p95_key)
        makespan = float(finish[done].max() - sim.submit[0]) if done.any() else 0.0
        _require(_close(metrics["makespan_h"] * 3600, makespan), f"makespan_h {metrics['makespan_h']} != {makespan} s")
        gpu_s = sum(r.gpu_seconds for r in recs)
        gpu_s += sum(int(r.counts.sum()) * (sim.now - r.held_since) for r in sim.running.values())
        _require(_close(metrics["gpu_hours"], gpu_s / 3600), "gpu_hours disagree with the records")
        times, busy = sim.utilisation_timeline()
        integral = float(np.sum(busy * np.diff(np.append(times, sim.now))))
        _require(_close(integral, gpu_s), f"busy-GPU timeline integral {integral} != GPU-seconds {gpu_s}")
        util = gpu_s / (sim.cluster.num_gpus * makespan) if makespan > 0 else 0.0
        _require(_close(metrics["utilisation_frac"], util), "utilisation_frac")
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
        jct_h = jobs_table(sim)["jct_h"].to_numpy()
        _require(
            jct_h.size == sim.num_jobs and np.allclose(jct_h * 3600, finish - submit, equal_nan=True),
            "jobs table disagrees with the records",
        )
        if terminated:
            _require(((st == DONE) | (st == REJECTED)).all(), "episode over with unsettled jobs")
            _require(not sim.queue and not sim.running and sim.busy_gpus == 0, "episode over with jobs in the system")
            _require(
                (sim.state.owner == -1).all() and (sim.state.free == sim.cluster.node_capacity).all(),
                "episode over with GPUs held",
            )


def snapshot_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The keys whose values differ between two :meth:`InvariantChecker.state_snapshot` results."""
    return [key for key, value in before.items() if not _same(value, after[key])]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool((a == b).all())
    return a == b

