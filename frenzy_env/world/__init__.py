"""The world model: what the simulated cluster and its jobs are made of.

``models`` (LLM architectures), ``cluster`` (GPU types, nodes, cluster presets and the mutable cluster state),
``layouts`` (the legal data/tensor-parallel layouts), ``placement`` (placers of GPUs on nodes),
``efficiency`` (the micro-batch efficiency curves), ``efficiency_fits`` (the measurements behind the per-GPU-type
curves and their fits), ``throughput`` (iteration time of a plan) and ``memory/``
(the memory estimator, MARP's plan search, the memory truth and the measured cases). Nothing here imports the
simulator or Gymnasium.
"""
