"""Typed episodes read back from the deploy path's rosbag2 bags (one bag per episode).

``load_episode(bag, profile)`` reads a bag with ``rosbags`` (the project's own MCAP bags and
any ROS 2 bag with the same topics) into an ``Episode`` on one time grid: the distinct
``/joint_states`` header stamps. Joints are mapped **by name** through the robot profile
(``robotrl.deploy.profile``); the floating base comes from ``/odom`` (pose, body-frame
twist) and ``/imu/data``; the command sent after state ``k`` is the last message on the
profile's output topic logged before state ``k + 1`` arrived. A manipulation task's perception
inputs come along when the bag has them: the object's and the goal's poses (the latest message
at or before each state, NaN before the first), the object's box (the last message) and a
driving route (the first message).

Malformed or partial bags raise ``BagError`` naming the topic and the problem: a topic the
profile needs with no messages, fewer messages than ``metadata.yaml`` declares (a truncated
file), an unreadable file, joint names the profile does not know (a bag from another
robot), commands of the wrong length, non-finite values, or time going backwards. Nothing
is silently cut short.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

log = logging.getLogger(__name__)

DEBUG_TOPICS = ("observation", "action", "command")
EPISODE_TOPIC = "/sim/episode"


class BagError(ValueError):
    """A bag that cannot be read into an ``Episode``; the message names the bag, topic and problem."""


@dataclass
class Episode:
    """One recorded episode on the joint-state time grid (``T`` states, ``J`` joints).

    Attributes:
        path: the bag directory.
        robot: robot profile name the episode was read with.
        task: task name from the bag's metadata ("" if absent).
        joint_names: ``(J,)`` the profile's joint names (controller order).
        t: ``(T,)`` seconds since the first state (header stamps).
        q, dq, tau: ``(T, J)`` joint positions, velocities and efforts (the applied joint torques or forces).
        command: ``(T - 1, J)`` the command in force from state ``k`` to ``k + 1``.
        command_held: ``(T - 1,)`` bool, True where no new command arrived in that interval.
        base_pos: ``(T, 3)`` odometry position, or None without a floating base.
        base_quat: ``(T, 4)`` odometry orientation (w, x, y, z), or None.
        base_lin_vel: ``(T, 3)`` body-frame linear velocity (odometry twist), or None.
        base_ang_vel: ``(T, 3)`` body-frame angular velocity (odometry twist), or None.
        imu_quat: ``(T, 4)`` IMU orientation (w, x, y, z), or None.
        imu_ang_vel: ``(T, 3)`` IMU angular velocity, or None.
        cmd_vel: ``(T, 2)`` velocity command (vx, yaw rate) in force at each state, or None.
        object_pose: ``(T, 7)`` the object's pose (x, y, z, qw, qx, qy, qz) on ``topics.object_pose``
            at each state (NaN rows before its first message), or None.
        goal_pose: ``(T, 7)`` the goal pose on ``topics.goal_pose`` likewise, or None.
        object_box: ``(B,)`` the last ``topics.object_box`` message (tool_use: box center (3),
            half-extents (3), resting height), or None.
        route: ``(M, 4)`` the first ``topics.route`` message (driving; ``nav_msgs/Path``): per
            centreline point x, y, heading (rad) and road half-width (m), or None.
        scan: ``(T, R)`` the latest ``sensor_msgs/LaserScan`` ranges on ``topics.scan`` (m) at or
            before each state (NaN rows before the first scan), or None.
        scan_angles: ``(R,)`` the scan's ray angles (rad, CCW from the sensor's x axis), or None.
        scan_range_max: the scan's ``range_max`` (m; a range at or beyond it is a miss), or None.
        observation: ``(K, P)`` policy observations (``<debug_prefix>/observation``), or None.
        action: ``(K, A)`` raw policy actions, or None.
        success: the episode's success flag (``/sim/episode`` or custom metadata), or None.
        metadata: the bag's custom metadata.

    """

    path: Path
    robot: str
    task: str
    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    command: np.ndarray
    command_held: np.ndarray
    base_pos: np.ndarray | None = None
    base_quat: np.ndarray | None = None
    base_lin_vel: np.ndarray | None = None
    base_ang_vel: np.ndarray | None = None
    imu_quat: np.ndarray | None = None
    imu_ang_vel: np.ndarray | None = None
    cmd_vel: np.ndarray | None = None
    object_pose: np.ndarray | None = None
    goal_pose: np.ndarray | None = None
    object_box: np.ndarray | None = None
    route: np.ndarray | None = None
    scan: np.ndarray | None = None
    scan_angles: np.ndarray | None = None
    scan_range_max: float | None = None
    observation: np.ndarray | None = None
    action: np.ndarray | None = None
    success: bool | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        """Number of states ``T``."""
        return int(self.t.shape[0])

    @property
    def dt(self) -> float:
        """Median state period in seconds."""
        return float(np.median(np.diff(self.t))) if self.num_steps > 1 else 0.0

    @property
    def floating(self) -> bool:
        """True when the episode carries a floating-base pose."""
        return self.base_pos is not None

    def truncated(self, steps: int) -> Episode:
        """The first ``steps`` states (and ``steps - 1`` commands) of this episode."""
        return self.window(0, steps)

    def window(self, start: int, steps: int) -> Episode:
        """States ``start .. start + steps - 1`` (and the ``steps - 1`` commands between them) of this episode."""
        if not (0 <= start and 2 <= steps and start + steps <= self.num_steps):
            raise ValueError(f"a window needs 0 <= start and 2 <= steps with start + steps <= {self.num_steps}, "
                             f"got start={start}, steps={steps}.")
        out = Episode(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        for name in ("t", "q", "dq", "tau", "base_pos", "base_quat", "base_lin_vel", "base_ang_vel", "imu_quat",
                     "imu_ang_vel", "cmd_vel", "object_pose", "goal_pose", "scan"):
            value = getattr(self, name)
            if value is not None:
                setattr(out, name, value[start:start + steps])
        end = start + steps - 1
        out.command, out.command_held = self.command[start:end], self.command_held[start:end]
        return out


def _rosbags() -> Any:
    try:
        from rosbags.highlevel import AnyReader
    except ImportError as exc:
        raise ImportError("Reading bags needs rosbags: pip install 'robotrl[twin]'") from exc
    return AnyReader


def _bag_info(path: Path) -> dict[str, Any]:
    meta = path / "metadata.yaml"
    if not meta.is_file():
        raise BagError(f"{path}: no metadata.yaml; not a rosbag2 bag directory (or an incomplete one).")
    try:
        data = yaml.safe_load(meta.read_text()) or {}
    except yaml.YAMLError as exc:
        raise BagError(f"{path}/metadata.yaml is corrupt: {exc}") from exc
    return data.get("rosbag2_bagfile_information", {})


def _stamp(header: Any) -> float:
    return float(header.stamp.sec) + 1e-9 * float(header.stamp.nanosec)


def read_topics(path: Path) -> tuple[dict[str, list[tuple[int, Any]]], dict[str, str]]:
    """All messages of a bag by topic, as ``(log time ns, message)``, plus the custom metadata.

    Raises:
        BagError: unreadable file, or a topic holding fewer messages than the metadata says.

    """
    path = Path(path)
    info = _bag_info(path)
    declared = {t["topic_metadata"]["name"]: int(t["message_count"]) for t in info.get("topics_with_message_count", [])}
    out: dict[str, list[tuple[int, Any]]] = {}
    current = "(opening)"
    try:
        with _rosbags()([path]) as reader:
            for conn, stamp_ns, raw in reader.messages():
                current = conn.topic
                out.setdefault(conn.topic, []).append((stamp_ns, reader.deserialize(raw, conn.msgtype)))
    except BagError:
        raise
    except Exception as exc:
        raise BagError(f"{path}: corrupt or truncated bag, reading topic {current} failed after "
                       f"{len(out.get(current, []))} messages: {type(exc).__name__}: {exc}") from exc
    for topic, count in declared.items():
        got = len(out.get(topic, []))
        if got != count:
            raise BagError(f"{path}: topic {topic}: metadata.yaml declares {count} messages, the file holds {got} "
                           "(a truncated or partially written bag).")
    return out, {str(k): str(v) for k, v in (info.get("custom_data") or {}).items()}


def _finite(path: Path, topic: str, name: str, arr: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(arr)):
        bad = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise BagError(f"{path}: topic {topic}: non-finite {name} in message {bad}.")
    return arr


def _joint_states(path: Path, topic: str, msgs: list[tuple[int, Any]], names: list[str]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct header stamps -> (stamps, first log time, q, dq, tau) in profile joint order."""
    stamps: list[float] = []
    logs: list[int] = []
    q: list[np.ndarray] = []
    dq: list[np.ndarray] = []
    tau: list[np.ndarray] = []
    seen: set[float] = set()
    for log_ns, m in msgs:
        s = _stamp(m.header)
        if s in seen:
            continue  # a republished state (the sim robot republishes while it waits for a command)
        index = {n: i for i, n in enumerate(m.name)}
        missing = [n for n in names if n not in index]
        if missing:
            raise BagError(f"{path}: topic {topic}: joints {missing} of the robot profile are not in the message "
                           f"(it names {list(m.name)[:8]}{'...' if len(m.name) > 8 else ''}): a bag from another "
                           "robot, or the wrong profile.")
        cols = [index[n] for n in names]
        for field_name, arr, out in (("position", m.position, q), ("velocity", m.velocity, dq),
                                     ("effort", m.effort, tau)):
            values = np.asarray(arr, dtype=np.float64)
            if values.shape[0] == 0 and field_name == "effort":
                values = np.full(len(m.name), np.nan)
            elif values.shape[0] != len(m.name):
                raise BagError(f"{path}: topic {topic}: {field_name} has {values.shape[0]} entries for "
                               f"{len(m.name)} names.")
            out.append(values[cols])
        seen.add(s)
        stamps.append(s)
        logs.append(log_ns)
    stamps_a = np.asarray(stamps)
    if np.any(np.diff(stamps_a) <= 0):
        k = int(np.argmax(np.diff(stamps_a) <= 0))
        raise BagError(f"{path}: topic {topic}: header stamps go backwards at message {k + 1}.")
    qa, dqa = _finite(path, topic, "position", np.stack(q)), _finite(path, topic, "velocity", np.stack(dq))
    return stamps_a, np.asarray(logs, dtype=np.int64), qa, dqa, np.stack(tau), np.asarray([])


