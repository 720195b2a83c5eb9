"""``frenzy evaluate``'s policies (frenzy_env/cli/policies.py): MODULE:ATTR of the user's own code, models
labelled NAME=PATH, every model checked before any episode, and the manifest.json of ``--out``
(frenzy_env/cli/manifest.py)."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import frenzy_env
from agents.ppo import DEFAULT_MODEL_PATH
from frenzy_env.cli import main
from frenzy_env.cli.manifest import file_record
from frenzy_env.cli.policies import model_arg, resolve
from frenzy_env.errors import ConfigError, FrenzyError
from frenzy_env.policy import as_policy
from frenzy_env.registration import V5_WORLD

QUICK = ["--workload", "synthetic-small", "--max-jobs", "8", "--seeds", "1", "--no-progress"]
#: the shipped ppo model is a model of env v5's cluster layout: the commands that play it take the v5 world
V5 = ["--world", "v5"]

OWN_POLICIES = """
import numpy as np


class FirstLegal:  # predict only: frenzy wraps it with a reset
    def __init__(self, env):
        self.env = env

    def predict(self, obs, state=None, episode_start=None, deterministic=True, action_masks=None):
        return np.flatnonzero(action_masks)[-1], state


def fifo(env):  # the same name as a built-in policy: labelled MODULE:ATTR
    return FirstLegal(env)


NUMBER = 3


def nothing(env):
    return object()
