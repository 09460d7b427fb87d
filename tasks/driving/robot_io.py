"""Deploy hook of the driving task: the policy observation from car topics, and the sim robot's topics.

On the car, ``DrivingTask.observe`` is rebuilt by ``robotrl.deploy.observation`` from
``nav_msgs/Odometry`` (pose and body twist), ``sensor_msgs/LaserScan`` (the range rays),
``sensor_msgs/JointState`` (the measured steering angle as joint ``steering``) and the route, a
latched ``nav_msgs/Path`` (centreline poses evenly spaced in arc length, yaw = driving direction,
``position.z`` = road half-width). Keep ``obs_terms`` in the order and with the scales of
``observe``.

``robotrl-sim-robot`` calls ``sim_joint_state``, ``sim_scan`` and ``sim_route`` to publish what a
real car's drivers would: the steering servo angle and throttle, the scan of the task's rays, and
the current track's centreline.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np
from robotrl.tasks.driving import constants as C


def obs_terms(model: mujoco.MjModel, cfg: Any = None) -> list[dict[str, Any]]:
    """Observation terms ``[{name, size, source, scale, offset, ...}]`` matching ``DrivingTask.observe``.

    Args:
        model: the compiled task model (unused: every setting comes from ``cfg``).
        cfg: the task's ``DrivingConfig`` (route samples and spacing, number, field of view and
            range of the rays); ``robotrl export`` passes it.

    """
    if cfg is None:
        from robotrl.tasks.driving.config import DrivingConfig

        cfg = DrivingConfig()
    half = 0.5 * math.radians(cfg.ray_fov_deg)
    angles = np.linspace(-half, half, cfg.num_rays).tolist() if cfg.num_rays > 1 else [0.0] * cfg.num_rays
    horizon = cfg.route_spacing * cfg.route_samples
    return [
        {"name": "speed", "size": 2, "source": "body_vel_xy", "scale": [1.0 / C.TOP_SPEED, 1.0], "offset": 0.0},
        {"name": "yaw_rate", "size": 1, "source": "yaw_rate", "scale": 0.5, "offset": 0.0},
        {"name": "lateral_error", "size": 1, "source": "route_lateral", "scale": 1.0, "offset": 0.0},
        {"name": "heading_error", "size": 2, "source": "route_heading", "scale": 1.0, "offset": 0.0},
        {"name": "half_width", "size": 1, "source": "route_half_width", "scale": 1.0, "offset": 0.0},
        {"name": "route_ahead", "size": 2 * cfg.route_samples, "source": "route_ahead", "scale": 1.0 / horizon,
         "offset": 0.0, "spacing": cfg.route_spacing},
        {"name": "rays", "size": cfg.num_rays, "source": "scan", "scale": 1.0 / cfg.ray_range, "offset": 0.0,
         "angles": angles, "range": cfg.ray_range},
        {"name": "steer_angle", "size": 1, "source": "joint_pos", "scale": 1.0 / C.MAX_STEER, "offset": 0.0,
         "joints": ["steering"]},
        {"name": "last_action", "size": 2, "source": "last_action", "scale": 1.0, "offset": 0.0},
    ]


# --- robotrl-sim-robot: what a real car's drivers publish, from world 0 of the task ------------
def sim_joint_state(task: Any) -> tuple[list[str], list[float], list[float], list[float]]:
    """``(names, position, velocity, effort)`` of the steering angle and the throttle input.

    The steering angle is the mean of the two front wheel angles, as ``observe`` reads it; the
    order is ``task.joint_names``.
    """
    model = task.sim.model
    q = [model.jnt_qposadr[model.joint(j).id] for j in C.STEER_JOINTS]
    v = [model.jnt_dofadr[model.joint(j).id] for j in C.STEER_JOINTS]
    qpos, qvel = task.qpos[0].double().cpu().numpy(), task.qvel[0].double().cpu().numpy()
    throttle = float(task.ctrl[0, 2])
    return (list(task.joint_names), [float(qpos[q].mean()), throttle], [float(qvel[v].mean()), 0.0],
            [0.0, throttle])


def sim_scan(task: Any) -> dict[str, Any] | None:
    """LaserScan fields of world 0's rays (angles over the field of view, misses at ``ray_range``)."""
    c = task.cfg
    if not c.num_rays:
        return None
    angles = task.ray_angles.cpu().numpy().astype(np.float64)
    step = float(angles[1] - angles[0]) if len(angles) > 1 else 0.0
    return {"angle_min": float(angles[0]), "angle_max": float(angles[-1]), "angle_increment": step,
            "range_min": 0.0, "range_max": float(c.ray_range), "ranges": task.rays[0].cpu().numpy().tolist()}


def sim_route(task: Any) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(track id, centre (M, 2), heading (M,), half-width (M,))`` of world 0's current track."""
    tid = int(task.track_id[0])
    track = task.bank.tracks[tid]
    heading = np.arctan2(track.tangent[:, 1], track.tangent[:, 0])
    return tid, np.asarray(track.center, dtype=np.float64), heading, np.full(len(heading), float(track.half_width))
