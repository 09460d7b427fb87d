"""The driving scene, authored with MjSpec: floor, kerbs, the car, obstacle and traffic bodies.

Obstacles are cylinders and traffic vehicles are capsules on mocap bodies in geom group
``RAY_GROUP`` without contacts: the range rays see them, and collisions with them are
detected geometrically by the task. Inactive ones wait at ``PARK``. The kerbs are visual
boxes that the task moves per world onto its track's lane boundaries.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.car import add_car
from robotrl.tasks.driving.config import DrivingConfig

RAY_HEIGHT = 0.12
"""Height of the range rays above the floor, m (also the traffic capsules' axis height)."""
TRAFFIC_RADIUS = 0.12
TRAFFIC_HALF_LENGTH = 0.13
OBSTACLE_HALF_HEIGHT = 0.15
PARK = (0.0, 0.0, -3.0)
"""Where inactive obstacles and traffic wait: under the floor, below every ray."""
CURB_HALF = (0.03, 0.012)
"""Half width and half height of the kerb boxes drawn along the lane boundaries (visual only)."""


def obstacle_radii(cfg: DrivingConfig) -> list[float]:
    """Radius of each of the ``num_obstacles`` obstacles, m: evenly spread over ``obstacle_radius``."""
    n, (lo, hi) = cfg.num_obstacles, cfg.obstacle_radius
    return [float(r) for r in np.linspace(lo, hi, n)] if n > 1 else [0.5 * (lo + hi)] * n


def _add_environment(spec: mujoco.MjSpec, cfg: DrivingConfig) -> None:
    """Floor, light, top camera and ``2 * curb_segments`` kerb boxes (parked below the floor)."""
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[40, 40, 0.5],
        contype=1,
        conaffinity=2,
        rgba=[0.35, 0.38, 0.35, 1],
        group=0,
    )
    spec.worldbody.add_light(
        pos=[0, 0, 30], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=False
    )
    spec.worldbody.add_camera(name="top", pos=[0, 0, 28], xyaxes=[1, 0, 0, 0, 1, 0])
    spec.stat.extent = 20.0
    spec.stat.center = [0.0, 0.0, 0.0]
    for side in ("left", "right"):
        for i in range(cfg.curb_segments):
            spec.worldbody.add_geom(
                name=f"curb_{side}_{i}",
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=[0.5, *CURB_HALF],
                pos=[0, 0, -1.0],
                contype=0,
                conaffinity=0,
                group=C.CURB_GROUP,
                rgba=[0.85, 0.1, 0.1, 1] if i % 2 else [0.95, 0.95, 0.95, 1],
            )


def _add_scenario_bodies(spec: mujoco.MjSpec, cfg: DrivingConfig) -> None:
    """Mocap bodies ``obstacle_i`` (cylinders) and ``traffic_i`` (capsules along x), parked."""
    for i, radius in enumerate(obstacle_radii(cfg)):
        body = spec.worldbody.add_body(name=f"obstacle_{i}", mocap=True, pos=list(PARK))
        body.add_geom(
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[radius, OBSTACLE_HALF_HEIGHT, 0],
            pos=[0, 0, OBSTACLE_HALF_HEIGHT],
            contype=0,
            conaffinity=0,
            group=C.RAY_GROUP,
            rgba=[0.95, 0.75, 0.1, 1],
        )
    for i in range(cfg.num_traffic):
        body = spec.worldbody.add_body(name=f"traffic_{i}", mocap=True, pos=list(PARK))
        body.add_geom(
            type=mujoco.mjtGeom.mjGEOM_CAPSULE,
            size=[TRAFFIC_RADIUS, TRAFFIC_HALF_LENGTH, 0],
            pos=[0, 0, RAY_HEIGHT],
            quat=[math.sqrt(0.5), 0, math.sqrt(0.5), 0],
            contype=0,
            conaffinity=0,
            group=C.RAY_GROUP,
            rgba=[0.2, 0.4, 0.9, 1],
        )


def build_scene(cfg: DrivingConfig) -> mujoco.MjSpec:
    """The whole scene with Newton solver and implicit-fast integration (compile it for the model)."""
    spec = mujoco.MjSpec()
    spec.compiler.degree = False
    spec.option.timestep = cfg.timestep
    spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.iterations = cfg.solver_iterations
    spec.option.ls_iterations = 10
    _add_environment(spec, cfg)
    add_car(spec)
    _add_scenario_bodies(spec, cfg)
    return spec
