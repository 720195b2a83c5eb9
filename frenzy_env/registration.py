"""The registered environment ids: one per preset (:data:`ENV_PRESETS`), suffixed with the env version, and each
preset's id of env v4 (:data:`V4_WORLD`). :func:`register_envs` registers them with Gymnasium; ``import
frenzy_env`` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from frenzy_env.env import bind_generator
from frenzy_env.versions import ENV_VERSION
from frenzy_env.workload import make_generator
from frenzy_env.world.cluster import ClusterSpec


@dataclass(frozen=True)
class EnvPreset:
    """A registered environment id and its defaults (Minigrid-style: one dataclass per preset)."""

    env_id: str
    cluster: str
    workload: str
    kwargs: dict = field(default_factory=dict)


# ENV_VERSION (frenzy_env.versions): the suffix of every registered id and the prefix of the benchmark
# suites' names; bumped whenever dynamics or spaces change

ENV_PRESETS: tuple[EnvPreset, ...] = (
    EnvPreset(f"frenzy/HeteroCluster-{ENV_VERSION}", "frenzy-testbed", "itp-default"),
    # the default week at its recorded arrival rate: offered load ~2.1 (frenzy_env.workload.load), overloaded
    EnvPreset(f"frenzy/HeteroClusterOverloaded-{ENV_VERSION}", "frenzy-testbed", "itp-overloaded"),
    EnvPreset(f"frenzy/HeteroClusterSynthetic-{ENV_VERSION}", "frenzy-testbed", "synthetic"),
    EnvPreset(f"frenzy/HeteroClusterSmall-{ENV_VERSION}", "frenzy-testbed", "synthetic-small"),
    EnvPreset(f"frenzy/Doubling64-{ENV_VERSION}", "doubling-64", "synthetic"),
    EnvPreset(f"frenzy/PAI2020-{ENV_VERSION}", "pai-2020", "synthetic"),
    EnvPreset(f"frenzy/Large1024-{ENV_VERSION}", "large-1024", "synthetic"),
)


#: The world of env v4 as keywords of the current env (its workloads also take ``sizing="v4"``): every preset
#: is registered under its v4 id with them too, so results of v4 can be reproduced (``gym.make
#: ("frenzy/HeteroCluster-v4")``); the shipped learned agents are trained in the current version.
V4_WORLD: dict[str, Any] = {"efficiency": "flat", "memory_truth": "estimate", "layouts": "predictor"}


def register_envs() -> None:
    """Register every :data:`ENV_PRESETS` id with Gymnasium, and its env-v4 id (:data:`V4_WORLD`; idempotent)."""
    for preset in ENV_PRESETS:
        v4_id = preset.env_id[: -len(ENV_VERSION)] + "v4"
        for env_id, extra in ((preset.env_id, {}), (v4_id, V4_WORLD)):
            if env_id in gym.registry or (extra and env_id == preset.env_id):
                continue
            workload = preset.workload
            if extra:  # the preset's generator as a name binds it (to the cluster), under v4's sizing rule
                gen = make_generator(preset.workload, sizing="v4")
                workload = bind_generator(
                    gen, ClusterSpec.preset(preset.cluster), by_name=True, efficiency=V4_WORLD["efficiency"]
                )
            gym.register(
                id=env_id,
                entry_point="frenzy_env.env:FrenzyEnv",
                kwargs={"cluster": preset.cluster, "workload": workload, **preset.kwargs, **extra},
                disable_env_checker=True,
            )


__all__ = ["ENV_PRESETS", "EnvPreset", "V4_WORLD", "register_envs"]
