"""Batched rotations (quaternions in MuJoCo's (w, x, y, z) order, named ``*_wxyz``) and range sampling on torch tensors.

All functions take ``(..., 4)`` quaternions and ``(..., 3)`` vectors and broadcast over
the leading dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def quat_rotate_wxyz(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` ``(..., 3)`` by unit quaternions ``q`` ``(..., 4)``."""
    return quat_rotate_parts_wxyz(q[..., :1], q[..., 1:], v)


def quat_rotate_parts_wxyz(w: torch.Tensor, xyz: torch.Tensor, v: torch.Tensor,
                           out: torch.Tensor | None = None) -> torch.Tensor:
    """``quat_rotate_wxyz`` of a quaternion given as its parts ``w`` ``(..., 1)`` and ``xyz`` ``(..., 3)``.

    For callers that slice a persistent quaternion buffer once; ``out`` (optional) receives the
    rotated vectors. The arithmetic is ``quat_rotate_wxyz``'s, so the results are the same bits.
    """
    t = 2.0 * torch.cross(xyz, v, dim=-1)
    return torch.add(v + w * t, torch.cross(xyz, t, dim=-1), out=out)


def quat_rotate_inverse_wxyz(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` ``(..., 3)`` by the inverse of unit quaternions ``q``."""
    return quat_rotate_wxyz(quat_conjugate(q), v)


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate (inverse for unit quaternions) of ``q`` ``(..., 4)``."""
    return torch.cat([q[..., :1], -q[..., 1:]], dim=-1)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a * b`` of ``(..., 4)`` quaternions."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def quat_from_axis_angle(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Quaternions ``(..., 4)`` for rotations of ``angle`` ``(...)`` about unit ``axis`` ``(..., 3)``."""
    half = 0.5 * angle.unsqueeze(-1)
    return torch.cat([torch.cos(half), axis * torch.sin(half)], dim=-1)


def quat_angle_between(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rotation angle in radians ``(...)`` between orientations ``a`` and ``b``."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def random_quat(n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """``(n, 4)`` uniformly distributed unit quaternions (Shoemake's method)."""
    u = torch.rand(n, 3, generator=gen, device=device)
    r1, r2 = torch.sqrt(1 - u[:, 0]), torch.sqrt(u[:, 0])
    t1, t2 = 2 * torch.pi * u[:, 1], 2 * torch.pi * u[:, 2]
    return torch.stack([r2 * torch.cos(t2), r1 * torch.sin(t1), r1 * torch.cos(t1), r2 * torch.sin(t2)], dim=-1)


def yaw_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Heading angle about world z ``(...)`` of orientations ``q`` ``(..., 4)``."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def sample_range(
    bounds: Sequence[float], shape: tuple[int, ...], gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    """Uniform samples in ``[bounds[0], bounds[1])`` (a ``[low, high]`` config range)."""
    if len(bounds) != 2 or bounds[0] > bounds[1]:
        raise ValueError(f"A range must be [low, high] with low <= high, got {list(bounds)}.")
    return uniform(float(bounds[0]), float(bounds[1]), shape, gen, device)


def uniform(
    low: float, high: float, shape: tuple[int, ...], gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    """Uniform samples in ``[low, high)`` of ``shape`` from ``gen``."""
    return low + (high - low) * torch.rand(shape, generator=gen, device=device)