def _commands(path: Path, topic: str, msgs: list[tuple[int, Any]], names: list[str], kind: str
              ) -> tuple[np.ndarray, np.ndarray]:
    """Command log times ``(C,)`` and values ``(C, J)`` in profile joint order."""
    times: list[int] = []
    values: list[list[float] | np.ndarray] = []  # a row per command: by name (trajectory) or as sent
    for log_ns, m in msgs:
        if hasattr(m, "points"):  # trajectory_msgs/JointTrajectory: by joint name
            if not m.points:
                raise BagError(f"{path}: topic {topic}: a JointTrajectory without points.")
            field_name = {"position": "positions", "torque": "effort", "velocity": "velocities"}[kind]
            row = dict(zip(m.joint_names, np.asarray(getattr(m.points[0], field_name), float), strict=False))
            missing = [n for n in names if n not in row]
            if missing:
                raise BagError(f"{path}: topic {topic}: joints {missing} missing from a JointTrajectory "
                               f"(it names {list(m.joint_names)}).")
            values.append([row[n] for n in names])
        else:
            data = np.asarray(m.data, dtype=np.float64)
            if data.shape[0] != len(names):
                raise BagError(f"{path}: topic {topic}: a command has {data.shape[0]} entries, the robot profile "
                               f"has {len(names)} joints: a bag from another robot, or the wrong profile.")
            values.append(data)
        times.append(log_ns)
    return np.asarray(times, dtype=np.int64), _finite(path, topic, "command", np.asarray(values, dtype=np.float64))


