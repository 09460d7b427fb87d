"""VLM rewards benchmark: encoder accuracy and speed, env steps/s with the VLM-RM term sync vs async.

    python benchmarks/vlm_rewards.py encoder   # zero-shot accuracy (seen/unseen wording), frames/s (batch 16/64)
    python benchmarks/vlm_rewards.py steps     # humanoid env steps/s: no VLM, VLM-RM sync, VLM-RM async; late fraction
    python benchmarks/vlm_rewards.py all
    python benchmarks/vlm_rewards.py pose      # humanoid pose demo (default: kneeling, VLM-RM scored every 4th step,
                                               # 400 s per learner); keys pose_<pose>_*
    python benchmarks/vlm_rewards.py driving_finetune  # CLG as a fine-tune of one CaRL pretrain, equal env steps
    python benchmarks/vlm_rewards.py ft_summary  # means over the driving_finetune seeds (keys ft_seed<k>_*)

Run it under the shared CPU lock: ``flock /tmp/robotrl-cpu.lock python benchmarks/vlm_rewards.py all``.

**Encoder.** The ``lit`` humanoid artefact (``~/.cache/robotrl/encoders/lit_humanoid``) is loaded
if present; otherwise a small one is trained here (600 frames, 300 steps) and the JSON says so
(``encoder_source``). Accuracy is measured on *fresh* frames: poses drawn with a seed the
training never used (``--eval-seed``), classes balanced, 12 classes (posture x arms). Prompts are
one per class, either the canonical sentence of the seen wordings, the canonical sentence of
the unseen wordings (subjects, templates and phrases never used in training), or random
paraphrases of either split (mean over ``--paraphrase-draws`` draws).

**Steps/s.** The humanoid ``TaskEnv`` with ``--worlds`` worlds and random actions, rendering a
96x96 ``track`` frame per world per step: without a VLM term, with VLM-RM in ``sync`` mode
(every step waits for its scores) and in ``async`` mode (a scorer thread; the env never waits;
``relabel_rollout`` waits for what is still pending at the end of every ``--rollout``-step
rollout, as PPO's update does). Async is reported both while collecting and end to end
(collection + the wait at the update). The late fraction is the share of scores not ready
when the rollout ended.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt, load_avg, save, table  # noqa: E402

log = logging.getLogger("vlm_rewards")
NAME = "vlm_rewards"


def load_or_train_encoder(threads: int, task: str = "humanoid") -> tuple[object, str]:
    """The task's ``lit`` encoder and a sentence saying where it came from."""
    from robotrl.rewards.encoders import default_encoder_dir, load_lit

    path = default_encoder_dir() / f"lit_{task}.safetensors"
    if path.is_file():
        enc = load_lit(path)
        tc = enc.meta.get("train_config", {})
        return enc, (f"loaded artefact {path} (trained on {tc.get('frames')} frames, {tc.get('steps')} steps, "
                     f"seed {tc.get('seed')})")
    from robotrl.rewards.train import TrainEncoderConfig, train_encoder

    out = Path(f"/tmp/robotrl_bench_lit_{task}")
    cfg = TrainEncoderConfig(task=task, frames=660 if task == "driving" else 600, steps=300, out=str(out),
                             threads=threads)
    path, _ = train_encoder(cfg)
    return load_lit(path), f"no artefact at the default path: trained a small one here ({cfg.frames} frames, " \
                           f"300 steps): {path}"


