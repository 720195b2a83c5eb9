"""The fuzzer: every kind of policy, illegal actions included, on every registered preset and on random small
instances, with preemption on and off and the episode budgets set and unset, under the invariant checker.

Each episode is drawn from the run's seeded generator (an :class:`EpisodePlan` and a driver):

- where: a registered preset (:data:`~frenzy_env.registration.ENV_PRESETS`: its cluster, its workload cut to a
  few jobs drawn from ``preset_jobs``, and the "extended" or the "frenzy" memory predictor, the latter
  under-estimating and so exercising out-of-memory failures) or a random small instance with odd settings
  (:func:`random_config`, :data:`RANDOM_INSTANCES`), each with equal odds;
- the settings: ``preemption`` on or off, and each of the budgets ``max_steps`` (1 to ``episode_steps`` steps)
  and ``max_sim_hours`` (:data:`MAX_SIM_HOURS_RANGE`) set or unset, as ``preemption`` and ``budgets`` allow
  (:data:`SETTINGS`: ``"on"``, ``"off"`` or ``"both"``, the last drawn per episode);
- the driver: masked-random play (:data:`MASKED_RANDOM`, a uniformly random legal action), unmasked-random play
  (:data:`UNMASKED_RANDOM`, a uniformly random integer in ``[-3, n + 3)``: mostly illegal, masked out or out of
  range) or one of the policies the caller passes (name -> factory ``env -> policy``; ``scripts/fuzz.py``
  passes the registered baselines and the shipped agent). Masked-random play and the policies have a fraction
  ``eps`` of their actions replaced by unmasked-random ones.

A factory that raises :class:`~frenzy_env.errors.ConfigError` refuses the env (the shipped agent fits only the
spaces it was trained for): the refusal is counted apart from crashes, that driver is not drawn again for that
preset (or random instance kind) with those spaces, and another driver is drawn for the episode. Before a
fraction ``wakeup_rate`` of the steps a wake-up is requested at a random delay, the past included. An episode
ends when it terminates, when a budget truncates it, after ``episode_steps`` steps (the fuzzer's cap) or when
the run's steps are spent. :class:`~frenzy_env.testing.checker.InvariantChecker` checks every step; a violation
or an exception ends the episode and is recorded with its place (the plan, the driver, the stage, the step and
the actions played).

Resident memory is read at the start, after the warm-up (once ``warmup_episodes`` episodes and ``warmup_steps``
steps are done, whichever comes later), every tenth of the run after it and at the end; the growth is the RSS at
the end minus the RSS after the warm-up, and a run whose warm-up does not complete reports that instead of a
growth. :func:`fuzz` returns a :class:`FuzzReport`; ``scripts/fuzz.py`` is its command line.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError
from frenzy_env.registration import ENV_PRESETS, V5_WORLD, EnvPreset
from frenzy_env.testing.checker import InvariantChecker, InvariantViolation
from frenzy_env.versions import ENV_VERSION
from frenzy_env.workload import JobSpec, Workload, make_generator
from frenzy_env.world.cluster import GPU_TYPES, ClusterSpec, NodeSpec
from frenzy_env.world.models import get_model

MASKED_RANDOM = "masked-random"  #: the driver that plays a uniformly random legal action
UNMASKED_RANDOM = "unmasked-random"  #: the driver that plays a uniformly random integer in [-3, n + 3)
RANDOM_DRIVERS = (MASKED_RANDOM, UNMASKED_RANDOM)
RANDOM_INSTANCES = "random"  #: the random small instances, beside the presets' env ids
PRESET_PREDICTORS = ("extended", "frenzy")  # the memory predictors a preset's episode draws from
SETTINGS = ("on", "off", "both")  # preemption and budgets: always, never, or drawn per episode
BUDGETS = ("none", "max_steps", "max_sim_hours", "both")  # which budgets an episode sets
MAX_SIM_HOURS_RANGE = (0.01, 100.0)  # max_sim_hours is drawn log-uniformly in it
STALL_EPISODES = 200  # the run stops after this many episodes in a row that play no step

OPTION_STREAM = 6  #: the key of a random instance's own stream of world, pacing and stop options
MEMORY_TRUTHS = ("residual", "estimate", "published")  #: the memory truths a random instance draws from
EFFICIENCIES = ("microbatch", "flat", "per_type")  #: the efficiency models a random instance draws from
STOP_MODES = ("v5", "save_first", "kill")  #: the stop modes a random instance draws from
CHECKPOINT_INTERVALS = (None, 60.0, 1800.0)  #: its checkpoint intervals (None becomes 60 s under "kill")

SMALL_MODELS = ("gpt2", "gpt2-medium", "bert-large", "gpt2-large")
MEDIUM_MODELS = ("gpt2-xl", "llama-7b")
HUGE_MODELS = ("llama-2-70b", "llama-3.1-70b")  # fit nowhere on small clusters


def random_config(rng: np.random.Generator, index: int = 0) -> tuple[ClusterSpec, Workload, dict]:
    """A small random cluster (1-4 nodes of 1-8 GPUs, 1-3 types), 1-15 jobs and odd env settings, the memory
    truth, the efficiency model, the pacing options (``resize_cooldown``, ``one_action_per_instant``) and the
    stops (``stop_mode``, ``checkpoint_interval``) included."""
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
        wait_options=((), (60.0,), (60.0, 600.0, 3600.0), (1.0, 7.5))[int(rng.integers(4))],
    )
    # the world and pacing options, from a stream of the instance's own (so the draws above stay as they are)
    own = np.random.default_rng([index, OPTION_STREAM])
    kwargs.update(
        memory_truth=str(own.choice(MEMORY_TRUTHS)),
        efficiency=str(own.choice(EFFICIENCIES)),
        resize_cooldown=(None, 5.0, 60.0)[int(own.integers(3))],
        one_action_per_instant=bool(own.integers(2)),
    )
    stop_mode = str(own.choice(STOP_MODES))  # (drawn after the others: their draws stay as they were)
    interval = CHECKPOINT_INTERVALS[int(own.integers(len(CHECKPOINT_INTERVALS)))]
    if stop_mode == "kill" and interval is None:
        interval = CHECKPOINT_INTERVALS[1]
    kwargs.update(stop_mode=stop_mode, checkpoint_interval=interval)
    return cluster, Workload(f"fuzz-{index}", tuple(jobs)), kwargs


def random_kind(cluster: ClusterSpec, kwargs: Mapping[str, Any]) -> str:
    """A random instance's kind, as the report counts it: ``random/<k>-type/<predictor>``, k the number of GPU
    types its nodes have."""
    return f"{RANDOM_INSTANCES}/{len({node.gpu_type for node in cluster.nodes})}-type/{kwargs['predictor']}"


def few_jobs(workload: str, jobs: int | None) -> Any:
    """The generator of a workload preset cut to at most ``jobs`` jobs: its ``num_jobs`` (synthetic) or its
    ``max_jobs`` (trace) lowered; ``jobs`` None, or a generator with neither field, gives it as it is."""
    gen = make_generator(workload)
    if jobs is None or not dataclasses.is_dataclass(gen):
        return gen
    for key in ("num_jobs", "max_jobs"):
        if hasattr(gen, key):
            now = getattr(gen, key)
            return make_generator(gen, **{key: jobs if now is None else min(jobs, int(now))})
    return gen


def fuzz_presets() -> dict[str, tuple[EnvPreset, dict]]:
    """The presets the fuzzer draws, by env id: each registered preset's current id (:data:`ENV_PRESETS`), and its
    ``-v5`` id with :data:`~frenzy_env.registration.V5_WORLD` (the world and layout the shipped ``ppo`` model
    plays), each with the world keywords that id adds."""
    out: dict[str, tuple[EnvPreset, dict]] = {}
    for preset in ENV_PRESETS:
        out[preset.env_id] = (preset, {})
        out[preset.env_id[: -len(ENV_VERSION)] + "v5"] = (preset, V5_WORLD)
    return out


@dataclass(frozen=True)
class EpisodePlan:
    """What one episode plays, its driver apart: where, under which settings, with which ``eps`` and seed."""

    index: int  # the episode's number in the run (names a random instance's cluster and workload)
    preset: str  # a registered preset's env id, or RANDOM_INSTANCES
    predictor: str | None  # a preset's memory predictor (a random instance draws its own)
    jobs: int | None  # a preset's workload cut to at most this many jobs (few_jobs)
    preemption: bool
    max_steps: int | None
    max_sim_hours: float | None
    eps: float
    seed: int  # the env's reset seed, and a random instance's

    @property
    def budget(self) -> str:
        """Which budgets the episode sets: one of :data:`BUDGETS`."""
        if self.max_steps is None:
            return "none" if self.max_sim_hours is None else "max_sim_hours"
        return "max_steps" if self.max_sim_hours is None else "both"

    def make_env(self) -> tuple[FrenzyEnv, str]:
        """The episode's env and its kind: the preset's env id, or the random instance's :func:`random_kind`."""
        settings = dict(preemption=self.preemption, max_steps=self.max_steps, max_sim_hours=self.max_sim_hours)
        if self.preset == RANDOM_INSTANCES:
            cluster, workload, kwargs = random_config(np.random.default_rng(self.seed), self.index)
            return FrenzyEnv(cluster=cluster, workload=workload, **kwargs, **settings), random_kind(cluster, kwargs)
        preset, world = fuzz_presets()[self.preset]
        kwargs = {**preset.kwargs, **world, "predictor": self.predictor, **settings}
        return FrenzyEnv(cluster=preset.cluster, workload=few_jobs(preset.workload, self.jobs), **kwargs), self.preset


