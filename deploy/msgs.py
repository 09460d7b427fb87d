# The field annotations below (t.sequence[T], t.array[T, N], t.int32, ...) are cyclonedds.idl's runtime
# type DSL, read by IdlStruct at class creation, not static types: mypy rejects their type arguments
# (type-arg, valid-type) and the list defaults given to them (assignment).
# mypy: disable-error-code="type-arg,valid-type,assignment"
"""ROS 2 message types as Cyclone DDS IDL structs, wire-compatible with ROS 2.

Each class is a final, keyless ``IdlStruct`` whose DDS type name follows the ROS 2 IDL
mapping ``<pkg>::msg::dds_::<Type>_`` (so rmw_cyclonedds and rmw_fastrtps readers match
it) and which cyclonedds-python encodes as XCDR1 with a 4-byte encapsulation header.
Nested messages are their own structs, ``T[]`` is ``sequence[T]`` and ``T[N]`` is
``array[T, N]``. ``tests/deploy/test_msgs_cdr.py`` checks that every type serializes
byte-for-byte like ``rosbags``' ROS 2 CDR serializer.

``ROS_TYPES`` maps the ROS type name (``sensor_msgs/msg/JointState``) to its class; the
class attribute ``ros_type`` holds the reverse mapping (read it with ``ros_type_of``).

Annotations here are evaluated at class creation (no ``from __future__ import
annotations``): cyclonedds resolves the IDL field types from them.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

try:
    import cyclonedds.idl.types as t
    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl.annotations import final
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "robotrl.deploy message types need cyclonedds: pip install robotrl[deploy]"
    ) from exc

ROS_TYPES: dict[str, type] = {}


def _register(ros_type: str) -> "Callable[[type], type]":
    """Class decorator: record ``ros_type`` on the class and in ``ROS_TYPES``."""

    def wrap(cls: type) -> type:
        cls.ros_type = ros_type  # type: ignore[attr-defined]  # a tag on the class; read by ros_type_of
        ROS_TYPES[ros_type] = cls
        return cls

    return wrap


def _tn(ros_type: str) -> str:
    pkg, kind, name = ros_type.split("/")
    return f"{pkg}::{kind}::dds_::{name}_"


# --- builtin_interfaces / std_msgs ----------------------------------------------------
@_register("builtin_interfaces/msg/Time")
@dataclass
@final
class Time(IdlStruct, typename=_tn("builtin_interfaces/msg/Time")):
    """builtin_interfaces/Time: seconds and nanoseconds."""

    sec: t.int32 = 0
    nanosec: t.uint32 = 0


@_register("builtin_interfaces/msg/Duration")
@dataclass
@final
class Duration(IdlStruct, typename=_tn("builtin_interfaces/msg/Duration")):
    """builtin_interfaces/Duration."""

    sec: t.int32 = 0
    nanosec: t.uint32 = 0


@_register("std_msgs/msg/Header")
@dataclass
@final
class Header(IdlStruct, typename=_tn("std_msgs/msg/Header")):
    """std_msgs/Header: stamp and frame id."""

    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@_register("std_msgs/msg/Bool")
@dataclass
@final
class Bool(IdlStruct, typename=_tn("std_msgs/msg/Bool")):
    """std_msgs/Bool (e-stop heartbeat, arm requests)."""

    data: bool = False


@_register("std_msgs/msg/MultiArrayDimension")
@dataclass
@final
class MultiArrayDimension(IdlStruct, typename=_tn("std_msgs/msg/MultiArrayDimension")):
    """std_msgs/MultiArrayDimension."""

    label: str = ""
    size: t.uint32 = 0
    stride: t.uint32 = 0


@_register("std_msgs/msg/MultiArrayLayout")
@dataclass
@final
class MultiArrayLayout(IdlStruct, typename=_tn("std_msgs/msg/MultiArrayLayout")):
    """std_msgs/MultiArrayLayout."""

    dim: t.sequence[MultiArrayDimension] = field(default_factory=list)
    data_offset: t.uint32 = 0


@_register("std_msgs/msg/Float64MultiArray")
@dataclass
@final
class Float64MultiArray(IdlStruct, typename=_tn("std_msgs/msg/Float64MultiArray")):
    """std_msgs/Float64MultiArray (forward_command_controller input, debug vectors)."""

    layout: MultiArrayLayout = field(default_factory=MultiArrayLayout)
    data: t.sequence[t.float64] = field(default_factory=list)


@_register("rosgraph_msgs/msg/Clock")
@dataclass
@final
class Clock(IdlStruct, typename=_tn("rosgraph_msgs/msg/Clock")):
    """rosgraph_msgs/Clock (``/clock``, simulation time for ``use_sim_time`` nodes)."""

    clock: Time = field(default_factory=Time)


# --- geometry_msgs -------------------------------------------------------------------
@_register("geometry_msgs/msg/Vector3")
@dataclass
@final
class Vector3(IdlStruct, typename=_tn("geometry_msgs/msg/Vector3")):
    """geometry_msgs/Vector3."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@_register("geometry_msgs/msg/Point")
