"""The simulator's vocabulary: its settings (:class:`SimConfig`), the job statuses and the per-job record of what
happened (:class:`JobRecord`, one row of the per-job table; :class:`AttemptRecord`, one allocation of GPUs to
a job)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from frenzy_env.errors import ConfigError, check_keys
from frenzy_env.observation.contract import INTERFACES, UNIVERSAL_MAX_GPUS, UNIVERSAL_PLANS, UNIVERSAL_TYPES
from frenzy_env.world.efficiency import DEFAULT_EFFICIENCY, check_efficiency
from frenzy_env.world.throughput import DEFAULT_UTILISATION

FUTURE, QUEUED, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4
#: bytes of model states per parameter a checkpoint holds: fp32 master weights + Adam's two moments (ZeRO,
#: Rajbhandari et al. SC'20, K = 12; Gemini, SOSP'23: 42 min at 20 Gbit/s for MT-NLG's 530e9 parameters)
CHECKPOINT_BYTES_PER_PARAM = 12.0
PREDICTORS = ("frenzy", "extended", "oracle")
#: SimConfig.memory_truth (frenzy_env.world.memory.truth; "published": frenzy_env.world.memory.published_truth)
MEMORY_TRUTHS = ("estimate", "residual", "published")
WORK_INFO = ("exact", "noisy", "none")
LAYOUTS = ("predictor", "no_accumulation")  # SimConfig.layouts: which layout a (GPU type, count) plan slot runs
#: SimConfig.stop_mode: how a preemption (and a resize) stops a running job
STOP_MODES = ("v5", "save_first", "kill")
#: the recommended SimConfig.checkpoint_interval, seconds: Check-N-Run's default interval (Eisenman et al.,
#: NSDI'22: "a default checkpoint interval of 30 minutes" for Meta's production training)
RECOMMENDED_CHECKPOINT_INTERVAL = 1800.0


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings (all times in seconds).

    Attributes
    ----------
    predictor: memory predictor behind ``pred_ok`` (what policies see): "frenzy" (the paper's formula),
        "extended" (our calibrated estimator) or "oracle" (the ground truth itself).
    memory_truth: the simulator's true peak memory of a job, which decides out-of-memory: "estimate" (env
        v4's) -- the "extended" estimate itself, so the "extended" predictor never fails;
        "residual" (env v5's) -- the extended estimate times a per-job factor drawn,
        from the episode seed and the job id, from the estimator's leave-one-source-out residuals on published
        measurements (:mod:`frenzy_env.world.memory.truth`), so "oracle" (which predicts the truth, factor
        included) never fails and "extended" sometimes does; "published" (the default, env v6's) -- no predictor's
        estimate: the CUDA context plus the layout's structural peak (model states, activations, working set, logits)
        times a per-job factor drawn, from the seed and the job id, from what 27 published runs of six frameworks
        (DeepSpeed included) measured over their own structural peaks, with the caching allocator's
        fragmentation drawn (0 to 30%, GMLake) where the measurement left it out
        (:mod:`frenzy_env.world.memory.published_truth`): "frenzy" and "extended" are each wrong in both
        directions, "extended" by up to half under.
    memory_margin: fraction of each GPU's memory the masks keep free: a plan is predicted to fit when the
        predictor's estimate is at most ``(1 - memory_margin)`` x the GPU's memory (the oracle's "estimate"
        is the truth). In [0, 1); 0 (the default): none. It changes what policies may
        start, never what truly fits.
    startup_time: fixed part of a start, seconds: process launch, framework import, NCCL communicator set-up.
    restart_overhead: fixed extra seconds a resize costs on top of a start (stopping the workers).
    checkpoint_bandwidth: bytes/s per node at which a resized job writes its checkpoint (``math.inf``: free).
    load_bandwidth: bytes/s per node at which a starting job loads (or builds) its model states
        (``math.inf``: free).
    oom_delay: seconds after a start at which a plan that does not fit fails with out-of-memory and releases
        its GPUs; ``None`` (the default): the cost model below. A number overrides it (env v0-v1's flat 30 s:
        ``oom_delay=30``).
    teardown_time: seconds from an out-of-memory error to the GPUs being free again (process exit, CUDA
        context and NCCL communicator destruction, the scheduler noticing the failed container).

    Start-up, restart and OOM cost model (seconds; computed once per job configuration and plan, with ``S`` =
    :data:`CHECKPOINT_BYTES_PER_PARAM` x the model's parameters and ``n`` = the nodes the plan spans when
    consolidated)::

        start   = startup_time + S / (load_bandwidth * n)                     (start to first iteration)
        resize  = restart_overhead + S / (checkpoint_bandwidth * n_old) + start(new plan)
        OOM     = start (or resize) + first_step + teardown_time              (GPUs held by a failed attempt)

    Each node writes / reads its shard of the states in parallel. A plan that does not fit runs until its
    first step's backward pass (Frenzy/MARP: the peak is model states + one step's activations):
    ``first_step`` = the plan's modelled iteration time (:mod:`frenzy_env.world.throughput`). Sources:

    * ``startup_time`` = 30 s: killing and restarting the workers of a PyTorch elastic job "typically takes
      30 secs or even more" (pytorch/elastic issue #99); of it NCCL initialisation and the first barrier
      take 9-18 s on one 8xH100 node (NVIDIA/nccl issue #534, NCCL 2.22 / 2.19). MegaScale (Jiang et al.,
      NSDI'24) measured 1047 s of communicator initialisation for 2048 GPUs before its fix (under 5 s
      after): this project's jobs (<= 64 GPUs) stay in the tens of seconds. Pollux's simulator charges the
      same 30 s for every reallocation, its GPUs held meanwhile (``rescale_time = 30`` in ``Job.reallocate``,
      petuum/adaptdl ``simulator/simulator.py``), with no size term: for the models here the size term adds
      6 s (1.3B, one node) to 42 s (70B, 8 nodes). These are the low end of what elastic systems report (tens
      of seconds to minutes: Sia, ElasticFlow, Varuna and Oobleck, whose figures are not checked here), so
      ``docs/world.md`` gives the policies' JCT and restarts at 5x these costs beside 1x.
    * ``restart_overhead`` = 10 s: Capes et al. (arXiv 1908.08082) measured about 10 s to stop a
      ring-allreduce job on top of its start.
    * ``checkpoint_bandwidth`` = ``load_bandwidth`` = 2.5e9 B/s (20 Gbit/s) per node: Gemini (Wang et al.,
      SOSP'23) takes 20 Gbit/s to remote persistent storage ("it takes 42 minutes to checkpoint the model
      states of MT-NLG ... when the bandwidth is 20Gbps"). ASSUMPTION: each node reaches it (sharded
      checkpoints, e.g. torch.distributed.checkpoint); Gemini observed a fixed aggregate on its shared
      store, so for multi-node jobs this is the optimistic case. Reading at the writing bandwidth is an
      ASSUMPTION too, as is a fresh job paying the load (it materialises the same states, or loads
      pre-trained ones).
    * 12 bytes per parameter: fp32 master weights + Adam's two moments (ZeRO, Rajbhandari et al. SC'20,
      K = 12); Gemini's figure gives the same (42 min x 20 Gbit/s / 530e9 parameters = 11.9 B).
    * ``teardown_time`` = 10 s: an ASSUMPTION of the same order as the stop overhead above (no checkpoint
      is written after an OOM), not a measurement.

    Example (defaults, consolidated plans): a 1.3B model (12 x 1.3e9 = 15.6 GB) starts in 30 + 6.24 s on
    one node; a 70B model (840 GB) on 8 nodes in 30 + 42 s, and resizing it from 8 nodes costs another
    10 + 42 s. The flat model of env v2 (30 s start, +10 s resize) is ``checkpoint_bandwidth=math.inf,
    load_bandwidth=math.inf``. The GPU time of every failed attempt is in the ``lost_gpu_hours`` metric;
    the start-up and restart time of the others in ``overhead_gpu_hours``.
    max_plan_gpus: largest GPU count of a plan slot (powers of two up to it).
    interface: the layout of the plan slots, hence of the environment's spaces: "cluster" (env v5's) -- the
        cluster's own GPU types x the powers of two up to ``min(max_plan_gpus, the largest type's GPUs)``
        (frenzy-testbed: 3 x 6 = 18 slots); "universal" (the default, env v6's) -- one fixed grid for every cluster of
        at most ``UNIVERSAL_TYPES`` (4) GPU types: type slots in the cluster's canonical order (memory, then speed; the
        rest absent) x the counts 1, 2, ..., ``UNIVERSAL_MAX_GPUS`` (64), ``UNIVERSAL_PLANS`` (28) slots
        (:mod:`frenzy_env.observation.contract`). Slot ``t * 7 + k`` is type t with 2**k GPUs; a slot whose type
        the cluster lacks or whose count exceeds the cluster layout's largest is *absent*: GPU count 0, never
        feasible (``pred_ok`` False), so never legal, placed, started or counted. The slots the two layouts
        share have the same tables, so the dynamics and every policy's decisions are the same under both; only
        the slot indices differ. "universal" refuses a cluster of more types and ``max_plan_gpus`` above 64
        (:class:`ConfigError`).
    placement: "best_fit" (Frenzy's HAS) or "spread" (locality-aware, largest free nodes first).
    work_info: what schedulers know of a job's work: "exact" (the configured iterations; the default, since
        a training configuration states them), "noisy" (multiplied by a per-job log-normal factor with
        sigma ``work_noise``), "none" (nothing; estimates are the workload's median).
    work_noise: sigma of the log-normal error for ``work_info="noisy"``.
    utilisation: fraction of peak FLOP/s that dense compute reaches (see :mod:`frenzy_env.world.throughput`).
    efficiency: how per-GPU efficiency depends on the micro-batch: "flat" (env v4's: ``utilisation``
        at every micro-batch, gradient accumulation free), "microbatch" (env v5's):
        efficiency rises with the micro-batch's tokens on a curve fitted to published measurements, equal to
        ``utilisation`` at 16384 tokens, and each extra accumulation step costs its micro-batch's time plus
        2 ms (:mod:`frenzy_env.world.efficiency`), or "per_type" (the default, env v6's): the same with a curve and a
        level per GPU type (``utilisation`` x the type's level at 16384 tokens; the A100-80GB's is "microbatch"'s;
        fitted to published measurements where a type has them, a rule on the datasheet's peak over memory bandwidth
        where not: :mod:`frenzy_env.world.efficiency`). Trace work is derived under the same option, so
        recorded durations hold at the recorded GPU count on the reference type.
    layouts: which (dp, tp, pp, micro-batch) layout a plan slot (GPU type, GPU count) runs: "predictor" (env
        v4's) -- the fastest legal layout the predictor admits, pipelines and gradient
        accumulation included; "no_accumulation" (the default since env v5) -- the fastest layout
        without pipeline stages or accumulation (``pp == 1``, micro-batch = the per-replica batch
        ``ceil(batch / dp)``: Frenzy's MARP plans, per-GPU batch ``B / d``) that the predictor admits, falling
        back to the "predictor" choice on a slot where the predictor admits none. With ``predictor="frenzy"``
        a slot then runs exactly the (d, t) plan of the paper's search on that count
        (:func:`frenzy_env.world.memory.planning.plan_resources` with ``max_pp=1, accumulate=False``) that is fastest.
    resize_cooldown: seconds after a running job's last start or resize before it may be resized or preempted
        again (as well as past its start-up): ``None`` or 0: no wait beyond the start-up (env v5's
        dynamics); the default is 60 s (env v6's; Pollux's and Sia's reallocation period), which bounds how
        often one job's allocation changes in simulated time. Sources: Pollux re-optimises allocations every
        60 s, its scheduling interval (Qiao et al., OSDI 2021; the ``--interval`` default of its artifact's
        simulator, petuum/adaptdl ``simulator/simulator.py``); Sia's round is 60 s (Subramanya et al., SOSP
        2023; ``round_s`` of :mod:`baselines.sia`). A preemption counts as a resize to no GPUs: without the
        cooldown on it, a preemption and a start at once would be a resize without one.
    one_action_per_instant: False (env v5's dynamics) or True (the default, env v6's): a job takes at most one action
        (start, resize or preempt) per decision instant (the clock ``now``): after any action on job j at time
        t, no start, resize or preemption of j is legal until the clock has moved past t. Each action at one
        instant then acts on a job not acted on before at it, so at most as many actions as there are jobs in
        the system are legal before time moves (:attr:`ClusterSimulator.last_action` holds each job's time). A
        job back in the queue at the instant it was acted on (preempted, or out of memory at once with
        ``oom_delay=0``) gets a wake-up 1 s later (:data:`~frenzy_env.simulator.core.MIN_WAKEUP_INTERVAL`), the
        first instant at which it may start again.
    checkpoint_interval: seconds of a job's run between its periodic checkpoints, or ``None`` (env
        v5's dynamics, in which no stop loses work); the default (env v6's) is
        :data:`RECOMMENDED_CHECKPOINT_INTERVAL`. Within each attempt the checkpoints fall at ``progress_from
        + k x checkpoint_interval`` (k = 1, 2, ...; ``progress_from`` is the attempt's first iteration): every
        attempt begins from a checkpoint, the one its start loaded. A stop without a save (``stop_mode="kill"``)
        at time t keeps ``done_base + floor((t - progress_from) / checkpoint_interval) x checkpoint_interval x
        rate`` iterations, the progress of the attempt's last periodic checkpoint, and loses the rest (the
        ``rolled_back_gpu_hours`` metric counts the GPU time of the lost run). Periodic checkpoints cost no run
        time: they are asynchronous (a snapshot to host memory, written out while training goes on: CheckFreq,
        Mohan et al., FAST'21; Gemini, Wang et al., SOSP'23; MegaScale, Jiang et al., NSDI'24) -- an ASSUMPTION
        that under-charges synchronous writers. It matters only where a stop does not save: no failure is
        modelled and an out-of-memory attempt makes no progress, so with ``stop_mode`` "v5" or "save_first" it
        changes nothing. The recommended value is :data:`RECOMMENDED_CHECKPOINT_INTERVAL` = 1800 s: Check-N-Run
        (Eisenman et al., NSDI'22) checkpoints Meta's production training every 30 minutes by default; CheckFreq
        and Gemini report that LLM training checkpoints every tens of minutes to hours, since each synchronous
        write stalls training.
    stop_mode: how a preemption and a resize stop a running job. "v5" (env v5's dynamics): a
        preemption frees the GPUs at once and keeps all the progress, and what a resize pays for stopping
        (``restart_overhead`` + writing the checkpoint) is added to the start-up of the job's next start
        (``resume_extra``); a resize pays ``restart_overhead`` + the write + the start-up on the new plan, holding
        the new plan's GPUs throughout. "save_first" (the default, env v6's): a preemption keeps the job's GPUs while it
        stops and writes its checkpoint (``restart_overhead`` + the write, on its current plan; ``saving_until[job]``),
        then frees them and puts the job back in the queue with all its progress; its next start pays only its start-up.
        A resize is v5's, which already pays the save on GPUs the job holds (the new plan's: which GPUs wait is the
        one simplification). "kill" (needs ``checkpoint_interval``): a preemption frees the GPUs at once and the
        job keeps the progress of its last periodic checkpoint; a resize kills the workers too (restart on the new
        plan after its start-up only: no ``restart_overhead``, no write) from that checkpoint. This is
        torchrun's elastic restart: "when any number of workers fail we restart all the workers ... so you will
        lose progress up to the most recent checkpoint", and a membership change (a scale-up or -down) stops
        all workers the same way (PyTorch documentation, torch.distributed.elastic, "Train script").
    """

    predictor: str = "extended"
    memory_truth: str = "published"
    memory_margin: float = 0.0
    startup_time: float = 30.0
    restart_overhead: float = 10.0
    checkpoint_bandwidth: float = 2.5e9
    load_bandwidth: float = 2.5e9
    oom_delay: float | None = None
    teardown_time: float = 10.0
    max_plan_gpus: int = 64
    interface: str = "universal"
    placement: str = "best_fit"
    work_info: str = "exact"
    work_noise: float = 0.5
    utilisation: float = DEFAULT_UTILISATION
    efficiency: str = DEFAULT_EFFICIENCY
    layouts: str = "no_accumulation"
    resize_cooldown: float | None = 60.0
    one_action_per_instant: bool = True
    checkpoint_interval: float | None = RECOMMENDED_CHECKPOINT_INTERVAL
    stop_mode: str = "save_first"

    def __post_init__(self) -> None:
        if self.predictor not in PREDICTORS:
            raise ConfigError(f"predictor must be one of {', '.join(PREDICTORS)}, got {self.predictor!r}")
        if self.memory_truth not in MEMORY_TRUTHS:
            raise ConfigError(
                f"memory_truth must be one of {', '.join(MEMORY_TRUTHS)}, got {self.memory_truth!r}"
            )
        m = self.memory_margin
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, float, np.integer, np.floating)) or not (
            0.0 <= m < 1.0
        ):
            raise ConfigError(f"memory_margin must be a number in [0, 1) (a fraction of GPU memory), got {m!r}")
        if self.work_info not in WORK_INFO:
            raise ConfigError(f"work_info must be one of {', '.join(WORK_INFO)}, got {self.work_info!r}")
        if self.placement not in ("best_fit", "spread"):
            raise ConfigError(f"placement must be 'best_fit' or 'spread', got {self.placement!r}")
        for name in ("startup_time", "restart_overhead", "oom_delay", "teardown_time", "work_noise"):
            value = getattr(self, name)
            if value is None and name == "oom_delay":
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("checkpoint_bandwidth", "load_bandwidth"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
                raise ConfigError(f"{name} must be a number of bytes/s > 0 (math.inf: free), got {value!r}")
        if not (isinstance(self.max_plan_gpus, int) and self.max_plan_gpus >= 1):
            raise ConfigError(f"max_plan_gpus must be an integer >= 1, got {self.max_plan_gpus!r}")
        if self.interface not in INTERFACES:
            raise ConfigError(f"interface must be one of {', '.join(INTERFACES)}, got {self.interface!r}")
        if self.interface == "universal" and self.max_plan_gpus > UNIVERSAL_MAX_GPUS:
            raise ConfigError(
                f"max_plan_gpus must be at most {UNIVERSAL_MAX_GPUS} under interface='universal' (its grid of "
                f"{UNIVERSAL_TYPES} GPU types x counts up to {UNIVERSAL_MAX_GPUS}, {UNIVERSAL_PLANS} plan slots), "
                f"got {self.max_plan_gpus!r}"
            )
        if not (0 < self.utilisation <= 1):
            raise ConfigError(f"utilisation must be in (0, 1], got {self.utilisation!r}")
        check_efficiency(self.efficiency)
        if self.layouts not in LAYOUTS:
            raise ConfigError(f"layouts must be one of {', '.join(LAYOUTS)}, got {self.layouts!r}")
        c = self.resize_cooldown
        if c is not None and (
            isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating))
            or not (math.isfinite(c) and c >= 0)
        ):
            raise ConfigError(f"resize_cooldown must be None or a finite number of seconds >= 0, got {c!r}")
        if not isinstance(self.one_action_per_instant, (bool, np.bool_)):
            raise ConfigError(f"one_action_per_instant must be True or False, got {self.one_action_per_instant!r}")
        c = self.checkpoint_interval
        if c is not None and (
            isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating))
            or not (math.isfinite(c) and c > 0)
        ):
            raise ConfigError(f"checkpoint_interval must be None or a finite number of seconds > 0, got {c!r}")
        if self.stop_mode not in STOP_MODES:
            raise ConfigError(f"stop_mode must be one of {', '.join(STOP_MODES)}, got {self.stop_mode!r}")
        if self.stop_mode == "kill" and c is None:
            raise ConfigError(
                "stop_mode 'kill' needs a checkpoint_interval (the progress a killed job keeps), got "
                "checkpoint_interval=None"
            )

    @classmethod
    def from_dict(cls, values: dict) -> SimConfig:
        """Build from a dict; a misspelt key raises :class:`ConfigError` naming it."""
        check_keys("simulator config", values, [f.name for f in fields(cls)])
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


