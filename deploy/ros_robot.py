"""A robot behind ROS 2 topics (``robotrl.deploy.robot`` contract) and the node's status topics.

``TopicRobot`` subscribes to the profile's input topics (``joint_states``, ``imu``,
``odom``, ``cmd_vel``, ``scan``, ``object_pose`` with BEST_EFFORT readers; ``estop``, ``arm`` RELIABLE;
``route``, ``goal_pose``, ``object_box`` RELIABLE and TRANSIENT_LOCAL) and publishes
each command through the profile's output adapter (``robotrl.deploy.outputs``) with the
system-default QoS that ros2_control controllers expect. ``TopicTelemetry`` publishes the
status and the debug vectors. Both work over any ``Transport`` (Cyclone DDS or rclpy); the
transport's owner closes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.outputs import OutputAdapter
from robotrl.deploy.profile import RobotProfile
from robotrl.deploy.robot import Robot, Telemetry
from robotrl.deploy.transport import COMMAND_QOS, RELIABLE_QOS, SENSOR_QOS, Qos, Subscription, Transport

# A route (and a goal pose or object box) is published once and latched (as map_server does for /map):
# TRANSIENT_LOCAL, so a node started later still gets it.
ROUTE_QOS = Qos(reliable=True, depth=1, transient_local=True)


def _identity(topic: str) -> str:
    return topic


class TopicRobot(Robot):
    """A robot whose inputs and commands are ROS 2 topics (module docstring).

    Args:
        profile: the robot profile (topics, output adapter, limits).
        policy_joints: ``(A,)`` policy joint order.
        required: state inputs the policy needs (``robotrl.deploy.observation.required_inputs``
            plus ``static_inputs``); each must have a topic in the profile.
        transport: the ROS 2 transport to use.
        period: control period (s), for the trajectory adapter's ``time_from_start``.
        remap: topic remapping (``-r /from:=/to``), identity by default.

    Raises:
        ValueError: when a required input has no topic in the profile.

    """

    def __init__(self, profile: RobotProfile, policy_joints: list[str], required: list[str], transport: Transport,
                 period: float, remap: Callable[[str], str] = _identity) -> None:
        super().__init__(profile, policy_joints)
        t = profile.topics
        self.topics = {"joint_states": remap(t.joint_states), "imu": remap(t.imu), "odom": remap(t.odom),
                       "cmd_vel": remap(t.cmd_vel), "estop": remap(t.estop), "arm": remap(t.arm),
                       "scan": remap(t.scan), "route": remap(t.route), "object_pose": remap(t.object_pose),
                       "goal_pose": remap(t.goal_pose), "object_box": remap(t.object_box)}
        for name in required:
            if not self.topics[name]:
                raise ValueError(f"The policy needs {name} but robot profile {profile.name!r} sets topics.{name} "
                                 "empty; set it to the robot's topic.")
        self.types = {"joint_states": msgs.JointState, "imu": msgs.Imu, "odom": msgs.Odometry,
                      "cmd_vel": msgs.TwistStamped if t.cmd_vel_stamped else msgs.Twist,
                      "estop": msgs.Bool, "arm": msgs.Bool, "scan": msgs.LaserScan, "route": msgs.Path,
                      "object_pose": msgs.PoseStamped, "goal_pose": msgs.PoseStamped,
                      "object_box": msgs.Float64MultiArray}
        self.wanted = [n for n in (*required, "cmd_vel", "estop", "arm") if self.topics[n]]
        self.output = OutputAdapter(profile, self.joint_names, period)
        self.command_topic = remap(profile.output.topic)
        self.transport = transport
        self._subs: dict[str, Subscription] = {}
        self._pub: Any = None

    def connect(self) -> None:
        """Create the input subscriptions and the command publisher."""
        tr = self.transport
        qos = {"estop": RELIABLE_QOS, "arm": RELIABLE_QOS, "route": ROUTE_QOS, "goal_pose": ROUTE_QOS,
               "object_box": ROUTE_QOS}
        self._subs = {name: tr.subscription(self.topics[name], self.types[name], qos.get(name, SENSOR_QOS))
                      for name in self.wanted}
        self._pub = tr.publisher(self.command_topic, self.output.msg_type, COMMAND_QOS)
        self._connected = True

    def disconnect(self) -> None:
        """Stop sending; the endpoints go with the transport, which its owner closes."""
        self._connected = False
        self._subs, self._pub = {}, None

    def topic_of(self, name: str) -> str:
        """The (remapped) ROS topic of input ``name``."""
        return self.topics[name]

    def _receive(self) -> list[tuple[str, float, Any]]:
        self.transport.spin_once()
        return [(name, arrival, msg) for name, sub in self._subs.items() for arrival, msg in sub.take()]

    def _write(self, command: np.ndarray) -> Any:
        msg = self.output.message(command, time.time())
        self._pub.publish(msg)
        return msg

    def matched(self) -> dict[str, int]:
        """Matched peers per input and for ``command`` (discovery check)."""
        counts = {name: sub.matched() for name, sub in self._subs.items()}
        if self._pub is not None:
            counts["command"] = self._pub.matched()
        return counts


class TopicTelemetry(Telemetry):
    """Status on the profile's ``topics.status``, debug vectors under ``topics.debug_prefix`` (RELIABLE)."""

    def __init__(self, profile: RobotProfile, transport: Transport, remap: Callable[[str], str] = _identity) -> None:
        prefix = profile.topics.debug_prefix.rstrip("/")
        self.topics = {k: f"{prefix}/{k}" for k in ("observation", "action", "command", "timing")}
        self.topics["status"] = remap(profile.topics.status)
        self._pubs = {k: transport.publisher(v, msgs.DiagnosticArray if k == "status" else msgs.Float64MultiArray,
                                             RELIABLE_QOS) for k, v in self.topics.items()}

    def publish(self, key: str, msg: Any) -> None:
        """Publish ``msg`` on the topic of ``key``."""
        self._pubs[key].publish(msg)

    def topic(self, key: str) -> str:
        """The topic of ``key``."""
        return self.topics[key]

    def flush(self, timeout: float = 1.0) -> bool:
        """Wait until the status readers acknowledged the last status (the final one, at shutdown)."""
        return self._pubs["status"].flush(timeout)
