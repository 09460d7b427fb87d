"""An in-process, deterministic robot for tests (``robotrl.deploy.robot`` contract), no DDS.

Like LeRobot's ``tests/mocks``: it stands in for hardware so that the policy node, the
safety chain and the mode machine run in one process on a manual clock::

    clock = ManualClock()
    robot = FakeRobot(load_profile("example_arm"), joints, clock)
    node = PolicyNode(params, robot=robot, telemetry=MemoryTelemetry(), clock=clock)
    robot.heartbeat = True
    for k in range(10):
        clock.advance(node.period)
        node.tick(clock())
    robot.sent[-1]          # the last command actually sent, (A,)

Each ``get_observation`` first "publishes" one message per streaming input from the
current attributes (``joint_pos``, ``joint_vel``, ``quat_wxyz``, ...), as a robot that
streams at the control rate, then any messages queued with ``inject``; all arrive at
``clock()``. Every command sent is kept in ``sent`` (vectors) and ``messages`` (the
controller messages built by the profile's output adapter).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.outputs import OutputAdapter
from robotrl.deploy.profile import RobotProfile
from robotrl.deploy.robot import OPERATOR_INPUTS, STATE_INPUTS, Robot, Telemetry


class ManualClock:
    """A monotonic clock that moves only when told (seconds)."""

    def __init__(self, start: float = 100.0) -> None:
        self.t = float(start)

    def __call__(self) -> float:
        """The current time."""
        return self.t

    def advance(self, dt: float) -> float:
        """Move forward by ``dt`` >= 0 seconds; returns the new time.

        Raises:
            ValueError: for a negative ``dt`` (a monotonic clock never goes back).

        """
        if dt < 0:
            raise ValueError(f"ManualClock.advance({dt}): a monotonic clock cannot go back; pass dt >= 0.")
        self.t += float(dt)
        return self.t


class FakeRobot(Robot):
    """Deterministic in-process robot (module docstring).

    Attributes:
        joint_pos, joint_vel: ``(A,)`` measured joint state it streams, policy order.
        quat_wxyz: ``(4,)`` base orientation; ang_vel, base_pos, lin_vel: ``(3,)``.
        command: ``(2,)`` velocity command (vx, yaw rate) it streams on ``cmd_vel``.
        streaming: inputs published at every ``get_observation`` (all state inputs at first;
            remove one to make it go stale).
        heartbeat: publish an e-stop heartbeat (``data: false``) at every ``get_observation``.
        sent: every command actually sent, ``(A,)`` each.
        messages: every controller message built from them.

    """

    def __init__(self, profile: RobotProfile, policy_joints: list[str], clock: ManualClock | None = None,
                 period: float = 0.02) -> None:
        super().__init__(profile, policy_joints)
        self.clock = clock or ManualClock()
        n = len(self.joint_names)
        self.joint_pos, self.joint_vel = np.zeros(n), np.zeros(n)
        self.quat_wxyz = np.array([1.0, 0.0, 0.0, 0.0])
        self.ang_vel, self.lin_vel = np.zeros(3), np.zeros(3)
        self.base_pos = np.array([0.0, 0.0, 1.0])
        self.command = np.zeros(2)
        self.streaming = set(STATE_INPUTS)
        self.heartbeat = False
        self.sent: list[np.ndarray] = []
        self.messages: list[Any] = []
        self.output = OutputAdapter(profile, self.joint_names, period)
        self._queue: list[tuple[str, Any]] = []

    def connect(self) -> None:
        """Nothing to open: mark connected."""
        self._connected = True

    def disconnect(self) -> None:
        """Mark disconnected."""
        self._connected = False

    def topic_of(self, name: str) -> str:
        """The profile topic ``name`` would arrive on."""
        return getattr(self.profile.topics, name)

    def inject(self, name: str, msg: Any) -> None:
        """Queue a raw message (for instance a malformed JointState) for the next ``get_observation``.

        Raises:
            ValueError: for an unknown input name.

        """
        if name not in STATE_INPUTS + OPERATOR_INPUTS:
            raise ValueError(f"FakeRobot.inject: unknown input {name!r}; valid: {STATE_INPUTS + OPERATOR_INPUTS}.")
        self._queue.append((name, msg))

    def press_estop(self) -> None:
        """Queue an e-stop press (``data: true``)."""
        self.inject("estop", msgs.Bool(data=True))

    def request_arm(self) -> None:
        """Queue an arm request (``data: true``)."""
        self.inject("arm", msgs.Bool(data=True))

    def _stream(self) -> list[tuple[str, Any]]:
        stamp = msgs.Header(stamp=msgs.stamp(self.clock()))
        out: list[tuple[str, Any]] = []
        if "joint_states" in self.streaming:
            out.append(("joint_states", msgs.JointState(header=stamp, name=list(self.joint_names),
                                                        position=self.joint_pos.tolist(),
                                                        velocity=self.joint_vel.tolist())))
        if "imu" in self.streaming:
            w, x, y, z = (float(c) for c in self.quat_wxyz)
            out.append(("imu", msgs.Imu(header=stamp, orientation=msgs.Quaternion(x=x, y=y, z=z, w=w),
                                        angular_velocity=msgs.Vector3(*map(float, self.ang_vel)))))
        if "odom" in self.streaming:
            odom = msgs.Odometry(header=stamp)
            odom.pose.pose.position = msgs.Point(*map(float, self.base_pos))
            odom.twist.twist.linear = msgs.Vector3(*map(float, self.lin_vel))
            out.append(("odom", odom))
        if "cmd_vel" in self.streaming:
            twist = msgs.Twist()
            twist.linear.x, twist.angular.z = float(self.command[0]), float(self.command[1])
            out.append(("cmd_vel", twist))
        if self.heartbeat:
            out.append(("estop", msgs.Bool(data=False)))
        return out

    def _receive(self) -> list[tuple[str, float, Any]]:
        now = self.clock()
        queued, self._queue = self._queue, []
        return [(name, now, msg) for name, msg in self._stream() + queued]

    def _write(self, command: np.ndarray) -> Any:
        self.sent.append(command.copy())
        self.messages.append(self.output.message(command, self.clock()))
        return self.messages[-1]


class MemoryTelemetry(Telemetry):
    """Keeps every report in ``reports`` as ``(key, message)`` (for tests)."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, Any]] = []

    def publish(self, key: str, msg: Any) -> None:
        """Append ``(key, msg)``."""
        self.reports.append((key, msg))

    def topic(self, key: str) -> str:
        """``memory/<key>``."""
        return f"memory/{key}"

    def statuses(self) -> list[dict[str, str]]:
        """Every status report as ``{key: value}`` (the first DiagnosticStatus of each)."""
        return [msgs.status_values(m) for k, m in self.reports if k == "status"]
