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


def critic_extras(
    car: dict[str, torch.Tensor],
    others: dict[str, torch.Tensor],
    active: torch.Tensor,
    scales: dict[str, float],
) -> torch.Tensor:
    """``(N, 3 + 3 + 3T + 2K)`` what only the critic sees (the policy sees none of it).

    Where the lap and the episode stand, the world's randomized dynamics, and the exact traffic
    and obstacle state that the rays only sample.

    Args:
        car: ``completion``, ``time_frac`` (``(N,)`` lap and episode fractions), ``dynamics`` ``(N, 3)``
            (tyre friction, chassis mass and motor strength multipliers), ``s``, ``lateral``,
            ``v_fwd``, ``yaw`` ``(N,)`` and ``pos`` ``(N, 2)`` (the car on its route and in the world),
            ``half_width`` and ``length`` ``(N,)`` (its track's).
        others: ``traffic_s``, ``traffic_off``, ``traffic_v`` ``(N, T)`` (route frame) and
            ``obstacle_xy`` ``(N, K, 2)`` (world frame).
        active: ``(N,)`` bool, obstacles and traffic on the road (zeros stand for them otherwise).
        scales: ``horizon`` (m, route distances), ``ray_range`` (m, obstacle offsets).

    Traffic: gap ahead along the route (wrapped to half a lap, over ``horizon``), lateral offset
    from the car (over the half-width) and speed relative to the car (over ``TOP_SPEED``).
    Obstacles: offset from the car in the car's frame, over ``ray_range``. Offsets are clipped to ``[-2, 2]``.

    """
    on = active.float()[:, None]
    length = car["length"][:, None]
    gap = torch.remainder(others["traffic_s"] - car["s"][:, None] + 0.5 * length, length) - 0.5 * length
    traffic = torch.cat(
        [
            (gap / scales["horizon"]).clamp(-2.0, 2.0),
            ((others["traffic_off"] - car["lateral"][:, None]) / car["half_width"][:, None]).clamp(-2.0, 2.0),
            (others["traffic_v"] - car["v_fwd"][:, None]) / C.TOP_SPEED,
        ],
        dim=1,
    )
    d = others["obstacle_xy"] - car["pos"][:, None, :]
    cos, sin = torch.cos(car["yaw"])[:, None], torch.sin(car["yaw"])[:, None]
    local = torch.stack([cos * d[..., 0] + sin * d[..., 1], cos * d[..., 1] - sin * d[..., 0]], dim=2)
    obstacles = (local / scales["ray_range"]).clamp(-2.0, 2.0).flatten(1)
    own = torch.stack([car["completion"], car["time_frac"], active.float()], dim=1)
    return torch.cat([own, car["dynamics"] - 1.0, traffic * on, obstacles * on], dim=1)
