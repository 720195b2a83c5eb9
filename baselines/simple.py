"""Simple scripted policies: masked random, FIFO first-fit with requested GPU counts, shortest-job-first.

* ``random``: a uniformly random legal action (seeded).
* ``fifo``: the "opportunistic" baseline of the Frenzy paper: jobs in arrival order, each on its requested GPU
  count (the trace's ``num_gpus``; jobs without a request use their smallest feasible count), on the first
  GPU type (largest memory first) where that plan is legal now. When the head cannot start, later jobs may
  (first-fit), because the paper's opportunistic scheduler takes whatever fits.
* ``sjf``: an oracle: it knows each job's true work, and starts the job with the shortest predicted run time
  on its fastest legal plan first. It is reported, never a target.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines.base import ScriptedPolicy


class RandomPolicy(ScriptedPolicy):
    """Uniformly random among the legal actions (including wait)."""

    name = "random"

    def __init__(self, env: Any, seed: int = 0) -> None:
        super().__init__(env)
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """A fresh stream per episode from (``seed``, the episode's workload seed): an episode's actions do
        not depend on which episodes this policy played before (the Ray backend runs each in a new process)."""
        super().reset()
        episode = getattr(self.env, "episode_seed", None)
        self._rng = np.random.default_rng(self.seed if episode is None else (self.seed, episode))

    def act(self, mask: np.ndarray) -> int:
        legal = np.flatnonzero(mask)
        return int(self._rng.choice(legal)) if legal.size else 0


class FifoPolicy(ScriptedPolicy):
    """First-fit in arrival order with the requested GPU count."""

    name = "fifo"

    def act(self, mask: np.ndarray) -> int:
        env = self.env
        for job in env.visible_queue:
            job = int(job)
            for plan in self.requested_plans(job):
                action = env.start_action(job, plan)
                if action is not None and mask[action]:
                    return action
        return 0

    def requested_plans(self, job: int) -> np.ndarray:
        """Plan slots with the job's requested count (or its smallest available count), by GPU type order."""
        view = self.view
        avail = view.available_plans(np.array([job]))[0]
        want = view.jobs[job].requested_gpus
        counts = view.plan_count
        if want:
            # the largest plan count not above the request (requests need not be powers of two)
            levels = view.plan_counts_levels
            target = int(levels[levels <= want].max()) if (levels <= want).any() else int(levels[0])
            plans = np.flatnonzero(avail & (counts == target))
            if plans.size:
                return plans
        cand = np.flatnonzero(avail)
        if cand.size == 0:
            return cand
        smallest = counts[cand].min()
        return cand[counts[cand] == smallest]


class SjfPolicy(ScriptedPolicy):
    """Oracle shortest-job-first on true remaining work, each job on its fastest legal plan."""

    name = "sjf"
    oracle = True

    def act(self, mask: np.ndarray) -> int:
        env, view = self.env, self.view
        qv = env.visible_queue
        if len(qv) == 0:
            return 0
        legal = env.start_rows(mask)
        if not legal.any():
            return 0
        rem = view.work[qv] - view.done_iters[qv]
        times = np.where(legal, rem[:, None] * view.iter_time[qv], np.inf)  # (Q, P) seconds
        # shortest job by its best plan over all plans (not only the legal ones): if it cannot start now
        # on a legal plan, take its fastest legal one
        order = np.argsort(np.where(view.available_plans(qv), rem[:, None] * view.iter_time[qv], np.inf).min(1))
        for k in order:
            if np.isfinite(times[k]).any():
                return env.start_action(int(qv[k]), int(np.argmin(times[k])))
        return 0
