"""``manifest.json``: the record ``frenzy evaluate --out`` writes of what it evaluated, so that a results folder
says which code, policies, model files, workloads and seeds produced it: the command line, the package
version, every policy (name, kind, source; a model's path with its SHA-256 and size), the workloads or the
trace file (with its SHA-256), the seeds and the env configuration.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from frenzy_env.paths import atomic_write_json

MANIFEST = "manifest.json"


def file_record(path: str | Path) -> dict[str, Any]:
    """``{"path", "sha256", "size_bytes"}`` of a file, or of a folder (an RLlib checkpoint): then the SHA-256
    of its files' relative paths and contents in path order, and their total size."""
    p = Path(path).resolve()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    digest, size = hashlib.sha256(), 0
    for f in files:
        if p.is_dir():
            digest.update(f.relative_to(p).as_posix().encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    return {"path": str(p), "sha256": digest.hexdigest(), "size_bytes": size}


def env_config(env: Any) -> dict[str, Any]:
    """The configuration of a :class:`~frenzy_env.env.FrenzyEnv`: cluster, slots, reward, observation version
    and the simulator's options (predictor included)."""
    from frenzy_env.observation import OBS_VERSION

    base = env.unwrapped
    return {
        "cluster": base.cluster.name,
        "num_gpus": int(base.cluster.num_gpus),
        "queue_slots": base.queue_slots,
        "running_slots": base.running_slots,
        "reward_scale": base.reward_scale,
        "invalid_action_penalty": base.invalid_action_penalty,
        "max_steps": base.max_steps,
        "preemption": base.preemption,
        "obs_version": OBS_VERSION,
        "sim_config": base.sim_config.to_dict(),
    }


def build_manifest(
    command_line: list[str], policies: list[Any], workloads: list[str], trace: dict[str, Any] | None,
    seeds: range, env: Any, **options: Any,
) -> dict[str, Any]:
    """The manifest as a dict: ``policies`` are :class:`~frenzy_env.cli.policies.PolicySpec`; ``trace`` is
    ``{"name", "format", **file_record(path)}`` or None; ``options`` (backend, max_jobs, ...) are kept as given."""
    from frenzy_env import __version__

    entries = []
    for spec in policies:
        entry: dict[str, Any] = {"name": spec.name, "kind": spec.kind, "source": spec.source}
        if spec.kind == "model":
            entry["model"] = file_record(spec.source)
        entries.append(entry)
    return {
        "command": command_line,
        "frenzy_env_version": __version__,
        "python": platform.python_version(),
        "platform": sys.platform,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "policies": entries,
        "workloads": workloads,
        "trace": trace,
        "seeds": list(seeds),
        "env": env_config(env),
        **options,
    }


def write_manifest(out: Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest`` as ``OUT/manifest.json`` (standard JSON, atomically; objects JSON lacks as their
    ``str``); returns its path."""
    return atomic_write_json(out / MANIFEST, manifest, indent=2, default=str)
