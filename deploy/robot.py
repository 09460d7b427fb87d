"""The robot contract: what the policy node needs from a robot, and nothing more.

After LeRobot's ``Robot``: hardware sits behind a small abstract class, and
``send_action`` returns the command actually sent, after clipping. The policy node
(``robotrl.deploy.node``) talks only to this contract and to ``Telemetry``, never to topics.

Implementations:

* ``robotrl.deploy.ros_robot.TopicRobot``: a robot behind ROS 2 topics (``/joint_states``,
  ``/imu/data``, ``/odom``, ``/cmd_vel``, the e-stop and arm topics in, the profile's output
  adapter out), over any ``robotrl.deploy.transport.Transport``.
* ``robotrl.deploy.fake_robot.FakeRobot``: in-process and deterministic, for tests (no DDS).

Shapes and conventions (``A`` = number of policy joints, ``len(joint_names)``):

* every command is ``(A,)`` float64 in the policy's joint order (the spec's ``joint_names``);
  the robot maps it to its controller's order itself;
* times are seconds of the node's monotonic clock;
* ``get_observation().state`` is a ``robotrl.deploy.observation.RobotState``: joint positions
  and velocities ``(A,)``, orientation ``(4,)`` (w, x, y, z), angular velocity, base position
  and linear velocity ``(3,)``, velocity command ``(2,)``, each validated against the robot
  profile's input thresholds before it is accepted.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from robotrl.deploy.observation import RobotState
from robotrl.deploy.profile import RobotProfile

# Inputs a robot may deliver: state inputs (validated into RobotState) and operator inputs.
STATE_INPUTS = ("joint_states", "imu", "odom", "cmd_vel", "scan", "route", "object_pose", "goal_pose", "object_box")
OPERATOR_INPUTS = ("estop", "arm")


@dataclass
class Received:
    """One raw input message, as it arrived (kept for recording, including dropped ones).

    Attributes:
        name: input name, one of ``STATE_INPUTS + OPERATOR_INPUTS``.
        topic: where it came from (the ROS topic for ``TopicRobot``).
        arrival: monotonic arrival time (s).
        msg: the ``robotrl.deploy.msgs`` struct.
        accepted: for state inputs, whether validation accepted it into the state; None for
            operator inputs (``estop``: ``std_msgs/Bool``, ``data`` true = stop pressed;
            ``arm``: ``std_msgs/Bool``, ``data`` true = arm request).

    """

    name: str
    topic: str
    arrival: float
    msg: Any
    accepted: bool | None = None


@dataclass
class RobotInputs:
    """What ``Robot.get_observation`` returns.

    Attributes:
        state: the latest validated inputs (shared and updated in place by the robot).
        received: raw messages since the previous call, oldest first.

    """

    state: RobotState
    received: list[Received] = field(default_factory=list)


class Robot(abc.ABC):
    """A robot the policy node can drive (module docstring).

    Subclasses implement ``connect``, ``disconnect``, ``_receive`` and ``_write``;
    ``get_observation`` and ``send_action`` are shared so that every robot validates and
    clips the same way.

    Attributes:
        profile: the validated robot profile (joints, limits, thresholds, topics).
        joint_names: ``(A,)`` policy joint order of every command and state vector.
        state: the latest validated inputs.
        command_topic: where commands go (the profile's ``output.topic``, remapped).
        last_message: the controller message of the last ``send_action`` (None before).

    """

    def __init__(self, profile: RobotProfile, policy_joints: list[str]) -> None:
        self.profile = profile
        self.joint_names = list(policy_joints)
        self.state = RobotState(profile, self.joint_names)
        lo, hi = command_range(profile, self.joint_names)
        self._lo, self._hi = lo, hi
        self.command_topic = profile.output.topic
        self.last_message: Any = None
        self._connected = False

    @property
    def name(self) -> str:
        """The robot profile's name."""
        return self.profile.name

    @property
    def is_connected(self) -> bool:
        """True between ``connect()`` and ``disconnect()``."""
        return self._connected

    @abc.abstractmethod
    def connect(self) -> None:
        """Open the link to the robot (subscriptions, publishers, hardware handles)."""

    @abc.abstractmethod
    def disconnect(self) -> None:
        """Close the link; commands are no longer sent."""

    @abc.abstractmethod
    def _receive(self) -> list[tuple[str, float, Any]]:
        """``(input name, arrival time, message)`` received since the last call, oldest first."""

    @abc.abstractmethod
    def _write(self, command: np.ndarray) -> Any:
        """Send ``command`` ``(A,)`` (already validated and clipped); return the controller message sent."""

    @abc.abstractmethod
    def topic_of(self, name: str) -> str:
        """Where input ``name`` comes from (a ROS topic for ``TopicRobot``)."""

    def _require_connected(self, what: str) -> None:
        if not self._connected:
            raise RuntimeError(f"{type(self).__name__} {self.name!r}: {what} before connect(); call connect() first.")

    def get_observation(self) -> RobotInputs:
        """Validate every message received since the last call into ``state``; return both.

        Raises:
            RuntimeError: when not connected.

        """
        self._require_connected("get_observation()")
        ingest = {"joint_states": self.state.ingest_joint_state, "imu": self.state.ingest_imu,
                  "odom": self.state.ingest_odom, "cmd_vel": self.state.ingest_cmd_vel,
                  "scan": self.state.ingest_scan, "route": self.state.ingest_route,
                  "object_pose": self.state.ingest_object_pose, "goal_pose": self.state.ingest_goal_pose,
                  "object_box": self.state.ingest_object_box}
        received = []
        for name, arrival, msg in self._receive():
            accepted = ingest[name](msg, arrival) if name in ingest else None
            received.append(Received(name, self.topic_of(name), arrival, msg, accepted))
        return RobotInputs(self.state, received)

    def send_action(self, command: np.ndarray) -> np.ndarray:
        """Clip ``command`` ``(A,)`` to the robot's command range and send it.

        The range is the profile's position limits (position kind), effort limits (torque
        kind) or velocity limits (velocity kind). The safety chain already keeps commands
        inside it; this is the last line, as in LeRobot.

        Returns:
            ``(A,)`` float64: the command actually sent.

        Raises:
            ValueError: for a command of the wrong shape or with NaN/Inf (nothing is sent).
            RuntimeError: when not connected.

        """
        self._require_connected("send_action()")
        cmd = np.asarray(command, dtype=np.float64)
        if cmd.shape != self._lo.shape:
            raise ValueError(f"send_action: command has shape {cmd.shape}; robot {self.name!r} takes "
                             f"{self._lo.shape} (one entry per policy joint, in joint_names order).")
        if not np.all(np.isfinite(cmd)):
            raise ValueError(f"send_action: command {cmd.tolist()} has NaN/Inf; nothing was sent. Send the "
                             "safety chain's output (SafetyChain.step), which is always finite.")
        sent = np.clip(cmd, self._lo, self._hi)
        self.last_message = self._write(sent)
        return sent


def command_range(profile: RobotProfile, policy_joints: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` ``(A,)`` bounds of a command in policy joint order, for the profile's command kind."""
    index = {n: i for i, n in enumerate(profile.joints.names)}
    order = [index[n] for n in policy_joints]
    if profile.command_kind == "position":
        lo, hi = profile.limits()
        return lo[order], hi[order]
    key = "effort_limits" if profile.command_kind == "torque" else "velocity_limits"
    bound = np.asarray(getattr(profile.joints, key), dtype=np.float64)[order]
    return -bound, bound


class Telemetry(abc.ABC):
    """Where the node reports: status and debug vectors (ROS topics, or memory in tests).

    Keys: ``status`` (``diagnostic_msgs/DiagnosticArray``) and ``observation``, ``action``,
    ``command``, ``timing`` (``std_msgs/Float64MultiArray``).
    """

    KEYS = ("status", "observation", "action", "command", "timing")

    @abc.abstractmethod
    def publish(self, key: str, msg: Any) -> None:
        """Report ``msg`` under ``key`` (one of ``KEYS``)."""

    @abc.abstractmethod
    def topic(self, key: str) -> str:
        """The topic name of ``key`` (what the recorder files it under)."""

    def flush(self, timeout: float = 1.0) -> bool:
        """Wait up to ``timeout`` s until reliable readers acknowledged what was published (True if so)."""
        return True
