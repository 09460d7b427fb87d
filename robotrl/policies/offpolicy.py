"""Networks of the off-policy algorithms.

A tanh-Gaussian actor (SAC), a deterministic actor (FastTD3), a residual actor (ResFiT), a
chunked BC net, a vectorized ensemble of LayerNorm Q heads (clipped double Q with 2 heads, REDQ
with 10) and its categorical (C51) variant.

Shapes: observations ``(B, D)``, actions ``(B, A)`` in ``[-1, 1]``; the Q ensemble returns
``(H, B)`` for ``H`` heads, the categorical one ``(H, B, K)`` logits over ``K`` atoms.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from robotrl.algos.functional import residual_action, tanh_gaussian_log_prob
from robotrl.policies.mlp import mlp
from robotrl.policies.normalizer import RunningNorm

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def layer_norm_mlp(in_dim: int, hidden: list[int], out_dim: int) -> nn.Sequential:
    """``Linear -> LayerNorm -> ReLU`` per hidden size, then ``Linear`` to ``out_dim``."""
    layers: list[nn.Module] = []
    dims = [in_dim, *hidden]
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(a, b), nn.LayerNorm(b), nn.ReLU()]
    layers.append(nn.Linear(dims[-1], out_dim))
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """``H`` independent linear layers applied in one batched matmul: ``(H, B, I) -> (H, B, O)``."""

    def __init__(self, heads: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)
        self.weight = nn.Parameter(torch.empty(heads, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(heads, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W + b`` per head."""
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last dimension with a separate affine per head: ``(H, B, F)``."""

    def __init__(self, heads: int, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(heads, 1, features))
        self.bias = nn.Parameter(torch.zeros(heads, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize each row, then scale and shift per head."""
        return nn.functional.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