def _align(stamps: np.ndarray, msgs: list[tuple[int, Any]], tol: float) -> list[Any]:
    """For each state stamp, the message with the latest header stamp <= stamp + tol (None if none)."""
    ms = sorted(msgs, key=lambda x: _stamp(x[1].header))
    keys = np.asarray([_stamp(m.header) for _, m in ms])
    idx = np.searchsorted(keys, stamps + tol, side="right") - 1
    return [ms[i][1] if i >= 0 else None for i in idx]


def _need(path: Path, topics: dict[str, list], topic: str, why: str) -> list[tuple[int, Any]]:
    msgs = topics.get(topic)
    if not msgs:
        raise BagError(f"{path}: topic {topic} ({why}) has no messages; topics present: {sorted(topics)}.")
    return msgs


def _base(path: Path, topics: dict[str, list], profile: Any, stamps: np.ndarray) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    tol = 0.25 * float(np.median(np.diff(stamps))) if len(stamps) > 1 else 1e-6
    odom_topic, imu_topic = profile.topics.odom, profile.topics.imu
    if odom_topic and topics.get(odom_topic):
        aligned = _align(stamps, topics[odom_topic], tol)
        if any(m is None for m in aligned):
            raise BagError(f"{path}: topic {odom_topic}: no odometry at or before the first joint state.")
        p = [m.pose.pose for m in aligned]
        tw = [m.twist.twist for m in aligned]
        out["base_pos"] = np.asarray([[x.position.x, x.position.y, x.position.z] for x in p])
        out["base_quat"] = np.asarray([[x.orientation.w, x.orientation.x, x.orientation.y, x.orientation.z] for x in p])
        out["base_lin_vel"] = np.asarray([[x.linear.x, x.linear.y, x.linear.z] for x in tw])
        out["base_ang_vel"] = np.asarray([[x.angular.x, x.angular.y, x.angular.z] for x in tw])
    if imu_topic and topics.get(imu_topic):
        aligned = _align(stamps, topics[imu_topic], tol)
        if all(m is not None for m in aligned):
            out["imu_quat"] = np.asarray([[m.orientation.w, m.orientation.x, m.orientation.y, m.orientation.z]
                                          for m in aligned])
            out["imu_ang_vel"] = np.asarray([[m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z]
                                             for m in aligned])
    for key, value in out.items():
        _finite(path, odom_topic if key.startswith("base") else imu_topic, key, value)
    return out


