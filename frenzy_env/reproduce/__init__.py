"""Reproduce the three papers' claims on this environment, each paper in its own setting: the paper's number
beside ours, with a 95% CI, the comparator named and a one-line reason for each verdict.

Scenarios (:data:`runner.SCENARIOS`, one module of :mod:`.scenarios` per paper or study; each claim row names its
scenario):

* ``frenzy_sia``: Frenzy vs Sia restricted to each job's requested GPU count (``requested_only=True``, how the
  Frenzy paper ran Sia: user-specified counts) as the headline; elastic Sia (which chooses counts itself) as
  context with GPU-hours beside JCT; Frenzy vs the opportunistic FIFO baseline; on a Philly-derived window and
  an ITP-derived workload on the "frenzy-testbed" cluster, both at offered load
  :data:`generators.FRENZY_SIA_LOAD` by the env's own measure; scheduling overhead (wall time per ``predict``
  call) of Frenzy vs requested-count Sia from the same episodes.
* ``rankings``: Frenzy with each MARP plan ranking (:data:`frenzy_env.world.memory.planning.RANKINGS`) against
  requested-count Sia.
* ``asrpt``: A-SRPT's own setting: a homogeneous 64-GPU cluster (its model has identical GPUs), recurring
  distributed jobs of 2-8 GPUs (:data:`generators.ASRPT_GPU_DEMAND`, 80% in recurring groups) at offered load
  1.2, a "testbed" and a larger "simulation" size (:func:`generators.asrpt_generator`; full size in ``--quick``
  too). Each evaluated workload is the last 20% of a draw (:class:`generators.HistorySplit`); its first 80% is
  the history the paper trains the random forest on. A-SRPT (forest trained on the history) against strict FIFO
  (``fifo_strict``, A-SRPT's queue discipline) and backfilling FIFO, and against the paper's comparators on
  A-SRPT's own placement and forest (``spwf``, ``fifo_he``, ``sjf_he``: :mod:`baselines.queue_order`); the
  forest cold and trained against perfect prediction. The details give the contention: the share of jobs that
  wait over :data:`runner.WAIT_THRESHOLD_S` under ``fifo_strict``.
* ``doubling``: Capes et al.'s setting: 64 V100s ("doubling-64"), copies of one job that fits one GPU
  (:class:`generators.CopiesGenerator`: GPT-2 large, batch 32, 8 h on one V100, 94% scaling efficiency at 8 GPUs
  in the throughput model), Poisson arrivals at low, moderate and extreme contention
  (:data:`scenarios.doubling.DOUBLING_LOADS`); doubling (precompute, exploratory) against a fixed 8 GPUs per job,
  and against the unit-step greedy.
* ``predictors``: Frenzy and FIFO with the env's memory predictor set to the paper's MARP formula
  (``"frenzy"``), the extended estimator and the oracle (the truth): avg JCT, GPU-hours, OOM failures and
  GPU-hours lost to them, as a table, and the avg JCT cost of each predictor against the oracle as rows.
* ``marp``: MARP accuracy ``1 - |predicted - measured| / measured`` on published measurements (the shipped
  ``frenzy_env/data/memory_cases.csv`` and a calibration CSV; see ``scripts/validate_memory.py``): the paper's
  formula ("frenzy") on the cases inside its scope (:data:`scenarios.marp.MARP_SCOPE`, the paper's claim) and,
  apart, outside it; the extended estimator on every case and on the cases it was not fitted on.

Verdicts follow one written rule (:data:`verdicts.VERDICT_RULE`, :func:`verdicts.verdict`): "reproduced" only
when our CI contains the paper's value or lies within +-25% of it (a range: overlaps it); each row has a kind
(paper claim, extension, control) and only paper claims are the papers'.

Every comparison is paired by seed: the same workload draw under each policy; the per-seed relative
difference is averaged and given a t-distribution 95% confidence interval over seeds. Policies that are not
registered (or refuse the keywords) are reported as "not tested" rather than failing the run. The outputs
(Markdown, CSV, plots) are written by :mod:`frenzy_env.reproduce.report`.

The modules: :mod:`.runner` (the config, the episodes, :func:`runner.run_reproduce`), :mod:`.verdicts` (the
statistics and the verdict rule), :mod:`.generators` (the scenarios' workloads), :mod:`.scenarios` (one module
per paper, each registering its scenarios with :func:`runner.register_scenario`; this package imports them, so
that the runner finds every scenario by name) and :mod:`.report`.
"""

# each registers its scenarios in the runner's table (the scenarios import the runner, never the other way)
from frenzy_env.reproduce.scenarios import asrpt, doubling, frenzy_sia, marp, predictors  # noqa: F401
