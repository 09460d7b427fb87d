"""RL fine-tuning of a VLA in the batched sim: GRPO (SimpleVLA-RL) and PPO with action-level GAE (RLinf).

GRPO: ``TaskEnv.reset_groups(G)`` puts ``M = N / G`` task instances in the batch, each as
``G`` copies of one reset state. Every world runs one episode with action tokens sampled at
``temperature``; its reward is binary success. Per group the advantage is
``(R - mean_g) / (std_g + eps)`` (``functional.grpo_advantages``) on every action token of
the rollout; groups whose success rate is outside ``[filter_low, filter_high]`` are dropped
(``grpo_group_filter``); the loss is the asymmetric clipped surrogate (0.2 / 0.28) with no KL
term (``asymmetric_clipped_token_loss``).

PPO: ordinary resets, the same sampled action tokens, a value head on the fused readout,
the sparse success reward per step, action-level GAE (one value and advantage per
decision), and the project's ``ppo_loss`` on the action log-probability (the sum of its
token log-probabilities).

Rollouts keep the frozen tower's vision tokens, so updates never re-run the backbone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from robotrl.algos import functional as F
from robotrl.policies.vla import VLA, VLAConfig

Batch = dict[str, torch.Tensor]


@dataclass
class GRPOConfig:
    """``algo=grpo`` (and ``algo=vla_ppo`` with ``method=ppo``): RL fine-tuning of an SFT VLA.

    Attributes:
        name: registered algorithm name.
        method: ``grpo`` or ``ppo``.
        init: SFT checkpoint (``vla.safetensors`` of an ``algo=vla_sft`` run) to start from.
        group_size: ``G`` rollouts per task instance (GRPO).
        temperature: token sampling temperature (1.6 in SimpleVLA-RL).
        clip_low: lower ratio clip.
        clip_high: upper ratio clip (clip-higher).
        filter_low: smallest kept group success rate.
        filter_high: largest kept group success rate.
        lr: AdamW learning rate of the trainable (non-tower) parameters.
        epochs: passes over each rollout batch.
        minibatches: minibatches per epoch.
        max_grad_norm: gradient clipping.
        gamma: PPO discount (per decision).
        lam: PPO GAE lambda.
        value_coef: PPO value-loss weight.
        entropy_coef: PPO entropy bonus.
        ppo_clip: PPO symmetric ratio clip.
        image_size: rendered frame side (pixels).
        eval_episodes: episodes per success measurement.
        vla: model architecture (must match ``init``).

    """

    name: str = "grpo"
    method: str = "grpo"
    init: str = ""
    group_size: int = 8
    temperature: float = 1.6
    clip_low: float = 0.2
    clip_high: float = 0.28
    filter_low: float = 0.1
    filter_high: float = 0.9
    lr: float = 1e-4
    epochs: int = 2
    minibatches: int = 4
    max_grad_norm: float = 1.0
    gamma: float = 0.99
    lam: float = 0.95
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    ppo_clip: float = 0.2
    image_size: int = 64
    eval_episodes: int = 64
    vla: VLAConfig = field(default_factory=VLAConfig)


@torch.no_grad()
def rollout(env, model: VLA, temperature: float, group_size: int | None = None,  # noqa: ANN001 - a TaskEnv
            gen: torch.Generator | None = None) -> Batch:
    """One episode in every world (``max_episode_length`` steps), tokens sampled at ``temperature``.

    Args:
        env: a ``TaskEnv`` with image and instruction observations.
        model: the VLA (tokens head).
        temperature: sampling temperature.
        group_size: reset with ``env.reset_groups(group_size)`` (GRPO); None: ``env.reset()``.
        gen: sampling generator.

    Returns:
        ``[T, N, ...]`` tensors ``vision``, ``proprio``, ``instruction``, ``tokens``, ``log_prob``
        (``[T, N, A]``), ``value`` and ``reward`` (success, ``[T, N]``), ``valid`` (the step belongs
        to the world's first episode) and ``done``; and ``success`` ``[N]`` of that episode.

    """
    obs = env.reset_groups(group_size) if group_size else env.reset()
    n = env.num_envs
    alive = torch.ones(n, dtype=torch.bool)
    success = torch.zeros(n)
    keys = ("vision", "proprio", "instruction", "tokens", "log_prob", "value", "reward", "valid", "done")
    out: dict[str, list[torch.Tensor]] = {k: [] for k in keys}
    for _ in range(env.max_episode_length):
        step = model.act(obs, temperature, deterministic=False, generator=gen)
        next_obs, _, term, trunc, info = env.step(step["action"])
        done = (term | trunc).cpu()
        reward = torch.zeros(n)
        if "episode" in info:
            ids = done.nonzero().squeeze(1)
            ended = info["episode"]["success"].cpu()
            first = alive[ids]
            success[ids[first]] = ended[first]
            reward[ids[first]] = ended[first]
        for k, v in (("vision", step["vision"]), ("proprio", obs["policy"]), ("instruction", obs["instruction"]),
                     ("tokens", step["tokens"]), ("log_prob", step["log_prob"]), ("value", step["value"]),
                     ("reward", reward), ("valid", alive.clone()), ("done", done)):
            out[k].append(v.cpu())
        alive &= ~done
        obs = next_obs
        if not bool(alive.any()):
            break
    batch = {k: torch.stack(v) for k, v in out.items()}
    batch["success"] = success
    return batch


def grpo_update(model: VLA, opt: torch.optim.Optimizer, batch: Batch, cfg: GRPOConfig,
                gen: torch.Generator | None = None) -> dict[str, float]:
    """GRPO step(s) on one grouped rollout batch; returns metrics (``kept_groups``, losses, success)."""
    T, n = batch["valid"].shape
    groups = batch["success"].view(-1, cfg.group_size)
    adv = F.grpo_advantages(groups).reshape(n)
    keep = F.grpo_group_filter(groups, cfg.filter_low, cfg.filter_high).repeat_interleave(cfg.group_size)
    mask = batch["valid"] & keep[None]
    metrics = {"success": float(batch["success"].mean()), "kept_groups": float(keep.float().mean())}
    if not bool(mask.any()):
        return metrics | {"loss/policy": 0.0, "clip_fraction": 0.0}
    rows = mask.reshape(-1).nonzero().squeeze(1)
    flat = {k: batch[k].reshape(T * n, *batch[k].shape[2:])[rows] for k in
            ("vision", "proprio", "instruction", "tokens", "log_prob")}
    flat_adv = adv[None].expand(T, n).reshape(-1)[rows]
    stats = _epochs(model, opt, flat, cfg, gen, lambda mb, feat: F.asymmetric_clipped_token_loss(
        model.token_log_prob(feat, mb["tokens"], cfg.temperature)[0], mb["log_prob"], flat_adv[mb["idx"], None],
        torch.ones_like(mb["log_prob"]), cfg.clip_low, cfg.clip_high))
    return metrics | stats


def ppo_update(model: VLA, opt: torch.optim.Optimizer, batch: Batch, cfg: GRPOConfig,
               gen: torch.Generator | None = None) -> dict[str, float]:
    """PPO with action-level GAE on one rollout batch (sparse success reward, value head)."""
    T, n = batch["valid"].shape
    valid = batch["valid"]
    dones = batch["done"] | ~valid
    adv, ret = F.action_level_gae(batch["reward"], batch["value"], dones, torch.zeros(n), cfg.gamma, cfg.lam)
    rows = valid.reshape(-1).nonzero().squeeze(1)
    flat = {k: batch[k].reshape(T * n, *batch[k].shape[2:])[rows] for k in
            ("vision", "proprio", "instruction", "tokens", "log_prob", "value")}
    flat_adv, flat_ret = F.normalize(adv.reshape(-1)[rows]), ret.reshape(-1)[rows]

    def loss_fn(mb: Batch, feat: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logp, ent = model.token_log_prob(feat, mb["tokens"], cfg.temperature)
        i = mb["idx"]
        return F.ppo_loss(logp.sum(-1), mb["log_prob"].sum(-1), flat_adv[i], model.value(feat), mb["value"],
                          flat_ret[i], ent.sum(-1), cfg.ppo_clip, None, cfg.value_coef, cfg.entropy_coef)

    return {"success": float(batch["success"].mean())} | _epochs(model, opt, flat, cfg, gen, loss_fn)


def _epochs(model: VLA, opt: torch.optim.Optimizer, flat: Batch, cfg: GRPOConfig, gen: torch.Generator | None,
            loss_fn) -> dict[str, float]:  # noqa: ANN001 - (minibatch, features) -> (loss, metrics)
    m = flat["tokens"].shape[0]
    flat = flat | {"idx": torch.arange(m)}
    size = max(1, m // cfg.minibatches)
    totals: dict[str, float] = {}
    count = 0
    model.train()
    for _ in range(cfg.epochs):
        perm = torch.randperm(m, generator=gen)
        for start in range(0, m, size):
            mb = {k: v[perm[start:start + size]] for k, v in flat.items()}
            feat = model.features(mb["vision"], mb["proprio"].float(), model.instruction_table[mb["instruction"]])
            loss, metrics = loss_fn(mb, feat)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.trainable_parameters(), cfg.max_grad_norm)
            opt.step()
            for k, v in metrics.items():
                totals[k] = totals.get(k, 0.0) + float(v)
            count += 1
    model.eval()
    return {k: v / max(count, 1) for k, v in totals.items()}
