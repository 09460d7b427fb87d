"""Constants of the tool-use task: hand kinematics, arm, collision classes, workspace.

The arm is KUKA's LBR iiwa 7 as shipped by ``pybullet_data`` (``kuka_iiwa/model.urdf``),
loaded at run time and compiled by MuJoCo's URDF parser; it is never copied into this
repository. The hand is authored here (``hand.py``).
"""

from __future__ import annotations

import importlib.util
import os

import mujoco

# --- collision classes: hand <-> tool, hand <-> table, tool <-> table; no hand self-collision.
HAND_CONTYPE, HAND_CONAFFINITY = 1, 0
TOOL_CONTYPE, TOOL_CONAFFINITY = 2, 1
TABLE_CONTYPE, TABLE_CONAFFINITY = 0, 3

# --- arm
URDF_JOINTS = tuple(f"lbr_iiwa_joint_{i}" for i in range(1, 8))  # names inside the URDF
URDF_BASE_BODY = "lbr_iiwa_link_0"
ARM_PREFIX = "arm_"  # prefix of every arm element once attached to the scene
ARM_JOINTS = tuple(ARM_PREFIX + j for j in URDF_JOINTS)
ARM_FLANGE_BODY = ARM_PREFIX + "lbr_iiwa_link_7"
ARM_FLANGE_OFFSET = 0.045  # m along link 7's z axis to the tool flange
ARM_KP = (400.0, 400.0, 300.0, 300.0, 100.0, 80.0, 50.0)  # N m / rad
ARM_DAMPING = (40.0, 40.0, 30.0, 30.0, 10.0, 8.0, 5.0)  # N m s / rad
ARM_ARMATURE = 0.1
ARM_PREFERRED = (0.0, 0.6, 0.0, -1.5, 0.0, 1.0, 0.0)  # elbow-up posture the home IK stays near
FLOATING_JOINTS = ("wrist_x", "wrist_y", "wrist_z", "wrist_rx", "wrist_ry", "wrist_rz")
FLOATING_KP = (600.0, 600.0, 600.0, 30.0, 30.0, 30.0)
FLOATING_DAMPING = (60.0, 60.0, 60.0, 3.0, 3.0, 3.0)
FLOATING_RANGE = ((-0.35, 0.35), (-0.35, 0.35), (-0.15, 0.35), (-1.6, 1.6), (-1.6, 1.6), (-3.1, 3.1))

# --- hand: 4 fingers x 4 joints, position actuators (LEAP/Allegro-like)
FINGERS = ("index", "middle", "ring", "thumb")
FINGER_JOINT_SUFFIX = ("abd", "mcp", "pip", "dip")
THUMB_JOINT_SUFFIX = ("cmc", "abd", "mcp", "ip")
FINGER_BASE_Y = {"index": 0.03, "middle": 0.0, "ring": -0.03}
FINGER_LINKS = (0.05, 0.035, 0.03)  # m: proximal, middle, distal
THUMB_LINKS = (0.045, 0.035, 0.03)
FINGER_RADII = (0.011, 0.010, 0.0095)
FINGER_RANGES = ((-0.35, 0.35), (-0.3, 1.6), (0.0, 1.8), (0.0, 1.6))
THUMB_RANGES = ((0.0, 1.6), (-0.3, 0.9), (0.0, 1.4), (0.0, 1.4))
PALM_HALF = (0.05, 0.045, 0.012)
HAND_KP = 3.0  # N m / rad
HAND_FORCE = 1.0  # N m
HAND_DAMPING = 0.08
HAND_ARMATURE = 0.002
HAND_FRICTION = 1.0
PALM_BODY = "palm"
PALM_SITE = "palm_center"
FINGERTIP_SITES = tuple(f"{f}_tip" for f in FINGERS)


def hand_joint_names() -> tuple[str, ...]:
    """The 16 hand joints in actuator order (index, middle, ring, thumb)."""
    names = []
    for finger in FINGERS:
        suffixes = THUMB_JOINT_SUFFIX if finger == "thumb" else FINGER_JOINT_SUFFIX
        names += [f"{finger}_{s}" for s in suffixes]
    return tuple(names)


# --- scene and workspace (world frame, m); the table top is the plane z = 0.
PALM_HOME_POS = (0.55, 0.0, 0.10)
PALM_HOME_QUAT = (0.0, 1.0, 0.0, 0.0)  # palm normal -z, fingers +x
SPAWN_CENTER = (0.63, 0.0)
TIMESTEP = 0.005
"""The default physics step (s); ``task.timestep`` sets it per run (``timestep`` checks it)."""
MAX_TIMESTEP = 0.01  # half MuJoCo's default contact time constant (0.02 s), as MuJoCo's docs ask of solref


def timestep(value: float) -> float:
    """``task.timestep`` (s), checked: in ``(0, MAX_TIMESTEP]``."""
    if not 0.0 < value <= MAX_TIMESTEP:
        raise ValueError(f"task.timestep={value}: give a physics step in (0, {MAX_TIMESTEP}] s "
                         "(0.005 is the default; 0.01 with task.frame_skip=2 is the CPU recipe).")
    return float(value)


def kuka_urdf_path() -> str:
    """Path of ``kuka_iiwa/model.urdf`` inside the installed ``pybullet_data`` package.

    Raises:
        ImportError: ``pybullet`` (which ships ``pybullet_data``) is not installed.
        FileNotFoundError: the package has no KUKA model.

    """
    spec = importlib.util.find_spec("pybullet_data")
    if spec is None or spec.origin is None:
        raise ImportError(
            "task=tool_use with arm=kuka_iiwa loads the KUKA iiwa URDF from pybullet_data: "
            "pip install pybullet (or use task=tool_use_floating, the floating-wrist variant)."
        )
    path = os.path.join(os.path.dirname(spec.origin), "kuka_iiwa", "model.urdf")
    if not os.path.exists(path):
        raise FileNotFoundError(f"pybullet_data is installed but has no KUKA model at {path}.")
    return path


INTEGRATORS = {"implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST, "euler": mujoco.mjtIntegrator.mjINT_EULER}


def integrator(name: str) -> mujoco.mjtIntegrator:
    """MuJoCo's integrator for ``task.integrator`` (see ``ToolUseConfig``)."""
    if name not in INTEGRATORS:
        raise ValueError(f"task.integrator={name!r} is not supported; valid: {', '.join(INTEGRATORS)}.")
    return INTEGRATORS[name]
