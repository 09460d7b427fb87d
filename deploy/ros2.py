"""rclpy transport: the same ``Transport`` contract on ROS 2 (chosen by ``auto`` when rclpy imports).

ROS 2 Kilted installs from PyPI (``pip install 'robotrl[ros2]'``); any sourced ROS 2 install works
the same way. The node is a real rclpy node: it shows in ``ros2 node list``, and its parameters
are declared on it (``ros2 param get /robotrl_deploy policy``).

Conversions go through each message's real field types (``get_fields_and_field_types``), one
compiled plan per message class:

* ``double[N]`` fixed-size arrays are numpy arrays on the rclpy side (``.tolist()`` on the way in);
* ``sequence<double>`` is ``array.array('d')``; ``sequence<uint8>`` is ``array.array('B')``;
* ``octet`` (ROS ``byte``, e.g. ``DiagnosticStatus.level``) is ``bytes`` of length 1;
* integers and floats are cast to ``int`` and ``float``, so ``ROS_PYTHON_CHECK_FIELDS=1`` holds.

Spinning: a ``SingleThreadedExecutor`` runs on its own thread (``rclpy-spin``) and blocks in the
rcl wait set with the GIL released. Subscription callbacks stamp the arrival time, convert the
message and queue it; the control loop only takes from the queue, so it never blocks on rclpy
(``spin_once`` is a no-op here).

Loopback: ``localhost_only=True`` sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and, with
the Fast DDS RMW, points ``FASTDDS_DEFAULT_PROFILES_FILE`` at robotrl's loopback profile
(``robotrl.deploy.interop``) unless you set one yourself (yours is kept, with a warning).
"""

from __future__ import annotations

import array
import importlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.transport import COMMAND_QOS, SENSOR_QOS, Publisher, Qos, Subscription, Transport

log = logging.getLogger(__name__)

_INT_TYPES = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "char"}
_FLOAT_TYPES = {"float", "double"}
_ARRAY_CODES = {"double": "d", "float": "f", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
                "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q"}
_ROS_PROFILE_FILE: str | None = None


class RosMessageClass(Protocol):
    """What this module uses of an rclpy (rosidl_generator_py) message class."""

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        """Field name -> ROS IDL type (``double[3]``, ``sequence<double>``, ``std_msgs/Header``)."""
        ...


def _rclpy() -> Any:
    try:
        import rclpy
        import rclpy.executors
        import rclpy.parameter
    except ImportError as exc:
        raise ImportError("transport=rclpy needs rclpy: pip install 'robotrl[ros2]' (ROS 2 Kilted wheels) "
                          "or source a ROS 2 install; or use transport:=cyclonedds.") from exc
    return rclpy


def ros_class(ros_type: str) -> type[RosMessageClass]:
    """The generated rclpy class of ``pkg/msg/Name``."""
    pkg, _, name = ros_type.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


def _field_plan(ros_cls: type[RosMessageClass]) -> list[tuple[str, str, str]]:
    """``(field, kind, element type)`` per field, from the class's own field types.

    Kinds: ``msg`` (nested), ``msgseq`` (sequence of messages), ``octet``, ``int``, ``float``,
    ``bool``, ``str``, ``numseq`` (numeric sequence or fixed array), ``strseq``, ``other``.
    """
    plan = []
    for name, typ in ros_cls.get_fields_and_field_types().items():
        base, is_seq = typ, False
        if typ.startswith("sequence<"):
            base, is_seq = typ[len("sequence<"):-1].split(",")[0], True
        elif typ.endswith("]") and "[" in typ:
            base, is_seq = typ[:typ.index("[")], True
        if "/" in base:
            kind = "msgseq" if is_seq else "msg"
            base = base.replace("/", "/msg/", 1) if "/msg/" not in base else base
        elif base in ("octet", "byte"):
            kind = "octetseq" if is_seq else "octet"
        elif base in _INT_TYPES or base in _FLOAT_TYPES:
            kind = "numseq" if is_seq else ("float" if base in _FLOAT_TYPES else "int")
        elif base == "boolean":
            kind = "boolseq" if is_seq else "bool"
        elif base.startswith("string") or base.startswith("wstring"):
            kind = "strseq" if is_seq else "str"
        else:
            kind = "other"
        plan.append((name, kind, base))
    return plan


_PLANS: dict[type[RosMessageClass], list[tuple[str, str, str]]] = {}
_CLASSES: dict[str, type[RosMessageClass]] = {}


def _plan(ros_cls: type[RosMessageClass]) -> list[tuple[str, str, str]]:
    plan = _PLANS.get(ros_cls)
    if plan is None:
        plan = _PLANS[ros_cls] = _field_plan(ros_cls)
    return plan


