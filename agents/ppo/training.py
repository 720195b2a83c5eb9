"""Training the PPO scheduler: warm start, rollouts, updates, validation, checkpoints and resume.

:func:`train` runs PPO (clipped surrogate, GAE with a discount per step of simulated time, the reward
differenced against a reference scheduler, the factored masked distribution) on the
:class:`~agents.ppo.network.SlotPlanPolicy` of an sb3-contrib ``MaskablePPO`` container, so every model it
writes loads with :func:`~agents.ppo.loading.load_policy` and ``frenzy evaluate --policies ppo``. The loop is
this module's own (not ``MaskablePPO.learn``): per-step discounts, the factored distribution's log-probs
and type entropy, and resumable state need it.

Output folder: ``config.json`` (the configuration, the split, obs/env versions), ``model.zip`` (latest),
``best_model.zip`` (the best validation score: mean ratio of average JCT to the reference's),
``bc_model.zip`` (after the warm start), ``teacher_demos.npz`` (the teacher's demonstrations, while
``ppo.bc_coef`` pulls towards them),
``checkpoint.pt`` (everything needed to resume: network, optimizer, RNGs, envs mid-episode, the seed
cursor, counters, the validation curve; written with ``model.zip`` *before* each validation, so a validation
that hangs or is killed loses nothing, and again after it), ``learning_curve.csv`` / ``.png`` (validation
average JCT against decisions, with the reference's, and ``val_truncated``: validation episodes cut by a
budget), ``updates.jsonl`` (a line per update) and ``train_log.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

from agents.ppo.config import TrainConfig
from agents.ppo.distribution import entropy, greedy_actions, within_type_entropy
from agents.ppo.guide import guide_hints, make_guide
from agents.ppo.network import SlotPlanPolicy, policy_kwargs_for
from agents.ppo.reference_reward import (
    WORLD_SEED_STRIDE,
    ReferenceCache,
    RewardShaper,
    WorldReferenceCache,
    run_reference,
)
from agents.ppo.rollout import (
    VecRollout,
    gae,
    instant_weights,
    obs_keys,
    obs_tensors,
    policy_outputs,
    sample_actions,
)
from agents.ppo.warmstart import (
    behaviour_clone,
    collect_teacher,
    load_demos,
    save_demos,
    teacher_loss,
    teacher_tensors,
)
from agents.ppo.workloads import make_env, training_generator, validation_workloads
from frenzy_env.observation import OBS_VERSION, UNIVERSAL_OBS_VERSION
from frenzy_env.paths import append_json_line, atomic_open, atomic_write_json, atomic_write_text, json_text
from frenzy_env.versions import ENV_VERSION

#: parameters (name prefixes) that only the critic uses: what a critic warm-up trains
CRITIC_ONLY = ("features_extractor.critic_context.", "mlp_extractor.value.", "value_net.")
#: the teacher's demonstrations in a run's folder while ``ppo.bc_coef`` pulls towards them (for resume)
DEMOS_FILE = "teacher_demos.npz"
CURVE_FIELDS = ("decisions", "updates", "wall_s", "val_avg_jct_h", "ref_avg_jct_h", "val_over_ref", "val_truncated")


def _container(cfg: TrainConfig, probe: Any) -> Any:
    """The MaskablePPO object holding the policy (used to save models in stable-baselines3's format)."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    p = cfg.ppo
    return MaskablePPO(
        SlotPlanPolicy,
        DummyVecEnv([lambda: probe]),
        learning_rate=p.learning_rate,
        n_steps=p.n_steps,
        batch_size=p.batch_size,
        n_epochs=p.n_epochs,
        gae_lambda=p.gae_lambda,
        clip_range=p.clip_range,
        ent_coef=p.ent_coef,
        vf_coef=p.vf_coef,
        max_grad_norm=p.max_grad_norm,
        policy_kwargs=policy_kwargs_for(probe, p),
        seed=cfg.seed,
        device="cpu",
    )


def _load_weights(policy: Any, path: str | os.PathLike) -> tuple[int | None, list[str]]:
    """Copy a saved model's network into ``policy`` (a clear ConfigError when the file is missing, is not a
    model, or its network has other sizes); returns the observation version the model recorded (None when
    it recorded none) and the parameters the model lacks (``type_demand``'s, set to 0:
    :func:`agents.ppo.network.load_growing`). A model of an older observation version is accepted: its
    weights are a starting point (fine-tuning after an encoding change), and the version goes into the
    run's log."""
    from agents.ppo.loading import read_model, recorded_obs_version
    from agents.ppo.network import load_growing
    from frenzy_env.errors import ConfigError

    saved = read_model(path, any_obs_version=True).policy.state_dict()
    try:
        new = load_growing(policy, saved)
    except RuntimeError as exc:
        raise ConfigError(f"init_model {str(path)!r} does not fit this network (other sizes?): {exc}") from None
    found = recorded_obs_version(Path(path))
    return (None if found is None else found[0]), new


def _new_parameter_groups(policy: Any, opt: Any, names: list[str], scale: float) -> Any:
    """``opt`` again, its parameters in two groups: those named in ``names`` (new to the run's initial
    model) with ``lr_scale`` = ``scale``, the rest with 1 (the learning-rate schedule multiplies by it).
    ``opt`` itself when there are none or ``scale`` is 1."""
    named = dict(policy.named_parameters())
    new_ids = {id(named[n]) for n in names if n in named}
    if not new_ids or scale == 1.0:
        return opt
    params = list(policy.parameters())
    groups = [
        {"params": [q for q in params if id(q) not in new_ids], "lr_scale": 1.0},
        {"params": [q for q in params if id(q) in new_ids], "lr_scale": float(scale)},
    ]
    # not policy.optimizer: a saved model.zip keeps SB3's one group, so it loads as any model does (the
    # run's optimizer state lives in checkpoint.pt)
    return type(opt)(groups, **opt.defaults)


def _load_optimizer(policy: Any, opt: Any, path: str | os.PathLike) -> bool:
    """Continue Adam's moments from the run that saved ``path``: when the ``checkpoint.pt`` beside it holds
    exactly the weights now in ``policy`` (the run's last model), load its optimizer state into ``opt`` and
    return True; else change nothing and return False. A fresh Adam takes a full-size step on every weight,
    noisy ones included, in its first updates; the saved moments keep the steps the run had settled to."""
    ckpt = Path(path).parent / "checkpoint.pt"
    if not ckpt.is_file():
        return False
    state = th.load(ckpt, weights_only=False)
    saved, now = state.get("policy", {}), policy.state_dict()
    if saved.keys() != now.keys() or not all(th.equal(saved[k], now[k]) for k in now):
        return False
    opt.load_state_dict(state["optimizer"])
    return True


def _record(cfg: TrainConfig) -> dict[str, Any]:
    from agents.ppo.config import TEST_TRACES, TRAIN_TRACES, VALIDATION_TRACES

    return {
        "agent": "ppo",  # agents.model_record
        **cfg.to_dict(),
        "obs_version": OBS_VERSION,
        **({"universal_obs_version": UNIVERSAL_OBS_VERSION} if cfg.interface == "universal" else {}),
        "env_version": ENV_VERSION,
        "split": {
            "train": "synthetic seeds 0-499 (jobs_range, load_range) and random windows of `traces` "
            f"(ITP {', '.join(n for n, _ in TRAIN_TRACES)})",
            "validation": "synthetic seeds 500-999 and fixed windows of `validation_traces` "
            f"(ITP {', '.join(n for n, _ in VALIDATION_TRACES)})",
            "test": "synthetic seeds >= 1000 and fixed windows of `test_traces` "
            f"(ITP {', '.join(n for n, _ in TEST_TRACES)}), never trained or validated on",
        },
    }


class Validator:
    """Runs of the policy on the validation workloads (all envs batched through the network) and the
    reference's average JCT on the same workloads (computed once).

    With ``cfg.validation_samples`` = k > 0 every workload is played k times with actions *sampled* from the
    policy, as it acts in training and (by default) in evaluation; the draws come from a generator seeded
    the same way at every validation (common random numbers: two checkpoints are compared on the same
    draws). With k = 0 each workload is played once with the greedy action. The score that picks
    ``best_model.zip`` is the mean over workloads and samples of ``agent / reference`` average JCT.

    ``reference_cache`` (a JSON file, created when missing) keeps the reference's results between runs:
    scripted references are deterministic, and elastic Sia's 16 validation episodes take about 20 minutes.
    Entries are keyed by everything they depend on (:meth:`reference_key`); a changed split recomputes.

    Budgets: the policy's episodes are truncated after ``cfg.validation_max_steps_per_job`` steps per job and at
    ``cfg.validation_max_sim_hours`` (the env's budgets), and a pass stops after ``cfg.validation_time_budget_s``
    wall seconds, cutting the episodes still running. A cut episode scores its ``avg_time_in_system_h`` (a lower
    bound on its average JCT); :attr:`truncated` marks them after each :meth:`run`. The reference plays
    without budgets.
    """

    def __init__(self, cfg: TrainConfig, reference_cache: str | os.PathLike | None = None) -> None:
        self.cfg = cfg
        self.items = validation_workloads(cfg)
        self.reps = max(cfg.validation_samples, 1)
        per_job = cfg.validation_max_steps_per_job
        self.envs = [
            make_env(cfg, wl, max_sim_hours=cfg.validation_max_sim_hours,
                     max_steps=None if per_job is None else max(1, math.ceil(per_job * len(wl.jobs))))
            for _ in range(self.reps) for _, wl, _ in self.items
        ]
        self.seeds = [s for _ in range(self.reps) for _, _, s in self.items]
        self.truncated = np.zeros((self.reps, len(self.items)), dtype=bool)
        ref = self.reference = cfg.ppo.reference or "doubling"
        cache = Path(reference_cache) if reference_cache is not None else None
        stored = json.loads(cache.read_text()) if cache is not None and cache.is_file() else {}
        key = self.reference_key()
        if key in stored:
            self.ref_jct = np.array(stored[key], dtype=float)
            return
        self.ref_jct = np.array([run_reference(make_env(cfg, wl), ref, s).avg_jct_h for _, wl, s in self.items])
        if cache is not None:
            stored[key] = self.ref_jct.tolist()
            atomic_write_json(cache, stored, indent=1)

    def reference_key(self) -> str:
        """What the reference's results depend on, as one string: the reference, the env version, the cluster,
        the windows, each validation workload's name and seed, a digest of their jobs, and the interface when it
        is not "cluster" (the keys of cluster-layout runs are those of runs older than the field)."""
        digest = hashlib.sha256(repr([wl.jobs for _, wl, _ in self.items]).encode()).hexdigest()[:16]
        layout = [] if self.cfg.interface == "cluster" else [self.cfg.interface]
        return json.dumps([
            self.reference, ENV_VERSION, self.cfg.cluster, self.cfg.queue_slots, self.cfg.running_slots,
            [(name, seed) for name, _, seed in self.items], digest, *layout,
        ])

    def run(self, policy: Any) -> np.ndarray:
        """(reps, n) average JCT in hours of each validation workload (columns) in each repetition (rows); a cut
        episode's ``avg_time_in_system_h`` (:attr:`truncated` says which)."""
        sample = self.cfg.validation_samples > 0
        budget = self.cfg.validation_time_budget_s
        deadline = math.inf if budget is None else time.monotonic() + budget
        cut = np.zeros(len(self.envs), dtype=bool)
        gen = th.Generator().manual_seed(self.cfg.seed + 7919)
        obs = [e.reset(seed=s)[0] for e, s in zip(self.envs, self.seeds)]
        guide = getattr(policy, "guide", None)
        guides = [make_guide(guide, e) for e in self.envs] if guide is not None else None
        active = list(range(len(self.envs)))
        jct = np.zeros(len(self.envs))
        while active:
            if time.monotonic() > deadline:  # the pass's wall-clock budget: cut what still runs
                for i in active:
                    jct[i] = self.envs[i].episode_metrics(truncated=True)["avg_time_in_system_h"]
                    cut[i] = True
                break
            batch = {k: np.stack([obs[i][k] for i in active]) for k in obs_keys(obs[0])}
            mask_np = np.stack([self.envs[i].action_masks() for i in active])
            mask = th.from_numpy(mask_np)
            hint = guide_hints(None if guides is None else [guides[i] for i in active], mask_np)
            with th.no_grad():
                logp, type_logp, _, _ = policy_outputs(
                    policy, obs_tensors(batch), mask, None if hint is None else th.from_numpy(hint)
                )
                if sample:
                    acts = sample_actions(logp, mask, gen)
                elif type_logp is None:
                    acts = logp.argmax(-1)
                else:
                    acts = greedy_actions(logp, type_logp, policy.action_type)
            still = []
            for i, a in zip(active, acts.numpy()):
                obs[i], _, term, trunc, info = self.envs[i].step(int(a))
                if term or trunc:
                    m = info["metrics"]
                    jct[i] = m["avg_time_in_system_h"] if trunc else m["avg_jct_h"]
                    cut[i] = bool(trunc)
                else:
                    still.append(i)
            active = still
        self.truncated = cut.reshape(self.reps, len(self.items))
        return jct.reshape(self.reps, len(self.items))


def ppo_update(policy: Any, opt: Any, buf: dict[str, Any], adv: np.ndarray, ret: np.ndarray, cfg: TrainConfig,
               gen: th.Generator, actor: bool = True, demos: dict[str, Any] | None = None,
               teacher_coef: float = 0.0) -> dict[str, float]:
    """One PPO update over a rollout buffer; returns the losses and diagnostics. ``actor=False`` fits the
    critic only: the parameters the actor shares with it (the slot encoders) are left as they are, so the
    policy's outputs do not change. With ``demos`` (:func:`agents.ppo.warmstart.teacher_tensors`) and
    ``teacher_coef`` > 0, every minibatch adds ``teacher_coef`` x the teacher's cross-entropy on a minibatch
    of its demonstrations (:func:`agents.ppo.warmstart.teacher_loss`)."""
    p = cfg.ppo
    n = adv.size
    flat = lambda x: x.reshape(n, *x.shape[2:])  # noqa: E731  (T, N, ...) -> (T*N, ...)
    obs = {k: th.from_numpy(flat(buf["obs"][k])) for k in obs_keys(buf["obs"])}
    masks = th.from_numpy(flat(buf["masks"]))
    actions = th.from_numpy(flat(buf["actions"]))
    old_logp = th.as_tensor(flat(buf["logp"]), dtype=th.float32)
    adv_t = th.as_tensor(flat(adv), dtype=th.float32)
    ret_t = th.as_tensor(flat(ret), dtype=th.float32)
    hints = th.from_numpy(flat(buf["hints"])) if buf.get("hints") is not None else None
    weight = th.as_tensor(flat(instant_weights(buf["elapsed"], buf["dones"])), dtype=th.float32) \
        if p.instant_weighting else None
    stats: dict[str, list[float]] = {
        k: [] for k in ("pg_loss", "vf_loss", "entropy", "type_entropy", "approx_kl", "teacher_ce")
    }
    pull = actor and demos is not None and teacher_coef > 0
    n_demos = len(demos["actions"]) if pull else 0
    policy.set_training_mode(True)
    frozen = [] if actor else [q for name, q in policy.named_parameters() if not name.startswith(CRITIC_ONLY)]
    stop = False
    for _ in range(p.n_epochs):
        perm = th.randperm(n, generator=gen)
        for i in range(0, n - p.batch_size + 1, p.batch_size):
            idx = perm[i : i + p.batch_size]
            logp, type_logp, ent_rows, values = policy_outputs(
                policy, {k: v[idx] for k, v in obs.items()}, masks[idx], None if hints is None else hints[idx]
            )
            new_logp = logp.gather(1, actions[idx, None]).squeeze(-1)
            a = adv_t[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            log_ratio = new_logp - old_logp[idx]
            ratio = th.exp(log_ratio)
            pg_rows = th.min(a * ratio, a * th.clamp(ratio, 1 - p.clip_range, 1 + p.clip_range))
            pg = -(pg_rows if weight is None else pg_rows * weight[idx]).mean()
            vf = th.nn.functional.smooth_l1_loss(values, ret_t[idx])  # Huber: a bad episode's -300 stays bounded
            if p.entropy == "within_type":
                ent_rows = within_type_entropy(logp, type_logp, masks[idx], policy.action_type)
            ent = ent_rows.mean()
            type_ent = entropy(type_logp).mean() if type_logp is not None else th.zeros(())
            loss = p.vf_coef * vf
            if actor:
                loss = loss + pg - p.ent_coef * ent - p.type_ent_coef * type_ent
            if pull:
                ce = teacher_loss(policy, demos, th.randint(n_demos, (p.batch_size,), generator=gen))
                loss = loss + teacher_coef * ce
                stats["teacher_ce"].append(float(ce.detach()))
            with th.no_grad():
                kl = float(((ratio - 1) - log_ratio).mean())
            if p.target_kl is not None and kl > 1.5 * p.target_kl:
                stop = True
                break
            opt.zero_grad()
            loss.backward()
            for q in frozen:  # no gradient: Adam leaves them (and their moments) alone
                q.grad = None
            th.nn.utils.clip_grad_norm_(policy.parameters(), p.max_grad_norm)
            opt.step()
            for k, v in (("pg_loss", pg), ("vf_loss", vf), ("entropy", ent), ("type_entropy", type_ent)):
                stats[k].append(float(v.detach()))
            stats["approx_kl"].append(kl)
        if stop:
            break
    policy.set_training_mode(False)
    out = {k: float(np.mean(v)) if v else float("nan") for k, v in stats.items()}
    var = float(np.var(ret))
    out["explained_variance"] = float("nan") if var == 0 else 1.0 - float(np.var(ret - buf["values"])) / var
    out["early_stop"] = float(stop)
    return out


def _plot_curve(rows: list[dict[str, float]], path: Path, reference: str, sampled: bool = True) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = [r["decisions"] for r in rows]
    label = "PPO (sampled actions)" if sampled else "PPO (greedy)"
    ax.plot(x, [r["val_avg_jct_h"] for r in rows], marker="o", label=label)
    ax.plot(x, [r["ref_avg_jct_h"] for r in rows], ls="--", label=f"{reference} (same workloads)")
    cut = [r for r in rows if r.get("val_truncated")]
    if cut:  # passes with episodes cut by a budget: their value is a lower bound
        ax.scatter([r["decisions"] for r in cut], [r["val_avg_jct_h"] for r in cut], marker="x", color="red",
                   zorder=3, label="episodes cut by a budget (lower bound)")
    ax.set_xlabel("training decisions")
    ax.set_ylabel("validation average JCT (h)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _write_curve(out: Path, rows: list[dict[str, float]], reference: str, sampled: bool = True) -> None:
    lines = [",".join(CURVE_FIELDS)] + [",".join(f"{r.get(k, 0):.6g}" for k in CURVE_FIELDS) for r in rows]
    atomic_write_text(out / "learning_curve.csv", "\n".join(lines) + "\n")
    if rows:
        _plot_curve(rows, out / "learning_curve.png", reference, sampled)


def _atomic_save(obj: Any, path: Path) -> None:
    """``obj`` to ``path`` with ``torch.save`` through a temporary file moved into place (a kill never leaves
    half a file)."""
    with atomic_open(path, "wb") as fh:
        th.save(obj, fh)


def train(
    cfg: TrainConfig | None, resume: str | os.PathLike | None = None, stop_after_updates: int | None = None
) -> Path:
    """Train as configured (or continue the run in ``resume``: its ``config.json`` and ``checkpoint.pt``);
    returns the output folder. ``stop_after_updates`` ends the call after that many updates of this call,
    leaving a checkpoint as a killed run would (tests use it)."""
    cfg, out = _open_run(cfg, resume)
    th.set_num_threads(cfg.threads)
    th.manual_seed(cfg.seed)
    run = _Run(cfg, out)
    if resume is not None:
        run.restore()
    else:
        run.start()
    run.validator = Validator(cfg)
    run.first_validation()
    if run.loop(stop_after_updates):
        run.finish()
    return out


def _open_run(cfg: TrainConfig | None, resume: str | os.PathLike | None) -> tuple[TrainConfig, Path]:
    """The configuration and the output folder: with ``resume``, the run's (its ``config.json``; a
    ``checkpoint.pt`` must be there too); else ``cfg`` and its ``out_dir``, created, with ``config.json``."""
    if resume is not None:
        out = Path(resume)
        if not (out / "checkpoint.pt").is_file() or not (out / "config.json").is_file():
            raise FileNotFoundError(f"--resume {str(out)!r}: no checkpoint.pt and config.json there")
        return TrainConfig.from_dict(json.loads((out / "config.json").read_text())), out
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", _record(cfg))
    return cfg, out


class _Run:
    """One call of :func:`train`: the model and its optimizer, the reward shaper, the rollout, the counters and
    the validation curve, and the steps that move them (start or restore, validate, checkpoint, update,
    finish)."""

    # set by start() or restore()
    rollout: VecRollout
    upd_gen: th.Generator  # the minibatch draws of the updates
    steps: int  # decisions trained on
    updates: int
    rows: list[dict[str, float]]  # the learning curve: one row per validation
    best: float  # the best validation score without cut episodes (best_model.zip's)
    wall_before: float  # wall seconds of the calls before this one (resume)
    # set by train() once the run has started
    validator: Validator

    def __init__(self, cfg: TrainConfig, out: Path) -> None:
        p = cfg.ppo
        self.cfg, self.out = cfg, out
        self.gen = gen = training_generator(cfg)  # validation's and the warm start's (cfg.cluster)
        # each training world's workloads, its seeds offset by WORLD_SEED_STRIDE (world 0: the plain seeds)
        self.gens = [training_generator(cfg, w) for w in range(cfg.num_worlds)]
        self.log = print if cfg.verbose else (lambda *_: None)
        self.model = _container(cfg, make_env(cfg, gen))
        self.policy, self.opt = self.model.policy, self.model.policy.optimizer
        self.cache = None
        if p.reference:
            caches = [ReferenceCache(lambda w=w: make_env(cfg, self.gens[w], world=w), p.reference)
                      for w in range(cfg.num_worlds)]
            self.cache = caches[0] if cfg.num_worlds == 1 else WorldReferenceCache(caches)
        self.shaper = RewardShaper(self.cache, p.reward_gain, cfg.n_envs)
        self.horizon_s = None if p.horizon_h is None else p.horizon_h * 3600.0
        self.t_start = time.time()
        self.info: dict[str, Any] = {}
        self.demos = None  # the teacher's demonstrations while ppo.bc_coef pulls towards them
        self.validation_pending = False  # restored from a run killed during a validation: it runs first

    def restore(self) -> None:
        """Continue from ``checkpoint.pt``: the network, the optimizer (in the run's parameter groups), the RNGs,
        the envs mid-episode, the shaper, the counters and the curve; the teacher's demonstrations while they
        still pull; ``updates.jsonl`` cut back to the checkpoint's updates (the later ones are redone)."""
        cfg, p, out = self.cfg, self.cfg.ppo, self.out
        state = th.load(out / "checkpoint.pt", weights_only=False)
        self.policy.load_state_dict(state["policy"])
        self.opt = _new_parameter_groups(
            self.policy, self.opt, state["info"].get("init_new_parameters", []), p.new_lr_scale
        )
        self.opt.load_state_dict(state["optimizer"])
        th.set_rng_state(state["torch_rng"])
        seed_rng = np.random.default_rng()
        seed_rng.bit_generator.state = state["seed_rng"]
        envs = pickle.loads(state["envs"])
        guides = None
        if isinstance(envs, tuple):  # (envs, guides) of a guided run, pickled together (guides hold their envs)
            envs, guides = envs
        rollout = self.rollout = VecRollout(
            envs, self.shaper, seed_rng, cfg.train_workloads, self.horizon_s, seed_offset=self.seed_offsets(),
            start=False, guides=guides, steps_per_job=cfg.max_steps_per_job,
        )
        rollout.episodes = state["episodes"]
        rollout.restore(state["obs"], state["time"])
        for i, e in enumerate(envs):  # the reference curves are deterministic: recompute the ones in use
            if self.cache is not None:
                self.shaper.curve[i] = self.cache.get(e.unwrapped.episode_seed)
        self.shaper.t, self.shaper.scale = list(state["shaper"]["t"]), list(state["shaper"]["scale"])
        self.steps, self.updates, self.rows, self.best = state["steps"], state["updates"], state["curve"], state["best"]
        self.wall_before, self.info = state["wall_s"], state["info"]
        self.upd_gen = th.Generator()
        self.upd_gen.set_state(state["update_rng"])
        if p.bc_coef > 0 and self.steps < p.bc_decay:
            self.demos = teacher_tensors(load_demos(out / DEMOS_FILE))
        log_path = out / "updates.jsonl"  # drop the lines of updates after the checkpoint (they are redone)
        if log_path.is_file():
            kept = log_path.read_text().splitlines()[: self.updates]
            atomic_write_text(log_path, "".join(x + "\n" for x in kept))
        self.validation_pending = bool(state.get("validation_pending"))

    def start(self) -> None:
        """A new run: the warm start, then ``n_envs`` fresh envs (with their plan guides) and the counters at
        zero."""
        cfg, p = self.cfg, self.cfg.ppo
        self.warm_start()
        worlds = cfg.num_worlds
        envs = [make_env(cfg, self.gens[i % worlds], world=i % worlds, max_sim_hours=cfg.max_sim_hours)
                for i in range(cfg.n_envs)]
        guides = [make_guide(p.guide, e) for e in envs] if p.guide is not None else None
        self.rollout = VecRollout(envs, self.shaper, np.random.default_rng(cfg.seed), cfg.train_workloads,
                                  self.horizon_s, seed_offset=self.seed_offsets(), guides=guides,
                                  steps_per_job=cfg.max_steps_per_job)
        self.steps, self.updates, self.rows, self.best, self.wall_before = 0, 0, [], float("inf"), 0.0
        self.upd_gen = th.Generator().manual_seed(cfg.seed)

    def seed_offsets(self) -> list[int]:
        """Each env's workload-seed offset: env i plays world ``i % worlds``, whose seeds start at ``world x
        WORLD_SEED_STRIDE``."""
        return [(i % self.cfg.num_worlds) * WORLD_SEED_STRIDE for i in range(self.cfg.n_envs)]

    def warm_start(self) -> None:
        """The teacher's demonstrations (to clone, and kept in ``teacher_demos.npz`` while ``ppo.bc_coef`` pulls
        towards them), then the initial weights: ``cfg.init_model``'s (its new parameters in their own group,
        its optimizer state when asked for), else behaviour cloning (``bc_model.zip``) when configured."""
        cfg, p, policy, info = self.cfg, self.cfg.ppo, self.policy, self.info
        clone = cfg.init_model is None and p.bc_episodes > 0
        if clone or p.bc_coef > 0:
            data = collect_teacher(cfg, self.gen)
            info["teacher"] = p.bc_teacher
            info["teacher_avg_jct_hours"] = data["teacher_avg_jct_hours"]
            info["teacher_resize_share"] = data["teacher_resize_share"]
            info["teacher_seconds"] = time.time() - self.t_start
            self.log(f"teacher {p.bc_teacher}: {len(data['actions'])} decisions, average JCT "
                     f"{data['teacher_avg_jct_hours']:.3f} h, resize share {data['teacher_resize_share']:.3f}")
            if p.bc_coef > 0:
                save_demos(data, self.out / DEMOS_FILE)
                self.demos = teacher_tensors(data)
        if cfg.init_model is not None:
            info["init_model_obs_version"], new = _load_weights(policy, cfg.init_model)
            info["init_model"] = str(cfg.init_model)
            if new:
                info["init_new_parameters"] = new
                self.opt = _new_parameter_groups(policy, self.opt, new, p.new_lr_scale)
            info["init_optimizer"] = cfg.init_optimizer and _load_optimizer(policy, self.opt, cfg.init_model)
        elif clone:
            info.update(behaviour_clone(policy, cfg, data, log=self.log))
            info["bc_seconds"] = time.time() - self.t_start
            self.model.save(self.out / "bc_model.zip")
            self.opt = policy.optimizer = policy.optimizer_class(policy.parameters(), lr=p.learning_rate)

    def first_validation(self) -> None:
        """Before the first update: the validation a resumed run was killed in, or (a run without a curve yet)
        the checkpoint and validation of the initial policy."""
        if self.validation_pending:
            self.validate()  # the validation the run was killed in
            self.checkpoint()
        elif not self.rows:
            self.checkpoint_and_validate()

    def validate(self) -> None:
        """A validation pass: a row of the learning curve (``learning_curve.csv`` / ``.png``), and
        ``best_model.zip`` when it is the best pass without cut episodes (or the first pass at all)."""
        out = self.out
        jct = self.validator.run(self.policy)
        row = {
            "decisions": self.steps, "updates": self.updates,
            "wall_s": self.wall_before + time.time() - self.t_start,
            "val_avg_jct_h": float(jct.mean()), "ref_avg_jct_h": float(self.validator.ref_jct.mean()),
            "val_over_ref": float(np.mean(jct / self.validator.ref_jct)),
            "val_truncated": int(self.validator.truncated.sum()),
        }
        self.rows.append(row)
        _write_curve(out, self.rows, self.validator.reference, self.cfg.validation_samples > 0)
        cut = f", {row['val_truncated']} episodes cut (scored by a lower bound)" if row["val_truncated"] else ""
        self.log(f"validation at {self.steps} decisions: avg JCT {row['val_avg_jct_h']:.3f} h (reference "
                 f"{row['ref_avg_jct_h']:.3f} h), mean ratio to the reference {row['val_over_ref']:.3f}{cut}")
        if not row["val_truncated"] and row["val_over_ref"] < self.best:
            self.best = row["val_over_ref"]
            self.model.save(out / "best_model.zip")
        elif row["val_truncated"] and not (out / "best_model.zip").is_file():
            self.model.save(out / "best_model.zip")  # a first best model, until a pass without cut episodes

    def checkpoint(self, validation_pending: bool = False) -> None:
        """``model.zip`` and ``checkpoint.pt``; ``validation_pending``: a validation of this state follows (a
        resume runs it first, so a run killed during a validation loses nothing)."""
        rollout = self.rollout
        state = {
            "policy": self.policy.state_dict(), "optimizer": self.opt.state_dict(), "torch_rng": th.get_rng_state(),
            "update_rng": self.upd_gen.get_state(), "seed_rng": rollout.rng.bit_generator.state,
            "envs": pickle.dumps(rollout.envs if rollout.guides is None else (rollout.envs, rollout.guides)),
            "obs": rollout.obs, "time": rollout.time,
            "shaper": self.shaper.state(), "episodes": rollout.episodes, "steps": self.steps,
            "updates": self.updates, "curve": self.rows, "best": self.best,
            "wall_s": self.wall_before + time.time() - self.t_start, "info": self.info,
            "validation_pending": validation_pending,
        }
        self.model.save(self.out / "model.zip")
        _atomic_save(state, self.out / "checkpoint.pt")

    def checkpoint_and_validate(self) -> None:
        """The checkpoint first (a validation that hangs or is killed loses no training), then the validation,
        then the checkpoint again with the validation's row and best score."""
        self.checkpoint(validation_pending=True)
        self.validate()
        self.checkpoint()

    def loop(self, stop_after_updates: int | None) -> bool:
        """Updates until ``cfg.timesteps`` decisions or ``cfg.max_minutes``, each logged to ``updates.jsonl``,
        with a checkpoint and validation every ``cfg.eval_freq`` decisions and at the end, and a checkpoint
        every ``cfg.checkpoint_minutes``. False when ``stop_after_updates`` updates of this call ended it first
        (after a checkpoint, as a killed run leaves it)."""
        from frenzy_env.progress import progress_bar

        cfg = self.cfg
        bar = progress_bar(cfg.timesteps, show=cfg.progress, unit="decision", desc="train")
        bar.update(self.steps)
        last_ckpt, done_here = time.time(), 0
        next_eval = (self.steps // cfg.eval_freq + 1) * cfg.eval_freq
        while self.steps < cfg.timesteps:
            line = self.update()
            done_here += 1
            append_json_line(self.out / "updates.jsonl", line)
            self.log(json_text(line))
            bar.update(cfg.rollout_size)
            elapsed_min = (self.wall_before + time.time() - self.t_start) / 60
            if cfg.max_minutes is not None and elapsed_min >= cfg.max_minutes and self.steps < cfg.timesteps:
                self.info["stopped_by_max_minutes"] = True
                self.log(f"wall-clock limit of {cfg.max_minutes} min reached at {self.steps} decisions")
                self.checkpoint_and_validate()
                break
            if self.steps >= next_eval or self.steps >= cfg.timesteps:
                self.checkpoint_and_validate()
                next_eval = (self.steps // cfg.eval_freq + 1) * cfg.eval_freq
                last_ckpt = time.time()
            elif time.time() - last_ckpt >= cfg.checkpoint_minutes * 60:
                self.checkpoint()
                last_ckpt = time.time()
            if stop_after_updates is not None and done_here >= stop_after_updates and self.steps < cfg.timesteps:
                self.checkpoint()
                bar.close()
                return False
        bar.close()
        return True

    def update(self) -> dict[str, Any]:
        """One rollout and one PPO update at the scheduled learning rate and teacher pull; returns the update's
        line of ``updates.jsonl``."""
        cfg, p, rollout = self.cfg, self.cfg.ppo, self.rollout
        t0 = time.time()
        lr0, frac = p.learning_rate, p.lr_final_fraction
        for g in self.opt.param_groups:
            g["lr"] = lr0 * g.get("lr_scale", 1.0) * (frac + (1 - frac) * (1 - self.steps / cfg.timesteps))
        n_before = len(rollout.episodes)
        buf = rollout.collect(self.policy, p.n_steps)
        t1 = time.time()
        lam = p.gae_lambda if p.same_instant_lambda is None else np.where(
            buf["elapsed"] > 0, p.gae_lambda, p.same_instant_lambda
        )
        adv, ret = gae(buf["rewards"], buf["values"], buf["discounts"], buf["dones"], buf["last_values"], lam)
        teacher_coef = p.bc_coef * max(0.0, 1.0 - self.steps / p.bc_decay)
        if teacher_coef == 0.0:
            self.demos = None  # the pull is over: free the demonstrations
        stats = ppo_update(self.policy, self.opt, buf, adv, ret, cfg, self.upd_gen,
                           actor=self.updates >= p.critic_warmup_updates, demos=self.demos,
                           teacher_coef=teacher_coef)
        self.steps += cfg.rollout_size
        self.updates += 1
        eps = rollout.episodes[n_before:]
        acts = buf["actions"]
        first_start = rollout.envs[0].unwrapped.first_start
        first_resize = rollout.envs[0].unwrapped.first_resize
        return {
            "update": self.updates, "decisions": self.steps, "rollout_s": t1 - t0, "update_s": time.time() - t1,
            "decisions_per_s": cfg.rollout_size / (time.time() - t0),
            "episodes": len(eps), "train_avg_jct_h": float(np.mean([e["avg_jct_h"] for e in eps])) if eps else None,
            "train_truncated": sum(int(e.get("truncated", 0)) for e in eps),
            "share_wait": float(np.mean(acts < first_start)),
            "share_start": float(np.mean((acts >= first_start) & (acts < first_resize))),
            "share_resize": float(np.mean(acts >= first_resize)),
            "mean_return_per_episode": float(buf["rewards"].sum() / max(len(eps), 1)),
            "reference_runs": self.cache.runs if self.cache is not None else 0,
            "teacher_coef": teacher_coef,
            "off_plan": float(np.mean(acts != buf["hints"])) if buf.get("hints") is not None else None,
            **stats,
        }

    def finish(self) -> None:
        """``model.zip`` (the final weights) and ``train_log.json``: wall time, decisions, updates, the best
        validation pass (among those without cut episodes when there are any: what ``best_model.zip`` holds),
        the reference's score and the warm start's notes."""
        wall = self.wall_before + time.time() - self.t_start
        self.model.save(self.out / "model.zip")
        rows = self.rows
        # the best validation pass, among those without cut episodes when there are any (what best_model.zip holds)
        chosen = min([r for r in rows if not r.get("val_truncated")] or rows, key=lambda r: r["val_over_ref"])
        atomic_write_json(
            self.out / "train_log.json",
            {"wall_seconds": wall, "timesteps": self.steps, "updates": self.updates,
             "decisions_per_second": self.steps / wall, "torch_threads": th.get_num_threads(),
             "best_val_over_ref": chosen["val_over_ref"], "best_val_avg_jct_h": chosen["val_avg_jct_h"],
             "best_val_truncated": chosen.get("val_truncated", 0),
             "reference_val_avg_jct_h": float(self.validator.ref_jct.mean()), **self.info},
        )
