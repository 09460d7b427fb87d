"""Pure functions of instruction following in the driving task: bands, their rewards, success.

Batched ``(N,)`` tensors in, ``(N,)`` tensors out, no state, so each can be checked on
hand-made numbers.
"""

from __future__ import annotations

import torch


def band_distance(x: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """How far ``x`` lies outside ``[low, high]`` (0 inside); all ``(N,)``."""
    return (low - x).clamp(min=0.0) + (x - high).clamp(min=0.0)


def band_reward(x: torch.Tensor, low: torch.Tensor, high: torch.Tensor, tolerance: float) -> torch.Tensor:
    """1 inside ``[low, high]``, falling linearly to 0 at ``tolerance`` outside it."""
    return (1.0 - band_distance(x, low, high) / max(tolerance, 1e-9)).clamp(min=0.0)


def side_offset(lateral: torch.Tensor, half_width: torch.Tensor, side_sign: torch.Tensor) -> torch.Tensor:
    """Lateral offset in half-widths towards the commanded side (``side_sign`` +1 left, -1 right)."""
    return side_sign * lateral / half_width


def following_success(
    followed: torch.Tensor, counted: torch.Tensor, infraction: torch.Tensor, fraction: float
) -> torch.Tensor:
    """``(N,)`` bool: at least one counted step, ``followed / counted >= fraction``, and no infraction.

    Args:
        followed: steps (after the settling time) in both the speed and the lane band.
        counted: steps after the settling time.
        infraction: a hard infraction (collision, off road, wrong way, rollover) happened.
        fraction: the required fraction of followed steps.

    """
    return (counted > 0) & (followed >= fraction * counted) & ~infraction