class QEnsemble(nn.Module):
    """``H`` Q heads ``Q_i(s, a)``, each ``Linear -> LayerNorm -> ReLU`` per hidden size.

    Args:
        obs_dim: ``D``.
        action_dim: ``A``.
        hidden: hidden sizes (same for every head).
        heads: ``H`` (2 for SAC's clipped double Q, 10 for ResFiT/REDQ).
        layer_norm: LayerNorm after each hidden linear layer (LIFT, ResFiT, RLPD).

    """

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: list[int], heads: int, layer_norm: bool = True,
        out_dim: int = 1,
    ) -> None:
        super().__init__()
        self.heads = heads
        layers: list[nn.Module] = []
        dims = [obs_dim + action_dim, *hidden]
        for a, b in zip(dims[:-1], dims[1:], strict=True):
            layers.append(EnsembleLinear(heads, a, b))
            if layer_norm:
                layers.append(EnsembleLayerNorm(heads, b))
            layers.append(nn.ReLU())
        layers.append(EnsembleLinear(heads, dims[-1], out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``(H, B)`` Q values of ``(B, D)`` normalized observations and ``(B, A)`` actions."""
        x = torch.cat([obs, action], dim=-1)
        return self.net(x.unsqueeze(0).expand(self.heads, *x.shape)).squeeze(-1)


class DistributionalQEnsemble(QEnsemble):
    """``H`` categorical (C51) Q heads over ``K`` fixed atoms from ``v_min`` to ``v_max`` (FastTD3).

    ``forward`` returns ``(H, B, K)`` logits; ``value`` turns logits into ``(H, B)`` expected values.
    """

    support: torch.Tensor  # (K,) atom values, a buffer

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: list[int], heads: int, num_atoms: int,
        v_min: float, v_max: float, layer_norm: bool = False,
    ) -> None:
        if num_atoms < 2 or not v_max > v_min:
            raise ValueError(f"need num_atoms >= 2 and v_max > v_min, got {num_atoms}, [{v_min}, {v_max}]")
        super().__init__(obs_dim, action_dim, hidden, heads, layer_norm, out_dim=num_atoms)
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))
        self.v_min, self.v_max = v_min, v_max

    def value(self, logits: torch.Tensor) -> torch.Tensor:
        """Expected values ``sum_k softmax(logits)_k z_k``: ``(..., K) -> (...)``."""
        return torch.softmax(logits, dim=-1) @ self.support


class DeterministicActor(nn.Module):
    """TD3/FastTD3 actor ``a = tanh(f(norm(s)))``, with running obs normalization.

    Args:
        obs_dim: ``D``.
        action_dim: ``A``.
        hidden: hidden sizes of ``f`` (ReLU).
        normalize_obs: keep running mean/std of observations (the critic reads ``obs_norm`` too).

    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], normalize_obs: bool = True) -> None:
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.obs_norm: nn.Module = RunningNorm(obs_dim) if normalize_obs else nn.Identity()
        self.net: nn.Sequential = mlp(obs_dim, hidden, action_dim, "relu")

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic ``(B, A)`` action of raw observations."""
        return torch.tanh(self.net(self.obs_norm(obs)))

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action, zeros(B))``: the ``ActorCritic.act`` interface (no log-probability to give)."""
        action = self.act_inference(obs)
        return action, torch.zeros(action.shape[0], device=action.device)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action (what export traces)."""
        return self.act_inference(obs)


class TanhGaussianActor(nn.Module):
    """SAC actor: ``a = tanh(u)``, ``u ~ N(mu(s), sigma(s))``, with running obs normalization.

    Args:
        obs_dim: ``D``.
        action_dim: ``A``.
        hidden: hidden sizes (LIFT: 512-256-128).
        normalize_obs: keep running mean/std of observations (the critic reads ``obs_norm`` too).

    """

    def __init__(self, obs_dim: int, action_dim: int, hidden: list[int], normalize_obs: bool = True) -> None:
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.obs_norm: nn.Module = RunningNorm(obs_dim) if normalize_obs else nn.Identity()
        self.net: nn.Sequential = layer_norm_mlp(obs_dim, hidden, 2 * action_dim)

    def _stats(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(self.obs_norm(obs)).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterized ``(B, A)`` actions and their ``(B,)`` log-probabilities."""
        mean, log_std = self._stats(obs)
        u = mean + log_std.exp() * torch.randn_like(mean)
        return torch.tanh(u), tanh_gaussian_log_prob(mean, log_std, u)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Same as ``sample`` (the ``ActorCritic.act`` interface ``robotrl eval`` uses)."""
        return self.sample(obs)

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic ``(B, A)`` action ``tanh(mu(s))``."""
        return torch.tanh(self._stats(obs)[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action (what export traces)."""
        return self.act_inference(obs)


class ResidualActor(nn.Module):
    """ResFiT actor: ``a = clip(a_base + scale * tanh(f([s, a_base])), -1, 1)``.

    The input ``(B, D)`` is the task observation with the base action appended as its last
    ``A`` columns (``robotrl.envs.residual.BaseActionEnv`` builds it). ``f``'s last layer
    is zero-initialized, so an untrained actor returns the base action exactly. With no base
    policy (base action 0) and ``scale = 1`` it is a plain TD3/RLPD actor.

    Args:
        obs_dim: ``D`` (including the ``A`` base-action columns).
        action_dim: ``A``.
        hidden: hidden sizes of ``f``.
        scale: residual scale ``s`` (0.1 in ResFiT).
        normalize_obs: running mean/std of the input (the critic reads ``obs_norm`` too).

    """

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: list[int], scale: float, normalize_obs: bool = True
    ) -> None:
        super().__init__()
        if obs_dim <= action_dim:
            raise ValueError(
                f"ResidualActor obs_dim ({obs_dim}) must include the {action_dim} base-action columns."
            )
        self.obs_dim, self.action_dim, self.scale = obs_dim, action_dim, scale
        self.obs_norm: nn.Module = RunningNorm(obs_dim) if normalize_obs else nn.Identity()
        self.net: nn.Sequential = layer_norm_mlp(obs_dim, hidden, action_dim)
        last = self.net[-1]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def base_action(self, obs: torch.Tensor) -> torch.Tensor:
        """The ``(B, A)`` base action stored in the last columns of ``obs``."""
        return obs[..., -self.action_dim :]

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        """Composed ``(B, A)`` action."""
        return residual_action(self.base_action(obs), self.net(self.obs_norm(obs)), self.scale)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Composed action (what export traces)."""
        return self.act_inference(obs)


class ChunkPolicy(nn.Module):
    """Behaviour-cloning net: ``(B, P)`` observation -> ``(B, K, A)`` chunk of future actions.

    A small MLP with a tanh output; observation statistics are fixed from the dataset
    (``set_obs_stats``) and saved with the weights.
    """

    def __init__(
        self, obs_dim: int, action_dim: int, chunk: int, hidden: list[int], activation: str = "relu"
    ) -> None:
        super().__init__()
        self.obs_dim, self.action_dim, self.chunk = obs_dim, action_dim, chunk
        self.net: nn.Sequential = mlp(obs_dim, hidden, chunk * action_dim, activation)
        self.obs_mean: torch.Tensor
        self.obs_std: torch.Tensor
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))

    def set_obs_stats(self, obs: torch.Tensor) -> None:
        """Fix the input normalization from ``(N, P)`` dataset observations."""
        self.obs_mean.copy_(obs.mean(0))
        self.obs_std.copy_(obs.std(0).clamp_min(1e-3))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, K, A)`` predicted actions for steps ``t .. t+K-1``."""
        x = (obs - self.obs_mean) / self.obs_std
        return torch.tanh(self.net(x)).reshape(-1, self.chunk, self.action_dim)