def _poses(path: Path, topics: dict[str, list], topic: str, stamps: np.ndarray) -> np.ndarray | None:
    """``(T, 7)`` the latest ``PoseStamped`` on ``topic`` at or before each state; NaN rows before the first."""
    if not topic or not topics.get(topic):
        return None
    tol = 0.25 * float(np.median(np.diff(stamps))) if len(stamps) > 1 else 1e-6
    out = np.full((len(stamps), 7), np.nan)
    for k, m in enumerate(_align(stamps, topics[topic], tol)):
        if m is not None:
            p, o = m.pose.position, m.pose.orientation
            out[k] = (p.x, p.y, p.z, o.w, o.x, o.y, o.z)
    seen = ~np.isnan(out).all(axis=1)
    _finite(path, topic, "pose", out[seen])
    return out


def _last_vector(path: Path, topics: dict[str, list], topic: str) -> np.ndarray | None:
    """The last message's ``data`` on ``topic`` (a latched array), or None."""
    if not topic or not topics.get(topic):
        return None
    return _finite(path, topic, "data", np.asarray(topics[topic][-1][1].data, dtype=np.float64))


def _route(path: Path, topics: dict[str, list], topic: str) -> np.ndarray | None:
    """``(M, 4)`` x, y, heading, half-width of the first route message on ``topic`` (latched), or None."""
    if not topic or not topics.get(topic):
        return None
    from robotrl.deploy.geometry import Route

    try:
        route = Route.from_path(topics[topic][0][1])  # the deploy node's own reading of the message
    except ValueError as err:
        raise BagError(f"{path}: topic {topic}: {err}") from err
    return np.column_stack([route.center, route.heading, route.half_width])


