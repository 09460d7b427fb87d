"""The RC car, authored with MjSpec: a free chassis, two steered front wheels and a rear drive.

Joints: ``steer_left``/``steer_right`` (hinges about z, position servos) carry the front
wheels; all four wheels spin freely about their axles, and the two rear ones are driven by a
DC-motor actuator ``torque = MOTOR_TORQUE * (u - omega / omega_max)``, so full throttle
tops out at ``TOP_SPEED``. Tyres are spheres (one contact each with the floor).
Actuator order: ``steer_left``, ``steer_right``, ``drive_left``, ``drive_right``.
"""

from __future__ import annotations

import math

import mujoco
from robotrl.tasks.driving import constants as C


def _wheel(parent: mujoco.MjsBody, name: str, pos: list[float], rgba: list[float]) -> mujoco.MjsBody:
    wheel = parent.add_body(name=name, pos=pos)
    wheel.add_joint(name=f"{name}_spin", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], damping=1e-4)
    wheel.add_geom(
        type=mujoco.mjtGeom.mjGEOM_SPHERE,
        size=[C.WHEEL_RADIUS, 0, 0],
        mass=C.WHEEL_MASS,
        friction=[C.TIRE_FRICTION, 0.005, 0.0001],
        priority=1,  # the tyre's friction, not the larger of tyre and floor, governs the contact
        condim=3,
        rgba=rgba,
        group=1,
        contype=2,
        conaffinity=1,
    )
    return wheel


def add_car(spec: mujoco.MjSpec, rgba: tuple[float, float, float, float] = (0.9, 0.3, 0.1, 1.0)) -> mujoco.MjsBody:
    """Add the car (free joint ``chassis``) to ``spec``'s world body; returns the chassis body.

    The chassis geom and wheels are in geom group 1 and collide only with the floor
    (``contype=2``, ``conaffinity=1``; the floor has ``contype=1``), so traffic and obstacle
    geoms (``contype=0``) never produce contact forces: collisions with them are detected
    geometrically by the task and end the episode.
    """
    lx, ly, lz = C.CHASSIS_HALF
    steer_range = [-0.6, 0.6] if not spec.compiler.degree else [-math.degrees(0.6), math.degrees(0.6)]
    z0 = C.WHEEL_RADIUS + 0.01
    car = spec.worldbody.add_body(name=C.CHASSIS_BODY, pos=[0, 0, z0])
    car.add_freejoint(name="root")
    car.add_geom(
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[lx, ly, lz],
        pos=[0, 0, 0.0],
        mass=C.CHASSIS_MASS,
        rgba=list(rgba),
        group=1,
        contype=2,
        conaffinity=1,
    )
    car.add_camera(name="chase", pos=[-1.0, 0, 0.45], xyaxes=[0, -1, 0, 0.35, 0, 0.94])
    car.add_camera(name="hood", pos=[0.2, 0, 0.12], xyaxes=[0, -1, 0, 0, 0, 1])
    half_base, half_track = 0.5 * C.WHEELBASE, 0.5 * C.TRACK_WIDTH
    dark = [0.1, 0.1, 0.1, 1.0]
    for side, y in (("left", half_track), ("right", -half_track)):
        knuckle = car.add_body(name=f"knuckle_{side}", pos=[half_base, y, 0])
        knuckle.add_joint(
            name=f"steer_{side}",
            type=mujoco.mjtJoint.mjJNT_HINGE,
            axis=[0, 0, 1],
            damping=0.05,
            range=steer_range,
            limited=mujoco.mjtLimited.mjLIMITED_TRUE,
            armature=0.001,
        )
        knuckle.add_geom(
            type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.01, 0, 0], mass=0.02, contype=0, conaffinity=0, group=1
        )
        _wheel(knuckle, f"front_{side}", [0, 0, 0], dark)
        _wheel(car, f"rear_{side}", [-half_base, y, 0], dark)
    for side in ("left", "right"):
        act = spec.add_actuator(name=f"steer_{side}", target=f"steer_{side}")
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.set_to_position(kp=C.STEER_KP, kv=0.5)
        act.ctrlrange = [-0.6, 0.6]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    omega_max = C.TOP_SPEED / C.WHEEL_RADIUS
    for side in ("left", "right"):
        act = spec.add_actuator(name=f"drive_{side}", target=f"rear_{side}_spin")
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm[0] = C.MOTOR_TORQUE
        act.biasprm[:3] = [0.0, 0.0, -C.MOTOR_TORQUE / omega_max]
        act.ctrlrange = [-1.0, 1.0]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    return car


def ackermann_angles(
    steer: float | object, wheelbase: float = C.WHEELBASE, track: float = C.TRACK_WIDTH
) -> tuple[object, object]:
    """Left and right wheel angles for a centre (bicycle-model) steering angle ``steer``.

    Works on floats and on torch tensors alike. The inner wheel turns more than the outer
    one, so both wheel axes meet at the turning centre on the rear axle line.
    """
    lib = math if isinstance(steer, float | int) else __import__("torch")
    tan = lib.tan(steer)
    # curvature k = tan(steer) / L; wheel angle = atan(L k / (1 -+ k t / 2))
    left = lib.atan2(wheelbase * tan, wheelbase - 0.5 * track * tan)
    right = lib.atan2(wheelbase * tan, wheelbase + 0.5 * track * tan)
    return left, right
