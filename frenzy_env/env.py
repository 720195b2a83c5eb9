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

from frenzy_env.cluster import ClusterSpec
from frenzy_env.errors import ConfigError, check_keys
from frenzy_env.simulator import QUEUED, RUNNING, ClusterSimulator, SimConfig
from frenzy_env.workload import Workload, make_generator

_SIM_KEYS = tuple(SimConfig.__dataclass_fields__)
_LOG_T = 16.0  # log1p(seconds) scale: log1p(1e7 s) ~ 16
QUEUE_FEATURES = ("present", "wait", "best_time", "params", "batch", "seq_len", "requested_gpus")
RUNNING_FEATURES = ("present", "elapsed", "remaining_time", "num_gpus", "gpu_type", "restarts", "progress")
GLOBAL_FEATURES = ("queue_length", "running", "backlog", "arrived", "next_arrival", "busy")


class FrenzyEnv(gym.Env):
    """A heterogeneous GPU cluster on which LLM training jobs arrive; the agent decides GPU type, count
    and parallel layout (via MARP) of each job, and when to resize running jobs.

    ## Description
    Jobs arrive over time as a model and a training configuration (global batch, sequence length,
    iterations), never as a GPU request. The agent starts queued jobs on *plan slots* -- a (GPU type,
    GPU count) pair, count in 1, 2, 4, ... -- and the configured memory predictor (MARP) picks the fastest
    data/tensor-parallel layout it believes fits. A plan that truly does not fit fails with out-of-memory
    after a short start-up, and the job returns to the queue. Running jobs can be resized (checkpoint,
    restart on another plan, paying a restart overhead). Time advances only on "wait".

    ## Action Space
    ``Discrete(1 + Q*P + R*P)``, with Q queue slots, R running slots, P plan slots:
    ``0`` wait (advance to the next event); ``1 + k*P + p`` start the k-th queued job (arrival order)
    on plan p; ``1 + Q*P + r*P + p`` resize the r-th running job (start order) to plan p.
    ``action_masks()`` gives exactly the legal actions: the plan is memory-feasible under the predictor,
    has not crashed for that job before, and is placeable on currently free GPUs; resizing to the current
    plan is masked. An illegal action is a no-op with a penalty (``info["invalid_actions"]`` counts them).
    When nothing but "wait" is legal the environment advances by itself, so no step is wasted.

    ## Observation Space
    A one-level ``Dict`` of flat float32 ``Box`` es (values in [0, 2]) plus the int8 mask; ``queue`` and
    ``running`` are flattened row-major from ``env.queue_shape`` and ``env.running_shape``:
    ``queue`` (Q, 7 + P): present, wait, best predicted run time, model size, batch, sequence length,
    requested GPUs, then predicted run time on each plan slot (0 when not available);
    ``running`` (R, 7 + P): present, elapsed, predicted remaining time, GPUs, GPU type, restarts, progress,
    then predicted remaining time on each plan slot; ``gpus`` (2T,): free fraction and capacity share of
    each GPU type; ``nodes`` (N,): free fraction of each node; ``globals`` (6,): queue length, running
    jobs, backlog beyond the window, fraction arrived, time to next arrival, busy fraction;
    ``action_mask`` (A,) int8. Times are ``log1p(seconds)/16``.

    ## Rewards
    ``-(jobs in the system) * (elapsed seconds) / reward_scale`` per step, so the return is minus the total
    job completion time (in units of ``reward_scale``, default one hour) up to rejected jobs; minus
    ``invalid_action_penalty`` for an illegal action. ``info["reward_components"]`` has both parts.

    ## Starting State
    The first job has arrived; the cluster is empty. ``reset(seed=...)`` draws the workload from its
    generator with that seed (synthetic jobs, or the model assignment of trace jobs).

    ## Episode End
    ``terminated`` when every job has finished or been rejected; ``truncated`` after ``max_steps`` steps
    (if set). The final ``info["metrics"]`` holds the episode metrics.

    ## Arguments
    ``cluster`` (ClusterSpec or preset name), ``workload`` (Workload, generator with ``generate(seed)``, or
    preset name), ``predictor`` ("frenzy" | "extended" | "oracle"), ``queue_slots`` (32),
    ``running_slots`` (16), ``reward_scale`` (3600.0), ``invalid_action_penalty`` (0.1), ``max_steps``
    (None), ``render_mode`` ("ansi" | "rgb_array"), and any :class:`SimConfig` field (``startup_time``,
    ``restart_overhead``, ``oom_delay``, ``max_plan_gpus``, ``placement``, ``work_info``, ``work_noise``,
    ``utilisation``). Unknown keywords raise :class:`ConfigError`.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        cluster: ClusterSpec | str = "frenzy-testbed",
        workload: Any = "itp-default",
        *,
        queue_slots: int = 32,
        running_slots: int = 16,
        reward_scale: float = 3600.0,
        invalid_action_penalty: float = 0.1,
        max_steps: int | None = None,
        render_mode: str | None = None,
        **sim_options: Any,
    ) -> None:
        check_keys("FrenzyEnv", sim_options, _SIM_KEYS)
        for name, value in (("queue_slots", queue_slots), ("running_slots", running_slots)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
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
        self.queue_slots = int(queue_slots)
        self.running_slots = int(running_slots)
        self.reward_scale = float(reward_scale)
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.max_steps = max_steps
        self.render_mode = render_mode

        # A simulator for the first workload fixes the plan slots, hence the spaces.
        first = self._fixed_workload or self._generator.generate(0)
        self.sim = ClusterSimulator(self.cluster, first, self.sim_config, seed=0)
        self._sim_seed: int | None = 0
        q, r, p = self.queue_slots, self.running_slots, self.sim.num_plans
        t, n = self.sim.num_types, self.cluster.num_nodes
        self.num_plans = p
        self.action_space = spaces.Discrete(1 + q * p + r * p)
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
        self._obs = {k: np.zeros(s.shape, dtype=s.dtype) for k, s in self.observation_space.spaces.items()}
        self._obs["queue"] = np.zeros(self.queue_shape, dtype=np.float32)
        self._obs["running"] = np.zeros(self.running_shape, dtype=np.float32)
        self._mask = np.zeros(self.action_space.n, dtype=bool)
        self._visible_queue = np.zeros(0, dtype=np.int64)
        self._visible_running = np.zeros(0, dtype=np.int64)
        self._steps = 0
        self._invalid = 0
        self._needs_reset = True

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        wl_seed = int(self.np_random.integers(2**31 - 1)) if seed is None else int(seed)
        if self._generator is not None:
            workload = self._generator.generate(wl_seed)
            self.sim = ClusterSimulator(self.cluster, workload, self.sim_config, seed=wl_seed)
            if self.sim.num_plans != self.num_plans:
                raise ConfigError("the workload generator changed the number of plan slots between resets")
        elif self._sim_seed != wl_seed:
            self.sim = ClusterSimulator(self.cluster, self._fixed_workload, self.sim_config, seed=wl_seed)
        else:
            self.sim.reset_state()
        self._sim_seed = None if self._generator is not None else wl_seed
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
        a = int(action)
        q, p = self.queue_slots, self.num_plans
        legal = 0 <= a < self._mask.size and bool(self._mask[a])
        jct_reward = 0.0
        invalid = 0.0
        if not legal:
            self._invalid += 1
            invalid = -self.invalid_action_penalty
        elif a == 0:
            n = sim.jobs_in_system
            jct_reward -= n * sim.advance() / self.reward_scale
        elif a <= q * p:
            k, plan = divmod(a - 1, p)
            ok = sim.start(int(self._visible_queue[k]), plan)
            assert ok, "a start the mask allowed was refused"  # masks and simulator must agree
        else:
            r, plan = divmod(a - 1 - q * p, p)
            ok = sim.resize(int(self._visible_running[r]), plan)
            assert ok, "a resize the mask allowed was refused"
        if legal:
            jct_reward += self._settle()
        self._steps += 1
        terminated = sim.done
        truncated = bool(self.max_steps is not None and self._steps >= self.max_steps and not terminated)
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
        return None if hits.size == 0 else 1 + int(hits[0]) * self.num_plans + int(plan)

    def resize_action(self, job: int, plan: int) -> int | None:
        """The action index that resizes running ``job`` to ``plan``, or None if not in a running slot."""
        hits = np.flatnonzero(self._visible_running == job)
        if hits.size == 0:
            return None
        return 1 + self.queue_slots * self.num_plans + int(hits[0]) * self.num_plans + int(plan)

    # ------------------------------------------------------------------ internals
    def _settle(self) -> float:
        """Recompute the mask; while only "wait" is legal, advance time. Returns the JCT reward accrued."""
        sim = self.sim
        reward = 0.0
        self._compute_mask()
        while not sim.done and not self._mask[1:].any() and sim.has_pending_events():
            n = sim.jobs_in_system
            reward -= n * sim.advance() / self.reward_scale
            self._compute_mask()
        return reward

    def _compute_mask(self) -> None:
        sim = self.sim
        q, r, p = self.queue_slots, self.running_slots, self.num_plans
        self._visible_queue = np.fromiter(itertools.islice(sim.queue, q), dtype=np.int64)
        self._visible_running = np.fromiter(itertools.islice(sim.running, r), dtype=np.int64)
        mask = self._mask
        mask[:] = False
        mask[0] = sim.has_pending_events()
        nq, nr = len(self._visible_queue), len(self._visible_running)
        if nq:
            mask[1 : 1 + nq * p] = sim.start_mask(self._visible_queue).ravel()
        if nr:
            lo = 1 + q * p
            mask[lo : lo + nr * p] = sim.resize_mask(self._visible_running).ravel()

    def _plan_times(self, jobs: np.ndarray, remaining: np.ndarray) -> np.ndarray:
        """(len(jobs), P): log-scaled predicted seconds to finish on each available plan (0 if none)."""
        times = remaining[:, None] * self.sim.iter_time[jobs]
        out = np.log1p(np.minimum(times, 1e12)) / _LOG_T
        out[~self.sim.available_plans(jobs)] = 0.0
        return out

    def _observe(self) -> dict[str, np.ndarray]:
        sim = self.sim
        obs = self._obs
        now = sim.now
        nf = len(QUEUE_FEATURES)
        qv = self._visible_queue
        queue = obs["queue"]
        queue[:] = 0.0
        if len(qv):
            rem = np.array([sim.remaining_work(int(j)) for j in qv])
            plan_t = self._plan_times(qv, rem)
            avail = sim.available_plans(qv)
            best = np.where(avail, rem[:, None] * sim.iter_time[qv], np.inf).min(axis=1)
            rows = queue[: len(qv)]
            rows[:, 0] = 1.0
            rows[:, 1] = np.log1p(np.maximum(0.0, now - sim.submit[qv])) / _LOG_T
            rows[:, 2] = np.log1p(np.minimum(best, 1e12)) / _LOG_T
            rows[:, 3:7] = self._static_features[qv]
            rows[:, nf:] = plan_t
        rv = self._visible_running
        running = obs["running"]
        running[:] = 0.0
        if len(rv):
            rem = np.array([sim.remaining_work(int(j)) for j in rv])
            runs = [sim.running[int(j)] for j in rv]
            cur = np.array([x.plan for x in runs])
            rows = running[: len(rv)]
            rows[:, 0] = 1.0
            rows[:, 1] = np.log1p([max(0.0, now - sim.records[int(j)].start_time) for j in rv]) / _LOG_T
            rows[:, 2] = np.log1p(np.minimum(rem * sim.iter_time[rv, cur], 1e12)) / _LOG_T
            rows[:, 3] = np.log2(sim.plan_count[cur] + 1) / 8.0
            rows[:, 4] = sim.plan_type[cur] / max(1, sim.num_types - 1)
            rows[:, 5] = np.minimum([sim.records[int(j)].restarts / 10.0 for j in rv], 2.0)
            rows[:, 6] = 1.0 - rem / np.maximum(sim.work_estimate[rv], 1e-9)
            rows[:, nf:] = self._plan_times(rv, rem)
        free_t = sim.state.free_by_type()
        cap_t = self.cluster.type_capacity
        t = sim.num_types
        obs["gpus"][:t] = free_t / cap_t
        obs["gpus"][t:] = cap_t / cap_t.sum()
        obs["nodes"][:] = sim.state.free / self.cluster.node_capacity
        g = obs["globals"]
        g[0] = math.log1p(len(sim.queue)) / 10.0
        g[1] = min(len(sim.running) / self.running_slots, 2.0)
        g[2] = math.log1p(max(0, len(sim.queue) - self.queue_slots)) / 10.0
        g[3] = sim._next_arrival / sim.num_jobs
        nxt = sim.submit[sim._next_arrival] - now if sim._next_arrival < sim.num_jobs else 0.0
        g[4] = math.log1p(max(0.0, nxt)) / _LOG_T
        g[5] = sim.busy_gpus / self.cluster.num_gpus
        for key in ("queue", "running", "globals"):
            np.clip(obs[key], 0.0, 2.0, out=obs[key])
        obs["action_mask"][:] = self._mask
        return {k: v.reshape(-1).copy() for k, v in obs.items()}

    @property
    def _static_features(self) -> np.ndarray:
        """(J, 4) per-job features that never change: params, batch, seq_len, requested GPUs."""
        sim = self.sim
        cached = getattr(sim, "_env_static_features", None)
        if cached is None:
            cached = np.array(
                [
                    [
                        math.log10(max(j.model.num_params, 1)) / 12.0,
                        math.log2(max(j.batch_size, 1)) / 12.0,
                        math.log2(max(j.seq_len, 1)) / 16.0,
                        math.log2((j.requested_gpus or 0) + 1) / 8.0,
                    ]
                    for j in sim.jobs
                ],
                dtype=np.float32,
            )
            sim._env_static_features = cached
        return cached

    def _info(self, components: dict[str, float]) -> dict[str, Any]:
        sim = self.sim
        return {
            "time": sim.now,
            "action_mask": self._mask.astype(np.int8),
            "reward_components": components,
            "invalid_actions": self._invalid,
            "queue_length": len(sim.queue),
            "running": len(sim.running),
            "finished": sim.finished,
            "rejected": sim.rejected,
            "ooms": sim.oom_failures,
        }


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


ENV_PRESETS: tuple[EnvPreset, ...] = (
    EnvPreset("frenzy/HeteroCluster-v0", "frenzy-testbed", "itp-default"),
    EnvPreset("frenzy/HeteroClusterSynthetic-v0", "frenzy-testbed", "synthetic"),
    EnvPreset("frenzy/HeteroClusterSmall-v0", "frenzy-testbed", "synthetic-small"),
    EnvPreset("frenzy/Doubling64-v0", "doubling-64", "synthetic"),
    EnvPreset("frenzy/PAI2020-v0", "pai-2020", "synthetic"),
    EnvPreset("frenzy/Large1024-v0", "large-1024", "synthetic"),
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
