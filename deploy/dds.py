"""Cyclone DDS transport that speaks ROS 2's wire conventions without a ROS install.

ROS topic ``/x/y`` is DDS topic ``rt/x/y``; types are the ``pkg::msg::dds_::T_`` structs
of ``robotrl.deploy.msgs`` (XCDR1, final, keyless); the domain is ``ROS_DOMAIN_ID``.
Endpoint USER_DATA carries ``typehash=RIHS01_<hex>;`` as Jazzy publishes it, when
``rosbags`` can compute the hash.

Every transport appends robotrl's Cyclone settings to the process's ``CYCLONEDDS_URI``
(``robotrl.deploy.interop``): ``IgnoreTypeInformation``, without which no message with a
sequence or an array flows to or from Fast DDS 3 (the default RMW of stock ROS 2), and with
``localhost_only=True`` the loopback interface with unicast peers (no multicast), like
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``. A user's own URI is kept (merged, never
replaced). Cyclone reads the variable when the process creates its first participant on a
domain, so the choice is per process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from robotrl.deploy.interop import apply_cyclone_settings, cyclone_settings
from robotrl.deploy.msgs import ros_type_of
from robotrl.deploy.transport import COMMAND_QOS, SENSOR_QOS, Publisher, Qos, Subscription, Transport

try:
    from cyclonedds.core import GuardCondition, InstanceState, ReadCondition, SampleState, ViewState, WaitSet
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy
    from cyclonedds.qos import Qos as DdsQos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("The Cyclone DDS transport needs cyclonedds: pip install robotrl[deploy]") from exc

log = logging.getLogger(__name__)

# robotrl's loopback + type-compatibility fragment (robotrl.deploy.interop); tests pin it
LOCALHOST_CONFIG = cyclone_settings(True)

_TYPEHASH_CACHE: dict[str, bytes] = {}


def dds_topic_name(topic: str) -> str:
    """``/joint_states`` -> ``rt/joint_states`` (ROS 2 topic mangling)."""
    if not topic.startswith("/"):
        raise ValueError(f"Topic {topic!r} must be fully qualified (start with '/').")
    return "rt" + topic


def type_hash_user_data(ros_type: str) -> bytes:
    """``typehash=RIHS01_<hex>;`` for endpoint USER_DATA, or b"" if rosbags is missing."""
    if ros_type not in _TYPEHASH_CACHE:
        try:
            from rosbags.typesys import Stores, get_typestore

            store = get_typestore(Stores.ROS2_JAZZY)
            _TYPEHASH_CACHE[ros_type] = f"typehash={store.hash_rihs01(ros_type)};".encode()
        except (ImportError, KeyError) as exc:
            log.debug("no type hash for %s: %s", ros_type, exc)
            _TYPEHASH_CACHE[ros_type] = b""
    return _TYPEHASH_CACHE[ros_type]


def _dds_qos(qos: Qos, user_data: bytes) -> DdsQos:
    policies = [
        (Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)) if qos.reliable
         else Policy.Reliability.BestEffort),
        Policy.History.KeepLast(qos.depth),
        Policy.Durability.TransientLocal if qos.transient_local else Policy.Durability.Volatile,
    ]
    if user_data:
        policies.append(Policy.Userdata(user_data))
    return DdsQos(*policies)


class _DdsPublisher(Publisher):
    def __init__(self, writer: DataWriter) -> None:
        self._writer = writer

    def publish(self, msg: Any) -> None:
        self._writer.write(msg)

    def matched(self) -> int:
        return self._writer.get_publication_matched_status().current_count

    def flush(self, timeout: float = 1.0) -> bool:
        return bool(self._writer.wait_for_acks(duration(seconds=timeout)))


class _DdsSubscription(Subscription):
    """A reader whose samples the receive thread takes and stamps on arrival.

    They wait in a queue (at most ``depth``) until the control loop polls.
    """

    def __init__(self, reader: DataReader, msg_type: type, depth: int) -> None:
        self._reader, self._type = reader, msg_type
        self._queue: deque = deque(maxlen=max(depth, 1))
        self._lock = threading.Lock()
        self.condition = ReadCondition(reader, ViewState.Any | SampleState.NotRead | InstanceState.Any)

    def drain(self, now: float) -> None:
        samples = self._reader.take(64, condition=self.condition)
        with self._lock:
            # invalid samples (dispose/unregister notifications) carry no data
            self._queue.extend((now, s) for s in samples if isinstance(s, self._type))

    def take(self) -> list[tuple[float, Any]]:
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
        return out

    def matched(self) -> int:
        return self._reader.get_subscription_matched_status().current_count


class CycloneTransport(Transport):
    """ROS 2-compatible transport over the PyPI ``cyclonedds`` binding (see module docstring)."""

    name = "cyclonedds"

    def __init__(self, domain_id: int = 0, localhost_only: bool = False) -> None:
        apply_cyclone_settings(localhost_only)  # merged into the user's CYCLONEDDS_URI, never replacing it
        self.domain_id = domain_id
        # None once closed (close() drops it so the binding deletes the DDS entities)
        self.participant: DomainParticipant | None = DomainParticipant(domain_id)
        self._topics: dict[str, Topic] = {}
        self._waitset = WaitSet(self.participant)
        self._wake = GuardCondition(self.participant)
        self._waitset.attach(self._wake)
        self._subs: list[_DdsSubscription] = []
        self._subs_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closing = False

    def _live_participant(self) -> DomainParticipant:
        if self.participant is None:
            raise RuntimeError("this CycloneTransport is closed: create a new one for new endpoints")
        return self.participant

    def _topic(self, topic: str, msg_type: type) -> Topic:
        name = dds_topic_name(topic)
        if name not in self._topics:
            self._topics[name] = Topic(self._live_participant(), name, msg_type)
        return self._topics[name]

    def publisher(self, topic: str, msg_type: type, qos: Qos = COMMAND_QOS) -> Publisher:
        """A DataWriter on ``rt<topic>``."""
        user_data = type_hash_user_data(ros_type_of(msg_type))
        writer = DataWriter(self._live_participant(), self._topic(topic, msg_type), _dds_qos(qos, user_data))
        return _DdsPublisher(writer)

    def subscription(self, topic: str, msg_type: type, qos: Qos = SENSOR_QOS) -> Subscription:
        """A DataReader on ``rt<topic>``."""
        user_data = type_hash_user_data(ros_type_of(msg_type))
        reader = DataReader(self._live_participant(), self._topic(topic, msg_type), _dds_qos(qos, user_data))
        sub = _DdsSubscription(reader, msg_type, qos.depth)
        with self._subs_lock:
            self._waitset.attach(sub.condition)
            self._subs.append(sub)
        if self._thread is None:
            self._thread = threading.Thread(target=self._receive, name="dds-receive", daemon=True)
            self._thread.start()
        return sub

    def _receive(self) -> None:
        """Receive thread: block in the WaitSet (GIL released), stamp and queue arrivals."""
        while not self._closing:
            self._waitset.wait(duration(milliseconds=50))
            now = time.monotonic()
            with self._subs_lock:
                subs = list(self._subs)
            for sub in subs:
                sub.drain(now)

    def close(self) -> None:
        """Stop the receive thread, then delete the participant and everything it owns."""
        self._closing = True
        self._wake.set(True)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._subs.clear()
        self._topics.clear()
        self.participant = None  # the binding deletes the DDS entities when collected
