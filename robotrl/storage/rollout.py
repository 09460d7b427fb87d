"""On-policy rollout buffer: ``[T, B, ...]`` tensors on the env's device."""

from __future__ import annotations

from collections.abc import Iterator

import torch


class RolloutStorage:
    """Fixed-size ``[T, B]`` buffer filled step by step, then read in mini-batches.

    Fields (all ``[T, B, ...]``): ``obs`` ``(P)``, ``critic_obs`` ``(C)``, ``actions``
    ``(A)``, ``log_probs``, ``values``, ``rewards``, ``dones`` (bool),
    ``truncated`` (bool), ``final_values`` (``V`` of the pre-reset observation), and after
    ``set_returns``: ``advantages`` and ``returns``.
    """

    def __init__(self, T: int, B: int, obs_dim: int, critic_dim: int, action_dim: int, device: torch.device) -> None:
        self.T, self.B, self.device = T, B, device

        def z(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(T, B, *shape, dtype=dtype, device=device)

        self.obs, self.critic_obs, self.actions = z(obs_dim), z(critic_dim), z(action_dim)
        self.log_probs, self.values, self.rewards, self.final_values = z(), z(), z(), z()
        self.dones, self.truncated = z(dtype=torch.bool), z(dtype=torch.bool)
        self.advantages, self.returns = z(), z()
        self.step = 0

    def add(self, **fields: torch.Tensor) -> None:
        """Write one step's ``[B, ...]`` tensors at the current index."""
        if self.step >= self.T:
            raise IndexError(f"RolloutStorage is full ({self.T} steps); call clear() after the update.")
        for name, value in fields.items():
            getattr(self, name)[self.step].copy_(value)
        self.step += 1

    def clear(self) -> None:
        """Start filling from step 0 again."""
        self.step = 0

    def set_returns(self, advantages: torch.Tensor, returns: torch.Tensor) -> None:
        """Store ``[T, B]`` advantages and returns computed by the algorithm."""
        self.advantages.copy_(advantages)
        self.returns.copy_(returns)

    def minibatches(self, num_minibatches: int, num_epochs: int, gen: torch.Generator | None = None
                    ) -> Iterator[dict[str, torch.Tensor]]:
        """Yield ``num_epochs * num_minibatches`` shuffled flat mini-batches of ``[T*B/num_minibatches, ...]``."""
        n = self.T * self.B
        size = n // num_minibatches
        flat = {
            name: getattr(self, name).reshape(n, *getattr(self, name).shape[2:])
            for name in ("obs", "critic_obs", "actions", "log_probs", "values", "advantages", "returns")
        }
        for _ in range(num_epochs):
            perm = torch.randperm(n, generator=gen, device="cpu").to(self.device)
            for i in range(num_minibatches):
                idx = perm[i * size:(i + 1) * size]
                yield {name: value[idx] for name, value in flat.items()}
