"""SAC for massively parallel envs (LIFT-style).

Large batches, a configurable update-to-data ratio, LayerNorm critics, clipped double Q,
automatic entropy tuning and running observation
normalization. Transitions from all worlds go into a device-resident ``ReplayBuffer``;
time-outs bootstrap from ``info["final_obs"]``. The math lives in ``robotrl.algos.functional``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from robotrl.algos import functional as F
from robotrl.algos.base import ReplayAlgorithm
from robotrl.policies.offpolicy import QEnsemble, TanhGaussianActor
from robotrl.storage.replay import ReplayBuffer


@dataclass
class SACConfig:
    """SAC hyperparameters (defaults follow LIFT, scaled where a CPU needs it).

    Attributes:
        name: registered algorithm name.
        steps_per_iteration: env steps (of all worlds) per runner iteration (log/checkpoint unit).
        buffer_size: replay capacity in transitions (split evenly over the worlds).
        batch_size: transitions per gradient step (LIFT: 4096-16384).
        utd: gradient updates per vectorized env step (may be fractional; LIFT: 16-19).
        learning_starts: transitions collected with uniform random actions before learning.
        gamma: discount.
        n_step: steps in the bootstrapped return.
        tau: Polyak rate of the target critic.
        actor_lr: Adam lr of the actor.
        critic_lr: Adam lr of the critics.
        alpha_lr: Adam lr of ``log(alpha)``.
        init_alpha: initial entropy temperature.
        target_entropy_scale: target entropy is ``-scale * A``.
        actor_hidden: actor MLP sizes (LIFT: 512-256-128).
        critic_hidden: Q MLP sizes (LIFT: 1024-512-256).
        num_q: Q heads; the target takes the min over all of them (2: clipped double Q).
        layer_norm: LayerNorm in the critics.
        normalize_obs: running mean/std observation normalization.
        max_grad_norm: global gradient-norm clip (0: none).

    """

    name: str = "sac"
    steps_per_iteration: int = 8
    buffer_size: int = 1_000_000
    batch_size: int = 4096
    utd: float = 1.0
    learning_starts: int = 5000
    gamma: float = 0.99
    n_step: int = 1
    tau: float = 0.005
    actor_lr: float = 3.0e-4
    critic_lr: float = 3.0e-4
    alpha_lr: float = 3.0e-4
    init_alpha: float = 0.1
    target_entropy_scale: float = 1.0
    actor_hidden: list[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden: list[int] = field(default_factory=lambda: [1024, 512, 256])
    num_q: int = 2
    layer_norm: bool = True
    normalize_obs: bool = True
    max_grad_norm: float = 0.0


class SAC(ReplayAlgorithm):
    """Soft actor-critic over a shared replay of ``num_envs`` worlds (see ``Algorithm``).

    Args:
        obs_dim: flat ``policy`` observation size ``D``.
        action_dim: ``A``.
        cfg: hyperparameters.
        num_envs: worlds per env step.
        device: the env's device (networks and replay live there).
        seed: seeds the replay sampler.

    """

    policy: TanhGaussianActor

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        cfg: SACConfig,
        num_envs: int,
        device: torch.device | str,
        seed: int = 0,
    ) -> None:
        self.cfg, self.device, self.num_envs = cfg, torch.device(device), num_envs
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.policy = TanhGaussianActor(obs_dim, action_dim, list(cfg.actor_hidden), cfg.normalize_obs).to(
            device
        )
        self.critic = QEnsemble(obs_dim, action_dim, list(cfg.critic_hidden), cfg.num_q, cfg.layer_norm).to(
            device
        )
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.init_alpha), device=self.device, requires_grad=True)
        self.target_entropy = -cfg.target_entropy_scale * action_dim
        self.actor_opt = torch.optim.Adam(self.policy.net.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr)
        capacity = max(1, cfg.buffer_size // num_envs)
        self.replay = ReplayBuffer(capacity, num_envs, obs_dim, action_dim, device)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        self._pending: dict[str, torch.Tensor] = {}
        self._credit = 0.0
        self.num_updates = 0

    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Uniform random actions until ``learning_starts``, then policy samples."""
        o = obs["policy"]
        if self.num_updates == 0 and len(self.replay) < self.cfg.learning_starts:
            action = torch.rand(o.shape[0], self.action_dim, device=self.device, generator=self.gen) * 2 - 1
        else:
            with torch.no_grad():
                action, _ = self.policy.sample(o)
        self._pending = {"obs": o, "action": action}
        return action

    def gradient_step(self) -> dict[str, float]:
        """One critic, actor, temperature and target update on a fresh batch."""
        c = self.cfg
        b = self.replay.sample(c.batch_size, c.n_step, c.gamma, self.gen)
        norm = self.policy.obs_norm
        obs, next_obs = norm(b["obs"]), norm(b["next_obs"])
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_a, next_logp = self.policy.sample(b["next_obs"])
            next_q = self.critic_target(next_obs, next_a).min(0).values
            target = F.td_target(b["nstep_return"], b["discount"], next_q - alpha * next_logp)
        q = self.critic(obs, b["action"])
        critic_loss = (q - target[None]).square().mean(1).sum()
        self._step(self.critic_opt, critic_loss, self.critic.parameters())

        action, logp = self.policy.sample(b["obs"])
        q_pi = self.critic(obs, action).min(0).values
        actor_loss = F.sac_actor_loss(logp, q_pi, alpha)
        self._step(self.actor_opt, actor_loss, self.policy.net.parameters())
        alpha_loss = F.sac_temperature_loss(self.log_alpha, logp, self.target_entropy)
        self._step(self.alpha_opt, alpha_loss, [self.log_alpha])
        F.soft_update(self.critic_target, self.critic, c.tau)
        self.num_updates += 1
        return {
            "loss/critic": critic_loss.item(),
            "loss/actor": actor_loss.item(),
            "alpha": float(alpha),
            "q_mean": q.mean().item(),
            "entropy": -logp.mean().item(),
        }

    # --- checkpointing -------------------------------------------------------------
    def policy_meta(self) -> dict[str, Any]:
        """What ``load_frozen`` / eval need to rebuild the actor."""
        return {
            "kind": "tanh_gaussian",
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "hidden": list(self.cfg.actor_hidden),
            "normalize_obs": self.cfg.normalize_obs,
        }

    def _optims(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_opt, "critic": self.critic_opt, "alpha": self.alpha_opt}

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "critic": self.critic, "critic_target": self.critic_target}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The shared replay-learner state plus the entropy temperature."""
        return super().state_tensors() | {"log_alpha": self.log_alpha.detach()}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Inverse of ``state_tensors``; the replay restarts empty (filled again before learning)."""
        super().load_state_tensors(tensors, meta)
        with torch.no_grad():
            self.log_alpha.copy_(tensors["log_alpha"])
