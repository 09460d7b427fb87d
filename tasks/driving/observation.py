"""What the car senses: horizontal range rays against obstacles and traffic, and the route ahead.

Batched functions of the sim state; the task assembles them into its ``policy`` observation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.route import TrackBank
from robotrl.tasks.driving.scene import RAY_HEIGHT

from robotrl.rotations import yaw_from_quat

if TYPE_CHECKING:
    from robotrl.sim.backend import BatchSim

FRONT_HALF_ANGLE_DEG = 15.0
"""Rays within this angle of straight ahead give the distance used for time-to-collision."""


def ray_angles(fov_deg: float, num_rays: int, device: torch.device) -> torch.Tensor:
    """``(R,)`` ray directions relative to the car's heading, evenly over ``fov_deg`` (one ray: straight ahead)."""
    half = 0.5 * math.radians(fov_deg)
    return torch.linspace(-half, half, num_rays, device=device) if num_rays > 1 else torch.zeros(1, device=device)


def front_rays(angles: torch.Tensor) -> tuple[int, int]:
    """Index range ``[start, stop)`` of the rays within ``FRONT_HALF_ANGLE_DEG`` of straight ahead (all if none)."""
    front = (angles.abs() <= math.radians(FRONT_HALF_ANGLE_DEG) + 1e-6).nonzero().squeeze(1)
    return (int(front.min()), int(front.max()) + 1) if front.numel() else (0, angles.numel())


def cast_rays(sim: BatchSim, qpos: torch.Tensor, angles: torch.Tensor, ray_range: float) -> torch.Tensor:
    """``(N, R)`` distances along rays from the car centre at ``RAY_HEIGHT`` to geoms of ``RAY_GROUP``.

    ``qpos`` ``(N, nq)`` starts with the car's free joint; a miss, or a hit farther than
    ``ray_range``, reads ``ray_range``.
    """
    yaw = yaw_from_quat(qpos[:, 3:7].float())[:, None] + angles[None, :]
    vec = torch.stack([torch.cos(yaw), torch.sin(yaw), torch.zeros_like(yaw)], dim=-1)
    pnt = qpos[:, None, :3].float().expand(-1, angles.numel(), -1).clone()
    pnt[..., 2] = RAY_HEIGHT
    group = [0] * 6
    group[C.RAY_GROUP] = 1
    dist = sim.ray(pnt, vec, geomgroup=group).float().to(angles.device)
    return torch.where(dist < 0, torch.full_like(dist, ray_range), dist.clamp(max=ray_range))


def route_ahead(
    bank: TrackBank, track_id: torch.Tensor, s: torch.Tensor, qpos: torch.Tensor, spacing: float, samples: int
) -> torch.Tensor:
    """``(N, samples, 2)`` centreline points every ``spacing`` m ahead of arc length ``s`` ``(N,)``, car frame."""
    ahead_s = s[:, None] + spacing * torch.arange(1, samples + 1, device=s.device)
    pts, _ = bank.point_at(track_id[:, None], ahead_s)
    rel = pts - qpos[:, None, :2].float()
    yaw = yaw_from_quat(qpos[:, 3:7].float())[:, None]
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    return torch.stack([cos * rel[..., 0] + sin * rel[..., 1], -sin * rel[..., 0] + cos * rel[..., 1]], -1)