@dataclass
@final
class Point(IdlStruct, typename=_tn("geometry_msgs/msg/Point")):
    """geometry_msgs/Point."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@_register("geometry_msgs/msg/Quaternion")
@dataclass
@final
class Quaternion(IdlStruct, typename=_tn("geometry_msgs/msg/Quaternion")):
    """geometry_msgs/Quaternion (x, y, z, w; identity by default as in ROS)."""

    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0
    w: t.float64 = 1.0


@_register("geometry_msgs/msg/Pose")
@dataclass
@final
class Pose(IdlStruct, typename=_tn("geometry_msgs/msg/Pose")):
    """geometry_msgs/Pose."""

    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


@_register("geometry_msgs/msg/PoseStamped")
@dataclass
@final
class PoseStamped(IdlStruct, typename=_tn("geometry_msgs/msg/PoseStamped")):
    """geometry_msgs/PoseStamped (object pose from a tracker)."""

    header: Header = field(default_factory=Header)
    pose: Pose = field(default_factory=Pose)


@_register("geometry_msgs/msg/PoseWithCovariance")
@dataclass
@final
class PoseWithCovariance(IdlStruct, typename=_tn("geometry_msgs/msg/PoseWithCovariance")):
    """geometry_msgs/PoseWithCovariance."""

    pose: Pose = field(default_factory=Pose)
    covariance: t.array[t.float64, 36] = field(default_factory=lambda: [0.0] * 36)


@_register("geometry_msgs/msg/Twist")
@dataclass
@final
class Twist(IdlStruct, typename=_tn("geometry_msgs/msg/Twist")):
    """geometry_msgs/Twist (``cmd_vel``)."""

    linear: Vector3 = field(default_factory=Vector3)
    angular: Vector3 = field(default_factory=Vector3)


@_register("geometry_msgs/msg/TwistStamped")
@dataclass
@final
class TwistStamped(IdlStruct, typename=_tn("geometry_msgs/msg/TwistStamped")):
    """geometry_msgs/TwistStamped (``cmd_vel`` on Jazzy)."""

    header: Header = field(default_factory=Header)
    twist: Twist = field(default_factory=Twist)


@_register("geometry_msgs/msg/TwistWithCovariance")
@dataclass
@final
class TwistWithCovariance(IdlStruct, typename=_tn("geometry_msgs/msg/TwistWithCovariance")):
    """geometry_msgs/TwistWithCovariance."""

    twist: Twist = field(default_factory=Twist)
    covariance: t.array[t.float64, 36] = field(default_factory=lambda: [0.0] * 36)


# --- sensor_msgs / nav_msgs ----------------------------------------------------------
@_register("sensor_msgs/msg/JointState")
@dataclass
@final
class JointState(IdlStruct, typename=_tn("sensor_msgs/msg/JointState")):
    """sensor_msgs/JointState: parallel arrays keyed by ``name``."""

    header: Header = field(default_factory=Header)
    name: t.sequence[str] = field(default_factory=list)
    position: t.sequence[t.float64] = field(default_factory=list)
    velocity: t.sequence[t.float64] = field(default_factory=list)
    effort: t.sequence[t.float64] = field(default_factory=list)


@_register("sensor_msgs/msg/Imu")
@dataclass
@final
class Imu(IdlStruct, typename=_tn("sensor_msgs/msg/Imu")):
    """sensor_msgs/Imu: orientation, body-frame angular velocity and linear acceleration."""

    header: Header = field(default_factory=Header)
    orientation: Quaternion = field(default_factory=Quaternion)
    orientation_covariance: t.array[t.float64, 9] = field(default_factory=lambda: [0.0] * 9)
    angular_velocity: Vector3 = field(default_factory=Vector3)
    angular_velocity_covariance: t.array[t.float64, 9] = field(default_factory=lambda: [0.0] * 9)
    linear_acceleration: Vector3 = field(default_factory=Vector3)
    linear_acceleration_covariance: t.array[t.float64, 9] = field(default_factory=lambda: [0.0] * 9)


@_register("sensor_msgs/msg/Image")
@dataclass
@final
class Image(IdlStruct, typename=_tn("sensor_msgs/msg/Image")):
    """sensor_msgs/Image."""

    header: Header = field(default_factory=Header)
    height: t.uint32 = 0
    width: t.uint32 = 0
    encoding: str = ""
    is_bigendian: t.uint8 = 0
    step: t.uint32 = 0
    data: t.sequence[t.uint8] = field(default_factory=list)


@_register("sensor_msgs/msg/RegionOfInterest")
@dataclass
@final
class RegionOfInterest(IdlStruct, typename=_tn("sensor_msgs/msg/RegionOfInterest")):
    """sensor_msgs/RegionOfInterest."""

    x_offset: t.uint32 = 0
    y_offset: t.uint32 = 0
    height: t.uint32 = 0
    width: t.uint32 = 0
    do_rectify: bool = False


@_register("sensor_msgs/msg/CameraInfo")
@dataclass
@final
class CameraInfo(IdlStruct, typename=_tn("sensor_msgs/msg/CameraInfo")):
    """sensor_msgs/CameraInfo: intrinsics ``k`` (3x3 row-major), distortion ``d``, projection ``p``."""

    header: Header = field(default_factory=Header)
    height: t.uint32 = 0
    width: t.uint32 = 0
    distortion_model: str = ""
    d: t.sequence[t.float64] = field(default_factory=list)
    k: t.array[t.float64, 9] = field(default_factory=lambda: [0.0] * 9)
    r: t.array[t.float64, 9] = field(default_factory=lambda: [0.0] * 9)
    p: t.array[t.float64, 12] = field(default_factory=lambda: [0.0] * 12)
    binning_x: t.uint32 = 0
    binning_y: t.uint32 = 0
    roi: RegionOfInterest = field(default_factory=RegionOfInterest)


@_register("sensor_msgs/msg/LaserScan")
@dataclass
@final
class LaserScan(IdlStruct, typename=_tn("sensor_msgs/msg/LaserScan")):
    """sensor_msgs/LaserScan: ``ranges[i]`` at ``angle_min + i * angle_increment`` (rad, CCW from x)."""

    header: Header = field(default_factory=Header)
    angle_min: t.float32 = 0.0
    angle_max: t.float32 = 0.0
    angle_increment: t.float32 = 0.0
    time_increment: t.float32 = 0.0
    scan_time: t.float32 = 0.0
    range_min: t.float32 = 0.0
    range_max: t.float32 = 0.0
    ranges: t.sequence[t.float32] = field(default_factory=list)
    intensities: t.sequence[t.float32] = field(default_factory=list)


@_register("sensor_msgs/msg/CompressedImage")
@dataclass
@final
class CompressedImage(IdlStruct, typename=_tn("sensor_msgs/msg/CompressedImage")):
    """sensor_msgs/CompressedImage."""

    header: Header = field(default_factory=Header)
    format: str = ""
    data: t.sequence[t.uint8] = field(default_factory=list)


@_register("nav_msgs/msg/Odometry")
@dataclass
@final
class Odometry(IdlStruct, typename=_tn("nav_msgs/msg/Odometry")):
    """nav_msgs/Odometry: pose in ``frame_id``, twist in ``child_frame_id`` (the body)."""

    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    pose: PoseWithCovariance = field(default_factory=PoseWithCovariance)
    twist: TwistWithCovariance = field(default_factory=TwistWithCovariance)


@_register("nav_msgs/msg/Path")
@dataclass
@final
class Path(IdlStruct, typename=_tn("nav_msgs/msg/Path")):
    """nav_msgs/Path: a route (driving: the centreline, see ``robotrl.deploy.observation.Route``)."""

    header: Header = field(default_factory=Header)
    poses: t.sequence[PoseStamped] = field(default_factory=list)


# --- trajectory_msgs / diagnostic_msgs -----------------------------------------------
@_register("trajectory_msgs/msg/JointTrajectoryPoint")
@dataclass
@final
class JointTrajectoryPoint(IdlStruct, typename=_tn("trajectory_msgs/msg/JointTrajectoryPoint")):
    """trajectory_msgs/JointTrajectoryPoint."""

    positions: t.sequence[t.float64] = field(default_factory=list)
    velocities: t.sequence[t.float64] = field(default_factory=list)
    accelerations: t.sequence[t.float64] = field(default_factory=list)
    effort: t.sequence[t.float64] = field(default_factory=list)
    time_from_start: Duration = field(default_factory=Duration)


@_register("trajectory_msgs/msg/JointTrajectory")
@dataclass
@final
class JointTrajectory(IdlStruct, typename=_tn("trajectory_msgs/msg/JointTrajectory")):
    """trajectory_msgs/JointTrajectory (JointTrajectoryController input)."""

    header: Header = field(default_factory=Header)
    joint_names: t.sequence[str] = field(default_factory=list)
    points: t.sequence[JointTrajectoryPoint] = field(default_factory=list)


@_register("diagnostic_msgs/msg/KeyValue")
@dataclass
@final
class KeyValue(IdlStruct, typename=_tn("diagnostic_msgs/msg/KeyValue")):
    """diagnostic_msgs/KeyValue."""

    key: str = ""
    value: str = ""


@_register("diagnostic_msgs/msg/DiagnosticStatus")
@dataclass
@final
class DiagnosticStatus(IdlStruct, typename=_tn("diagnostic_msgs/msg/DiagnosticStatus")):
    """diagnostic_msgs/DiagnosticStatus (``level``: 0 OK, 1 WARN, 2 ERROR, 3 STALE)."""

    level: t.uint8 = 0
    name: str = ""
    message: str = ""
    hardware_id: str = ""
    values: t.sequence[KeyValue] = field(default_factory=list)


@_register("diagnostic_msgs/msg/DiagnosticArray")
@dataclass
@final
class DiagnosticArray(IdlStruct, typename=_tn("diagnostic_msgs/msg/DiagnosticArray")):
    """diagnostic_msgs/DiagnosticArray (``/robotrl/status``)."""

    header: Header = field(default_factory=Header)
    status: t.sequence[DiagnosticStatus] = field(default_factory=list)


def status_values(msg: DiagnosticArray) -> dict[str, str]:
    """The first status's key/value pairs of a ``DiagnosticArray`` ({} when it holds no status).

    The node's ``/robotrl/status`` and the sim robot's ``/sim/episode`` carry their fields this way.
    """
    statuses = cast("list[DiagnosticStatus]", msg.status)  # t.sequence annotates a list
    values = cast("list[KeyValue]", statuses[0].values) if statuses else []
    return {kv.key: kv.value for kv in values}


def stamp(seconds: float) -> Time:
    """A ``Time`` from float seconds."""
    sec = int(seconds // 1)
    return Time(sec=sec, nanosec=int(round((seconds - sec) * 1e9)) % 1_000_000_000)


def duration(seconds: float) -> Duration:
    """A ``Duration`` from float seconds."""
    t = stamp(seconds)
    return Duration(sec=t.sec, nanosec=t.nanosec)


def to_seconds(time: Time) -> float:
    """Float seconds of a ``Time`` or ``Duration``."""
    return time.sec + time.nanosec * 1e-9


def route_path(header: Header, center: "Sequence[Sequence[float]]", heading: "Sequence[float]",
               half_width: "Sequence[float]") -> Path:
    """The route a driving policy follows as a ``nav_msgs/Path`` (``/robotrl/route``).

    One pose per centreline point ``(M, 2)``: position x, y = the point, position.z = the road
    half-width there (m), yaw = the heading (rad); ``deploy.observation.Route.from_path`` reads it back.
    """
    poses = [PoseStamped(header=header, pose=Pose(Point(float(x), float(y), float(w)), Quaternion(
        x=0.0, y=0.0, z=math.sin(0.5 * float(h)), w=math.cos(0.5 * float(h)))))
        for (x, y), h, w in zip(center, heading, half_width, strict=True)]
    return Path(header=header, poses=poses)  # type: ignore[arg-type]  # t.sequence is a list at run time


def lookup(ros_type: str) -> type:
    """The struct class of ROS type ``ros_type`` (``sensor_msgs/msg/JointState``).

    Raises:
        KeyError: listing the supported types.

    """
    if ros_type not in ROS_TYPES:
        raise KeyError(f"Unsupported message type {ros_type!r}; supported: {', '.join(sorted(ROS_TYPES))}.")
    return ROS_TYPES[ros_type]


def ros_type_of(msg_type: type) -> str:
    """The ROS type name (``sensor_msgs/msg/JointState``) of struct class ``msg_type``.

    Raises:
        ValueError: ``msg_type`` is not one of these message types (no ``ros_type``).

    """
    ros_type = getattr(msg_type, "ros_type", None)
    if not isinstance(ros_type, str):
        raise ValueError(f"{msg_type!r} is not a robotrl.deploy.msgs message type (it has no ros_type).")
    return ros_type
