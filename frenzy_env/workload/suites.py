"""Named benchmark suites: fixed, paired sets of workloads, the benchmark protocol (docs/evaluation.md, "Suites").

A suite is a typed, frozen :class:`Suite`: synthetic workloads (seeds, job count, offered load) and fixed
windows of public ITP traces (catalogue name, window count, jobs per window, offered load), on one cluster.
Every policy plays every workload of a suite with the same seed, so results pair workload by workload.
Names carry the environment's version (:data:`~frenzy_env.versions.ENV_VERSION`): ``v6-quick``,
``v6-validation``, ``v6-test``, ``v6-transfer``, ``v6-train``; a version bump renames them, so results of two
versions never share a name. Every suite of this version is at a load of :data:`SUITE_LOAD_MODE` ``"wait"``
(:data:`SUITE_LOAD`: the share of jobs that wait over a minute under FIFO), ``v6-transfer`` on ``cloud-mixed``,
a cluster of GPU types no other preset has, the others on ``frenzy-testbed``.

The suites are the single definition of the data split (:data:`SPLITS`): synthetic seeds 0-499 and ITP
clusters 03, 06, 08 train; seeds 500-999 and clusters 04, 07 validate (models are selected there); seeds from
1000 and clusters 01, 09, 02 test, and nothing the project ships was trained or selected on them.
``agents.ppo.config`` imports its seed ranges and trace clusters from here. Each suite is checked at
registration to lie inside its split.

Loads are offered loads of :mod:`frenzy_env.workload.load` on the suite's cluster: a synthetic workload is
generated at its load (:class:`~frenzy_env.workload.SyntheticGenerator`), and a trace window's arrival times
are stretched so that its offered load is exactly its load for the seed's model assignment
(:class:`~frenzy_env.workload.TraceGenerator` with ``load``). A suite's ``load_mode`` (default ``"fluid"``: the
offered load above; ``"busy"``: the share of the cluster's GPUs FIFO keeps busy over the arrival window,
:mod:`frenzy_env.workload.load`, "Busy load"; ``"wait"``: the share of the jobs that wait over a minute under FIFO,
"Wait load" there) says which load its workloads are generated at. Trace windows
start at rows spread evenly over the trace (:func:`window_starts`), as the PPO trainer's validation and test
windows do.

Traces come from the ``frenzy data`` cache (:func:`frenzy_env.workload.datasets.resolve`): :func:`missing_traces` names
those not downloaded and :func:`suite_workloads` raises :class:`TracesNotCachedError`, one line naming the
``frenzy data fetch`` command.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from frenzy_env.errors import ConfigError, FrenzyError, unknown_name
from frenzy_env.versions import ENV_VERSION

# ----------------------------------------------------------------------------------------------- the split
TRAIN_SEEDS = (0, 500)  # synthetic training workloads draw their seeds in [0, 500)
VALIDATION_SEEDS = (500, 1000)  # validation: seeds 500, 501, ...
TEST_SEED_START = 1000  # held-out test: seeds >= 1000
SEED_LIMIT = 2**31 - 1  # the largest workload seed an env draws (exclusive)


@dataclass(frozen=True)
class Split:
    """One part of the data split: synthetic seeds in ``[seeds[0], seeds[1])`` and windows of these ITP traces
    (catalogue names); a seed or a cluster belongs to one split only."""

    name: str
    seeds: tuple[int, int]
    traces: tuple[str, ...]


SPLITS: dict[str, Split] = {
    s.name: s
    for s in (
        Split("train", TRAIN_SEEDS, ("itp-cluster03", "itp-cluster06", "itp-cluster08")),
        Split("validation", VALIDATION_SEEDS, ("itp-cluster04", "itp-cluster07")),
        Split("test", (TEST_SEED_START, SEED_LIMIT), ("itp-cluster01", "itp-cluster09", "itp-cluster02")),
    )
}


# ------------------------------------------------------------------------------------------------- suites
@dataclass(frozen=True)
class SyntheticPart:
    """Synthetic workloads of a suite: one per seed, ``num_jobs`` jobs at offered load ``load``."""

    seeds: tuple[int, ...]
    num_jobs: int = 200
    load: float = 0.7


@dataclass(frozen=True)
class TracePart:
    """Fixed windows of a catalogue trace: ``windows`` windows of ``max_jobs`` consecutive jobs starting at rows
    spread evenly over the trace (:func:`window_starts`), of which ``only`` are kept (their indices; None: all),
    each at offered load ``load``, its models assigned with ``seed`` (also the episode's seed)."""

    trace: str
    windows: int
    seed: int
    max_jobs: int = 150
    load: float = 0.8
    only: tuple[int, ...] | None = None

    @property
    def indices(self) -> tuple[int, ...]:
        """The indices of the windows kept."""
        return tuple(range(self.windows)) if self.only is None else self.only


@dataclass(frozen=True)
class Suite:
    """A named benchmark suite (module docstring): ``kind`` ("quick", "test", ...) within the data split
    ``split``, on preset ``cluster``; its name is ``{version}-{kind}``. ``load_mode`` (default ``"fluid"``: every
    load is the offered load of :mod:`frenzy_env.workload.load`; ``"busy"``: the share of the cluster's GPUs FIFO
    keeps busy over each workload's arrival window; ``"wait"``: the share of each workload's jobs that wait over a
    minute under FIFO) is passed to every generator of the suite."""

    kind: str
    split: str
    description: str
    synthetic: SyntheticPart | None = None
    traces: tuple[TracePart, ...] = ()
    cluster: str = "frenzy-testbed"
    version: str = ENV_VERSION
    load_mode: str = "fluid"

    @property
    def name(self) -> str:
        return f"{self.version}-{self.kind}"

    @property
    def seeds(self) -> tuple[int, ...]:
        """Every seed the suite uses: synthetic seeds and the trace windows' seeds."""
        synthetic = self.synthetic.seeds if self.synthetic is not None else ()
        return tuple(dict.fromkeys([*synthetic, *(t.seed for t in self.traces)]))

    @property
    def trace_names(self) -> tuple[str, ...]:
        """The catalogue traces the suite needs, in order, each once."""
        return tuple(dict.fromkeys(t.trace for t in self.traces))

    @property
    def size(self) -> int:
        """The number of workloads (episodes per policy)."""
        synthetic = len(self.synthetic.seeds) if self.synthetic is not None else 0
        return synthetic + sum(len(t.indices) for t in self.traces)

    def describe(self) -> str:
        """One line: the workloads, their loads and the cluster."""
        parts = []
        if self.synthetic is not None:
            s = self.synthetic
            seeds = s.seeds[0] if len(s.seeds) == 1 else f"{s.seeds[0]}-{s.seeds[-1]}"
            parts.append(f"{len(s.seeds)} synthetic (seeds {seeds}, {s.num_jobs} jobs, load {s.load:g})")
        for t in self.traces:
            parts.append(f"{len(t.indices)} window(s) of {t.trace} ({t.max_jobs} jobs, load {t.load:g}, "
                         f"seed {t.seed})")
        mode = "" if self.load_mode == "fluid" else f" (load mode {self.load_mode})"
        return f"{self.name}: " + ", ".join(parts) + f" on {self.cluster}" + mode


def check_suite(suite: Suite) -> None:
    """Raise :class:`ConfigError` unless ``suite`` is well formed and lies inside its split (seeds, traces)."""
    if suite.split not in SPLITS:
        raise unknown_name("split", suite.split, SPLITS)
    split = SPLITS[suite.split]
    if suite.synthetic is None and not suite.traces:
        raise ConfigError(f"suite {suite.name!r} has no workloads")
    from frenzy_env.workload.load import check_load_mode

    check_load_mode(suite.load_mode, f"suite {suite.name!r}: load_mode")
    lo, hi = split.seeds
    if suite.synthetic is not None:
        s = suite.synthetic
        if not s.seeds or len(set(s.seeds)) != len(s.seeds):
            raise ConfigError(f"suite {suite.name!r}: synthetic seeds must be distinct and at least one")
        if not (s.load > 0 and s.num_jobs >= 2):
            raise ConfigError(f"suite {suite.name!r}: synthetic load must be > 0 and num_jobs >= 2")
    for seed in suite.seeds:
        if not lo <= seed < hi:
            raise ConfigError(f"suite {suite.name!r}: seed {seed} is outside the {split.name} seeds [{lo}, {hi})")
    for t in suite.traces:
        if t.trace not in split.traces:
            raise ConfigError(f"suite {suite.name!r}: trace {t.trace!r} is not a {split.name} trace "
                              f"({', '.join(split.traces)})")
        if not (t.load > 0 and t.windows >= 1 and t.max_jobs >= 2):
            raise ConfigError(f"suite {suite.name!r}: {t.trace} needs load > 0, windows >= 1, max_jobs >= 2")
        if not t.indices or any(not 0 <= i < t.windows for i in t.indices):
            raise ConfigError(f"suite {suite.name!r}: {t.trace} keeps windows {t.indices} of {t.windows}")


#: The load of every suite of this version: ``load_mode="wait"`` at 0.6, so that under FIFO 60% of each
#: workload's jobs wait over a minute to start: the pressure at which queue order matters (at 0.3, or at the
#: fluid load's 0.7-0.8, the queue-order baselines tie; ``scripts/queue_order_load.py``); trace windows hold 300
#: jobs, as most 150-job windows cannot reach it (their jobs mostly ask for one GPU).
SUITE_LOAD_MODE = "wait"
SUITE_LOAD = 0.6
SUITE_TRACE_JOBS = 300


def _windows(split: str, count: int, seed: int, **kw: Any) -> tuple[TracePart, ...]:
    kw = {"max_jobs": SUITE_TRACE_JOBS, "load": SUITE_LOAD, **kw}
    return tuple(TracePart(trace, count, seed, **kw) for trace in SPLITS[split].traces)


def _synthetic(first: int, count: int) -> SyntheticPart:
    return SyntheticPart(tuple(range(first, first + count)), load=SUITE_LOAD)


SUITE_DEFINITIONS: tuple[Suite, ...] = (
    Suite(
        "quick", "validation",
        "a smoke check in a few minutes: the first 3 validation seeds and the first validation window of ITP "
        "cluster04 (a subset of the validation suite, so selecting on it never touches the test split)",
        synthetic=_synthetic(VALIDATION_SEEDS[0], 3),
        traces=(TracePart("itp-cluster04", 4, VALIDATION_SEEDS[0], max_jobs=SUITE_TRACE_JOBS, load=SUITE_LOAD,
                          only=(0,)),),
        load_mode=SUITE_LOAD_MODE,
    ),
    Suite(
        "validation", "validation",
        "model selection: validation seeds 500-507 and 4 fixed windows of each validation cluster",
        synthetic=_synthetic(VALIDATION_SEEDS[0], 8),
        traces=_windows("validation", 4, VALIDATION_SEEDS[0]),
        load_mode=SUITE_LOAD_MODE,
    ),
    Suite(
        "test", "test",
        "the final comparison, never trained or selected on: test seeds 1000-1009 and 6 fixed windows of each "
        "test cluster",
        synthetic=_synthetic(TEST_SEED_START, 10),
        traces=_windows("test", 6, TEST_SEED_START),
        load_mode=SUITE_LOAD_MODE,
    ),
    Suite(
        "transfer", "test",
        "generalisation to a cluster no training uses, of GPU types no other preset has (cloud-mixed: H200, L40S, "
        "A10): test seeds 1000-1009 and 2 fixed windows of each test cluster",
        synthetic=_synthetic(TEST_SEED_START, 10),
        traces=_windows("test", 2, TEST_SEED_START),
        cluster="cloud-mixed",
        load_mode=SUITE_LOAD_MODE,
    ),
    Suite(
        "train", "train",
        "the training distribution (fit, not generalisation): training seeds 0-7 and 2 fixed windows of each "
        "training cluster",
        synthetic=_synthetic(TRAIN_SEEDS[0], 8),
        traces=_windows("train", 2, TRAIN_SEEDS[0]),
        load_mode=SUITE_LOAD_MODE,
    ),
)
"""The suites of this version, in the order ``frenzy evaluate --help`` lists them."""

SUITES: dict[str, Suite] = {}
"""Every registered suite by name (:func:`register_suite`)."""


def register_suite(suite: Suite, *, replace: bool = False) -> Suite:
    """Check ``suite`` (:func:`check_suite`) and register it under its name."""
    check_suite(suite)
    if suite.name in SUITES and not replace:
        raise ConfigError(f"suite {suite.name!r} is already registered")
    SUITES[suite.name] = suite
    return suite


for _suite in SUITE_DEFINITIONS:
    register_suite(_suite)


def get_suite(name: str) -> Suite:
    """The registered suite ``name``; an unknown name raises :class:`~frenzy_env.errors.UnknownNameError`
    listing the known ones."""
    if name not in SUITES:
        raise unknown_name("suite", name, SUITES)
    return SUITES[name]


# ---------------------------------------------------------------------------------------------- workloads
class TracesNotCachedError(FrenzyError):
    """Traces a suite needs that are not in the ``frenzy data`` cache; the message names the command."""


@dataclass(frozen=True)
class SuiteWorkload:
    """One workload of a suite: ``name`` (a label, shared by the synthetic ones), ``seed`` (the env's reset seed
    and the generator's), the ``generator``, its offered ``load`` and its ``source`` ("synthetic" or the
    trace's catalogue name)."""

    name: str
    seed: int
    generator: Any = field(repr=False)
    load: float
    source: str


def window_starts(num_rows: int, max_jobs: int, count: int) -> list[int]:
    """``count`` fixed window start rows spread evenly over a trace of ``num_rows`` jobs (windows of
    ``max_jobs``; they overlap only when the trace is shorter than ``count * max_jobs``)."""
    span = max(num_rows - max_jobs, 0)
    return [int(round((k + 0.5) * span / count)) for k in range(count)]


def missing_traces(suite: Suite, cache_dir: str | os.PathLike | None = None) -> list[str]:
    """The catalogue traces ``suite`` needs that are not in the cache."""
    from frenzy_env.workload import datasets

    missing = []
    for name in suite.trace_names:
        try:
            datasets.resolve(name, cache_dir=cache_dir)
        except datasets.NotCachedError:
            missing.append(name)
    return missing


def fetch_command(names: Iterable[str]) -> str:
    """``frenzy data fetch NAME ...``."""
    return "frenzy data fetch " + " ".join(names)


def suite_workloads(suite: Suite, cache_dir: str | os.PathLike | None = None) -> list[SuiteWorkload]:
    """Every workload of ``suite``, synthetic ones first, then the trace windows in order. Raises
    :class:`TracesNotCachedError` (one line naming the ``frenzy data fetch`` command) when a trace is missing."""
    from frenzy_env.workload import datasets
    from frenzy_env.workload.generators import SyntheticGenerator, TraceGenerator
    from frenzy_env.workload.traces import read_trace_cached
    from frenzy_env.world.cluster import ClusterSpec

    missing = missing_traces(suite, cache_dir)
    if missing:
        raise TracesNotCachedError(
            f"suite {suite.name} needs trace(s) not downloaded yet ({', '.join(missing)}): run "
            f"`{fetch_command(missing)}`"
        )
    cluster = ClusterSpec.preset(suite.cluster)
    out: list[SuiteWorkload] = []
    if suite.synthetic is not None:
        s = suite.synthetic
        gen = SyntheticGenerator(num_jobs=s.num_jobs, load=s.load, cluster=cluster, name="synthetic",
                                 load_mode=suite.load_mode)
        out += [SuiteWorkload("synthetic", seed, gen, s.load, "synthetic") for seed in s.seeds]
    ref = cluster.reference_gpu_type
    for t in suite.traces:
        path, fmt = datasets.resolve(t.trace, cache_dir=cache_dir), datasets.trace_format(t.trace)
        submit = read_trace_cached(path, format=fmt).submit
        starts = window_starts(submit.size, t.max_jobs, t.windows)
        for i in t.indices:
            row = starts[i]
            name = f"{t.trace}@{row}"
            gen = TraceGenerator(
                str(path), format=fmt, start=float(submit[row]), max_jobs=t.max_jobs, name=name, cluster=cluster,
                load=t.load, reference_gpu_type=ref, gpus_per_node=cluster.max_gpus_per_node(ref),
                load_mode=suite.load_mode,
            )
            out.append(SuiteWorkload(name, t.seed, gen, t.load, t.trace))
    return out
