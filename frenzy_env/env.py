"""The Gymnasium environment: :class:`FrenzyEnv`, a thin layer over :class:`ClusterSimulator`.

The environment holds the spaces, the step, the action masks, the reward and the info; the observation is
encoded by its :class:`~frenzy_env.observation.encoder.ObservationEncoder`, whose columns and scales are named
in :mod:`frenzy_env.observation`.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from frenzy_env.errors import ConfigError, check_keys
from frenzy_env.observation import (
    GLOBAL_FEATURES,
    GPU_FEATURES,
    PLAN_FEATURES,
    QUEUE_FEATURES,
    RUNNING_FEATURES,
    UNIVERSAL_GLOBAL_FEATURES,
    UNIVERSAL_RUNNING_FEATURES,
    UNIVERSAL_TYPES,
)
from frenzy_env.observation.encoder import ObservationEncoder
from frenzy_env.simulator import DONE, FUTURE, QUEUED, RUNNING, ClusterSimulator, SimConfig
from frenzy_env.simulator.view import SimView
from frenzy_env.workload import Workload, make_generator
from frenzy_env.world.cluster import ClusterSpec

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
    back to the queue with its progress; legal when a resize is, as time goes: once its start-up is over and
    as the ``resize_cooldown`` and ``one_action_per_instant`` keywords allow; what the stop costs follows
    ``stop_mode``: :meth:`ClusterSimulator.preempt`); ``preempt_action(job)`` gives the index. "Wait" and
    the timed waits are legal while anything is pending (a finish, an OOM, an arrival, a wake-up), so no policy
    can keep an episode from ending by waiting.
    A plan slot p is a (GPU type, GPU count); the layout it runs is the ``layouts`` option: ``"predictor"``
    (v4's) the predictor's fastest feasible (dp, tp, pp, micro-batch) layout, accumulation and
    pipelines included; ``"no_accumulation"`` (the default, v5's) the fastest feasible layout with
    ``pp == 1`` and no gradient accumulation (MARP's (d, t) plans, per-GPU batch ``B / d``), else the
    ``"predictor"`` choice. The spaces are the same under both.
    The plan slots are the ``interface`` keyword's: ``"universal"`` (the default) a fixed grid of 4 type slots
    (the cluster's types, memory first, then speed) x the counts 1, 2, ..., 64, P = 28 on every cluster of at
    most 4 GPU types (``Discrete(3,588)`` with the default windows), slot ``t * 7 + k`` of type slot t and 2**k
    GPUs, a slot whose type the cluster lacks or whose count it cannot hold never legal; ``"cluster"`` (v5's)
    the cluster's GPU types x the counts up to ``min(max_plan_gpus, the largest type's GPUs)`` (frenzy-testbed:
    P = 18, ``Discrete(2,308)``). The same policy decisions give the same episode under both (``sim.plan_index(type,
    count)`` gives a slot's index).
    ``action_masks()`` gives exactly the legal actions: the plan is memory-feasible under the predictor,
    has not crashed for that job before, and is placeable on currently free GPUs; resizing to the current
    plan is masked. An illegal action is a no-op with a penalty (``info["invalid_actions"]`` counts them).
    When no start and no resize is legal the environment advances by itself to the next event, so no step
    is wasted, but never past a wake-up: ``request_wakeup(t)`` (a timer for scripted policies) makes the
    environment return an observation at time ``t``.

    ## Observation Space
    A one-level ``Dict`` of flat float32 ``Box`` es (values in [0, 2]) plus the int8 mask; ``queue`` and
    ``running`` are flattened row-major from ``env.queue_shape`` and ``env.running_shape``. Under
    ``interface="cluster"`` (v5's layout): ``queue`` (Q, 7 + P): present, wait, best predicted run time, model size,
    batch, sequence length, requested GPUs, then predicted run time on each plan slot (0 when not available);
    ``running`` (R, 7 + P): present, elapsed, predicted remaining time, GPUs, GPU type, restarts, progress,
    then predicted remaining time on each plan slot; ``gpus`` (2T,): free fraction and capacity share of
    each GPU type; ``nodes`` (N,): free fraction of each node; ``globals`` (12,): queue length, running
    jobs, backlog beyond the window, fraction arrived, time to next arrival, busy fraction, time to the next
    event, running jobs in all and beyond the window, whole-system queued and running work (predicted
    seconds), queued GPU demand; ``action_mask`` (A,) int8. Times are ``log1p(seconds)/16``. Every name and
    scale is in :mod:`frenzy_env.observation`.
    Under the default ``interface="universal"`` the entries are the same on every cluster: ``queue`` (Q, 7 + 28) as
    above on the grid's slots (0 on absent ones); ``running`` (R, 8 + 28): present, elapsed, predicted remaining time,
    GPUs, the held type's peak speed and memory (not its index), restarts, progress, then the time left on each
    slot; ``plans`` (28, 5) (``env.plans_shape``): per plan slot present, GPUs, its type's speed and memory, and
    whether the type has that many GPUs free; ``gpus`` (4, 9) (``env.gpus_shape``): per type slot present, free
    fraction, GPUs, speed, memory, GPUs per node, nodes, fraction of its nodes wholly free, largest free block
    over the node size (all 0 on an absent slot); no ``nodes``; ``globals`` (14,): the 12 above, then
    ``startup_time`` and ``restart_overhead`` as log times (:data:`frenzy_env.observation.PLAN_FEATURES`,
    ``GPU_FEATURES``, ``UNIVERSAL_RUNNING_FEATURES``, ``UNIVERSAL_GLOBAL_FEATURES``).

    ## Rewards
    ``-(jobs in the system) * (elapsed seconds) / reward_scale`` per step, so the return is minus the total
    job completion time (in units of ``reward_scale``, default one hour) up to rejected jobs; minus
    ``invalid_action_penalty`` for an illegal action. ``info["reward_components"]`` has both parts.

    ## Starting State
    The first job has arrived; the cluster is empty. ``reset(seed=...)`` draws the workload from its
    generator with that seed (synthetic jobs, or the model assignment of trace jobs).

    ## Episode End
    ``terminated`` when every job has finished or been rejected; ``truncated`` (with ``terminated`` False)
    after ``max_steps`` steps, or at the first step that ends ``max_sim_hours`` or more of simulated time after
    ``reset`` (each if set; a step is never cut short, so the clock may pass the budget by that step's length).
    The final ``info["metrics"]`` holds the episode metrics (:meth:`episode_metrics`). Those of a truncated
    episode also say so and count what is unfinished: ``truncated`` (1), ``unfinished`` (jobs queued or running
    at the cut), ``not_arrived`` (jobs not yet submitted), ``avg_time_in_system_h`` (the mean, over the jobs
    that arrived and were not rejected, of the JCT of a finished job and the time since submission of an
    unfinished one: a lower bound on their average JCT) and ``truncated_at_h`` (the cut, in hours after the
    first submission); ``avg_jct_h`` and ``p95_jct_h`` count every job not rejected, an unfinished one at its
    time in the system so far plus ``truncated_at_h`` (so never below ``avg_jct_finished_h``, the finished jobs'
    average, kept with ``p95_jct_finished_h``). A stock ``TimeLimit`` (``gym.make(..., max_episode_steps=N)``)
    found at ``reset`` gets the same metrics in the info of the step it truncates. As the reward charges every
    job in the system for every second, a truncated episode returns minus the total time in the system up to
    the cut (``avg_time_in_system_h`` times those jobs, in ``reward_scale`` units; penalties apart). The final
    observation's mask (and ``info["action_mask"]``, ``action_masks()``) allows "wait", so it is never empty
    and masked sampling (``rng.choice(np.flatnonzero(mask))``, vector envs) works on it; stepping after the end
    still raises until ``reset()``. (A workload whose jobs are all rejected at once starts terminated: "wait" ends it.)

    ## Arguments
    ``cluster`` (ClusterSpec or preset name), ``workload`` (Workload, generator with ``generate(seed)``, or
    preset name), ``predictor`` ("frenzy" | "extended" | "oracle"), ``queue_slots`` (64; ``"all"``: as many
    as the first workload's jobs, every job within reach), ``running_slots`` (64, or ``"all"``),
    ``wait_options`` ((60, 600, 3600) seconds; ``()`` for none), ``reward_scale`` (3600.0),
    ``invalid_action_penalty`` (0.1), ``max_steps`` (None: no step budget; a positive number of decisions; or
    ``"auto"``: 100 per job of the episode's workload plus one per simulated minute of the ``"auto"`` time budget,
    :func:`auto_budgets`), ``max_sim_hours`` (None: no simulated-time budget; a positive number of hours; or
    ``"auto"``: twice the arrival window plus every job's run time on its fastest plan, :func:`auto_budgets`;
    :attr:`budgets` gives an episode's two), ``render_mode`` ("ansi" | "rgb_array"),
    ``preemption`` (False: no preempt actions), and any
    :class:`SimConfig` field (``startup_time``, ``restart_overhead``, ``checkpoint_bandwidth``,
    ``load_bandwidth``, ``oom_delay``, ``max_plan_gpus``, ``interface`` ("universal", the default: the same
    spaces on every cluster of at most 4 GPU types, plans and GPU types described by features, see Action Space
    and Observation Space, refusing a cluster of more types and ``max_plan_gpus`` above 64; "cluster", v5's:
    plan slots and observation in the cluster's own shape),
    ``placement``, ``work_info``, ``work_noise``, ``utilisation``; ``memory_truth`` ("published", the default:
    the CUDA context plus a per-job factor, drawn from 27 published runs of six frameworks and the caching
    allocator's fragmentation, times the layout's structural peak, no predictor's estimate,
    :mod:`frenzy_env.world.memory.published_truth`; "residual", v5's: the extended estimate times a per-job factor
    drawn from measured residuals; or "estimate", v4's truth) and
    ``memory_margin`` (fraction of GPU memory the masks keep free, default 0); ``efficiency`` ("per_type", the
    default: per-GPU efficiency rising with the micro-batch on a curve and a level of each GPU type, the level
    depending on the model's width, accumulation not free, :mod:`frenzy_env.world.efficiency`; "microbatch",
    v5's: one curve for every type; or "flat", v4's speed); ``layouts`` ("no_accumulation", the default, or
    "predictor", v4's plan-slot layouts, see Action Space); ``resize_cooldown`` (default 60 s, Pollux's and
    Sia's reallocation period: a running job is not resized or preempted before that many seconds after its
    last start or resize, nor before its start-up is over; None: the start-up only, v5's) and
    ``one_action_per_instant`` (default True: at most one start, resize or preemption of a job per simulated
    instant, so at most the jobs present plus one steps pass before the clock moves; False: any number, v5's):
    the masks show both rules, and the spaces are the same under them; ``stop_mode`` (default "save_first": a
    preemption holds the GPUs while it saves, then frees them; "kill": it frees them at once and, like a resize,
    restarts from the last periodic checkpoint; "v5": it frees them at once, keeps all progress and charges its
    save to the next start) with ``checkpoint_interval`` (default 1800 s, Check-N-Run's: seconds of run between
    periodic checkpoints, what a kill loses at most; None: no stop loses work, v5's; both in :class:`SimConfig`).
    The registered ids set ``max_steps`` and ``max_sim_hours`` to ``"auto"``.
    Unknown keywords raise :class:`ConfigError`. Window sizes: on the shipped ITP week under Frenzy more than 64
    jobs wait at 2% of decisions and more than 64 run at none (at 32 and 16 slots: 8.5% and 76%).

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
      The ``preemption`` keyword (off by default, so v4 is unchanged) adds the preempt actions; the
      ``max_sim_hours`` keyword (None by default) a simulated-time budget.
    * v5 (same spaces as v4; observation version 3): jobs sized like the jobs that were recorded, and a world in
      which that sizing matters (docs/world.md). Trace and synthetic jobs take the sizing rule ``"recorded"``
      (:mod:`frenzy_env.workload.configs`: at the recorded GPU count a per-GPU micro-batch from public
      training configurations and at most 4 accumulation steps); per-GPU efficiency rises with the
      micro-batch and each extra accumulation step costs its micro-batch's time (``efficiency="microbatch"``,
      :mod:`frenzy_env.world.efficiency`); the true peak memory is the extended estimate times a per-job factor
      from the estimator's leave-one-source-out residuals (``memory_truth="residual"``,
      :mod:`frenzy_env.world.memory.truth`), so the ``"extended"`` predictor can fail; a plan slot runs the
      fastest layout without pipeline or accumulation the predictor admits (``layouts="no_accumulation"``).
      Frenzy's baseline plans as its paper does (``plans="paper"``, ranking ``"min_gpus_fastest"``). The v4
      world stays registered as ``frenzy/HeteroCluster-v4`` (and each preset's ``-v4`` id):
      :data:`frenzy_env.registration.V4_WORLD` and the workloads' ``sizing="v4"``.
    * v6 (new spaces; universal observation version 1): an MDP that standard learners can learn on, on any
      cluster, in a more faithful world (docs/world.md). The same observation and action spaces on every cluster
      of at most 4 GPU types (``interface="universal"``: 28 plan slots on a fixed grid, plans and GPU types
      described by features, ``Discrete(3,588)``); at most one action per job per instant
      (``one_action_per_instant``) and a 60 s ``resize_cooldown``; budgets on every registered id
      (``max_steps="auto"``, ``max_sim_hours="auto"``); a memory truth no predictor owns
      (``memory_truth="published"``); a curve and a width-dependent level of efficiency per GPU type
      (``efficiency="per_type"``); a preemption that pays its save on the GPUs it holds, and periodic checkpoints
      (``stop_mode="save_first"``, ``checkpoint_interval=1800``); the ``cloud-mixed`` cluster of new GPU types
      (``frenzy/CloudMixed-v6``). The v5 world stays registered as ``frenzy/HeteroCluster-v5`` (and each
      preset's ``-v5`` id): :data:`frenzy_env.registration.V5_WORLD`; the shipped ``ppo`` model plays it.
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
        max_steps: int | str | None = None,
        render_mode: str | None = None,
        preemption: bool = False,
        max_sim_hours: float | str | None = None,
        **sim_options: Any,
    ) -> None:
        check_keys("FrenzyEnv", sim_options, (*_ENV_KEYS, *_SIM_KEYS))
        _check_settings(
            preemption, queue_slots, running_slots, reward_scale, max_steps, max_sim_hours, render_mode,
            self.metadata["render_modes"],
        )
        self.preemption = bool(preemption)
        self._set_world(cluster, workload, sim_options)
        self.wait_options = _check_wait_options(wait_options)
        self.reward_scale = float(reward_scale)
        if not (isinstance(invalid_action_penalty, (int, float)) and math.isfinite(invalid_action_penalty)):
            raise ConfigError(f"invalid_action_penalty must be a finite number, got {invalid_action_penalty!r}")
        self.invalid_action_penalty = float(invalid_action_penalty)
        self._step_budget: int | None = None  # this episode's budgets (set at reset: "auto" scales to its workload)
        self._time_budget_s: float | None = None
        self._max_steps, self._max_sim_hours = max_steps, _hours(max_sim_hours)
        self.render_mode = render_mode
        self._first_simulator(queue_slots, running_slots)
        self._make_spaces()
        # the observation's buffers and caches; the mask is written through its view (``_mask``)
        self._encoder = ObservationEncoder(
            {k: space.shape[0] for k, space in self.observation_space.spaces.items()},
            self.sim, self.cluster, self.queue_slots, self.running_slots,
        )
        self._bind_views()
        self._steps = 0
        self._invalid = 0
        self._legal_moves = 0  # legal starts and resizes now (set with the mask)
        self._needs_reset = True
        self._t_reset = 0.0  # the simulated clock at reset (max_sim_hours counts from it)
        self._wrapper_limit: int | None = None  # the step limit of a TimeLimit wrapper around it (set at reset)

    def _set_world(self, cluster: ClusterSpec | str, workload: Any, sim_options: dict[str, Any]) -> None:
        """The cluster, the simulator's configuration, and the workload: a fixed :class:`Workload`, or a
        generator bound to this env (:func:`bind_generator`)."""
        self.cluster = ClusterSpec.preset(cluster) if isinstance(cluster, str) else cluster
        if not isinstance(self.cluster, ClusterSpec):
            raise ConfigError(f"cluster must be a ClusterSpec or a preset name, got {cluster!r}")
        self.sim_config = SimConfig.from_dict(sim_options)
        if isinstance(workload, Workload):
            self._fixed_workload: Workload | None = workload
            self._generator = None
        else:
            self._fixed_workload = None
            self._generator = bind_generator(
                make_generator(workload), self.cluster, by_name=isinstance(workload, str),
                efficiency=self.sim_config.efficiency,
            )

    def _first_simulator(self, queue_slots: int | str, running_slots: int | str) -> None:
        """The windows and a simulator of the first workload (seed 0), which fixes the plan slots, hence the
        spaces."""
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

    def _make_spaces(self) -> None:
        """The action layout (``first_start``, ``first_resize``, ``first_preempt``), the action and observation
        spaces, and the shapes of the flat ``queue`` and ``running`` entries."""
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
        self.queue_shape = (q, len(QUEUE_FEATURES) + p)  # the flat "queue" entry reshapes to this
        if self.sim_config.interface == "universal":  # the same spaces on every cluster (observation.contract)
            self.running_shape = (r, len(UNIVERSAL_RUNNING_FEATURES) + p)
            self.gpus_shape = (UNIVERSAL_TYPES, len(GPU_FEATURES))  # the flat "gpus" entry reshapes to this
            self.plans_shape: tuple[int, int] | None = (p, len(PLAN_FEATURES))  # and "plans" to this
            entries = {
                "plans": box(p * len(PLAN_FEATURES)),
                "gpus": box(UNIVERSAL_TYPES * len(GPU_FEATURES)),
                "globals": box(len(UNIVERSAL_GLOBAL_FEATURES)),
            }
        else:
            self.running_shape = (r, len(RUNNING_FEATURES) + p)
            self.gpus_shape = (2 * t,)
            self.plans_shape = None
            entries = {"gpus": box(2 * t), "nodes": box(n), "globals": box(len(GLOBAL_FEATURES))}
        self.observation_space = spaces.Dict(
            {
                "queue": box(q * (len(QUEUE_FEATURES) + p)),
                "running": box(r * self.running_shape[1]),
                **entries,
                "action_mask": spaces.Box(0, 1, shape=(self.action_space.n,), dtype=np.int8),
            }
        )

    # views of the encoder's mask buffer: copies and pickles would make them separate arrays
    _VIEWS = ("_mask", "_mask_rows", "_mask_preempt")

    def _bind_views(self) -> None:
        """(Re)create the views of the observation's mask buffer that the mask is written through."""
        q, r, p = self.queue_slots, self.running_slots, self.num_plans
        self._mask = self._encoder.mask  # (A,) bool: the legal actions, in the observation's buffer
        self._mask_rows = self._mask[self.first_start : self.first_preempt].reshape(q + r, p)  # start, resize rows
        self._mask_preempt = self._mask[self.first_preempt :]  # (R,) or (0,): preempt each running slot

    def __getstate__(self) -> dict:
        # copies and pickles would turn the views into separate arrays: leave them out, rebuild them
        return {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        if "_step_budget" not in state:  # pickled before "auto" budgets (and perhaps the time budget)
            steps, hours = state.pop("max_steps", None), state.pop("max_sim_hours", None)
            state.update(_max_steps=steps, _max_sim_hours=hours, _step_budget=steps)
            state["_time_budget_s"] = None if hours is None else hours * 3600.0
            state.setdefault("_t_reset", 0.0)
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
        self._wrapper_limit = _time_limit_around(self)
        self._step_budget, self._time_budget_s = self._budgets()
        reward = self._settle()
        self._t_reset = self.sim.now
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
            ok = sim.start(int(self._encoder.visible_queue[k]), plan)
            assert ok, "a start the mask allowed was refused"  # masks and simulator must agree
        elif a >= self.first_preempt:
            ok = sim.preempt(int(self._encoder.visible_running[a - self.first_preempt]))
            assert ok, "a preemption the mask allowed was refused"
        else:
            r, plan = divmod(a - self.first_resize, p)
            ok = sim.resize(int(self._encoder.visible_running[r]), plan)
            assert ok, "a resize the mask allowed was refused"
        if legal:
            jct_reward += self._settle()
        self._steps += 1
        terminated = sim.done
        truncated = not terminated and (
            (self._step_budget is not None and self._steps >= self._step_budget)
            or (self._time_budget_s is not None and sim.now - self._t_reset >= self._time_budget_s)
        )
        # a TimeLimit wrapper (gym.make(..., max_episode_steps=N)) truncates after this step: report the cut
        limit = self._wrapper_limit
        wrapper_cut = limit is not None and not (terminated or truncated) and self._steps >= limit
        if truncated:
            self._mask[0] = True  # as at termination: the final mask always allows "wait"
        info = self._info({"jct": jct_reward, "invalid": invalid})
        if terminated or truncated:
            info["metrics"] = self.episode_metrics(truncated=truncated)
            self._needs_reset = True
        elif wrapper_cut:
            info["metrics"] = self.episode_metrics(truncated=True)
        return self._observe(), float(jct_reward + invalid), terminated, truncated, info

    @property
    def workload_generator(self) -> Any:
        """The generator this env draws each episode's workload from (``generate(seed)``, and ``history(seed)``
        where it has one: the jobs before an episode, which a history-trained predictor may learn from); None
        for a fixed workload. Read only: a policy may ask it for a history, never for the episode's own draw."""
        return self._generator

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
    @property
    def max_steps(self) -> int | str | None:
        """The step budget keyword (None, a number of decisions or ``"auto"``); setting it during an episode
        sets that episode's budget too (the PPO trainer sizes each episode's budget after its reset)."""
        return self._max_steps

    @max_steps.setter
    def max_steps(self, value: int | str | None) -> None:
        _check_budgets(value, None)
        self._max_steps = value
        if not self._needs_reset:
            self._step_budget, self._time_budget_s = self._budgets()

    @property
    def max_sim_hours(self) -> float | str | None:
        """The simulated-time budget keyword (None, hours or ``"auto"``); set, as :attr:`max_steps`."""
        return self._max_sim_hours

    @max_sim_hours.setter
    def max_sim_hours(self, value: float | str | None) -> None:
        _check_budgets(None, value)
        self._max_sim_hours = _hours(value)
        if not self._needs_reset:
            self._step_budget, self._time_budget_s = self._budgets()

    def _budgets(self) -> tuple[int | None, float | None]:
        """This episode's step budget and simulated-time budget in seconds (None: none), ``"auto"`` ones scaled
        to the episode's workload (:func:`auto_budgets`)."""
        steps, hours = self._max_steps, self._max_sim_hours
        if "auto" in (steps, hours):
            auto_steps, auto_hours = auto_budgets(self.sim)
            steps = auto_steps if steps == "auto" else steps
            hours = auto_hours if hours == "auto" else hours
        return steps, None if hours is None else float(hours) * 3600.0

    @property
    def budgets(self) -> dict[str, float | None]:
        """The current episode's budgets: ``max_steps`` (decisions) and ``max_sim_hours`` (simulated hours after
        ``reset``), ``"auto"`` ones resolved for its workload; None where there is none."""
        return {
            "max_steps": self._step_budget,
            "max_sim_hours": None if self._time_budget_s is None else self._time_budget_s / 3600.0,
        }

    def episode_metrics(self, truncated: bool = False) -> dict[str, float]:
        """The episode's metrics so far: the simulator's (:meth:`ClusterSimulator.metrics`), ``invalid_actions``
        and ``steps``. With ``truncated`` (the env sets it when a budget cuts the episode; a caller that stops
        playing before the end, a wall-clock limit say, passes it too) they also count what is unfinished:
        ``truncated`` 1.0, ``unfinished`` (jobs queued or running now), ``not_arrived`` (jobs not yet
        submitted), ``avg_time_in_system_h`` (mean over the jobs that arrived and were not rejected of their
        JCT if finished, else their time since submission: a lower bound on their average JCT; nan when none
        arrived) and ``truncated_at_h`` (now, in hours after the first submission); ``avg_jct_h`` and
        ``p95_jct_h`` then count every job not rejected: a finished one at its JCT, an unfinished one (queued,
        running or not arrived) at its time in the system so far (none if not arrived) plus ``truncated_at_h``,
        which no finished JCT exceeds, so a cut never scores below the finished jobs' average;
        ``avg_jct_finished_h`` and ``p95_jct_finished_h`` are over the finished jobs alone. Without ``truncated``
        (an episode that ends) ``avg_jct_h`` and ``p95_jct_h`` are over the finished jobs, then every job not
        rejected."""
        m = self.sim.metrics()
        m["invalid_actions"] = float(self._invalid)
        m["steps"] = float(self._steps)
        if truncated:
            m.update(self._unfinished_metrics())
        return m

    def _unfinished_metrics(self) -> dict[str, float]:
        """The metrics of a cut episode (:meth:`episode_metrics` with ``truncated``)."""
        sim = self.sim
        status, submit = sim.status, np.asarray(sim.submit, dtype=np.float64)
        inside = (status == QUEUED) | (status == RUNNING)
        future = status == FUTURE
        done = np.flatnonzero(status == DONE)
        finish = np.array([sim.records[j].finish_time for j in done], dtype=np.float64)
        jct = finish - submit[done]
        so_far = sim.now - submit[inside]
        seconds = float(jct.sum() + so_far.sum())
        counted = int(done.size + inside.sum())
        elapsed = sim.now - float(submit[0])
        # every job not rejected: a finished one at its JCT, an unfinished one (queued, running or not arrived)
        # at its time in the system so far plus the episode's length at the cut, which no finished JCT exceeds
        charged = np.concatenate([jct, so_far + elapsed, np.full(int(future.sum()), elapsed)])
        return {
            "avg_jct_h": float(charged.mean()) / 3600.0 if charged.size else math.nan,
            "p95_jct_h": float(np.percentile(charged, 95)) / 3600.0 if charged.size else math.nan,
            "avg_jct_finished_h": float(jct.mean()) / 3600.0 if jct.size else math.nan,
            "p95_jct_finished_h": float(np.percentile(jct, 95)) / 3600.0 if jct.size else math.nan,
            "truncated": 1.0,
            "unfinished": float(inside.sum()),
            "not_arrived": float(future.sum()),
            "avg_time_in_system_h": seconds / counted / 3600.0 if counted else math.nan,
            "truncated_at_h": elapsed / 3600.0,
        }

    @property
    def visible_queue(self) -> np.ndarray:
        """Job indices shown in the queue slots (arrival order)."""
        return self._encoder.visible_queue

    @property
    def visible_running(self) -> np.ndarray:
        """Job indices shown in the running slots (start order)."""
        return self._encoder.visible_running

    def start_action(self, job: int, plan: int) -> int | None:
        """The action index that starts ``job`` on ``plan``, or None if the job is not in a queue slot."""
        hits = np.flatnonzero(self._encoder.visible_queue == job)
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
        hits = np.flatnonzero(self._encoder.visible_running == job)
        return int(hits[0]) if hits.size else None

    def start_rows(self, mask: np.ndarray) -> np.ndarray:
        """(visible queued jobs, P) view of ``mask``'s start actions: row k is queue slot k's plans."""
        nq = len(self._encoder.visible_queue)
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
        enc = self._encoder
        enc.update_visible()
        rv = enc.visible_running
        if len(rv) and sim.resize_ready(rv).any():
            return False  # a running job past its start-up (and its cooldown) may be resizable
        qv = enc.visible_queue
        return not (len(qv) and np.count_nonzero(sim.start_mask(qv)))

    def _observe(self) -> dict[str, np.ndarray]:
        """The observation now (fresh arrays), from the encoder."""
        return self._encoder.observe()

    def _invalidate_views(self) -> None:
        """Forget every view cached on the simulator's state (a new or reset simulator)."""
        self._encoder.bind(self.sim)

    def _compute_mask(self) -> None:
        """The mask of the actions legal now, written into ``_mask``."""
        sim = self.sim
        enc = self._encoder
        enc.update_visible()
        pending = sim.has_pending_events()
        self._mask[0] = sim.done or pending  # at the end, "wait": never an empty mask
        # timed waits while something is pending: with nothing pending only starts can move the episode on
        self._mask[1 : self.first_start] = pending and not sim.done
        rows = self._mask_rows
        self._legal_moves = sim.legal_masks(enc.visible_queue, enc.visible_running, self.queue_slots, rows)
        if self.preemption:  # a running job that time allows to resize (resize_ready) may be preempted
            stop = self._mask_preempt
            stop[:] = False
            rv = enc.visible_running
            if len(rv) and not sim.done:
                stop[: len(rv)] = sim.resize_ready(rv)
                self._legal_moves += int(np.count_nonzero(stop))

    def _info(self, components: dict[str, float]) -> dict[str, Any]:
        sim = self.sim
        return {
            "time": sim.now,
            "action_mask": self._encoder.mask8.copy(),  # int8, the bool mask's buffer
            "reward_components": components,
            "invalid_actions": self._invalid,
            "queue_length": len(sim.queue),
            "running": len(sim.running),
            "finished": sim.finished,
            "rejected": sim.rejected,
            "ooms": sim.oom_failures,
        }


#: FrenzyEnv's own keywords; with the simulator's (``_SIM_KEYS``) every keyword it takes, which an unknown
#: keyword's error lists
_ENV_KEYS = tuple(n for n in inspect.signature(FrenzyEnv.__init__).parameters if n not in ("self", "sim_options"))


#: ``max_steps="auto"``: an episode of ``n`` jobs has ``AUTO_STEPS_PER_JOB * n`` decisions plus one per
#: ``AUTO_ROUND_S`` seconds of its ``"auto"`` simulated-time budget. The second term lets a round-based policy wait
#: once a round (Sia's and Pollux's 60 s) for as long as the time budget runs: under env v6's pacing
#: (``one_action_per_instant``, a 60 s ``resize_cooldown``) the Sia planner takes about 40 decisions per job on
#: HeteroClusterSmall and more than 60 on the default week, most of them its rounds' waits; fifo about 3, a
#: masked-random policy about 470 on HeteroClusterSmall (``scripts/budget_probe.py`` measures them).
AUTO_STEPS_PER_JOB = 100
AUTO_ROUND_S = 60.0
#: ``max_sim_hours="auto"``: the simulated-time budget is ``AUTO_TIME_FACTOR`` times the arrival window plus every
#: job's run time on its fastest plan one after the other, and at least an hour.
AUTO_TIME_FACTOR = 2.0


def auto_budgets(sim: Any) -> tuple[int, float]:
    """The ``"auto"`` budgets of an episode on simulator ``sim``: (decisions, simulated hours).

    Simulated hours: ``H = max(1, AUTO_TIME_FACTOR * (W + sum_j f_j) / 3600)`` with ``W`` the span of the
    submissions and ``f_j`` job ``j``'s run time in seconds on the fastest plan the predictor offers it (its work
    times that plan's iteration time on a consolidated placement; a job with no such plan is rejected at arrival
    and counts nothing), so a run that does no worse than one job at a time on its fastest plan after the last
    arrival ends well inside it. Decisions: ``AUTO_STEPS_PER_JOB * n + ceil(3600 H / AUTO_ROUND_S)`` for ``n``
    jobs.
    """
    work = np.asarray(sim.work, dtype=np.float64)
    run = np.where(sim.pred_ok, np.asarray(sim.iter_time, dtype=np.float64), np.inf) * work[:, None]
    fastest = run.min(axis=1) if run.size else np.zeros(0)
    fastest = fastest[np.isfinite(fastest)]
    submit = np.asarray(sim.submit, dtype=np.float64)
    window = float(submit.max() - submit.min()) if submit.size else 0.0
    hours = max(1.0, AUTO_TIME_FACTOR * (window + float(fastest.sum())) / 3600.0)
    return AUTO_STEPS_PER_JOB * len(work) + math.ceil(hours * 3600.0 / AUTO_ROUND_S), hours


def _check_settings(
    preemption: Any, queue_slots: Any, running_slots: Any, reward_scale: Any, max_steps: Any, max_sim_hours: Any,
    render_mode: Any, render_modes: list[str],
) -> None:
    """:class:`ConfigError` naming the first of these :class:`FrenzyEnv` arguments that is out of its range."""
    if not isinstance(preemption, (bool, np.bool_)):
        raise ConfigError(f"preemption must be True or False, got {preemption!r}")
    for name, value in (("queue_slots", queue_slots), ("running_slots", running_slots)):
        if value != "all" and (not isinstance(value, (int, np.integer)) or value < 1):
            raise ConfigError(f"{name} must be a positive integer or 'all', got {value!r}")
    if not (isinstance(reward_scale, (int, float)) and reward_scale > 0):
        raise ConfigError(f"reward_scale must be > 0, got {reward_scale!r}")
    _check_budgets(max_steps, max_sim_hours)
    if render_mode is not None and render_mode not in render_modes:
        raise ConfigError(f"render_mode must be one of {render_modes}, got {render_mode!r}")


def _hours(value: Any) -> float | str | None:
    """A checked ``max_sim_hours`` as the env keeps it: None, ``"auto"`` or a float."""
    return value if value is None or isinstance(value, str) else float(value)


def _check_budgets(max_steps: Any, max_sim_hours: Any) -> None:
    """:class:`ConfigError` naming ``max_steps`` or ``max_sim_hours`` if out of range (None passes)."""
    if max_steps not in (None, "auto") and (
        isinstance(max_steps, (bool, np.bool_)) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1
    ):
        raise ConfigError(f"max_steps must be a positive integer, 'auto' or None, got {max_steps!r}")
    if max_sim_hours not in (None, "auto") and (
        isinstance(max_sim_hours, (bool, np.bool_)) or not isinstance(max_sim_hours, (int, float, np.number))
        or not (math.isfinite(max_sim_hours) and max_sim_hours > 0)
    ):
        raise ConfigError(
            f"max_sim_hours must be a positive finite number of hours, 'auto' or None, got {max_sim_hours!r}"
        )


def _check_wait_options(options: Any) -> tuple[float, ...]:
    """The timed waits in seconds: a sequence of finite positive numbers, ascending (may be empty)."""
    try:
        values = tuple(float(x) for x in options)
    except (TypeError, ValueError):
        raise ConfigError(f"wait_options must be a sequence of seconds, got {options!r}") from None
    if any(not (math.isfinite(x) and x > 0) for x in values) or list(values) != sorted(set(values)):
        raise ConfigError(f"wait_options must be distinct finite positive seconds in ascending order, got {options!r}")
    return values


def _time_limit_around(env: gym.Env) -> int | None:
    """The step limit of a Gymnasium ``TimeLimit`` wrapped around ``env`` that is resetting it (``gym.make(...,
    max_episode_steps=N)``: Gymnasium gives the limit to the wrapper alone, not to ``env.spec``), found among the
    callers of ``env.reset``; else the limit of ``env.spec``, else None."""
    frame = inspect.currentframe()
    for _ in range(32):
        if frame is None:
            break
        caller = frame.f_locals.get("self")
        if isinstance(caller, gym.wrappers.TimeLimit) and caller.unwrapped is env:
            return int(caller._max_episode_steps)
        frame = frame.f_back
    spec = env.spec
    return None if spec is None or spec.max_episode_steps is None else int(spec.max_episode_steps)


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


def bind_generator(gen: Any, cluster: ClusterSpec, by_name: bool, efficiency: str | None = None) -> Any:
    """A generator follows the env's speed model (``efficiency``, under which synthetic durations are drawn and
    offered loads computed, so that they hold in the simulator), whoever made it; a preset named by string also
    follows the env's cluster (load, reference GPU type)."""
    if not dataclasses.is_dataclass(gen):
        return gen
    names = {f.name for f in dataclasses.fields(gen)}
    changes: dict[str, Any] = {}
    if "efficiency" in names and efficiency is not None and gen.efficiency != efficiency:
        changes["efficiency"] = efficiency
    if not by_name:
        return dataclasses.replace(gen, **changes) if changes else gen
    if "cluster" in names:
        changes["cluster"] = cluster
    if "reference_gpu_type" in names:
        changes["reference_gpu_type"] = cluster.reference_gpu_type
        if "gpus_per_node" in names:
            changes["gpus_per_node"] = cluster.max_gpus_per_node(cluster.reference_gpu_type)
    return dataclasses.replace(gen, **changes) if changes else gen


__all__ = ["FrenzyEnv", "QUEUED", "RUNNING"]
