"""VLM rewards benchmark, encoder figures and env steps/s (modes encoder, text_heads, steps of vlm_rewards.py).

The method is in vlm_rewards.py's docstring (Encoder, Steps/s); ``GOALS`` and ``load_or_train_encoder``
also serve the demonstrations (vlm_rewards_demos.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger("vlm_rewards")


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


CLG_NEGATIVES = {"clg": ("two cars have collided",),  # the (and VLM-RL's) negative goal
                 "clg_obstacle": ("an obstacle is ahead",),  # the scene behind most collisions (README)
                 "clg_both": ("two cars have collided", "an obstacle is ahead")}  # reward.negatives: the closest


def clg_separation(enc, emb: torch.Tensor, keys: list) -> dict[str, float]:
    """CLG ("the road is clear" vs each set of ``CLG_NEGATIVES``) on fresh driving frames: mean score per scene, AUCs.

    A set of several negatives scores each frame against its closest one, as ``reward.negatives`` does.

    ``<p>_auc_clear_above_car_collision``: clear frames score above collided-car frames;
    ``<p>_auc_clear_above_obstacle_ahead``: above frames with an obstacle within 2.5 m ahead;
    ``<p>_auc_raw_car_collision_vs_rest``: the raw contrast (before clipping) ranks collided-car frames first.
    """
    from robotrl.rewards.vlm import clg_reward

    scene = np.array([k[1] for k in keys])
    out = {}
    for p, negatives in CLG_NEGATIVES.items():
        sims = emb @ enc.encode_text(["the road is clear", *negatives]).T
        r = clg_reward(sims[:, 0], sims[:, 1:], 0.03)
        out |= {f"{p}_mean_score_{s}": float(r[torch.from_numpy(scene == s)].mean()) for s in sorted(set(scene))}
        for other, name in (("collided_car", "car_collision"), ("obstacle_ahead", "obstacle_ahead")):
            pair = torch.from_numpy(np.isin(scene, ["clear", other]))
            out[f"{p}_auc_clear_above_{name}"] = auc(r[pair], torch.from_numpy(scene == "clear")[pair])
        raw = sims[:, 1:].amax(1) - sims[:, 0]  # before clipping: higher = closer to the negative prompt
        out[f"{p}_auc_raw_car_collision_vs_rest"] = auc(raw, torch.from_numpy(scene == "collided_car"))
    return out


GOALS = {  # goal, baseline per wording split; "seen" sentences are in the encoder's training vocabulary
    "arms_raised": {"seen": ("a humanoid robot with both arms raised", "a humanoid robot"),
                    "unseen": ("an android with hands held high over the head", "an android")},
    "kneeling": {"seen": ("a humanoid robot kneeling", "a humanoid robot"),
                 "unseen": ("an android resting on both knees", "an android")},
}


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
