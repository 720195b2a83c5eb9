"""Frenzy as its paper plans (opt-in): MARP's (type, d, t) search without accumulation, the
``min_gpus_fastest`` ranking, and the env's ``layouts="no_accumulation"`` running the named layout."""

from __future__ import annotations

import pytest

from baselines.frenzy import FrenzyPolicy
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.simulator import SimConfig
from frenzy_env.workload import JobSpec, Workload
from frenzy_env.world.cluster import ClusterSpec, GPUType
from frenzy_env.world.memory.planning import plan_resources
from frenzy_env.world.models import ModelSpec

# V=1000, h=64, l=2, a=4, s=128, B=8: the paper's W = V h + l (12 h^2 + 13 h) = 163,968, so per GPU
# mem(d, t) = 20 W / t + s B h l / d (10 + (24 + 5 a s / h) / t) = 3,279,360 / t + 131,072 / d (10 + 64 / t):
# (1,1) 12,978,688  (2,1) 8,129,024  (1,2) 7,144,704  (4,1) 5,704,192  (2,2) 4,392,192  (1,4) 4,227,712
TINY = ModelSpec(name="tiny-paper", vocab_size=1000, hidden=64, layers=2, heads=4, max_seq_len=128)
GPU8M = GPUType(name="Tiny-8MB", memory_bytes=8_000_000, peak_tflops=10.0, intra_node_gbps=100.0,
                node_network_gbps=10.0, cost_per_hour=1.0, source="test")
HAND = {(1, 1): 12_978_688, (2, 1): 8_129_024, (1, 2): 7_144_704, (4, 1): 5_704_192, (2, 2): 4_392_192,
        (1, 4): 4_227_712}


def test_paper_plans_by_hand():
    plans = plan_resources(TINY, batch_size=8, seq_len=128, gpu_types=[GPU8M], method="frenzy", max_gpus=4,
                           gpus_per_node=4, max_pp=1, accumulate=False)
    got = {(p.dp, p.tp): p.predicted_bytes_per_gpu for p in plans}
    assert set(got) == {k for k, v in HAND.items() if v <= 8_000_000} == {(1, 2), (4, 1), (2, 2), (1, 4)}
    for k, v in got.items():
        assert v == pytest.approx(HAND[k])
    assert all(p.accumulation == 1 and p.pp == 1 and p.micro_batch == 8 // p.dp for p in plans)
    # with accumulation (the env's search) (1, 1) and (2, 1) fit too: smaller micro-batches
    acc = plan_resources(TINY, batch_size=8, seq_len=128, gpu_types=[GPU8M], method="frenzy", max_gpus=4,
                         gpus_per_node=4, max_pp=1)
    assert {(1, 1), (2, 1)} <= {(p.dp, p.tp) for p in acc}


def test_min_gpus_fastest_order_by_hand():
    kw = dict(batch_size=8, seq_len=1024, gpu_types=["A100-80GB", "V100-32GB"], method="frenzy", max_gpus=8,
              max_pp=1, accumulate=False, with_times=True)
    fast = plan_resources("gpt2", ranking="min_gpus_fastest", **kw)
    keys = [(p.num_gpus, p.est_iter_time) for p in fast]
    assert keys == sorted(keys)  # fewest GPUs, then the shortest iteration
    assert fast[0].num_gpus == 1 and fast[0].gpu_type == "A100-80GB"  # the faster GPU of the two 1-GPU plans
    tight = plan_resources("gpt2", ranking="min_gpus", **kw)
    assert tight[0].num_gpus == 1 and tight[0].gpu_type == "V100-32GB"  # min_gpus: the smallest (slowest) GPU


def _env(layouts: str, **kw) -> FrenzyEnv:
    # gpt2-large, batch 8 on 8 V100-32GB: on 2 GPUs the paper admits only (d, t) = (1, 2), no accumulation,
    # while the env's default layout there is (2, 1) with 2 accumulation steps (faster under "flat")
    # (a second job keeps a start legal after the first, so the env does not advance by itself)
    jobs = tuple(JobSpec(job_id=i, submit_time=0.0, model="gpt2-large", batch_size=8, seq_len=1024, iterations=1e6)
                 for i in range(2))
    return FrenzyEnv(cluster=ClusterSpec.homogeneous("V100-32GB", 1, 8), workload=Workload("t", jobs),
                     predictor="frenzy", layouts=layouts, **kw)


def _started_layout(env: FrenzyEnv, action: int) -> tuple[int, int, int, int, int]:
    env.step(action)
    sim = env.sim
    run = sim.running[0]
    row = sim._row_key_l[0]
    pp, mb = sim._row_pp_l[row][run.plan], sim._row_mb_l[row][run.plan]
    return int(sim.plan_count[run.plan]), sim.plan_count[run.plan] // (run.tp * pp), run.tp, pp, mb


def test_no_accumulation_runs_the_paper_plan_the_policy_names():
    env = _env("no_accumulation")
    env.reset(seed=0)
    policy = FrenzyPolicy(env, plans="paper", ranking="min_gpus_fastest")
    first = policy.ranker.paper_plans(0)[0]
    assert (first.num_gpus, first.dp, first.tp, first.accumulation) == (2, 1, 2, 1)
    action, _ = policy.predict(None, action_masks=env.action_masks())
    assert int(action) == env.start_action(0, env.sim.plan_index("V100-32GB", 2))
    assert _started_layout(env, int(action)) == (2, first.dp, first.tp, 1, 8)  # the named (d, t), micro-batch B/d

    default = _env("predictor", efficiency="flat")  # the same action in v4's world: its own layout, accumulating
    default.reset(seed=0)
    count, dp, tp, pp, mb = _started_layout(default, default.start_action(0, default.sim.plan_index("V100-32GB", 2)))
    assert (count, dp, tp, pp) == (2, 2, 1, 1) and mb < 8 // dp


def test_v5_defaults_and_v4_rule_kept():
    assert SimConfig().layouts == "no_accumulation"
    env = _env("predictor", efficiency="flat")
    env.reset(seed=0)
    new = FrenzyPolicy(env)
    assert new.plans == "paper" and new.ranker.plans == "paper" and new.ranking == "min_gpus_fastest"
    old = FrenzyPolicy(env, plans="env", ranking="min_gpus")
    assert old.plans == "env" and old.ranker.plans == "env"
    action, _ = old.predict(None, action_masks=env.action_masks())
    # v4's mixed rule: the count where the paper's no-accumulation formula holds the env's own layout (on 2
    # GPUs the env runs (2, 1), which the formula rejects at B/d = 4), though the env admits 1 GPU with accumulation
    assert env.sim.pred_ok[0, env.sim.plan_index("V100-32GB", 1)]
    assert int(action) == env.start_action(0, env.sim.plan_index("V100-32GB", 4))
    with pytest.raises(ConfigError, match="layouts"):
        SimConfig(layouts="paper")
    with pytest.raises(UnknownNameError, match="plans"):
        FrenzyPolicy(env, plans="marp")
