"""Pure functions of the driving task: CaRL penalty factors and collision geometry.

Every function takes batched tensors with the world as the first dimension and has no
state, so each can be tested on hand-made numbers.
"""

from __future__ import annotations

import torch


def ramp_factor(x: torch.Tensor, start: float, end: float, floor: float) -> torch.Tensor:
    """1 for ``x <= start``, ``floor`` for ``x >= end``, linear in between."""
    t = ((x - start) / max(end - start, 1e-9)).clamp(0.0, 1.0)
    return 1.0 - (1.0 - floor) * t


def carl_factors(
    lateral: torch.Tensor,
    half_width: torch.Tensor,
    lat_acc: torch.Tensor,
    ttc: torch.Tensor,
    speed: torch.Tensor,
    *,
    lane_penalty: float,
    comfort_lat_acc: float,
    comfort_penalty: float,
    ttc_min: float,
    ttc_penalty: float,
    min_speed: float,
    min_speed_penalty: float,
) -> dict[str, torch.Tensor]:
    """CaRL's soft penalty factors in ``[0, 1]``, each ``(N,)``.

    * ``lane``: 1 on the centreline, ``lane_penalty`` at the road edge (linear in
      ``|lateral| / half_width``).
    * ``comfort``: 1 up to ``comfort_lat_acc``, ``comfort_penalty`` from twice that.
    * ``ttc``: ``ttc_penalty`` while the time to collision is below ``ttc_min``.
    * ``speed``: ``min_speed_penalty`` at standstill, 1 from ``min_speed`` up.
    """
    lane = 1.0 - (1.0 - lane_penalty) * (lateral.abs() / half_width).clamp(0.0, 1.0)
    comfort = ramp_factor(lat_acc.abs(), comfort_lat_acc, 2 * comfort_lat_acc, comfort_penalty)
    ttc_f = torch.where(ttc < ttc_min, torch.full_like(ttc, ttc_penalty), torch.ones_like(ttc))
    speed_f = min_speed_penalty + (1.0 - min_speed_penalty) * (speed / max(min_speed, 1e-9)).clamp(0.0, 1.0)
    return {"lane": lane, "comfort": comfort, "ttc": ttc_f, "speed": speed_f}


def time_to_collision(front_distance: torch.Tensor, speed: torch.Tensor, gap: float) -> torch.Tensor:
    """Seconds until the car covers ``front_distance - gap`` at forward ``speed`` (``inf`` if not closing)."""
    closing = speed > 1e-3
    ttc = (front_distance - gap).clamp(min=0.0) / speed.clamp(min=1e-3)
    return torch.where(closing, ttc, torch.full_like(ttc, float("inf")))


def point_segment_distance(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Distance ``(...)`` from points ``p`` to segments ``a``-``b``; all ``(..., 2)``, broadcast."""
    ab = b - a
    t = ((p - a) * ab).sum(-1) / ab.square().sum(-1).clamp(min=1e-12)
    closest = a + t.clamp(0.0, 1.0).unsqueeze(-1) * ab
    return (p - closest).norm(dim=-1)


def segment_segment_distance(a0: torch.Tensor, a1: torch.Tensor, b0: torch.Tensor, b1: torch.Tensor) -> torch.Tensor:
    """Distance ``(...)`` between 2-D segments ``a0``-``a1`` and ``b0``-``b1`` (``(..., 2)``, broadcast).

    For segments that do not cross, the minimum is attained at an end point of one of them. The
    four end-point distances and the four orientation tests each run as one batched call (rows
    stacked on a new leading dim): a third of the ops of calling them one by one, same values.
    """
    a0, a1, b0, b1 = torch.broadcast_tensors(a0, a1, b0, b1)
    ends, starts, stops = torch.stack([a0, a1, b0, b1]), torch.stack([b0, b0, a0, a0]), torch.stack([b1, b1, a1, a1])
    d = point_segment_distance(ends, starts, stops).amin(0)
    # orientation of each end point against the other segment: rows (a0a1, b0), (a0a1, b1), (b0b1, a0), (b0b1, a1)
    p, q, r = torch.stack([a0, a0, b0, b0]), torch.stack([a1, a1, b1, b1]), torch.stack([b0, b1, a0, a1])
    o = (q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1]) - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0])
    crossing = (o[0] * o[1] < 0) & (o[2] * o[3] < 0)
    return torch.where(crossing, torch.zeros_like(d), d)


def heading_segment(pos: torch.Tensor, yaw: torch.Tensor, half_length: float) -> tuple[torch.Tensor, torch.Tensor]:
    """End points ``(..., 2)`` of the segment of half-length ``half_length`` at ``pos`` along ``yaw``."""
    axis = torch.stack([torch.cos(yaw), torch.sin(yaw)], dim=-1) * half_length
    return pos - axis, pos + axis
