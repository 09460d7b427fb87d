"""Per-world surroundings of the car: obstacles, scripted traffic, kerbs, and collisions with them.

Pure functions on batched tensors; random placements draw from the ``gen`` they are handed
(the env's generator). Positions along a track are given as arc length ``s`` plus a signed
lateral offset (left of the driving direction is positive).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.rewards import heading_segment, point_segment_distance, segment_segment_distance
from robotrl.tasks.driving.route import TrackBank
from robotrl.tasks.driving.scene import CURB_HALF, PARK, TRAFFIC_HALF_LENGTH, TRAFFIC_RADIUS

from robotrl.rotations import sample_range, uniform

# yielding traffic (``traffic_yields``): a vehicle brakes for the car when their lateral offsets are
# closer than YIELD_LANE; it stops YIELD_STOP_GAP (centre to centre, about 0.15 m bumper to bumper)
# behind the car and closes the rest of the gap no faster than in YIELD_HEADWAY seconds
YIELD_LANE = TRAFFIC_RADIUS + C.COLLISION_RADIUS + 0.1
YIELD_STOP_GAP = 0.5 * C.CAR_LENGTH + TRAFFIC_HALF_LENGTH + TRAFFIC_RADIUS + 0.15
YIELD_HEADWAY = 1.0


def along_route(
    bank: TrackBank, track_id: torch.Tensor, s: torch.Tensor, offset: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """World ``xy`` ``(k, m, 2)`` and heading ``(k, m)`` of points at arc length ``s`` ``(k, m)``.

    ``track_id`` is ``(k, 1)``; ``offset`` ``(k, m)`` is the lateral offset from the centreline, m.
    """
    centre, heading = bank.point_at(track_id, s)
    normal = torch.stack([-torch.sin(heading), torch.cos(heading)], dim=-1)
    return centre + offset[..., None] * normal, heading


def place_obstacles(
    bank: TrackBank, tid: torch.Tensor, s0: torch.Tensor, num: int, gen: torch.Generator
) -> torch.Tensor:
    """``(k, num, 2)`` obstacle positions spread along the lap ahead of the starts ``s0`` ``(k,)``.

    Obstacle ``i`` sits in the ``i``-th of ``num`` equal slots of the lap (from 6 m ahead of the
    start to 4 m behind it), on a random side, up to 0.6 half-widths off the centreline.
    """
    k, dev = tid.numel(), s0.device
    length, hw = bank.length[tid][:, None], bank.half_width[tid][:, None]
    slot = (torch.arange(num, device=dev) + uniform(0.2, 0.8, (k, num), gen, dev)) / num
    s_obs = s0[:, None] + 6.0 + slot * (length - 10.0)
    side = torch.where(torch.rand(k, num, generator=gen, device=dev) < 0.5, -1.0, 1.0)
    lat = side * uniform(0.0, 0.6, (k, num), gen, dev) * hw
    return along_route(bank, tid[:, None], s_obs, lat)[0]


def place_traffic(
    bank: TrackBank, tid: torch.Tensor, s0: torch.Tensor, num: int, speed: Sequence[float], gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Arc length, lateral offset and speed (m/s), each ``(k, num)``, of traffic ahead of the starts ``s0``.

    Vehicle ``i`` starts in the ``i``-th of ``num`` slots from 4 m ahead of the start to 4 m
    behind it, within 0.3 half-widths of the centreline, at a speed drawn from ``speed``.
    """
    k, dev = tid.numel(), s0.device
    length, hw = bank.length[tid][:, None], bank.half_width[tid][:, None]
    slot = (torch.arange(num, device=dev) + uniform(0.1, 0.6, (k, num), gen, dev)) / num
    s = s0[:, None] + 4.0 + slot * (length - 8.0)
    offset = uniform(-0.3, 0.3, (k, num), gen, dev) * hw
    return s, offset, sample_range(speed, (k, num), gen, dev)


def yield_speed(
    v: torch.Tensor,
    traffic_s: torch.Tensor,
    traffic_off: torch.Tensor,
    car_s: torch.Tensor,
    car_lateral: torch.Tensor,
    length: torch.Tensor,
) -> torch.Tensor:
    """``(N, T)`` speeds of traffic vehicles that brake for the car ahead of them in their lane.

    The gap ``g`` is the arc length from a vehicle forward to the car, modulo the lap ``length``
    ``(N,)``. A vehicle whose lateral offset ``traffic_off`` ``(N, T)`` is within ``YIELD_LANE`` of
    the car's ``car_lateral`` ``(N,)`` drives at ``min(v, max(0, (g - YIELD_STOP_GAP) / YIELD_HEADWAY))``;
    the others keep their speed ``v`` ``(N, T)``. Arc lengths ``traffic_s`` ``(N, T)`` and ``car_s``
    ``(N,)`` are in metres along the route.
    """
    gap = torch.remainder(car_s[:, None] - traffic_s, length[:, None])
    same_lane = (car_lateral[:, None] - traffic_off).abs() < YIELD_LANE
    limit = ((gap - YIELD_STOP_GAP) / YIELD_HEADWAY).clamp(min=0.0)
    return torch.where(same_lane, torch.minimum(v, limit), v)


