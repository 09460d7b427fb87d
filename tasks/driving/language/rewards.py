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
    """A tent over the band: 1 at its centre, linear to 0 at ``tolerance`` outside either edge.

    Inside the band the reward still rises towards the centre, so a progress reward (which
    favours speed) does not push a policy onto the band's upper edge.
    """
    half = 0.5 * (high - low)
    return (1.0 - (x - 0.5 * (low + high)).abs() / (half + max(tolerance, 1e-9))).clamp(min=0.0)


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
