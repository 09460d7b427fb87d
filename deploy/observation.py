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
body_vel_xy         ``odom.twist.twist.linear`` x, y (body frame)
yaw_rate            ``odom.twist.twist.angular.z`` (body frame)
route_lateral       signed lateral offset from the route centreline (left +), in road half-widths
route_heading       sin, cos of (odometry yaw - route heading at the nearest centreline point)
route_half_width    the road half-width at the nearest centreline point (m)
route_ahead         ``size / 2`` centreline points every ``spacing`` m ahead, (x, y) in the body frame
scan                ``scan.ranges`` at the term's ``angles`` (nearest beam); no return reads ``range``
last_command        the previous position command sent (the policy's targets), policy joint order
link_pos            world position of the term's ``link`` body, by forward kinematics of the joint states
link_quat           its orientation (w, x, y, z)
object_keypoints_rel_link  the object's 8 box keypoints (``object_pose`` + ``object_box``, each half-extent
                    at least ``min_half``) minus the ``link`` body's position, flattened ``(24,)``
object_keypoints_rel_goal  those keypoints minus the same keypoints at ``goal_pose``
object_half_extents the half-extents of ``object_box``
sites_rel_object    world positions of the term's ``sites`` (forward kinematics) minus the object position
object_lifted       1 once the object rose ``lift_height`` above its resting height with the mean distance
                    of the term's ``sites`` to the object box below ``hand_dist``; latched until the next arm
==================  ===========================================================

A term's ``scale`` and ``offset`` are scalars or one value per entry. Forward kinematics uses the
spec's ``kinematics`` tree (``robotrl.deploy.kinematics``), evaluated once per observation.

