"""Robot profiles: YAML in ``configs/robot/`` describing one robot's joints, limits, gains, topics.

Load with ``load_profile(name_or_path)``: a bare name is looked up in the shipped
``robotrl.configs`` package (``configs/robot/<name>.yaml``), anything else is a path.
Unknown keys are errors that list the valid ones, so a typo cannot silently disable a
limit. See ``configs/robot/humanoid_sim.yaml`` for an annotated example.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

KINDS = ("position", "torque", "velocity", "ackermann")
ADAPTERS = ("forward_command", "joint_trajectory", "cmd_vel")
# Input sanity thresholds checked by RobotProfile.validate: (safety field, unit, whether 0 is allowed).
INPUT_LIMITS = (
    ("input_position_margin", "rad beyond the position limits", True),
    ("input_velocity_factor", "times the velocity limits", False),
    ("input_max_ang_vel", "rad/s", False),
    ("input_max_lin_vel", "m/s", False),
    ("input_quat_norm_tol", "deviation of the quaternion norm from 1", False),
    ("cmd_vel_timeout_s", "s", False),
)


@dataclass
class Topics:
    """ROS topic names (fully qualified).

    Attributes:
        joint_states: sensor_msgs/JointState input.
        imu: sensor_msgs/Imu input ("" when the robot has none).
        odom: nav_msgs/Odometry input ("" when the robot has none).
        cmd_vel: velocity command input (Twist, or TwistStamped when ``cmd_vel_stamped``).
        cmd_vel_stamped: read TwistStamped (Jazzy) instead of Twist.
        scan: sensor_msgs/LaserScan input (range rays of the driving policy).
        route: nav_msgs/Path input, latched (TRANSIENT_LOCAL): the route a driving policy follows.
        object_pose: geometry_msgs/PoseStamped input: the manipulated object's pose (tool_use), from a
            tracker or ``robotrl-object-pose``.
        goal_pose: geometry_msgs/PoseStamped input, latched: the object's goal pose (tool_use).
        object_box: std_msgs/Float64MultiArray input, latched: the object's bounding box in its own frame,
            ``[center x, y, z, half-extent x, y, z, resting height]`` (m).
        object_frame: ``header.frame_id`` the object and goal poses must carry (the task's world frame,
            e.g. the arm base); "" accepts any.
        estop: std_msgs/Bool e-stop heartbeat (``data: true`` = stop pressed).
        arm: std_msgs/Bool arm / re-arm request (``data: true``).
        status: diagnostic_msgs/DiagnosticArray status output.
        debug_prefix: prefix of the observation/action/command/timing debug topics.

    """

    joint_states: str = "/joint_states"
    imu: str = "/imu/data"
    odom: str = "/odom"
    cmd_vel: str = "/cmd_vel"
    cmd_vel_stamped: bool = False
    scan: str = "/scan"
    route: str = "/robotrl/route"
    object_pose: str = "/object_pose"
    goal_pose: str = "/robotrl/goal_pose"
    object_box: str = "/robotrl/object_box"
    object_frame: str = "world"
    estop: str = "/robotrl/estop"
    arm: str = "/robotrl/arm"
    status: str = "/robotrl/status"
    debug_prefix: str = "/robotrl"


@dataclass
class Output:
    """Where commands go.

    Attributes:
        adapter: ``forward_command`` (Float64MultiArray in ``joints.names`` order),
            ``joint_trajectory`` (one point, ``time_from_start`` of ``trajectory_periods``)
            or ``cmd_vel`` (Twist built from ``twist_fields``).
        topic: output topic, e.g. ``/legs_controller/commands``.
        trajectory_periods: ``time_from_start`` in control periods (1-2 is typical).
        twist_fields: for ``cmd_vel``: which Twist field each command entry fills.

    """

    adapter: str = "forward_command"
    topic: str = "/forward_command_controller/commands"
    trajectory_periods: float = 1.5
    twist_fields: list[str] = field(default_factory=lambda: ["linear.x", "angular.z"])


@dataclass
class Safety:
    """Safety-chain settings (DEPLOY.md order; see ``robotrl.deploy.safety``).

    Attributes:
        stale_hold_periods: input older than this many periods -> HOLD.
        stale_damp_periods: input older than this many periods -> DAMP.
        delta_cap: max change of each command entry per control step (scalar or per joint).
        position_margin: tolerance (rad) beyond the position limits before the torque guard acts.
        input_position_margin: joint_states positions further than this outside the limits are dropped.
        input_velocity_factor: joint_states velocities above this times the limit are dropped.
        input_max_ang_vel: imu angular velocity entries above this (rad/s) are dropped.
        input_max_lin_vel: odom linear twist entries above this (m/s) are dropped.
        input_quat_norm_tol: imu orientations whose norm differs from 1 by more than this are dropped.
        cmd_vel_timeout_s: a velocity command older than this (s) reads as zero in the observation.
        max_tilt_rad: tilt of the base from upright beyond which the robot goes to DAMP (0: off).
        min_base_height: base height below which the robot goes to DAMP (null: off).
        soft_start_s: blend time from the measured pose to the policy command.
        estop_required: an e-stop heartbeat must be present to arm and to keep running.
        estop_timeout_s: heartbeat gap that latches a stop.
        obs_clip_sigma: clip each observation entry to mean +- this many stds of the policy normalizer.
        ood_fault_periods: clipped observations for this many consecutive periods -> HOLD (0: off).
        torque_clamp: clamp position commands so ``kp * (q_cmd - q) - kd * qd`` stays within effort limits.

    """

    stale_hold_periods: float = 3.0
    stale_damp_periods: float = 25.0
    delta_cap: float | list[float] = 0.1
    position_margin: float = 0.0
    input_position_margin: float = 0.5
    input_velocity_factor: float = 5.0
    input_max_ang_vel: float = 50.0
    input_max_lin_vel: float = 50.0
    input_quat_norm_tol: float = 0.05
    cmd_vel_timeout_s: float = 0.5
    max_tilt_rad: float = 0.0
    min_base_height: float | None = None
    soft_start_s: float = 2.0
    estop_required: bool = True
    estop_timeout_s: float = 0.3
    obs_clip_sigma: float = 10.0
    ood_fault_periods: int = 0
    torque_clamp: bool = True


@dataclass
class Joints:
    """Per-joint data, in the controller's joint order.

    Attributes:
        names: joint names (the order of ``forward_command_controller``'s ``joints``).
        position_limits: ``[[lo, hi], ...]`` rad.
        velocity_limits: rad/s.
        effort_limits: limit of a torque command (torque kind) or of the estimated torque (position kind).
        kp: stiffness used by HOLD (torque kind) and the torque estimate (position kind).
        kd: damping used by DAMP and HOLD (torque kind) and the torque estimate.

    """

    names: list[str] = field(default_factory=list)
    position_limits: list[list[float]] = field(default_factory=list)
    velocity_limits: list[float] = field(default_factory=list)
    effort_limits: list[float] = field(default_factory=list)
    kp: list[float] = field(default_factory=list)
    kd: list[float] = field(default_factory=list)


@dataclass
class RobotProfile:
    """One robot (see the module docstring).

    Attributes:
        name: profile name.
        command_kind: ``position``, ``torque``, ``velocity`` or ``ackermann`` (steering angle, rad, and
            throttle, motor input; both clipped to ``position_limits``); must equal the policy's action kind.
        rate_hz: control rate; null uses the policy's training rate.
        auto_arm: arm (PASSIVE -> SOFT_START) as soon as inputs are fresh. Re-arming after a
            fault always needs an explicit ``arm`` message.
        joints: per-joint names, limits and gains.
        topics: topic names.
        output: command adapter.
        safety: safety-chain settings.

    """

    name: str = "robot"
    command_kind: str = "position"
    rate_hz: float | None = None
    auto_arm: bool = False
    joints: Joints = field(default_factory=Joints)
    topics: Topics = field(default_factory=Topics)
    output: Output = field(default_factory=Output)
    safety: Safety = field(default_factory=Safety)

    def validate(self) -> RobotProfile:
        """Check kinds, adapters and array lengths; return self.

        Raises:
            ValueError: naming the bad field and what it should be.

        """
        if self.command_kind not in KINDS:
            raise ValueError(f"profile {self.name}: command_kind={self.command_kind!r}; valid: {KINDS}.")
        if self.output.adapter not in ADAPTERS:
            raise ValueError(f"profile {self.name}: output.adapter={self.output.adapter!r}; valid: {ADAPTERS}.")
        n = len(self.joints.names)
        for key in ("position_limits", "velocity_limits", "effort_limits", "kp", "kd"):
            if len(getattr(self.joints, key)) != n:
                raise ValueError(f"profile {self.name}: joints.{key} has {len(getattr(self.joints, key))} "
                                 f"entries for {n} joints.")
        lo, hi = self.limits()
        if np.any(lo > hi):
            raise ValueError(f"profile {self.name}: a joint has position_limits lo > hi.")
        self._validate_input_limits()
        return self

    def _validate_input_limits(self) -> None:
        s = self.safety
        for key, unit, allow_zero in INPUT_LIMITS:
            value = getattr(s, key)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
                bound = ">= 0" if allow_zero else "> 0"
                default = getattr(Safety, key)
                raise ValueError(f"profile {self.name}: safety.{key}={value!r}; it must be a finite number "
                                 f"{bound} ({unit}); the default is {default}.")

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` position limits ``(J,)``."""
        arr = np.asarray(self.joints.position_limits, dtype=np.float64).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; valid: {sorted(names)}.")
    values = {}
    for key, value in data.items():
        sub = {"joints": Joints, "topics": Topics, "output": Output, "safety": Safety}.get(key)
        values[key] = _build(sub, value or {}, f"{where}.{key}") if cls is RobotProfile and sub else value
    return cls(**values)


def profile_path(name_or_path: str) -> Path:
    """Resolve a profile name (shipped ``configs/robot/<name>.yaml``) or a path.

    Raises:
        FileNotFoundError: listing the shipped profiles.

    """
    path = Path(name_or_path).expanduser()
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    shipped = importlib.resources.files("robotrl.configs") / "robot"
    candidate = shipped / f"{name_or_path}.yaml"
    if candidate.is_file():
        return Path(str(candidate))
    names = sorted(p.name[:-5] for p in shipped.iterdir() if p.name.endswith(".yaml"))
    raise FileNotFoundError(f"No robot profile {name_or_path!r}: give a YAML path or one of {names}.")


def load_profile(name_or_path: str) -> RobotProfile:
    """Load and validate a robot profile."""
    path = profile_path(name_or_path)
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    return _build(RobotProfile, data, str(path)).validate()
