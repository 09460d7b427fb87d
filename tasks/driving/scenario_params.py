"""Driving scenario parameters (``robotrl twin mine``, ``task.scenarios``) and how a world takes them.

``max_curvature`` (1/m, the track's sharpest turn) and ``half_width`` (m) choose the track of
the bank nearest to the request (distances in units of each parameter's range) and redraw
the start on it: only tracks in the bank exist, so widen ``task.half_width`` and raise
``task.num_tracks`` to mine narrow roads finely. For training on a scenario file whose regions
ask for widths outside ``task.half_width``, the task adds ``task.scenario_tracks`` tracks of
those widths (``scenario_tracks``) that only the width-bounded scenario resets reach.
``obstacles`` (0..3) puts that many of the world's obstacles on the road (the others are moved
out of reach); ``traffic_speed`` (m/s) sets the speed of every traffic vehicle; either one puts
the world's obstacles and traffic on the road (an "active" episode). ``friction`` scales the
sliding friction of the tyres (their geoms have the higher contact ``priority``, so the tyre's
value governs tyre-road contacts) and of the floor (for the chassis' contacts).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.track import Track, TrackParams, generate_track

from robotrl.twin.scenarios import ScenarioParam

if TYPE_CHECKING:
    from robotrl.tasks.driving.config import DrivingConfig
    from robotrl.tasks.driving.task import DrivingTask

SCENARIO_PARAMS = [
    ScenarioParam("max_curvature", 0.2, 0.7, unit="1/m"),
    ScenarioParam("half_width", 0.3, 1.0, unit="m"),
    ScenarioParam("obstacles", 0, 3, kind="choice"),
    ScenarioParam("traffic_speed", 0.3, 1.5, unit="m/s"),
    ScenarioParam("friction", 0.3, 1.2),
]
_RANGE = {p.name: p.high - p.low for p in SCENARIO_PARAMS}
_FAR = 1.0e3  # obstacles taken off the road sit this far away (beyond every ray, no collision)


def scenario_tracks(cfg: DrivingConfig, params: TrackParams) -> list[Track]:
    """The tracks added for mined scenarios (``DrivingConfig.scenario_tracks``), or none.

    When ``cfg.scenarios`` is mixed in (``cfg.scenario_mix > 0``) and the half-widths its regions
    bound reach outside ``cfg.half_width``, ``cfg.scenario_tracks`` tracks are generated with
    half-widths drawn over the span of those regions (clipped to the declared 0.3-1.0 m; seeds from
    ``SCENARIO_SEED_OFFSET``; the other track parameters are ``params``'). Only resets that ask for a
    width reach them (``nearest_tracks``). Regions inside ``cfg.half_width`` need none: the bank has
    such roads already.
    """
    if not cfg.scenarios or cfg.scenario_mix <= 0 or cfg.scenario_tracks <= 0:
        return []
    from robotrl.twin.scenarios import ScenarioFile

    widths = [r.bounds["half_width"] for r in ScenarioFile.load(cfg.scenarios).regions if "half_width" in r.bounds]
    if not widths:
        return []
    lo, hi = min(w[0] for w in widths), max(w[1] for w in widths)
    if lo >= cfg.half_width[0] and hi <= cfg.half_width[1]:
        return []
    declared = next(p for p in SCENARIO_PARAMS if p.name == "half_width")
    span = (max(lo, declared.low), min(hi, declared.high))
    return [generate_track(C.SCENARIO_SEED_OFFSET + i, replace(params, half_width=span))
            for i in range(cfg.scenario_tracks)]


def track_features(task: DrivingTask) -> dict[str, torch.Tensor]:
    """``{"max_curvature": (T,), "half_width": (T,)}`` of the task's track bank."""
    if getattr(task, "_track_features", None) is None:
        curv = torch.tensor([float(abs(t.curvature).max()) for t in task.bank.tracks], device=task.device)
        task._track_features = {"max_curvature": curv, "half_width": task.bank.half_width}
    return task._track_features


def nearest_tracks(task: DrivingTask, values: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(k,)`` the bank track nearest to each requested (curvature, width); NaN entries do not count.

    A request without a width never takes one of the tracks added for mined widths (``scenario_tracks``):
    only the ``task.num_reset_tracks`` first tracks of the bank.
    """
    feats = track_features(task)
    k = next(iter(values.values())).numel()
    cost = torch.zeros(k, len(task.bank.tracks), device=task.device)
    for name, feat in feats.items():
        v = values.get(name)
        if v is None:
            continue
        d = ((v[:, None] - feat[None, :]) / _RANGE[name]).abs()
        cost += torch.nan_to_num(d, nan=0.0)
    n_reset = task.num_reset_tracks
    if n_reset < len(task.bank.tracks):
        width = values.get("half_width")
        no_width = torch.ones(k, dtype=torch.bool, device=task.device) if width is None else torch.isnan(width)
        cost[no_width, n_reset:] = float("inf")
    return cost.argmin(1)


def apply(task: DrivingTask, ids: torch.Tensor, values: dict[str, torch.Tensor], gen: torch.Generator) -> None:
    """Give worlds ``ids`` ``(k,)`` the scenario ``values`` ``{name: (k,)}`` (module docstring)."""
    if not ids.numel():
        return
    values = {n: v.to(task.device, torch.float32) for n, v in values.items()}

    def given(name: str) -> torch.Tensor:
        v = values.get(name)
        return torch.zeros(ids.numel(), dtype=torch.bool, device=task.device) if v is None else ~torch.isnan(v)

    on_track = given("max_curvature") | given("half_width")
    if on_track.any():
        sub: dict[str, torch.Tensor] = {n: values[n][on_track] for n in ("max_curvature", "half_width") if n in values}
        task._start(ids[on_track], nearest_tracks(task, sub), gen)
    scene = given("obstacles") | given("traffic_speed")
    if scene.any():
        rows = ids[scene]
        task.active[rows] = True
        if given("obstacles").any() and task.cfg.num_obstacles:
            count = values["obstacles"][scene]
            slot = torch.arange(task.cfg.num_obstacles, device=task.device)[None, :]
            off = (slot >= count[:, None]) & ~torch.isnan(count)[:, None]
            task.obstacle_xy[rows] = torch.where(off[..., None], torch.full_like(task.obstacle_xy[rows], _FAR),
                                                 task.obstacle_xy[rows])
        if given("traffic_speed").any() and task.cfg.num_traffic:
            v = values["traffic_speed"][scene]
            task.traffic_v[rows] = torch.where(torch.isnan(v)[:, None], task.traffic_v[rows], v[:, None])
        task._write_mocap(rows)
    if given("friction").any():
        rows, f = ids[given("friction")], values["friction"][given("friction")]
        friction = task.sim.model_field("geom_friction")[rows].clone()
        base = task._base_friction
        for geoms in (task._wheel_geoms, task._floor_geoms):
            friction[:, geoms, 0] = base[geoms, 0][None, :] * f[:, None].to(base.dtype)
        task.sim.set_model_field("geom_friction", rows, friction)
        task.dynamics[rows, 0] = f.float()
    if on_track.any() or scene.any():
        task._cast_rays(ids)


def scenario_of(task: DrivingTask, ids: torch.Tensor) -> dict[str, Any]:
    """The realized scenario values of worlds ``ids`` (for reports): track features and friction."""
    feats = track_features(task)
    tid = task.track_id[ids]
    friction = task.sim.model_field("geom_friction")[ids][:, task._floor_geoms[0], 0].float()
    return {"max_curvature": feats["max_curvature"][tid], "half_width": feats["half_width"][tid],
            "friction": friction / float(task._base_friction[task._floor_geoms[0], 0])}
