"""Workload generators: the seeded synthetic generator, trace replay, fixed workloads and the named presets.

A *generator* (:class:`WorkloadGenerator`: ``generate(seed) -> Workload``) makes one workload per seed;
:data:`WORKLOAD_PRESETS` names a few and :func:`make_generator` builds one from a name, a generator or a
fixed :class:`~frenzy_env.workload.spec.Workload`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from frenzy_env.errors import ConfigError, check_keys, unknown_name
from frenzy_env.workload.configs import (
    ASSIGN_BATCH_SIZES,
    DEFAULT_SIZING,
    REFERENCE_GPU_TYPE,
    _fits,
    _min_pow2,
    _sizing_types,
    check_sizing,
    default_seq_len,
    recorded_layout,
    recorded_options,
    reference_iteration_time,
)
from frenzy_env.workload.load import (
    DEFAULT_LOAD_MODE,
    busy_load_stretch,
    check_load_mode,
    cluster_seconds,
    fifo_plans,
    offered_load,
    pressure_stretch,
)
from frenzy_env.workload.spec import JobSpec, Workload, _trace_workload
from frenzy_env.workload.traces import ITP_EXTRACT, data_path, read_trace_cached
from frenzy_env.world.cluster import ClusterSpec, get_gpu_type
from frenzy_env.world.efficiency import DEFAULT_EFFICIENCY, check_efficiency
from frenzy_env.world.layouts import powers_of_two
from frenzy_env.world.models import MODELS, ModelSpec, get_model
from frenzy_env.world.throughput import DEFAULT_UTILISATION

# Job duration quantiles in seconds, computed from the real traces in shared/data (pandas
# ``Series.quantile``, linear interpolation) at the levels below:
#   "itp":    all 65,462 jobs of the 8 ITP cluster CSVs (traces/itp/cluster*.csv, column ``duration``;
#             the ITP traces only keep jobs of at least 600 s);
#   "philly": all 82,247 jobs of traces/philly/philly.csv (column ``duration``).
# The synthetic generator samples log-linearly between these knots, so its durations stop at the 99.9th
# percentile (the traces' maxima are 18 days for ITP and 54 days for Philly).
DURATION_QUANTILE_LEVELS: tuple[float, ...] = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
DURATION_QUANTILES: dict[str, tuple[float, ...]] = {
    "itp": (600.0, 672.0, 983.0, 1418.0, 3814.0, 10619.0, 16374.0, 28838.0, 58818.0, 221342.0, 677826.0),
    "philly": (1.0, 17.0, 48.0, 61.0, 115.0, 1144.0, 2932.0, 11265.0, 43646.0, 254758.0, 1186277.0),
}

# Share of synthetic jobs by model size class (the default model pool), then split evenly among the catalogue
# models of the class that fit. An ASSUMPTION, not a measurement: public LLM-cluster studies report that
# most jobs are small (Hu et al., "Characterization of Large Language Model Development in the Datacenter",
# NSDI 2024, arXiv 2403.07648: evaluation and debugging jobs dominate the job count while a few large
# pretraining jobs hold most GPU time), but no study we could cite publishes job counts by parameter count.
# Classes: < 2B parameters (GPT-2 family, BERT-large), 7-8B, 13B, 70B.
MODEL_SIZE_MIX: dict[str, float] = {"<2B": 0.40, "7-8B": 0.35, "13B": 0.15, "70B": 0.10}


def _size_class(m: ModelSpec) -> str:
    n = m.num_params / 1e9
    return "<2B" if n < 2 else ("7-8B" if n < 10 else ("13B" if n < 30 else "70B"))


#: GPU count of synthetic jobs under sizing "recorded": the recorded counts of the shipped ITP week
#: (frenzy_env/data/itp_cluster02_extract.csv, 570 jobs; column ``num_gpu``), drawn in proportion (78% of jobs
#: on 1 GPU; counts above ``max_gpus`` or above the cluster's largest GPU type drop out). Philly's jobs are
#: mostly 1-GPU too (Jeon et al., ATC 2019).
GPU_DEMAND_COUNTS: dict[int, int] = {1: 447, 2: 39, 4: 55, 8: 19, 16: 8, 32: 2}


def cluster_holds(model: ModelSpec, gpu_mix: Sequence[tuple[str, int, int]]) -> bool:
    """Whether ``model`` may appear in a synthetic workload under sizing "recorded": on some GPU type of
    ``gpu_mix`` ((type, GPUs, GPUs per node)) it has a layout (:func:`~frenzy_env.workload.configs.recorded_layout`,
    micro-batch 1) on a power-of-two count of at most a quarter of that type's GPUs (at least 1)."""
    s = default_seq_len(model)
    return any(
        recorded_layout(model, s, c, get_gpu_type(t).name, int(p)) is not None
        for t, n, p in gpu_mix
        for c in powers_of_two(max(1, int(n) // 4))
    )


def _model_weights(models: list[ModelSpec]) -> np.ndarray:
    """Draw probabilities of ``models`` under :data:`MODEL_SIZE_MIX` (classes with no model drop out)."""
    cls = [_size_class(m) for m in models]
    w = np.array([MODEL_SIZE_MIX[c] / cls.count(c) for c in cls])
    return w / w.sum()


#: Offered load of the default scenarios (:mod:`~frenzy_env.workload.load`): moderately loaded, so queues form
#: at bursts but the cluster keeps up over the window.
DEFAULT_LOAD = 0.8

#: Share of the jobs a history-trained predictor has seen: A-SRPT (Luo et al., arXiv 2501.05563) trains its
#: random forest on the first 80% of its trace and evaluates on the rest, so a history holds
#: ``0.8 / 0.2 = 4`` jobs per job of the episode (:func:`history_size`).
HISTORY_FRACTION = 0.8
#: The key of the history's random stream: ``numpy.random.default_rng([seed, HISTORY_STREAM])`` beside the
#: episode's ``default_rng(seed)`` (a label: any value other than the episode's own stream would do).
HISTORY_STREAM = 1


def history_size(num_jobs: int) -> int:
    """Jobs of the history of an episode of ``num_jobs`` jobs: ``num_jobs x 0.8 / 0.2`` (:data:`HISTORY_FRACTION`)."""
    return int(round(num_jobs * HISTORY_FRACTION / (1.0 - HISTORY_FRACTION)))


def history_seed(seed: int) -> int:
    """The seed of a history's draws for the episode of ``seed``: the first word of the history's stream
    (``numpy.random.SeedSequence([seed, HISTORY_STREAM])``), a fixed function of ``seed``."""
    return int(np.random.SeedSequence([int(seed), HISTORY_STREAM]).generate_state(1)[0])


@runtime_checkable
class WorkloadGenerator(Protocol):
    """Anything with ``generate(seed) -> Workload``.

    A generator may also have ``history(seed) -> Workload | None``: jobs that ran before the episode of
    ``seed`` and are none of its jobs, for policies that learn from finished jobs (A-SRPT's ``history="auto"``).
    :class:`SyntheticGenerator` and :class:`TraceGenerator` have one; None (or no method) means no history.
    """

    def generate(self, seed: int) -> Workload: ...


def _quantile_sample(profile: str, u: np.ndarray) -> np.ndarray:
    """Durations at uniform draws ``u``: log-linear interpolation of :data:`DURATION_QUANTILES`."""
    if profile not in DURATION_QUANTILES:
        raise unknown_name("duration profile", profile, DURATION_QUANTILES)
    levels = np.array(DURATION_QUANTILE_LEVELS)
    logq = np.log(np.array(DURATION_QUANTILES[profile]))
    return np.exp(np.interp(u * levels[-1], levels, logq))


def _check_gpu_demand(demand: object, sizing: str) -> tuple[tuple[int, float], ...]:
    """``gpu_demand`` as sorted ``(count, weight)`` pairs, or a ConfigError naming the bad entry."""
    if sizing != "recorded":
        raise ConfigError(f"gpu_demand applies to sizing 'recorded' only; got sizing={sizing!r}")
    try:
        pairs = tuple((k, v) for k, v in (demand.items() if isinstance(demand, dict) else demand))  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ConfigError(f"gpu_demand must be (GPU count, weight) pairs, got {demand!r}") from None
    if not pairs:
        raise ConfigError("gpu_demand must name at least one GPU count, got none")
    out = []
    for g, w in pairs:
        if isinstance(g, bool) or int(g) != g or g < 1 or int(g) & (int(g) - 1):
            raise ConfigError(f"gpu_demand: GPU count must be a power of two >= 1, got {g!r}")
        if not float(w) > 0:
            raise ConfigError(f"gpu_demand: weight of {int(g)} GPUs must be positive, got {w!r}")
        out.append((int(g), float(w)))
    if len({g for g, _ in out}) != len(out):
        raise ConfigError(f"gpu_demand names a GPU count twice: {demand!r}")
    return tuple(sorted(out))


@dataclass(frozen=True)
class SyntheticGenerator:
    """Seeded synthetic workload: Poisson arrivals at a given load, catalogue models, trace-like durations.

    Each job: a model drawn from ``models`` (uniformly when given; default: catalogue models with a
    configuration that fits ``max_gpus`` reference GPUs, by model size as :data:`MODEL_SIZE_MIX` says),
    a batch uniformly from the model's batches in
    :data:`ASSIGN_BATCH_SIZES` that fit, ``seq_len = min(max_seq_len, 2048)``; it asks for its minimum
    power-of-two GPU count times 1, 2 or 4 (probabilities 0.5, 0.3, 0.2; capped at ``max_gpus``); its
    duration at that count on the reference GPU type is drawn from the ``duration_profile`` quantiles
    (:data:`DURATION_QUANTILES`, log-linear between knots) and turned into iterations with
    :func:`reference_iteration_time` (at ``utilisation`` and ``efficiency``, the speed model's options: pass the
    simulator's, e.g. ``efficiency="microbatch"``, so that the drawn durations hold there). A fraction
    ``recurring_fraction`` of jobs belongs to one of ``round(num_jobs * recurring_fraction / mean_group_size)``
    recurring groups: same configuration and GPU count as the group, duration = the group's base duration x lognormal(0,
    ``group_sigma``).

    ``load`` is the offered load of :mod:`~frenzy_env.workload.load` (speed- and memory-aware: each job's work
    over the cluster's capacity for it, summed, over the arrival window), and the generated workload has
    exactly that load on ``cluster``: arrivals are a Poisson process of rate ``load / mean_j(W_j / C_j)``
    conditioned on its window, i.e. the ``n - 1`` exponential gaps are scaled to sum to ``(n - 1) / rate``
    (given the number of arrivals in a window, Poisson arrival times are uniform order statistics, whose
    spacings are normalised exponentials). The first job arrives at 0. (Counting every GPU as one of the reference type
    instead would make "0.7" about 1.2 on frenzy-testbed.)

    ``load_mode`` (default ``"fluid"``: ``load`` is the offered load above; ``"busy"``: ``load`` is the share of the
    cluster's GPUs that FIFO keeps busy over the arrival window, :mod:`~frenzy_env.workload.load`, "Busy load";
    ``"wait"``: ``load`` is the share of the jobs that wait over a minute to start under FIFO, "Wait load" there):
    in modes ``"busy"`` and ``"wait"`` the arrival times above are multiplied by the factor
    :func:`~frenzy_env.workload.load.pressure_stretch` finds, every other draw unchanged; a load FIFO cannot reach
    with these jobs raises :class:`~frenzy_env.errors.ConfigError`. A history (:meth:`history`) keeps the fluid
    load's times.

    ``sizing="recorded"`` (the default since env v5; ``"v4"`` is the rule above) sizes jobs like trace jobs under the
    rule of the same name (:mod:`~frenzy_env.workload.configs`): a job's GPU count is drawn from
    ``gpu_demand`` (``(count, weight)`` pairs of powers of two; default None: :data:`GPU_DEMAND_COUNTS`, the
    shipped ITP week's recorded counts), at most ``max_gpus`` and the cluster's largest GPU-type count, its sizing
    type among the cluster's types with at least that many GPUs in proportion to their counts, its model among
    those that can be sized there, by :data:`MODEL_SIZE_MIX` (classes with no
    such model drop out; uniformly when ``models`` is given), and its batch by the rule's micro-batch and
    accumulation draws (:func:`~frenzy_env.workload.configs.recorded_options`). With the default model pool a
    model is eligible only if the cluster holds it on a quarter of one GPU type (:func:`cluster_holds`): on
    frenzy-testbed (32 GPUs per type) the two 70B models drop out. Four uniforms per template and job
    (count, type, model, batch) replace the three of the v4 rule; the other draws are the v4 rule's.
    """

    num_jobs: int = 200
    load: float = 0.8
    cluster: ClusterSpec | str = "frenzy-testbed"
    models: tuple[str, ...] | None = None
    duration_profile: str = "itp"
    recurring_fraction: float = 0.3
    mean_group_size: float = 5.0
    group_sigma: float = 0.1
    max_gpus: int = 64
    name: str = "synthetic"
    utilisation: float = DEFAULT_UTILISATION
    sizing: str = DEFAULT_SIZING
    efficiency: str = DEFAULT_EFFICIENCY
    gpu_demand: tuple[tuple[int, float], ...] | None = None
    load_mode: str = DEFAULT_LOAD_MODE

    def __post_init__(self) -> None:
        check_sizing(self.sizing)
        check_efficiency(self.efficiency)
        check_load_mode(self.load_mode)
        if self.gpu_demand is not None:
            object.__setattr__(self, "gpu_demand", _check_gpu_demand(self.gpu_demand, self.sizing))
        if int(self.num_jobs) != self.num_jobs or self.num_jobs < 1:
            raise ConfigError(f"num_jobs must be a positive integer, got {self.num_jobs!r}")
        if not self.load > 0:
            raise ConfigError(f"load must be positive, got {self.load!r}")
        if not 0.0 <= self.recurring_fraction <= 1.0:
            raise ConfigError(f"recurring_fraction must be in [0, 1], got {self.recurring_fraction!r}")
        if not self.mean_group_size >= 1:
            raise ConfigError(f"mean_group_size must be >= 1, got {self.mean_group_size!r}")
        if self.group_sigma < 0:
            raise ConfigError(f"group_sigma must be >= 0, got {self.group_sigma!r}")
        if int(self.max_gpus) != self.max_gpus or self.max_gpus < 1:
            raise ConfigError(f"max_gpus must be a positive integer, got {self.max_gpus!r}")
        if self.duration_profile not in DURATION_QUANTILES:
            raise unknown_name("duration profile", self.duration_profile, DURATION_QUANTILES)
        if self.models is not None:
            object.__setattr__(
                self,
                "models",
                tuple(get_model(m).name if isinstance(m, ModelSpec) else m for m in self.models),
            )
            for m in self.models:  # type: ignore[union-attr]
                get_model(m)

    def _configs(self, cluster: ClusterSpec) -> tuple[str, int, int, list]:
        ref = cluster.reference_gpu_type
        per_node = cluster.max_gpus_per_node(ref)
        cap = min(int(self.max_gpus), cluster.gpus_of_type(ref))
        cap = 1 << (cap.bit_length() - 1)  # largest power of two <= cap
        pool = [get_model(m) for m in (self.models if self.models is not None else MODELS)]
        table = []  # (model, [(batch, seq, min_gpus)])
        for m in pool:
            s = default_seq_len(m)
            opts = [(b, s, mn) for b in ASSIGN_BATCH_SIZES if (mn := _min_pow2(m, b, s, ref, per_node, cap))]
            if opts:
                table.append((m, opts))
        if not table:
            raise ConfigError(
                f"no model of {', '.join(m.name for m in pool)} fits {cap} GPUs of {ref} "
                f"on cluster {cluster.name!r}"
            )
        return ref, per_node, cap, table

    def _recorded_configs(self, cluster: ClusterSpec) -> tuple[str, int, Callable[[np.ndarray], tuple]]:
        """Reference type, its node size and ``draw(u) -> (model, batch, seq, GPUs)`` of sizing "recorded" from
        four uniforms ``u`` (GPU count, sizing type, model, micro-batch and steps); see the class docstring."""
        ref = cluster.reference_gpu_type
        per_node = cluster.max_gpus_per_node(ref)
        mix = [(t, cluster.gpus_of_type(t), cluster.max_gpus_per_node(t)) for t in cluster.gpu_types]
        top = min(int(self.max_gpus), max(c for _, c, _ in mix))
        weights = dict(self.gpu_demand) if self.gpu_demand is not None else GPU_DEMAND_COUNTS
        demand = {g: c for g, c in weights.items() if g <= top}
        if not demand and self.gpu_demand is not None:
            raise ConfigError(
                f"gpu_demand {self.gpu_demand!r}: no count fits max_gpus={self.max_gpus} and the largest GPU type of "
                f"cluster {cluster.name!r} ({max(c for _, c, _ in mix)} GPUs)"
            )
        demand = demand or {1: 1}
        counts = np.array(list(demand), dtype=np.int64)  # (C,)
        cum_g = np.cumsum(list(demand.values()), dtype=np.float64)
        cum_g /= cum_g[-1]
        pool = [get_model(m) for m in (self.models if self.models is not None else MODELS)]
        if self.models is None:  # the size mix scaled to the cluster
            pool = [m for m in pool if cluster_holds(m, mix)]
        cache: dict[tuple, tuple] = {}

        def options(g: int, gpu: str, pn: int) -> tuple:
            key = (g, gpu, pn)
            if key not in cache:
                feas = [(m, o) for m in pool if (o := recorded_options(m, default_seq_len(m), g, gpu, pn))]
                w = _model_weights([m for m, _ in feas]) if feas and self.models is None else np.ones(len(feas))
                cache[key] = (feas, np.cumsum(w) / max(float(np.sum(w)), 1e-300))
            return cache[key]

        def draw(u: np.ndarray) -> tuple[ModelSpec, int, int, int]:
            g = int(counts[min(int(np.searchsorted(cum_g, u[0], side="right")), len(counts) - 1)])
            gpu, pn = _sizing_types(np.array([g]), u[1:2], mix, ref, per_node)[0]
            feas, cum = options(g, gpu, pn)
            if not feas:
                feas, cum = options(g, ref, per_node)
            if not feas:
                raise ConfigError(
                    f"sizing rule 'recorded': no model of {', '.join(m.name for m in pool) or '(none)'} can be "
                    f"sized for {g} GPUs of {gpu} or {ref} on cluster {cluster.name!r}; pass other models"
                )
            m, opts = feas[min(int(np.searchsorted(cum, u[2], side="right")), len(feas) - 1)]
            w = np.cumsum([o[3] for o in opts])
            b = opts[min(int(np.searchsorted(w, u[3] * w[-1], side="right")), len(opts) - 1)][0]
            return m, int(b), default_seq_len(m), g

        return ref, per_node, draw

    def generate(self, seed: int) -> Workload:
        return self._draw(seed, history=False)

    def history(self, seed: int) -> Workload:
        """The jobs that ran before the episode of ``seed``: :func:`history_size` jobs of the same world -- the
        recurring groups of ``seed`` (each group's configuration, GPU count and base duration) -- with their own
        draws (group membership, noise, the other jobs' configurations and durations, arrivals) from the stream
        ``numpy.random.default_rng([seed, HISTORY_STREAM])``, never from the episode's ``default_rng(seed)``.
        A draw of another seed would not do: group ids are positions in each draw's own templates, so group 3 of
        another seed is another configuration."""
        return self._draw(seed, history=True)

    def _draw(self, seed: int, history: bool) -> Workload:
        cluster = ClusterSpec.preset(self.cluster) if isinstance(self.cluster, str) else self.cluster
        recorded = self.sizing == "recorded"
        if recorded:
            ref, per_node, draw_recorded = self._recorded_configs(cluster)
        else:
            ref, per_node, cap, table = self._configs(cluster)
            if self.models is None:
                cum = np.cumsum(_model_weights([m for m, _ in table]))
            else:
                cum = np.arange(1, len(table) + 1) / len(table)
        n = int(self.num_jobs)
        rng = np.random.default_rng(seed)
        n_groups = (
            max(1, round(n * self.recurring_fraction / self.mean_group_size))
            if self.recurring_fraction
            else 0
        )
        # draws, all up front and in a fixed order: templates for groups then jobs, durations, noise, gaps
        # v4: model, batch, size multiplier; recorded: GPU count, sizing type, model, micro-batch and steps
        u_cfg = rng.random((n_groups + n, 4 if recorded else 3))
        u_dur = rng.random(n_groups + n)
        in_group = rng.random(n) < self.recurring_fraction if n_groups else np.zeros(n, dtype=bool)
        group_of = rng.integers(0, max(n_groups, 1), size=n)
        noise = rng.lognormal(0.0, self.group_sigma, size=n) if self.group_sigma > 0 else np.ones(n)
        gaps = rng.exponential(1.0, size=n)
        if history:  # the groups' templates stay (the first rows); every per-job draw from the history's stream
            n = history_size(n)
            rng = np.random.default_rng([seed, HISTORY_STREAM])
            u_cfg = np.concatenate([u_cfg[:n_groups], rng.random((n, u_cfg.shape[1]))])
            u_dur = np.concatenate([u_dur[:n_groups], rng.random(n)])
            in_group = rng.random(n) < self.recurring_fraction if n_groups else np.zeros(n, dtype=bool)
            group_of = rng.integers(0, max(n_groups, 1), size=n)
            noise = rng.lognormal(0.0, self.group_sigma, size=n) if self.group_sigma > 0 else np.ones(n)
            gaps = rng.exponential(1.0, size=n)
        base_dur = _quantile_sample(self.duration_profile, u_dur)  # (G + n,)

        def config(k: int) -> tuple[ModelSpec, int, int, int]:
            if recorded:
                return draw_recorded(u_cfg[k])
            m, opts = table[min(int(np.searchsorted(cum, u_cfg[k, 0], side="right")), len(table) - 1)]
            b, s, mn = opts[min(int(u_cfg[k, 1] * len(opts)), len(opts) - 1)]
            mult = 1 if u_cfg[k, 2] < 0.5 else (2 if u_cfg[k, 2] < 0.8 else 4)
            g = mn * mult
            while g > mn and (g > cap or not _fits(m, b, s, g, ref, per_node)):
                g //= 2
            return m, b, s, g

        templates = [config(k) for k in range(n_groups)]
        rows = []
        for i in range(n):
            if in_group[i]:
                gid = int(group_of[i])
                m, b, s, g = templates[gid]
                dur = float(base_dur[gid] * noise[i])
            else:
                gid = None
                m, b, s, g = config(n_groups + i)
                dur = float(base_dur[n_groups + i])
            rows.append((m, b, s, g, dur, gid))
        iters = np.array(
            [
                d / reference_iteration_time(
                    m, b, s, g, gpu=ref, gpus_per_node=per_node, utilisation=self.utilisation,
                    efficiency=self.efficiency,
                )
                for m, b, s, g, d, _ in rows
            ]
        )  # (n,) work W_j
        secs, _ = cluster_seconds(
            [r[:4] for r in rows], iters, cluster, utilisation=self.utilisation, max_gpus=int(self.max_gpus),
            efficiency=self.efficiency,
        )  # (n,) W_j / C_j; every configuration fits the reference type (recorded: a type; nan where none)
        rate = self.load / float(np.nanmean(secs))  # arrivals per second
        if n > 1:
            gaps = gaps[:-1] * ((n - 1) / rate / float(gaps[:-1].sum()))  # window T = n / rate exactly
        submit = np.concatenate([[0.0], np.cumsum(gaps[: n - 1])])  # (n,)
        busy = ""
        if self.load_mode != "fluid" and not history:  # a history is read for its jobs' work, not its times
            gpus, run_s = fifo_plans(
                [r[:4] for r in rows], iters, cluster, utilisation=self.utilisation, max_gpus=int(self.max_gpus),
                efficiency=self.efficiency,
            )
            try:
                stretch = pressure_stretch(submit, gpus, run_s, cluster.type_capacity, self.load,
                                           measure=self.load_mode)
            except ConfigError as exc:
                raise ConfigError(f"{self.name}, seed {seed}: {exc}") from None
            submit = submit * stretch
            busy = f", load mode {self.load_mode} (the fluid load's arrival times x {stretch:.4g})"
        jobs = []
        for i, (m, b, s, g, _, gid) in enumerate(rows):
            jobs.append(
                JobSpec(
                    job_id=i,
                    submit_time=float(submit[i]),
                    model=m,
                    batch_size=b,
                    seq_len=s,
                    iterations=float(iters[i]),
                    requested_gpus=g,
                    group=gid,
                    name=f"syn-{i}",
                )
            )
        return Workload(
            f"{self.name}-history" if history else self.name,
            tuple(jobs),
            source=("history of " if history else "") + f"synthetic: seed {seed}, load {self.load}, cluster "
            f"{cluster.name}, durations {self.duration_profile}" + (", sizing recorded" if recorded else "") + busy,
        )


@dataclass(frozen=True)
class TraceGenerator:
    """A trace replayed as recorded; only the assigned fields (model, batch, sequence) change per seed.

    ``cluster``: the cluster whose GPU mix sizes the assigned models (:mod:`~frenzy_env.workload.configs`;
    ``None``: the reference type only); an env binds it to its own cluster. ``load``: when given, the arrival
    times (after ``load_scale``) are stretched or compressed so that the workload's offered load
    (:mod:`~frenzy_env.workload.load`) on ``cluster`` is exactly ``load`` (it depends on the seed's model
    assignment, so the factor is computed per seed and recorded in :attr:`Workload.source`). ``sizing``: the
    rule of the assigned fields, ``"recorded"`` (the default since env v5) or ``"v4"``
    (:mod:`~frenzy_env.workload.configs`). ``efficiency``: the speed model under which the offered load is
    computed (the simulator's: an env binds it to its own ``efficiency``). ``load_mode`` (default ``"fluid"``:
    ``load`` is the offered load; ``"busy"``: the arrival times are stretched further, by
    :func:`~frenzy_env.workload.load.busy_stretch`, until FIFO keeps a share ``load`` of the cluster's GPUs busy
    over the arrival window, :mod:`~frenzy_env.workload.load`, "Busy load"; ``"wait"``: stretched until a share
    ``load`` of the jobs wait over a minute to start under FIFO, "Wait load" there; both need a ``load``, and a
    load FIFO cannot reach raises :class:`~frenzy_env.errors.ConfigError` naming the window).
    """

    path: str
    format: str = "itp"
    start: float | None = None
    end: float | None = None
    max_jobs: int | None = None
    load_scale: float = 1.0
    reference_gpu_type: str = REFERENCE_GPU_TYPE
    gpus_per_node: int = 8
    models: tuple[str, ...] | None = None
    name: str | None = None
    cluster: ClusterSpec | str | None = None
    load: float | None = None
    sizing: str = DEFAULT_SIZING
    efficiency: str = DEFAULT_EFFICIENCY
    load_mode: str = DEFAULT_LOAD_MODE

    def __post_init__(self) -> None:
        check_sizing(self.sizing)
        check_efficiency(self.efficiency)
        check_load_mode(self.load_mode)
        if self.load_mode != "fluid" and self.load is None:
            raise ConfigError(f"load_mode {self.load_mode!r} needs a load: a TraceGenerator without one replays "
                              "recorded times")
        if self.load is not None and not (isinstance(self.load, (int, float)) and self.load > 0):
            raise ConfigError(f"load must be a positive number or None, got {self.load!r}")
        if self.load is not None and self.cluster is None:
            raise ConfigError("a TraceGenerator with a target load needs a cluster")

    def generate(self, seed: int) -> Workload:
        wl = Workload.from_csv(
            self.path,
            format=self.format,
            start=self.start,
            end=self.end,
            max_jobs=self.max_jobs,
            load_scale=self.load_scale,
            seed=seed,
            name=self.name,
            reference_gpu_type=self.reference_gpu_type,
            gpus_per_node=self.gpus_per_node,
            models=self.models,
            cluster=self.cluster,
            sizing=self.sizing,
        )
        if self.load is None:
            return wl
        cluster = ClusterSpec.preset(self.cluster) if isinstance(self.cluster, str) else self.cluster
        rho = offered_load(wl, cluster, efficiency=self.efficiency)
        if not rho > 0 or not np.isfinite(rho):
            raise ConfigError(f"{self.path}: cannot scale to load {self.load}: the offered load is {rho}")
        stretch = rho / float(self.load)  # times x stretch: the window grows by stretch, the load shrinks by it
        jobs = tuple(dataclasses.replace(j, submit_time=j.submit_time * stretch) for j in wl.jobs)
        if self.load_mode != "fluid":
            try:
                busy = busy_load_stretch(Workload(wl.name, jobs), cluster, float(self.load), efficiency=self.efficiency,
                                         measure=self.load_mode)
            except ConfigError as exc:
                raise ConfigError(f"{wl.name}, seed {seed}: {exc}") from None
            stretch *= busy
            jobs = tuple(dataclasses.replace(j, submit_time=j.submit_time * stretch) for j in wl.jobs)
            what = {
                "busy": f"FIFO keeps {self.load:g} of {cluster.name}'s GPUs busy over the arrival window",
                "wait": f"{self.load:g} of the jobs wait over a minute under FIFO on {cluster.name}",
            }[self.load_mode]
            return Workload(
                wl.name,
                jobs,
                source=f"{wl.source}; arrival times x {stretch:.4g} (load_mode {self.load_mode}: {what}; offered "
                f"load {rho:.3g} -> {rho / stretch:.3g})",
            )
        return Workload(
            wl.name,
            jobs,
            source=f"{wl.source}; arrival times x {stretch:.4g} (offered load {rho:.3g} -> {self.load:g} on "
            f"{cluster.name})",
        )

    def history(self, seed: int) -> Workload | None:
        """The jobs that ran before the episode of ``seed``: the trace's own jobs outside the window, else a
        synthetic stand-in. Never a job of the window: the window's rows (:meth:`TraceTable.window_rows`) are
        excluded by position.

        * The :func:`history_size` rows just before the window (fewer where the file has fewer), when the window
          starts after the file's first row: the jobs that really ran before it.
        * Else (the window starts at the file's first row) the :func:`history_size` rows just after the window,
          when it ends before the file's last row: held-out jobs of the same trace (later ones: the predictor
          learns from the same cluster's jobs, none of which is in the episode).
        * Else (the window is the whole file, as for ``itp-default``'s one-week extract) a stand-in with no trace
          row in it: :func:`history_size` jobs of a :class:`SyntheticGenerator` on this generator's cluster (its
          sizing rule, models and efficiency), durations from the trace family's quantiles
          (:data:`DURATION_QUANTILES`, ``"philly"`` for the Philly format, else ``"itp"``: 65,462 jobs of 8 ITP
          clusters), GPU counts from :data:`GPU_DEMAND_COUNTS` and no recurring groups (trace jobs record none),
          drawn with :func:`history_seed`. None without a cluster.

        Trace rows are assigned models with :func:`history_seed` (not the episode's seed); their arrival times
        start at 0 and are not rescaled (a history is read for its jobs' work, not its times).
        """
        table = read_trace_cached(self.path, format=self.format)
        rows = table.window_rows(start=self.start, end=self.end, max_jobs=self.max_jobs)
        k = history_size(rows.size)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        name = f"{self.name or Path(self.path).stem}-history"
        if lo == 0 and hi == table.submit.size:
            return self._stand_in(seed, k, name)
        idx = np.arange(max(0, lo - k), lo) if lo > 0 else np.arange(hi, min(table.submit.size, hi + k))
        mix = None
        if self.cluster is not None:
            spec = ClusterSpec.preset(self.cluster) if isinstance(self.cluster, str) else self.cluster
            mix = [(t, spec.gpus_of_type(t), spec.max_gpus_per_node(t)) for t in spec.gpu_types]
        wl = _trace_workload(
            table.rows_from_zero(idx), seed=history_seed(seed), name=name, reference_gpu_type=self.reference_gpu_type,
            gpus_per_node=self.gpus_per_node, models=self.models, gpu_mix=mix, sizing=self.sizing,
        )
        where = "before" if lo > 0 else "after"
        return Workload(name, wl.jobs, source=f"{wl.source}; rows {idx[0] + 1}-{idx[-1] + 1}, {where} the window "
                        f"(rows {lo + 1}-{hi})")

    def _stand_in(self, seed: int, num_jobs: int, name: str) -> Workload | None:
        """The synthetic history of a window that is the whole file (:meth:`history`); None without a cluster."""
        if self.cluster is None:
            return None
        gen = SyntheticGenerator(
            num_jobs=num_jobs, load=DEFAULT_LOAD, cluster=self.cluster, models=self.models,
            duration_profile="philly" if self.format == "philly" else "itp", recurring_fraction=0.0, name=name,
            sizing=self.sizing, efficiency=self.efficiency,
        )
        wl = gen.generate(history_seed(seed))
        return Workload(name, wl.jobs, source=f"stand-in for the jobs before {self.path} (the window is the whole "
                        f"file): {wl.source}")


@dataclass(frozen=True)
class FixedGenerator:
    """Always the same workload, whatever the seed."""

    workload: Workload = field(repr=False)

    def generate(self, seed: int) -> Workload:
        return self.workload


WORKLOAD_PRESETS: dict[str, WorkloadGenerator] = {
    # one week of ITP cluster02 (570 jobs, frenzy_env/data/ATTRIBUTION.md); models re-drawn per seed, sized
    # for the cluster's GPU mix; arrivals stretched to a moderate offered load of 0.8 (frenzy_env.workload.load)
    "itp-default": TraceGenerator(
        str(data_path(ITP_EXTRACT)), format="itp", name="itp-default", cluster="frenzy-testbed", load=DEFAULT_LOAD
    ),
    # the same week at its recorded arrival times: overloaded (offered load above 1 on frenzy-testbed)
    "itp-overloaded": TraceGenerator(
        str(data_path(ITP_EXTRACT)), format="itp", name="itp-overloaded", cluster="frenzy-testbed"
    ),
    "synthetic": SyntheticGenerator(num_jobs=200, load=DEFAULT_LOAD, name="synthetic"),
    "synthetic-small": SyntheticGenerator(num_jobs=30, load=DEFAULT_LOAD, name="synthetic-small"),
    # the same workloads as itp-default and synthetic (sizing rule "recorded"), under names of their own
    "itp-recorded": TraceGenerator(
        str(data_path(ITP_EXTRACT)),
        format="itp",
        name="itp-recorded",
        cluster="frenzy-testbed",
        load=DEFAULT_LOAD,
        sizing="recorded",
    ),
    "synthetic-recorded": SyntheticGenerator(
        num_jobs=200, load=DEFAULT_LOAD, name="synthetic-recorded", sizing="recorded"
    ),
}


def make_generator(name_or_obj: str | WorkloadGenerator | Workload, **overrides: object) -> WorkloadGenerator:
    """A generator from a preset name, a generator, or a fixed :class:`Workload`.

    ``overrides`` replace fields of a dataclass generator (e.g. ``make_generator("synthetic",
    cluster=spec, num_jobs=50)``, ``make_generator("itp-default", sizing="recorded")``); an unknown field raises
    :class:`~frenzy_env.errors.ConfigError`.
    """
    if isinstance(name_or_obj, str):
        if name_or_obj not in WORKLOAD_PRESETS:
            raise unknown_name("workload preset", name_or_obj, WORKLOAD_PRESETS)
        gen: WorkloadGenerator = WORKLOAD_PRESETS[name_or_obj]
    elif isinstance(name_or_obj, Workload):
        gen = FixedGenerator(name_or_obj)
    elif isinstance(name_or_obj, WorkloadGenerator):
        gen = name_or_obj
    else:
        raise ConfigError(
            "workload must be a preset name, a Workload or an object with generate(seed), "
            f"got {name_or_obj!r}"
        )
    if overrides:
        if not dataclasses.is_dataclass(gen):
            raise ConfigError(f"cannot override fields of {type(gen).__name__}: it is not a dataclass")
        check_keys(f"{type(gen).__name__} field", overrides, [f.name for f in dataclasses.fields(gen)])
        gen = dataclasses.replace(gen, **overrides)  # type: ignore[type-var]
    return gen
