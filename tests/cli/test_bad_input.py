"""Bad input gets one clear error naming the file, row and column (or the field and value); never a crash.

Trace files, names, clusters, configuration keys and values, job specs, actions and command-line
arguments. The CLI answers with one line (or argparse's usage message) and a non-zero exit code, no
traceback, and keeps the results of the episodes that finished before a failure.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import baselines
import frenzy_env  # noqa: F401  (registers the ids)
from frenzy_env.cli import main
from frenzy_env.env import FrenzyEnv
from frenzy_env.errors import ConfigError, TraceFormatError, UnknownNameError
from frenzy_env.simulator import REJECTED, ClusterSimulator, SimConfig
from frenzy_env.workload import ITP_EXTRACT, JobSpec, SyntheticGenerator, Workload, data_path, make_generator
from frenzy_env.world.cluster import ClusterSpec, NodeSpec
from frenzy_env.world.models import get_model

HEAD = "job_id,submit_time,num_gpus,duration\n"
ITP = "job_id,submission_time,duration,num_gpu\n"
PHILLY = "timestamp,duration,num_gpus\n"
ITP_TRACE = data_path(ITP_EXTRACT)


def write(tmp_path, content: str | bytes, name: str = "trace.csv"):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# (content, format, data row or None, column or None, words in the message)
TRACE_CASES = [
    pytest.param(
        HEAD.replace(",duration", "") + "a,0,1\n", "canonical", None, "duration", "missing column", id="missing-column"
    ),
    pytest.param(
        ITP.replace(",num_gpu", "") + "a,0,100\n", "itp", None, "num_gpu", "missing column", id="itp-missing-column"
    ),
    pytest.param(
        "duration,num_gpus\n66,1\n", "philly", None, "timestamp", "missing column", id="philly-missing-column"
    ),
    pytest.param(HEAD + "a,0,1,100\nb,5,1,-30\n", "canonical", 2, "duration", "positive", id="negative-duration"),
    pytest.param(HEAD + "a,0,1,0\n", "canonical", 1, "duration", "positive", id="zero-duration"),
    pytest.param(HEAD + "a,0,1,100\nb,5,1,ten\n", "canonical", 2, "duration", "'ten'", id="non-numeric-duration"),
    pytest.param(HEAD + "a,0,1,NaN\n", "canonical", 1, "duration", "missing value", id="nan-duration"),
    pytest.param(HEAD + "a,0,1,\n", "canonical", 1, "duration", "missing value", id="empty-duration"),
    pytest.param(HEAD + "a,0,1,inf\n", "canonical", 1, "duration", "not a finite number", id="infinite-duration"),
    pytest.param(HEAD + "a,nan,1,100\n", "canonical", 1, "submit_time", "missing value", id="nan-submit-time"),
    pytest.param(HEAD + "a,0,0,100\n", "canonical", 1, "num_gpus", "positive integer", id="zero-gpus"),
    pytest.param(HEAD + "a,0,-2,100\n", "canonical", 1, "num_gpus", "positive integer", id="negative-gpus"),
    pytest.param(HEAD + "a,0,1.5,100\n", "canonical", 1, "num_gpus", "positive integer", id="fractional-gpus"),
    pytest.param(HEAD + "a,0,1,100\nb,1,1000000000,100\n", "canonical", 2, "num_gpus", "at most", id="absurd-gpus"),
    pytest.param(
        HEAD.rstrip() + ",model\na,0,1,100,gpt2\nb,1,1,100,llama-2-70b\n", "canonical", 2, "num_gpus",
        "no configuration of models llama-2-70b fits 1 GPUs", id="gpus-no-model-fits",
    ),
    pytest.param(ITP + "a,0,100,eight\n", "itp", 1, "num_gpu", "'eight'", id="non-numeric-gpus"),
    pytest.param(
        HEAD + "a,0,1,100\nb,1,1,100\na,2,1,100\n", "canonical", 3, "job_id", "duplicate job id 'a'", id="duplicate-id"
    ),
    pytest.param(HEAD + "a,0,1,100\n,1,1,100\n", "canonical", 2, "job_id", "missing job id", id="missing-id"),
    pytest.param(
        HEAD + "a,0,1,100\nb,50,1,100\nc,20,1,100\n", "canonical", 3, "submit_time", "sorted", id="unsorted-times"
    ),
    pytest.param(ITP + "a,50,100,1\nb,20,100,1\n", "itp", 2, "submission_time", "sorted", id="itp-unsorted-times"),
    pytest.param(
        PHILLY + "2017-10-09 07:01:55,66,1\nlast tuesday,1,1\n",
        "philly",
        2,
        "timestamp",
        "date-time",
        id="philly-bad-timestamp",
    ),
    pytest.param("", "canonical", None, None, "empty file", id="empty-file"),
    pytest.param("  \n\n", "canonical", None, None, "empty file", id="blank-file"),
    pytest.param(HEAD, "canonical", None, None, "no data rows", id="header-only"),
    pytest.param(
        HEAD.replace(",", ";") + "a;0;1;100\n", "canonical", None, None, "';' as the delimiter", id="semicolons"
    ),
    pytest.param(
        HEAD.replace(",", "\t") + "a\t0\t1\t100\n", "canonical", None, None, "a tab as the delimiter", id="tabs"
    ),
    pytest.param(HEAD + "a,0,1,100\nb,1,1,100,7\n", "canonical", 2, None, "5 comma-separated fields", id="ragged-row"),
    pytest.param(HEAD + 'a,0,1,100\n"b,1,1,100\n', "canonical", 2, None, "never closed", id="unbalanced-quote"),
    pytest.param(HEAD.encode() + b"a,0,1,100\n\xff\xfe,1,1,100\n", "canonical", 2, None, "not UTF-8", id="binary"),
    pytest.param(
        HEAD.rstrip() + ",model\na,0,1,100,gpt5\n", "canonical", 1, "model", "unknown model 'gpt5'", id="unknown-model"
    ),
    pytest.param(
        HEAD.rstrip() + ",batch_size\na,0,1,100,0\n", "canonical", 1, "batch_size", "positive integer", id="zero-batch"
    ),
    pytest.param(
        HEAD.rstrip() + ",seq_len\na,0,1,100,long\n", "canonical", 1, "seq_len", "not a number", id="bad-seq-len"
    ),
    pytest.param(
        HEAD.rstrip() + ",group\na,0,1,100,-1\n", "canonical", 1, "group", "non-negative", id="negative-group"
    ),
]


@pytest.mark.parametrize("content, fmt, row, column, words", TRACE_CASES)
def test_bad_trace_file_names_file_row_and_column(tmp_path, content, fmt, row, column, words):
    path = write(tmp_path, content)
    with pytest.raises(TraceFormatError) as info:
        Workload.from_csv(path, format=fmt)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)), message
    assert words in message, message
    if row is not None:
        assert f"row {row}" in message, message
    if column is not None:
        assert repr(column) in message, message


@pytest.mark.parametrize("content, fmt, row, column, words", TRACE_CASES)
def test_bad_trace_file_through_the_cli_is_one_line_and_exit_2(tmp_path, capsys, content, fmt, row, column, words):
    path = write(tmp_path, content)
    code = main(["evaluate", "--trace", str(path), "--trace-format", fmt, "--policies", "fifo", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("frenzy: error: ") and str(path) in err and words in err, err


def test_trace_that_is_missing_or_a_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        Workload.from_csv(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        Workload.from_csv(tmp_path)


def test_byte_order_mark_and_windows_line_ends_are_accepted(tmp_path):
    path = write(tmp_path, ("\ufeff" + HEAD + "a,0,1,100\nb,5,2,100\n").replace("\n", "\r\n"))
    assert [j.name for j in Workload.from_csv(path)] == ["a", "b"]


# ------------------------------------------------------------------------- names, clusters, config, jobs
def _job(**kw):
    base = dict(job_id=7, submit_time=0.0, model="gpt2", batch_size=8, seq_len=128, iterations=100.0)
    return JobSpec(**{**base, **kw})


SMALL_ENV = dict(cluster="frenzy-testbed", workload="synthetic-small")

# (callable, exception type, words that must appear: the field and the value)
VALUE_CASES = [
    # unknown names (with a close-match hint where one exists)
    pytest.param(
        lambda: ClusterSpec.homogeneous("A200-80GB", 1, 8),
        UnknownNameError,
        ["GPU type", "'A200-80GB'", "A100-80GB"],
        id="gpu-type",
    ),
    pytest.param(lambda: NodeSpec("a100", 8), UnknownNameError, ["GPU type", "'a100'"], id="node-gpu-type"),
    pytest.param(
        lambda: ClusterSpec.from_counts("c", {"B200-192GB": (1, 8)}),
        UnknownNameError,
        ["'B200-192GB'"],
        id="from-counts-type",
    ),
    pytest.param(lambda: get_model("gpt5"), UnknownNameError, ["model", "'gpt5'"], id="model"),
    pytest.param(lambda: _job(model="llama-9b"), UnknownNameError, ["model", "'llama-9b'"], id="job-model"),
    pytest.param(
        lambda: SyntheticGenerator(models=("gpt2", "gtp2-medium")),
        UnknownNameError,
        ["'gtp2-medium'", "gpt2-medium"],
        id="generator-model",
    ),
    pytest.param(
        lambda: FrenzyEnv(cluster="frenzy-testbad"),
        UnknownNameError,
        ["cluster preset", "'frenzy-testbad'", "frenzy-testbed"],
        id="cluster-preset",
    ),
    pytest.param(
        lambda: FrenzyEnv(workload="synthetc"),
        UnknownNameError,
        ["workload preset", "'synthetc'", "synthetic"],
        id="workload-preset",
    ),
    pytest.param(
        lambda: Workload.from_csv(ITP_TRACE, format="xml"),
        UnknownNameError,
        ["trace format", "'xml'"],
        id="trace-format",
    ),
    # clusters with no GPUs
    pytest.param(lambda: ClusterSpec("empty", ()), ConfigError, ["'empty'", "no nodes"], id="no-nodes"),
    pytest.param(
        lambda: ClusterSpec.from_counts("c", {"A100-80GB": (0, 8)}), ConfigError, ["no nodes"], id="zero-node-count"
    ),
    pytest.param(
        lambda: ClusterSpec.homogeneous("A100-80GB", 0, 8), ConfigError, ["nodes", "0"], id="homogeneous-0-nodes"
    ),
    pytest.param(
        lambda: ClusterSpec.homogeneous("A100-80GB", 2, 0), ConfigError, ["num_gpus", "0"], id="zero-gpus-per-node"
    ),
    pytest.param(lambda: NodeSpec("A100-80GB", -4), ConfigError, ["num_gpus", "-4"], id="negative-gpus-per-node"),
    pytest.param(lambda: NodeSpec("A100-80GB", 2.5), ConfigError, ["num_gpus", "2.5"], id="fractional-gpus-per-node"),
    pytest.param(
        lambda: ClusterSpec.from_counts("c", {"A100-80GB": (-1, 8)}),
        ConfigError,
        ["node count", "-1"],
        id="negative-nodes",
    ),
    # misspelt configuration keys (named, with the likely intended key)
    pytest.param(
        lambda: FrenzyEnv(**SMALL_ENV, startup_tme=5), ConfigError, ["'startup_tme'", "startup_time"], id="env-key"
    ),
    pytest.param(
        lambda: FrenzyEnv(**SMALL_ENV, predicter="oracle"), ConfigError, ["'predicter'", "predictor"], id="env-key-2"
    ),
    pytest.param(
        lambda: SimConfig.from_dict({"oom_dealy": 1.0}), ConfigError, ["'oom_dealy'", "oom_delay"], id="simconfig-key"
    ),
    pytest.param(
        lambda: make_generator("synthetic", num_job=3), ConfigError, ["'num_job'", "num_jobs"], id="generator-key"
    ),
    pytest.param(
        lambda: gym.make("frenzy/HeteroClusterSmall-v5", work_inf="none"),
        ConfigError,
        ["'work_inf'", "work_info"],
        id="gym-make-key",
    ),
    pytest.param(
        lambda: baselines.make_policy("fifo", FrenzyEnv(**SMALL_ENV), sed=1),
        ConfigError,
        ["fifo", "sed"],
        id="policy-key",
    ),
    # bad configuration values
    pytest.param(lambda: SimConfig(startup_time=-1.0), ConfigError, ["startup_time", "-1"], id="negative-startup"),
    pytest.param(lambda: SimConfig(oom_delay=math.nan), ConfigError, ["oom_delay", "nan"], id="nan-oom-delay"),
    pytest.param(lambda: SimConfig(max_plan_gpus=0), ConfigError, ["max_plan_gpus", "0"], id="max-plan-gpus"),
    pytest.param(lambda: SimConfig(utilisation=1.5), ConfigError, ["utilisation", "1.5"], id="utilisation"),
    pytest.param(lambda: SimConfig(placement="random"), ConfigError, ["placement", "'random'"], id="placement"),
    pytest.param(lambda: SimConfig(work_info="psychic"), ConfigError, ["work_info", "'psychic'"], id="work-info"),
    pytest.param(lambda: SimConfig(predictor="magic"), ConfigError, ["predictor", "'magic'"], id="predictor"),
    pytest.param(lambda: FrenzyEnv(**SMALL_ENV, queue_slots=0), ConfigError, ["queue_slots", "0"], id="queue-slots"),
    pytest.param(
        lambda: FrenzyEnv(**SMALL_ENV, running_slots=2.5), ConfigError, ["running_slots", "2.5"], id="running-slots"
    ),
    pytest.param(lambda: FrenzyEnv(**SMALL_ENV, reward_scale=0), ConfigError, ["reward_scale", "0"], id="reward-scale"),
    pytest.param(lambda: FrenzyEnv(**SMALL_ENV, max_steps=0), ConfigError, ["max_steps", "0"], id="max-steps"),
    pytest.param(
        lambda: FrenzyEnv(**SMALL_ENV, render_mode="human"), ConfigError, ["render_mode", "'human'"], id="render-mode"
    ),
    pytest.param(lambda: SyntheticGenerator(num_jobs=0), ConfigError, ["num_jobs", "0"], id="num-jobs"),
    pytest.param(lambda: SyntheticGenerator(load=-1.0), ConfigError, ["load", "-1"], id="load"),
    pytest.param(
        lambda: Workload.from_csv(ITP_TRACE, format="itp", load_scale=0),
        ConfigError,
        ["load_scale", "0"],
        id="load-scale",
    ),
    # job specs
    pytest.param(lambda: _job(batch_size=0), ConfigError, ["job 7", "batch_size", "0"], id="batch-0"),
    pytest.param(lambda: _job(batch_size=2.5), ConfigError, ["job 7", "batch_size", "2.5"], id="batch-fraction"),
    pytest.param(lambda: _job(batch_size="8"), ConfigError, ["job 7", "batch_size", "'8'"], id="batch-string"),
    pytest.param(lambda: _job(seq_len=-128), ConfigError, ["seq_len", "-128"], id="seq-len"),
    pytest.param(lambda: _job(iterations=0.0), ConfigError, ["iterations", "0.0"], id="iterations-0"),
    pytest.param(lambda: _job(iterations=math.nan), ConfigError, ["iterations", "nan"], id="iterations-nan"),
    pytest.param(lambda: _job(iterations=math.inf), ConfigError, ["iterations", "inf"], id="iterations-inf"),
    pytest.param(lambda: _job(submit_time=math.nan), ConfigError, ["submit_time", "nan"], id="submit-nan"),
    pytest.param(lambda: _job(submit_time="noon"), ConfigError, ["submit_time", "'noon'"], id="submit-string"),
    pytest.param(lambda: _job(requested_gpus=0), ConfigError, ["requested_gpus", "0"], id="requested-0"),
    pytest.param(lambda: _job(requested_gpus=1.5), ConfigError, ["requested_gpus", "1.5"], id="requested-fraction"),
    pytest.param(
        lambda: _job(iterations=None, requested_gpus=2, recorded_duration=math.nan),
        ConfigError,
        ["recorded_duration", "nan"],
        id="duration-nan",
    ),
    pytest.param(
        lambda: _job(iterations=None, requested_gpus=2, recorded_duration=-5.0),
        ConfigError,
        ["recorded_duration", "-5"],
        id="duration-negative",
    ),
    pytest.param(lambda: _job(iterations=None), ConfigError, ["job 7", "iterations"], id="no-work"),
    pytest.param(
        lambda: Workload("w", (_job(), _job())), ConfigError, ["'w'", "duplicate job_id 7"], id="duplicate-job-ids"
    ),
    pytest.param(
        lambda: Workload("w", (_job(), {"job_id": 1})), ConfigError, ["jobs[1]", "JobSpec"], id="not-a-jobspec"
    ),
    pytest.param(
        lambda: SyntheticGenerator(models=("llama-2-70b",), cluster=ClusterSpec.homogeneous("T4-16GB", 1, 2)).generate(
            0
        ),
        ConfigError,
        ["llama-2-70b", "T4-16GB"],
        id="generator-nothing-fits",
    ),
]


@pytest.mark.parametrize("make, error, words", VALUE_CASES)
def test_bad_value_names_the_field_and_value(make, error, words):
    with pytest.raises(error) as info:
        make()
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


def test_empty_workload_to_the_simulator_names_it():
    with pytest.raises(ConfigError, match="workload 'none' has no jobs"):
        ClusterSimulator(ClusterSpec.homogeneous("A100-80GB", 1, 8), Workload("none", ()))


def test_empty_workload_to_the_env_names_it():
    with pytest.raises(ConfigError, match="has no jobs"):
        FrenzyEnv(workload=Workload("none", ()))


# ------------------------------------------------------------------------------ jobs that fit nowhere
def _tiny_env(models: tuple[str, ...], **kw) -> FrenzyEnv:
    jobs = tuple(
        JobSpec(job_id=i, submit_time=10.0 * i, model=m, batch_size=8, seq_len=512, iterations=50.0)
        for i, m in enumerate(models)
    )
    return FrenzyEnv(cluster=ClusterSpec.homogeneous("T4-16GB", 1, 2), workload=Workload("w", jobs), **kw)


def test_a_job_that_fits_nowhere_is_rejected_with_a_reason_and_the_rest_run():
    env = _tiny_env(("gpt2", "llama-2-70b", "gpt2"))
    env.reset(seed=0)
    terminated = False
    while not terminated:
        mask = env.action_masks()
        _, _, terminated, _, info = env.step(int(np.flatnonzero(mask)[-1]))
    sim = env.sim
    assert sim.status[1] == REJECTED and sim.finished == 2
    reason = sim.records[1].rejected_reason
    assert "llama-2-70b" in reason and "GiB" in reason and "T4-16GB" in reason
    assert info["metrics"]["rejected"] == 1


def test_a_workload_where_nothing_fits_ends_at_once_without_error():
    env = _tiny_env(("llama-2-70b", "llama-3.1-70b"))
    _, info = env.reset(seed=0)
    mask = env.action_masks()
    assert env.sim.done and info["rejected"] == 2 and mask[0] and not mask[1:].any()  # only "wait", never empty
    _, reward, terminated, truncated, info = env.step(0)
    assert terminated and not truncated and info["metrics"]["rejected"] == 2
    assert reward == 0.0 and info["invalid_actions"] == 0
    assert math.isnan(info["metrics"]["avg_jct_h"])


# ----------------------------------------------------------------------------------------- actions
def test_out_of_range_actions_are_penalised_no_ops():
    env = _tiny_env(("gpt2", "gpt2"), invalid_action_penalty=0.25)
    env.reset(seed=0)
    n = env.action_space.n
    now, free = env.sim.now, env.sim.state.free.copy()
    for k, a in enumerate([-1, n, n + 1, 10**12, 2**70, np.int64(-5), np.uint64(2**63), np.int32(n)]):
        _, reward, terminated, truncated, info = env.step(a)
        assert reward == -0.25 and not (terminated or truncated) and info["invalid_actions"] == k + 1
    assert env.sim.now == now and (env.sim.state.free == free).all()


def test_step_before_reset_and_after_the_end_say_what_to_do():
    env = _tiny_env(("llama-2-70b",))
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        env.step(0)
    env.reset(seed=0)
    assert env.step(0)[2]
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        env.step(0)


@pytest.mark.parametrize("action", [None, math.nan, 2.5, "3", np.array([1, 2])], ids=repr)
def test_non_integer_action_gets_a_clear_error(action):
    env = _tiny_env(("gpt2",))
    env.reset(seed=0)
    with pytest.raises((TypeError, ValueError), match="action"):
        env.step(action)


@pytest.mark.parametrize("penalty", [math.nan, math.inf])
def test_non_finite_invalid_action_penalty_is_refused(penalty):
    with pytest.raises(ConfigError, match="invalid_action_penalty"):
        FrenzyEnv(**SMALL_ENV, invalid_action_penalty=penalty)


# --------------------------------------------------------------------------------------------- the CLI
USAGE_ERRORS = [
    pytest.param([], "required", id="no-command"),
    pytest.param(["bogus"], "invalid choice", id="unknown-command"),
    pytest.param(["evaluate", "--seeds", "0"], "positive integer", id="seeds-0"),
    pytest.param(["evaluate", "--seeds", "three"], "'three'", id="seeds-word"),
    pytest.param(["evaluate", "--max-jobs", "-1"], "positive integer", id="max-jobs"),
    pytest.param(["evaluate", "--predictor", "psychic"], "invalid choice: 'psychic'", id="predictor"),
    pytest.param(["evaluate", "--trace-format", "xml"], "invalid choice: 'xml'", id="trace-format"),
    pytest.param(["evaluate", "--workload", " , "], "comma-separated list", id="empty-list"),
    pytest.param(["evaluate", "--sedes", "3"], "unrecognized arguments: --sedes", id="misspelt-option"),
    pytest.param(["memory", "--model", "gpt2", "--seq-len", "128"], "--batch-size", id="memory-missing"),
    pytest.param(["memory", "--model", "gpt2", "--batch-size", "8.5", "--seq-len", "128"], "'8.5'", id="memory-float"),
]


@pytest.mark.parametrize("argv, words", USAGE_ERRORS)
def test_invalid_arguments_exit_2_with_usage(capsys, argv, words):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "usage: frenzy" in err and words in err and "Traceback" not in err, err


VALUE_ERRORS = [
    pytest.param(
        ["evaluate", "--cluster", "frenzy-testbad"], ["unknown cluster preset 'frenzy-testbad'"], id="cluster"
    ),
    pytest.param(["evaluate", "--workload", "synthetc"], ["unknown workload preset 'synthetc'"], id="workload"),
    pytest.param(["evaluate", "--policies", "fifo,fifa"], ["policy", "'fifa'"], id="policy"),
    pytest.param(["evaluate", "--trace", "no/such/trace.csv"], ["--trace", "no/such/trace.csv"], id="missing-trace"),
    pytest.param(["evaluate", "--policies", "fifo", "--model", "x.zip"], ["--model", "ppo"], id="model-without-ppo"),
    pytest.param(
        ["evaluate", "--policies", "fifo", "--rllib-checkpoint", "runs/rllib"],
        ["--rllib-checkpoint", "'rllib'", "--policies"],
        id="rllib-checkpoint-without-rllib",
    ),
    pytest.param(
        ["evaluate", "--policies", "fifo,rllib"], ["'rllib'", "--rllib-checkpoint"], id="rllib-without-checkpoint"
    ),
    pytest.param(
        ["evaluate", "--policies", "rllib", "--rllib-checkpoint", "no/such/run"],
        ["RLlib checkpoint 'no/such/run' does not exist"],
        id="rllib-missing-checkpoint",
    ),
    pytest.param(["memory", "--model", "gpt5", "--batch-size", "8", "--seq-len", "128"], ["'gpt5'"], id="memory-model"),
    pytest.param(
        ["memory", "--model", "gpt2", "--batch-size", "0", "--seq-len", "128"], ["batch_size", "0"], id="memory-batch"
    ),
    pytest.param(
        ["plan", "--model", "gpt2", "--batch-size", "8", "--seq-len", "128", "--gpus", "A200-80GB"],
        ["'A200-80GB'"],
        id="plan-gpu",
    ),
]


@pytest.mark.parametrize("argv, words", VALUE_ERRORS)
def test_bad_values_on_the_command_line_are_one_line_and_exit_2(capsys, argv, words):
    code = main([*argv, "--no-progress"] if argv[0] == "evaluate" else argv)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and re.match(r"frenzy( \w+)?: error: ", err) and "Traceback" not in err, err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--policies", "fifo", "--rllib-checkpoint", "run"], "only used by the 'rllib' policy"),
        (["--policies", "rllib"], "needs --rllib-checkpoint PATH"),
    ],
)
def test_rllib_flag_errors_come_before_importing_ray(monkeypatch, capsys, argv, words):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError: these must not get that far
    assert main(["evaluate", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert words in err and "pip install" not in err, err


def test_rllib_policy_without_ray_names_the_extra(tmp_path, monkeypatch, capsys):
    module_dir = tmp_path / "run" / "checkpoint" / "learner_group" / "learner" / "rl_module" / "default_policy"
    module_dir.mkdir(parents=True)
    for name in ("class_and_ctor_args.pkl", "module_state.pkl"):
        (module_dir / name).write_bytes(b"")
    monkeypatch.setitem(sys.modules, "ray", None)
    argv = ["evaluate", "--policies", "fifo,rllib", "--rllib-checkpoint", str(tmp_path / "run"), "--no-progress",
            "--workload", "synthetic-small", "--max-jobs", "5", "--seeds", "1"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install -e ".[ray]"' in err, err


def test_rllib_checkpoint_that_is_no_checkpoint_names_it(tmp_path, capsys):
    for target in (tmp_path, write(tmp_path, "{}", name="config.json")):
        argv = ["evaluate", "--policies", "rllib", "--rllib-checkpoint", str(target), "--no-progress"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"RLlib checkpoint {str(target)!r}" in err, err


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    target = write(tmp_path, "not a directory", name="results")
    code = main(["evaluate", "--policies", "fifo", "--workload", "synthetic-small", "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not a directory" in err and str(target) in err


def test_cli_process_exits_non_zero_without_traceback(tmp_path):
    bad = write(tmp_path, HEAD + "a,0,1,100\nb,5,1,-30\n")
    for argv, code in (
        (["evaluate", "--seeds", "0"], 2),
        (["evaluate", "--trace", str(bad), "--no-progress"], 2),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "frenzy_env.cli", *argv], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == code, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.strip(), proc.stderr
    assert "row 2" in proc.stderr and "'duration'" in proc.stderr and proc.stderr.count("\n") == 1


# ------------------------------------------------------------------------------ partial results kept
class _FailsOnSecondEpisode(baselines.ScriptedPolicy):
    """FIFO for the first episode it plays, then raises in the middle of the next one."""

    episodes = 0

    def __init__(self, env):
        super().__init__(env)
        self._fifo = baselines.make_policy("fifo", env)
        self._steps = 0

    def reset(self):
        type(self).episodes += 1
        self._steps = 0

    def act(self, mask):
        self._steps += 1
        if type(self).episodes >= 2 and self._steps > 3:
            raise RuntimeError("policy exploded")
        return self._fifo.act(mask)


def test_a_failing_episode_keeps_earlier_results_and_exits_non_zero(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(baselines.POLICIES, "flaky", _FailsOnSecondEpisode)
    monkeypatch.setattr(_FailsOnSecondEpisode, "episodes", 0)
    out = tmp_path / "results"
    argv = [
        "evaluate",
        "--policies",
        "fifo,flaky",
        "--workload",
        "synthetic-small",
        "--max-jobs",
        "4",
        "--seeds",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    # fifo seeds 0 and 1, then flaky seed 0 (fine), then flaky seed 1 fails: episode 4
    for words in ("episode 4", "policy flaky", "seed 1", "RuntimeError: policy exploded", "3 finished", str(out)):
        assert words in err, err
    episodes = pd.read_csv(out / "episodes.csv")
    jobs = pd.read_csv(out / "jobs.csv")
    assert episodes[["policy", "seed"]].values.tolist() == [["fifo", 0], ["fifo", 1], ["flaky", 0]]
    assert len(jobs) == 3 * 4 and not (out / "summary.csv").exists()


def test_max_jobs_applies_to_synthetic_presets(tmp_path, capsys):
    out = tmp_path / "r"
    argv = [
        "evaluate",
        "--policies",
        "fifo",
        "--workload",
        "synthetic-small",
        "--max-jobs",
        "3",
        "--seeds",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    assert len(pd.read_csv(out / "jobs.csv")) == 3


# ------------------------------------------------------------ the last bad inputs: checked before anything runs
def _nothing_runs(monkeypatch):
    """Make any episode or training run fail the test: the arguments must be refused first."""
    import agents.ppo
    import frenzy_env.evaluation.episodes

    def refuse(*args, **kwargs):
        raise AssertionError("something ran before the arguments were checked")

    monkeypatch.setattr(frenzy_env.evaluation.episodes, "evaluate", refuse)
    monkeypatch.setattr(agents.ppo, "train", refuse)


def _one_line(err: str, prefix: str = r"frenzy( \w+)?: error: ") -> None:
    assert err.count("\n") == 1 and re.match(prefix, err) and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv, line",
    [
        pytest.param(["evaluate", "--seed-start", "-5"], "argument --seed-start: expected an integer >= 0, got '-5'",
                     id="seed-start"),
        pytest.param(["plan", "--model", "gpt2", "--batch-size", "8", "--seq-len", "128", "--top", "-1"],
                     "argument --top: expected an integer >= 0, got '-1'", id="plan-top"),
    ],
)  # fmt: skip
def test_negative_counts_are_usage_errors(monkeypatch, capsys, argv, line):
    _nothing_runs(monkeypatch)
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.rstrip().endswith(line) and "Traceback" not in err, err


GPT2 = ["--model", "gpt2", "--batch-size", "8", "--seq-len", "128"]
JOB_LIMITS = [
    pytest.param(
        ["memory", "--model", "llama-2-70b", "--batch-size", "100000000", "--seq-len", "100000000"],
        "--batch-size 100000000 is above 2^22 = 4,194,304, more than any real training job: the largest published "
        "global batch is 65,536 sequences (LAMB's BERT)",
        id="batch-size",
    ),
    pytest.param(
        ["memory", "--model", "gpt2", "--batch-size", "8", "--seq-len", "16777217"],
        "--seq-len 16777217 is above 2^24 = 16,777,216, more than any real training job: the longest context of any "
        "released model is 10M tokens (Llama 4 Scout)",
        id="seq-len",
    ),
    pytest.param(
        ["plan", "--model", "llama-2-70b", "--batch-size", "100000", "--seq-len", "100000"],
        "--batch-size 100000 x --seq-len 100000 = 10,000,000,000 tokens per iteration is above 2^30 = "
        "1,073,741,824, more than any real training job: the largest published global batch is about 63M tokens "
        "(DeepSeek-V3)",
        id="tokens",
    ),
    pytest.param(
        ["memory", "--model", "gpt2", "--batch-size", "4000000", "--seq-len", "16", "--dp", "2000000"],
        "--dp 2000000 x --tp 1 = 2,000,000 GPUs is above 2^20 = 1,048,576", id="memory-gpus",
    ),
    pytest.param(["plan", *GPT2, "--max-gpus", "2097152"], "--max-gpus 2097152 is above 2^20", id="plan-max-gpus"),
    pytest.param(
        ["memory", "--vocab", "100", "--hidden", "1000000000", "--layers", "10", "--heads", "1", "--batch-size", "1",
         "--seq-len", "1"],
        "--hidden 1000000000 is above 2^17 = 131,072", id="hidden",
    ),
    pytest.param(["plan", "--vocab", "8388608", "--hidden", "64", "--layers", "2", "--heads", "1", "--batch-size",
                  "1", "--seq-len", "1"], "--vocab 8388608 is above 2^22", id="vocab"),
    pytest.param(["memory", "--vocab", "100", "--hidden", "64", "--layers", "5000", "--heads", "1", "--batch-size",
                  "1", "--seq-len", "1"], "--layers 5000 is above 2^12 = 4,096", id="layers"),
    pytest.param(
        ["memory", "--model", "gpt2-xl", "--batch-size", "8", "--seq-len", "1024", "--dp", "3", "--micro-batch", "5"],
        "micro_batch=5 exceeds the per-replica batch 3 (ceil(batch_size=8 / dp=3))", id="micro-batch",
    ),
]  # fmt: skip


@pytest.mark.parametrize("argv, words", JOB_LIMITS)
def test_memory_and_plan_refuse_what_no_real_job_is(monkeypatch, capsys, argv, words):
    import frenzy_env.cli.memory
    import frenzy_env.cli.plan

    def refuse(*args, **kwargs):
        raise AssertionError("estimated before the arguments were checked")

    if "--micro-batch" not in argv:  # the micro-batch is the estimator's own check
        monkeypatch.setattr(frenzy_env.cli.memory, "estimate_memory", refuse)
    monkeypatch.setattr(frenzy_env.cli.plan, "plan_resources", refuse)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    _one_line(err, rf"frenzy {argv[0]}: error: ")
    assert words in err and not out, err


def test_the_limits_leave_real_jobs_alone(capsys):
    big = ["--model", "llama-2-70b", "--batch-size", "65536", "--seq-len", "16384", "--json"]  # 2^30 tokens
    assert main(["memory", *big, "--dp", "1024", "--tp", "8"]) == 0
    assert json.loads(capsys.readouterr().out)["batch_size"] == 65536
    assert main(["memory", "--model", "gpt2-xl", "--batch-size", "8", "--seq-len", "1024", "--dp", "3",
                 "--micro-batch", "3"]) == 0  # fmt: skip
    capsys.readouterr()


@pytest.mark.parametrize("dp, micro_batch, rep", [(3, 5, 3), (1, 9, 8), (8, 2, 1)])
def test_estimate_memory_refuses_a_micro_batch_above_the_per_replica_batch(dp, micro_batch, rep):
    from frenzy_env import estimate_memory

    with pytest.raises(ConfigError) as info:
        estimate_memory("gpt2-xl", batch_size=8, seq_len=1024, dp=dp, micro_batch=micro_batch)
    assert str(info.value).startswith(f"micro_batch={micro_batch} exceeds the per-replica batch {rep} "
                                      f"(ceil(batch_size=8 / dp={dp}))"), info.value  # fmt: skip
    assert estimate_memory("gpt2-xl", batch_size=8, seq_len=1024, dp=dp, micro_batch=rep).total_bytes > 0


@pytest.mark.parametrize("make", [
    lambda kw: gym.make("frenzy/HeteroClusterSmall-v5", **kw),
    lambda kw: FrenzyEnv(**SMALL_ENV, **kw),
], ids=["gym-make", "FrenzyEnv"])  # fmt: skip
def test_an_unknown_env_keyword_lists_every_keyword_and_suggests_the_closest(make):
    import inspect

    with pytest.raises(ConfigError) as info:
        make({"max_step": 50})
    message = str(info.value)
    assert message.startswith("unknown FrenzyEnv key(s) 'max_step' (did you mean 'max_steps'?); allowed: "), message
    allowed = message.split("; allowed: ")[1].split(", ")
    own = [n for n in inspect.signature(FrenzyEnv.__init__).parameters if n not in ("self", "sim_options")]
    assert set(allowed) == {*own, *SimConfig.__dataclass_fields__} and allowed == sorted(allowed)
    for key in ("max_steps", "queue_slots", "preemption", "max_sim_hours", "startup_time", "memory_truth"):
        assert key in allowed
    with pytest.raises(ConfigError, match=r"'queue_slot' \(did you mean 'queue_slots'\?\)"):
        make({"queue_slot": 8})


@pytest.fixture(scope="module")
def truncated_model(tmp_path_factory):
    from agents.ppo import DEFAULT_MODEL_PATH

    path = tmp_path_factory.mktemp("models") / "bad.zip"
    path.write_bytes(DEFAULT_MODEL_PATH.read_bytes()[:1000])
    return path


def test_a_truncated_model_file_is_named_by_load_policy(truncated_model):
    from agents.ppo.loading import load_policy

    with pytest.raises(ConfigError) as info:
        load_policy(FrenzyEnv(**SMALL_ENV), truncated_model)
    assert str(info.value) == (
        f"cannot load model file {str(truncated_model)!r}: not a readable model file (not a zip, or a truncated or "
        "corrupt one: File is not a zip file)"
    )


def test_a_corrupt_model_file_gives_zipfiles_reason(tmp_path):
    from agents.ppo import DEFAULT_MODEL_PATH
    from agents.ppo.loading import load_policy

    data = bytearray(DEFAULT_MODEL_PATH.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a member: the zip opens, its CRC fails
    path = write(tmp_path, bytes(data), name="corrupt.zip")
    with pytest.raises(ConfigError) as info:
        load_policy(None, path)
    message = str(info.value)
    assert str(path) in message and "truncated or corrupt" in message and "Bad CRC-32" in message, message
    assert "BufferedReader" not in message


@pytest.mark.parametrize("policies, model, name", [("ppo", "", "ppo"), ("fifo,mine", "mine=", "mine")])
def test_a_truncated_model_file_on_the_command_line(
    monkeypatch, capsys, tmp_path, truncated_model, policies, model, name
):
    _nothing_runs(monkeypatch)
    out = tmp_path / "results"
    argv = ["evaluate", "--policies", policies, "--model", f"{model}{truncated_model}", "--workload",
            "synthetic-small", "--max-jobs", "4", "--seeds", "1", "--no-progress", "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    _one_line(err, "frenzy: error: ")
    assert err.strip() == (
        f"frenzy: error: policy {name!r}: cannot load model file {str(truncated_model)!r}: not a readable model file "
        "(not a zip, or a truncated or corrupt one: File is not a zip file)"
    )
    assert not out.exists()


@pytest.mark.parametrize("backend", [[], ["--backend", "rllib"]], ids=["sb3", "rllib"])
def test_train_out_that_is_a_file_is_refused(monkeypatch, capsys, tmp_path, backend):
    _nothing_runs(monkeypatch)
    target = write(tmp_path, "keep me", name="results")
    quick = [] if backend else ["--quick"]
    assert main(["train", *backend, *quick, "--out", str(target)]) == 2
    err = capsys.readouterr().err
    _one_line(err, "frenzy: error: ")
    assert err.strip() == f"frenzy: error: --out {target}: is a file, not a folder"
    assert target.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["results"]
