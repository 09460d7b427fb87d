"""The robot: a 16-joint, 4-finger dexterous hand authored with MjSpec, on a 7-DoF arm.

Hand (LEAP/Allegro-like): a palm box whose normal is the palm frame's +z, three fingers
(index, middle, ring) pointing along +x with joints abduction, MCP, PIP and DIP, and an
opposing thumb (CMC, abduction, MCP, IP) on the palm's -y side. Every joint has a position
actuator (``kp = HAND_KP``, force-limited). Links are capsules; a site marks each fingertip.

Arm: ``kuka_iiwa`` loads KUKA's LBR iiwa 7 URDF from ``pybullet_data`` at run time (arm links
do not collide; position actuators with gravity compensation); ``floating`` replaces the arm
by a 6-DoF actuated wrist (3 slides + 3 hinges), the explicitly simpler variant.
"""

from __future__ import annotations

import logging

import mujoco
import numpy as np
from robotrl.tasks.tool_use import constants as C

log = logging.getLogger(__name__)

ARMS = ("kuka_iiwa", "floating")


def _capsule(body: mujoco.MjsBody, length: float, radius: float, direction: np.ndarray, name: str) -> None:
    body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[radius, 0, 0],
                  fromto=[0, 0, 0, *(direction * length).tolist()], contype=C.HAND_CONTYPE,
                  conaffinity=C.HAND_CONAFFINITY, condim=3, friction=[C.HAND_FRICTION, 0.01, 0.0001],
                  rgba=[0.15, 0.15, 0.15, 1], density=600.0)


def _joint(body: mujoco.MjsBody, name: str, axis: tuple, rng: tuple[float, float]) -> None:
    body.add_joint(name=name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=list(axis), range=list(rng),
                   damping=[C.HAND_DAMPING, 0.0, 0.0], armature=C.HAND_ARMATURE)


def _knuckle(body: mujoco.MjsBody) -> None:
    """A small non-colliding sphere that gives a joint-only body its mass (servo housing)."""
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.008, 0, 0], contype=0, conaffinity=0,
                  mass=0.02, rgba=[0.3, 0.3, 0.3, 1])


def _finger(palm: mujoco.MjsBody, finger: str) -> None:
    """Index/middle/ring: abduction about palm z, then three flexions curling towards +z."""
    base = palm.add_body(name=f"{finger}_base", pos=[C.PALM_HALF[0], C.FINGER_BASE_Y[finger], C.PALM_HALF[2]])
    _knuckle(base)
    _joint(base, f"{finger}_abd", (0, 0, 1), C.FINGER_RANGES[0])
    parent, x = base, 0.0
    for i, (length, radius) in enumerate(zip(C.FINGER_LINKS, C.FINGER_RADII, strict=True)):
        link = parent.add_body(name=f"{finger}_link{i}", pos=[x, 0, 0])
        _joint(link, f"{finger}_{C.FINGER_JOINT_SUFFIX[i + 1]}", (0, -1, 0), C.FINGER_RANGES[i + 1])
        _capsule(link, length, radius, np.array([1.0, 0, 0]), f"{finger}_geom{i}")
        parent, x = link, length
    parent.add_site(name=f"{finger}_tip", pos=[C.FINGER_LINKS[-1], 0, 0], size=[0.006, 0, 0])


def _thumb(palm: mujoco.MjsBody) -> None:
    """Thumb on the -y edge: CMC swings it under the palm, then it curls towards the fingers (+x)."""
    base = palm.add_body(name="thumb_base", pos=[-0.01, -C.PALM_HALF[1], C.PALM_HALF[2]])
    _knuckle(base)
    _joint(base, "thumb_cmc", (-1, 0, 0), C.THUMB_RANGES[0])
    parent, y = base, 0.0
    for i, (length, radius) in enumerate(zip(C.THUMB_LINKS, C.FINGER_RADII, strict=True)):
        link = parent.add_body(name=f"thumb_link{i}", pos=[0, y, 0])
        _joint(link, f"thumb_{C.THUMB_JOINT_SUFFIX[i + 1]}", (0, 0, 1), C.THUMB_RANGES[i + 1])
        _capsule(link, length, radius, np.array([0, -1.0, 0]), f"thumb_geom{i}")
        parent, y = link, -length
    parent.add_site(name="thumb_tip", pos=[0, -C.THUMB_LINKS[-1], 0], size=[0.006, 0, 0])


def add_hand(parent: mujoco.MjsBody, pos: tuple = (0, 0, 0), quat: tuple = (1, 0, 0, 0)) -> mujoco.MjsBody:
    """Add the palm (and fingers) under ``parent``; the palm frame's +z is the palm normal."""
    palm = parent.add_body(name=C.PALM_BODY, pos=list(pos), quat=list(quat))
    palm.add_geom(name="palm_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(C.PALM_HALF),
                  pos=[0, 0, 0], contype=C.HAND_CONTYPE, conaffinity=C.HAND_CONAFFINITY,
                  friction=[C.HAND_FRICTION, 0.01, 0.0001], rgba=[0.2, 0.2, 0.22, 1], density=600.0)
    palm.add_site(name=C.PALM_SITE, pos=[0.03, 0, C.PALM_HALF[2] + 0.03], size=[0.005, 0, 0])
    for finger in C.FINGERS[:3]:
        _finger(palm, finger)
    _thumb(palm)
    return palm


