"""Behaviour cloning with action chunking (ACT-style heads on a small MLP).

The network maps an observation to the next ``K`` actions; training regresses every
demonstration step onto the ``K`` actions that followed it in its episode (steps past the
episode's end are masked out, as in ACT). At run time ``ChunkExecutor`` plays the chunks
open-loop or with temporal ensembling. BC is offline: ``process_step`` stores nothing and
each ``update`` takes ``updates_per_iteration`` gradient steps on the dataset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from robotrl.algos.base import Algorithm
from robotrl.policies.frozen import ChunkExecutor
from robotrl.policies.offpolicy import ChunkPolicy
from robotrl.storage.checkpoint import optimizer_tensors, prefixed, restore_optimizer, strip
from robotrl.storage.demos import Episode

LOSSES = ("l1", "mse")


@dataclass
class BCConfig:
    """Behaviour-cloning settings.

    Attributes:
        name: registered algorithm name.
        dataset: robomimic-style HDF5 file of demonstrations (``robotrl collect``).
        success_only: train on successful demonstrations only.
        chunk: actions predicted per observation ``K`` (ResFiT's ACT base uses 20).
        hidden: MLP hidden sizes.
        activation: MLP activation.
        lr: Adam learning rate.
        weight_decay: AdamW weight decay.
        batch_size: samples per gradient step.
        updates_per_iteration: gradient steps per runner iteration.
        loss: ``l1`` (ACT) or ``mse``.
        execution: ``ensemble`` (temporal ensembling) or ``open_loop``.
        ensemble_decay: ACT's ``m`` in the ``exp(-m * i)`` ensembling weights.
        eval_interval: iterations between success evaluations in the env (0: only at the end).
        eval_episodes: episodes per evaluation.

    """

    name: str = "bc"
    dataset: str = ""
    success_only: bool = True
    chunk: int = 10
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "relu"
    lr: float = 1.0e-3
    weight_decay: float = 1.0e-4
    batch_size: int = 256
    updates_per_iteration: int = 50
    loss: str = "l1"
    execution: str = "ensemble"
    ensemble_decay: float = 0.01
    eval_interval: int = 0
    eval_episodes: int = 64


def chunk_targets(actions: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Targets ``y[t, k] = actions[t + k]`` of one episode, padded with its last action.

    Args:
        actions: ``(T, A)`` actions of one episode.
        chunk: ``K``.

    Returns:
        ``(targets, mask)``: ``(T, K, A)`` and ``(T, K)`` bool, False where ``t + k >= T``.

    """
    T = actions.shape[0]
    idx = torch.arange(T)[:, None] + torch.arange(chunk)[None, :]
    mask = idx < T
    return actions[idx.clamp(max=T - 1)], mask


class BC(Algorithm):
    """Chunked behaviour cloning on a fixed set of episodes (see module docstring).

    Args:
        episodes: demonstrations (``robotrl.storage.demos.read_demos``).
        cfg: settings.
        device: where the network and data live.
        num_envs: worlds ``act`` runs in (for evaluation rollouts).
        seed: seeds batch sampling.

    """

    def __init__(
        self,
        episodes: list[Episode],
        cfg: BCConfig,
        device: torch.device | str,
        num_envs: int = 1,
        seed: int = 0,
    ) -> None:
        if cfg.loss not in LOSSES:
            raise ValueError(f"Unknown algo.loss={cfg.loss!r}; valid: {', '.join(LOSSES)}.")
        if not episodes:
            raise ValueError("BC got no demonstrations; check algo.dataset and algo.success_only.")
        self.cfg, self.device = cfg, torch.device(device)
        targets, masks = zip(
            *(chunk_targets(ep["actions"].float(), cfg.chunk) for ep in episodes), strict=True
        )
        self.obs = torch.cat([ep["obs"].float() for ep in episodes]).to(self.device)
        self.targets = torch.cat(targets).to(self.device)
        self.masks = torch.cat(masks).to(self.device)
        self.obs_dim, self.action_dim = self.obs.shape[1], self.targets.shape[2]
        self.policy = ChunkPolicy(self.obs_dim, self.action_dim, cfg.chunk, list(cfg.hidden), cfg.activation)
        self.policy = self.policy.to(self.device)
        self.policy.set_obs_stats(self.obs)
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        self.executor = ChunkExecutor(self.policy, num_envs, cfg.execution, cfg.ensemble_decay)
        self.num_updates = 0

    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Chunked action for every world (executor state advances)."""
        return self.executor.act(obs["policy"])

    def process_step(
        self,
        obs: dict[str, torch.Tensor],
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        info: dict[str, Any],
    ) -> None:
        """Offline: only resets the chunk state of finished worlds."""
        done = (terminated | truncated).nonzero().squeeze(1)
        if done.numel():
            self.executor.reset(done)

    def ready(self) -> bool:
        """Always: the dataset is fixed."""
        return True

    def loss(self, obs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked ``l1``/``mse`` between predicted and demonstrated ``(B, K, A)`` chunks."""
        err = self.policy(obs) - targets
        err = err.abs() if self.cfg.loss == "l1" else err.square()
        m = mask[..., None].to(err.dtype)
        return (err * m).sum() / (m.sum() * self.action_dim).clamp_min(1.0)

    def update(self, obs: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
        """``updates_per_iteration`` gradient steps on random mini-batches."""
        self.policy.train()
        total = 0.0
        for _ in range(self.cfg.updates_per_iteration):
            idx = torch.randint(
                0, self.obs.shape[0], (self.cfg.batch_size,), device=self.device, generator=self.gen
            )
            loss = self.loss(self.obs[idx], self.targets[idx], self.masks[idx])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
            self.num_updates += 1
        self.policy.eval()
        return {"loss/bc": total / self.cfg.updates_per_iteration}

    def policy_meta(self) -> dict[str, Any]:
        """What ``load_frozen`` needs to rebuild the chunk policy and its executor."""
        c = self.cfg
        return {
            "kind": "chunk",
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "chunk": c.chunk,
            "hidden": list(c.hidden),
            "activation": c.activation,
            "execution": c.execution,
            "ensemble_decay": c.ensemble_decay,
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Network weights, observation statistics and AdamW state."""
        return {
            **prefixed(self.policy.state_dict(), "policy"),
            **prefixed(optimizer_tensors(self.optimizer)[0], "optim"),
        }

    def state_meta(self) -> dict[str, Any]:
        """Update count and optimizer hyperparameters."""
        return {"num_updates": self.num_updates, "optim": optimizer_tensors(self.optimizer)[1]}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Inverse of ``state_tensors``."""
        self.policy.load_state_dict(strip(tensors, "policy"))
        algo_meta = meta.get("algo_state", {})
        if "optim" in algo_meta:
            restore_optimizer(self.optimizer, strip(tensors, "optim"), algo_meta["optim"])
        self.num_updates = algo_meta.get("num_updates", 0)