def _scan(path: Path, topics: dict[str, list], topic: str, stamps: np.ndarray) -> dict[str, Any]:
    """``scan`` ``(T, R)``, ``scan_angles`` ``(R,)`` and ``scan_range_max`` of the LaserScans on ``topic`` (or {}).

    Each state gets the latest scan at or before it (NaN rows before the first). Every scan must
    have the first one's ray count and angles: a sensor that changes them mid-episode is an error.
    Non-finite ranges (REP 117's no-return, too-close and invalid readings) become ``range_max``.
    """
    if not topic or not topics.get(topic):
        return {}
    tol = 0.25 * float(np.median(np.diff(stamps))) if len(stamps) > 1 else 1e-6
    first = min((m for _, m in topics[topic]), key=lambda m: _stamp(m.header))
    rays = len(first.ranges)
    if rays == 0:
        raise BagError(f"{path}: topic {topic}: a LaserScan with no ranges.")
    geometry = (float(first.angle_min), float(first.angle_increment))
    out = np.full((len(stamps), rays), np.nan)
    for k, m in enumerate(_align(stamps, topics[topic], tol)):
        if m is None:
            continue
        if len(m.ranges) != rays or (float(m.angle_min), float(m.angle_increment)) != geometry:
            raise BagError(f"{path}: topic {topic}: the scan changed its rays mid-episode ({len(m.ranges)} rays "
                           f"from {float(m.angle_min):g} rad, first {rays} from {geometry[0]:g} rad).")
        out[k] = np.asarray(m.ranges, dtype=np.float64)
    seen = ~np.isnan(out).all(axis=1)
    bad = ~np.isfinite(out[seen])
    if bad.any():  # REP 117: +inf no return, -inf too close, NaN an invalid reading; none is a hit here
        log.warning("%s: topic %s: %d non-finite ranges read as misses", path, topic, int(bad.sum()))
        rows = out[seen]
        rows[bad] = float(first.range_max)
        out[seen] = rows
    return {"scan": out, "scan_angles": geometry[0] + geometry[1] * np.arange(rays),
            "scan_range_max": float(first.range_max)}


def _cmd_vel(topics: dict[str, list], topic: str, state_logs: np.ndarray) -> np.ndarray | None:
    msgs = topics.get(topic)
    if not msgs:
        return None
    logs = np.asarray([t for t, _ in msgs])
    vals = np.asarray([[(m.twist if hasattr(m, "twist") else m).linear.x,
                        (m.twist if hasattr(m, "twist") else m).angular.z] for _, m in msgs])
    idx = np.searchsorted(logs, state_logs, side="right") - 1
    return np.where(idx[:, None] >= 0, vals[np.clip(idx, 0, None)], 0.0)


def _vectors(topics: dict[str, list], topic: str) -> np.ndarray | None:
    msgs = topics.get(topic)
    if not msgs:
        return None
    return np.asarray([np.asarray(m.data, dtype=np.float64) for _, m in msgs])


