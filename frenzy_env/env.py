"""The Gymnasium environment: :class:`FrenzyEnv`, a thin layer over :class:`ClusterSimulator`."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from frenzy_env import kernels
from frenzy_env.cluster import ClusterSpec
from frenzy_env.errors import ConfigError, check_keys
from frenzy_env.observation import (
    BATCH_LOG2_SCALE,
    COUNT_LOG_SCALE,
    GLOBAL_FEATURES,
    GPUS_LOG2_SCALE,
    LOG_TIME_SCALE,
    MAX_SECONDS,
    PARAMS_LOG10_SCALE,
    QUEUE_FEATURES,
    RESTARTS_SCALE,
    RUNNING_FEATURES,
    SEQ_LOG2_SCALE,
    Q,
    R,
)
from frenzy_env.policy import SimView
from frenzy_env.simulator import QUEUED, RUNNING, ClusterSimulator, SimConfig
from frenzy_env.workload import Workload, make_generator

try:  # the clip ufunc itself: ndarray.clip adds a Python wrapper around it (same results)
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover  (numpy < 2, or a numpy that moved it)
    try:
        from numpy.core.umath import clip as _clip
    except ImportError:
        _clip = np.clip

_SIM_KEYS = tuple(SimConfig.__dataclass_fields__)
DEFAULT_WAIT_OPTIONS = (60.0, 600.0, 3600.0)  # the timed waits: 1 minute, 10 minutes, 1 hour


class FrenzyEnv(gym.Env):
    """A heterogeneous GPU cluster on which LLM training jobs arrive; the agent decides GPU type, count
    and parallel layout (via MARP) of each job, and when to resize running jobs.

    ## Description
    Jobs arrive over time as a model and a training configuration (global batch, sequence length,
    iterations), never as a GPU request. The agent starts queued jobs on *plan slots* -- a (GPU type,
    GPU count) pair, count in 1, 2, 4, ... -- and the configured memory predictor (MARP) picks the fastest
    data/tensor-parallel layout it believes fits. A plan that truly does not fit fails with out-of-memory
    after a short start-up, and the job returns to the queue. Running jobs can be resized (checkpoint,
    restart on another plan, paying a restart overhead). Time advances only on the wait actions.

    ## Action Space
    ``Discrete(1 + W + Q*P + R*P)``, with W timed waits, Q queue slots, R running slots, P plan slots:
    ``0`` wait (advance to the next event: a finish, an OOM failure, an arrival or a wake-up);
    ``1 + i`` wait ``wait_options[i]`` seconds or until the next event, whichever comes first;
    ``first_start + k*P + p`` (``first_start = 1 + W``) start the k-th queued job (arrival order) on plan p;
    ``first_resize + r*P + p`` (``first_resize = 1 + W + Q*P``) resize the r-th running job (start order; a
    resize keeps the job's slot) to plan p. ``start_action(job, plan)``, ``resize_action(job, plan)`` and
    ``start_rows(mask)`` do the arithmetic. With ``preemption=True`` R more actions follow:
    ``first_preempt + r`` (``first_preempt = 1 + W + Q*P + R*P``) preempts the r-th running job (checkpoint,
    back to the queue with its progress; legal once its start-up is over, as a resize; the stop's cost is paid
    by its next start: :meth:`ClusterSimulator.preempt`); ``preempt_action(job)`` gives the index. "Wait" and
    the timed waits are legal while anything is pending (a finish, an OOM, an arrival, a wake-up), so no policy
    can keep an episode from ending by waiting.
    ``action_masks()`` gives exactly the legal actions: the plan is memory-feasible under the predictor,
    has not crashed for that job before, and is placeable on currently free GPUs; resizing to the current
    plan is masked. An illegal action is a no-op with a penalty (``info["invalid_actions"]`` counts them).
    When no start and no resize is legal the environment advances by itself to the next event, so no step
    is wasted, but never past a wake-up: ``request_wakeup(t)`` (a timer for scripted policies) makes the
    environment return an observation at time ``t``.

    ## Observation Space
    A one-level ``Dict`` of flat float32 ``Box`` es (values in [0, 2]) plus the int8 mask; ``queue`` and
    ``running`` are flattened row-major from ``env.queue_shape`` and ``env.running_shape``:
    ``queue`` (Q, 7 + P): present, wait, best predicted run time, model size, batch, sequence length,
    requested GPUs, then predicted run time on each plan slot (0 when not available);
    ``running`` (R, 7 + P): present, elapsed, predicted remaining time, GPUs, GPU type, restarts, progress,
    then predicted remaining time on each plan slot; ``gpus`` (2T,): free fraction and capacity share of
    each GPU type; ``nodes`` (N,): free fraction of each node; ``globals`` (12,): queue length, running
    jobs, backlog beyond the window, fraction arrived, time to next arrival, busy fraction, time to the next
    event, running jobs in all and beyond the window, whole-system queued and running work (predicted
    seconds), queued GPU demand; ``action_mask`` (A,) int8. Times are ``log1p(seconds)/16``. Every name and
    scale is in :mod:`frenzy_env.observation`.

    ## Rewards
    ``-(jobs in the system) * (elapsed seconds) / reward_scale`` per step, so the return is minus the total
    job completion time (in units of ``reward_scale``, default one hour) up to rejected jobs; minus
    ``invalid_action_penalty`` for an illegal action. ``info["reward_components"]`` has both parts.

    ## Starting State
    The first job has arrived; the cluster is empty. ``reset(seed=...)`` draws the workload from its
    generator with that seed (synthetic jobs, or the model assignment of trace jobs).

    ## Episode End
    ``terminated`` when every job has finished or been rejected; ``truncated`` after ``max_steps`` steps
    (if set). The final ``info["metrics"]`` holds the episode metrics. The final observation's mask (and
    ``info["action_mask"]``, ``action_masks()``) allows "wait", so it is never empty and masked sampling
    (``rng.choice(np.flatnonzero(mask))``, vector envs) works on it; stepping after the end still raises
    until ``reset()``. (A workload whose jobs are all rejected at once starts terminated: "wait" ends it.)

    ## Arguments
    ``cluster`` (ClusterSpec or preset name), ``workload`` (Workload, generator with ``generate(seed)``, or
    preset name), ``predictor`` ("frenzy" | "extended" | "oracle"), ``queue_slots`` (64; ``"all"``: as many
    as the first workload's jobs, every job within reach), ``running_slots`` (64, or ``"all"``),
    ``wait_options`` ((60, 600, 3600) seconds; ``()`` for none), ``reward_scale`` (3600.0),
    ``invalid_action_penalty`` (0.1), ``max_steps`` (None), ``render_mode`` ("ansi" | "rgb_array"),
    ``preemption`` (False: no preempt actions, the spaces and dynamics of v4 exactly), and any
    :class:`SimConfig` field (``startup_time``, ``restart_overhead``, ``checkpoint_bandwidth``,
    ``load_bandwidth``, ``oom_delay``, ``max_plan_gpus``,
    ``placement``, ``work_info``, ``work_noise``, ``utilisation``). Unknown keywords raise
    :class:`ConfigError`. Window sizes: on the shipped ITP week under Frenzy more than 64 jobs wait at 2% of
    decisions and more than 64 run at none (at 32 and 16 slots: 8.5% and 76%).

    ## Version History
    * v0: initial version.
    * v1: timed waits (``wait_options``, default 1 min, 10 min, 1 h: W actions after "wait", so every start
      and resize index moves by W); wake-ups (``request_wakeup``) that end automatic advancing; six more
      global features (observation version 2, :data:`frenzy_env.observation.GLOBAL_FEATURES`): time to the
      next event, running jobs in all and beyond the window, whole-system queued and running work, queued
      GPU demand; windows of 64 queued and 64 running jobs (were 32 and 16), or ``"all"``; the env never
      advances past a moment at which a queued job beyond the window could start.
    * v2 (same spaces as v1): a calibrated world. Offered load in speed- and memory-aware capacity
      (:mod:`frenzy_env.workload.load`), default scenarios at 0.8 (the ITP week's arrivals stretched to it)
      and ``HeteroClusterOverloaded`` at the recorded rate; trace models sized for a GPU type drawn in
      proportion to the cluster's mix; inter-node all-reduces on the node's aggregate NIC bandwidth, cited GPU
      peaks and node networks (P100 9.3 TFLOP/s, RTX3090 servers one 25 GbE port); plans with gradient
      accumulation and pipeline stages (1F1B), synthetic jobs of 13B-70B models; an out-of-memory attempt
      holds its GPUs for start-up, its first step and a tear-down, counted in ``lost_gpu_hours``.
    * v3 (same spaces as v2): start-up, restart and out-of-memory costs that grow with the model (the model
      states, 12 bytes per parameter, loaded at a start and written before a resize at 2.5 GB/s per node on
      top of the fixed 30 s start-up and 10 s restart overhead; ``overhead_gpu_hours`` in the metrics); a
      resize keeps the job's place among the running jobs (its running slot).
    * v4 (same spaces and dynamics as v3; observation version 3): a running job's time left on each plan
      counts what the simulator will charge: the start-up it is still paying on its current plan, and on any
      other plan the restart a resize there costs (``restart_seconds``); the ``running_work`` global counts
      the pending start-up too. Scripted policies, which read the simulator, behave exactly as in v3.
      The ``preemption`` keyword (off by default, so v4 is unchanged) adds the preempt actions.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        cluster: ClusterSpec | str = "frenzy-testbed",
        workload: Any = "itp-default",
        *,
        queue_slots: int | str = 64,
        running_slots: int | str = 64,
        wait_options: tuple[float, ...] = DEFAULT_WAIT_OPTIONS,
        reward_scale: float = 3600.0,
        invalid_action_penalty: float = 0.1,
        max_steps: int | None = None,
        render_mode: str | None = None,
        preemption: bool = False,
        **sim_options: Any,
    ) -> None:
        check_keys("FrenzyEnv", sim_options, _SIM_KEYS)
        if not isinstance(preemption, (bool, np.bool_)):
            raise ConfigError(f"preemption must be True or False, got {preemption!r}")
        self.preemption = bool(preemption)
        for name, value in (("queue_slots", queue_slots), ("running_slots", running_slots)):
            if value != "all" and (not isinstance(value, (int, np.integer)) or value < 1):
                raise ConfigError(f"{name} must be a positive integer or 'all', got {value!r}")
        if not (isinstance(reward_scale, (int, float)) and reward_scale > 0):
            raise ConfigError(f"reward_scale must be > 0, got {reward_scale!r}")
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ConfigError(f"max_steps must be a positive integer or None, got {max_steps!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.cluster = ClusterSpec.preset(cluster) if isinstance(cluster, str) else cluster
        if not isinstance(self.cluster, ClusterSpec):
            raise ConfigError(f"cluster must be a ClusterSpec or a preset name, got {cluster!r}")
        self.sim_config = SimConfig.from_dict(sim_options)
        if isinstance(workload, Workload):
            self._fixed_workload: Workload | None = workload
            self._generator = None
        else:
            self._fixed_workload = None
            self._generator = _bind_generator(make_generator(workload), self.cluster, by_name=isinstance(workload, str))
        self.wait_options = _check_wait_options(wait_options)
        self.reward_scale = float(reward_scale)
        if not (isinstance(invalid_action_penalty, (int, float)) and math.isfinite(invalid_action_penalty)):
            raise ConfigError(f"invalid_action_penalty must be a finite number, got {invalid_action_penalty!r}")
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.max_steps = max_steps
        self.render_mode = render_mode

        # A simulator for the first workload fixes the plan slots, hence the spaces.
        first = self._fixed_workload if self._fixed_workload is not None else self._generator.generate(0)
        # "all": a window as large as the first workload (every job within reach, for scripted evaluation)
        self.queue_slots = len(first) if queue_slots == "all" else int(queue_slots)
        self.running_slots = len(first) if running_slots == "all" else int(running_slots)
        self.sim = ClusterSimulator(self.cluster, first, self.sim_config, seed=0)
        # what policies may read of the simulator: a plain attribute (policies read it many times per
        # decision), replaced with the simulator
        self.view = SimView(self.sim)
        self._sim_seed: int | None = 0
        self.episode_seed: int | None = None  # set by reset(): the seed this episode's workload was drawn with
        q, r, p = self.queue_slots, self.running_slots, self.sim.num_plans
        t, n = self.sim.num_types, self.cluster.num_nodes
        self.num_plans = p
        w = len(self.wait_options)
        self.first_start = 1 + w  # the action that starts queue slot 0 on plan 0
        self.first_resize = 1 + w + q * p  # the action that resizes running slot 0 to plan 0
        # the action that preempts running slot 0 (preemption=True: R actions after the resizes; without
        # them first_preempt is the number of actions and no action index reaches it)
        self.first_preempt = 1 + w + q * p + r * p
        self.action_space = spaces.Discrete(self.first_preempt + (r if self.preemption else 0))
        box = lambda *shape: spaces.Box(0.0, 2.0, shape=shape, dtype=np.float32)  # noqa: E731
        self.observation_space = spaces.Dict(
            {
                "queue": box(q * (len(QUEUE_FEATURES) + p)),
                "running": box(r * (len(RUNNING_FEATURES) + p)),
                "gpus": box(2 * t),
                "nodes": box(n),
                "globals": box(len(GLOBAL_FEATURES)),
                "action_mask": spaces.Box(0, 1, shape=(self.action_space.n,), dtype=np.int8),
            }
        )
        self.queue_shape = (q, len(QUEUE_FEATURES) + p)  # the flat "queue" entry reshapes to this
        self.running_shape = (r, len(RUNNING_FEATURES) + p)
        # the observation's buffers: the float32 entries one after the other in ``_fbuf``, the mask in
        # ``_mask8``; step() returns copies (one of each buffer, the float entries as parts of the copy)
        spaces_ = self.observation_space.spaces
        float_keys = [k for k in spaces_ if k != "action_mask"]
        ends = np.cumsum([spaces_[k].shape[0] for k in float_keys]).tolist()
        self._float_parts = [(k, slice(e - spaces_[k].shape[0], e)) for k, e in zip(float_keys, ends)]
        parts = dict(self._float_parts)
        self._out_parts = [(k, parts.get(k)) for k in spaces_]  # (key, part of _fbuf or None: the mask)
        self._fbuf = np.zeros(ends[-1], dtype=np.float32)
        self._mask8 = np.zeros(self.action_space.n, dtype=np.int8)
        self._rbuf = np.zeros((self.running_slots, 1 + p))  # (R, 1 + P) float64 scratch of the running rows
        self._row_extra = np.zeros(p)  # (P,) scratch: one running row's restart costs (_running_row)
        self._bind_views()
        self._visible_queue = np.zeros(0, dtype=np.int64)
        self._visible_running = np.zeros(0, dtype=np.int64)
        # per-type and per-plan constants of the observation
        cap_t = self.cluster.type_capacity
        self._gpu_share = cap_t / cap_t.sum()  # (T,)
        self._plan_feats = np.stack(  # (P, 2): the num_gpus and gpu_type features of a running job's plan
            [np.log2(self.sim.plan_count + 1) / GPUS_LOG2_SCALE, self.sim.plan_type / max(1, self.sim.num_types - 1)],
            axis=1,
        )
        self._plan_feats_l = self._plan_feats.tolist()
        self._arange = np.arange(max(q, r))
        self._obs["gpus"][t:] = self._gpu_share  # the free fraction of each type, then these
        # float32 free / capacity of each type and node for every free count: tables and each one's offset
        self._type_frac, self._type_base = _fraction_table(cap_t)
        self._node_frac, self._node_base = _fraction_table(self.cluster.node_capacity)
        self._invalidate_views()
        self._steps = 0
        self._invalid = 0
        self._legal_moves = 0  # legal starts and resizes now (set with the mask)
        self._needs_reset = True

    # views of _fbuf, _mask8 and _rbuf: copies and pickles would make them separate arrays
    _VIEWS = ("_obs", "_mask", "_mask_rows", "_mask_preempt", "_gpus_free", "_rrows", "_row_scratch")

    def _bind_views(self) -> None:
        """(Re)create the views of the observation buffers ``_fbuf`` and ``_mask8`` (and of the scratch
        ``_rbuf``) that the fill methods write through."""
        q, r, p = self.queue_slots, self.running_slots, self.num_plans
        flat = {k: self._fbuf[part] for k, part in self._float_parts}  # flat entries
        flat["action_mask"] = self._mask8
        self._obs = dict(flat)  # the same buffers, queue and running as 2-D views
        self._obs["queue"] = flat["queue"].reshape(self.queue_shape)
        self._obs["running"] = flat["running"].reshape(self.running_shape)
        self._mask = flat["action_mask"].view(bool)  # (A,) the legal actions, in the observation's buffer
        self._mask_rows = self._mask[self.first_start : self.first_preempt].reshape(q + r, p)  # start, resize rows
        self._mask_preempt = self._mask[self.first_preempt :]  # (R,) or (0,): preempt each running slot
        self._gpus_free = flat["gpus"][: self.sim.num_types]  # (T,) free fraction of each GPU type
        self._rrows = list(self._obs["running"])  # (R,) views of the rows of the running block
        self._row_scratch = (self._rbuf[-1], self._rbuf[-1, 1:])  # a (1 + P,) scratch row and its (P,) tail

    def __getstate__(self) -> dict:
        # copies and pickles would turn the views into separate arrays: leave them out, rebuild them
        return {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind_views()

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        wl_seed = int(self.np_random.integers(2**31 - 1)) if seed is None else int(seed)
        if self._generator is not None:
            workload = self._generator.generate(wl_seed)
            self.sim = ClusterSimulator(self.cluster, workload, self.sim_config, seed=wl_seed)
            self.view = SimView(self.sim)
            if self.sim.num_plans != self.num_plans:
                raise ConfigError("the workload generator changed the number of plan slots between resets")
        elif self._sim_seed != wl_seed:
            self.sim = ClusterSimulator(self.cluster, self._fixed_workload, self.sim_config, seed=wl_seed)
            self.view = SimView(self.sim)
        else:
            self.sim.reset_state()
        self._sim_seed = None if self._generator is not None else wl_seed
        self.episode_seed = wl_seed  # the workload seed of this episode (policies may derive theirs from it)
        self._invalidate_views()
        self._steps = 0
        self._invalid = 0
        self._needs_reset = False
        reward = self._settle()
        info = self._info({"jct": reward, "invalid": 0.0})
        return self._observe(), info

    def step(self, action: int | np.integer) -> tuple[dict, float, bool, bool, dict]:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        sim = self.sim
        a = action if type(action) is int else _action_index(action)
        sim.woke = False  # set again if this step's wait reaches a wake-up
        p = self.num_plans
        legal = 0 <= a < self._mask.size and bool(self._mask[a])
        jct_reward = 0.0
        invalid = 0.0
        if not legal:
            self._invalid += 1
            invalid = -self.invalid_action_penalty
        elif a == 0:
            n = sim.jobs_in_system
            jct_reward -= n * sim.advance() / self.reward_scale
        elif a < self.first_start:  # wait for a set time, or until the next event if that comes first
            n = sim.jobs_in_system
            target = min(sim.now + self.wait_options[a - 1], sim.next_event_time())
            jct_reward -= n * sim.advance_to(target) / self.reward_scale
        elif a < self.first_resize:
            k, plan = divmod(a - self.first_start, p)
            ok = sim.start(int(self._visible_queue[k]), plan)
            assert ok, "a start the mask allowed was refused"  # masks and simulator must agree
        elif a >= self.first_preempt:
            ok = sim.preempt(int(self._visible_running[a - self.first_preempt]))
            assert ok, "a preemption the mask allowed was refused"
        else:
            r, plan = divmod(a - self.first_resize, p)
            ok = sim.resize(int(self._visible_running[r]), plan)
            assert ok, "a resize the mask allowed was refused"
        if legal:
            jct_reward += self._settle()
        self._steps += 1
        terminated = sim.done
        truncated = bool(self.max_steps is not None and self._steps >= self.max_steps and not terminated)
        if truncated:
            self._mask[0] = True  # as at termination: the final mask always allows "wait"
        info = self._info({"jct": jct_reward, "invalid": invalid})
        if terminated or truncated:
            info["metrics"] = self.episode_metrics()
            self._needs_reset = True
        return self._observe(), float(jct_reward + invalid), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """(A,) bool: the legal actions now (sb3-contrib's MaskablePPO calls this)."""
        return self._mask.copy()

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'")
            return None
        from frenzy_env import rendering

        if self.render_mode == "ansi":
            return rendering.render_ansi(self)
        return rendering.render_rgb(self)

    # ------------------------------------------------------------------ helpers for policies
    def episode_metrics(self) -> dict[str, float]:
        m = self.sim.metrics()
        m["invalid_actions"] = float(self._invalid)
        m["steps"] = float(self._steps)
        return m

    @property
    def visible_queue(self) -> np.ndarray:
        """Job indices shown in the queue slots (arrival order)."""
        return self._visible_queue

    @property
    def visible_running(self) -> np.ndarray:
        """Job indices shown in the running slots (start order)."""
        return self._visible_running

    def start_action(self, job: int, plan: int) -> int | None:
        """The action index that starts ``job`` on ``plan``, or None if the job is not in a queue slot."""
        hits = np.flatnonzero(self._visible_queue == job)
        return None if hits.size == 0 else self.first_start + int(hits[0]) * self.num_plans + int(plan)

    def resize_action(self, job: int, plan: int) -> int | None:
        """The action index that resizes running ``job`` to ``plan``, or None if not in a running slot."""
        r = self._running_slot(job)
        return None if r is None else self.first_resize + r * self.num_plans + int(plan)

    def preempt_action(self, job: int) -> int | None:
        """The action index that preempts running ``job``, or None if it is not in a running slot or the env
        was made without ``preemption=True``."""
        r = self._running_slot(job) if self.preemption else None
        return None if r is None else self.first_preempt + r

    def _running_slot(self, job: int) -> int | None:
        """The running slot showing ``job``, or None."""
        hits = np.flatnonzero(self._visible_running == job)
        return int(hits[0]) if hits.size else None

    def start_rows(self, mask: np.ndarray) -> np.ndarray:
        """(visible queued jobs, P) view of ``mask``'s start actions: row k is queue slot k's plans."""
        nq = len(self._visible_queue)
        return mask[self.first_start : self.first_start + nq * self.num_plans].reshape(nq, self.num_plans)

    def request_wakeup(self, t: float) -> float | None:
        """Ask to be consulted again at simulated time ``t`` (seconds): a timer for scripted policies.

        The environment does not advance past a pending wake-up without returning an observation, and
        "wait" stays legal while one is pending. See :meth:`ClusterSimulator.request_wakeup` for the rules
        (ordered after finishes and OOMs of the same instant, at least 1 s ahead, at most 16 per instant).
        Returns the wake-up's time, or None when it was refused.
        """
        t_set = self.sim.request_wakeup(t)
        if t_set is not None and not self._needs_reset:
            self._mask[0] = True
        return t_set

    # ------------------------------------------------------------------ internals
    def _settle(self) -> float:
        """Recompute the mask; while only "wait" is legal, advance time. Returns the JCT reward accrued."""
        sim = self.sim
        reward = 0.0
        self._compute_mask()
        while (
            not sim.done and not self._legal_moves and sim.has_pending_events() and not sim.woke
            and not self._hidden_start()
        ):  # only waiting is legal, and nothing beyond the queue window could start either
            n = sim.jobs_in_system
            reward -= n * sim.advance() / self.reward_scale
            # cheap test, same decisions; a wake-up always returns to the policy
            while not sim.done and not sim.woke and sim.has_pending_events() and self._idle() and not (
                self._hidden_start()
            ):
                n = sim.jobs_in_system
                reward -= n * sim.advance() / self.reward_scale
            self._compute_mask()
        return reward

    def _hidden_start(self) -> bool:
        """A queued job beyond the queue window could start now (the env then consults the policy rather than
        advance past the moment: every job that could start is within reach of some decision)."""
        sim = self.sim
        if len(sim.queue) <= self.queue_slots:
            return False
        hidden = np.fromiter(itertools.islice(sim.queue, self.queue_slots, None), dtype=np.int64)
        return bool(sim.start_mask(hidden).any())

    def _idle(self) -> bool:
        """True only when no start and no resize is legal now (False: maybe; the full mask decides)."""
        sim = self.sim
        self._update_visible()
        rv = self._visible_running
        if len(rv) and np.count_nonzero(sim.run_floats[rv, 1] > sim.now) < len(rv):
            return False  # a running job past its start-up may be resizable
        qv = self._visible_queue
        return not (len(qv) and np.count_nonzero(sim.start_mask(qv)))

    def _invalidate_views(self) -> None:
        """Forget every view cached on the simulator's state (a new or reset simulator)."""
        self._queue_key: Any = None  # (sim, queue_version) the visible queue was read at
        self._running_key: Any = None
        self._all_running: np.ndarray | None = None  # every running job (when more than the window shows)
        self._qtable: np.ndarray | None = None  # (J, F + P) float32 static queue rows, built lazily
        self._qtable_requeued = 0  # how many of sim.requeued the table has absorbed
        self._qtable_key: Any = None  # changes whenever the table's rows do (the whole-queue totals follow)
        self._qtotals_key: Any = None
        self._qtotals = (0.0, 0.0)
        self._rwork_key: Any = None
        self._rwork = 0.0
        self._qblock_key: Any = None  # queue block filled for (table, queue_version)
        self._qtime: float | None = None  # time the wait column was computed at
        self._qsubmit = np.zeros(0)  # submit times of the jobs in the queue block
        self._rsim: ClusterSimulator | None = None  # the simulator the running block was filled from
        self._rattempts: list[int] = []  # the attempts (sim.run_version) of the jobs in the running block
        self._rversion = -1  # sim.running_version when they were read
        self._rstatic: tuple | None = None  # what is fixed for those attempts (None: not gathered yet)
        self._rtime: float | None = None  # time the running block was filled at
        self._free_key: Any = None  # gpus / nodes filled for this state version
        self._nq_shown = self.queue_slots  # rows of the blocks that may hold stale values
        self._nr_shown = self.running_slots

    def _update_visible(self) -> None:
        """The job indices in the queue and running slots (rebuilt when the simulator's sets change)."""
        sim = self.sim
        q = self.queue_slots
        if self._queue_key != (sim, sim.queue_version):
            self._visible_queue = np.fromiter(
                itertools.islice(sim.queue, q), dtype=np.int64, count=min(q, len(sim.queue))
            )
            self._queue_key = (sim, sim.queue_version)
        if self._running_key != (sim, sim.running_order_version):  # (a resize keeps the order)
            self._visible_running = np.fromiter(  # count: numpy allocates once
                itertools.islice(sim.running, self.running_slots), dtype=np.int64,
                count=min(self.running_slots, len(sim.running)),
            )
            self._running_key = (sim, sim.running_order_version)
            self._all_running = None  # every running job, built when asked for

    def _compute_mask(self) -> None:
        """The mask of the actions legal now, written into ``_mask``."""
        sim = self.sim
        self._update_visible()
        pending = sim.has_pending_events()
        self._mask[0] = sim.done or pending  # at the end, "wait": never an empty mask
        # timed waits while something is pending: with nothing pending only starts can move the episode on
        self._mask[1 : self.first_start] = pending and not sim.done
        rows = self._mask_rows
        self._legal_moves = sim.legal_masks(self._visible_queue, self._visible_running, self.queue_slots, rows)
        if self.preemption:  # a running job past its start-up (the rule of a resize) may be preempted
            stop = self._mask_preempt
            stop[:] = False
            rv = self._visible_running
            if len(rv) and not sim.done:
                stop[: len(rv)] = sim.run_floats[rv, 1] <= sim.now
                self._legal_moves += int(np.count_nonzero(stop))

    def _queue_rows(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), F + P) float32 rows of queued ``jobs`` without the wait column (it depends on time).

        Everything else in a queued job's row is fixed while it waits: its remaining work, its available
        plans and its static features change only when it runs, which puts it back through the queue.
        """
        sim = self.sim
        rem = np.maximum(0.0, sim.work_estimate[jobs] - sim.done_iters[jobs])  # (n,)
        rows = np.zeros((len(jobs), len(QUEUE_FEATURES) + self.num_plans), dtype=np.float32)
        avail = sim.available_plans(jobs)
        with np.errstate(invalid="ignore"):
            times = rem[:, None] * sim.iter_time[jobs]  # (n, P) seconds
        best = np.where(avail, times, np.inf).min(axis=1)
        # for the whole-queue aggregates: predicted seconds on the best plan, fewest GPUs of an available plan
        self._qbest_s[jobs] = np.minimum(best, MAX_SECONDS)
        fewest = np.where(avail, sim.plan_count, 1 << 30).min(axis=1, initial=1 << 30)
        self._qmin_gpus[jobs] = np.where(fewest == 1 << 30, 0, fewest)
        plan_t = np.log1p(np.minimum(times, MAX_SECONDS)) / LOG_TIME_SCALE
        plan_t[~avail] = 0.0
        rows[:, Q.present] = 1.0
        rows[:, Q.best_time] = np.log1p(np.minimum(best, MAX_SECONDS)) / LOG_TIME_SCALE
        rows[:, Q.params : Q.requested_gpus + 1] = self._static_features[jobs]
        rows[:, len(QUEUE_FEATURES) :] = plan_t
        np.clip(rows, 0.0, 2.0, out=rows)
        return rows

    def _fill_queue(self) -> None:
        sim = self.sim
        table = self._qtable
        if table is None:
            table = np.empty((sim.num_jobs, len(QUEUE_FEATURES) + self.num_plans), dtype=np.float32)
            self._qbest_s = np.zeros(sim.num_jobs)  # (J,) written by _queue_rows with the table
            self._qmin_gpus = np.zeros(sim.num_jobs, dtype=np.int64)
            for lo in range(0, sim.num_jobs, 8192):  # in chunks: few large temporaries on huge workloads
                table[lo : lo + 8192] = self._queue_rows(np.arange(lo, min(lo + 8192, sim.num_jobs)))
            self._qtable = table
            self._qtable_requeued = len(sim.requeued)
            self._qblock_key = None
            self._qtable_key = (sim, 0)
        elif self._qtable_requeued != len(sim.requeued):
            again = np.unique(np.array(sim.requeued[self._qtable_requeued :], dtype=np.int64))
            table[again] = self._queue_rows(again)
            self._qtable_requeued = len(sim.requeued)
            self._qblock_key = None
            self._qtable_key = (sim, self._qtable_requeued)
        qv = self._visible_queue
        nq = len(qv)
        block = self._obs["queue"]
        if self._qblock_key != self._queue_key:
            if self._nq_shown > nq:
                block[nq : self._nq_shown] = 0.0
            if nq:
                block[:nq] = table[qv]
            self._nq_shown = nq
            self._qblock_key = self._queue_key
            self._qtime = None
            self._qsubmit = sim.submit[qv]  # (nq,) submit times of the visible queue
        if nq and self._qtime != sim.now:
            wait = block[:nq, Q.wait]
            wait[:] = np.log1p(np.maximum(0.0, sim.now - self._qsubmit)) / LOG_TIME_SCALE
            _clip(wait, 0.0, 2.0, out=wait)
            self._qtime = sim.now

    def _fill_running(self) -> None:
        """Rows of the visible running jobs.

        What is fixed while a job keeps its attempt (plan, restarts, speed) is gathered once per visible set
        (``_rstatic``); the time-dependent columns are recomputed when time moves. When the set changes at
        the same instant (a start or a resize), the rows of jobs that kept their attempt still hold and only
        new rows are computed. The simulator's attempt ids (``run_version``) are unique per attempt, so the
        list of them (``_rattempts``) identifies the jobs and attempts the block shows.
        """
        sim = self.sim
        now = sim.now
        rv = self._visible_running
        nr = len(rv)
        same_set = self._rsim is sim and self._rversion == sim.running_version  # no start or stop since
        attempts = self._rattempts if same_set else sim.run_version[rv].tolist()  # the visible jobs' attempts
        self._rversion = sim.running_version
        if self._rsim is sim:
            if same_set or attempts == self._rattempts:
                if self._rtime != now and nr:
                    self._rows_now(rv, now)
                return
            if self._rtime == now and nr and self._reuse_rows(rv, attempts):
                self._rstatic = None  # rows hold for now; the static part is gathered when time moves
                return
        block = self._obs["running"]
        if self._nr_shown > nr:
            block[nr : self._nr_shown] = 0.0
        self._nr_shown = nr
        self._rsim = sim
        self._rattempts = attempts
        self._rtime = now
        self._rstatic = None
        if nr:
            self._rows_now(rv, now)

    def _rows_now(self, rv: np.ndarray, now: float) -> None:
        """Every row of the running block at ``now`` (compiled, or :meth:`_running_static` once per visible
        set and :meth:`_running_times`)."""
        kernel = kernels.get("running_rows")
        if kernel is None:
            if self._rstatic is None:
                self._rstatic = self._running_static(rv)
            self._running_times(self._rstatic, now)
            return
        self._rtime = now
        self._kernel_rows(kernel, 0, rv, now)

    def _kernel_rows(self, kernel: Any, first: int, jobs: np.ndarray, now: float) -> None:
        """Rows ``first ..`` of the running block for ``jobs`` by the compiled ``running_rows`` kernel."""
        sim = self.sim
        kernel(self._obs["running"], first, jobs, sim.run_plan, sim.run_floats, sim.restart_count,
               sim.work_estimate, sim.avail_iter_time, sim.config_row, sim.config_start_s, sim.config_save_s,
               self._plan_feats, now, LOG_TIME_SCALE)

    def _running_static(self, rv: np.ndarray) -> tuple:
        """Write the fixed columns of the running rows; return what the time-dependent ones need."""
        sim = self.sim
        nr = len(rv)
        cur = sim.run_plan[rv]  # (R,)
        rows = self._obs["running"][:nr]
        rows[:, R.present] = 1.0
        rows[:, R.num_gpus : R.gpu_type + 1] = self._plan_feats[cur]
        rows[:, R.restarts] = np.minimum(sim.restart_count[rv] / RESTARTS_SCALE, 2.0)
        floats = sim.run_floats[rv].T.copy()  # (4, R) done_base, progress_from, rate, first start
        estimate = sim.work_estimate[rv]
        cur_cells = cur + 1 + self._arange[:nr] * (1 + self.num_plans)  # cells of the current plans in _rbuf
        iter_time = sim.avail_iter_time[rv]
        # the restart cost of moving to each plan (start-up there, restart overhead and checkpoint write here);
        # the current plan's column is the start-up still to pay, written at each time by _running_times
        k = sim.config_row[rv]
        extra = sim.config_start_s[k] + sim.config_save_s[k, cur][:, None]  # (R, P)
        cur_flat = cur + self._arange[:nr] * self.num_plans  # the current plans' cells in ``extra``
        return (cur_cells, *floats, estimate, np.maximum(estimate, 1e-9), iter_time, extra, cur_flat,
                iter_time > 0.0)

    def _running_times(self, static: tuple, now: float) -> None:
        """The time-dependent columns of the running rows (elapsed, time left, progress)."""
        self._rtime = now
        cur_cells, done_base, progress_from, rate, started, estimate, estimate_pos, iter_time, extra, cur_flat, \
            avail = static
        nr = len(cur_cells)
        progress = done_base + np.maximum(0.0, now - progress_from) * rate
        rem = np.maximum(0.0, estimate - progress)  # (R,) iterations left (estimate)
        extra.ravel()[cur_flat] = np.maximum(0.0, progress_from - now)  # start-up still to pay on the current plan
        # one log scale for [elapsed | predicted seconds left on each plan] (0 where a plan is not available)
        scaled = self._rbuf[:nr]  # (R, 1 + P) float64
        times = scaled[:, 1:]
        np.multiply(iter_time, rem[:, None], out=times)
        np.add(times, extra, out=times, where=avail)
        np.minimum(times, MAX_SECONDS, out=times)
        np.maximum(0.0, now - started, out=scaled[:, 0])
        np.log1p(scaled, out=scaled)
        scaled /= LOG_TIME_SCALE
        rows = self._obs["running"][:nr]
        rows[:, R.elapsed] = scaled[:, 0]
        rows[:, R.remaining_time] = scaled.take(cur_cells)  # the current plan is always available
        rows[:, R.progress] = 1.0 - rem / estimate_pos
        rows[:, len(RUNNING_FEATURES) :] = times
        _clip(rows, 0.0, 2.0, out=rows)

    def _reuse_rows(self, rv: np.ndarray, attempts: list[int]) -> bool:
        """Same instant, new visible set: move the rows of unchanged attempts, compute at most two new rows.

        Returns False (nothing changed) when more rows are new; the caller then recomputes them all.
        """
        old = self._rattempts
        n_old, nr = len(old), len(attempts)
        block = self._obs["running"]
        k = 0  # the first row that changed
        m = min(n_old, nr)
        while k < m and old[k] == attempts[k]:
            k += 1
        if k < nr == n_old and attempts[k + 1 :] == old[k + 1 :]:  # a resize: one job's row, in its place
            fresh = (k,)
        elif k < n_old and attempts[k : n_old - 1] == old[k + 1 :]:
            # the usual change: row k left (stopped or restarted), rows after it move up, new rows at the end
            if len(attempts) - n_old + 1 > 2:
                return False
            if k < n_old - 1:
                block[k : n_old - 1] = block[k + 1 : n_old]
            fresh = range(n_old - 1, nr)
        elif k == n_old:  # rows appended
            if nr - n_old > 2:
                return False
            fresh = range(n_old, nr)
        else:
            where = {a: i for i, a in enumerate(old)}
            src = [where.get(a, -1) for a in attempts]
            fresh = [i for i, j in enumerate(src) if j < 0]
            if len(fresh) > 2:
                return False
            if n_old:
                block[:nr] = block[:n_old][src]  # rows of new jobs get a placeholder, overwritten below
        if self._nr_shown > nr:
            block[nr : self._nr_shown] = 0.0
        self._nr_shown = nr
        self._rattempts = attempts
        kernel = kernels.get("running_rows")
        if kernel is None:
            for i in fresh:
                self._running_row(i, int(rv[i]))
        else:
            for i in fresh:
                self._kernel_rows(kernel, i, rv[i : i + 1], self.sim.now)
        return True

    def _running_row(self, k: int, job: int) -> None:
        """Row ``k`` of the running block for ``job``: :meth:`_running_static` and :meth:`_running_times` for
        one job (the same operations element by element, so the same numbers)."""
        sim = self.sim
        now = sim.now
        run, record = sim.running[job], sim.records[job]  # (the values of run_plan, run_floats, restart_count)
        plan, started = run.plan, record.start_time
        estimate = float(sim.work_estimate[job])
        progress = run.done_base + max(0.0, now - run.progress_from) * run.rate
        rem = max(0.0, estimate - progress)
        scaled, times = self._row_scratch  # (1 + P,) and its (P,) tail; the block's rows are computed already
        iter_time = sim.avail_iter_time[job]
        c = sim.config_row[job]
        extra = self._row_extra  # (P,) restart costs (see _running_static), no allocation per row
        np.add(sim.config_start_s[c], sim.config_save_s[c, plan], out=extra)
        extra[plan] = max(0.0, run.progress_from - now)
        np.multiply(iter_time, rem, out=times)
        np.add(times, extra, out=times, where=iter_time > 0.0)
        np.minimum(times, MAX_SECONDS, out=times)
        scaled[0] = max(0.0, now - started)
        np.log1p(scaled, out=scaled)
        scaled /= LOG_TIME_SCALE
        row = self._rrows[k]
        feats = self._plan_feats_l[plan]
        # the clip to [0, 2] of the other path, where it can change something: every value is >= 0, the
        # times are at most log1p(1e12) / 16 < 2, the plan features and the progress at most 1
        row[: len(RUNNING_FEATURES)] = [  # in RUNNING_FEATURES order
            1.0,
            min(float(scaled[0]), 2.0),
            scaled[plan + 1],
            feats[0],
            feats[1],
            min(record.restarts / RESTARTS_SCALE, 2.0),
            1.0 - rem / max(estimate, 1e-9),
        ]
        row[len(RUNNING_FEATURES) :] = times

    def _observe(self) -> dict[str, np.ndarray]:
        sim = self.sim
        obs = self._obs
        self._fill_queue()
        self._fill_running()
        state = sim.state
        if self._free_key != (sim, state.version):
            # free / capacity, looked up (the capacity shares after the free fractions never change)
            kernel = kernels.get("free_fractions")
            if kernel is None:
                self._type_frac.take(self._type_base + state.free_t, out=self._gpus_free, mode="clip")
                self._node_frac.take(self._node_base + state.free, out=obs["nodes"], mode="clip")
            else:
                kernel(self._type_frac, self._type_base, state.free_t, self._gpus_free, self._node_frac,
                       self._node_base, state.free, obs["nodes"])
            self._free_key = (sim, state.version)
        g = obs["globals"]
        nq, nrun = len(sim.queue), len(sim.running)
        nxt = float(sim.submit[sim._next_arrival]) - sim.now if sim._next_arrival < sim.num_jobs else 0.0
        to_event = sim.next_event_time() - sim.now
        queued_work, queued_gpus = self._queue_totals()
        values = [  # in GLOBAL_FEATURES order
            math.log1p(nq) / COUNT_LOG_SCALE,
            min(nrun / self.running_slots, 2.0),
            math.log1p(max(0, nq - self.queue_slots)) / COUNT_LOG_SCALE,
            sim._next_arrival / sim.num_jobs,
            math.log1p(max(0.0, nxt)) / LOG_TIME_SCALE,
            sim.busy_gpus / self.cluster.num_gpus,
            math.log1p(to_event) / LOG_TIME_SCALE if to_event < math.inf else 0.0,
            math.log1p(nrun) / COUNT_LOG_SCALE,
            math.log1p(max(0, nrun - self.running_slots)) / COUNT_LOG_SCALE,
            math.log1p(queued_work) / LOG_TIME_SCALE,
            math.log1p(self._running_work()) / LOG_TIME_SCALE,
            min(queued_gpus / self.cluster.num_gpus, 2.0),
        ]
        g[:] = values
        if max(values) > 2.0:  # (all are >= 0; within [0, 2] the clip changes nothing)
            _clip(g, 0.0, 2.0, out=g)
        # fresh arrays: one copy of each buffer, the float entries as parts of theirs (nothing of the
        # environment's, nor of an earlier observation); the mask is already in its buffer (self._mask)
        floats, mask = self._fbuf.copy(), self._mask8.copy()
        return {k: mask if part is None else floats[part] for k, part in self._out_parts}

    def _queue_totals(self) -> tuple[float, float]:
        """Over every queued job (beyond the window too): the predicted seconds on each one's best plan, and
        the fewest GPUs each could start on, summed; recomputed when the queue changes."""
        sim = self.sim
        key = (self._qtable_key, sim.queue_version)
        if self._qtotals_key != key:
            q = sim.queue
            self._qtotals = (float(self._qbest_s[q].sum()), float(self._qmin_gpus[q].sum())) if q else (0.0, 0.0)
            self._qtotals_key = key
        return self._qtotals

    def _running_work(self) -> float:
        """Predicted seconds left of every running job on its plan, summed (estimated work); the running window
        already holds the jobs when none is beyond it."""
        sim = self.sim
        key = (sim, sim.running_version, sim.now)
        if self._rwork_key != key:
            self._update_visible()
            if len(sim.running) <= self.running_slots:
                jobs = self._visible_running
            else:
                jobs = self._all_running
                if jobs is None:
                    jobs = self._all_running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
            self._rwork = kernels.running_work(jobs, sim.run_plan, sim.run_floats, sim.work_estimate, sim.iter_time,
                                               sim.now)
            self._rwork_key = key
        return self._rwork

    @property
    def _static_features(self) -> np.ndarray:
        """(J, 4) per-job features that never change: params, batch, seq_len, requested GPUs."""
        sim = self.sim
        cached = getattr(sim, "_env_static_features", None)
        if cached is None:
            memo: dict[tuple, int] = {}
            rows: list[list[float]] = []
            index = np.empty(sim.num_jobs, dtype=np.int64)  # (J,) row of each job in ``rows``
            for i, j in enumerate(sim.jobs):
                key = (id(j.model), j.batch_size, j.seq_len, j.requested_gpus)
                k = memo.get(key)
                if k is None:
                    k = memo[key] = len(rows)
                    rows.append(
                        [
                            math.log10(max(j.model.num_params, 1)) / PARAMS_LOG10_SCALE,
                            math.log2(max(j.batch_size, 1)) / BATCH_LOG2_SCALE,
                            math.log2(max(j.seq_len, 1)) / SEQ_LOG2_SCALE,
                            math.log2((j.requested_gpus or 0) + 1) / GPUS_LOG2_SCALE,
                        ]
                    )
                index[i] = k
            cached = np.array(rows, dtype=np.float32)[index]  # (J, 4)
            sim._env_static_features = cached
        return cached

    def _info(self, components: dict[str, float]) -> dict[str, Any]:
        sim = self.sim
        return {
            "time": sim.now,
            "action_mask": self._mask8.copy(),  # int8, the bool mask's buffer
            "reward_components": components,
            "invalid_actions": self._invalid,
            "queue_length": len(sim.queue),
            "running": len(sim.running),
            "finished": sim.finished,
            "rejected": sim.rejected,
            "ooms": sim.oom_failures,
        }


def _check_wait_options(options: Any) -> tuple[float, ...]:
    """The timed waits in seconds: a sequence of finite positive numbers, ascending (may be empty)."""
    try:
        values = tuple(float(x) for x in options)
    except (TypeError, ValueError):
        raise ConfigError(f"wait_options must be a sequence of seconds, got {options!r}") from None
    if any(not (math.isfinite(x) and x > 0) for x in values) or list(values) != sorted(set(values)):
        raise ConfigError(f"wait_options must be distinct finite positive seconds in ascending order, got {options!r}")
    return values


def _fraction_table(capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``f / capacity[i]`` for f in 0..capacity[i], every i one after the other, and (len,) the
    position of each i's ``f = 0``: ``table[base + free]`` is ``free / capacity`` as float32."""
    capacity = np.asarray(capacity, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        table = np.concatenate([np.arange(c + 1, dtype=np.int64) / c for c in capacity.tolist()] or [np.zeros(0)])
    base = np.concatenate([[0], np.cumsum(capacity + 1)[:-1]]).astype(np.int64)
    return table.astype(np.float32), base


def _action_index(action: Any) -> int:
    """The integer action of ``action`` (a Python or numpy integer, or a one-element integer array).

    Out-of-range integers are legal input (they are penalised no-ops); anything that is not an integer raises
    ``TypeError`` naming the value, since truncating 2.5 or parsing "3" would hide a bug in the caller.
    """
    if isinstance(action, np.ndarray):
        if action.size != 1 or not np.issubdtype(action.dtype, np.integer):
            raise TypeError(f"action must be one integer, got an array of shape {action.shape} ({action.dtype})")
        action = action.reshape(-1)[0]
    if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
        raise TypeError(f"action must be an integer, got {action!r} ({type(action).__name__})")
    return int(action)


def _bind_generator(gen: Any, cluster: ClusterSpec, by_name: bool) -> Any:
    """A preset generator named by string follows the env's cluster (load, reference GPU type)."""
    if not by_name or not dataclasses.is_dataclass(gen):
        return gen
    names = {f.name for f in dataclasses.fields(gen)}
    changes: dict[str, Any] = {}
    if "cluster" in names:
        changes["cluster"] = cluster
    if "reference_gpu_type" in names:
        changes["reference_gpu_type"] = cluster.reference_gpu_type
        if "gpus_per_node" in names:
            changes["gpus_per_node"] = cluster.max_gpus_per_node(cluster.reference_gpu_type)
    return dataclasses.replace(gen, **changes) if changes else gen


@dataclass(frozen=True)
class EnvPreset:
    """A registered environment id and its defaults (Minigrid-style: one dataclass per preset)."""

    env_id: str
    cluster: str
    workload: str
    kwargs: dict = field(default_factory=dict)


ENV_VERSION = "v4"  # the suffix of every registered id; bumped whenever dynamics or spaces change

ENV_PRESETS: tuple[EnvPreset, ...] = (
    EnvPreset(f"frenzy/HeteroCluster-{ENV_VERSION}", "frenzy-testbed", "itp-default"),
    # the default week at its recorded arrival rate: offered load ~2.1 (frenzy_env.workload.load), overloaded
    EnvPreset(f"frenzy/HeteroClusterOverloaded-{ENV_VERSION}", "frenzy-testbed", "itp-overloaded"),
    EnvPreset(f"frenzy/HeteroClusterSynthetic-{ENV_VERSION}", "frenzy-testbed", "synthetic"),
    EnvPreset(f"frenzy/HeteroClusterSmall-{ENV_VERSION}", "frenzy-testbed", "synthetic-small"),
    EnvPreset(f"frenzy/Doubling64-{ENV_VERSION}", "doubling-64", "synthetic"),
    EnvPreset(f"frenzy/PAI2020-{ENV_VERSION}", "pai-2020", "synthetic"),
    EnvPreset(f"frenzy/Large1024-{ENV_VERSION}", "large-1024", "synthetic"),
)


def register_envs() -> None:
    """Register every :data:`ENV_PRESETS` id with Gymnasium (idempotent)."""
    for preset in ENV_PRESETS:
        if preset.env_id in gym.registry:
            continue
        gym.register(
            id=preset.env_id,
            entry_point="frenzy_env.env:FrenzyEnv",
            kwargs={"cluster": preset.cluster, "workload": preset.workload, **preset.kwargs},
            disable_env_checker=True,
        )


__all__ = ["FrenzyEnv", "ENV_PRESETS", "register_envs", "QUEUED", "RUNNING"]
