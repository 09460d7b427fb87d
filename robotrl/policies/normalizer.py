"""Running mean/std observation normalization (Welford / Chan parallel update)."""

from __future__ import annotations

import torch
from torch import nn


class RunningNorm(nn.Module):
    """Normalizes ``(B, D)`` inputs with running statistics; ``update`` only in training.

    Buffers (saved with the policy): ``mean`` ``(D,)``, ``var`` ``(D,)``, ``count`` ``()``.
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, dim: int, clip: float = 10.0, eps: float = 1e-6) -> None:
        super().__init__()
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(eps))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold a ``(B, D)`` batch into the running statistics."""
        x = x.reshape(-1, self.mean.shape[0]).to(self.mean.dtype)
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
        n = x.shape[0]
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / sqrt(var + eps)``, clipped to ``[-clip, clip]``."""
        return ((x - self.mean) / torch.sqrt(self.var + self.eps)).clamp(-self.clip, self.clip)
