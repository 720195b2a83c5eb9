"""A-SRPT (Luo et al., arXiv 2501.05563): a virtual single-machine SRPT schedule guides a non-preemptive queue.

The policy acts only through the environment's start actions.

Virtual instance
    One machine stands for all ``G`` GPUs of the cluster. Job ``i`` arrives (at its submit time) with
    virtual work ``(g_i / G) * n_i * alpha_i`` seconds, where ``g_i`` is its GPU count (the requested count,
    rounded down to a plan slot count 1, 2, 4, ...; the count of its top-ranked MARP plan -- ranking
    ``"min_gpus"`` -- when it requested none or no plan of the requested count fits in memory), ``n_i`` its
    predicted iterations and ``alpha_i`` its predicted iteration time at its best placement (the fastest
    GPU type at ``g_i`` GPUs, consolidated). The virtual machine runs preemptive SRPT (ties: earlier
    arrival, then lower job id). It is advanced incrementally (event by event) at each decision.

Real queue
    A job enters the pending queue when it completes in the virtual schedule. The pending queue is served in
    that order. A job runs on ``g_i`` GPUs of the fastest GPU type that can place it now (if every plan of
    ``g_i`` GPUs has crashed with out-of-memory, its other plans in ranked order). What a released job that
    cannot start holds back is ``head``:

    * ``head="strict"`` (default): nothing behind it starts (head-of-line blocking).
    * ``head="per_type"``: it holds back only the GPU types it can run on (the types of its plans of ``g_i``
      GPUs and, once those have all crashed, of its other ranked plans); a job behind it may start on a plan of
      another type. The order kept: no job starts on a GPU type while an earlier-released pending job that can
      run on that type waits. Walking the queue in release order, each job that cannot start adds its types to
      the held-back set; the first job that can start on a plan of a type outside the set starts; the walk ends
      when every type is held back. On a cluster of one GPU type the two rules are the same rule (the first job
      that cannot start holds back the one type).

    ``backfill=True`` lets any later pending job start when the head cannot (``head`` then holds nothing back).
    Which rule the paper means for several GPU types is not stated in the parts of its text that could be read
    here (the abstract and the introduction of arXiv 2501.05563v1): they never mention GPU types, and its
    single-machine instance stands for all GPUs as one machine, i.e. takes them as interchangeable -- where the
    two rules coincide. So the text allows either; ``"strict"`` is this module's reading of its queue.

Communication awareness
    ``alpha_max / alpha_min`` is the ratio of the job's iteration time on its most spread placement (one
    tensor-parallel group per node, on as many nodes of the type as there are) to its consolidated one.
    Jobs with a ratio ``>= comm_heavy`` (default :data:`COMM_HEAVY` = 1.5) wait for a consolidated placement
    (the fewest nodes the count needs, as the simulator's best-fit placer would give) for at most ``tau``
    times their predicted run time ``n_i * alpha_i`` after release, then take any placement; light jobs
    start at once on any placement. ``tau`` is not fixed by the paper; the default :data:`DEFAULT_TAU` = 1.0
    (a heavy job waits at most as long as it is predicted to run). A job predicted to need zero iterations
    has a zero wait. This is the shared placement rule of :mod:`baselines.heavy_edge` (``placement="heavy_edge"``,
    the default), which the paper's comparators (:mod:`baselines.queue_order`) run on too; ``placement="any"``
    drops the wait (every job is light).

Predictor (``predictor``)
    ``"forest"`` (default): a scikit-learn random forest trained online on finished jobs (target: their
    iterations; features: recurring group, requested GPUs, log10 model size, global batch). A job's recurring
    group is :attr:`JobSpec.group` when the workload has one, else its configuration (model, batch, sequence
    length, requested GPUs) -- trace jobs that repeat a configuration recur. As in the paper, a job of a
    group with no finished job yet is predicted to need zero iterations; ``unseen="mean"`` gives it the mean
    iterations of the finished jobs instead. The forest is refitted when a group it has not seen gets
    predicted or when the samples have grown by ``refit_growth`` (default 1.25x) since the last fit.
    ``history`` warms the forest up: each of its jobs is observed at the start of every episode with its true
    iterations (:meth:`Workload.work_iterations` on the env's cluster), so groups seen in the history are
    predicted from the first arrival on (the paper trains its forest on the first 80% of its trace). ``history``
    (default None: the forest starts cold in every episode; ``"auto"``: the jobs that ran before the episode, from
    the env's own workload source -- ``generator.history(env.episode_seed)`` of the generator the env draws its
    workloads from (:class:`~frenzy_env.workload.WorkloadGenerator`: a trace's jobs before its window, or a
    stand-in, :meth:`~frenzy_env.workload.TraceGenerator.history`; a synthetic generator's other jobs of the
    same recurring groups; none of them a job of the episode), 4 jobs per job of the episode, and no
    history, a cold forest, for a fixed workload or a generator without one; a
    :class:`~frenzy_env.workload.Workload` or a sequence of :class:`JobSpec`: those jobs in every episode).
    ``"perfect"``: the true iterations (the paper's perfect-prediction variant; an oracle).
    ``"estimate"``: the env's ``work_estimate`` (what its ``work_info`` setting lets schedulers know).

Decision points (``release``)
    A job is released at its virtual completion and a heavy job's wait ends at its deadline; both may fall
    between two simulator events (arrivals, finishes, OOM failures), when the env would not consult the
    policy. ``release="timer"`` (default) follows the paper: at every decision the virtual schedule is
    advanced to now, and the policy asks the env for a wake-up (``env.request_wakeup``, through
    :meth:`ScriptedPolicy.wake_at`) at the next virtual completion of the known jobs or the next deadline of a
    pending heavy job, whichever comes first, so each job is released exactly at its virtual completion and a
    heavy job takes any placement exactly at its deadline. (An arrival before that time is an event: the
    schedule is recomputed then and the wake-up asked again. The env sets a wake-up at least 1 s ahead, so a
    virtual completion less than 1 s after a decision is acted on 1 s after it.) Two modes without the timer
    (env v0's): ``release="lookahead"`` acts at the last decision point before a virtual completion or deadline
    (the virtual schedule is advanced to ``view.next_event_time()``; no job arrives before it, so this schedule
    uses only known jobs): jobs are released early. ``release="strict"`` acts only on virtual completions and
    deadlines ``<= now``, at events: a job may wait until the next event, which can be long on a lightly loaded
    cluster. In both, when nothing is pending (nothing would consult the policy again) everything is due now.

Queue window
    Only jobs in the env's visible queue window (``queue_slots``, arrival order) can be started. When the
    pending head is outside the window, the earliest-released pending job inside it acts as the head.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy
from baselines.frenzy import PlanRanker
from baselines.heavy_edge import (
    COMM_HEAVY,
    DEFAULT_TAU,
    HeavyEdge,
    candidate_plans,
    check_placement,
    start_action,
)
from frenzy_env.errors import ConfigError, unknown_name
from frenzy_env.simulator.view import DONE, QUEUED, REJECTED, SimView
from frenzy_env.workload import JobSpec, Workload

ASRPT_PREDICTORS = ("forest", "perfect", "estimate")
UNSEEN = ("zero", "mean")
RELEASE = ("timer", "lookahead", "strict")
HEADS = ("strict", "per_type")
AUTO = "auto"  # history: the env's generator's history of the episode


def count_and_candidates(view: Any, ranker: Any, j: int) -> tuple[int, np.ndarray]:
    """A-SRPT's GPU count for job ``j`` and its candidate plans of that count, fastest first: the requested
    count rounded down to a plan slot's count when a plan of it is admitted, else the count of ``ranker``'s top
    plan (or of the first admitted plan)."""
    avail = view.pred_ok[j]  # (P,)
    counts = view.plan_count
    req = view.jobs[j].requested_gpus
    g = 0
    if req:
        levels = view.plan_counts_levels
        g = int(levels[levels <= req].max()) if (levels <= req).any() else int(levels[0])
        if not (avail & (counts == g)).any():
            g = 0
    if g == 0:
        top = ranker.top_plan(j)
        g = int(counts[top]) if top >= 0 else int(counts[np.flatnonzero(avail)[0]])
    cand = np.flatnonzero(avail & (counts == g))
    return g, cand[np.argsort(view.iter_time[j, cand], kind="stable")]


class IterationForest:
    """Online random-forest predictor of a job's iterations (A-SRPT's recurring-job predictor).

    Parameters
    ----------
    unseen: ``"zero"`` (the paper: a job of a group never seen finishing is predicted 0 iterations) or
        ``"mean"`` (the mean iterations of all finished jobs, 0 before the first finish).
    trees: number of trees; refit_growth: refit when the samples grew by this factor since the last fit.
    seed: random state of the forest.
    """

    def __init__(self, unseen: str = "zero", trees: int = 30, refit_growth: float = 1.25, seed: int = 0) -> None:
        if unseen not in UNSEEN:
            raise unknown_name("unseen", unseen, UNSEEN)
        if not (isinstance(trees, int) and trees >= 1):
            raise ConfigError(f"trees must be a positive integer, got {trees!r}")
        if not refit_growth > 1.0:
            raise ConfigError(f"refit_growth must be > 1, got {refit_growth!r}")
        self.unseen = unseen
        self.trees = trees
        self.refit_growth = float(refit_growth)
        self.seed = seed
        self._codes: dict[tuple, int] = {}
        self._x: list[tuple[float, float, float, float]] = []
        self._y: list[float] = []
        self._seen: set[int] = set()  # group codes with a finished job
        self._fitted_groups: set[int] = set()
        self._fitted_n = 0
        self._forest: Any = None
        self._cache: dict[tuple, float] = {}
        self.fits = 0

    def group_code(self, job: Any) -> int:
        key = ("group", job.group) if job.group is not None else (
            "config", job.model.name, int(job.batch_size), int(job.seq_len), job.requested_gpus
        )
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self._codes)
        return code

    def features(self, job: Any) -> tuple[float, float, float, float]:
        return (
            float(self.group_code(job)),
            float(job.requested_gpus or 0),
            math.log10(max(job.model.num_params, 1)),
            float(job.batch_size),
        )

    def observe(self, job: Any, iterations: float) -> None:
        """Record a finished job and its true iterations."""
        x = self.features(job)
        self._x.append(x)
        self._y.append(float(iterations))
        self._seen.add(int(x[0]))

    def predict(self, job: Any) -> float:
        """Predicted iterations of ``job``."""
        x = self.features(job)
        code = int(x[0])
        if code not in self._seen:
            return float(np.mean(self._y)) if (self.unseen == "mean" and self._y) else 0.0
        if code not in self._fitted_groups or len(self._y) >= self.refit_growth * self._fitted_n:
            self._fit()
        value = self._cache.get(x)
        if value is None:
            value = self._cache[x] = float(self._forest.predict(np.array([x]))[0])
        return value

    def _fit(self) -> None:
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(n_estimators=self.trees, random_state=self.seed, n_jobs=1)
        forest.fit(np.array(self._x), np.array(self._y))
        self._forest = forest
        self._fitted_groups = set(self._seen)
        self._fitted_n = len(self._y)
        self._cache.clear()
        self.fits += 1


def workload_generator(env: Any) -> Any:
    """The generator ``env`` draws its episodes' workloads from (``FrenzyEnv.workload_generator``); None for a
    fixed workload or an env without one."""
    return getattr(getattr(env, "unwrapped", env), "workload_generator", None)


def auto_history(env: Any) -> Workload | None:
    """``history="auto"``: the jobs that ran before ``env``'s current episode, ``generator.history(seed)`` of
    its workload generator (:func:`workload_generator`) at the episode's workload seed (``env.episode_seed``);
    None for a fixed workload, before the first reset, or a generator without ``history``."""
    gen, seed = workload_generator(env), getattr(env, "episode_seed", None)
    history = getattr(gen, "history", None)
    if seed is None or not callable(history):
        return None
    return history(int(seed))


def history_forest(view: Any, predictor: str, unseen: str, seed: int, history: Any,
                   env: Any = None) -> IterationForest | None:
    """The ``forest`` predictor's :class:`IterationForest` for an episode, taught the true iterations of the
    ``history`` workload's jobs (``"auto"``: :func:`auto_history` of ``env``) on ``view``'s cluster and speed
    settings; None for the other predictors."""
    if predictor != "forest":
        return None
    if isinstance(history, str):  # "auto", the one string the policies accept
        history = auto_history(env)
    forest = IterationForest(unseen, seed=seed)
    if history is not None:
        cfg = view.config
        iters = history.work_iterations(view.cluster, utilisation=cfg.utilisation, efficiency=cfg.efficiency)
        for job, it in zip(history.jobs, iters.tolist()):
            forest.observe(job, it)
    return forest


def predicted_iterations(view: Any, predictor: str, forest: IterationForest | None, j: int) -> float:
    """Job ``j``'s iterations as ``predictor`` sees them: the truth (``perfect``, an oracle), the env's
    estimate (``estimate``) or ``forest``'s prediction (never below 0)."""
    if predictor == "perfect":
        return float(view.work[j])
    if predictor == "estimate":
        return float(view.work_estimate[j])
    return max(0.0, forest.predict(view.jobs[j]))


