"""Transport contract: how the deploy runtime publishes and takes ROS 2 messages.

Two implementations sit behind it: ``CycloneTransport`` (``robotrl.deploy.dds``, plain
Cyclone DDS speaking the ROS 2 wire conventions, no ROS install needed) and
``RclpyTransport`` (``robotrl.deploy.ros2``: ``pip install 'robotrl[ros2]'`` or a sourced ROS 2). ``make_transport``
picks rclpy when ``import rclpy`` works, unless told otherwise.

Messages are the structs of ``robotrl.deploy.msgs`` on both transports. Topic names are
ROS names (``/joint_states``); the DDS transport adds the ``rt`` prefix itself.
Subscriptions are polled (``take``) by the node's control loop: the middleware's own thread
(Cyclone's wait set, rclpy's executor) stamps arrivals and queues them, so the loop never
blocks on the middleware and sees inputs in one place at one instant.
"""

from __future__ import annotations

import abc
import importlib.util
import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Qos:
    """The QoS subset the deploy path uses.

    Attributes:
        reliable: RELIABLE (True) or BEST_EFFORT (False).
        depth: KEEP_LAST depth.
        transient_local: TRANSIENT_LOCAL durability instead of VOLATILE.

    """

    reliable: bool = True
    depth: int = 1
    transient_local: bool = False


# Readers of sensor data: BEST_EFFORT matches both BEST_EFFORT and RELIABLE writers.
SENSOR_QOS = Qos(reliable=False, depth=8)
# Writers to ros2_control: the system default under Cyclone (RELIABLE, VOLATILE, KEEP_LAST 1).
COMMAND_QOS = Qos(reliable=True, depth=1)
# Debug/status topics and anything the recorder or tests must not miss.
RELIABLE_QOS = Qos(reliable=True, depth=32)


class Publisher(abc.ABC):
    """Writes messages of one type to one topic."""

    @abc.abstractmethod
    def publish(self, msg: Any) -> None:
        """Send ``msg`` (a ``robotrl.deploy.msgs`` struct)."""

    @abc.abstractmethod
    def matched(self) -> int:
        """Number of matched subscriptions (discovery check)."""

    def flush(self, timeout: float = 1.0) -> bool:
        """Wait up to ``timeout`` s until every RELIABLE reader acknowledged what was sent (before closing)."""
        return True


class Subscription(abc.ABC):
    """Receives messages of one type from one topic; polled by the owner."""

    @abc.abstractmethod
    def take(self) -> list[tuple[float, Any]]:
        """``(arrival time, message)`` pairs received since the last call, oldest first.

        At most the QoS depth are kept; the arrival time is ``time.monotonic()`` when the
        middleware delivered the message.
        """

    @abc.abstractmethod
    def matched(self) -> int:
        """Number of matched publishers (discovery check)."""


class Transport(abc.ABC):
    """Factory of publishers and subscriptions on one ROS 2 domain."""

    name: str = "abstract"

    @abc.abstractmethod
    def publisher(self, topic: str, msg_type: type, qos: Qos = COMMAND_QOS) -> Publisher:
        """A publisher of ``msg_type`` on ROS topic ``topic``."""

    @abc.abstractmethod
    def subscription(self, topic: str, msg_type: type, qos: Qos = SENSOR_QOS) -> Subscription:
        """A subscription to ``msg_type`` on ROS topic ``topic``."""

    def spin_once(self) -> None:  # noqa: B027 - optional hook, a no-op unless the middleware needs it
        """Let the middleware deliver pending messages (rclpy needs it; DDS does not)."""

    def receive_threads(self) -> list[threading.Thread]:
        """The threads that deliver messages to the subscriptions.

        The node raises them to its ``rt_priority`` with the control loop, so that a real-time loop
        never waits for the GIL held by a receive thread that the scheduler starved.
        """
        thread = getattr(self, "_thread", None)
        return [thread] if isinstance(thread, threading.Thread) and thread.is_alive() else []

    @abc.abstractmethod
    def close(self) -> None:
        """Release every entity."""


def rclpy_available() -> bool:
    """True when ``import rclpy`` would work (``robotrl[ros2]`` or a sourced ROS 2 install)."""
    return importlib.util.find_spec("rclpy") is not None


def make_transport(kind: str = "auto", domain_id: int = 0, localhost_only: bool = False,
                   node_name: str = "robotrl", namespace: str = "/", parameters: dict[str, Any] | None = None
                   ) -> Transport:
    """Build a transport: ``auto`` (rclpy if importable, else Cyclone DDS), ``rclpy`` or ``cyclonedds``.

    ``node_name``, ``namespace`` and ``parameters`` (declared as ROS parameters) apply to rclpy.

    Raises:
        ValueError: for an unknown ``kind``.

    """
    if kind not in ("auto", "rclpy", "cyclonedds"):
        raise ValueError(f"transport={kind!r} is not one of auto, rclpy, cyclonedds.")
    if kind == "rclpy" or (kind == "auto" and rclpy_available()):
        from robotrl.deploy.ros2 import RclpyTransport

        log.info("transport: rclpy (domain %d)", domain_id)
        return RclpyTransport(node_name, domain_id=domain_id, localhost_only=localhost_only, namespace=namespace,
                              parameters=parameters)
    from robotrl.deploy.dds import CycloneTransport

    log.info("transport: Cyclone DDS (domain %d%s)", domain_id, ", localhost only" if localhost_only else "")
    return CycloneTransport(domain_id=domain_id, localhost_only=localhost_only)