def space_signature(env: Any) -> tuple:
    """The sizes of an env's action and observation spaces: a factory refused on them is refused on all."""
    base = env.unwrapped
    return (int(base.action_space.n), tuple(sorted((k, s.shape) for k, s in base.observation_space.spaces.items())))


# --------------------------------------------------------------------------------------------- the report
def resident_mb() -> float:
    """Resident set size of this process in MiB (Linux /proc; else peak RSS from getrusage)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _add(counts: dict, key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


@dataclass
class FuzzReport:
    """What a :func:`fuzz` run played and found. Counts by policy, preset (the random instances as
    :data:`RANDOM_INSTANCES`) and random instance kind; ``episodes_by_pair[policy][preset]``; how episodes ended
    (``terminations``; ``truncations`` by budget, an episode cut by both at once counted under each;
    ``capped`` at ``episode_steps``; ``cut_by_run_end``); ``failures`` (the first ``max_failures``: kind,
    place, error, traceback, actions played) and ``refused`` (the first refusals' messages). Memory: RSS in MiB
    at the start, after the warm-up (None when it did not complete), at most after it and at the end."""

    seed: int = 0
    steps: int = 0
    episodes: int = 0
    seconds: float = 0.0
    policies: list[str] = field(default_factory=list)  # the drivers drawn from
    presets: list[str] = field(default_factory=list)  # the presets drawn from, RANDOM_INSTANCES among them
    terminations: int = 0
    truncations: dict[str, int] = field(default_factory=dict)  # budget -> episodes it cut
    truncated_episodes: int = 0
    capped: int = 0  # episodes cut at episode_steps by the fuzzer
    cut_by_run_end: int = 0
    preemptions: int = 0  # legal preempt actions played
    illegal_actions: int = 0
    crashes: int = 0
    violations: int = 0
    refusals: int = 0
    stalled: bool = False  # the run stopped: STALL_EPISODES episodes in a row played no step
    episodes_by_policy: dict[str, int] = field(default_factory=dict)
    steps_by_policy: dict[str, int] = field(default_factory=dict)
    episodes_by_preset: dict[str, int] = field(default_factory=dict)
    steps_by_preset: dict[str, int] = field(default_factory=dict)
    episodes_by_random_kind: dict[str, int] = field(default_factory=dict)
    steps_by_random_kind: dict[str, int] = field(default_factory=dict)
    episodes_by_pair: dict[str, dict[str, int]] = field(default_factory=dict)  # policy -> preset -> episodes
    episodes_by_preemption: dict[str, int] = field(default_factory=dict)  # "on" / "off"
    episodes_by_budget: dict[str, int] = field(default_factory=dict)  # BUDGETS
    refusals_by_pair: dict[str, dict[str, int]] = field(default_factory=dict)  # policy -> preset -> refusals
    failures: list[dict] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    warmup_episodes: int = 0  # the warm-up asked for
    warmup_steps: int = 0
    warmed_at_episode: int | None = None  # where it completed (None: it did not)
    warmed_at_step: int | None = None
    rss_start_mb: float | None = None
    rss_warm_mb: float | None = None
    rss_max_after_warmup_mb: float | None = None
    rss_end_mb: float | None = None

    @property
    def warmup_completed(self) -> bool:
        return self.rss_warm_mb is not None

    @property
    def rss_growth_mb(self) -> float | None:
        """RSS at the end minus RSS after the warm-up; None when the warm-up did not complete."""
        if self.rss_warm_mb is None or self.rss_end_mb is None:
            return None
        return self.rss_end_mb - self.rss_warm_mb

    def pairs_not_played(self) -> list[str]:
        """``"policy x preset"`` for every pair that played no episode, ``" (refused)"`` after those refused."""
        out = []
        for policy in self.policies:
            for preset in self.presets:
                if not self.episodes_by_pair.get(policy, {}).get(preset):
                    refused = self.refusals_by_pair.get(policy, {}).get(preset)
                    out.append(f"{policy} x {preset}" + (" (refused)" if refused else ""))
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            warmup_completed=self.warmup_completed,
            rss_growth_mb=self.rss_growth_mb,
            pairs_not_played=self.pairs_not_played(),
        )
        return d

    def memory_line(self) -> str:
        """The memory check in one line: the RSS at the start, after the warm-up and at the end, and the growth;
        or that the warm-up did not complete."""
        start, end = _mb(self.rss_start_mb), _mb(self.rss_end_mb)
        if not self.warmup_completed:
            return (
                f"memory: NOT CHECKED: the warm-up did not complete ({self.episodes:,} of {self.warmup_episodes:,} "
                f"episodes, {self.steps:,} of {self.warmup_steps:,} steps); RSS {start} at the start, {end} at "
                "the end"
            )
        return (
            f"memory: RSS {start} at the start, {_mb(self.rss_warm_mb)} after the warm-up (episode "
            f"{self.warmed_at_episode:,}, step {self.warmed_at_step:,}), {end} at the end: growth "
            f"{self.rss_growth_mb:+.1f} MiB (max {_mb(self.rss_max_after_warmup_mb)} after the warm-up)"
        )

    def summary(self) -> str:
        """The report, readably: totals, how episodes ended, settings, failures, memory and the tables."""
        trunc = ", ".join(f"{k} {v:,}" for k, v in sorted(self.truncations.items())) or "none"
        refusals = _counts({p: sum(v.values()) for p, v in self.refusals_by_pair.items()})
        lines = [
            f"fuzz (seed {self.seed}): {self.steps:,} steps, {self.episodes:,} episodes, {self.seconds:,.0f} s"
            + ("  STALLED: episodes in a row played no step" if self.stalled else ""),
            f"ended: {self.terminations:,} terminated, {self.truncated_episodes:,} truncated (by budget: {trunc}), "
            f"{self.capped:,} capped at the episode step cap, {self.cut_by_run_end:,} cut by the run's end",
            "preemption: " + _counts(self.episodes_by_preemption) + f" episodes; {self.preemptions:,} preemptions",
            "budgets: " + _counts(self.episodes_by_budget) + " episodes",
            f"illegal actions {self.illegal_actions:,}; crashes {self.crashes:,}; invariant violations "
            f"{self.violations:,}; refusals {self.refusals:,}"
            + (f" ({refusals})" if self.refusals else ""),
            self.memory_line(),
            _table("policy", self.policies, self.episodes_by_policy, self.steps_by_policy),
            _table("preset", self.presets, self.episodes_by_preset, self.steps_by_preset),
        ]
        if self.episodes_by_random_kind:
            kinds = sorted(self.episodes_by_random_kind)
            lines.append(_table("random instance kind", kinds, self.episodes_by_random_kind, self.steps_by_random_kind))
        played = [n for v in self.episodes_by_pair.values() for n in v.values()]
        missing = self.pairs_not_played()
        lines.append(
            f"(policy, preset) pairs: {len(played)} played, episodes per pair {min(played, default=0):,} to "
            f"{max(played, default=0):,}; not played: {', '.join(missing) if missing else 'none'}"
        )
        for failure in self.failures:
            lines.append(f"{failure['kind']} in {failure['place']}: {failure['error']}")
        return "\n".join(lines)


def _mb(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} MiB"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in counts.items()) or "none"


def _table(title: str, names: Sequence[str], episodes: Mapping[str, int], steps: Mapping[str, int]) -> str:
    width = max([len(title), *map(len, names)])
    rows = [f"  {title:<{width}}  {'episodes':>9}  {'steps':>11}"]
    rows += [f"  {n:<{width}}  {episodes.get(n, 0):>9,}  {steps.get(n, 0):>11,}" for n in names]
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------- the run
def fuzz(
    steps: int,
    *,
    seed: int = 0,
    policies: Mapping[str, Callable[[Any], Any]] | None = None,
    random_drivers: Sequence[str] = RANDOM_DRIVERS,
    presets: Sequence[str] | None = None,
    custom: bool = True,
    preemption: str = "both",
    budgets: str = "both",
    episode_steps: int = 400,
    preset_jobs: Sequence[int] = (4, 12, 40),
    warmup_episodes: int = 100,
    warmup_steps: int | None = None,
    eps_choices: Sequence[float] = (0.0, 0.1, 0.5, 0.95),
    full_every: int = 50,
    wakeup_rate: float = 0.05,
    max_failures: int = 20,
    progress: bool = False,
) -> FuzzReport:
    """Play ``steps`` env steps in episodes drawn from ``seed`` (see the module docstring); returns a
    :class:`FuzzReport`.

    ``policies`` maps a driver name to a factory ``env -> policy`` (a policy has ``predict(obs, action_masks=,
    deterministic=)`` and optionally ``reset()``, as the baselines do; a factory that raises ConfigError refuses
    the env); ``random_drivers`` are the fuzzer's own drivers drawn beside them (:data:`RANDOM_DRIVERS`).
    ``presets`` restricts the registered presets by env id (None: all); ``custom`` adds the random small
    instances. ``preemption`` and ``budgets`` are one of :data:`SETTINGS`. ``episode_steps`` caps an episode;
    ``preset_jobs`` are the workload sizes a preset's episode draws from. The warm-up of the memory check ends
    once ``warmup_episodes`` episodes and ``warmup_steps`` steps (None: a tenth of ``steps``) are done.
    """
    policies = dict(policies or {})
    drivers = [*random_drivers, *policies]
    configs = [env_id for env_id in fuzz_presets() if presets is None or env_id in presets]
    configs += [RANDOM_INSTANCES] if custom else []
    _check_fuzz_args(steps, drivers, random_drivers, configs, presets, preemption, budgets, episode_steps, preset_jobs)
    report = FuzzReport(
        seed=seed, policies=drivers, presets=configs, warmup_episodes=int(warmup_episodes),
        warmup_steps=steps // 10 if warmup_steps is None else int(warmup_steps), rss_start_mb=resident_mb(),
    )
    run = _FuzzRun(
        steps=steps, rng=np.random.default_rng(seed), policies=policies, drivers=drivers, configs=configs,
        preemption=preemption, budgets=budgets, episode_steps=episode_steps, preset_jobs=tuple(preset_jobs),
        eps_choices=tuple(eps_choices), full_every=full_every, wakeup_rate=wakeup_rate, max_failures=max_failures,
        progress=progress, report=report, next_report=steps // 10 or steps,
    )
    idle = 0
    while report.steps < steps:
        before = report.steps
        run.next_episode()
        run.note_warm_up()
        idle = 0 if report.steps > before else idle + 1
        if idle >= STALL_EPISODES:
            report.stalled = True
            break
    return run.finish()


def _check_fuzz_args(
    steps: int,
    drivers: list[str],
    random_drivers: Sequence[str],
    configs: list[str],
    presets: Sequence[str] | None,
    preemption: str,
    budgets: str,
    episode_steps: int,
    preset_jobs: Sequence[int],
) -> None:
    """ConfigError naming the argument and its value for anything :func:`fuzz` cannot run."""
    if steps < 1 or episode_steps < 1:
        raise ConfigError(f"steps and episode_steps must be positive, got {steps!r} and {episode_steps!r}")
    for name, value in (("preemption", preemption), ("budgets", budgets)):
        if value not in SETTINGS:
            raise ConfigError(f"{name} must be one of {', '.join(SETTINGS)}, got {value!r}")
    unknown = [d for d in random_drivers if d not in RANDOM_DRIVERS]
    if unknown:
        raise ConfigError(f"random_drivers must be among {', '.join(RANDOM_DRIVERS)}, got {unknown[0]!r}")
    known = set(fuzz_presets())
    unknown = [p for p in presets or () if p not in known]
    if unknown:
        raise ConfigError(f"unknown preset {unknown[0]!r}: the registered presets are {', '.join(sorted(known))}")
    if not drivers or not configs:
        raise ConfigError(f"nothing to fuzz: policies {drivers}, presets {configs}")
    if not preset_jobs or any(int(n) < 1 for n in preset_jobs):
        raise ConfigError(f"preset_jobs must be positive job counts, got {tuple(preset_jobs)!r}")


@dataclass
class _FuzzRun:
    """The state of one :func:`fuzz` call: its settings, the generator every draw comes from, the refusals met
    and the report being filled."""

    steps: int
    rng: np.random.Generator
    policies: dict[str, Callable[[Any], Any]]
    drivers: list[str]
    configs: list[str]
    preemption: str
    budgets: str
    episode_steps: int
    preset_jobs: tuple[int, ...]
    eps_choices: tuple[float, ...]
    full_every: int
    wakeup_rate: float
    max_failures: int
    progress: bool
    report: FuzzReport
    next_report: int  # the step count of the next progress line and RSS sample
    refused: set[tuple[str, str, tuple]] = field(default_factory=set)  # (driver, env kind, space signature)
    log: list = field(default_factory=list)  # the episode's actions; a wake-up as ["wakeup", time]
    legal: bool = False  # whether the last action chosen was legal
    t0: float = field(default_factory=time.perf_counter)

    def draw_plan(self) -> EpisodePlan:
        """The next episode's preset, settings, ``eps`` and seed, drawn from the run's generator."""
        rng = self.rng
        preset = self.configs[int(rng.integers(len(self.configs)))]
        on_preset = preset != RANDOM_INSTANCES
        preemption = {"on": True, "off": False, "both": bool(rng.integers(2))}[self.preemption]
        budget = {"off": "none", "on": str(rng.choice(BUDGETS[1:])), "both": str(rng.choice(BUDGETS))}[self.budgets]
        max_steps = max_hours = None
        if budget in ("max_steps", "both"):  # log-uniform in [1, episode_steps]
            max_steps = int(round(math.exp(rng.uniform(0.0, math.log(self.episode_steps)))))
        if budget in ("max_sim_hours", "both"):
            lo, hi = MAX_SIM_HOURS_RANGE
            max_hours = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        return EpisodePlan(
            index=self.report.episodes,
            preset=preset,
            predictor=str(rng.choice(PRESET_PREDICTORS)) if on_preset else None,
            jobs=int(rng.choice(self.preset_jobs)) if on_preset else None,
            preemption=preemption,
            max_steps=max_steps,
            max_sim_hours=max_hours,
            eps=float(rng.choice(self.eps_choices)),
            seed=int(rng.integers(2**31 - 1)),
        )

    def next_episode(self) -> None:
        """The next episode: its plan drawn, its env built, a driver that takes it drawn, then played (a failure
        to build the env or a policy is recorded as a crash)."""
        plan = self.draw_plan()
        place = {"plan": asdict(plan), "policy": None, "env": plan.preset}
        try:
            env, kind = plan.make_env()
        except Exception:
            self.fail("crash", place, "env", 0)
            return
        place["env"] = kind
        try:
            driver, policy = self.draw_driver(plan, env, kind)
        except Exception:
            self.fail("crash", place, "policy factory", 0)
            return
        if driver is not None:
            place["policy"] = driver
            self.play(plan, env, kind, driver, policy, place)

    def draw_driver(self, plan: EpisodePlan, env: Any, kind: str) -> tuple[str | None, Any]:
        """A driver and its policy on ``env`` (None for the fuzzer's own), drawn among those not refused on
        this env's kind and spaces; a refusal is counted and another is drawn (None: every driver refuses)."""
        signature = space_signature(env)
        while True:
            allowed = [d for d in self.drivers if (d, kind, signature) not in self.refused]
            if not allowed:
                return None, None
            driver = allowed[int(self.rng.integers(len(allowed)))]
            if driver in RANDOM_DRIVERS:
                return driver, None
            try:
                return driver, self.policies[driver](env)
            except ConfigError as exc:
                self.refused.add((driver, kind, signature))
                report = self.report
                report.refusals += 1
                _add(report.refusals_by_pair.setdefault(driver, {}), plan.preset)
                if len(report.refused) < self.max_failures:
                    report.refused.append(f"{driver} on {kind} (preemption={plan.preemption}): {exc}")

    def play(self, plan: EpisodePlan, env: Any, kind: str, driver: str, policy: Any, place: dict) -> None:
        """One episode under the invariant checker, until it ends, after ``episode_steps`` steps or when the
        run's steps are spent; a violation or a crash is recorded with its place and ends it."""
        report = self.report
        self.count_episode(plan, kind, driver)
        checker = InvariantChecker(env, full_every=self.full_every)
        self.log = []
        step, stage = 0, "reset"
        try:
            obs, info = env.reset(seed=plan.seed)
            if policy is not None and hasattr(policy, "reset"):
                policy.reset()
            checker.on_reset(obs, info)
            t_reset = env.sim.now
            while True:
                if report.steps >= self.steps:
                    report.cut_by_run_end += 1
                    return
                if step >= self.episode_steps:
                    report.capped += 1
                    return
                stage = "wakeup"
                if self.rng.random() < self.wakeup_rate:  # a timer at any delay, the past included
                    t = env.sim.now + float(self.rng.uniform(-100.0, 5000.0))
                    self.log.append(["wakeup", t])
                    env.request_wakeup(t)
                stage = "policy"
                action = self.choose(env, policy, driver, obs, plan.eps)
                self.log.append(action)
                stage = "step"
                checker.before_step(action)
                preempts = self.legal and env.preemption and action >= env.first_preempt
                obs, reward, terminated, truncated, info = env.step(action)
                step += 1
                report.steps += 1
                report.preemptions += preempts
                stage = "check"
                checker.after_step(action, obs, reward, terminated, truncated, info)
                if report.steps >= self.next_report:
                    self.tick()
                if terminated:
                    report.terminations += 1
                    return
                if truncated:
                    self.count_truncation(plan, step, env.sim.now - t_reset)
                    return
        except InvariantViolation:
            self.fail("violation", place, stage, step)
        except Exception:
            self.fail("crash", place, stage, step)
        finally:
            self.count_steps(plan, kind, driver, step)

    def choose(self, env: Any, policy: Any, driver: str, obs: Any, eps: float) -> int:
        """The action: unmasked-random play, or with probability ``eps``, a uniformly random integer in
        ``[-3, n + 3)``; else the driver's (masked-random: a uniformly random legal one). Counts it when
        illegal."""
        n = env.action_space.n
        mask = env.action_masks()
        if driver == UNMASKED_RANDOM or self.rng.random() < eps:
            action = int(self.rng.integers(-3, n + 3))
        elif driver == MASKED_RANDOM:
            legal = np.flatnonzero(mask)
            action = int(self.rng.choice(legal)) if legal.size else 0
        else:
            a, _ = policy.predict(obs, action_masks=mask, deterministic=True)
            action = int(np.asarray(a).reshape(-1)[0])
        self.legal = bool(0 <= action < n and mask[action])
        self.report.illegal_actions += not self.legal
        return action

    def count_episode(self, plan: EpisodePlan, kind: str, driver: str) -> None:
        report = self.report
        report.episodes += 1
        _add(report.episodes_by_policy, driver)
        _add(report.episodes_by_preset, plan.preset)
        if plan.preset == RANDOM_INSTANCES:
            _add(report.episodes_by_random_kind, kind)
        _add(report.episodes_by_pair.setdefault(driver, {}), plan.preset)
        _add(report.episodes_by_preemption, "on" if plan.preemption else "off")
        _add(report.episodes_by_budget, plan.budget)

    def count_steps(self, plan: EpisodePlan, kind: str, driver: str, steps: int) -> None:
        report = self.report
        _add(report.steps_by_policy, driver, steps)
        _add(report.steps_by_preset, plan.preset, steps)
        if plan.preset == RANDOM_INSTANCES:
            _add(report.steps_by_random_kind, kind, steps)

    def count_truncation(self, plan: EpisodePlan, steps: int, seconds: float) -> None:
        """A truncated episode, under each budget it reached."""
        report = self.report
        report.truncated_episodes += 1
        if plan.max_steps is not None and steps >= plan.max_steps:
            _add(report.truncations, "max_steps")
        if plan.max_sim_hours is not None and seconds >= plan.max_sim_hours * 3600.0:
            _add(report.truncations, "max_sim_hours")

    def fail(self, kind: str, place: dict, stage: str, step: int) -> None:
        """Count a crash or a violation; keep its place, error, traceback and the episode's actions among the
        first ``max_failures``."""
        report = self.report
        if kind == "crash":
            report.crashes += 1
        else:
            report.violations += 1
        if len(report.failures) < self.max_failures:
            plan = place["plan"]
            exc = sys.exc_info()[1]
            report.failures.append(
                {
                    "kind": kind,
                    "place": f"{place['env']} policy={place['policy']} seed={plan['seed']} "
                    f"preemption={plan['preemption']} max_steps={plan['max_steps']} "
                    f"max_sim_hours={plan['max_sim_hours']} eps={plan['eps']} ({stage}) step {step}",
                    "policy": place["policy"],
                    "env": place["env"],
                    "stage": stage,
                    "step": step,
                    "plan": plan,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=8),
                    "actions": list(self.log),
                }
            )

    def tick(self) -> None:
        """Every tenth of the run: the RSS after the warm-up sampled, a progress line with ``progress``."""
        report = self.report
        if report.warmup_completed:
            report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb or 0.0, resident_mb())
        if self.progress:
            print(
                f"{report.steps:>10,} steps  {report.episodes:,} episodes  crashes {report.crashes}  "
                f"violations {report.violations}  refusals {report.refusals}  RSS {resident_mb():.1f} MiB  "
                f"{time.perf_counter() - self.t0:.0f} s",
                flush=True,
            )
        self.next_report += self.steps // 10 or self.steps

    def note_warm_up(self) -> None:
        """Once ``warmup_episodes`` episodes and ``warmup_steps`` steps are done: the RSS after the warm-up."""
        report = self.report
        done = report.episodes >= report.warmup_episodes and report.steps >= report.warmup_steps
        if done and not report.warmup_completed:
            gc.collect()
            report.rss_warm_mb = report.rss_max_after_warmup_mb = resident_mb()
            report.warmed_at_episode, report.warmed_at_step = report.episodes, report.steps

    def finish(self) -> FuzzReport:
        """The report with the RSS at the end and the run's seconds (a warm-up that did not complete leaves
        the growth unknown)."""
        report = self.report
        gc.collect()
        report.rss_end_mb = resident_mb()
        if report.warmup_completed:
            report.rss_max_after_warmup_mb = max(report.rss_max_after_warmup_mb or 0.0, report.rss_end_mb)
        report.seconds = time.perf_counter() - self.t0
        return report
