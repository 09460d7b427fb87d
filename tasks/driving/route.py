"""Batched route tracking on a bank of tracks: projection, progress and look-ahead samples.

All tensors are float32 on the task's device. ``T`` tracks of ``M`` points each; ``N``
worlds, each driving track ``track_id[n]``. Each world keeps the index of its nearest
centreline point and searches only a window around it, so a projection costs ``O(W)`` per
world and can never jump to a nearby stretch of road further along the route.
"""

from __future__ import annotations

import math

import torch
from robotrl.tasks.driving.track import Track


def wrap_angle(x: torch.Tensor) -> torch.Tensor:
    """Angles wrapped to ``[-pi, pi)``."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


def _take(table: torch.Tensor, track_id: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[track_id, idx]`` for a ``(T, M, ...)`` table; index shapes broadcast.

    Written as one ``index_select`` on the flattened table: multi-dimensional advanced
    indexing is about 100x slower on a CPU shared between threads.
    """
    t, m = table.shape[:2]
    lin = track_id * m + idx
    out = table.reshape(t * m, *table.shape[2:]).index_select(0, lin.reshape(-1))
    return out.reshape(*lin.shape, *table.shape[2:])


class TrackBank:
    """A set of tracks stacked into tensors.

    Attributes:
        tracks: the numpy tracks, in order.
        center, tangent, normal: ``(T, M, 2)``.
        s: ``(T, M)`` arc length of each point.
        length, half_width, spacing: ``(T,)``.

    """

    def __init__(self, tracks: list[Track], device: torch.device) -> None:
        if not tracks:
            raise ValueError("TrackBank needs at least one track; set task.num_tracks >= 1.")
        self.tracks = tracks

        def stack(name: str) -> torch.Tensor:
            return torch.stack([torch.as_tensor(getattr(t, name), dtype=torch.float32) for t in tracks]).to(device)

        self.center, self.tangent, self.normal, self.s = (stack(n) for n in ("center", "tangent", "normal", "s"))
        self.length = torch.tensor([t.length for t in tracks], dtype=torch.float32, device=device)
        self.half_width = torch.tensor([t.half_width for t in tracks], dtype=torch.float32, device=device)
        self.num_points = self.center.shape[1]
        self.spacing = self.length / self.num_points
        self.heading = torch.atan2(self.tangent[..., 1], self.tangent[..., 0])

    def project(
        self,
        track_id: torch.Tensor,
        pos: torch.Tensor,
        idx: torch.Tensor | None = None,
        window: tuple[int, int] = (-8, 24),
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Nearest centreline point of ``pos`` ``(N, 2)`` on tracks ``track_id`` ``(N,)``.

        Args:
            track_id: ``(N,)`` int64 track of each world.
            pos: ``(N, 2)`` positions.
            idx: ``(N,)`` previous nearest indices; ``None`` searches the whole track.
            window: index offsets searched around ``idx``.

        Returns:
            ``(idx, s, lateral, heading)``, each ``(N,)``: new nearest index, arc length of
            the projection in ``[0, length)``, signed lateral offset (positive left of the
            driving direction) and the track heading there.

        """
        m = self.num_points
        if idx is None:
            cand = torch.arange(m, device=pos.device).expand(pos.shape[0], m)
        else:
            offs = torch.arange(window[0], window[1] + 1, device=pos.device)
            cand = torch.remainder(idx[:, None] + offs[None, :], m)
        tid = track_id[:, None].expand_as(cand)
        d2 = (_take(self.center, tid, cand) - pos[:, None, :]).square().sum(-1)
        best = cand.gather(1, d2.argmin(1, keepdim=True)).squeeze(1)
        rel = pos - _take(self.center, track_id, best)
        tangent, normal = _take(self.tangent, track_id, best), _take(self.normal, track_id, best)
        ds = self.spacing[track_id]
        along = (rel * tangent).sum(-1).clamp(-ds, ds)
        s = torch.remainder(_take(self.s, track_id, best) + along, self.length[track_id])
        lateral = (rel * normal).sum(-1)
        return best, s, lateral, _take(self.heading, track_id, best)

    def at_index(self, track_id: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Centre ``(..., 2)``, left normal ``(..., 2)`` and heading ``(...)`` of point ``idx``."""
        return (
            _take(self.center, track_id, idx),
            _take(self.normal, track_id, idx),
            _take(self.heading, track_id, idx),
        )

    def boundary_chords(self, track_id: torch.Tensor, segments: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Midpoints and vectors ``(k, 2 * segments, 2)`` of chords along the left, then right, boundary.

        Each boundary of tracks ``track_id`` ``(k,)`` is cut into ``segments`` chords between
        evenly spaced boundary points.
        """
        k, m = track_id.numel(), self.num_points
        i0 = (torch.arange(segments, device=track_id.device) * m) // segments
        i1 = torch.remainder(i0 + m // segments, m)
        tid = track_id[:, None].expand(k, segments)
        c0, n0 = _take(self.center, tid, i0.expand(k, -1)), _take(self.normal, tid, i0.expand(k, -1))
        c1, n1 = _take(self.center, tid, i1.expand(k, -1)), _take(self.normal, tid, i1.expand(k, -1))
        hw = self.half_width[track_id][:, None, None]
        ends = [(c0 + sign * hw * n0, c1 + sign * hw * n1) for sign in (1.0, -1.0)]
        mid = torch.cat([0.5 * (p0 + p1) for p0, p1 in ends], 1)
        return mid, torch.cat([p1 - p0 for p0, p1 in ends], 1)

    def point_at(self, track_id: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Centreline position ``(..., 2)`` and heading ``(...)`` at arc length ``s``.

        ``track_id`` broadcasts against ``s`` (for example ``(N, 1)`` with ``(N, K)``).
        Positions are interpolated linearly between points; ``s`` wraps around the lap.
        """
        track_id = track_id.expand_as(s).contiguous()
        m = self.num_points
        length = self.length[track_id]
        u = torch.remainder(s, length) / self.spacing[track_id]
        i0 = u.floor().long().clamp(0, m - 1)
        i1 = torch.remainder(i0 + 1, m)
        frac = (u - i0.float()).unsqueeze(-1)
        p = (1 - frac) * _take(self.center, track_id, i0) + frac * _take(self.center, track_id, i1)
        t = (1 - frac) * _take(self.tangent, track_id, i0) + frac * _take(self.tangent, track_id, i1)
        return p, torch.atan2(t[..., 1], t[..., 0])


def progress_delta(s_new: torch.Tensor, s_old: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """Signed arc-length travelled between two projections, unwrapped across the lap start."""
    return torch.remainder(s_new - s_old + 0.5 * length, length) - 0.5 * length
