"""Eval artefacts of the driving task: a track plot (PNG) and a top-down video (MP4).

Both are drawn with matplotlib's Agg canvas from world 0's trace (``(T, ...)`` arrays
recorded by ``robotrl eval`` from ``DrivingTask.trace``), so they need no OpenGL.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import cast

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Polygon
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.route import TrackBank

log = logging.getLogger(__name__)


def episode_slices(trace: dict[str, np.ndarray]) -> list[slice]:
    """Index ranges of the episodes in a trace (a new episode starts where its clock drops)."""
    time = np.asarray(trace["time"]).reshape(-1)
    starts = [0, *(np.nonzero(np.diff(time) < 0)[0] + 1).tolist(), len(time)]
    return [slice(a, b) for a, b in zip(starts[:-1], starts[1:], strict=True) if b > a]


def _draw_track(ax: Axes, bank: TrackBank, track_id: int) -> None:
    track = bank.tracks[track_id]
    left, right = track.boundaries()
    road = np.vstack([left, left[:1], right[:1], right[::-1]])
    ax.add_patch(Polygon(road, closed=True, facecolor="0.85", edgecolor="none", zorder=0))
    for edge in (left, right):
        closed = np.vstack([edge, edge[:1]])
        ax.plot(closed[:, 0], closed[:, 1], color="0.2", lw=1.2, zorder=1)
    centre = np.vstack([track.center, track.center[:1]])
    ax.plot(centre[:, 0], centre[:, 1], color="0.5", lw=0.8, ls="--", zorder=1)
    cp = track.center[track.checkpoints]
    ax.scatter(cp[:, 0], cp[:, 1], s=10, color="tab:green", zorder=2, label="checkpoints")
    ax.set_aspect("equal")
    pad = track.half_width + 1.0
    ax.set_xlim(track.center[:, 0].min() - pad, track.center[:, 0].max() + pad)
    ax.set_ylim(track.center[:, 1].min() - pad, track.center[:, 1].max() + pad)


def _car_outline(x: float, y: float, yaw: float, length: float, width: float) -> np.ndarray:
    corners = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]], dtype=float) * [0.5 * length, 0.5 * width]
    rot = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
    return corners @ rot.T + [x, y]


def _obstacles(trace: dict[str, np.ndarray], t: int, radii: list[float]) -> list[Circle]:
    if not radii or "obstacles" not in trace or not trace["active"][t]:
        return []
    return [
        Circle(tuple(xy), r, color="tab:orange", zorder=3) for xy, r in zip(trace["obstacles"][t], radii, strict=True)
    ]


def plot_track(bank: TrackBank, trace: dict[str, np.ndarray], radii: list[float], out_dir: str) -> str:
    """``track.png``: the first episode's driven path, coloured by speed, over its track."""
    ep = episode_slices(trace)[0]
    track_id = int(trace["track_id"][ep.start])
    fig = Figure(figsize=(7, 7), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_track(ax, bank, track_id)
    for patch in _obstacles(trace, ep.start, radii):
        ax.add_patch(patch)
    xy, speed = trace["xy"][ep], trace["speed"][ep]
    if len(xy) > 1:
        segs = np.stack([xy[:-1], xy[1:]], axis=1)
        # an (N, 2, 2) array iterates as the N (2, 2) segments LineCollection takes; its stub wants a Sequence
        lines = LineCollection(cast("Sequence[np.ndarray]", segs), cmap="viridis", linewidths=2.5, zorder=4)
        lines.set_array(speed[1:])
        ax.add_collection(lines)
        fig.colorbar(lines, ax=ax, shrink=0.7, label="speed (m/s)")
    ax.plot(*xy[0], marker="o", color="tab:blue", ms=8, zorder=5, label="start")
    ended = ep.stop < len(trace["time"])
    crashed = bool(trace["ended_infraction"][ep.stop] if ended else trace["infraction"][ep.stop - 1])
    ax.plot(
        *xy[-1],
        marker="X" if crashed else "s",
        color="tab:red" if crashed else "k",
        ms=9,
        zorder=5,
        label="infraction" if crashed else "end",
    )
    rc = float(trace["ended_completion"][ep.stop] if ended else trace["route_completion"][ep.stop - 1])
    ax.set_title(
        f"track seed {bank.tracks[track_id].seed}: route completion {100 * rc:.1f}%"
        f"{' (infraction)' if crashed else ''}, {float(trace['time'][ep.stop - 1]):.1f} s"
        f"{'' if ended or rc >= 1.0 else ' (trace ends mid-episode)'}"
    )
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.legend(loc="upper right", fontsize=8)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "track.png")
    fig.savefig(path)
    log.info("wrote track plot %s", path)
    return path


def render_frames(
    bank: TrackBank, trace: dict[str, np.ndarray], radii: list[float], size: int = 480, max_frames: int = 600
) -> np.ndarray:
    """``(T, size, size, 3)`` uint8 top-down frames: track, trail, car, obstacles and traffic."""
    fig = Figure(figsize=(size / 100, size / 100), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    frames: list[np.ndarray] = []
    for ep in episode_slices(trace):
        ax.clear()
        ax.set_axis_off()
        _draw_track(ax, bank, int(trace["track_id"][ep.start]))
        (trail,) = ax.plot([], [], color="tab:blue", lw=1.5, zorder=4)
        dynamic: list[Artist] = []
        for t in range(ep.start, ep.stop):
            if len(frames) >= max_frames:
                break
            for artist in dynamic:
                artist.remove()
            dynamic = [ax.add_patch(p) for p in _obstacles(trace, t, radii)]
            if trace["active"][t] and "traffic" in trace:
                for xy, yaw in zip(trace["traffic"][t], trace["traffic_yaw"][t], strict=True):
                    outline = _car_outline(xy[0], xy[1], yaw, 0.5, 0.24)
                    dynamic.append(ax.add_patch(Polygon(outline, color="tab:purple", zorder=5)))
            x, y = trace["xy"][t]
            car = _car_outline(x, y, float(trace["yaw"][t]), C.CAR_LENGTH, C.CAR_WIDTH)
            dynamic.append(ax.add_patch(Polygon(car, color="tab:red", zorder=6)))
            trail.set_data(trace["xy"][ep.start : t + 1, 0], trace["xy"][ep.start : t + 1, 1])
            canvas.draw()
            frames.append(np.asarray(canvas.buffer_rgba())[..., :3].copy())
    return np.stack(frames) if frames else np.zeros((0, size, size, 3), np.uint8)


def topdown_video(
    bank: TrackBank, trace: dict[str, np.ndarray], radii: list[float], out_dir: str, fps: int = 20
) -> str:
    """``topdown.mp4``: the trace replayed from above (``fps`` = 1 / control period by default)."""
    from robotrl.sim.render import write_video

    os.makedirs(out_dir, exist_ok=True)
    return write_video(render_frames(bank, trace, radii), os.path.join(out_dir, "topdown.mp4"), fps=fps)
