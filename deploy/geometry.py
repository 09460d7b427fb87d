"""Geometry of the deploy side: quaternions (w, x, y, z), the route projection and laser-scan sampling.

The numpy twins of the task code the policy was trained with (``robotrl.tasks.driving.route`` for
``Route``), for ``observation.build_observation``, the sim robot and the twin's recorder. A leaf module
(numpy only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def quat_rotate_inverse_wxyz(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate world vector ``v`` (3,) into the frame of unit quaternion ``q`` (w, x, y, z).

    Same convention and name as ``robotrl.rotations.quat_rotate_inverse_wxyz`` (MuJoCo's
    order). ROS messages carry (x, y, z, w); ``wxyz_from_ros`` converts at the boundary.
    """
    w, x, y, z = (float(c) for c in q_wxyz)
    vx, vy, vz = (float(c) for c in v)
    a = 2.0 * w * w - 1.0
    dot2 = 2.0 * (x * vx + y * vy + z * vz)
    cx, cy, cz = y * vz - z * vy, z * vx - x * vz, x * vy - y * vx  # u x v
    return np.array([vx * a - cx * 2.0 * w + x * dot2, vy * a - cy * 2.0 * w + y * dot2,
                     vz * a - cz * 2.0 * w + z * dot2])


def wxyz_from_ros(q: Any) -> np.ndarray:
    """``(4,)`` (w, x, y, z) from a ROS ``geometry_msgs/Quaternion`` (fields x, y, z, w)."""
    return np.array([q.w, q.x, q.y, q.z], dtype=np.float64)


def wrap_angle(x: float) -> float:
    """Angle wrapped to ``[-pi, pi)`` (as ``robotrl.tasks.driving.route.wrap_angle``)."""
    return (x + math.pi) % (2 * math.pi) - math.pi


def yaw_from_wxyz(q: np.ndarray) -> float:
    """Heading about world z of quaternion ``q`` (w, x, y, z)."""
    w, x, y, z = (float(c) for c in q)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


class Route:
    """A closed route (road centreline) and the car's projection onto it.

    The numpy twin of ``robotrl.tasks.driving.route.TrackBank`` for one track: the nearest
    centreline point is searched in a window (``-8 .. +24`` points) around the previous one,
    so the projection cannot jump to a nearby stretch of road further along; the first
    projection, or one whose nearest point is more than two half-widths away, searches every point.

    Args:
        center: ``(M, 2)`` centreline points, evenly spaced in arc length, in the odometry frame.
        heading: ``(M,)`` driving direction at each point (rad).
        half_width: ``(M,)`` road half-width at each point (m).

    Attributes:
        length: lap length (closed polyline), m. spacing: ``length / M``. idx: last nearest index.

    Raises:
        ValueError: for fewer than 3 points, non-finite values or a half-width <= 0.

    """

    WINDOW = (-8, 24)

    def __init__(self, center: np.ndarray, heading: np.ndarray, half_width: np.ndarray) -> None:
        center = np.asarray(center, dtype=np.float64).reshape(-1, 2)
        heading = np.asarray(heading, dtype=np.float64).reshape(-1)
        half_width = np.asarray(half_width, dtype=np.float64).reshape(-1)
        if len(center) < 3 or len(heading) != len(center) or len(half_width) != len(center):
            raise ValueError(f"a route needs >= 3 points with one heading and half-width each; got {len(center)}.")
        if not finite(center, heading, half_width) or np.any(half_width <= 0):
            raise ValueError("a route needs finite points and headings and half-widths > 0.")
        self.center, self.heading, self.half_width = center, heading, half_width
        self.tangent = np.stack([np.cos(heading), np.sin(heading)], axis=1)
        self.normal = np.stack([-self.tangent[:, 1], self.tangent[:, 0]], axis=1)
        chords = np.linalg.norm(np.diff(np.vstack([center, center[:1]]), axis=0), axis=1)
        self.length = float(chords.sum())
        self.m = len(center)
        self.spacing = self.length / self.m
        self.s = np.arange(self.m) * self.spacing
        self.idx: int | None = None

    @classmethod
    def from_path(cls, msg: Any) -> Route:
        """From a ``nav_msgs/Path``: position x, y = centre, yaw = heading, position.z = half-width."""
        poses = [p.pose for p in msg.poses]
        center = np.array([[p.position.x, p.position.y] for p in poses], dtype=np.float64).reshape(-1, 2)
        heading = np.array([yaw_from_wxyz(wxyz_from_ros(p.orientation)) for p in poses])
        return cls(center, heading, np.array([p.position.z for p in poses], dtype=np.float64))

    def project(self, pos: np.ndarray) -> tuple[float, float, float, float]:
        """``(s, lateral, heading, half_width)`` of position ``pos`` ``(2,)``; updates ``idx``."""
        pos = np.asarray(pos, dtype=np.float64)[:2]
        best = self._nearest(pos, self.idx)
        if self.idx is not None and float(np.linalg.norm(pos - self.center[best])) > 2 * self.half_width[best]:
            best = self._nearest(pos, None)  # lost (or relocated): search the whole route
        self.idx = best
        rel = pos - self.center[best]
        along = float(np.clip(rel @ self.tangent[best], -self.spacing, self.spacing))
        s = (self.s[best] + along) % self.length
        return s, float(rel @ self.normal[best]), float(self.heading[best]), float(self.half_width[best])

    def _nearest(self, pos: np.ndarray, idx: int | None) -> int:
        if idx is None:
            cand = np.arange(self.m)
        else:
            cand = (idx + np.arange(self.WINDOW[0], self.WINDOW[1] + 1)) % self.m
        d2 = ((self.center[cand] - pos) ** 2).sum(1)
        return int(cand[int(np.argmin(d2))])

    def point_at(self, s: np.ndarray) -> np.ndarray:
        """Centreline points ``(K, 2)`` at arc lengths ``s`` ``(K,)`` (linear between points, wrapping)."""
        u = np.remainder(s, self.length) / self.spacing
        i0 = np.clip(np.floor(u).astype(np.int64), 0, self.m - 1)
        i1 = (i0 + 1) % self.m
        frac = (u - i0)[:, None]
        return (1 - frac) * self.center[i0] + frac * self.center[i1]


def scan_at(msg: Any, angles: np.ndarray, max_range: float) -> np.ndarray:
    """Ranges ``(R,)`` of LaserScan ``msg`` at ``angles`` (nearest beam), clipped to ``max_range``.

    REP 117: ``+inf``, NaN, and readings outside ``[range_min, range_max]`` are no return (read
    ``max_range``); ``-inf`` is an object too close to measure (reads 0).
    """
    ranges = np.asarray(msg.ranges, dtype=np.float64)
    if len(ranges) == 1 or msg.angle_increment == 0:
        idx = np.zeros(len(angles), dtype=np.int64)
    else:
        idx = np.clip(np.rint((angles - msg.angle_min) / msg.angle_increment), 0, len(ranges) - 1).astype(np.int64)
    r = ranges[idx]
    out = np.where(np.isneginf(r), 0.0, r)
    miss = ~np.isfinite(out) | (out > msg.range_max) | ((out < msg.range_min) & ~np.isneginf(r))
    return np.minimum(np.where(miss, max_range, out), max_range)


def finite(*values: Any) -> bool:
    """Whether every number in ``values`` (arrays or sequences) is finite."""
    return all(all(map(math.isfinite, np.ravel(v).tolist() if isinstance(v, np.ndarray) else v)) for v in values)
