"""FastTD3: TD3 for many parallel worlds with a distributional critic and large batches.

The recipe (Seo et al., 2025): a deterministic tanh actor explores with Gaussian noise whose std
is drawn per world from ``[noise_std_min, noise_std_max]`` and drawn again when that world's
episode ends, so the batch always mixes careful and bold explorers. The critic is a pair of
categorical (C51) Q heads over fixed atoms; the target distribution at ``s'`` comes from the
target critic at the current actor's smoothed action, and per sample the head with the smaller
expected value supplies it (clipped double Q). It is projected onto the support with the n-step
return (``functional.categorical_projection``) and both heads minimize the cross-entropy to it.
The actor maximizes the heads' mean expected value every ``actor_delay`` critic steps. Updates
run at a fixed ratio per *vectorized* env step, so more worlds mean more data per update, never
more updates. The math lives in ``robotrl.algos.functional``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from robotrl.algos import functional as F
from robotrl.algos.base import ReplayAlgorithm
from robotrl.policies.offpolicy import DeterministicActor, DistributionalQEnsemble
from robotrl.storage.replay import ReplayBuffer


@dataclass
class FastTD3Config:
    """FastTD3 hyperparameters (paper values unless noted; a CPU tuning file shrinks nets and batch).

    Attributes:
        name: registered algorithm name.
        steps_per_iteration: env steps (of all worlds) per runner iteration (log/checkpoint unit).
        buffer_size: replay capacity in transitions (split evenly over the worlds).
        batch_size: transitions per gradient step (paper: 32768 on a GPU).
        utd: gradient updates per vectorized env step (paper: 2 for humanoids).
        learning_starts: transitions collected with uniform random actions before learning.
        gamma: discount.
        n_step: steps in the bootstrapped return.
        tau: Polyak rate of the target critic (paper: 0.1).
        actor_lr: Adam lr of the actor.
        critic_lr: Adam lr of the critic.
        actor_delay: critic steps per actor step.
        noise_std_min: smallest per-world exploration std.
        noise_std_max: largest per-world exploration std.
        target_sigma: target-policy smoothing noise std.
        target_clip: target-policy smoothing noise clip.
        num_atoms: atoms of the categorical critic.
        v_min: lowest atom (below the smallest discounted return the task can give).
        v_max: highest atom (above the largest).
        actor_hidden: actor MLP sizes (paper: 512-256-128).
        critic_hidden: critic MLP sizes per head (paper: 1024-512-256).
        layer_norm: LayerNorm in the critic heads.
        normalize_obs: running mean/std observation normalization.
        max_grad_norm: global gradient-norm clip (0: none).

    """

    name: str = "fasttd3"
    steps_per_iteration: int = 8
    buffer_size: int = 1_000_000
    batch_size: int = 32768
    utd: float = 2.0
    learning_starts: int = 10000
    gamma: float = 0.99
    n_step: int = 3
    tau: float = 0.1
    actor_lr: float = 3.0e-4
    critic_lr: float = 3.0e-4
    actor_delay: int = 2
    noise_std_min: float = 0.001
    noise_std_max: float = 0.4
    target_sigma: float = 0.2
    target_clip: float = 0.5
    num_atoms: int = 101
    v_min: float = -250.0
    v_max: float = 250.0
    actor_hidden: list[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden: list[int] = field(default_factory=lambda: [1024, 512, 256])
    layer_norm: bool = False
    normalize_obs: bool = True
    max_grad_norm: float = 0.0


class FastTD3(ReplayAlgorithm):
    """FastTD3 over a shared replay of ``num_envs`` worlds (see ``Algorithm`` and the module docstring).

    Args:
        obs_dim: flat ``policy`` observation size ``D``.
        action_dim: ``A``.
        cfg: hyperparameters.
        num_envs: worlds per env step ``N``.
        device: the env's device (networks and replay live there).
        seed: seeds the replay sampler and the exploration noise.

    """

    policy: DeterministicActor

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        cfg: FastTD3Config,
        num_envs: int,
        device: torch.device | str,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= cfg.noise_std_min <= cfg.noise_std_max:
            raise ValueError(
                f"algo.noise_std_min={cfg.noise_std_min} and algo.noise_std_max={cfg.noise_std_max} must satisfy "
                "0 <= min <= max."
            )
        self.cfg, self.device, self.num_envs = cfg, torch.device(device), num_envs
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.policy = DeterministicActor(obs_dim, action_dim, list(cfg.actor_hidden), cfg.normalize_obs).to(
            self.device
        )
        self.critic = DistributionalQEnsemble(
            obs_dim, action_dim, list(cfg.critic_hidden), 2, cfg.num_atoms, cfg.v_min, cfg.v_max, cfg.layer_norm
        ).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.policy.net.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.replay = ReplayBuffer(max(1, cfg.buffer_size // num_envs), num_envs, obs_dim, action_dim, self.device)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        self.noise_std = self._draw_std(num_envs)  # (N,) per-world exploration std
        self._pending: dict[str, torch.Tensor] = {}
        self._credit = 0.0
        self.num_updates = 0

    def _draw_std(self, n: int) -> torch.Tensor:
        lo, hi = self.cfg.noise_std_min, self.cfg.noise_std_max
        return lo + (hi - lo) * torch.rand(n, device=self.device, generator=self.gen)

    def _noise(self, shape: tuple[int, ...], std: torch.Tensor | float) -> torch.Tensor:
        return torch.randn(shape, device=self.device, generator=self.gen) * std

    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Uniform random actions until ``learning_starts``; then the actor plus per-world noise."""
        o = obs["policy"]
        if self.num_updates == 0 and len(self.replay) < self.cfg.learning_starts:
            action = torch.rand(o.shape[0], self.action_dim, device=self.device, generator=self.gen) * 2 - 1
        else:
            with torch.no_grad():
                action = self.policy.act_inference(o)
            action = (action + self._noise(action.shape, self.noise_std[:, None])).clamp(-1.0, 1.0)
        self._pending = {"obs": o, "action": action}
        return action

    def process_step(
        self,
        obs: dict[str, torch.Tensor],
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        info: dict[str, Any],
    ) -> None:
        """Store the transition, then draw a new exploration std for worlds whose episode ended."""
        super().process_step(obs, reward, terminated, truncated, info)
        done = (terminated | truncated).nonzero().squeeze(1)
        if done.numel():
            self.noise_std[done] = self._draw_std(int(done.numel()))

    def target_distribution(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """Projected ``(B, K)`` target of a replay batch ``b`` (clipped double Q, smoothed action)."""
        c = self.cfg
        next_obs = self.policy.obs_norm(b["next_obs"])
        a = torch.tanh(self.policy.net(next_obs))
        a = (a + self._noise(a.shape, c.target_sigma).clamp(-c.target_clip, c.target_clip)).clamp(-1.0, 1.0)
        logits = self.critic_target(next_obs, a)  # (2, B, K)
        probs = torch.softmax(logits, dim=-1)
        chosen = F.clipped_double_distribution(probs, probs @ self.critic_target.support)
        return F.categorical_projection(chosen, b["nstep_return"], b["discount"], c.v_min, c.v_max)

    def gradient_step(self) -> dict[str, float]:
        """One critic step, and every ``actor_delay`` steps an actor step; then the target critic."""
        c = self.cfg
        b = self.replay.sample(c.batch_size, c.n_step, c.gamma, self.gen)
        with torch.no_grad():
            target = self.target_distribution(b)
        obs = self.policy.obs_norm(b["obs"])
        logits = self.critic(obs, b["action"])
        critic_loss = F.categorical_td_loss(logits, target)
        self._step(self.critic_opt, critic_loss, self.critic.parameters())
        self.num_updates += 1
        stats = {"loss/critic": critic_loss.item(), "q_mean": self.critic.value(logits.detach()).mean().item()}
        if self.num_updates % c.actor_delay == 0:
            action = torch.tanh(self.policy.net(obs))
            actor_loss = -self.critic.value(self.critic(obs, action)).mean()
            self._step(self.actor_opt, actor_loss, self.policy.net.parameters())
            stats["loss/actor"] = actor_loss.item()
        F.soft_update(self.critic_target, self.critic, c.tau)
        return stats

    # --- checkpointing -------------------------------------------------------------
    def policy_meta(self) -> dict[str, Any]:
        """What ``load_frozen`` / eval / export need to rebuild the actor."""
        return {
            "kind": "deterministic",
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "hidden": list(self.cfg.actor_hidden),
            "normalize_obs": self.cfg.normalize_obs,
        }

    def _optims(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_opt, "critic": self.critic_opt}

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "critic": self.critic, "critic_target": self.critic_target}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The shared replay-learner state plus the per-world exploration stds."""
        return super().state_tensors() | {"noise_std": self.noise_std.clone()}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Inverse of ``state_tensors``."""
        super().load_state_tensors(tensors, meta)
        if "noise_std" in tensors:
            self.noise_std.copy_(tensors["noise_std"])