def _success(topics: dict[str, list], meta: dict[str, str]) -> bool | None:
    for _, m in topics.get(EPISODE_TOPIC, []):
        for kv in m.status[0].values if m.status else []:
            if kv.key == "success":
                return float(kv.value) > 0.5
    return meta["success"].lower() in ("1", "true", "1.0") if "success" in meta else None


def load_episode(path: str | Path, profile: Any = None) -> Episode:
    """Read one bag into an ``Episode`` (module docstring).

    Args:
        path: the bag directory (``metadata.yaml`` + ``.mcap``).
        profile: a ``RobotProfile``, a profile name or YAML path; None uses the bag's
            ``robot_profile`` metadata.

    Raises:
        BagError: naming the topic and the problem.

    """
    from robotrl.deploy.profile import RobotProfile, load_profile

    path = Path(path)
    topics, meta = read_topics(path)
    if profile is None:
        if not meta.get("robot_profile"):
            raise BagError(f"{path}: no robot_profile in the bag's metadata; pass the robot profile explicitly.")
        profile = meta["robot_profile"]
    if not isinstance(profile, RobotProfile):
        profile = load_profile(str(profile))
    recorded = meta.get("robot_profile")
    if recorded and recorded != profile.name:
        log.warning("%s was recorded with robot profile %r, read with %r", path, recorded, profile.name)
    names = list(profile.joints.names)
    js_topic = profile.topics.joint_states
    stamps, logs, q, dq, tau, _ = _joint_states(path, js_topic, _need(path, topics, js_topic, "joint states"), names)
    out_topic = profile.output.topic
    cmd_logs, cmds = _commands(path, out_topic, _need(path, topics, out_topic, "sent commands"), names,
                               profile.command_kind)
    # The episode starts at the last state logged before the first command (what that command answered).
    start = int(np.searchsorted(logs, cmd_logs[0], side="right")) - 1
    if start < 0:
        raise BagError(f"{path}: topic {out_topic}: the first command precedes every joint state.")
    stamps, logs, q, dq, tau = stamps[start:], logs[start:], q[start:], dq[start:], tau[start:]
    if len(stamps) < 2:
        raise BagError(f"{path}: topic {js_topic}: fewer than 2 joint states after the first command.")
    after = np.searchsorted(cmd_logs, logs[1:], side="left") - 1  # last command logged before state k+1
    command = cmds[np.clip(after, 0, None)]
    prev = np.concatenate([[-1], after[:-1]])
    held = after == prev
    held[0] = False
    base: dict[str, Any] = _base(path, topics, profile, stamps)
    prefix = profile.topics.debug_prefix.rstrip("/")
    return Episode(
        path=path, robot=profile.name, task=meta.get("task", ""), joint_names=names, t=stamps - stamps[0],
        q=q, dq=dq, tau=tau, command=command, command_held=held, **base,
        cmd_vel=_cmd_vel(topics, profile.topics.cmd_vel, logs),
        object_pose=_poses(path, topics, profile.topics.object_pose, stamps),
        goal_pose=_poses(path, topics, profile.topics.goal_pose, stamps),
        object_box=_last_vector(path, topics, profile.topics.object_box),
        route=_route(path, topics, profile.topics.route), **_scan(path, topics, profile.topics.scan, stamps),
        observation=_vectors(topics, f"{prefix}/observation"), action=_vectors(topics, f"{prefix}/action"),
        success=_success(topics, meta), metadata=meta,
    )


def load_episodes(root: str | Path, profile: Any = None) -> list[Episode]:
    """Every bag under ``root`` (a bag directory, or a directory of them), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise BagError(f"{root}: no rosbag2 bags (directories with metadata.yaml) found: not a directory.")
    bags = [root] if (root / "metadata.yaml").is_file() else sorted(p for p in root.iterdir()
                                                                      if (p / "metadata.yaml").is_file())
    if not bags:
        raise BagError(f"{root}: no rosbag2 bags (directories with metadata.yaml) found.")
    return [load_episode(b, profile) for b in bags]
