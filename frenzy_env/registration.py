"""The registered environment ids: one per preset (:data:`ENV_PRESETS`), suffixed with the env version, each with
the budgets that scale to its workload (:data:`ID_BUDGETS`), and each preset's ids of env v5 (:data:`V5_WORLD`) and
env v4 (:data:`V4_WORLD`). :func:`register_envs` registers them with Gymnasium; ``import frenzy_env`` calls it.
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
    # GPU types no other preset has (H200, L40S, A10): a cluster to test transfer on
    EnvPreset(f"frenzy/CloudMixed-{ENV_VERSION}", "cloud-mixed", "synthetic"),
)

#: The budgets of every id of the current version: truncation at decisions and simulated hours scaled to each
#: episode's workload (:func:`frenzy_env.env.auto_budgets`), so every registered id ends whatever the policy does.
ID_BUDGETS: dict[str, Any] = {"max_steps": "auto", "max_sim_hours": "auto"}

#: The world of env v5 as keywords of the current env: each preset is registered under its v5 id with them (and
#: no budgets, as v5's ids had none), so results of v5 can be reproduced (``gym.make("frenzy/HeteroCluster-v5")``);
#: the shipped ``ppo`` model plays this world (its spaces are the v5 layout's).
V5_WORLD: dict[str, Any] = {
    "memory_truth": "residual", "efficiency": "microbatch", "interface": "cluster", "resize_cooldown": None,
    "one_action_per_instant": False, "stop_mode": "v5", "checkpoint_interval": None,
}

#: The world of env v4 as keywords of the current env (its workloads also take ``sizing="v4"``): every preset
#: is registered under its v4 id with them too (``gym.make("frenzy/HeteroCluster-v4")``).
V4_WORLD: dict[str, Any] = {**V5_WORLD, "efficiency": "flat", "memory_truth": "estimate", "layouts": "predictor"}

#: The worlds by version: the keywords that turn the current env into that version's (``frenzy evaluate --world``).
WORLDS: dict[str, dict[str, Any]] = {ENV_VERSION: {}, "v5": V5_WORLD, "v4": V4_WORLD}


def register_envs() -> None:
    """Register every :data:`ENV_PRESETS` id with :data:`ID_BUDGETS`, and its env-v5 (:data:`V5_WORLD`) and env-v4
    (:data:`V4_WORLD`) ids (idempotent)."""
    for preset in ENV_PRESETS:
        stem = preset.env_id[: -len(ENV_VERSION)]
        for env_id, extra in ((preset.env_id, ID_BUDGETS), (stem + "v5", V5_WORLD), (stem + "v4", V4_WORLD)):
            if env_id in gym.registry:
                continue
            workload = preset.workload
            if extra is V4_WORLD:  # the preset's generator as a name binds it (to the cluster), under v4's sizing
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


__all__ = ["ENV_PRESETS", "ID_BUDGETS", "EnvPreset", "V4_WORLD", "V5_WORLD", "WORLDS", "register_envs"]
