"""MLP actor-critic with running observation normalization and Gaussian or Beta actions.

Shapes: actor input ``(B, P)`` (the ``policy`` observation), critic input ``(B, C)``
(``critic`` observation, or ``policy`` when the task has no privileged inputs), actions
``(B, A)`` in ``[-1, 1]``.

The Gaussian head samples ``mean + std * eps`` (std a learned per-dimension parameter);
actions are clipped to ``[-1, 1]`` by the env. The Beta head (CaRL) samples in ``[0, 1]``
and maps to ``[-1, 1]`` affinely, so its log-probabilities are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.distributions import Beta, Distribution, Normal

from robotrl.policies.normalizer import RunningNorm

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU, "gelu": nn.GELU}
DISTRIBUTIONS = ("gaussian", "beta")
INITS = ("default", "orthogonal")


@dataclass
class PolicyConfig:
    """Network settings.

    Attributes:
        actor_hidden: hidden layer sizes of the actor.
        critic_hidden: hidden layer sizes of the critic.
        activation: one of ``elu``, ``relu``, ``tanh``, ``silu``, ``gelu``.
        init_std: initial action std of the Gaussian head.
        max_std: upper bound on the Gaussian head's std (``0`` leaves it unbounded). Actions are
            clipped to ``[-1, 1]``, so past about 1 a larger std only saturates more samples; on
            driving the learned std grew without bound (0.8 -> 20-40 in 600 s). The trainer
            projects the std back onto the bound after each optimizer step (``clamp_std``).
        distribution: ``gaussian`` or ``beta`` (CaRL).
        normalize_obs: keep running mean/std of observations.
        init: ``default`` (PyTorch's) or ``orthogonal`` (hidden layers with gain sqrt(2), the
            critic's output with gain 1, as SB3 and CleanRL do). The actor's output layer is
            always orthogonal with gain 0.01, so the first actions sit near zero.

    """

    actor_hidden: list[int] = field(default_factory=lambda: [256, 128, 64])
    critic_hidden: list[int] = field(default_factory=lambda: [256, 128, 64])
    activation: str = "elu"
    init_std: float = 0.8
    max_std: float = 0.0
    distribution: str = "gaussian"
    normalize_obs: bool = True
    init: str = "default"


def mlp(in_dim: int, hidden: list[int], out_dim: int, activation: str) -> nn.Sequential:
    """``Linear -> act`` for each hidden size, then a final ``Linear`` to ``out_dim``."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"Unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}.")
    layers: list[nn.Module] = []
    dims = [in_dim, *hidden]
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(a, b), ACTIVATIONS[activation]()]
    layers.append(nn.Linear(dims[-1], out_dim))
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Actor ``(B, P) -> (B, A)`` and critic ``(B, C) -> (B,)`` (see module docstring)."""

    def __init__(self, obs_dim: int, critic_dim: int, action_dim: int, cfg: PolicyConfig) -> None:
        super().__init__()
        if cfg.distribution not in DISTRIBUTIONS:
            raise ValueError(f"Unknown policy.distribution={cfg.distribution!r}; valid: {', '.join(DISTRIBUTIONS)}.")
        self.cfg = cfg
        self.obs_dim, self.critic_dim, self.action_dim = obs_dim, critic_dim, action_dim
        out = 2 * action_dim if cfg.distribution == "beta" else action_dim
        self.actor = mlp(obs_dim, list(cfg.actor_hidden), out, cfg.activation)
        self.critic = mlp(critic_dim, list(cfg.critic_hidden), 1, cfg.activation)
        if cfg.max_std < 0 or 0 < cfg.max_std < cfg.init_std:
            raise ValueError(f"policy.max_std={cfg.max_std} must be 0 (unbounded) or at least policy.init_std="
                             f"{cfg.init_std}.")
        self.log_std = nn.Parameter(torch.full((action_dim,), math.log(cfg.init_std)))
        self.obs_norm = RunningNorm(obs_dim) if cfg.normalize_obs else nn.Identity()
        self.critic_norm = RunningNorm(critic_dim) if cfg.normalize_obs else nn.Identity()
        if cfg.init not in INITS:
            raise ValueError(f"Unknown policy.init={cfg.init!r}; valid: {', '.join(INITS)}.")
        if cfg.init == "orthogonal":
            for net in (self.actor, self.critic):
                for layer in net:
                    if isinstance(layer, nn.Linear):
                        nn.init.orthogonal_(layer.weight, gain=math.sqrt(2.0))
                        nn.init.zeros_(layer.bias)
            value_head = self.critic[-1]
            assert isinstance(value_head, nn.Linear)
            nn.init.orthogonal_(value_head.weight, gain=1.0)
        last = self.actor[-1]
        assert isinstance(last, nn.Linear)
        nn.init.orthogonal_(last.weight, gain=0.01)
        nn.init.zeros_(last.bias)

    def update_normalizers(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        """Fold a batch of ``(B, P)`` and ``(B, C)`` observations into the running stats."""
        if isinstance(self.obs_norm, RunningNorm) and isinstance(self.critic_norm, RunningNorm):
            self.obs_norm.update(obs)
            self.critic_norm.update(critic_obs)

    def distribution(self, obs: torch.Tensor) -> Distribution:
        """Action distribution for ``(B, P)`` observations (Beta is over ``[0, 1]``)."""
        out = self.actor(self.obs_norm(obs))
        if self.cfg.distribution == "beta":
            alpha, beta = (nn.functional.softplus(out) + 1.0).chunk(2, dim=-1)
            return Beta(alpha, beta)
        return Normal(out, self.log_std.exp().expand_as(out))

    def action_std(self, dist: Distribution) -> torch.Tensor:
        """``(B, A)`` std of ``dist``'s actions in the env's ``[-1, 1]`` units, before clipping."""
        std = dist.variance.sqrt()
        return 2.0 * std if self.cfg.distribution == "beta" else std

    @torch.no_grad()
    def clamp_std(self) -> None:
        """Project the Gaussian std onto ``(0, max_std]`` (a no-op when ``max_std`` is 0 or for Beta).

        A projection after the optimizer step, not a clamp in the forward pass: a clamped forward
        would give the parameter no gradient once past the bound, so it could never come back down.
        """
        if self.cfg.max_std > 0:
            self.log_std.clamp_(max=math.log(self.cfg.max_std))

    def to_action(self, sample: torch.Tensor) -> torch.Tensor:
        """Map a distribution sample to the env's ``[-1, 1]`` action."""
        return 2.0 * sample - 1.0 if self.cfg.distribution == "beta" else sample

    def from_action(self, action: torch.Tensor) -> torch.Tensor:
        """Inverse of ``to_action`` (Beta samples kept off the open interval's ends)."""
        if self.cfg.distribution == "beta":
            return ((action + 1.0) * 0.5).clamp(1e-6, 1 - 1e-6)
        return action

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ``(B, A)`` actions and their ``(B,)`` log-probabilities."""
        dist = self.distribution(obs)
        sample = dist.sample()
        if self.cfg.distribution == "beta":
            sample = sample.clamp(1e-6, 1 - 1e-6)
        return self.to_action(sample), dist.log_prob(sample).sum(-1)

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic ``(B, A)`` action: the mean (Gaussian) or mean of the Beta."""
        out = self.actor(self.obs_norm(obs))
        if self.cfg.distribution == "beta":
            alpha, beta = (nn.functional.softplus(out) + 1.0).chunk(2, dim=-1)
            return 2.0 * alpha / (alpha + beta) - 1.0
        return out.clamp(-1.0, 1.0)

    def evaluate(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """State values ``(B,)`` from ``(B, C)`` critic observations."""
        return self.critic(self.critic_norm(critic_obs)).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action; what ``robotrl export`` traces to ONNX."""
        return self.act_inference(obs)
