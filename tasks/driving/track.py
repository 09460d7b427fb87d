"""Seeded procedural tracks: closed spline roads with lane boundaries and route checkpoints.

A track is a periodic cubic spline through ``K`` control points placed at jittered angles
around the origin with random radii, resampled to ``TRACK_POINTS`` points evenly spaced
in arc length. A candidate is kept only if its geometry is valid (see ``validate``):

* the turn radius never drops below ``min_turn_radius`` (so the inner lane boundary never
  folds over itself and the car, whose minimum turn radius is about 0.75 m, can follow it);
* no two stretches of road that are far apart along the route come within
  ``2 * half_width + gap`` of each other (the road never overlaps itself);
* every lane-boundary point is ``half_width`` from its nearest centreline point (the road
  does not fold or overlap), and neither lane boundary self-intersects.

Tracks are generated from integer seeds only, so the same seed gives the same track on any
machine. Training tracks use seeds ``0, 1, ...`` and held-out tracks
``HELDOUT_SEED_OFFSET + 0, 1, ...``: the two sets never share a seed.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np
from robotrl.tasks.driving import constants as C
from scipy.interpolate import CubicSpline
from scipy.spatial import cKDTree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackParams:
    """Distribution of tracks.

    Attributes:
        radius: range of control-point distances from the track centre, m.
        half_width: range of the road half-width (centreline to boundary), m.
        control_points: range (inclusive) of the number of spline control points.
        min_turn_radius: smallest allowed centreline turn radius, m.
        gap: smallest clearance between two non-adjacent stretches of road, m.
        num_checkpoints: route checkpoints per lap, evenly spaced in arc length.

    """

    radius: tuple[float, float] = (5.0, 9.0)
    half_width: tuple[float, float] = (0.8, 1.0)
    control_points: tuple[int, int] = (8, 12)
    min_turn_radius: float = 1.5
    gap: float = 1.0
    num_checkpoints: int = 16


@dataclass(frozen=True)
class Track:
    """One closed track; arrays are float64, ``M = TRACK_POINTS``.

    Attributes:
        seed: the seed it was generated from.
        center: ``(M, 2)`` centreline points, evenly spaced in arc length, counter-clockwise.
        tangent: ``(M, 2)`` unit driving direction at each point.
        normal: ``(M, 2)`` unit left normal (tangent rotated by +90 degrees).
        s: ``(M,)`` arc length of each point from point 0, m.
        length: lap length, m (``s[-1] + spacing``: the route is closed).
        half_width: road half-width, m.
        curvature: ``(M,)`` signed curvature, 1/m (positive turning left).
        checkpoints: ``(num_checkpoints,)`` indices into ``center`` of the route checkpoints.

    """

    seed: int
    center: np.ndarray
    tangent: np.ndarray
    normal: np.ndarray
    s: np.ndarray
    length: float
    half_width: float
    curvature: np.ndarray
    checkpoints: np.ndarray

    @property
    def spacing(self) -> float:
        """Arc length between consecutive centreline points, m."""
        return self.length / len(self.center)

    def boundaries(self) -> tuple[np.ndarray, np.ndarray]:
        """Left and right lane boundaries, ``(M, 2)`` each."""
        offset = self.half_width * self.normal
        return self.center + offset, self.center - offset


def _spline_candidate(rng: np.random.Generator, params: TrackParams, num_points: int) -> Track:
    k = int(rng.integers(params.control_points[0], params.control_points[1] + 1))
    angles = 2 * np.pi * (np.arange(k) + rng.uniform(-0.3, 0.3, k)) / k
    radii = rng.uniform(*params.radius, k)
    pts = np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1)
    closed = np.vstack([pts, pts[:1]])
    chord = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(closed, axis=0), axis=1))])
    spline = CubicSpline(chord, closed, bc_type="periodic")
    u = np.linspace(0.0, chord[-1], 16 * num_points, endpoint=False)
    dense = spline(u)
    seg = np.linalg.norm(np.diff(np.vstack([dense, dense[:1]]), axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(seg)])
    length = float(arc[-1])
    s = np.linspace(0.0, length, num_points, endpoint=False)
    u_even = np.interp(s, arc, np.append(u, chord[-1]))
    center, d1, d2 = spline(u_even), spline(u_even, 1), spline(u_even, 2)
    speed = np.linalg.norm(d1, axis=1)
    tangent = d1 / speed[:, None]
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
    curvature = (d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0]) / speed**3
    half_width = float(rng.uniform(*params.half_width))
    checkpoints = (np.arange(params.num_checkpoints) * num_points) // params.num_checkpoints
    return Track(0, center, tangent, normal, s, length, half_width, curvature, checkpoints)


def segments_intersect(poly: np.ndarray, min_index_gap: int = 2) -> bool:
    """Whether the closed polyline ``poly`` ``(M, 2)`` crosses itself.

    Segments ``i`` and ``j`` are tested when they are at least ``min_index_gap`` apart
    around the loop (neighbours share an end point and are skipped). Only pairs whose
    midpoints are within one longest segment of each other can cross; a k-d tree finds them.
    """
    a, b = poly, np.roll(poly, -1, axis=0)
    m = len(poly)
    longest = float(np.linalg.norm(b - a, axis=1).max())
    pairs = cKDTree(0.5 * (a + b)).query_pairs(longest * (1 + 1e-9), output_type="ndarray")
    if len(pairs) == 0:
        return False
    i, j = pairs[:, 0], pairs[:, 1]
    gap = np.abs(i - j)
    keep = np.minimum(gap, m - gap) >= min_index_gap
    i, j = i[keep], j[keep]

    def orient(p: np.ndarray, q: np.ndarray, r: np.ndarray) -> np.ndarray:
        return (q[:, 0] - p[:, 0]) * (r[:, 1] - p[:, 1]) - (q[:, 1] - p[:, 1]) * (r[:, 0] - p[:, 0])

    d1, d2 = orient(a[i], b[i], a[j]), orient(a[i], b[i], b[j])
    d3, d4 = orient(a[j], b[j], a[i]), orient(a[j], b[j], b[i])
    return bool(((d1 * d2 < 0) & (d3 * d4 < 0)).any())


def validate(track: Track, params: TrackParams) -> list[str]:
    """Reasons why ``track`` is invalid under ``params``; empty when it is valid."""
    problems = []
    min_radius = 1.0 / max(np.abs(track.curvature).max(), 1e-9)
    if min_radius < params.min_turn_radius:
        return [f"turn radius {min_radius:.2f} m < {params.min_turn_radius} m"]
    clearance = 2 * track.half_width + params.gap
    # points further apart along the road than half a circle of the clearance radius must stay apart
    pairs = cKDTree(track.center).query_pairs(clearance, output_type="ndarray")
    if len(pairs):
        ds = np.abs(track.s[pairs[:, 0]] - track.s[pairs[:, 1]])
        far = np.minimum(ds, track.length - ds) > np.pi * clearance
        if far.any():
            d = np.linalg.norm(track.center[pairs[far, 0]] - track.center[pairs[far, 1]], axis=1).min()
            problems.append(f"road overlaps itself (closest far pair {d:.2f} m < {clearance:.2f} m)")
    for side, poly in zip(("left", "right"), track.boundaries(), strict=True):
        nearest, _ = cKDTree(track.center).query(poly)
        if nearest.min() < 0.99 * track.half_width:
            problems.append(f"{side} boundary within {nearest.min():.2f} m of the centreline (road overlaps)")
        if segments_intersect(poly):
            problems.append(f"{side} boundary self-intersects")
    return problems


@functools.lru_cache(maxsize=4096)
def generate_track(seed: int, params: TrackParams = TrackParams(), num_points: int = C.TRACK_POINTS) -> Track:
    """The valid track of ``seed`` (deterministic; candidates are drawn until one is valid).

    Raises:
        RuntimeError: no valid candidate in 200 draws; widen ``params.radius`` or lower
            ``params.min_turn_radius`` / ``params.half_width``.

    """
    rng = np.random.default_rng(seed)
    problems: list[str] = []
    for _ in range(200):
        cand = _spline_candidate(rng, params, num_points)
        problems = validate(cand, params)
        if not problems:
            return Track(
                seed,
                cand.center,
                cand.tangent,
                cand.normal,
                cand.s,
                cand.length,
                cand.half_width,
                cand.curvature,
                cand.checkpoints,
            )
    raise RuntimeError(
        f"No valid track for seed {seed} with {params} in 200 draws (last: {problems}). "
        "Widen task.track_radius or lower task.min_turn_radius / task.half_width."
    )


def track_set(split: str, count: int, params: TrackParams = TrackParams()) -> list[Track]:
    """``count`` tracks of split ``train`` (seeds ``0..count-1``) or ``heldout``.

    Raises:
        ValueError: unknown split name.

    """
    if split not in ("train", "heldout"):
        raise ValueError(f"task.split must be 'train' or 'heldout', got {split!r}.")
    offset = 0 if split == "train" else C.HELDOUT_SEED_OFFSET
    return [generate_track(offset + i, params) for i in range(count)]