def stop_cost_keywords(scale: float, base: SimConfig | None = None) -> dict[str, float]:
    """The :class:`SimConfig` keywords of ``scale`` times ``base``'s start-up and restart costs (the defaults'
    when None): ``startup_time`` and ``restart_overhead`` times ``scale``, ``load_bandwidth`` and
    ``checkpoint_bandwidth`` over it, so every start, stop and resize takes ``scale`` times as long."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ConfigError(f"cost_scale must be a positive number, got {scale!r}")
    b = SimConfig() if base is None else base
    return {
        "startup_time": b.startup_time * scale, "restart_overhead": b.restart_overhead * scale,
        "load_bandwidth": b.load_bandwidth / scale, "checkpoint_bandwidth": b.checkpoint_bandwidth / scale,
    }


def start_up_costs(params: np.ndarray, nodes: np.ndarray, cfg: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """The start-up cost model of :class:`SimConfig` as tables: ``params`` (K,) model parameters per job
    configuration, ``nodes`` (P,) nodes each plan spans. Returns ``(start, save)``, both (K, P) seconds:
    ``start[k, p]`` from a start on plan p to the first iteration, ``save[k, p]`` the seconds a stop of a job
    running on plan p costs (``restart_overhead`` + writing the checkpoint; 0 under ``stop_mode="kill"``, which
    neither stops the workers gracefully nor writes), the extra seconds of a resize away from plan p."""
    states = CHECKPOINT_BYTES_PER_PARAM * np.asarray(params, dtype=np.float64)[:, None]  # (K, 1) bytes
    nodes = np.asarray(nodes, dtype=np.float64)[None, :]  # (1, P)
    start = cfg.startup_time + states / (cfg.load_bandwidth * nodes)
    if cfg.stop_mode == "kill":
        save = np.zeros_like(start)
    else:
        save = cfg.restart_overhead + states / (cfg.checkpoint_bandwidth * nodes)
    return start, save


@dataclass
class JobRecord:
    """What happened to one job (one row of the per-job table)."""

    job_id: int
    submit_time: float
    start_time: float = math.nan
    finish_time: float = math.nan
    gpu_type: str = ""
    num_gpus: int = 0
    dp: int = 0
    tp: int = 0
    restarts: int = 0
    oom_failures: int = 0
    gpu_seconds: float = 0.0
    rejected_reason: str = ""



@dataclass(slots=True)
class AttemptRecord:
    """One attempt of a job: an allocation of GPUs from a start or resize to the stop that ended it (times in
    seconds of the simulator's clock)."""

    job_id: int
    gpu_type: str
    num_gpus: int
    dp: int
    tp: int
    gpus: tuple[int, ...]  # the cluster's GPU indices it held (ascending; node by node)
    start_time: float  # GPUs taken
    progress_from: float  # first iteration (after start-up and any restart overhead)
    end_time: float = math.nan  # GPUs released (nan while running)
    outcome: str = "running"  # "finished", "oom", "resized", "preempted" or "running"
    saving_from: float = math.nan  # stop_mode "save_first": the preemption; its GPUs are held until end_time
    rolled_back_s: float = 0.0  # stop_mode "kill": seconds of run since the last periodic checkpoint, lost