def add_hand_actuators(spec: mujoco.MjSpec) -> None:
    """One position actuator per hand joint, in ``constants.hand_joint_names()`` order."""
    ranges = [*C.FINGER_RANGES * 3, *C.THUMB_RANGES]
    for name, rng in zip(C.hand_joint_names(), ranges, strict=True):
        act = spec.add_actuator(name=f"act_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=C.HAND_KP)
        act.ctrlrange = list(rng)
        act.forcerange = [-C.HAND_FORCE, C.HAND_FORCE]
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE


def add_kuka_arm(spec: mujoco.MjSpec) -> mujoco.MjsBody:
    """Attach the KUKA iiwa URDF (from ``pybullet_data``) to the world; return its flange body."""
    arm = mujoco.MjSpec.from_file(C.kuka_urdf_path())
    for geom in arm.geoms:
        geom.contype, geom.conaffinity = 0, 0
        geom.rgba = [0.95, 0.45, 0.1, 1]
    for body in arm.bodies:
        body.gravcomp = 1.0
    for name, kp, damping in zip(C.URDF_JOINTS, C.ARM_KP, C.ARM_DAMPING, strict=True):
        joint = arm.joint(name)
        joint.damping = [damping, 0.0, 0.0]
        joint.armature = C.ARM_ARMATURE
        act = arm.add_actuator(name=f"act_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp)
        act.ctrlrange = list(joint.range)
    frame = spec.worldbody.add_frame()
    frame.attach_body(arm.body(C.URDF_BASE_BODY), C.ARM_PREFIX, "")
    return spec.body(C.ARM_FLANGE_BODY)


def add_floating_wrist(spec: mujoco.MjSpec) -> mujoco.MjsBody:
    """A 6-DoF actuated wrist at the palm's home pose; return the body the hand attaches to."""
    wrist = spec.worldbody.add_body(name="wrist", pos=list(C.PALM_HOME_POS), quat=list(C.PALM_HOME_QUAT))
    axes = np.eye(3)
    body = wrist
    for i, (name, kp, damping, rng) in enumerate(
        zip(C.FLOATING_JOINTS, C.FLOATING_KP, C.FLOATING_DAMPING, C.FLOATING_RANGE, strict=True)
    ):
        if i > 0:
            body = body.add_body(name=f"wrist_link{i}")
        jtype = mujoco.mjtJoint.mjJNT_SLIDE if i < 3 else mujoco.mjtJoint.mjJNT_HINGE
        # Slides move along world axes: the wrist frame is rotated by PALM_HOME_QUAT (pi about x).
        axis = axes[i % 3] * (np.array([1, -1, -1]) if i < 3 else 1)
        body.add_joint(name=name, type=jtype, axis=axis.tolist(), range=list(rng),
                       damping=[damping, 0.0, 0.0], armature=0.01)
        body.gravcomp = 1.0
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.005, 0, 0], contype=0, conaffinity=0,
                      mass=0.1, rgba=[0, 0, 0, 0])
        act = spec.add_actuator(name=f"act_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp)
        act.ctrlrange = list(rng)
    return body


def add_robot(spec: mujoco.MjSpec, arm: str) -> None:
    """Arm (or floating wrist) plus hand plus all actuators (arm first, then the 16 hand joints).

    Raises:
        ValueError: unknown ``arm``.

    """
    if arm == "kuka_iiwa":
        flange = add_kuka_arm(spec)
        add_hand(flange, pos=(0, 0, C.ARM_FLANGE_OFFSET + C.PALM_HALF[2]), quat=(0, 0, 0, 1))
    elif arm == "floating":
        add_hand(add_floating_wrist(spec))
    else:
        raise ValueError(f"Unknown tool_use arm {arm!r}; valid arms: {', '.join(ARMS)}.")
    for name in C.hand_joint_names():
        spec.joint(name).parent.gravcomp = 1.0
    spec.body(C.PALM_BODY).gravcomp = 1.0
    add_hand_actuators(spec)


def solve_home(model: mujoco.MjModel, joints: list[str], iters: int = 200) -> np.ndarray:
    """Joint angles of ``joints`` that put the palm at ``PALM_HOME_POS``/``PALM_HOME_QUAT`` (damped LS IK).

    Returns the full ``(nq,)`` qpos with the other joints at their defaults.
    """
    data = mujoco.MjData(model)
    palm = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, C.PALM_BODY)
    qadr = [model.jnt_qposadr[model.joint(j).id] for j in joints]
    dadr = [model.jnt_dofadr[model.joint(j).id] for j in joints]
    preferred = np.array(C.ARM_PREFERRED[: len(qadr)])
    data.qpos[qadr] = preferred
    target_pos, target_quat = np.asarray(C.PALM_HOME_POS), np.asarray(C.PALM_HOME_QUAT, float)
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    err_rot = np.zeros(3)
    for _ in range(iters):
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        err_pos = target_pos - data.xpos[palm]
        neg = np.zeros(4)
        mujoco.mju_negQuat(neg, data.xquat[palm])
        dq = np.zeros(4)
        mujoco.mju_mulQuat(dq, target_quat, neg)
        mujoco.mju_quat2Vel(err_rot, dq, 1.0)
        err = np.concatenate([err_pos, err_rot])
        if np.linalg.norm(err) < 1e-5:
            break
        mujoco.mj_jacBody(model, data, jacp, jacr, palm)
        jac = np.vstack([jacp, jacr])[:, dadr]
        pinv = jac.T @ np.linalg.inv(jac @ jac.T + 1e-4 * np.eye(6))
        null = np.eye(len(dadr)) - pinv @ jac  # pull redundant DoF towards the preferred posture
        step = pinv @ err + 0.2 * null @ (preferred - data.qpos[qadr])
        data.qpos[qadr] += step
        for a, j in zip(qadr, joints, strict=True):
            lo, hi = model.jnt_range[model.joint(j).id]
            data.qpos[a] = np.clip(data.qpos[a], lo, hi)
    log.debug("tool_use home pose IK residual %.2e", np.linalg.norm(err))
    return data.qpos.copy()
