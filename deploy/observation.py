"""Robot state from ROS messages, input validation, and the policy observation.

``RobotState.ingest_*`` validate each message before it touches the state: a message
with NaN/Inf, mismatched array lengths, a joint the profile does not know, a missing
policy joint, or values beyond the profile's input thresholds (``safety.input_*``: joint
positions and velocities against the joint limits, IMU angular velocity, quaternion norm,
odometry linear velocity) is dropped and counted under ``rejected[reason]``; it never
raises. Freshness is the monotonic receive time.

``build_observation`` evaluates the spec's ``obs_terms`` (written by ``robotrl export``
from the task's deploy hook): each slice is ``(source - offset) * scale``; a per-joint
term may name its ``joints`` order (else the policy's ``joint_names`` order). Sources:

==================  ===========================================================
base_height         ``odom.pose.pose.position.z``
projected_gravity   world ``(0, 0, -1)`` in the body frame, from ``imu.orientation``
base_lin_vel        ``odom.twist.twist.linear`` (body frame, ``child_frame_id``)
base_ang_vel        ``imu.angular_velocity`` (body frame)
joint_pos           ``joint_states.position`` in policy joint order (by name)
joint_vel           ``joint_states.velocity`` in policy joint order
last_action         the previous action actually sent, in ``[-1, 1]``
command_vx_yaw      ``cmd_vel.linear.x``, ``cmd_vel.angular.z`` (zero after ``cmd_vel_timeout_s``)
==================  ===========================================================
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
from robotrl.deploy.profile import RobotProfile

SOURCES = ("base_height", "projected_gravity", "base_lin_vel", "base_ang_vel", "joint_pos", "joint_vel",
           "last_action", "command_vx_yaw")
NEEDS = {"base_height": "odom", "base_lin_vel": "odom", "projected_gravity": "imu", "base_ang_vel": "imu",
         "joint_pos": "joint_states", "joint_vel": "joint_states"}


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


def _finite(*values: Any) -> bool:
    return all(all(map(math.isfinite, np.ravel(v).tolist() if isinstance(v, np.ndarray) else v)) for v in values)


class RobotState:
    """Latest validated inputs, in policy joint order (see module docstring).

    Attributes:
        joint_pos, joint_vel: ``(A,)`` float64.
        quat: ``(4,)`` w, x, y, z (MuJoCo order). ang_vel, base_pos, lin_vel: ``(3,)``. command: ``(2,)``.
        limits: the profile's safety settings; the ``input_*`` thresholds and ``cmd_vel_timeout_s``
            apply here.
        stamp: input name -> monotonic receive time of the last accepted message (absent: never).
        header_time: input name -> ``header.stamp`` (s) of the last accepted message.
        rejected: Counter of dropped messages by ``"<input>/<reason>"``.
        accepted: Counter of accepted messages by input.

    """

    def __init__(self, profile: RobotProfile, policy_joints: list[str]) -> None:
        missing = sorted(set(policy_joints) - set(profile.joints.names))
        if missing:
            raise ValueError(f"Robot profile {profile.name!r} lacks the policy's joints {missing}; add them to "
                             "joints.names.")
        s = profile.safety
        self.limits = s
        self.policy_joints = list(policy_joints)
        self.index = {n: i for i, n in enumerate(self.policy_joints)}
        self.known = set(profile.joints.names)
        index = {n: i for i, n in enumerate(profile.joints.names)}
        order = [index[n] for n in policy_joints]
        lo, hi = profile.limits()
        self.lo, self.hi = lo[order] - s.input_position_margin, hi[order] + s.input_position_margin
        self.vmax = np.asarray(profile.joints.velocity_limits, dtype=np.float64)[order] * s.input_velocity_factor
        n = len(policy_joints)
        self.joint_pos, self.joint_vel = np.zeros(n), np.zeros(n)
        self.quat = np.array([1.0, 0.0, 0.0, 0.0])
        self.ang_vel, self.base_pos, self.lin_vel = np.zeros(3), np.zeros(3), np.zeros(3)
        self.command = np.zeros(2)
        self.stamp: dict[str, float] = {}
        self.header_time: dict[str, float] = {}
        self.rejected: Counter = Counter()
        self.accepted: Counter = Counter()

    def _reject(self, source: str, reason: str) -> bool:
        self.rejected[f"{source}/{reason}"] += 1
        return False

    def ingest_joint_state(self, msg: Any, now: float) -> bool:
        """Validate and apply a JointState; False (and counted) when dropped."""
        names, pos, vel = list(msg.name), msg.position, msg.velocity
        if len(pos) != len(names) or len(vel) not in (0, len(names)) or len(msg.effort) not in (0, len(names)):
            return self._reject("joint_states", "wrong_length")
        if any(n not in self.known for n in names):
            return self._reject("joint_states", "unknown_joint")
        if len(set(names)) != len(names):
            return self._reject("joint_states", "duplicate_joint")
        index = {n: i for i, n in enumerate(names)}
        if any(n not in index for n in self.policy_joints):
            return self._reject("joint_states", "missing_joint")
        if not _finite(pos, vel, msg.effort):
            return self._reject("joint_states", "nan")
        order = [index[n] for n in self.policy_joints]
        p = np.asarray(pos, dtype=np.float64)[order]
        v = np.asarray(vel, dtype=np.float64)[order] if len(vel) else np.zeros(len(order))
        if np.any(p < self.lo) or np.any(p > self.hi) or np.any(np.abs(v) > self.vmax):
            return self._reject("joint_states", "out_of_range")
        self.joint_pos, self.joint_vel = p, v
        self.stamp["joint_states"] = now
        self.header_time["joint_states"] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.accepted["joint_states"] += 1
        return True

    def ingest_imu(self, msg: Any, now: float) -> bool:
        """Validate and apply an Imu message."""
        q = wxyz_from_ros(msg.orientation)
        w = np.array([msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z])
        if not _finite(q, w):
            return self._reject("imu", "nan")
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > self.limits.input_quat_norm_tol or np.any(np.abs(w) > self.limits.input_max_ang_vel):
            return self._reject("imu", "out_of_range")
        self.quat, self.ang_vel = q / norm, w
        self.stamp["imu"] = now
        self.header_time["imu"] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.accepted["imu"] += 1
        return True

    def ingest_odom(self, msg: Any, now: float) -> bool:
        """Validate and apply an Odometry message (pose z and body-frame linear twist)."""
        p = msg.pose.pose.position
        v = msg.twist.twist.linear
        pos, lin = np.array([p.x, p.y, p.z]), np.array([v.x, v.y, v.z])
        if not _finite(pos, lin):
            return self._reject("odom", "nan")
        if np.any(np.abs(lin) > self.limits.input_max_lin_vel):
            return self._reject("odom", "out_of_range")
        self.base_pos, self.lin_vel = pos, lin
        self.stamp["odom"] = now
        self.header_time["odom"] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.accepted["odom"] += 1
        return True

    def ingest_cmd_vel(self, msg: Any, now: float) -> bool:
        """Validate and apply a Twist or TwistStamped command."""
        twist = getattr(msg, "twist", msg)
        cmd = np.array([twist.linear.x, twist.angular.z])
        if not _finite(cmd):
            return self._reject("cmd_vel", "nan")
        self.command = cmd
        self.stamp["cmd_vel"] = now
        self.accepted["cmd_vel"] += 1
        return True

    def age(self, source: str, now: float) -> float:
        """Seconds since the last accepted message of ``source`` (inf if never)."""
        return now - self.stamp[source] if source in self.stamp else math.inf

    def tilt(self) -> float:
        """Angle (rad) between the body z axis and world up."""
        g = quat_rotate_inverse_wxyz(self.quat, np.array([0.0, 0.0, -1.0]))
        return float(math.acos(max(-1.0, min(1.0, -g[2]))))


def required_inputs(obs_terms: list[dict[str, Any]]) -> list[str]:
    """Inputs the observation needs (always ``joint_states``), in a stable order.

    Raises:
        ValueError: for a term whose source this runtime does not provide.

    """
    bad = [t["source"] for t in obs_terms if t["source"] not in SOURCES]
    bad += [f"{t['name']}.joints" for t in obs_terms if t.get("joints") is not None and len(t["joints"]) != t["size"]]
    if bad:
        raise ValueError(f"Policy spec asks for observation sources {bad}; this runtime provides {SOURCES}.")
    needed = {"joint_states"} | {NEEDS[t["source"]] for t in obs_terms if t["source"] in NEEDS}
    return [s for s in ("joint_states", "imu", "odom") if s in needed]


def build_observation(obs_terms: list[dict[str, Any]], state: RobotState, last_action: np.ndarray,
                      now: float) -> np.ndarray:
    """The ``(P,)`` float32 policy observation (see module docstring)."""
    command = state.command if state.age("cmd_vel", now) <= state.limits.cmd_vel_timeout_s else np.zeros(2)
    values = {
        "base_height": state.base_pos[2:3],
        "projected_gravity": quat_rotate_inverse_wxyz(state.quat, np.array([0.0, 0.0, -1.0])),
        "base_lin_vel": state.lin_vel,
        "base_ang_vel": state.ang_vel,
        "joint_pos": state.joint_pos,
        "joint_vel": state.joint_vel,
        "last_action": last_action,
        "command_vx_yaw": command,
    }
    parts = []
    for term in obs_terms:
        raw = np.asarray(values[term["source"]], dtype=np.float64)
        if term.get("joints") is not None:  # per-joint source in another joint order than the policy's
            raw = raw[[state.index[n] for n in term["joints"]]]
        if raw.shape != (term["size"],):
            raise ValueError(f"obs term {term['name']!r} expects {term['size']} values, source "
                             f"{term['source']!r} gives {raw.shape[0]}.")
        parts.append((raw - np.asarray(term["offset"], dtype=np.float64)) * float(term["scale"]))
    return np.concatenate(parts).astype(np.float32)
