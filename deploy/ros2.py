"""rclpy transport: the same ``Transport`` contract on a ROS 2 install (chosen when rclpy imports).

Messages cross the boundary as ``robotrl.deploy.msgs`` structs and are converted field by
field, by name, to and from the generated rclpy classes, so the node code is identical on
both transports. rclpy is not on PyPI: this module is exercised only where ROS 2 is
sourced (the test suite here runs the Cyclone DDS transport; see deploy/README.md).
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections import deque
from typing import Any

from robotrl.deploy import msgs
from robotrl.deploy.transport import COMMAND_QOS, SENSOR_QOS, Publisher, Qos, Subscription, Transport

log = logging.getLogger(__name__)


def _rclpy() -> Any:
    try:
        import rclpy
    except ImportError as exc:
        raise ImportError("transport=rclpy needs a sourced ROS 2 install (rclpy is not on PyPI); "
                          "use transport=cyclonedds (pip install robotrl[deploy])") from exc
    return rclpy


def ros_class(ros_type: str) -> type:
    """The generated rclpy class of ``pkg/msg/Name``."""
    pkg, _, name = ros_type.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


def _ros_type_of(obj: Any) -> str | None:
    module = type(obj).__module__.split(".")
    if len(module) >= 2 and module[1] == "msg":
        return f"{module[0]}/msg/{type(obj).__name__}"
    return None


def to_rclpy(msg: Any) -> Any:
    """Convert a ``robotrl.deploy.msgs`` struct to its rclpy message."""
    out = ros_class(msg.ros_type)()
    for name in msg.__dataclass_fields__:
        value = getattr(msg, name)
        if hasattr(value, "ros_type"):
            value = to_rclpy(value)
        elif isinstance(value, list) and value and hasattr(value[0], "ros_type"):
            value = [to_rclpy(v) for v in value]
        setattr(out, name, value)
    return out


def from_rclpy(obj: Any) -> Any:
    """Convert an rclpy message to the ``robotrl.deploy.msgs`` struct of the same type."""
    ros_type = _ros_type_of(obj)
    if ros_type is None:
        if isinstance(obj, (list, tuple)) or hasattr(obj, "tolist"):
            return [from_rclpy(v) for v in obj]
        return obj
    cls = msgs.lookup(ros_type)
    values = {}
    for name in cls.__dataclass_fields__:
        value = getattr(obj, name)
        if isinstance(value, (bytes, bytearray)):
            value = list(value)
        values[name] = from_rclpy(value)
    return cls(**values)


def _qos(qos: Qos) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.transient_local else DurabilityPolicy.VOLATILE,
    )


class _RclpyPublisher(Publisher):
    def __init__(self, pub: Any) -> None:
        self._pub = pub

    def publish(self, msg: Any) -> None:
        self._pub.publish(to_rclpy(msg))

    def matched(self) -> int:
        return self._pub.get_subscription_count()


class _RclpySubscription(Subscription):
    def __init__(self, node: Any, topic: str, msg_type: type, qos: Qos) -> None:
        self._queue: deque = deque(maxlen=max(qos.depth, 1))
        self._node, self._topic = node, topic
        self._sub = node.create_subscription(ros_class(msg_type.ros_type), topic,
                                             lambda m: self._queue.append((time.monotonic(), m)), _qos(qos))

    def take(self) -> list[tuple[float, Any]]:
        # arrival = when spin_once delivered it (rclpy runs callbacks in the control loop)
        out = [(t, from_rclpy(m)) for t, m in self._queue]
        self._queue.clear()
        return out

    def matched(self) -> int:
        return self._node.count_publishers(self._topic)


class RclpyTransport(Transport):
    """ROS 2 transport through rclpy; one node, spun by ``spin_once`` from the control loop."""

    name = "rclpy"

    def __init__(self, node_name: str, domain_id: int = 0, localhost_only: bool = False) -> None:
        rclpy = _rclpy()
        if localhost_only:
            os.environ["ROS_LOCALHOST_ONLY"] = "1"
            os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self._context = rclpy.context.Context()
        rclpy.init(context=self._context, domain_id=domain_id)
        self.node = rclpy.create_node(node_name, context=self._context)
        self._executor = rclpy.executors.SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self.node)

    def publisher(self, topic: str, msg_type: type, qos: Qos = COMMAND_QOS) -> Publisher:
        """An rclpy publisher."""
        return _RclpyPublisher(self.node.create_publisher(ros_class(msg_type.ros_type), topic, _qos(qos)))

    def subscription(self, topic: str, msg_type: type, qos: Qos = SENSOR_QOS) -> Subscription:
        """An rclpy subscription whose callback only queues (drained by ``take``)."""
        return _RclpySubscription(self.node, topic, msg_type, qos)

    def spin_once(self) -> None:
        """Deliver pending callbacks without blocking (a bounded number per call)."""
        for _ in range(64):
            self._executor.spin_once(timeout_sec=0.0)

    def close(self) -> None:
        """Destroy the node and shut the context down."""
        self._executor.shutdown()
        self.node.destroy_node()
        self._context.try_shutdown()