def encoder_bench(args: argparse.Namespace, task: str) -> dict[str, float | str]:
    """Zero-shot accuracy on fresh frames of ``task``, how the reward separates the goal, encoder frames/s."""
    from robotrl.rewards import captions as cap

    enc, source = load_or_train_encoder(args.threads, task)
    classes = cap.CLASSES[task]
    rng = np.random.default_rng(args.eval_seed)
    frames, keys = cap.SOURCES[task](args.eval_frames, rng, (96, 96))
    labels = torch.tensor([classes.index(k) for k in keys])
    emb = enc.encode_image(frames)
    p = f"encoder_{task}_"
    out: dict[str, float | str] = {f"{p}source": source, f"{p}eval_frames": len(frames),
                                   f"{p}eval_seed": args.eval_seed, f"{p}classes": len(classes),
                                   f"{p}chance_accuracy": 1.0 / len(classes)}
    out |= {f"{p}{k}": v for k, v in zero_shot_figures(enc, emb, labels, task, rng, args.paraphrase_draws).items()}
    out |= reward_auc(enc, emb, keys) if task == "humanoid" else clg_separation(enc, emb, keys)
    stats = enc.meta.get("statistics", {})
    for k in ("zero_shot_accuracy_heldout_seen", "zero_shot_accuracy_heldout_unseen"):
        if k in stats:
            out[f"{p}artefact_{k}"] = float(stats[k])
    if task != "humanoid":
        return out
    probe = np.concatenate([frames] * (-(-args.speed_frames // len(frames))))[:args.speed_frames]
    for bs in (16, 64):
        enc.batch_size = bs
        enc.encode_image(probe[:bs])  # warm-up
        best = 0.0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            enc.encode_image(probe)
            best = max(best, len(probe) / (time.perf_counter() - t0))
        out[f"encoder_frames_per_s_batch{bs}"] = best
    out["encoder_speed_frames_per_run"] = len(probe)
    out["encoder_image_size_px"] = 96
    return out


def zero_shot_figures(enc, emb: torch.Tensor, labels: torch.Tensor, task: str, rng: np.random.Generator,
                      draws: int) -> dict[str, float]:
    """Zero-shot accuracy with one prompt per class: canonical, and random paraphrases (mean, min of ``draws``),
    in seen and in unseen wording."""
    from robotrl.rewards import captions as cap
    from robotrl.rewards.train import zero_shot_accuracy

    classes, wordings = cap.CLASSES[task], cap.WORDINGS[task]
    out = {}
    for split in ("seen", "unseen"):
        out[f"zero_shot_accuracy_{split}_canonical_prompt"] = zero_shot_accuracy(
            enc, emb, labels, [cap.class_prompt(k, split, wordings) for k in classes])
        accs = [zero_shot_accuracy(enc, emb, labels, [cap.caption(k, rng, split, wordings) for k in classes])
                for _ in range(draws)]
        out[f"zero_shot_accuracy_{split}_random_paraphrase_mean"] = float(np.mean(accs))
        out[f"zero_shot_accuracy_{split}_random_paraphrase_min"] = float(np.min(accs))
    return out


TEXT_HEADS = {  # name -> TrainEncoderConfig fields; "mlp" is the earlier default (dim 128, no mixing)
    "mlp": {"text_head": "mlp", "dim": 128, "text_decay": 0.0, "text_mix": False},
    "mlp_mix": {"text_head": "mlp", "dim": 128, "text_decay": 0.0, "text_mix": True},
    "residual": {"text_head": "residual", "dim": 384, "text_mix": False},
    "residual_mix": {"text_head": "residual", "dim": 384, "text_mix": True},
    "mlp_drop": {"text_head": "mlp", "dim": 128, "text_decay": 0.0, "text_mix": False, "text_dropout": 0.2},
    "mlp_mix_drop": {"text_head": "mlp", "dim": 128, "text_decay": 0.0, "text_mix": True, "text_dropout": 0.2},
    "residual_mix_drop": {"text_head": "residual", "dim": 384, "text_mix": True, "text_dropout": 0.2},
}


def text_head_bench(args: argparse.Namespace, task: str) -> dict[str, float | str]:
    """The text heads side by side: one render of training frames, one of fresh evaluation frames, the same
    seed, steps and paraphrase draws for every variant of ``TEXT_HEADS``; only the head (and mixing) differs."""
    from dataclasses import asdict, replace

    from robotrl.rewards import captions as cap
    from robotrl.rewards.encoders import FrozenTowers, LitEncoder
    from robotrl.rewards.train import TrainEncoderConfig, encoder_data, fit_heads, text_vocabulary

    base = TrainEncoderConfig(task=task, frames=args.compare_frames, steps=args.compare_steps, threads=args.threads)
    towers = FrozenTowers(base.image_size)
    data = encoder_data(base, towers)
    classes = cap.CLASSES[task]
    frames, keys = cap.SOURCES[task](args.eval_frames, np.random.default_rng(args.eval_seed), (96, 96))
    labels = torch.tensor([classes.index(k) for k in keys])
    eval_feats = towers.image_features(frames)
    p = f"text_head_{task}_"
    out: dict[str, float | str] = {
        f"{p}train_frames": len(data.labels), f"{p}steps": base.steps, f"{p}seed": base.seed,
        f"{p}eval_frames": len(frames), f"{p}eval_seed": args.eval_seed, f"{p}paraphrase_draws": args.paraphrase_draws,
        f"{p}default": " ".join(f"{k}={getattr(TrainEncoderConfig, k)}" for k in ("text_head", "dim", "text_decay",
                                                                                  "text_mix", "text_dropout")),
        f"{p}command": " ".join(["python", "benchmarks/vlm_rewards.py", *sys.argv[1:]])}
    for name, fields in TEXT_HEADS.items():
        cfg = replace(base, **fields)
        t0 = time.perf_counter()
        vocab, text_feats, offsets = text_vocabulary(cfg, towers) if cfg.text_dropout else (
            data.vocab, data.text_feats, data.offsets)
        heads, losses = fit_heads(cfg, data.feats, data.labels, data.train, text_feats, offsets)
        enc = LitEncoder(heads, towers)
        with torch.no_grad():
            emb = heads.embed_image(eval_feats)
        rng = np.random.default_rng(args.eval_seed + 1)  # the same paraphrase draws for every variant
        figs = zero_shot_figures(enc, emb, labels, task, rng, args.paraphrase_draws)
        if task == "humanoid":
            figs |= reward_auc(enc, emb, keys)
        figs |= {"train_s": time.perf_counter() - t0, "final_loss": float(np.mean(losses[-50:])),
                 "vocabulary": float(len(vocab)),
                 "config": " ".join(f"{k}={v}" for k, v in asdict(cfg).items() if k in fields)}
        out |= {f"{p}{name}_{k}": v for k, v in figs.items()}
        log.info("%s %s: %s", task, name, {k: round(v, 3) for k, v in figs.items() if isinstance(v, float)})
    return out


CLG_NEGATIVES = {"clg": "two cars have collided",  # the (and VLM-RL's) negative goal
                 "clg_obstacle": "an obstacle is ahead"}  # the scene behind most collisions (README)


def clg_separation(enc, emb: torch.Tensor, keys: list) -> dict[str, float]:
    """CLG ("the road is clear" vs each of ``CLG_NEGATIVES``) on fresh driving frames: mean score per scene, AUCs.

    ``<p>_auc_clear_above_car_collision``: clear frames score above collided-car frames;
    ``<p>_auc_clear_above_obstacle_ahead``: above frames with an obstacle within 2.5 m ahead;
    ``<p>_auc_raw_car_collision_vs_rest``: the raw contrast (before clipping) ranks collided-car frames first.
    """
    from robotrl.rewards.vlm import clg_reward

    scene = np.array([k[1] for k in keys])
    out = {}
    for p, negative in CLG_NEGATIVES.items():
        sims = emb @ enc.encode_text(["the road is clear", negative]).T
        r = clg_reward(sims[:, 0], sims[:, 1], 0.03)
        out |= {f"{p}_mean_score_{s}": float(r[torch.from_numpy(scene == s)].mean()) for s in sorted(set(scene))}
        for other, name in (("collided_car", "car_collision"), ("obstacle_ahead", "obstacle_ahead")):
            pair = torch.from_numpy(np.isin(scene, ["clear", other]))
            out[f"{p}_auc_clear_above_{name}"] = auc(r[pair], torch.from_numpy(scene == "clear")[pair])
        raw = sims[:, 1] - sims[:, 0]  # before clipping: higher = closer to the negative prompt
        out[f"{p}_auc_raw_car_collision_vs_rest"] = auc(raw, torch.from_numpy(scene == "collided_car"))
    return out


GOALS = {  # goal, baseline per wording split; "seen" sentences are in the encoder's training vocabulary
    "arms_raised": {"seen": ("a humanoid robot with both arms raised", "a humanoid robot"),
                    "unseen": ("an android with hands held high over the head", "an android")},
    "kneeling": {"seen": ("a humanoid robot kneeling", "a humanoid robot"),
                 "unseen": ("an android resting on both knees", "an android")},
}


# Fall height (task.healthy_z) of the pose demo per goal. An upright kneel puts the torso at 0.75-0.90 m
# (median 0.82 over the kneeling poses of robotrl.rewards.captions.humanoid_pose), so the velocity task's
# 0.8 m would end a third of kneeling episodes as falls; 0.6 m still ends sitting and lying down.
POSE_HEALTHY_Z = {"kneeling": (0.6, 2.1)}


def auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """Probability that a random positive frame scores above a random negative one (ties count half)."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float((diff > 0).float().mean() + 0.5 * (diff == 0).float().mean())


def reward_auc(enc, emb: torch.Tensor, keys: list) -> dict[str, float]:
    """How well the VLM-RM reward (alpha 0.5) of each goal separates frames that show the goal pose: the AUC
    (ranking) and the gap (mean reward of goal frames minus the others, the size of the signal PPO sees)."""
    from robotrl.rewards.vlm import vlm_rm_reward

    truth = {"arms_raised": torch.tensor([k[1] == "raised" for k in keys]),
             "kneeling": torch.tensor([k[0] == "kneeling" for k in keys])}
    out = {}
    for pose, splits in GOALS.items():
        for split, (goal, baseline) in splits.items():
            g, b = enc.encode_text([goal, baseline])
            r = vlm_rm_reward(emb, g, b, 0.5)
            out[f"vlm_rm_auc_{pose}_{split}_wording"] = auc(r, truth[pose])
            out[f"vlm_rm_gap_{pose}_{split}_wording"] = float(r[truth[pose]].mean() - r[~truth[pose]].mean())
    return out


def _steps_per_s(env, rollouts: int, T: int, gen: torch.Generator) -> dict[str, float]:
    """Collection rate, end-to-end rate (incl. relabel wait) and late fraction over ``rollouts`` rollouts."""
    env.reset()
    n = env.num_envs
    collect_s, total_s, late, scored = 0.0, 0.0, 0, 0
    for r in range(rollouts + 1):  # the first rollout warms up
        rewards = torch.zeros(T, n)
        t0 = time.perf_counter()
        for t in range(T):
            _, rewards[t], *_ = env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
        t1 = time.perf_counter()
        relabel = getattr(env, "relabel_rollout", None)
        st = relabel(rewards) if relabel is not None else {}
        t2 = time.perf_counter()
        if r == 0:
            continue
        collect_s += t1 - t0
        total_s += t2 - t0
        if "vlm/late_fraction" in st:
            late += round(st["vlm/late_fraction"] * T * n)
            scored += T * n
    steps = rollouts * T * n
    out = {"collect_steps_per_s": steps / collect_s, "end_to_end_steps_per_s": steps / total_s}
    if scored:
        out["late_fraction"] = late / scored
    return out


def steps_bench(args: argparse.Namespace) -> dict[str, float | str]:
    """Humanoid env steps/s without VLM, with VLM-RM sync and async, at equal worlds."""
    from robotrl.tasks import config_class

    from robotrl.envs.task_env import make_env
    from robotrl.rewards.config import VLMRewardConfig
    from robotrl.rewards.env import wrap_vlm_rewards
    from robotrl.sim.backend import SimConfig

    enc, source = load_or_train_encoder(args.threads)
    enc.batch_size = 64
    n, T = args.worlds, args.rollout
    out: dict[str, float | str] = {"steps_encoder_source": source, "steps_worlds": n, "steps_rollout_len": T,
                                   "steps_rollouts_timed": args.rollouts, "steps_image_px": 96}
    gen = torch.Generator().manual_seed(0)

    def env_for(mode: str | None):
        task_env = make_env(config_class("humanoid")(), SimConfig(num_envs=n, nthread=args.sim_threads), seed=0)
        if mode is None:
            return task_env
        cfg = VLMRewardConfig(name="vlm_rm", goal="a humanoid robot kneeling", baseline="a humanoid robot",
                              mode=mode, batch_size=args.batch_size, max_wait_s=0.02, image_size=[96, 96])
        return wrap_vlm_rewards(task_env, cfg, encoder=enc)

    for label, mode in (("no_vlm", None), ("vlm_rm_sync", "sync"), ("vlm_rm_async", "async")):
        env = env_for(mode)
        res = _steps_per_s(env, args.rollouts, T, gen)
        env.close()
        out[f"env_steps_per_s_{label}_collect"] = res["collect_steps_per_s"]
        out[f"env_steps_per_s_{label}_end_to_end"] = res["end_to_end_steps_per_s"]
        if "late_fraction" in res:
            out[f"{label}_late_fraction"] = res["late_fraction"]
        log.info("%s: %s", label, res)
    out["steps_async_batch_size"] = args.batch_size
    return out


# --- demonstrations -------------------------------------------------------------------------------
DEMO_DIR = Path("/tmp/robotrl_vlm_demo")
ZERO_BUT_ALIVE = [f"task.reward_scales.{k}=0.0" for k in
                  ("track_lin_vel", "track_yaw", "upright", "ctrl", "action_rate", "vertical_vel")]


def train_run(name: str, overrides: list[str], seconds: float, seed: int = 0,
              iterations: int | None = None) -> dict[str, float | str]:
    """``robotrl train <overrides>`` for ``seconds`` of wall-clock (or up to iteration ``iterations``,
    no wall-clock limit); env steps and iterations reached."""
    import json
    import subprocess

    run_dir = DEMO_DIR / name
    stop = [f"max_time_s={seconds:.0f}", "max_iterations=1000000"] if iterations is None else \
        ["max_time_s=0", f"max_iterations={iterations}"]
    cmd = ["robotrl", "train", *overrides, *stop,
           f"run_dir={run_dir}", f"seed={seed}", "progress=false", "tensorboard=false", "torch_threads=1"]
    log.info("$ %s", " ".join(cmd))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    last = max(rows, key=lambda r: r.get("env_steps", 0))
    return {f"{name}_train_wall_s": wall, f"{name}_train_env_steps": float(last.get("env_steps", 0)),
            f"{name}_train_iterations": float(last.get("iteration", 0)), f"{name}_run_dir": str(run_dir),
            f"{name}_train_overrides": " ".join(overrides)}


@torch.no_grad()
def pose_eval(run_dir: Path | None, pose: str, worlds: int = 32, steps: int = 200, seed: int = 7,
              act: object = None, task_cfg: object = None) -> dict[str, float]:
    """Ground-truth pose success of a policy over each world's first episode.

    The policy is the run's (``run_dir``), else ``act`` on ``task_cfg``, else uniform random actions.

    ``step_success``: share of the ``worlds x steps`` steps in which the pose holds before the
    first fall; ``episode_success``: share of worlds holding it in at least half the steps;
    ``alive``: share of worlds not yet fallen at the end. Two finer figures beside them, for runs
    where those three are 0: ``reached``, the share of worlds in the pose at one step or more
    before the first fall, and ``mean_alive_steps``, the mean number of steps before the first fall
    (``steps`` for a world that never falls). The reward never sees this metric.
    """
    from robotrl.tasks import config_class, task_config_from_meta

    from robotrl.envs.task_env import make_env
    from robotrl.policies.io import load_policy
    from robotrl.rewards.captions import humanoid_pose_truth
    from robotrl.sim.backend import SimConfig

    if run_dir is None:
        cfg = task_cfg or config_class("humanoid")(randomize=False)
    else:
        policy, meta = load_policy(str(run_dir))
        cfg, act = task_config_from_meta(meta, randomize=False), policy.act_inference
    env = make_env(cfg, SimConfig(num_envs=worlds, nthread=1), seed=seed)
    seen: dict[str, torch.Tensor] = {}
    env.pre_reset_hooks.append(lambda e, info: seen.update(humanoid_pose_truth(e.sim)))
    gen = torch.Generator().manual_seed(seed)
    obs = env.reset()
    alive = torch.ones(worlds, dtype=torch.bool)
    held = torch.zeros(worlds)
    height = torch.zeros(worlds)
    alive_steps = torch.zeros(worlds)
    for _ in range(steps):
        a = act(obs["policy"]) if act else torch.rand(worlds, env.num_actions, generator=gen) * 2 - 1  # type: ignore
        obs, _, term, trunc, _ = env.step(a)
        alive &= ~term
        alive_steps += alive.float()
        held += (seen[pose] & alive).float()
        height += torch.where(alive, seen["arms_height"], torch.zeros(worlds))
    env.close()
    total = worlds * steps
    return {"step_success": float(held.sum() / total), "episode_success": float((held >= steps / 2).float().mean()),
            "alive": float(alive.float().mean()), "mean_arms_height_m": float(height.sum() / total),
            "reached": float((held > 0).float().mean()), "mean_alive_steps": float(alive_steps.mean())}


def _encoder_note(task: str) -> str:
    """Which ``lit`` artefact a ``robotrl train`` run of ``task`` loads: path and training settings."""
    import json

    from robotrl.rewards.encoders import default_encoder_dir

    path = default_encoder_dir() / f"lit_{task}.json"
    tc = json.loads(path.read_text()).get("train_config", {}) if path.is_file() else {}
    keys = ("frames", "steps", "seed", "text_head", "dim", "text_mix", "text_decay", "text_dropout")
    return f"{path.with_suffix('.safetensors')}: " + " ".join(f"{k}={tc.get(k, 'mlp' if k == 'text_head' else '?')}"
                                                             for k in keys)


def pose_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """Humanoid: VLM-RM + alive bonus (seen and unseen goal wording) vs random, velocity tracking and alive only.

    Every key starts with ``pose_<pose>_``, so runs of different poses sit side by side in the
    JSON; the budget, the scoring period and the scale are saved with the figures. Every learner
    gets the same wall-clock (``--pose-seconds``), worlds and composed config; only the reward
    terms differ (the VLM-RM runs zero every task term but ``alive`` and add the VLM-RM term).
    ``--pose-arms`` picks a subset of the learners (the others' keys are left as they are); each VLM-RM
    run records the encoder artefact it was scored with (``..._encoder``).
    """
    pose = args.pose
    p = f"pose_{pose}_" + (f"{args.pose_prefix}_" if args.pose_prefix else "")
    common = ["task=humanoid", f"sim.num_envs={args.demo_worlds}", "sim.nthread=1"]
    healthy_z = tuple(args.pose_healthy_z) if args.pose_healthy_z else POSE_HEALTHY_Z.get(pose)
    if healthy_z:  # every learner and the random policy: the same fall height
        common.append(f"task.healthy_z=[{healthy_z[0]:g},{healthy_z[1]:g}]")
    runs = {}
    for split in ("seen", "unseen"):
        goal, baseline = GOALS[pose][split]
        runs[f"vlm_rm_{split}"] = [*common, *ZERO_BUT_ALIVE, "reward=vlm_rm", f'reward.goal="{goal}"',
                                   f'reward.baseline="{baseline}"', f"reward.scale={args.vlm_scale}",
                                   f"reward.every={args.pose_every}"]
    runs["velocity_tracking"] = common
    runs["alive_only"] = [*common, *ZERO_BUT_ALIVE]  # the control: what the alive bonus alone teaches
    arms = args.pose_arms.split(",") if args.pose_arms else list(runs)
    if unknown := set(arms) - set(runs):
        raise SystemExit(f"--pose-arms: unknown {sorted(unknown)}; valid: {', '.join(runs)}")
    runs = {k: v for k, v in runs.items() if k in arms}
    out: dict[str, float | str] = {
        f"{p}eval_worlds": 32, f"{p}eval_steps": 200, f"{p}train_budget_s": args.pose_seconds,
        f"{p}every": args.pose_every, f"{p}vlm_scale": args.vlm_scale, f"{p}train_worlds": args.demo_worlds,
        f"{p}healthy_z": str(list(healthy_z)) if healthy_z else "task default",
        f"{p}command": (f"python benchmarks/vlm_rewards.py pose --pose {pose} --pose-every {args.pose_every} "
                        f"--pose-seconds {args.pose_seconds:g} --vlm-scale {args.vlm_scale:g} "
                        f"--demo-worlds {args.demo_worlds} --pose-seed {args.pose_seed}"
                        + (f" --pose-arms {args.pose_arms}" if args.pose_arms else "")
                        + (f" --pose-prefix {args.pose_prefix}" if args.pose_prefix else "")
                        + (f" --pose-healthy-z {healthy_z[0]:g} {healthy_z[1]:g}" if healthy_z else "")),
        f"{p}train_seed": args.pose_seed, **load_avg(f"{p}start")}
    t0 = time.perf_counter()
    for name, overrides in runs.items():
        out |= train_run(f"{p}{name}", overrides, args.pose_seconds, seed=args.pose_seed)
        out |= {f"{p}{name}_{k}": v for k, v in pose_eval(DEMO_DIR / f"{p}{name}", pose).items()}
        if name.startswith("vlm_rm"):
            out[f"{p}{name}_encoder"] = _encoder_note("humanoid")
    from robotrl.tasks import config_class

    random_cfg = config_class("humanoid")(randomize=False, **({"healthy_z": list(healthy_z)} if healthy_z else {}))
    out |= {f"{p}random_{k}": v for k, v in pose_eval(None, pose, task_cfg=random_cfg).items()}
    out[f"{p}wall_s"] = time.perf_counter() - t0
    return out | load_avg(f"{p}end")


def driving_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """Driving: CaRL-only vs CaRL + CLG speed gating, equal budget; collision rate with traffic, held-out tracks."""
    from driving import evaluate_run

    common = ["task=driving", f"sim.num_envs={args.demo_worlds}", "sim.nthread=1"]
    runs = {"driving_carl_only": common,
            "driving_carl_clg": [*common, "reward=clg_speed", f"reward.every={args.every}"]}
    out: dict[str, float | str] = {"driving_train_budget_s": args.demo_seconds,
                                   "driving_eval": "one deterministic episode per world, 64 worlds, held-out tracks, "
                                                   "3 obstacles and 2 traffic cars in every episode"}
    for name, overrides in runs.items():
        out |= train_run(name, overrides, args.demo_seconds)
        ev = evaluate_run(str(DEMO_DIR / name), scenario_prob=1.0, num_envs=64, rounds=1, split="heldout")
        out |= {f"{name}_heldout_{k}": v for k, v in ev.items()}
    return out


def driving_finetune_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """CLG as a fine-tune at equal env steps: one CaRL-only pretrain, then ``--finetune-iterations``
    more PPO iterations from that same checkpoint (weights, optimizer and random streams), with
    and without the CLG speed-gating term. Same composed task config, worlds and env steps for
    both arms; only the reward differs. Wall-clock differs (CLG renders and scores frames) and is
    reported."""
    import shutil

    from driving import evaluate_run

    common = ["task=driving", f"sim.num_envs={args.demo_worlds}", "sim.nthread=1", *args.ft_task]
    ev_kw = {"scenario_prob": 1.0, "num_envs": 64, "rounds": args.ft_rounds, "split": "heldout"}
    p = f"ft_{args.ft_prefix}_" if args.ft_prefix else "ft_"
    out: dict[str, float | str] = {f"{p}pretrain_budget_s": args.demo_seconds, f"{p}seed": args.ft_seed,
                                   f"{p}finetune_iterations": args.finetune_iterations, f"{p}every": args.every,
                                   f"{p}eval": f"one deterministic episode per world, {args.ft_rounds} x 64 worlds, "
                                               "held-out tracks, 3 obstacles and 2 traffic cars in every episode",
                                   f"{p}task_overrides": " ".join(args.ft_task),
                                   f"{p}reward_overrides": " ".join(args.ft_reward),
                                   f"{p}command": " ".join(["python", "benchmarks/vlm_rewards.py", *sys.argv[1:]])}
    pre = f"{p}pretrain"
    clg = ["reward=clg_speed", f"reward.every={args.every}", *args.ft_reward]
    arms = {f"{p}carl_only": [], f"{p}carl_clg": clg}
    if args.ft_speed_control:  # the same term with the contrast removed: negative = goal, so r_clg = 1
        goal = next((o.split("=", 1)[1] for o in args.ft_reward if o.startswith("reward.goal=")),
                    '"the road is clear"')  # configs/reward/clg_speed.yaml's goal unless overridden
        arms[f"{p}carl_speed"] = [*clg, f"reward.negative={goal}"]
    if args.ft_eval_only:  # evaluate the runs already in DEMO_DIR again; their training keys stay as saved
        return {f"{name}_heldout_{k}": v for name in (pre, *arms)
                for k, v in evaluate_run(str(DEMO_DIR / name), **ev_kw).items()}
    shutil.rmtree(DEMO_DIR / pre, ignore_errors=True)
    out |= train_run(pre, common, args.demo_seconds, seed=args.ft_seed)
    out |= {f"{pre}_heldout_{k}": v for k, v in evaluate_run(str(DEMO_DIR / pre), **ev_kw).items()}
    until = int(out[f"{pre}_train_iterations"]) + args.finetune_iterations
    for name, extra in arms.items():
        shutil.rmtree(DEMO_DIR / name, ignore_errors=True)
        shutil.copytree(DEMO_DIR / pre, DEMO_DIR / name)
        out |= train_run(name, [*common, *extra, "resume=true"], 0.0, seed=args.ft_seed, iterations=until)
        out |= {f"{name}_heldout_{k}": v for k, v in evaluate_run(str(DEMO_DIR / name), **ev_kw).items()}
    return out


FT_METRICS = ("collision_rate", "collision_obstacle_rate", "collision_traffic_rate",
              "collision_rear_ended_rate", "route_completion", "lap_rate", "mean_speed_mps")


def ft_summary(args: argparse.Namespace) -> dict[str, float | str]:
    """Means over the driving_finetune seeds in the results file, per family of runs: ``ft_seed<k>_``
    runs give ``ft_seeds_*`` keys, ``ft_<family>_seed<k>_`` runs ``ft_<family>_seeds_*``. Each arm's
    held-out rates, and the paired differences (same pretrain and evaluation episodes per seed) of
    CLG minus CaRL alone and, where run, of CLG minus the contrast-free speed term, each with its
    standard error over seeds."""
    import json
    import re

    from common import RESULTS_DIR

    saved = json.loads((Path(args.out_dir or RESULTS_DIR) / f"{NAME}.json").read_text())
    runs: dict[str, list[str]] = {}
    for k in saved:
        if m := re.fullmatch(r"ft_((?:[a-z0-9]+_)?)(seed\d+)_carl_clg_heldout_collision_rate", k):
            runs.setdefault(m[1], []).append(m[1] + m[2])
    if not runs:
        raise SystemExit("ft_summary: no ft_seed<k>_ runs in the results; run driving_finetune --ft-prefix seed<k>")
    out: dict[str, float | str] = {}
    for family, prefixes in sorted(runs.items()):
        f = f"ft_{family}seeds"
        prefixes.sort()
        out |= {f: ",".join(prefixes), f"{f}_count": float(len(prefixes))}
        for metric in FT_METRICS:
            arms = [a for a in ("pretrain", "carl_only", "carl_clg", "carl_speed")
                    if all(f"ft_{p}_{a}_heldout_{metric}" in saved for p in prefixes)]
            rows = {a: torch.tensor([float(saved[f"ft_{p}_{a}_heldout_{metric}"]) for p in prefixes]) for a in arms}
            out |= {f"{f}_{arm}_{metric}_mean": float(v.mean()) for arm, v in rows.items()}
            for other in ("carl_only", "carl_speed"):
                if other not in rows:
                    continue
                diff = rows["carl_clg"] - rows[other]
                key = f"{f}_clg_minus_{'carl' if other == 'carl_only' else 'speed'}_{metric}"
                out[f"{key}_mean"] = float(diff.mean())
                out[f"{key}_se"] = float(diff.std() / len(diff) ** 0.5) if len(diff) > 1 else 0.0
    return out


def pose_frames(n: int, seed: int) -> tuple[np.ndarray, torch.Tensor]:
    """``n`` rendered humanoid poses and each one's measured arms height (lower hand above its shoulder, m)."""
    import mujoco
    from robotrl.tasks.humanoid import constants as C

    from robotrl.rewards.captions import humanoid_measure, humanoid_pose
    from robotrl.sim.render import BatchRenderer

    model = mujoco.MjModel.from_xml_path(C.model_path())
    data = mujoco.MjData(model)
    renderer = BatchRenderer(model, size=(96, 96), lean=True)
    rng = np.random.default_rng(seed)
    frames, heights = [], []
    for _ in range(n):
        humanoid_pose(model, data, rng)
        frames.append(renderer.render_data(model, data, "track"))
        heights.append(min(humanoid_measure(data)[2]))
    renderer.close()
    return np.stack(frames), torch.tensor(heights)


def prefs_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """RL-VLM-F labels: the encoder labeller against the scripted oracle on random pose pairs."""
    from robotrl.rewards.preference import EncoderLabeller, OracleLabeller, label_accuracy

    enc, source = load_or_train_encoder(args.threads)
    frames, height = pose_frames(2 * args.pairs, seed=4242)
    a, b = np.arange(args.pairs), np.arange(args.pairs, 2 * args.pairs)
    oracle = OracleLabeller(lambda idx: height[idx], margin=0.05).label(torch.as_tensor(a), torch.as_tensor(b))
    out: dict[str, float | str] = {"prefs_pairs": args.pairs, "prefs_oracle_margin_m": 0.05,
                                   "prefs_oracle_answered": float((oracle >= 0).float().mean()),
                                   "prefs_goal_pose": "arms_raised (oracle: lower hand height above its shoulder)"}
    for split, (goal, _) in GOALS["arms_raised"].items():
        labels = EncoderLabeller(enc, goal, margin=0.01).label(frames[a], frames[b])
        acc = label_accuracy(labels, oracle)
        out[f"prefs_encoder_label_accuracy_{split}_wording"] = acc["accuracy"]
        out[f"prefs_encoder_answered_{split}_wording"] = acc["answered"]
    return out


def _alive_only_humanoid():
    from robotrl.tasks import config_class

    cfg = config_class("humanoid")(randomize=False)
    cfg.reward_scales = {k: (1.0 if k == "alive" else 0.0) for k in cfg.reward_scales}
    return cfg


def _shaped(x: torch.Tensor) -> torch.Tensor:
    """The pose part of both SAC rewards: ``0.5 tanh(x)`` in ``(-0.5, 0.5)``, added to the alive bonus of 1."""
    return 0.5 * torch.tanh(x)


def prefs_sac_demo(args: argparse.Namespace) -> dict[str, float | str]:
    """RL-VLM-F end to end: encoder labels on random-policy frames -> 3-member Bradley-Terry ensemble -> SAC
    with PEBBLE relabelling; against SAC on the true reward (the oracle's arms height), equal wall-clock budget."""
    from robotrl.algos.sac import SAC, SACConfig
    from robotrl.envs.task_env import make_env
    from robotrl.rewards.captions import humanoid_pose_truth
    from robotrl.rewards.preference import EncoderLabeller, OracleLabeller, RewardEnsemble, label_accuracy
    from robotrl.sim.backend import SimConfig

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    enc, source = load_or_train_encoder(args.threads)
    task_cfg, n = _alive_only_humanoid(), args.demo_worlds
    # 1. random-policy frames, the observation they belong to and the truth (oracle only)
    env = make_env(task_cfg, SimConfig(num_envs=n, nthread=1), seed=11)
    rec: dict[str, list] = {"frames": [], "height": []}
    env.pre_reset_hooks.append(lambda e, info: (rec["frames"].append(e.sim.render("track", torch.arange(n), (96, 96))),
                                                rec["height"].append(humanoid_pose_truth(e.sim)["arms_height"])))
    env.reset()
    obs_list = []
    for _ in range(args.pref_steps):
        *_, info = env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
        obs_list.append(info["final_obs"]["policy"].clone())
    env.close()
    frames = np.concatenate(rec["frames"])
    height, obs = torch.cat(rec["height"]), torch.cat(obs_list)
    k = args.pairs
    ia, ib = torch.randint(len(frames), (k,), generator=gen), torch.randint(len(frames), (k,), generator=gen)
    goal = GOALS["arms_raised"]["seen"][0]
    labels = EncoderLabeller(enc, goal, margin=0.01).label(frames[ia.numpy()], frames[ib.numpy()])
    oracle = OracleLabeller(lambda idx: height[idx], margin=0.05).label(ia, ib)
    acc = label_accuracy(labels, oracle)
    ens = RewardEnsemble(obs.shape[1], members=3, hidden=128)
    loss = ens.fit(obs[ia], obs[ib], labels, steps=400, batch_size=128, gen=gen)
    with torch.no_grad():
        r_all = ens(obs)
    mu, sd = float(r_all.mean()), float(r_all.std()) + 1e-6
    held = torch.randint(len(frames), (2000,), generator=gen), torch.randint(len(frames), (2000,), generator=gen)
    with torch.no_grad():
        pred = (ens(obs[held[1]]) > ens(obs[held[0]])).long()
    truth = OracleLabeller(lambda idx: height[idx], margin=0.05).label(*held)
    out: dict[str, float | str] = {
        "prefs_sac_encoder_source": source, "prefs_sac_label_frames": len(frames), "prefs_sac_pairs": k,
        "prefs_sac_goal": goal, "prefs_sac_env_frames_label_accuracy": acc["accuracy"],
        "prefs_sac_env_frames_answered": acc["answered"], "prefs_sac_ensemble_final_bt_loss": loss,
        "prefs_sac_ensemble_pair_accuracy_vs_oracle": label_accuracy(pred, truth)["accuracy"],
        "prefs_sac_budget_s": args.demo_seconds, "prefs_sac_worlds": n,
        "prefs_sac_reward": "1 (alive) + 0.5 tanh(x); x = arms height / 0.2 m (true) or the standardized ensemble "
                            "reward of the next observation (learned)"}
    # 2. SAC on each reward for the same wall-clock budget
    for name in ("true", "learned"):
        env = make_env(task_cfg, SimConfig(num_envs=n, nthread=1), seed=5)
        seen: dict[str, torch.Tensor] = {}
        env.pre_reset_hooks.append(lambda e, info, seen=seen: seen.update(humanoid_pose_truth(e.sim)))
        scfg = SACConfig(batch_size=256, learning_starts=1000, utd=0.25, buffer_size=200_000,
                         actor_hidden=[128, 128], critic_hidden=[256, 256])
        sac = SAC(env.obs_dims["policy"], env.num_actions, scfg, n, "cpu", seed=0)
        o = env.reset()
        t0, steps = time.perf_counter(), 0
        while time.perf_counter() - t0 < args.demo_seconds:
            a = sac.act(o)
            o, r, term, trunc, info = env.step(a)
            if name == "true":
                r = torch.where(term, r, r + _shaped(seen["arms_height"] / 0.2))
            else:
                with torch.no_grad():
                    z = (ens(info["final_obs"]["policy"]) - mu) / sd
                r = torch.where(term, r, r + _shaped(z))
            sac.process_step(o, r, term, trunc, info)
            if sac.ready():
                sac.update(o)
            steps += n
        env.close()
        ev = pose_eval(None, "arms_raised", act=sac.policy.act_inference, task_cfg=task_cfg)
        out |= {f"prefs_sac_{name}_reward_env_steps": float(steps), f"prefs_sac_{name}_reward_updates": float(
            sac.num_updates)} | {f"prefs_sac_{name}_reward_{k}": v for k, v in ev.items()}
    return out


def main() -> None:
    """Parse, run, print the table, save flat JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["encoder", "steps", "all", "pose", "driving", "prefs",
                                          "prefs_sac", "demos", "driving_finetune", "ft_summary", "text_heads"])
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: the scorer thread and the "
                   "simulation each get one of this machine's 2 shared cores)")
    p.add_argument("--sim-threads", type=int, default=1)
    p.add_argument("--eval-frames", type=int, default=240)
    p.add_argument("--eval-seed", type=int, default=2024)
    p.add_argument("--paraphrase-draws", type=int, default=10)
    p.add_argument("--compare-frames", type=int, default=2400, help="text_heads: training frames (shared)")
    p.add_argument("--compare-steps", type=int, default=1500, help="text_heads: optimizer steps of every variant")
    p.add_argument("--speed-frames", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--worlds", type=int, default=16)
    p.add_argument("--rollout", type=int, default=24)
    p.add_argument("--rollouts", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--demo-seconds", type=float, default=180.0,
                   help="training budget of each driving and prefs_sac demo run")
    p.add_argument("--demo-worlds", type=int, default=16)
    p.add_argument("--pose", default="kneeling", choices=sorted(GOALS), help="goal pose of the pose demo")
    p.add_argument("--pose-seconds", type=float, default=400.0, help="training budget of each pose demo run")
    p.add_argument("--pose-arms", default="", help="pose demo: comma-separated learners to run (default all: "
                   "vlm_rm_seen,vlm_rm_unseen,velocity_tracking,alive_only); the random policy is always evaluated")
    p.add_argument("--pose-seed", type=int, default=0, help="pose demo: the training seed of every learner")
    p.add_argument("--pose-prefix", default="", help="pose demo: keys become pose_<pose>_<prefix>_... (a repeat "
                   "with another seed or encoder beside the main keys); set ROBOTRL_ENCODER_DIR to pick the encoder")
    p.add_argument("--pose-healthy-z", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                   help="pose demo: task.healthy_z of every learner and of the random policy (default: "
                   "POSE_HEALTHY_Z for the pose, else the task's; 0.8 2.1 is what runs before it used)")
    p.add_argument("--pose-every", type=int, default=4, help="score every k-th step in the pose demo's VLM runs")
    p.add_argument("--vlm-scale", type=float, default=10.0, help="reward.scale of the pose demo's VLM-RM term")
    p.add_argument("--every", type=int, default=2, help="score every k-th step in the driving demo's CLG run")
    p.add_argument("--finetune-iterations", type=int, default=40,
                   help="driving_finetune: PPO iterations of each arm after the shared CaRL pretrain")
    p.add_argument("--ft-seed", type=int, default=0, help="driving_finetune: training seed of the pretrain and arms")
    p.add_argument("--ft-rounds", type=int, default=1, help="driving_finetune: evaluation rounds of 64 episodes")
    p.add_argument("--ft-prefix", default="", help="driving_finetune: keys and run dirs become ft_<prefix>_...")
    p.add_argument("--ft-eval-only", action="store_true", help="driving_finetune: only evaluate the runs again")
    p.add_argument("--ft-task", nargs="*", default=[], help="driving_finetune: task overrides of the pretrain and "
                   "every arm, e.g. task.traffic_yields=true")
    p.add_argument("--ft-reward", nargs="*", default=[], help="driving_finetune: reward overrides of the arms with "
                   "the CLG speed term, e.g. reward.v_max=2.0")
    p.add_argument("--ft-speed-control", action="store_true", help="driving_finetune: a third arm, the CLG speed "
                   "term without its contrast (negative = goal prompt, so v_des = v_max on every frame)")
    p.add_argument("--pairs", type=int, default=300)
    p.add_argument("--out-dir", default="", help="where the JSON goes (default benchmarks/results/)")
    p.add_argument("--pref-steps", type=int, default=60, help="random-policy steps whose frames are labelled")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    figures: dict[str, float | str] = {**load_avg(f"{args.what}_start"), "torch_threads": args.threads,
                                       "sim_threads": args.sim_threads}
    t0 = time.perf_counter()
    if args.what in ("encoder", "all"):
        figures |= encoder_bench(args, "humanoid") | encoder_bench(args, "driving")
    if args.what == "text_heads":
        figures |= text_head_bench(args, "humanoid") | text_head_bench(args, "driving")
    if args.what in ("steps", "all"):
        figures |= steps_bench(args)
    if args.what in ("prefs", "demos"):
        figures |= prefs_demo(args)
    if args.what in ("prefs_sac", "demos"):
        figures |= prefs_sac_demo(args)
    if args.what in ("pose", "demos"):
        figures |= pose_demo(args)
    if args.what in ("driving", "demos"):
        figures |= driving_demo(args)
    if args.what == "driving_finetune":
        figures |= driving_finetune_demo(args)
    if args.what == "ft_summary":
        figures |= ft_summary(args)
    figures[f"{args.what}_bench_wall_s"] = time.perf_counter() - t0
    path = save(NAME, figures, out_dir=args.out_dir or None)
    print(table([(k, fmt(v)) for k, v in sorted(figures.items())], f"VLM rewards ({args.what})"))  # noqa: T201
    print(f"saved {path}")  # noqa: T201


if __name__ == "__main__":
    main()
