"""Residual off-policy RL (ResFiT), and RLPD when there is no base policy.

The frozen base policy runs inside the env (``robotrl.envs.residual.BaseActionEnv``), which
appends its action to the observation. The residual actor outputs
``a = clip(a_base + s * tanh(f([s, a_base])), -1, 1)`` with ``f``'s last layer zero-initialized,
so training starts exactly at the base. The critic is TD3 with an ensemble of ``num_q``
LayerNorm Q heads; its target is the min of ``num_min_q`` randomly chosen target heads
(REDQ), over an ``n_step`` return, and the actor maximizes the mean over heads. Each
gradient step draws ``demo_ratio`` of its batch from demonstrations (base actions
relabelled, sparse reward) and the rest from online data; the first
``critic_warmup_updates`` steps train the critic only. With no base policy (base action 0,
``scale`` 1) the same code is the RLPD/SERL baseline.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from robotrl.algos import functional as F
from robotrl.algos.base import ReplayAlgorithm
from robotrl.policies.frozen import FrozenPolicy
from robotrl.policies.normalizer import RunningNorm
from robotrl.policies.offpolicy import QEnsemble, ResidualActor
from robotrl.storage.demos import Episode
from robotrl.storage.replay import MixedSampler, ReplayBuffer


@dataclass
class ResidualConfig:
    """ResFiT hyperparameters (paper values unless noted).

    Attributes:
        name: registered algorithm name.
        base: frozen base policy: a run dir / checkpoint (BC, PPO or SAC), or an HDF5 dataset
            to fit a BC base on first. Empty: no base (the RLPD baseline).
        demos: HDF5 demonstrations for the mixed batch; empty uses ``base`` when it is a dataset.
        demos_success_only: keep only successful demonstrations.
        base_execution: override a BC base's chunk execution (``ensemble``/``open_loop``; empty: as trained).
        bc_iterations: BC iterations when ``base`` is a dataset.
        reward: ``sparse`` (1 at success; ResFiT) or ``env`` (the task's reward).
        scale: residual scale ``s`` (ResFiT 0.1; RLPD uses 1.0 automatically).
        steps_per_iteration: env steps (of all worlds) per runner iteration.
        buffer_size: online replay capacity in transitions.
        batch_size: transitions per gradient step (split by ``demo_ratio``).
        demo_ratio: fraction of each batch drawn from demonstrations.
        utd: gradient updates per vectorized env step.
        learning_starts: online transitions before the first update.
        critic_warmup_updates: critic-only gradient steps before the actor trains (10-20k in ResFiT).
        actor_delay: critic steps per actor step (TD3).
        gamma: discount.
        n_step: steps in the bootstrapped return.
        tau: Polyak rate of the targets.
        actor_lr: Adam lr of the residual actor (ResFiT 1e-6 to 5e-6 on hardware).
        critic_lr: Adam lr of the Q ensemble.
        num_q: Q heads.
        num_min_q: heads in the REDQ target minimum.
        explore_sigma: Gaussian exploration noise std on the final action.
        target_sigma: target-policy smoothing noise std.
        target_clip: target-policy noise clip.
        actor_hidden: hidden sizes of ``f``.
        critic_hidden: hidden sizes of each Q head.
        normalize_obs: running mean/std of the observation (with the base action).

    """

    name: str = "residual"
    base: str = ""
    demos: str = ""
    demos_success_only: bool = True
    base_execution: str = ""
    bc_iterations: int = 200
    reward: str = "sparse"
    scale: float = 0.1
    steps_per_iteration: int = 8
    buffer_size: int = 1_000_000
    batch_size: int = 256
    demo_ratio: float = 0.5
    utd: float = 4.0
    learning_starts: int = 1000
    critic_warmup_updates: int = 10000
    actor_delay: int = 2
    gamma: float = 0.99
    n_step: int = 3
    tau: float = 0.005
    actor_lr: float = 3.0e-6
    critic_lr: float = 1.0e-4
    num_q: int = 10
    num_min_q: int = 2
    explore_sigma: float = 0.05
    target_sigma: float = 0.1
    target_clip: float = 0.3
    actor_hidden: list[int] = field(default_factory=lambda: [256, 256])
    critic_hidden: list[int] = field(default_factory=lambda: [512, 512])
    normalize_obs: bool = True


@torch.no_grad()
def relabel_base_actions(
    base: FrozenPolicy, episodes: list[Episode], device: torch.device | str
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Run the base policy along every demonstration, as it would run in the env.

    All episodes step in parallel (one world each, padded to the longest), so chunked
    bases see the same execution state as online. The base action of ``next_obs`` is the
    next step's for every step but the last, and the stateless prediction there.

    Returns:
        ``(base_actions, next_base_actions)``: per episode ``(T, A)`` CPU tensors.

    """
    E = len(episodes)
    lengths = [ep["obs"].shape[0] for ep in episodes]
    T = max(lengths)
    P = episodes[0]["obs"].shape[1]
    obs = torch.zeros(T, E, P, device=device)
    for i, ep in enumerate(episodes):
        obs[: lengths[i], i] = ep["obs"].to(device)
    runner = base.spawn(E)
    runner.reset(torch.arange(E, device=device))
    actions = torch.stack([runner.act(obs[t]) for t in range(T)])
    base_actions, next_base_actions = [], []
    for i, ep in enumerate(episodes):
        a = actions[: lengths[i], i].cpu()
        last = base.predict(ep["next_obs"][-1:].to(device)).cpu()
        base_actions.append(a)
        next_base_actions.append(torch.cat([a[1:], last]))
    return base_actions, next_base_actions


class Residual(ReplayAlgorithm):
    """ResFiT / RLPD learner (see module docstring and ``Algorithm``).

    Args:
        obs_dim: ``D``, the wrapped observation size (task observation + ``A`` base-action columns).
        action_dim: ``A``.
        cfg: hyperparameters.
        num_envs: worlds per env step.
        device: the env's device.
        demos: demonstration buffer (obs with relabelled base actions), or None.
        has_base: False for the RLPD baseline (scale 1, random actions before learning starts).
        seed: seeds noise and sampling.

    """

    policy: ResidualActor
    actor_target: ResidualActor

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        cfg: ResidualConfig,
        num_envs: int,
        device: torch.device | str,
        demos: ReplayBuffer | None = None,
        has_base: bool = True,
        seed: int = 0,
    ) -> None:
        if cfg.num_min_q > cfg.num_q:
            raise ValueError(f"algo.num_min_q ({cfg.num_min_q}) must be <= algo.num_q ({cfg.num_q}).")
        self.cfg, self.device, self.has_base = cfg, torch.device(device), has_base
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.scale = cfg.scale if has_base else 1.0
        self.policy = ResidualActor(
            obs_dim, action_dim, list(cfg.actor_hidden), self.scale, cfg.normalize_obs
        ).to(device)
        self.actor_target = copy.deepcopy(self.policy).requires_grad_(False)
        self.critic = QEnsemble(obs_dim, action_dim, list(cfg.critic_hidden), cfg.num_q).to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.policy.net.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.replay = ReplayBuffer(max(1, cfg.buffer_size // num_envs), num_envs, obs_dim, action_dim, device)
        self.sampler = MixedSampler(self.replay, demos, cfg.demo_ratio)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        if demos is not None and isinstance(self.policy.obs_norm, RunningNorm):
            self.policy.obs_norm.update(demos.obs[: demos.size].reshape(-1, obs_dim))
        self._pending: dict[str, torch.Tensor] = {}
        self._credit = 0.0
        self.num_updates = 0

    def _noise(self, shape: torch.Size, sigma: float) -> torch.Tensor:
        return sigma * torch.randn(shape, device=self.device, generator=self.gen)

    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Composed action plus exploration noise (uniform random for RLPD before learning starts)."""
        o = obs["policy"]
        if not self.has_base and self.num_updates == 0 and len(self.replay) < self.cfg.learning_starts:
            action = torch.rand(o.shape[0], self.action_dim, device=self.device, generator=self.gen) * 2 - 1
        else:
            with torch.no_grad():
                action = self.policy(o)
            action = (action + self._noise(action.shape, self.cfg.explore_sigma)).clamp(-1.0, 1.0)
        self._pending = {"obs": o, "action": action}
        return action

    def critic_target_value(self, next_obs: torch.Tensor) -> torch.Tensor:
        """REDQ target ``min_{2 random heads} Q'(s', a')`` with TD3 target smoothing; ``(B,)``."""
        c = self.cfg
        norm_next = self.policy.obs_norm(next_obs)
        a = F.residual_action(self.policy.base_action(next_obs), self.actor_target.net(norm_next), self.scale)
        noise = self._noise(a.shape, c.target_sigma).clamp(-c.target_clip, c.target_clip)
        a = (a + noise).clamp(-1.0, 1.0)
        heads = torch.randperm(c.num_q, device=self.device, generator=self.gen)[: c.num_min_q]
        return F.redq_min(self.critic_target(norm_next, a), heads)

    def gradient_step(self) -> dict[str, float]:
        """One critic step, and (after warm-up, every ``actor_delay``) an actor and target step."""
        c = self.cfg
        b = self.sampler.sample(c.batch_size, c.n_step, c.gamma, self.gen)
        with torch.no_grad():
            target = F.td_target(b["nstep_return"], b["discount"], self.critic_target_value(b["next_obs"]))
        obs = self.policy.obs_norm(b["obs"])
        q = self.critic(obs, b["action"])
        critic_loss = (q - target[None]).square().mean(1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        stats = {
            "loss/critic": critic_loss.item(),
            "q_mean": q.mean().item(),
            "demo_fraction": b["is_demo"].float().mean().item(),
        }
        self.num_updates += 1
        if self.num_updates > c.critic_warmup_updates and self.num_updates % c.actor_delay == 0:
            action = self.policy(b["obs"])
            actor_loss = -self.critic(obs, action).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            F.soft_update(self.actor_target.net, self.policy.net, c.tau)
            stats["loss/actor"] = actor_loss.item()
            stats["residual_abs"] = (action - self.policy.base_action(b["obs"])).abs().mean().item()
        F.soft_update(self.critic_target, self.critic, c.tau)
        return stats

    # --- checkpointing -------------------------------------------------------------
    def policy_meta(self) -> dict[str, Any]:
        """What is needed to rebuild the residual actor."""
        return {
            "kind": "residual",
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "hidden": list(self.cfg.actor_hidden),
            "scale": self.scale,
            "normalize_obs": self.cfg.normalize_obs,
        }

    def _optims(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_opt, "critic": self.critic_opt}

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "critic": self.critic, "actor_target": self.actor_target,
                "critic_target": self.critic_target}
