"""The memory predictors' cost (scenario ``predictors``): Frenzy and FIFO with the env's memory predictor set to
the paper's MARP formula (``"frenzy"``), the extended estimator and the oracle (the truth): avg JCT, GPU-hours, OOM
failures and GPU-hours lost to them, as a table, and the avg JCT cost of each predictor against the oracle as
rows."""

from __future__ import annotations

import math

from frenzy_env.reproduce.runner import ReproduceConfig, Runner, register_scenario
from frenzy_env.reproduce.verdicts import ClaimRow, claim_from_values, mean_of, paired

PREDICTORS = ("frenzy", "extended", "oracle")  # the env's memory predictors (frenzy_env.simulator.config)


@register_scenario("predictors")
def scenario_predictors(cfg: ReproduceConfig, runner: Runner) -> list[ClaimRow]:
    """Frenzy and FIFO under each memory predictor on the ITP-derived workload; a table of avg JCT, GPU-hours,
    OOM failures and lost GPU-hours (``runner.tables["predictors"]``) and the JCT cost of each predictor
    against the oracle as rows."""
    from frenzy_env.workload import make_generator

    seeds = range(cfg.num_seeds)
    n = cfg.n_jobs(570, 40)  # the frenzy_sia scenario's ITP workload: its extended-predictor runs are reused
    wl_key = f"itp-default-{n}"
    gen = make_generator("itp-default", max_jobs=n)
    runner.log(f"[predictors] {wl_key}")
    table = [
        "| policy | predictor | avg JCT (h) | GPU-hours | OOM failures | lost GPU-hours |",
        "|---|---|---|---|---|---|",
    ]
    rows = []
    for policy in ("frenzy", "fifo"):
        res = {}
        for pred in PREDICTORS:  # "extended" is the env's default: the same runs as the frenzy_sia scenario's
            label = policy if pred == "extended" else f"{policy}[pred={pred}]"
            env_kwargs = {} if pred == "extended" else {"predictor": pred}
            res[pred] = runner.run(wl_key, "frenzy-testbed", gen, label, policy, {}, seeds, env_kwargs=env_kwargs)
            cells = [mean_of(res[pred], m) for m in ("avg_jct_h", "gpu_hours", "ooms", "lost_gpu_hours")]
            table.append(f"| {policy} | {pred} | " + " | ".join(cells) + " |")
        for pred in ("frenzy", "extended"):
            row = claim_from_values(
                ClaimRow(f"{policy}: avg JCT with the {pred} predictor vs the oracle", "not reported", wl_key,
                         comparator=f"{policy} with predictor=oracle (true peak memory: no OOM, no waste)"),
                paired(res[pred], res["oracle"], lambda a, b: a["avg_jct_h"] / b["avg_jct_h"] - 1),
                -math.inf, math.inf, null=None,
                detail=f"OOM failures {mean_of(res[pred], 'ooms')}, lost GPU-hours "
                f"{mean_of(res[pred], 'lost_gpu_hours')} (oracle: {mean_of(res['oracle'], 'ooms')} OOMs)",
            )
            if row.n:
                row.verdict = "control (no claim): cost of prediction error"
                row.reason = (f"positive: the {pred} predictor's errors (OOM retries or plans it wrongly rejects) "
                              "cost JCT against the truth")
            rows.append(row)
    runner.tables["predictors"] = table
    return rows


__all__ = ["PREDICTORS", "scenario_predictors"]
