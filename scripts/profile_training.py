"""Where the PPO trainer's time goes: a short training run with the shipped configuration (16 envs), timed by part.

Runs ``--updates`` updates of ``--n-steps`` decisions per env (no warm start, no validation) and prints the
wall seconds and shares of: the rollouts (and within them the env steps, the observation encoding, the env
resets, the reference runs of new workloads and the network's forward passes) and the updates (and within
them the forward passes, the backward passes and Adam), then decisions per second end to end::

    python scripts/profile_training.py --updates 4

Each part is timed by wrapping its function (``VecRollout.collect``, ``ppo_update``, ``ReferenceCache._play``,
``FrenzyEnv.step``, ``.reset`` and ``._observe``, ``policy_outputs``, ``torch.Tensor.backward``,
``torch.optim.Adam.step``) and counted only inside the loop's rollouts and updates (not the start's resets and
reference runs, nor the validations); an inner part is also counted in its outer one (an env step includes its
observation, a reset the simulator's construction), and a reference run's own steps count in it only.
``--worlds`` gives training worlds as JSON (``'[{"cluster": "pai-2020"}]'``); ``--load-mode wait`` the v6
suites' load measure.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch as th

SECTIONS = {
    "rollouts": "rollout",
    "  env steps (observation included)": "FrenzyEnv.step@rollout",
    "  observation encoding": "FrenzyEnv._observe@rollout",
    "  env resets (simulator built)": "FrenzyEnv.reset@rollout",
    "  reference runs of new workloads": "reference@rollout",
    "  network forward (rollout)": "policy_outputs@rollout",
    "updates": "update",
    "  network forward (update)": "policy_outputs@update",
    "  backward passes": "Tensor.backward@update",
    "  Adam steps": "Adam.step@update",
}


def _timed(owner: Any, name: str, key: str, spent: dict, where: list[str], marker: str | None = None) -> None:
    """Wrap ``owner.name`` so that, called inside a timed part (``where``'s last entry), its wall time accumulates
    in ``spent["key@part"]``; with ``marker`` it is a part itself: its time goes to ``spent[marker]`` (and to
    ``spent["marker@outer part"]`` when nested) and the calls inside it count as its own."""
    inner = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outer = where[-1] if where else None
        if marker is not None:
            where.append(marker)
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            if marker is not None:
                where.pop()
                if outer is None:
                    spent[marker] += dt
            if outer is not None:
                spent[f"{key}@{outer}"] += dt

    setattr(owner, name, wrapper)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--n-steps", type=int, default=1024, help="decisions per env per rollout")
    parser.add_argument("--worlds", default="", help="training worlds, a JSON list of env-keyword objects")
    parser.add_argument("--load-mode", default="fluid", help="fluid (default), busy or wait")
    args = parser.parse_args(argv)

    import agents.ppo.rollout as rollout
    import agents.ppo.training as training
    from agents.ppo import TrainConfig, train
    from agents.ppo.reference_reward import ReferenceCache
    from frenzy_env.env import FrenzyEnv

    spent: dict[str, float] = collections.defaultdict(float)
    where: list[str] = []  # the parts the running call is inside
    # only calls inside a rollout or an update count (not the start's resets and reference runs, nor validation)
    _timed(rollout.VecRollout, "collect", "collect", spent, where, marker="rollout")
    _timed(training, "ppo_update", "ppo_update", spent, where, marker="update")
    _timed(ReferenceCache, "_play", "reference", spent, where, marker="reference")
    _timed(FrenzyEnv, "step", "FrenzyEnv.step", spent, where)
    _timed(FrenzyEnv, "reset", "FrenzyEnv.reset", spent, where)
    _timed(FrenzyEnv, "_observe", "FrenzyEnv._observe", spent, where)
    _timed(th.Tensor, "backward", "Tensor.backward", spent, where)
    _timed(th.optim.Adam, "step", "Adam.step", spent, where)
    for module in (rollout, training):  # imported by name into both
        _timed(module, "policy_outputs", "policy_outputs", spent, where)
    shipped = TrainConfig()
    worlds = tuple(json.loads(args.worlds)) if args.worlds else ()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = dataclasses.replace(
            shipped, timesteps=args.updates * args.n_steps * shipped.n_envs, eval_freq=10**12, out_dir=tmp,
            progress=False, validation_episodes=1, validation_jobs=20, worlds=worlds, load_mode=args.load_mode,
            ppo=dataclasses.replace(shipped.ppo, n_steps=args.n_steps, bc_episodes=0,
                                    batch_size=min(shipped.ppo.batch_size, args.n_steps * shipped.n_envs)),
        )
        t_train = time.perf_counter()
        train(cfg)
        total = time.perf_counter() - t_train
        lines = [json.loads(x) for x in (Path(tmp) / "updates.jsonl").read_text().splitlines()]
    loop = sum(x["rollout_s"] + x["update_s"] for x in lines)
    decisions = args.updates * args.n_steps * shipped.n_envs
    print(f"{decisions:,} decisions in {args.updates} updates of {shipped.n_envs} envs x {args.n_steps}; "
          f"{loop:.1f} s in rollouts and updates ({total:.1f} s with set-up and the two validations)")
    print(f"{'part':<40} {'seconds':>8} {'share':>7}")
    for label, key in SECTIONS.items():
        print(f"{label:<40} {spent.get(key, 0.0):8.2f} {spent.get(key, 0.0) / loop:7.1%}")
    print(f"end to end: {decisions / loop:,.0f} decisions/s (rollouts alone "
          f"{decisions / sum(x['rollout_s'] for x in lines):,.0f}/s); torch threads {th.get_num_threads()}")


if __name__ == "__main__":
    main()
