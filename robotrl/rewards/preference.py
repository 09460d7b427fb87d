"""RL-VLM-F preference rewards: labellers pick the frame that better matches the goal; a Bradley-Terry ensemble.

* ``Labeller.label(frames_a, frames_b) -> (k,)`` int64: ``0`` (a is better), ``1`` (b is better)
  or ``CANT_TELL`` (``-1``; such pairs are dropped).
* ``EncoderLabeller``: the image-text encoder's similarity to the goal text; pairs closer than
  ``margin`` are "can't tell".
* ``OracleLabeller``: a scripted oracle on the task's ground truth (a score per frame's state).
* ``RewardEnsemble``: 3 MLP reward models on observations, each trained with the Bradley-Terry
  loss ``bradley_terry_loss`` on its own bootstrap of the labels; the reward is their mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

CANT_TELL = -1


def bradley_terry_loss(r_a: torch.Tensor, r_b: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``P(b > a) = sigmoid(r_b - r_a)`` against ``labels`` in {0, 1}; ``CANT_TELL`` dropped.

    Args:
        r_a: ``(k,)`` predicted returns (or rewards) of the first items.
        r_b: ``(k,)`` of the second items.
        labels: ``(k,)`` int: 0 if a is preferred, 1 if b is, ``CANT_TELL`` to ignore.

    """
    keep = labels != CANT_TELL
    if not bool(keep.any()):
        return r_a.sum() * 0.0
    logits = (r_b - r_a)[keep]
    return nn.functional.binary_cross_entropy_with_logits(logits, labels[keep].float())


class EncoderLabeller:
    """Labels pairs by each frame's cosine similarity to ``goal``; ``|diff| < margin`` is "can't tell"."""

    def __init__(self, encoder: Any, goal: str, margin: float = 0.01) -> None:
        self.encoder, self.margin = encoder, margin
        self.goal = encoder.encode_text([goal])[0]

    def label(self, frames_a: np.ndarray, frames_b: np.ndarray) -> torch.Tensor:
        """``(k, H, W, 3)`` uint8 pairs -> ``(k,)`` labels."""
        diff = self.encoder.encode_image(frames_b) @ self.goal - self.encoder.encode_image(frames_a) @ self.goal
        return torch.where(diff.abs() < self.margin, CANT_TELL, (diff > 0).long())


class OracleLabeller:
    """Scripted oracle: labels pairs by a ground-truth score of each state (ties within ``margin``: can't tell)."""

    def __init__(self, score: Callable[[Any], torch.Tensor], margin: float = 0.0) -> None:
        self.score, self.margin = score, margin

    def label(self, items_a: Any, items_b: Any) -> torch.Tensor:
        """Items (states) -> ``(k,)`` labels."""
        diff = self.score(items_b) - self.score(items_a)
        return torch.where(diff.abs() <= self.margin, CANT_TELL, (diff > 0).long())


class RewardEnsemble(nn.Module):
    """``members`` MLP reward models ``(N, obs_dim) -> (N,)``; ``forward`` is their mean.

    Args:
        obs_dim: observation size.
        members: ensemble size (3 in RL-VLM-F).
        hidden: hidden width.

    """

    def __init__(self, obs_dim: int, members: int = 3, hidden: int = 128) -> None:
        super().__init__()
        self.members = nn.ModuleList(
            nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 1)) for _ in range(members))

    def member_rewards(self, obs: torch.Tensor) -> torch.Tensor:
        """``(N, obs_dim) -> (members, N)``."""
        return torch.stack([m(obs).squeeze(-1) for m in self.members])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(N, obs_dim) -> (N,)`` mean reward."""
        return self.member_rewards(obs).mean(0)

    def fit(self, obs_a: torch.Tensor, obs_b: torch.Tensor, labels: torch.Tensor, steps: int = 200,
            lr: float = 1e-3, batch_size: int = 128, gen: torch.Generator | None = None) -> float:
        """Train every member on its own bootstrap of the labelled pairs; returns the last mean loss.

        ``obs_a``/``obs_b`` are ``(k, obs_dim)`` (single frames) or ``(k, L, obs_dim)`` segments
        (the segment's summed reward is compared).
        """
        keep = labels != CANT_TELL
        obs_a, obs_b, labels = obs_a[keep], obs_b[keep], labels[keep]
        k = len(labels)
        if k == 0:
            raise ValueError("RewardEnsemble.fit: every pair was 'can't tell'; nothing to learn from.")
        opt = torch.optim.Adam(self.parameters(), lr=lr)
        boots = [torch.randint(k, (k,), generator=gen) for _ in self.members]
        last = 0.0
        for _ in range(steps):
            loss = obs_a.new_zeros(())
            for member, boot in zip(self.members, boots, strict=True):
                idx = boot[torch.randint(k, (min(batch_size, k),), generator=gen)]
                r_a = member(obs_a[idx]).squeeze(-1)
                r_b = member(obs_b[idx]).squeeze(-1)
                if r_a.ndim == 2:
                    r_a, r_b = r_a.sum(-1), r_b.sum(-1)
                loss = loss + bradley_terry_loss(r_a, r_b, labels[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            last = loss.item() / len(self.members)
        return last

    @torch.no_grad()
    def relabel_replay(self, replay: Any) -> None:
        """PEBBLE-style: overwrite every stored reward with the ensemble's reward of the next observation."""
        n = replay.size
        flat = replay.next_obs[:n].reshape(-1, replay.obs_dim)
        replay.reward[:n] = self(flat).reshape(n, replay.num_worlds)


def label_accuracy(labels: torch.Tensor, truth: torch.Tensor) -> dict[str, float]:
    """Agreement of ``labels`` with ground-truth ``truth`` on pairs both answered, and the answered fraction."""
    both = (labels != CANT_TELL) & (truth != CANT_TELL)
    return {"accuracy": float((labels[both] == truth[both]).float().mean()) if bool(both.any()) else float("nan"),
            "answered": float((labels != CANT_TELL).float().mean())}
