"""The policies ``frenzy evaluate`` runs: its ``--policies`` names (built-in baselines, the learned agent
``ppo``, ``rllib``, ``MODULE:ATTR`` of the user's own code) and ``--model [NAME=]PATH`` files resolved into labelled
:class:`PolicySpec` entries, each with the factory the evaluation loop calls with an env, and checked (modules
imported, model files loaded against the env) before any episode starts.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frenzy_env.errors import ConfigError, FrenzyError

#: names of --policies that are not scripted baselines: the learned agent ppo (agents.model_record; its shipped model,
#: or --model PATH) and an RLlib checkpoint
MODEL_POLICIES = ("ppo", "rllib")
#: names of research agents the product does not play: --policies NAME (or a model recording it) is refused, saying so
RESERVED_POLICIES = ("knob",)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_PREDICT = "predict(observation, state=None, episode_start=None, deterministic=True, action_masks=None)"


@dataclass(frozen=True)
class PolicySpec:
    """One policy of an evaluation: ``name`` (its label in the tables), ``kind`` (``builtin``, ``module`` or
    ``model``), ``source`` (the baseline's name, ``MODULE:ATTR``, or the model's path) and ``factory``
    (``factory(env)`` builds the policy bound to ``env``)."""

    name: str
    kind: str
    source: str
    factory: Callable[[Any], Any]


def model_arg(text: str) -> tuple[str | None, Path]:
    """argparse type of ``--model``: ``NAME=PATH`` (a policy called NAME) or a plain ``PATH`` (the model of the
    ``ppo`` policy). A path that exists as given is always a plain path."""
    name, eq, path = text.partition("=")
    if eq and not Path(text).exists():
        if not _NAME.fullmatch(name) or not path:
            raise argparse.ArgumentTypeError(f"expected PATH or NAME=PATH (NAME: letters, digits, _ . -), got {text!r}")
        return name, Path(path)
    return None, Path(text)


def resolve(
    names: list[str], models: list[tuple[str | None, Path]], rllib_checkpoint: Path | None, greedy: bool = False,
    interface: str = "universal",
) -> list[PolicySpec]:
    """The policies to run, in the order of ``names`` (``--policies``), then the named models it leaves out.

    ``models``: the ``--model`` values; a plain path (at most one) is the model of the ``ppo`` policy, a named
    one a policy of that name playing it. A ``MODULE:ATTR`` name is labelled ``ATTR``, or ``MODULE:ATTR`` where
    ``ATTR`` is also another policy's name. Raises :class:`~frenzy_env.errors.FrenzyError` for unknown names,
    clashing model names and misplaced flags, and for ``knob`` (a research agent, :data:`RESERVED_POLICIES`) or a
    model file that records it, saying so (:data:`agents.model_record.KNOB_REFUSED`); no model is loaded yet
    (see :func:`check`). The learned agent samples its actions as in training (:class:`agents.ppo.PPOPolicy`),
    or takes the most likely one with ``greedy``; ``ppo`` without a model plays the shipped one for envs of
    ``interface`` (the envs' layout).
    """
    from agents.model_record import KNOB_REFUSED, agent_of
    from baselines import POLICIES

    for name in names:
        if name in RESERVED_POLICIES and name not in POLICIES:
            raise FrenzyError(f"--policies {name}: {KNOB_REFUSED}")
    plain: dict[str, Path] = {}
    for name, path in models:
        agent = agent_of(path)
        if agent in RESERVED_POLICIES:
            raise FrenzyError(f"--model {path if name is None else f'{name}={path}'}: a knob model; {KNOB_REFUSED}")
        if name is None:
            if agent in plain:
                raise FrenzyError(
                    f"--model PATH given more than once for the {agent!r} agent: label several models as NAME=PATH"
                )
            if agent not in names:
                raise FrenzyError(
                    f"--model {path}: a {agent} model is used by the {agent!r} policy; add {agent} to --policies, "
                    "or give NAME=PATH"
                )
            plain[agent] = path
    named: dict[str, Path] = {}
    for name, path in models:
        if name is None:
            continue
        if name in POLICIES or name in MODEL_POLICIES or name in RESERVED_POLICIES or name in named:
            taken = ("given twice" if name in named else "reserved (the knob agent's, a research model)"
                     if name in RESERVED_POLICIES else "a built-in policy")
            raise FrenzyError(f"--model {name}={path}: the name {name!r} is {taken}; choose another NAME")
        named[name] = path
    if rllib_checkpoint is not None and "rllib" not in names:
        raise FrenzyError("--rllib-checkpoint is only used by the 'rllib' policy; add rllib to --policies")
    if "rllib" in names and rllib_checkpoint is None:
        raise FrenzyError(
            "the 'rllib' policy needs --rllib-checkpoint PATH (the run folder of frenzy train --backend rllib)"
        )
    wanted = list(dict.fromkeys([*names, *named]))  # (a name given twice runs once)
    modules = [name for name in wanted if ":" in name and builtin_with_keywords(name) is None]
    plain_names = {name for name in wanted if ":" not in name} | set(POLICIES) | set(MODEL_POLICIES)
    specs = []
    for name in wanted:
        options = builtin_with_keywords(name)
        if options is not None:  # a baseline with keywords: labelled as given
            specs.append(PolicySpec(name, "builtin", name, _builtin_factory(options[0], **options[1])))
        elif ":" in name:
            attr = name.partition(":")[2]
            clash = attr in plain_names or sum(m.partition(":")[2] == attr for m in modules) > 1
            specs.append(_module_spec(name, name if clash else attr))
        elif name in named:
            specs.append(PolicySpec(name, "model", str(named[name]), _model_factory(named[name], greedy)))
        elif name == "ppo":
            path = plain.get(name) or _default_model(interface)
            specs.append(PolicySpec(name, "model", str(path), _model_factory(path, greedy)))
        elif name == "rllib":
            specs.append(PolicySpec(name, "model", str(rllib_checkpoint), _rllib_factory(rllib_checkpoint)))
        elif name in POLICIES:
            specs.append(PolicySpec(name, "builtin", name, _builtin_factory(name)))
        else:
            from frenzy_env.errors import unknown_name

            error = unknown_name("policy (--policies)", name, [*POLICIES, *MODEL_POLICIES, *named])
            raise type(error)(f"{error}; or MODULE:ATTR (your own policy), or a model given as --model NAME=PATH")
    return specs


def check(specs: list[PolicySpec], env: Any) -> None:
    """Fail now, before any episode, on what would fail later: every model file must exist, be a regular
    file, load and fit ``env``'s spaces; every ``MODULE:ATTR`` must import and build a policy for ``env``."""
    from agents.ppo import check_model_path

    models = [spec for spec in specs if spec.kind == "model"]
    try:
        for spec in models:  # the cheap checks of every model file first
            if spec.name != "rllib":
                check_model_path(spec.source)
        for spec in models:  # loaded (an RLlib checkpoint: a missing path, no Ray, one of another cluster)
            if spec.name == "rllib":
                from agents.rllib import load_rllib_policy

                load_rllib_policy(env, spec.source)  # (errors name the path as given)
            else:
                spec.factory(env)
    except ConfigError as exc:
        raise ConfigError(f"policy {spec.name!r}: {exc}") from None
    for spec in specs:
        if spec.kind == "module":
            spec.factory(env)
        elif spec.kind == "builtin" and ":" in spec.source:  # a baseline with keywords: bad ones fail now
            try:
                spec.factory(env)
            except ConfigError as exc:
                raise ConfigError(f"policy {spec.name!r}: {exc}") from None


def module_of(spec: PolicySpec) -> Any:
    """The imported module of a ``module`` policy (:func:`check` has imported it)."""
    return sys.modules[spec.source.partition(":")[0]]


def _default_model(interface: str) -> Path:
    """The shipped model of ``ppo`` for envs of ``interface`` (``agents.ppo.shipped_model_path``: the universal
    model, or env v5's frenzy-testbed model under the cluster layout)."""
    from agents.ppo.loading import shipped_model_path

    return shipped_model_path(interface=interface)


def keyword_value(text: str) -> object:
    """A keyword's value in a policy spec: True/False/None, an int, a float, else the text."""
    special = {"True": True, "False": False, "None": None}
    if text in special:
        return special[text]
    for kind in (int, float):
        with contextlib.suppress(ValueError):  # not this kind: try the next
            return kind(text)
    return text


def builtin_with_keywords(spec: str) -> tuple[str, dict[str, object]] | None:
    """``"NAME:k=v:k=v"`` with NAME a registered baseline -> ``(NAME, {k: v, ...})`` (values by
    :func:`keyword_value`); None for anything else (a plain name, or MODULE:ATTR). Raises
    :class:`~frenzy_env.errors.FrenzyError` for a registered NAME followed by an item that is not key=value."""
    from baselines import POLICIES

    name, sep, rest = spec.partition(":")
    if not sep or name not in POLICIES or "=" not in rest:
        return None
    kwargs: dict[str, object] = {}
    for item in rest.split(":"):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise FrenzyError(f"--policies {spec!r}: expected NAME:key=value:key=value, got {item!r}")
        kwargs[key] = keyword_value(value)
    return name, kwargs


def _builtin_factory(name: str, **kwargs: Any) -> Callable[[Any], Any]:
    from frenzy_env.evaluation.episodes import wide_window

    def build(env: Any) -> Any:
        from baselines import make_policy

        return make_policy(name, env, **kwargs)

    return wide_window(build)  # scripted: every job in the system within reach


def _model_factory(path: Path, greedy: bool = False) -> Callable[[Any], Any]:
    """``factory(env)`` loading the action-level model at ``path`` (``agents.ppo.load_policy``)."""

    def build(env: Any) -> Any:
        from agents.ppo import load_policy

        return load_policy(env, path, sample=not greedy)

    return build


def _rllib_factory(checkpoint: Path | None) -> Callable[[Any], Any]:
    path = None if checkpoint is None else checkpoint.resolve()  # Ray workers get an absolute path

    def build(env: Any) -> Any:  # pickled to Ray workers: imports there
        from agents.rllib import load_rllib_policy

        return load_rllib_policy(env, path)

    return build


def _module_spec(text: str, label: str) -> PolicySpec:
    module, _, attr = text.partition(":")
    if not _DOTTED.fullmatch(module) or not _DOTTED.fullmatch(attr):
        raise FrenzyError(f"--policies {text!r}: expected MODULE:ATTR (a module path and a name in it: mymod:MyPolicy)")

    def build(env: Any) -> Any:
        from frenzy_env.policy import as_policy

        policy = _load_attr(module, attr, text)(env)
        try:
            return as_policy(policy)
        except TypeError:  # (no predict)
            kind = type(policy).__name__
            raise ConfigError(f"--policies {text}: {attr}(env) returned a {kind!r}, which has no {_PREDICT}") from None

    return PolicySpec(label, "module", text, build)


def _load_attr(module: str, attr: str, text: str) -> Callable[[Any], Any]:
    """``MODULE.ATTR``, importing MODULE with the current directory on ``sys.path`` (as ``python -m`` does)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise ConfigError(f"--policies {text}: importing module {module!r} failed: {exc}") from None
        raise ConfigError(
            f"--policies {text}: cannot import module {module!r} ({exc}); the current directory {cwd} is on "
            f"sys.path, so {module.replace('.', '/')}.py there (or an installed module) would be found"
        ) from None
    except Exception as exc:  # the module itself raised (a syntax error, a missing dependency of its own)
        kind = type(exc).__name__
        raise ConfigError(f"--policies {text}: importing module {module!r} failed: {kind}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"--policies {text}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(
            f"--policies {text}: {attr} is of type {type(obj).__name__}, not callable; it must be called with the "
            f"env and return an object with {_PREDICT}"
        )
    return obj