def _cls(ros_type: str) -> type[RosMessageClass]:
    cls = _CLASSES.get(ros_type)
    if cls is None:
        cls = _CLASSES[ros_type] = ros_class(ros_type)
    return cls


def to_rclpy(msg: Any, ros_cls: type[RosMessageClass] | None = None) -> Any:
    """Convert a ``robotrl.deploy.msgs`` struct to its rclpy message, field by field by real type.

    Raises:
        TypeError: for a field whose value cannot take the ROS field type.

    """
    ros_cls = ros_cls or _cls(msg.ros_type)
    out = ros_cls()
    for name, kind, base in _plan(ros_cls):
        value = getattr(msg, name)
        if kind == "msg":
            value = to_rclpy(value, _cls(base))
        elif kind == "msgseq":
            cls = _cls(base)
            value = [to_rclpy(v, cls) for v in value]
        elif kind == "float":
            value = float(value)
        elif kind == "int":
            value = int(value)
        elif kind == "bool":
            value = bool(value)
        elif kind == "octet":
            value = bytes([int(value) & 0xFF]) if not isinstance(value, (bytes, bytearray)) else bytes(value)
        elif kind == "numseq":
            value = array.array(_ARRAY_CODES[base], value) if not _is_fixed(ros_cls, name) else \
                np.asarray(value, dtype=np.float64 if base in _FLOAT_TYPES else None)
        elif kind == "octetseq":
            value = [bytes([int(v) & 0xFF]) for v in value]
        elif kind == "strseq":
            value = [str(v) for v in value]
        elif kind == "boolseq":
            value = [bool(v) for v in value]
        setattr(out, name, value)
    return out


_FIXED: dict[tuple[type[RosMessageClass], str], bool] = {}


def _is_fixed(ros_cls: type[RosMessageClass], name: str) -> bool:
    key = (ros_cls, name)
    if key not in _FIXED:
        typ = ros_cls.get_fields_and_field_types()[name]
        _FIXED[key] = typ.endswith("]") and not typ.startswith("sequence<")
    return _FIXED[key]


def from_rclpy(obj: Any, cls: type | None = None) -> Any:
    """Convert an rclpy message to the ``robotrl.deploy.msgs`` struct of the same type.

    Fixed-size arrays (numpy) and numeric sequences (``array.array``) become lists of Python
    numbers, ``octet`` fields become ints.
    """
    ros_cls = type(obj)
    if cls is None:
        module = ros_cls.__module__.split(".")
        cls = msgs.lookup(f"{module[0]}/msg/{ros_cls.__name__}")
    values = {}
    for name, kind, base in _plan(ros_cls):
        value = getattr(obj, name)
        if kind == "msg":
            value = from_rclpy(value, msgs.lookup(base))
        elif kind == "msgseq":
            sub = msgs.lookup(base)
            value = [from_rclpy(v, sub) for v in value]
        elif kind == "numseq":
            value = value.tolist() if hasattr(value, "tolist") else list(value)
        elif kind == "octet":
            value = value[0] if isinstance(value, (bytes, bytearray)) else int(value)
        elif kind == "octetseq":
            value = [v[0] if isinstance(v, (bytes, bytearray)) else int(v) for v in value]
        elif kind in ("strseq", "boolseq"):
            value = list(value)
        values[name] = value
    return cls(**values)


def _qos(qos: Qos) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.transient_local else DurabilityPolicy.VOLATILE,
    )


class _RclpyPublisher(Publisher):
    def __init__(self, pub: Any, ros_cls: type[RosMessageClass]) -> None:
        self._pub, self._cls = pub, ros_cls

    def publish(self, msg: Any) -> None:
        self._pub.publish(to_rclpy(msg, self._cls))

    def matched(self) -> int:
        return self._pub.get_subscription_count()

    def flush(self, timeout: float = 1.0) -> bool:
        from rclpy.duration import Duration

        return bool(self._pub.wait_for_all_acked(Duration(nanoseconds=int(timeout * 1e9))))


class _RclpySubscription(Subscription):
    """Callback (on the spin thread) stamps, converts and queues; ``take`` drains the queue."""

    def __init__(self, node: Any, topic: str, msg_type: type, qos: Qos) -> None:
        self._queue: deque = deque(maxlen=max(qos.depth, 1))
        self._lock = threading.Lock()
        self._node, self._topic, self._type = node, node.resolve_topic_name(topic), msg_type
        self._error: Exception | None = None
        self._sub = node.create_subscription(_cls(msgs.ros_type_of(msg_type)), topic, self._callback, _qos(qos))

    def _callback(self, m: Any) -> None:
        arrival = time.monotonic()
        try:
            converted = from_rclpy(m, self._type)
        except Exception as exc:  # noqa: BLE001 - re-raised in the control loop by take()
            log.exception("converting a message on %s failed", self._topic)
            self._error = exc
            return
        with self._lock:
            self._queue.append((arrival, converted))

    def take(self) -> list[tuple[float, Any]]:
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"rclpy transport: a message on {self._topic} could not be converted") from error
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
        return out

    def matched(self) -> int:
        return self._node.count_publishers(self._topic)


