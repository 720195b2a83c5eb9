"""Evaluation sweeps on a Ray cluster: every (workload, policy, seed) episode is one Ray task.

:func:`evaluate_ray` takes what :func:`frenzy_env.evaluation.episodes.evaluate` takes and returns the same tables in
the same order, with the same values for the same seeds (every column but the wall-clock decision
latencies, :data:`~frenzy_env.evaluation.episodes.TIMING_METRICS`): an episode depends only on its workload, policy
and seed, never on which episodes ran before it in the same process. A task that fails is submitted once
more; a task that fails twice is reported in the returned failures, and the other episodes' results are
kept.

Ray is an optional dependency (``pip install -e ".[ray]"``); it is imported only when a function of this
module runs, so the rest of the package never needs it. On a multi-machine cluster every node needs the
package installed (the same version), and any file a workload or a policy reads (a ``--trace`` CSV, a
``--model`` zip) must exist at the same path on every node.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from frenzy_env.errors import ConfigError
from frenzy_env.evaluation.episodes import EpisodeResult, env_for, episode_record, run_episode

RAY_MISSING = 'Ray is not installed: the ray backend needs the optional extra (pip install -e ".[ray]")'


@dataclass(frozen=True)
class TaskFailure:
    """An episode that failed on both attempts: its keys and the error of the last attempt."""

    workload: str
    policy: str
    seed: int
    error: str

    def describe(self) -> str:
        return f"{self.workload}, policy {self.policy}, seed {self.seed}: {self.error}"


def import_ray() -> Any:
    """The ``ray`` module, or a :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(RAY_MISSING) from exc
    return ray


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Connect to the Ray cluster at ``address`` ("auto": the one ``ray start`` made on this machine), or
    start a local Ray instance with ``num_cpus`` CPUs (default: all). Returns True if this call started or
    joined Ray (the caller then shuts it down), False if Ray was already initialised in this process."""
    if address is not None and num_cpus is not None:
        raise ConfigError("num_cpus (--num-cpus) applies to a local Ray instance only; it cannot be combined "
                          f"with address {address!r}")
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is not None:
        _check_listening(address)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "warning"}
    try:
        if address is None:
            ray.init(num_cpus=num_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise ConfigError(
            f"cannot connect to the Ray cluster at address {address!r}: {exc}. If the cluster uses token "
            "authentication (the default of `ray start` in recent Ray), set RAY_AUTH_MODE=token here (the token "
            "is read from ~/.ray/auth_token or RAY_AUTH_TOKEN)"
        ) from exc
    return True


def _episode(make_env: Callable[[str], Any], factory: Callable[[Any], Any], workload: str, seed: int) -> EpisodeResult:
    """One episode, in a Ray worker: a fresh env and policy, as the local loop would build them."""
    env = env_for(make_env, workload, factory)
    return run_episode(env, factory(env), seed=seed)


def evaluate_ray(
    make_env: Callable[[str], Any],
    policies: dict[str, Callable[[Any], Any]],
    workloads: Iterable[str],
    seeds: Iterable[int],
    *,
    progress: bool = True,
    on_episode: Callable[[pd.DataFrame, pd.DataFrame], None] | None = None,
    on_result: Callable[[str, str, int, EpisodeResult], None] | None = None,
    retries: int = 1,
    cpus_per_task: float = 1.0,
) -> tuple[pd.DataFrame, pd.DataFrame, list[TaskFailure]]:
    """Run every policy on every workload and seed as Ray tasks on the connected cluster (see
    :func:`connect`; Ray must be initialised).

    Arguments as :func:`frenzy_env.evaluation.episodes.evaluate`; ``make_env`` and the policy factories are shipped
    to the workers (cloudpickle), so closures work; functions of a module the workers cannot import (a test
    file, say) must be pickled by value (``ray.cloudpickle.register_pickle_by_value(module)``). Each failed
    task is resubmitted up to ``retries`` times; failures and retries are reported on stderr.
    Returns ``(jobs, episodes, failures)``: the tables of the episodes that succeeded, in the local
    backend's order (workloads, then policies, then seeds), and one :class:`TaskFailure` per episode that
    failed every attempt. ``on_episode(jobs, episodes)`` is called as tasks finish, with the results so far
    in that order, and ``on_result(workload, policy, seed, result)`` with each finished episode's
    :class:`~frenzy_env.evaluation.episodes.EpisodeResult`. A progress bar counts finished tasks.
    """
    ray = import_ray()
    from frenzy_env.progress import progress_bar

    if not ray.is_initialized():
        raise ConfigError("Ray is not initialised: call frenzy_env.evaluation.distributed.connect() first")
    if retries < 0:
        raise ConfigError(f"retries must be >= 0, got {retries!r}")
    workloads, seeds, names = list(workloads), list(seeds), list(policies)
    keys = [(w, p, s) for w in workloads for p in names for s in seeds]  # the local backend's order
    order = {k: i for i, k in enumerate(keys)}
    remote = ray.remote(_episode).options(num_cpus=cpus_per_task, max_retries=0, retry_exceptions=False)
    env_ref = ray.put(make_env)
    factory_refs = {name: ray.put(f) for name, f in policies.items()}

    def submit(key: tuple[str, str, int]) -> Any:
        w, p, s = key
        return remote.remote(env_ref, factory_refs[p], w, s)

    pending = {submit(k): (k, 0) for k in keys}
    done: dict[tuple[str, str, int], tuple[pd.DataFrame, dict]] = {}
    failures: list[TaskFailure] = []
    bar = progress_bar(len(keys), show=progress, desc="episodes (ray)", unit="ep")
    t0 = time.perf_counter()
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        ref = ready[0]
        key, attempt = pending.pop(ref)
        where = f"episode {key[0]}, policy {key[1]}, seed {key[2]}"
        try:
            result = ray.get(ref)
        except Exception as exc:  # a raising policy (RayTaskError), or a lost worker or node
            error = _error_line(exc)
            if attempt < retries:
                bar.write(f"{where} failed ({error}); retrying", file=sys.stderr)
                pending[submit(key)] = (key, attempt + 1)
                continue
            failures.append(TaskFailure(*key, error))
            bar.write(f"{where} failed{' again' if attempt else ''}: {error}", file=sys.stderr)
        else:
            if on_result is not None:
                on_result(*key, result)
            done[key] = episode_record(result, *key)
        bar.set_postfix_str(f"{key[0]} {key[1]} seed={key[2]}")
        bar.update(1)
        if on_episode is not None and key in done:
            on_episode(*_tables(done, order))
    bar.close()
    failures.sort(key=lambda f: order[(f.workload, f.policy, f.seed)])
    jobs, episodes = _tables(done, order)
    if progress:
        elapsed = time.perf_counter() - t0
        print(f"{len(done)} of {len(keys)} episodes in {elapsed:.1f} s on Ray", file=sys.stderr, flush=True)
    return jobs, episodes, failures


def _tables(done: dict, order: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(jobs, episodes) of the finished episodes, in the local backend's order."""
    keys = sorted(done, key=order.__getitem__)
    if not keys:
        return pd.DataFrame(), pd.DataFrame()
    jobs = pd.concat([done[k][0] for k in keys], ignore_index=True)
    return jobs, pd.DataFrame([done[k][1] for k in keys])


def _error_line(exc: BaseException) -> str:
    """One line naming the original error of a failed task (Ray wraps it with a remote traceback)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


__all__ = ["RAY_MISSING", "TaskFailure", "connect", "evaluate_ray", "import_ray"]


def _check_listening(address: str, timeout_s: float = 5.0) -> None:
    """ConfigError unless something accepts TCP connections at ``address`` ("host:port" or
    "ray://host:port"; "auto" and other forms are left to Ray): ``ray.init`` would otherwise wait minutes
    for a cluster that is not there."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster at address {address!r}: nothing accepts connections there ({exc}). Start one with "
            "`ray start --head` (it prints the address to join), or check the host and port"
        ) from exc
