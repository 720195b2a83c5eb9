"""Masked-action PPO in one file, CleanRL style: train on a small frenzy-env cluster, then compare with FIFO.

Run it (from the repository root)::

    python agents/cleanrl_ppo.py                 # the full run: about 10 minutes on 2 cores
    python agents/cleanrl_ppo.py --quick         # a few seconds: the CI smoke run
    python agents/cleanrl_ppo.py --total-timesteps 200000 --num-envs 4 --seed 1

Every field of :class:`Args` is a flag (``--learning-rate 1e-3``; booleans take ``true``/``false``).

**Environment.** :data:`ENV_ID` (``frenzy/HeteroClusterSmall-`` + the env version,
``frenzy_env.versions.ENV_VERSION``: the 96-GPU "frenzy-testbed"; ``--env-id`` names another) made smaller through
``gym.make`` keywords: 8 queue slots and 8 running slots (452 actions under the id's universal layout, instead of
3,588) and a synthetic workload of 20 jobs at offered load 0.8. Each reset draws a new workload from its seed:
training uses seeds from 10,000 up, the final evaluation seeds 0, 1, ... (never trained on). The id's "auto"
episode budgets cut a thrashing episode short (``--steps-per-job N`` and ``--max-sim-hours H`` set fixed ones:
``max_steps`` = N x jobs; scripted schedulers take 3-4 decisions per job). ``--env-kwargs`` (a JSON object)
adds or overrides ``gym.make`` keywords, e.g. ``'{"interface": "cluster"}'``.

**Reward.** :class:`frenzy_env.wrappers.ReferenceReward` with FIFO as the reference: each step's reward (minus
the jobs in the system times the hours elapsed) is differenced against FIFO's cost on the same workload over
the same span and divided by FIFO's whole cost, so an episode returns ``10 x (1 - our total JCT / FIFO's)``:
positive exactly when we beat FIFO, on the same scale for every workload.

**Discount.** Per hour of *simulated* time, not per decision: a step that lasts ``dt`` hours is discounted by
``gamma ** dt`` (``--discount time``, the default; gamma 0.99 per hour; GAE's lambda stays per decision).
Decisions at one instant take no time, so they are not discounted against each other. With a discount per decision
(``--discount decision``, CleanRL's) every extra decision at an instant would push the episode's remaining costs
one step further into the discounted future, and since the reward is a cost, a policy that stalls by resizing
at every instant would earn more. ``decision_cost`` (default 0) charges each decision that leaves the clock
where it was, the remedy an earlier version of this example needed under the per-decision discount.

**Observation flattening.** The observation is a dict of flat boxes; every entry but ``action_mask``, in the
observation space's key order, is concatenated into one vector, so the example reads whichever layout the env
has (the cluster layout's ``gpus`` and ``nodes``, or ``interface="universal"``'s ``plans`` and ``gpus``). Within
it, ``queue`` (Q x (7 + P)) and ``running`` (R x (7 + P), or 8 + P under the universal layout) are reshaped into
one row per job slot (the job's features, then its predicted time on each of the P plan slots).

**Network.** A shared trunk (MLP, 2 x 128, tanh) embeds the whole flattened observation into a context ``c``.
The logits follow the env's action layout: 4 wait logits (wait, three timed waits) from ``c``; for start
actions, one small MLP shared by all queue slots scores ``[queue row k, c]`` into P logits (one per plan slot
p); another does the same for running rows (resize actions). Sharing the row scorer across slots means a
lesson learnt on slot 0 holds for slot 7. The critic is a separate MLP on the flattened observation.

**Masking.** Illegal actions (``obs["action_mask"] == 0``: memory-infeasible, unplaceable, empty slots) get
logit -1e8, so their probability is exactly 0 in float32: the policy never picks them, and the entropy and the
log-probabilities are those of the masked distribution. The mask is stored with each transition, so PPO's
ratio is computed on the same masked distribution that acted.

**Algorithm.** PPO (Schulman et al. 2017) as in CleanRL's ``ppo.py``: ``num_envs`` envs stepped in turn
(a plain list; an env that ends is reset at once), ``num_steps`` decisions each per rollout, GAE(lambda)
advantages with the per-step discount above (a truncated episode bootstraps from the critic's value of where it
was cut), then
``update_epochs`` passes of clipped-surrogate minibatch updates with normalised advantages, value loss, an
entropy bonus and gradient clipping; the learning rate anneals linearly to 0 over
``total_timesteps`` or ``max_minutes``, whichever runs out first. At the end the sampled policy
and FIFO play the evaluation seeds and their average JCTs are printed side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

import frenzy_env  # noqa: F401  (registers the frenzy/* ids)
from baselines import make_policy
from frenzy_env.evaluation.episodes import run_episode
from frenzy_env.versions import ENV_VERSION
from frenzy_env.workload import make_generator
from frenzy_env.wrappers import ReferenceReward

ENV_ID = f"frenzy/HeteroClusterSmall-{ENV_VERSION}"
"""The default env id: the small cluster of the current env version (``--env-id`` names another)."""
MASK_KEY = "action_mask"


@dataclass
class Args:
    seed: int = 0
    env_id: str = ENV_ID
    env_kwargs: str = ""            # a JSON object of more gym.make keywords (they win over the fields below)
    num_jobs: int = 20              # jobs per workload (synthetic, offered load 0.8)
    queue_slots: int = 8
    running_slots: int = 8
    steps_per_job: int = 0          # max_steps budget = steps_per_job * num_jobs (0: the id's "auto" budget)
    max_sim_hours: float = 0.0      # simulated-time budget (0: the id's "auto" budget)
    decision_cost: float = 0.0      # reward charged for a decision that does not advance the clock
    discount: str = "time"          # "time": gamma per simulated hour; "decision": gamma per decision (CleanRL's)
    total_timesteps: int = 1_000_000  # decisions in all (the run also stops at max_minutes)
    max_minutes: float = 10.0       # wall-clock budget of the training (the evaluation comes after)
    learning_rate: float = 5e-4
    num_envs: int = 8
    num_steps: int = 128            # decisions per env per rollout
    anneal_lr: bool = True
    gamma: float = 0.99             # per simulated hour (discount "time") or per decision ("decision")
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 128
    eval_seeds: int = 10            # evaluation on workload seeds 0 .. eval_seeds-1
    eval_deterministic: bool = False  # False: sample from the policy (what PPO optimised)
    threads: int = 1                # torch threads
    quick: bool = False             # CI smoke mode: a few seconds


QUICK = dict(total_timesteps=512, num_envs=2, num_steps=64, eval_seeds=2, num_jobs=8, update_epochs=2)


def parse_args(argv: list[str] | None = None) -> Args:
    """An argparse parser built from the dataclass fields; ``--quick`` swaps in the :data:`QUICK` settings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            parser.add_argument(flag, nargs="?", const=True, default=f.default,
                                type=lambda s: s.lower() in ("1", "true", "yes"))
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default)
    ns = vars(parser.parse_args(argv))
    if ns["quick"]:
        explicit = {a.lstrip("-").split("=")[0].replace("-", "_") for a in (argv or []) if a.startswith("--")}
        ns.update({k: v for k, v in QUICK.items() if k not in explicit})
    if ns["discount"] not in ("time", "decision"):
        parser.error(f"--discount must be 'time' or 'decision', got {ns['discount']!r}")
    return Args(**ns)