def _rmw() -> str:
    return os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def _is_loopback_profile(path: str) -> bool:
    from robotrl.deploy.interop import fastdds_loopback_profile

    try:
        with open(path) as f:
            return f.read() == fastdds_loopback_profile()
    except OSError:
        return False


def _use_loopback() -> None:
    """Keep this process's RMW on loopback (module docstring)."""
    global _ROS_PROFILE_FILE
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    if _rmw().startswith("rmw_fastrtps"):
        current = os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE")
        if current and current != _ROS_PROFILE_FILE and not _is_loopback_profile(current):
            log.warning("localhost_only: keeping your FASTDDS_DEFAULT_PROFILES_FILE=%s; make sure it keeps "
                        "Fast DDS on 127.0.0.1 (see robotrl.deploy.interop.fastdds_loopback_profile)", current)
            return
        if _ROS_PROFILE_FILE is None:
            from robotrl.deploy.interop import write_fastdds_loopback_profile

            _ROS_PROFILE_FILE = str(write_fastdds_loopback_profile())
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = _ROS_PROFILE_FILE
    elif _rmw().startswith("rmw_cyclonedds"):
        from robotrl.deploy.interop import apply_cyclone_settings

        apply_cyclone_settings(True)


class RclpyTransport(Transport):
    """ROS 2 transport through rclpy (module docstring).

    Args:
        node_name: the node's name (``-r __node:=`` already applied by the caller).
        domain_id: ROS domain.
        localhost_only: keep the RMW on 127.0.0.1.
        namespace: the node's namespace.
        parameters: declared on the node as ROS parameters (values that are None are skipped;
            callables and other non-ROS values are skipped).

    """

    name = "rclpy"

    def __init__(self, node_name: str, domain_id: int = 0, localhost_only: bool = False, namespace: str = "/",
                 parameters: dict[str, Any] | None = None) -> None:
        rclpy = _rclpy()
        if localhost_only:
            _use_loopback()
        self._context = rclpy.context.Context()
        # args=[]: never let rcl parse sys.argv (name:=value there gives "deprecated remap" warnings;
        # the console front end has already parsed the --ros-args tail)
        # no rclpy signal handlers: the console scripts handle SIGINT/SIGTERM themselves
        # (cli.StopSignals), and rclpy's would shut the context down under a node still being built
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=[], context=self._context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(node_name, namespace=namespace, context=self._context,
                                      automatically_declare_parameters_from_overrides=False)
        for key, value in (parameters or {}).items():
            if not (isinstance(value, (bool, int, float, str)) or (isinstance(value, list) and value)):
                continue  # None (unset) and non-ROS values are not declared
            if self.node.has_parameter(key):  # use_sim_time: declared by every rclpy node
                self.node.set_parameters([rclpy.parameter.Parameter(key, value=value)])
            else:
                self.node.declare_parameter(key, value)
        self._executor = rclpy.executors.SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="rclpy-spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            self._executor.spin()
        except ExternalShutdownException:
            pass  # the context was shut down: close() is under way

    def publisher(self, topic: str, msg_type: type, qos: Qos = COMMAND_QOS) -> Publisher:
        """An rclpy publisher."""
        ros_cls = _cls(msgs.ros_type_of(msg_type))
        return _RclpyPublisher(self.node.create_publisher(ros_cls, topic, _qos(qos)), ros_cls)

    def subscription(self, topic: str, msg_type: type, qos: Qos = SENSOR_QOS) -> Subscription:
        """An rclpy subscription whose callback (on the spin thread) only converts and queues."""
        return _RclpySubscription(self.node, topic, msg_type, qos)

    def on_parameter(self, callback: Callable[[str, Any], bool]) -> None:
        """Call ``callback(name, value)`` for each parameter set at run time; it returns acceptance."""
        from rcl_interfaces.msg import SetParametersResult

        def handler(params: list[Any]) -> Any:
            ok = all(callback(p.name, p.value) for p in params)
            return SetParametersResult(successful=ok)

        self.node.add_on_set_parameters_callback(handler)

    def close(self) -> None:
        """Stop the spin thread, destroy the node and shut the context down."""
        self._executor.shutdown(timeout_sec=1.0)
        self._context.try_shutdown()
        self._thread.join(timeout=2.0)
        self.node.destroy_node()