class AsrptPolicy(ScriptedPolicy):
    """A-SRPT: virtual SRPT order, a non-preemptive pending queue, communication-aware waiting (module docstring).

    Parameters
    ----------
    env: the (possibly wrapped) FrenzyEnv.
    comm_heavy: ``alpha_max / alpha_min`` threshold of communication-heavy jobs (default 1.5).
    tau: a heavy job waits for a consolidated placement at most ``tau`` x its predicted run time (default 1).
    predictor: ``"forest"`` | ``"perfect"`` | ``"estimate"``.
    backfill: let later pending jobs start when the head cannot (default False: strict order).
    unseen: forest prediction for unseen groups, ``"zero"`` (paper) or ``"mean"``.
    release: ``"timer"`` (default: wake-ups at virtual completions and deadlines), ``"lookahead"`` or
        ``"strict"``; see "Decision points".
    seed: random state of the forest.
    history: finished jobs the forest is trained on before each episode (default ``"auto"``: the jobs before
        the episode from the env's workload generator, as the paper trains its forest on the first 80% of its
        trace, ignored by the predictors without a forest; None: none, a cold forest; a Workload or a sequence
        of JobSpec, ``predictor="forest"`` only; see "Predictor").
    placement: ``"heavy_edge"`` (default: heavy jobs wait for a consolidated placement) or ``"any"`` (no
        wait); the rule of :mod:`baselines.heavy_edge`, shared with the comparators.
    head: what a released job that cannot start holds back (default ``"strict"``: every job behind it;
        ``"per_type"``: only the GPU types it can run on); see "Real queue".
    """

    name = "asrpt"

    def __init__(
        self,
        env: Any,
        comm_heavy: float = COMM_HEAVY,
        tau: float = DEFAULT_TAU,
        predictor: str = "forest",
        backfill: bool = False,
        unseen: str = "zero",
        release: str = "timer",
        seed: int = 0,
        history: Workload | Sequence[JobSpec] | str | None = AUTO,
        placement: str = "heavy_edge",
        head: str = "strict",
    ) -> None:
        super().__init__(env)
        check_placement(placement, comm_heavy, tau)
        if predictor not in ASRPT_PREDICTORS:
            raise unknown_name("predictor", predictor, ASRPT_PREDICTORS)
        if unseen not in UNSEEN:
            raise unknown_name("unseen", unseen, UNSEEN)
        if release not in RELEASE:
            raise unknown_name("release", release, RELEASE)
        if head not in HEADS:
            raise unknown_name("head", head, HEADS)
        self.head = head
        self.comm_heavy = float(comm_heavy)
        self.tau = float(tau)
        self.placement = placement
        self.predictor = predictor
        self.backfill = bool(backfill)
        self.unseen = unseen
        self.release = release
        self.seed = seed
        self.history = _history_workload(history, predictor)
        self.oracle = predictor == "perfect"

    # ------------------------------------------------------------------ episode state
    def setup(self, view: SimView) -> None:
        n = view.num_jobs
        self.ranker = PlanRanker(view)
        self.forest = history_forest(view, self.predictor, self.unseen, self.seed, self.history, self.env)
        self.vt = float(view.submit[0])  # virtual clock
        self._vnext = 0  # next job index to arrive in the virtual instance
        self._vheap: list[tuple[float, float, int, int]] = []  # (remaining, submit, job_id, job index)
        self._seq = 0
        self._pending: list[tuple[int, int]] = []  # (release seq, job index), release order
        self.release_seq = np.full(n, -1, dtype=np.int64)  # (J,)
        self.release_time = np.full(n, np.nan)  # (J,) virtual completion time
        self.gpus = np.zeros(n, dtype=np.int64)  # (J,) g_i
        self.pred_iters = np.zeros(n)  # (J,) n_i
        self.alpha = np.full(n, np.inf)  # (J,) alpha_i
        self.heavy = np.zeros(n, dtype=bool)  # (J,)
        self.deadline = np.full(n, np.inf)  # (J,) release + tau * n_i * alpha_i for heavy jobs
        self._deadlines: list[tuple[float, int]] = []  # heap of (deadline, job) of released heavy jobs
        self._cands: dict[int, np.ndarray] = {}  # job -> plan slots at g_i, fastest first
        self._started: set[int] = set()
        self._seen_finished = view.finished
        self._seen_ooms = view.oom_failures
        self._he = HeavyEdge(view, self.placement, self.comm_heavy)

    # ------------------------------------------------------------------ per-job quantities
    def _job_info(self, j: int) -> None:
        """g_i, candidate plans, alpha_i and the communication ratio of a newly arrived job."""
        view = self.view
        g, cand = count_and_candidates(view, self.ranker, j)
        self._cands[j] = cand
        self.gpus[j] = g
        self.alpha[j] = float(view.iter_time[j, cand[0]])
        self.heavy[j] = self._he.is_heavy(j, int(cand[0]))

    def _comm_ratio(self, j: int, plan: int) -> float:
        """alpha_max / alpha_min: most spread over consolidated iteration time of ``plan``."""
        return self._he.comm_ratio(j, plan)

    def _predict_iterations(self, j: int) -> float:
        return predicted_iterations(self.view, self.predictor, self.forest, j)

    # ------------------------------------------------------------------ virtual SRPT instance
    def _virtual_arrive(self, j: int) -> None:
        view = self.view
        if not view.pred_ok[j].any():
            return  # rejected at arrival: fits nowhere, never scheduled
        self._job_info(j)
        self.pred_iters[j] = self._predict_iterations(j)
        work = self.gpus[j] / view.cluster.num_gpus * self.pred_iters[j] * self.alpha[j]
        spec = view.jobs[j]
        heapq.heappush(self._vheap, (work, float(view.submit[j]), int(spec.job_id), j))

    def _release(self, j: int, t: float) -> None:
        self.release_seq[j] = self._seq
        self.release_time[j] = t
        if self.heavy[j]:
            self.deadline[j] = t + self.tau * self.pred_iters[j] * self.alpha[j]
            heapq.heappush(self._deadlines, (float(self.deadline[j]), j))
        self._pending.append((self._seq, j))
        self._seq += 1

    def advance_virtual(self, horizon: float) -> None:
        """Run the virtual SRPT machine up to ``horizon`` (jobs that have arrived in the simulator only)."""
        view = self.view
        arrived = view.arrived
        submit = view.submit
        heap = self._vheap
        vt = self.vt
        while True:
            while self._vnext < arrived and submit[self._vnext] <= vt:
                self._virtual_arrive(self._vnext)
                self._vnext += 1
            ta = float(submit[self._vnext]) if self._vnext < arrived else math.inf
            if not heap:
                if ta <= horizon and ta < math.inf:
                    vt = ta
                    continue
                break
            rem, sub, jid, j = heap[0]
            stop = min(ta, horizon)
            if vt + rem <= stop:
                heapq.heappop(heap)
                vt += rem
                self._release(j, vt)
                continue
            heapq.heapreplace(heap, (rem - (stop - vt), sub, jid, j))  # still the smallest
            vt = stop
            if ta <= horizon and ta < math.inf:
                continue
            break
        if math.isfinite(horizon):
            vt = max(vt, horizon)
        self.vt = vt

    # ------------------------------------------------------------------ real cluster
    def _sync(self, view: SimView) -> None:
        """Learn from jobs that finished; put jobs that crashed with OOM back in the pending queue."""
        if view.finished != self._seen_finished:
            self._seen_finished = view.finished
            status = view.status
            for j in [j for j in self._started if status[j] == DONE]:
                self._started.discard(j)
                if self.forest is not None:
                    self.forest.observe(view.jobs[j], float(view.work[j]))
        if view.oom_failures != self._seen_ooms:
            self._seen_ooms = view.oom_failures
            status = view.status
            for j in [j for j in self._started if status[j] in (QUEUED, REJECTED)]:
                self._started.discard(j)
                if status[j] == QUEUED:
                    bisect.insort(self._pending, (int(self.release_seq[j]), j))

    def _horizon(self, view: SimView) -> float:
        if self.release == "timer":
            return view.now  # the timer brings the policy back at the next virtual completion or deadline
        if not view.has_pending_events():
            return math.inf  # nothing will wake the policy again: everything is due now
        if self.release == "strict":
            return view.now
        return max(view.now, view.next_event_time())

    def next_due(self) -> float:
        """The next virtual completion of the known jobs or deadline of a released heavy job after now (inf
        when none): when ``release="timer"`` asks to be woken. Call after :meth:`advance_virtual` to now."""
        now = self.view.now
        due = self.vt + self._vheap[0][0] if self._vheap else math.inf
        dl = self._deadlines
        while dl and dl[0][0] <= now:
            heapq.heappop(dl)  # reached (a job that started before its deadline leaves a spare wake-up at most)
        if dl:
            due = min(due, dl[0][0])
        return due

    def _try_start(
        self, j: int, k: int, mask: np.ndarray, horizon: float, types_ok: np.ndarray | None = None
    ) -> int | None:
        return start_action(self, self._he, j, k, mask, self._cands[j], horizon >= self.deadline[j], types_ok)

    def job_types(self, j: int) -> np.ndarray:
        """(T,) bool: the GPU types job ``j`` can run on (those of its plans of ``g_i`` GPUs and of the plans
        :func:`~baselines.heavy_edge.candidate_plans` gives it now), what it holds back under ``head="per_type"``."""
        view = self.view
        types = np.zeros(view.num_types, dtype=bool)
        cand = self._cands[j]
        types[view.plan_type[cand]] = True
        types[view.plan_type[candidate_plans(self, j, cand)]] = True
        return types

    def act(self, mask: np.ndarray) -> int:
        view = self.ensure_setup()
        self._sync(view)
        horizon = self._horizon(view)
        self.advance_virtual(horizon)
        if self.release == "timer" and self.wake_at(self.next_due()) is None and not view.has_pending_events():
            horizon = math.inf  # no wake-up (none due, or refused) and nothing else will come: all is due now
            self.advance_virtual(horizon)
        action = self._choose(mask, horizon)
        return self.wait_action(mask) if action is None else action

    def _choose(self, mask: np.ndarray, horizon: float) -> int | None:
        """The start of the pending queue's head (with ``head="per_type"``, of the first pending job that can
        start on a GPU type no earlier waiting job can run on; with backfill, of the first pending job that can
        start), None to wait."""
        status = self.view.status
        qv = self.env.visible_queue
        if not self._pending or len(qv) == 0:
            return None
        slot = {int(j): k for k, j in enumerate(qv.tolist())}
        stale = False
        held = None if self.backfill or self.head == "strict" else np.zeros(self.view.num_types, dtype=bool)
        for _, j in self._pending:
            if status[j] != QUEUED:
                stale = True
                continue
            k = slot.get(j)
            if k is None:
                continue  # outside the queue window: the first visible pending job acts as head
            action = self._try_start(j, k, mask, horizon, None if held is None else ~held)
            if action is not None:
                self._started.add(j)
                if stale:
                    self._compact(exclude=j)
                return action
            if self.backfill:
                continue
            if held is None:
                break
            held |= self.job_types(j)  # per_type: it holds back the types it can run on
            if held.all():
                break
        if stale:
            self._compact()
        return None

    def _compact(self, exclude: int = -1) -> None:
        status = self.view.status
        self._pending = [(s, j) for s, j in self._pending if status[j] == QUEUED and j != exclude]


def _history_workload(history: Any, predictor: str) -> Workload | str | None:
    """``history`` as a Workload (None and ``"auto"`` stay as they are); raises ConfigError naming the field for
    anything else."""
    if history is None or (isinstance(history, str) and history == AUTO):
        return history
    if predictor != "forest":
        raise ConfigError(f"history trains the forest: it needs predictor='forest', got predictor={predictor!r}")
    if isinstance(history, Workload):
        return history
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ConfigError(
            f"history must be a Workload, a sequence of JobSpec, None or 'auto', got {history!r}"
            if isinstance(history, str) else
            f"history must be a Workload, a sequence of JobSpec, None or 'auto', got {type(history).__name__}"
        )
    bad = [i for i, job in enumerate(history) if not isinstance(job, JobSpec)]
    if bad:
        raise ConfigError(
            f"history[{bad[0]}] must be a JobSpec, got {type(history[bad[0]]).__name__}"
        )
    try:
        return Workload("history", tuple(history))
    except ConfigError as exc:
        raise ConfigError(f"history: {exc}") from None


__all__ = ["AsrptPolicy", "IterationForest", "COMM_HEAVY", "DEFAULT_TAU", "HEADS", "auto_history"]