def env_kwargs(args: Args) -> dict:
    """The ``gym.make`` keywords: the small cluster's windows, workload and budgets, then ``--env-kwargs``."""
    extra = json.loads(args.env_kwargs) if args.env_kwargs.strip() else {}
    if not isinstance(extra, dict):
        raise SystemExit(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r}")
    return {
        "queue_slots": args.queue_slots,
        "running_slots": args.running_slots,
        "workload": make_generator("synthetic-small", num_jobs=args.num_jobs),
        "max_steps": args.steps_per_job * args.num_jobs if args.steps_per_job > 0 else "auto",
        "max_sim_hours": args.max_sim_hours if args.max_sim_hours > 0 else "auto",
        **extra,
    }


def make_env(args: Args, reference: bool) -> gym.Env:
    """The small cluster env, with budgets; with ``reference``, wrapped in FIFO's differenced reward."""
    env = gym.make(args.env_id, **env_kwargs(args))
    return ReferenceReward(env, functools.partial(make_policy, "fifo")) if reference else env


def feature_keys(space: gym.spaces.Dict) -> tuple[str, ...]:
    """The observation entries the network reads: every one but the action mask, in the space's key order."""
    return tuple(k for k in space.spaces if k != MASK_KEY)


def flatten(obs: dict, keys: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(flat float32 observation, mask): the entries ``keys`` (:func:`feature_keys`) concatenated, and the mask."""
    flat = np.concatenate([np.asarray(obs[k], np.float32).ravel() for k in keys])
    return flat, obs[MASK_KEY].astype(bool)


def layer(n_in: int, n_out: int, std: float = math.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    """Shared trunk -> context; wait logits from the context; start / resize logits from shared row scorers."""

    def __init__(self, env: gym.Env, hidden: int) -> None:
        super().__init__()
        base = env.unwrapped
        (self.q, self.qwidth), (self.r, self.rwidth) = base.queue_shape, base.running_shape
        self.n_plans = base.num_plans  # a row is the job's features, then one entry per plan slot
        self.n_wait = 1 + len(base.wait_options)
        self.keys = feature_keys(env.observation_space)
        sizes = [int(np.prod(env.observation_space[k].shape)) for k in self.keys]
        starts = dict(zip(self.keys, np.cumsum([0, *sizes[:-1]]).tolist()))  # each entry's offset in the flat vector
        self.q0, self.r0 = starts["queue"], starts["running"]
        obs_dim = sum(sizes)
        assert self.n_wait + (self.q + self.r) * self.n_plans == env.action_space.n, "needs preemption=False"
        self.trunk = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh())
        self.wait_head = layer(hidden, self.n_wait, std=0.01)

        def scorer(width: int) -> nn.Sequential:
            return nn.Sequential(layer(width + hidden, 64), nn.Tanh(), layer(64, self.n_plans, std=0.01))

        self.start_head, self.resize_head = scorer(self.qwidth), scorer(self.rwidth)
        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                    layer(hidden, 1, std=1.0))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Unmasked logits in the env's action order: waits, start (k, p) row-major, resize (r, p)."""
        c = self.trunk(x)
        n = x.shape[0]
        qrows = x[:, self.q0: self.q0 + self.q * self.qwidth].reshape(n, self.q, self.qwidth)
        rrows = x[:, self.r0: self.r0 + self.r * self.rwidth].reshape(n, self.r, self.rwidth)
        start = self.start_head(torch.cat([qrows, c[:, None].expand(-1, self.q, -1)], dim=-1))
        resize = self.resize_head(torch.cat([rrows, c[:, None].expand(-1, self.r, -1)], dim=-1))
        return torch.cat([self.wait_head(c), start.reshape(n, -1), resize.reshape(n, -1)], dim=-1)

    def get_action_and_value(self, x, mask, action=None):
        logits = torch.where(mask, self.logits(x), torch.tensor(-1e8))  # the masking: illegal -> prob 0
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        p = dist.probs
        entropy = -(p * torch.where(mask, dist.logits, torch.zeros_like(p))).sum(-1)  # 0 * -1e8 -> 0, not nan
        return action, dist.log_prob(action), entropy, self.get_value(x)


def evaluate(agent: Agent, args: Args) -> list[dict]:
    """Play the evaluation seeds (held out: training draws seeds from 10,000 up) with the agent and with FIFO."""
    env = make_env(args, reference=False)
    base = env.unwrapped

    class Policy:  # the evaluation loop's interface: predict(...) and reset()
        def reset(self) -> None:
            """Nothing to reset: the agent keeps no state between decisions."""

        def predict(self, obs, state=None, episode_start=None, deterministic=True, action_masks=None):
            x, mask = flatten(obs, agent.keys)
            with torch.no_grad():
                logits = agent.logits(torch.as_tensor(x)[None])[0]
                logits = torch.where(torch.as_tensor(mask), logits, torch.tensor(-1e8))
                a = int(logits.argmax()) if args.eval_deterministic else int(Categorical(logits=logits).sample())
            assert mask[a] and base.action_masks()[a], "the policy picked an illegal action"
            return a, state

    rows = []
    for seed in range(args.eval_seeds):
        torch.manual_seed(seed)
        ppo = run_episode(env, Policy(), seed=seed).metrics
        fifo = run_episode(env, make_policy("fifo", env), seed=seed).metrics
        # a budget-cut episode's avg_jct_h counts its unfinished jobs too (never below its finished jobs')
        rows.append(dict(seed=seed, ppo_jct_h=ppo["avg_jct_h"], fifo_jct_h=fifo["avg_jct_h"],
                         ppo_truncated=int(ppo.get("truncated", 0)), ppo_invalid=int(ppo["invalid_actions"]),
                         ppo_unfinished=_unfinished(ppo), fifo_truncated=int(fifo.get("truncated", 0)),
                         fifo_unfinished=_unfinished(fifo),
                         ppo_decisions=int(ppo["decisions"]), fifo_decisions=int(fifo["decisions"])))
    return rows


def _unfinished(metrics: dict) -> int:
    """The jobs of an episode neither finished nor rejected at its end (queued, running or not yet arrived)."""
    return int(metrics["jobs"] - metrics["finished"] - metrics["rejected"])


@dataclass
class Buffer:
    """One rollout's storage, in CleanRL's layout: step x env."""

    obs: torch.Tensor
    masks: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    values: torch.Tensor
    dones: torch.Tensor  # the episode ended at this step
    boot: torch.Tensor  # V(s_cut) added to a truncated step's reward
    hours: torch.Tensor  # simulated hours the step lasted (0 for a decision at one instant)

    @classmethod
    def zeros(cls, args: Args, env: gym.Env) -> Buffer:
        """Zeroed storage for ``num_steps`` decisions of ``num_envs`` envs like ``env``."""
        shape = (args.num_steps, args.num_envs)
        obs_dim = flatten(env.observation_space.sample(), feature_keys(env.observation_space))[0].size
        logprobs, rewards, values = (torch.zeros(shape) for _ in range(3))
        return cls(obs=torch.zeros((*shape, obs_dim)),
                   masks=torch.zeros((*shape, env.action_space.n), dtype=torch.bool),
                   actions=torch.zeros(shape, dtype=torch.long), logprobs=logprobs, rewards=rewards, values=values,
                   dones=torch.zeros(shape), boot=torch.zeros(shape), hours=torch.zeros(shape))


@dataclass
class Envs:
    """The training envs, stepped in turn, and what carries over from one rollout to the next."""

    envs: list[gym.Env]
    keys: tuple[str, ...]  # the observation entries flattened (feature_keys)
    cur: list[tuple[np.ndarray, np.ndarray]]  # each env's (flat observation, mask) now
    next_seed: int  # the next training workload's seed (evaluation uses 0, 1, ...)
    global_step: int = 0  # decisions so far
    illegal: int = 0  # actions picked that the mask forbade
    episodes: int = 0
    truncated: int = 0  # episodes cut by a budget
    jcts: list[float] = field(default_factory=list)  # each finished episode's average JCT, for the progress line
    returns: list[float] = field(default_factory=list)  # each ended episode's return (decision costs included)
    running_return: list[float] = field(default_factory=list)  # each env's return so far in its episode

    @classmethod
    def reset(cls, args: Args, envs: list[gym.Env]) -> Envs:
        """Every env reset on its own training seed, from 10,000 + 1,000 x ``seed`` up."""
        run = cls(envs, feature_keys(envs[0].observation_space), [], 10_000 + 1_000 * args.seed)
        for env in envs:
            run.cur.append(flatten(env.reset(seed=run.next_seed)[0], run.keys))
            run.running_return.append(0.0)
            run.next_seed += 1
        return run


def collect(agent: Agent, run: Envs, buf: Buffer, args: Args) -> None:
    """One rollout into ``buf``: ``num_steps`` decisions of every env; an env that ends is reset at once on the
    next seed."""
    buf.boot.zero_()
    for step in range(args.num_steps):
        run.global_step += args.num_envs
        x = torch.as_tensor(np.stack([c[0] for c in run.cur]))
        m = torch.as_tensor(np.stack([c[1] for c in run.cur]))
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(x, m)
        buf.obs[step], buf.masks[step], buf.actions[step], buf.logprobs[step], buf.values[step] = (
            x, m, action, logprob, value
        )
        for i, env in enumerate(run.envs):
            a = int(action[i])
            run.illegal += int(not run.cur[i][1][a])
            t_before = env.unwrapped.sim.now
            o, r, term, trunc, info = env.step(a)
            r -= args.decision_cost * (env.unwrapped.sim.now == t_before)  # 0 by default
            buf.rewards[step, i], buf.dones[step, i] = r, float(term or trunc)
            buf.hours[step, i] = (env.unwrapped.sim.now - t_before) / 3600.0
            run.running_return[i] += float(r)
            if trunc and not term:  # cut by a budget: bootstrap from where it was cut
                with torch.no_grad():
                    buf.boot[step, i] = agent.get_value(torch.as_tensor(flatten(o, run.keys)[0])[None])[0]
            if term or trunc:
                run.episodes += 1
                run.truncated += int(not term)
                run.returns.append(run.running_return[i])
                run.running_return[i] = 0.0
                if term:  # a finished episode's average JCT, for the progress line
                    run.jcts.append(info["metrics"]["avg_jct_h"])
                o, _ = env.reset(seed=run.next_seed)
                run.next_seed += 1
            run.cur[i] = flatten(o, run.keys)


def gae(agent: Agent, run: Envs, buf: Buffer, args: Args) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE with a discount g_t per step: ``gamma ** hours_t`` (discount "time") or ``gamma`` ("decision");
    A_t = delta_t + g_t * lambda * (1 - done_t) * A_{t+1}, delta_t = r_t + g_t * (boot_t + (1 - done_t) *
    V_{t+1}) - V_t. Returns the advantages and the returns."""
    with torch.no_grad():
        next_value = agent.get_value(torch.as_tensor(np.stack([c[0] for c in run.cur])))
        advantages = torch.zeros_like(buf.rewards)
        lastgaelam = 0
        for t in reversed(range(args.num_steps)):
            nextvalues = next_value if t == args.num_steps - 1 else buf.values[t + 1]
            nonterminal = 1.0 - buf.dones[t]
            g = args.gamma ** buf.hours[t] if args.discount == "time" else args.gamma  # per hour or per decision
            delta = buf.rewards[t] + g * (buf.boot[t] + nonterminal * nextvalues) - buf.values[t]
            advantages[t] = lastgaelam = delta + g * args.gae_lambda * nonterminal * lastgaelam
        return advantages, advantages + buf.values


def ppo_update(agent: Agent, optimizer: torch.optim.Optimizer, buf: Buffer, advantages: torch.Tensor,
               returns: torch.Tensor, args: Args) -> dict[str, float]:
    """``update_epochs`` passes of clipped-surrogate minibatch updates over the rollout; returns the last
    minibatch's losses."""
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    b_obs, b_masks = buf.obs.reshape(batch_size, -1), buf.masks.reshape(batch_size, -1)
    b_actions, b_logprobs = buf.actions.reshape(-1), buf.logprobs.reshape(-1)
    b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
    clipfracs = []
    for _epoch in range(args.update_epochs):
        perm = torch.randperm(batch_size)
        for start in range(0, batch_size, minibatch_size):
            mb = perm[start: start + minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_masks[mb], b_actions[mb])
            logratio = newlogprob - b_logprobs[mb]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())
            mb_adv = b_advantages[mb]
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = torch.max(-mb_adv * ratio,
                                -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
            v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
            entropy_loss = entropy.mean()
            loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()
    return dict(pg=pg_loss.item(), v=v_loss.item(), entropy=entropy_loss.item(), kl=approx_kl.item(),
                clipfrac=float(np.mean(clipfracs)))


def train(args: Args, envs: list[gym.Env], agent: Agent, optimizer: torch.optim.Optimizer,
          t_start: float) -> tuple[Envs, list[dict]]:
    """Rollout, GAE, PPO update, until ``total_timesteps`` decisions or ``max_minutes``; returns the envs' tallies
    and each update's losses."""
    batch_size = args.num_envs * args.num_steps
    num_updates = max(1, args.total_timesteps // batch_size)
    buf = Buffer.zeros(args, envs[0])
    run = Envs.reset(args, envs)
    losses = []
    for update in range(1, num_updates + 1):
        if args.anneal_lr:  # linearly to 0 over whichever budget runs out first: decisions or minutes
            done = max((update - 1.0) / num_updates, (time.time() - t_start) / (60 * args.max_minutes))
            optimizer.param_groups[0]["lr"] = max(1.0 - done, 0.0) * args.learning_rate
        collect(agent, run, buf, args)
        advantages, returns = gae(agent, run, buf, args)
        loss = ppo_update(agent, optimizer, buf, advantages, returns, args)
        elapsed = time.time() - t_start
        losses.append(dict(update=update, step=run.global_step, episodes=run.episodes, **loss))
        recent = [j for j in run.jcts[-32:] if math.isfinite(j)]
        if update % 10 == 0 or update == num_updates:
            ret = np.mean(run.returns[-32:]) if run.returns else math.nan
            print(f"update {update}/{num_updates} step {run.global_step} {elapsed:.0f}s  episodes {run.episodes} "
                  f"({run.truncated} cut)  recent return {ret:.2f}  "
                  f"avg JCT {np.mean(recent) if recent else math.nan:.2f} h  pg {loss['pg']:.3f}  "
                  f"v {loss['v']:.3f}  entropy {loss['entropy']:.2f}  kl {loss['kl']:.4f}", flush=True)
        if elapsed > 60 * args.max_minutes:
            print(f"stopping at the {args.max_minutes}-minute budget after {run.global_step} decisions")
            break
    return run, losses


def main(argv: list[str] | None = None) -> dict:
    """Train (see the module docstring), then play the evaluation seeds against FIFO and print both."""
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    t_start = time.time()

    envs = [make_env(args, reference=True) for _ in range(args.num_envs)]
    agent = Agent(envs[0], args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    run, losses = train(args, envs, agent, optimizer, t_start)
    train_s = time.time() - t_start

    rows = evaluate(agent, args)
    print(f"\ntrained {run.global_step} decisions in {train_s:.0f} s ({run.episodes} episodes, {run.truncated} cut "
          f"by a budget, {run.illegal} illegal picks)")
    print(f"{'seed':>4} {'PPO avg JCT h':>14} {'FIFO avg JCT h':>15} {'truncated':>9} {'unfinished':>10}")
    for row in rows:
        print(f"{row['seed']:>4} {row['ppo_jct_h']:>14.2f} {row['fifo_jct_h']:>15.2f}"
              f" {row['ppo_truncated']:>4}/{row['fifo_truncated']:<4}"
              f" {row['ppo_unfinished']:>5}/{row['fifo_unfinished']:<4}"
              + ("  (PPO cut by a budget: its avg JCT counts the unfinished jobs)" if row["ppo_truncated"] else ""))
    ppo, fifo = np.mean([r["ppo_jct_h"] for r in rows]), np.mean([r["fifo_jct_h"] for r in rows])
    print(f"{'mean':>4} {ppo:>14.2f} {fifo:>15.2f}   PPO/FIFO = {ppo / fifo:.3f}")
    return dict(args=args, losses=losses, eval=rows, illegal=run.illegal, decisions=run.global_step,
                episodes=run.episodes, truncated=run.truncated, returns=list(run.returns),
                train_s=train_s, ppo_avg_jct_h=float(ppo), fifo_avg_jct_h=float(fifo))

if __name__ == "__main__":
    main(sys.argv[1:])
