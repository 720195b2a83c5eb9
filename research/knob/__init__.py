"""The knob agent, a research model: PPO choosing the move margin of ``sia_srpt``'s integer-program planner at
each decision instant (:mod:`research.knob.agent`; several plays per workload: :mod:`research.knob.rollouts`).
Its model, trained in env v4, is ``research/knob/models/knob_frenzy_testbed.zip`` (:data:`SHIPPED`).

It was the product's second learned agent (``agents/knob.py``, ``frenzy evaluate --policies knob``,
``frenzy train --agent knob``) until issue 44, which let it ship only if it beat its best fixed-margin planner
on the validation split with a confidence interval excluding zero. Measured in env v4 it did not: over three
sampled plays of each of the 16 validation workloads the shipped checkpoint averaged 0.982 x ``sia_srpt``'s
average JCT and the run's last model 0.981 (``research/results/ppo/v11/validation_knob.csv``; training.md,
session 15), where the planner with a fixed move margin of 0.2 was 0.968 ± 0.025 and 0.1 0.969 ± 0.019
(``research/results/ppo/v12/sweep_validation.md``). Paired over the 16 workloads the shipped checkpoint is
1.7% ± 2.2% *behind* the fixed margin 0.2 (95% t interval; ahead on 5 of 16). The environment is now v5
(other dynamics) and the knob was not retrained, so the product's named planner baseline is the planner with
that best fixed margin, ``sia_srpt:move_margin=0.2`` (``frenzy evaluate --policies sia_srpt:move_margin=0.2``).

From the repository root (``research`` is a package there, not installed)::

    from research.knob import load_policy
    policy = load_policy(env)                  # the v4 model; any cluster

    frenzy evaluate --policies research.knob:knob,sia_srpt:move_margin=0.2 --workload synthetic-small --seeds 1
    python research/scripts/train_knob.py --quick --out runs/knob_smoke
    python research/scripts/train_knob.py --config research/results/ppo/configs/knob2.json --out runs/knob2

A product loader refuses a knob model with an error that points here (``agents.model_record.KNOB_REFUSED``).
"""

from research.knob.agent import (
    GPU_FEATURES,
    KNOB_VERSION,
    OBJECTIVES,
    SHIPPED,
    KnobConfig,
    KnobEnv,
    KnobPolicy,
    gpu_summary,
    is_knob_model,
    knob,
    knob_features,
    load_knob_policy,
    load_policy,
    play_plan,
    quick_config,
    save_knob_model,
    start_at_plan,
    train_knob,
)
from research.knob.rollouts import train_knob_rollouts

__all__ = [
    "GPU_FEATURES", "KNOB_VERSION", "OBJECTIVES", "SHIPPED", "KnobConfig", "KnobEnv", "KnobPolicy", "gpu_summary",
    "is_knob_model", "knob", "knob_features", "load_knob_policy", "load_policy", "play_plan", "quick_config",
    "save_knob_model", "start_at_plan", "train_knob", "train_knob_rollouts",
]