"""


@pytest.fixture
def own_module(tmp_path, monkeypatch):
    """A module of policies in a fresh current directory (not on sys.path yet); its name."""
    name = f"own_policies_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(OWN_POLICIES))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield name
    sys.modules.pop(name, None)


def _no_episodes(monkeypatch):
    """Make running any episode fail the test: errors must come first."""
    import frenzy_env.evaluation.episodes

    def refuse(*args, **kwargs):
        raise AssertionError("an episode started before the arguments were checked")

    monkeypatch.setattr(frenzy_env.evaluation.episodes, "evaluate", refuse)


def test_module_policies_run_beside_built_in_ones_labelled_attr(own_module, capsys):
    code = main(["evaluate", "--policies", f"fifo,{own_module}:FirstLegal,{own_module}:fifo", *QUICK, "--json"])
    out = capsys.readouterr().out
    assert code == 0
    labels = [row["policy"] for row in json.loads(out)]
    assert labels == ["fifo", "FirstLegal", f"{own_module}:fifo"]


@pytest.mark.parametrize(
    "attr, words",
    [
        ("Missing", "has no attribute 'Missing'"),
        ("NUMBER", "not callable"),
        ("nothing", "returned a 'object', which has no predict("),
    ],
)
def test_a_bad_module_policy_is_one_line_and_exit_2(own_module, monkeypatch, capsys, attr, words):
    _no_episodes(monkeypatch)
    assert main(["evaluate", "--policies", f"{own_module}:{attr}", *QUICK]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{own_module}:{attr}" in err and words in err, err


def test_a_module_that_cannot_be_imported_is_named_with_the_current_directory(own_module, monkeypatch, capsys):
    _no_episodes(monkeypatch)
    assert main(["evaluate", "--policies", "no_such_policy_module:Policy", *QUICK]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot import module 'no_such_policy_module'" in err, err
    assert "current directory" in err and "sys.path" in err, err
    assert main(["evaluate", "--policies", "not-a:module:spec", *QUICK]) == 2
    assert "expected MODULE:ATTR" in capsys.readouterr().err


def test_as_policy_adds_a_reset_only_where_missing():
    class Full:
        def predict(self, *a, **k):
            return 0, None

        def reset(self):
            """Its own reset (nothing to clear)."""

    class PredictOnly:
        def predict(self, *a, **k):
            return 1, None

    full = Full()
    assert as_policy(full) is full
    wrapped = as_policy(PredictOnly())
    wrapped.reset()
    assert wrapped.predict(None) == (1, None)
    with pytest.raises(TypeError, match="has no predict"):
        as_policy(object())


def test_model_arguments_and_labels():
    assert model_arg("runs/a/model.zip") == (None, Path("runs/a/model.zip"))
    assert model_arg("big=runs/a=b/model.zip")[0] == "big"
    with pytest.raises(Exception, match="NAME=PATH"):
        model_arg("bad name=x.zip")
    specs = resolve(["fifo", "b"], [("a", DEFAULT_MODEL_PATH), ("b", DEFAULT_MODEL_PATH)], None)
    assert [(s.name, s.kind) for s in specs] == [("fifo", "builtin"), ("b", "model"), ("a", "model")]
    for models, words in (
        ([("fifo", DEFAULT_MODEL_PATH)], "built-in policy"),
        ([("a", DEFAULT_MODEL_PATH), ("a", DEFAULT_MODEL_PATH)], "given twice"),
        ([(None, DEFAULT_MODEL_PATH), (None, DEFAULT_MODEL_PATH)], "NAME=PATH"),
    ):
        with pytest.raises(FrenzyError, match=words):
            resolve(["ppo"], models, None)


def test_a_bad_model_is_reported_before_any_episode(tmp_path, monkeypatch, capsys):
    """Every model is checked before any episode: a bad one beside the shipped model (which plays the v5 world,
    ``--world v5``) is one line naming it, and so is the shipped model on the v6 world (universal layout),
    naming the fix."""
    _no_episodes(monkeypatch)
    not_a_model = tmp_path / "notes.zip"
    not_a_model.write_text("not a model")
    for model, words in (
        (f"mine={tmp_path / 'missing.zip'}", "does not exist"),
        (f"mine={tmp_path}", "not a regular file"),
        (f"mine={not_a_model}", "cannot load model file"),
    ):
        argv = ["evaluate", "--policies", "fifo", "--model", f"ok={DEFAULT_MODEL_PATH}", "--model", model, *QUICK, *V5]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "policy 'mine'" in err and words in err, err
    assert main(["evaluate", "--policies", "fifo", "--model", f"ok={DEFAULT_MODEL_PATH}", *QUICK]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "policy 'ok'" in err and "frenzy evaluate --world v5" in err, err


def test_named_models_run_as_their_own_policies_and_the_manifest_records_them(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time,num_gpus,duration\n" + "".join(f"j{i},{60 * i},2,900\n" for i in range(6)))
    out = tmp_path / "out"
    argv = [
        "evaluate", "--policies", "fifo,second", "--model", f"first={DEFAULT_MODEL_PATH}",
        "--model", f"second={DEFAULT_MODEL_PATH}", "--trace", str(trace), "--seeds", "2", "--seed-start", "5",
        "--no-progress", "--out", str(out), *V5,
    ]  # fmt: skip
    assert main(argv) == 0
    assert "| first |" in capsys.readouterr().out
    episodes = pd.read_csv(out / "episodes.csv")
    assert list(dict.fromkeys(episodes["policy"])) == ["fifo", "second", "first"]

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == ["frenzy", *argv]
    assert manifest["frenzy_env_version"] == frenzy_env.__version__
    assert [(p["name"], p["kind"]) for p in manifest["policies"]] == [
        ("fifo", "builtin"), ("second", "model"), ("first", "model")
    ]
    digest = hashlib.sha256(DEFAULT_MODEL_PATH.read_bytes()).hexdigest()
    for entry in manifest["policies"][1:]:
        assert entry["model"] == {
            "path": str(DEFAULT_MODEL_PATH.resolve()), "sha256": digest, "size_bytes": DEFAULT_MODEL_PATH.stat().st_size
        }
    assert manifest["trace"]["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert manifest["trace"]["format"] == "canonical" and manifest["workloads"] == ["trace.csv"]
    assert manifest["seeds"] == [5, 6]
    env = manifest["env"]
    assert env["cluster"] == "frenzy-testbed" and env["queue_slots"] == 64
    assert env["sim_config"]["predictor"] == "extended"


def test_a_folder_is_recorded_with_one_digest_of_its_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(b"abc")
    (tmp_path / "sub" / "b.bin").write_bytes(np.arange(4, dtype=np.int8).tobytes())
    record = file_record(tmp_path)
    assert record["size_bytes"] == 7 and len(record["sha256"]) == 64
    (tmp_path / "a.bin").write_bytes(b"abd")
    assert file_record(tmp_path)["sha256"] != record["sha256"]


def test_a_registered_policy_runs_by_name(monkeypatch, capsys):
    import baselines
    from baselines import ScriptedPolicy, make_policy, register_policy

    class Last(ScriptedPolicy):
        def act(self, mask):
            return int(np.flatnonzero(mask)[-1])

    monkeypatch.setattr(baselines, "POLICIES", dict(baselines.POLICIES))
    register_policy("last-legal", Last)
    assert isinstance(make_policy("last-legal", frenzy_env.FrenzyEnv(workload="synthetic-small")), Last)
    assert main(["evaluate", "--policies", "fifo,last-legal", *QUICK, "--json"]) == 0
    assert [row["policy"] for row in json.loads(capsys.readouterr().out)] == ["fifo", "last-legal"]
    for bad in ("", "a:b", "ppo"):
        with pytest.raises(FrenzyError, match="cannot register"):
            register_policy(bad, Last)


def test_ppo_models_sample_unless_greedy_is_asked_for():
    """(On the v5 world: its cluster layout makes ``ppo`` the env-v5 shipped model; the universal one otherwise.)"""
    from agents.ppo import UNIVERSAL_MODEL_PATH
    from frenzy_env.env import FrenzyEnv

    env = FrenzyEnv(workload="synthetic-small", **V5_WORLD)
    sampled = resolve(["ppo"], [("b", DEFAULT_MODEL_PATH)], None, interface="cluster")
    greedy = resolve(["ppo"], [("b", DEFAULT_MODEL_PATH)], None, greedy=True, interface="cluster")
    assert [s.source for s in sampled] == [str(DEFAULT_MODEL_PATH)] * 2
    assert [s.factory(env).sample for s in sampled] == [True, True]
    assert [s.factory(env).sample for s in greedy] == [False, False]
    assert resolve(["ppo"], [], None)[0].source == str(UNIVERSAL_MODEL_PATH)


def _knob_record(tmp_path: Path) -> Path:
    """A file recorded as a knob model (its ``.json`` says so), without importing research: the product's
    loaders read the record before the model."""
    model = tmp_path / "knob.zip"
    model.write_bytes(b"PK")
    model.with_suffix(".json").write_text('{"agent": "knob", "knob_version": 2, "levels": [0, 0.2], '
                                          '"planner": "sia_srpt"}')
    return model


def test_ppo_is_the_one_learned_agent_and_knob_is_refused_as_a_research_model(tmp_path, capsys):
    """``--policies ppo`` plays the shipped action-level model; ``--policies knob`` (the knob agent, a research
    model) is a clear error naming research/knob, before any episode, and so is a model file recorded as
    a knob model, given as --model PATH or NAME=PATH, or loaded as ppo; the name is reserved. ``ppo`` is the
    universal model on the universal layout (env v6's) and the env-v5 model on the cluster layout (``V5_WORLD``),
    which on the v6 world is a clear error naming that."""
    from agents.model_record import AGENTS, agent_of
    from agents.ppo import PPOPolicy, load_policy
    from frenzy_env.cli.policies import MODEL_POLICIES, RESERVED_POLICIES
    from frenzy_env.env import FrenzyEnv

    assert AGENTS == ("ppo",) and "knob" not in MODEL_POLICIES and "knob" in RESERVED_POLICIES
    from agents.ppo import UNIVERSAL_MODEL_PATH

    (universal,) = resolve(["ppo"], [], None)
    assert universal.source == str(UNIVERSAL_MODEL_PATH)
    assert isinstance(universal.factory(FrenzyEnv(workload="synthetic-small")), PPOPolicy)
    env = FrenzyEnv(workload="synthetic-small", **V5_WORLD)
    (ppo,) = resolve(["ppo"], [], None, interface="cluster")
    assert ppo.source == str(DEFAULT_MODEL_PATH) and isinstance(ppo.factory(env), PPOPolicy)
    on_v5 = r"this shipped ppo model plays env v5: gym\.make\(\"frenzy/HeteroCluster-v5\"\)"
    with pytest.raises(ConfigError, match=on_v5):
        ppo.factory(FrenzyEnv(workload="synthetic-small"))
    refused = r"--policies knob: the knob agent is a research model \(research/knob\), which the product does not load"
    with pytest.raises(FrenzyError, match=refused):
        resolve(["ppo", "knob"], [], None)
    assert main(["evaluate", "--policies", "fifo,knob", *QUICK]) == 2
    err = capsys.readouterr().err
    assert "research/knob" in err and "research.knob" in err and "sia_srpt:move_margin=0.2" in err
    knob = _knob_record(tmp_path)
    assert agent_of(knob) == "knob"
    for models in ([(None, knob)], [("mine", knob)]):
        with pytest.raises(FrenzyError, match="a knob model; the knob agent is a research model"):
            resolve(["ppo"], models, None)
    with pytest.raises(FrenzyError, match="the name 'knob' is reserved"):
        resolve([], [("knob", DEFAULT_MODEL_PATH)], None)
    with pytest.raises(ConfigError, match="is a knob model, not an action-level ppo model.*research/knob"):
        load_policy(env, knob)


def test_a_plain_model_path_replaces_the_shipped_model():
    specs = resolve(["ppo"], [(None, DEFAULT_MODEL_PATH)], None)
    assert [(s.name, s.source) for s in specs] == [("ppo", str(DEFAULT_MODEL_PATH))]
    with pytest.raises(FrenzyError, match="a ppo model is used by the 'ppo' policy; add ppo"):
        resolve(["fifo"], [(None, DEFAULT_MODEL_PATH)], None)
    with pytest.raises(FrenzyError, match="more than once for the 'ppo' agent"):
        resolve(["ppo"], [(None, DEFAULT_MODEL_PATH), (None, DEFAULT_MODEL_PATH)], None)


def test_records_tell_the_agent_of_older_files_by_their_content(tmp_path):
    from agents.model_record import agent_of

    model = tmp_path / "run" / "checkpoints" / "m.zip"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"")
    assert agent_of(model) == "ppo"  # no record at all: as stable-baselines3 saves a model
    (tmp_path / "run" / "config.json").write_text('{"levels": [0, 1], "planner": "sia_srpt"}')
    assert agent_of(model) == "knob"  # a knob run's configuration, before "agent" was recorded
    model.with_suffix(".json").write_text('{"knob_version": 2}')
    assert agent_of(model) == "knob"
    model.with_suffix(".json").write_text('{"agent": "ppo", "levels": [0], "planner": "x"}')
    assert agent_of(model) == "ppo"  # the record's own word wins


def test_baselines_take_keywords_and_preemption_reaches_the_env(tmp_path, monkeypatch, capsys):
    """``NAME:key=value`` passes keywords to a baseline (labelled as given); ``--preemption`` makes envs with the
    preempt actions, which ``sia_srpt:preempt=True`` needs (without it: one line, exit 2, before any episode)."""
    out = tmp_path / "out"
    argv = ["evaluate", "--policies", "sia_srpt,sia_srpt:preempt=True:move_margin=0.2", *QUICK, "--json"]
    assert main([*argv, "--preemption", "--out", str(out)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["policy"] for row in rows] == ["sia_srpt", "sia_srpt:preempt=True:move_margin=0.2"]
    assert json.loads((out / "manifest.json").read_text())["env"]["preemption"] is True
    _no_episodes(monkeypatch)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "preemption=True" in err and "sia_srpt:preempt=True" in err, err
    assert main(["evaluate", "--policies", "sia_srpt:preempt", *QUICK]) == 2  # not key=value: MODULE:ATTR
    assert main(["evaluate", "--policies", "sia_srpt:move_margin=0.2:x", *QUICK]) == 2
    assert "expected NAME:key=value" in capsys.readouterr().err
    assert main(["evaluate", "--policies", "sia_srpt:move_margn=0.2", *QUICK]) == 2
    assert "move_margn" in capsys.readouterr().err