The object sources (tool_use) need ``object_pose`` (``geometry_msgs/PoseStamped``, periodic, watched for
staleness) and the latched ``object_box`` and ``goal_pose``; poses must carry the profile's
``topics.object_frame`` (the task's world frame).

The ``route_*`` sources need the route (``nav_msgs/Path``, see ``Route``): the centreline of a
closed road, points evenly spaced in arc length, each pose's yaw the driving direction and its
``position.z`` the road half-width there. The route is static (latched), not watched for
staleness; a policy that needs it cannot arm before it has arrived.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
from robotrl.deploy.geometry import (
    Route,
    finite,
    quat_rotate_inverse_wxyz,
    scan_at,
    wrap_angle,
    wxyz_from_ros,
    yaw_from_wxyz,
)
from robotrl.deploy.kinematics import Kinematics, box_distance, box_keypoints
from robotrl.deploy.profile import RobotProfile

SOURCES = ("base_height", "projected_gravity", "base_lin_vel", "base_ang_vel", "joint_pos", "joint_vel",
           "last_action", "command_vx_yaw", "body_vel_xy", "yaw_rate", "route_lateral", "route_heading",
           "route_half_width", "route_ahead", "scan", "last_command", "link_pos", "link_quat",
           "object_keypoints_rel_link", "object_keypoints_rel_goal", "object_half_extents", "sites_rel_object",
           "object_lifted")
ROUTE_SOURCES = ("route_lateral", "route_heading", "route_half_width", "route_ahead")
OBJECT_SOURCES = ("object_keypoints_rel_link", "object_keypoints_rel_goal", "sites_rel_object", "object_lifted")
KINEMATIC_SOURCES = ("link_pos", "link_quat", "object_keypoints_rel_link", "sites_rel_object", "object_lifted")
NEEDS = {"base_height": "odom", "base_lin_vel": "odom", "projected_gravity": "imu", "base_ang_vel": "imu",
         "joint_pos": "joint_states", "joint_vel": "joint_states", "body_vel_xy": "odom", "yaw_rate": "odom",
         "scan": "scan", **{k: "odom" for k in ROUTE_SOURCES}, **{k: "object_pose" for k in OBJECT_SOURCES}}
# latched inputs each source needs (required to arm, never watched for staleness)
STATIC_NEEDS = {**{k: ("route",) for k in ROUTE_SOURCES}, "object_keypoints_rel_link": ("object_box",),
                "object_keypoints_rel_goal": ("object_box", "goal_pose"), "object_half_extents": ("object_box",),
                "object_lifted": ("object_box",)}
# periodic inputs (watched for staleness), in a stable order; route, goal_pose and object_box are static
PERIODIC = ("joint_states", "imu", "odom", "scan", "object_pose")
STATIC = ("route", "goal_pose", "object_box")


class RobotState:
    """Latest validated inputs, in policy joint order (see module docstring).

    Attributes:
        joint_pos, joint_vel: ``(A,)`` float64.
        quat: ``(4,)`` w, x, y, z (MuJoCo order). ang_vel, base_pos, lin_vel: ``(3,)``. command: ``(2,)``.
        odom_quat: ``(4,)`` w, x, y, z orientation from odometry; odom_ang_vel: ``(3,)`` its body twist.
        scan: the last accepted ``sensor_msgs/LaserScan`` (None before one).
        route: the last accepted route (``Route``, from ``nav_msgs/Path``; None before one).
        object_pos, object_quat: ``(3,)``, ``(4,)`` (w, x, y, z) object pose (``object_pose``).
        goal_pos, goal_quat: the object's goal pose (``goal_pose``).
        object_box: ``(7,)`` box center ``(3,)``, half-extents ``(3,)`` and resting height (``object_box``;
            None before one).
        object_lifted: the ``object_lifted`` latch (cleared by ``new_episode``).
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
        self.odom_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self.odom_ang_vel = np.zeros(3)
        self.scan: Any = None
        self.route: Route | None = None
        self.object_frame = profile.topics.object_frame
        self.object_pos, self.object_quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        self.goal_pos, self.goal_quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        self.object_box: np.ndarray | None = None
        self.object_lifted = False
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
        if not finite(pos, vel, msg.effort):
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
        if not finite(q, w):
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
        v, w = msg.twist.twist.linear, msg.twist.twist.angular
        pos, lin = np.array([p.x, p.y, p.z]), np.array([v.x, v.y, v.z])
        quat, ang = wxyz_from_ros(msg.pose.pose.orientation), np.array([w.x, w.y, w.z])
        if not finite(pos, lin, quat, ang):
            return self._reject("odom", "nan")
        if np.any(np.abs(lin) > self.limits.input_max_lin_vel) or np.any(np.abs(ang) > self.limits.input_max_ang_vel):
            return self._reject("odom", "out_of_range")
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > self.limits.input_quat_norm_tol:
            return self._reject("odom", "out_of_range")
        self.base_pos, self.lin_vel = pos, lin
        self.odom_quat, self.odom_ang_vel = quat / norm, ang
        self.stamp["odom"] = now
        self.header_time["odom"] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.accepted["odom"] += 1
        return True

    def ingest_scan(self, msg: Any, now: float) -> bool:
        """Validate and keep a LaserScan (its ranges may hold inf/NaN: no return, REP 117)."""
        params = (msg.angle_min, msg.angle_max, msg.angle_increment, msg.range_min, msg.range_max)
        if not len(msg.ranges) or not finite(params):
            return self._reject("scan", "nan" if len(msg.ranges) else "wrong_length")
        if msg.range_max <= 0 or (len(msg.ranges) > 1 and msg.angle_increment == 0):
            return self._reject("scan", "out_of_range")
        self.scan = msg
        self.stamp["scan"] = now
        self.header_time["scan"] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.accepted["scan"] += 1
        return True

    def ingest_route(self, msg: Any, now: float) -> bool:
        """Validate and apply a route (``nav_msgs/Path``, see ``Route``); the projection restarts."""
        try:
            route = Route.from_path(msg)
        except ValueError:
            return self._reject("route", "invalid")
        self.route = route
        self.stamp["route"] = now
        self.accepted["route"] += 1
        return True

    def _pose(self, source: str, msg: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """Validated ``(position, unit quaternion w, x, y, z)`` of a PoseStamped, or None (counted)."""
        p, q = msg.pose.position, wxyz_from_ros(msg.pose.orientation)
        pos = np.array([p.x, p.y, p.z], dtype=np.float64)
        if not finite(pos, q):
            self._reject(source, "nan")
            return None
        if self.object_frame and msg.header.frame_id != self.object_frame:
            self._reject(source, "wrong_frame")
            return None
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > self.limits.input_quat_norm_tol:
            self._reject(source, "out_of_range")
            return None
        return pos, q / norm

    def ingest_object_pose(self, msg: Any, now: float) -> bool:
        """Validate and apply the object's PoseStamped (in ``topics.object_frame``)."""
        pose = self._pose("object_pose", msg)
        if pose is None:
            return False
        self.object_pos, self.object_quat = pose
        self.stamp["object_pose"] = now
        self.header_time["object_pose"] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.accepted["object_pose"] += 1
        return True

    def ingest_goal_pose(self, msg: Any, now: float) -> bool:
        """Validate and apply the object's goal pose (latched PoseStamped in ``topics.object_frame``)."""
        pose = self._pose("goal_pose", msg)
        if pose is None:
            return False
        self.goal_pos, self.goal_quat = pose
        self.stamp["goal_pose"] = now
        self.accepted["goal_pose"] += 1
        return True

    def ingest_object_box(self, msg: Any, now: float) -> bool:
        """Validate and apply the object's box ``[center (3), half-extents (3), resting height]``."""
        box = np.asarray(msg.data, dtype=np.float64)
        if box.shape != (7,):
            return self._reject("object_box", "wrong_length")
        if not finite(box):
            return self._reject("object_box", "nan")
        if np.any(box[3:6] <= 0):
            return self._reject("object_box", "out_of_range")
        self.object_box = box
        self.stamp["object_box"] = now
        self.accepted["object_box"] += 1
        return True

    def new_episode(self) -> None:
        """Clear per-episode latches (``object_lifted``); the safety chain calls this on every arm."""
        self.object_lifted = False

    def ingest_cmd_vel(self, msg: Any, now: float) -> bool:
        """Validate and apply a Twist or TwistStamped command."""
        twist = getattr(msg, "twist", msg)
        cmd = np.array([twist.linear.x, twist.angular.z])
        if not finite(cmd):
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
    """Periodic inputs the observation needs (always ``joint_states``), in a stable order.

    These are watched for staleness. Static inputs (the route) are in ``static_inputs``.

    Raises:
        ValueError: for a term whose source this runtime does not provide.

    """
    bad = [t["source"] for t in obs_terms if t["source"] not in SOURCES]
    bad += [f"{t['name']}.joints" for t in obs_terms if t.get("joints") is not None and len(t["joints"]) != t["size"]]
    bad += [f"{t['name']}.angles" for t in obs_terms if t["source"] == "scan" and len(t.get("angles", ())) != t["size"]]
    if bad:
        raise ValueError(f"Policy spec asks for observation sources {bad}; this runtime provides {SOURCES} "
                         "(a per-joint term's joints and a scan term's angles need one entry per value).")
    needed = {"joint_states"} | {NEEDS[t["source"]] for t in obs_terms if t["source"] in NEEDS}
    return [s for s in PERIODIC if s in needed]


def static_inputs(obs_terms: list[dict[str, Any]]) -> list[str]:
    """Latched inputs the observation needs (``route``, ``goal_pose``, ``object_box``).

    They are required to arm and never watched for staleness.
    """
    needed = {name for t in obs_terms for name in STATIC_NEEDS.get(t["source"], ())}
    return [s for s in STATIC if s in needed]


def check_kinematic_terms(obs_terms: list[dict[str, Any]], kinematics: Kinematics | None,
                          policy_joints: list[str]) -> None:
    """Check that the terms' links and sites exist and every joint of the tree is a policy joint.

    Raises:
        ValueError: naming the missing kinematics, link, site or joint.

    """
    terms = [t for t in obs_terms if t["source"] in KINEMATIC_SOURCES]
    if not terms:
        return
    if kinematics is None:
        raise ValueError(f"obs terms {[t['name'] for t in terms]} need forward kinematics, but the policy spec has "
                         "no 'kinematics' tree; re-export the policy with a task hook that defines kinematics().")
    missing = sorted(set(kinematics.joint_names) - set(policy_joints))
    if missing:
        raise ValueError(f"the spec's kinematic tree moves joints {missing}, which are not among the policy's joints "
                         "(joint states are read for the policy's joints only).")
    for t in terms:
        if "link" in t:
            kinematics.body_index(t["link"])
        for site in t.get("sites", ()):
            kinematics.site_index(site)


def _route_values(state: RobotState, terms: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The ``route_*`` sources (one projection per observation)."""
    route = state.route
    if route is None:  # cannot arm without one; NaN makes the chain's NaN check hold the robot
        return {k: np.full(t["size"], np.nan) for t in terms for k in (t["source"],) if k in ROUTE_SOURCES}
    s, lateral, heading, hw = route.project(state.base_pos[:2])
    yaw = yaw_from_wxyz(state.odom_quat)
    err = wrap_angle(yaw - heading)
    out = {"route_lateral": np.array([lateral / hw]), "route_heading": np.array([math.sin(err), math.cos(err)]),
           "route_half_width": np.array([hw])}
    for t in terms:
        if t["source"] == "route_ahead":
            k = t["size"] // 2
            pts = route.point_at(s + float(t["spacing"]) * np.arange(1, k + 1)) - state.base_pos[None, :2]
            c, si = math.cos(yaw), math.sin(yaw)
            local = np.stack([c * pts[:, 0] + si * pts[:, 1], -si * pts[:, 0] + c * pts[:, 1]], axis=1)
            out["route_ahead"] = local.reshape(-1)
    return out


def _object_term(term: dict[str, Any], state: RobotState, fk: tuple[np.ndarray, ...] | None,
                 kinematics: Kinematics | None) -> np.ndarray:
    """One object source (``OBJECT_SOURCES`` or ``object_half_extents``); NaN while an input is missing."""
    src, box = term["source"], state.object_box
    if box is None or (src == "object_keypoints_rel_goal" and "goal_pose" not in state.stamp):
        return np.full(term["size"], np.nan)  # cannot arm without them; NaN makes the chain hold
    if src == "object_half_extents":
        return box[3:6]
    assert fk is not None and kinematics is not None  # check_kinematic_terms guarantees it
    xpos, _, site_xpos = fk
    if src in ("object_keypoints_rel_link", "object_keypoints_rel_goal"):
        kp = box_keypoints(state.object_pos, state.object_quat, box[:3], box[3:6], float(term["min_half"]))
        if src == "object_keypoints_rel_link":
            return (kp - xpos[kinematics.body_index(term["link"])]).reshape(-1)
        goal = box_keypoints(state.goal_pos, state.goal_quat, box[:3], box[3:6], float(term["min_half"]))
        return (kp - goal).reshape(-1)
    sites = site_xpos[[kinematics.site_index(n) for n in term["sites"]]]
    if src == "sites_rel_object":
        return (sites - state.object_pos).reshape(-1)
    # object_lifted: risen above its resting height with the hand around it (a knocked-up object is not lifted)
    height = state.object_pos[2] - box[6]
    near = box_distance(sites, state.object_pos, state.object_quat, box[:3], box[3:6]).mean()
    state.object_lifted |= bool(height >= float(term["lift_height"]) and near < float(term["hand_dist"]))
    return np.array([float(state.object_lifted)])


def build_observation(obs_terms: list[dict[str, Any]], state: RobotState, last_action: np.ndarray,
                      now: float, last_command: np.ndarray | None = None,
                      kinematics: Kinematics | None = None) -> np.ndarray:
    """The ``(P,)`` float32 policy observation (see module docstring).

    Args:
        obs_terms: the spec's terms.
        state: the validated inputs (the ``object_lifted`` latch and the route projection are updated).
        last_action: ``(A,)`` previous action in ``[-1, 1]``.
        now: monotonic time (s).
        last_command: ``(A,)`` previous command sent (``last_command`` source; the measured joint
            positions when None).
        kinematics: the spec's kinematic tree (kinematic sources).

    """
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
        "body_vel_xy": state.lin_vel[:2],
        "yaw_rate": state.odom_ang_vel[2:3],
        "last_command": state.joint_pos if last_command is None else last_command,
    }
    if any(t["source"] in ROUTE_SOURCES for t in obs_terms):
        values.update(_route_values(state, obs_terms))
    fk = None
    if kinematics is not None and any(t["source"] in KINEMATIC_SOURCES for t in obs_terms):
        fk = kinematics.forward({n: state.joint_pos[i] for n, i in state.index.items()},
                                {n: state.joint_vel[i] for n, i in state.index.items()})
    parts = []
    for term in obs_terms:
        if term["source"] == "scan":
            raw = (scan_at(state.scan, np.asarray(term["angles"], dtype=np.float64), float(term["range"]))
                   if state.scan is not None else np.full(term["size"], np.nan))
        elif term["source"] in ("link_pos", "link_quat"):
            assert fk is not None and kinematics is not None  # check_kinematic_terms guarantees it
            raw = fk[0 if term["source"] == "link_pos" else 1][kinematics.body_index(term["link"])]
        elif term["source"] in (*OBJECT_SOURCES, "object_half_extents"):
            raw = _object_term(term, state, fk, kinematics)
        else:
            raw = np.asarray(values[term["source"]], dtype=np.float64)
        if term.get("joints") is not None:  # per-joint source in another joint order than the policy's
            raw = raw[[state.index[n] for n in term["joints"]]]
        if raw.shape != (term["size"],):
            raise ValueError(f"obs term {term['name']!r} expects {term['size']} values, source "
                             f"{term['source']!r} gives {raw.shape[0]}.")
        scale = np.asarray(term["scale"], dtype=np.float64)
        parts.append((raw - np.asarray(term["offset"], dtype=np.float64)) * scale)
    return np.concatenate(parts).astype(np.float32)
