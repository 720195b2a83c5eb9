"""How fast the environment, the simulator, the baselines and MARP are: the measurements behind ``frenzy
benchmark`` (which only parses its flags and calls :func:`run_benchmark` and :func:`write_outputs`).

Sections (:data:`SECTIONS`; ``frenzy benchmark --sections``, default all):

``steps``
    environment steps per second with masked-random actions on ``frenzy/HeteroCluster-v6`` and
    ``frenzy/Large1024-v6``, Gymnasium's ``CartPole-v1`` steps per second in the same run, and their ratio
    (how many CartPole steps one environment step costs: a machine-independent figure). Every rate is the
    best of ``repeats`` interleaved rounds, so a busy machine disturbs the ratio less.
``replay``
    jobs per second and wall time of every baseline replaying traces on ``large-1024`` through the
    environment (``run_episode``'s loop, with decision latencies). With ``data_dir`` (``--data-dir``, the shared
    data folder) the full Philly trace (82,247 jobs) and the ITP cluster traces; without it the shipped ITP extract.
``latency``
    decision latency per policy (median, p99) against cluster size (64, 1,024, 10,000 GPUs) and queue
    length (10, 100, 1,000 queued jobs) on a half-busy cluster.
``marp``
    MARP estimates per second: scalar ``estimate_memory``, plans per second of ``estimate_memory_array``
    and whole ``plan_resources`` searches per second.
``scaling``
    wall time of a synthetic replay (Frenzy baseline, ``large-1024``) against the number of jobs (1k, 10k,
    100k) and against the number of GPUs, each in a fresh process, with the fitted growth exponent and the
    peak resident memory of each run (the 100,000-job one is the memory figure).
``train``
    end-to-end PPO training throughput, printed as ``ppo training: N decisions/s``: the shipped configuration
    of :class:`agents.ppo.TrainConfig` (16 in-process envs, reference runs, rollouts and 2-epoch updates;
    warm start and validation left out) for a few updates (agents.ppo is imported only by this section), and
    the same guided by ``sia_srpt``'s planner (``ppo training guided by sia_srpt``).
``sia``
    wall time of each Sia round (``SiaPolicy.plan_round``), median and p99, over one episode of ``sia`` and
    ``sia[requested]`` on frenzy-testbed (96 GPUs, the first ``sia_jobs`` jobs of the ITP week) and of ``sia`` on
    large-1024 (the synthetic preset, at most ``sia_steps`` decisions).

:mod:`frenzy_env.benchmark.measure` runs the sections; :mod:`frenzy_env.benchmark.report` writes
``benchmark.csv`` (section, case, metric, value, unit), ``benchmark.json`` (rows and the machine),
``benchmark.md`` (the summary table) and ``benchmark.png`` (scaling curves, latency, step rates).
No number here is asserted anywhere; they are measurements of the machine they ran on.
"""

from __future__ import annotations

from frenzy_env.benchmark.measure import (
    MODES,
    SECTIONS,
    BenchConfig,
    Results,
    Row,
    fit_exponent,
    machine_info,
    run_benchmark,
    scaled_cluster,
)
from frenzy_env.benchmark.report import plot_results, summary_table, write_outputs

__all__ = [
    "MODES", "SECTIONS", "BenchConfig", "Results", "Row", "fit_exponent", "machine_info", "run_benchmark",
    "scaled_cluster", "plot_results", "summary_table", "write_outputs",
]
