"""frenzy-env: a Gymnasium environment of a heterogeneous GPU cluster for LLM training jobs.

``import frenzy_env`` registers the environment ids (``frenzy/HeteroCluster-v5`` and one per preset, and their
``-v4`` ids: env v4's world, :data:`frenzy_env.registration.V4_WORLD`).
"""

from __future__ import annotations

from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError, FrenzyError, TraceFormatError, UnknownNameError
from frenzy_env.registration import ENV_PRESETS, register_envs
from frenzy_env.simulator import ClusterSimulator, SimConfig
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import GPU_TYPES, ClusterSpec, ClusterState, GPUType, get_gpu_type
from frenzy_env.world.memory.estimator import estimate_memory
from frenzy_env.world.memory.planning import plan_resources
from frenzy_env.world.models import ModelSpec, get_model

__version__ = "0.1.0"

register_envs()

__all__ = [
    "GPU_TYPES", "ClusterSpec", "ClusterState", "GPUType", "get_gpu_type", "ENV_PRESETS", "FrenzyEnv",
    "ConfigError", "FrenzyError", "TraceFormatError", "UnknownNameError", "estimate_memory", "plan_resources",
    "ModelSpec", "get_model", "ClusterSimulator", "SimConfig", "JobSpec", "Workload", "register_envs",
]