def mocap_pose(
    xy: torch.Tensor, yaw: torch.Tensor | None, active: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Mocap ``pos`` ``(k, m, 3)`` and, given ``yaw`` ``(k, m)``, ``quat`` ``(k, m, 4)`` of bodies at ``xy``.

    Bodies of worlds not ``active`` ``(k,)`` are parked at ``PARK``, out of sight of the rays.
    """
    park = torch.tensor(PARK, dtype=dtype, device=xy.device)
    pos = torch.where(active[:, None, None], torch.cat([xy, torch.zeros_like(xy[..., :1])], dim=-1).to(dtype), park)
    if yaw is None:
        return pos, None
    half = 0.5 * yaw.to(dtype)
    zero = torch.zeros_like(half)
    return pos, torch.stack([torch.cos(half), zero, zero, torch.sin(half)], -1)


def curb_geoms(
    bank: TrackBank, tid: torch.Tensor, segments: int, base: dict[str, torch.Tensor], start: int
) -> dict[str, torch.Tensor]:
    """Per-world ``geom_pos``, ``geom_quat`` and ``geom_size`` ``(k, ngeom, .)`` with kerbs on the lane edges.

    ``base`` holds the model's fields ``(ngeom, .)``; the ``2 * segments`` kerb boxes are the
    geoms from ``start`` on, each spanning one chord of a lane boundary of track ``tid``.
    """
    k = tid.numel()
    mid, delta = bank.boundary_chords(tid, segments)
    yaw = torch.atan2(delta[..., 1], delta[..., 0])
    sl = slice(start, start + 2 * segments)
    pos = base["geom_pos"].expand(k, -1, -1).clone()
    pos[:, sl, :2] = mid.double()
    pos[:, sl, 2] = CURB_HALF[1]
    quat = base["geom_quat"].expand(k, -1, -1).clone()
    quat[:, sl] = 0.0
    quat[:, sl, 0] = torch.cos(0.5 * yaw).double()
    quat[:, sl, 3] = torch.sin(0.5 * yaw).double()
    size = base["geom_size"].expand(k, -1, -1).clone()
    size[:, sl, 0] = 0.5 * delta.norm(dim=-1).double() + 0.01
    return {"geom_pos": pos, "geom_quat": quat, "geom_size": size}


def car_contacts(
    pos: torch.Tensor,
    yaw: torch.Tensor,
    obstacle_xy: torch.Tensor,
    obstacle_r: torch.Tensor,
    traffic_xy: torch.Tensor,
    traffic_yaw: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which obstacles ``(N, O)`` and traffic vehicles ``(N, T)`` (bool) the car's capsule touches.

    The car is a capsule of radius ``COLLISION_RADIUS`` along its heading.

    Args:
        pos: ``(N, 2)`` car position.
        yaw: ``(N,)`` car heading.
        obstacle_xy: ``(N, O, 2)`` obstacle centres.
        obstacle_r: ``(O,)`` obstacle radii.
        traffic_xy: ``(N, T, 2)`` traffic vehicle centres.
        traffic_yaw: ``(N, T)`` traffic vehicle headings.

    """
    r = C.COLLISION_RADIUS
    a, b = heading_segment(pos, yaw, 0.5 * C.CAR_LENGTH - r)
    obstacles = torch.zeros(obstacle_xy.shape[:2], dtype=torch.bool, device=pos.device)
    traffic = torch.zeros(traffic_xy.shape[:2], dtype=torch.bool, device=pos.device)
    if obstacle_xy.shape[1]:
        obstacles = point_segment_distance(obstacle_xy, a[:, None], b[:, None]) < obstacle_r + r
    if traffic_xy.shape[1]:
        ta, tb = heading_segment(traffic_xy, traffic_yaw, TRAFFIC_HALF_LENGTH)
        traffic = segment_segment_distance(a[:, None], b[:, None], ta, tb) < TRAFFIC_RADIUS + r
    return obstacles, traffic


def rear_ends(
    pos: torch.Tensor, yaw: torch.Tensor, v_fwd: torch.Tensor, xy: torch.Tensor, heading: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """``(N, K)`` bool: vehicles behind the car and closing on it, so a contact is their running into it.

    Behind: the vehicle's centre ``xy`` ``(N, K, 2)`` lies behind the car's centre along the car's
    heading ``yaw`` ``(N,)``. Closing: its speed ``v`` ``(N, K)`` along its ``heading`` ``(N, K)``,
    projected on the car's heading, exceeds the car's forward speed ``v_fwd`` ``(N,)``.
    """
    axis = torch.stack([torch.cos(yaw), torch.sin(yaw)], dim=-1)
    behind = ((xy - pos[:, None]) * axis[:, None]).sum(-1) < 0.0
    return behind & (v * torch.cos(heading - yaw[:, None]) > v_fwd[:, None])
