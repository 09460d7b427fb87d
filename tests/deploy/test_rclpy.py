"""Real rclpy (ROS 2 Kilted on Fast DDS, ``robotrl[ros2]``): the node in the ROS graph, its parameters,
the sim robot read by default-QoS subscribers with ``/clock``, bags decoded by rclpy, and the spin thread.

Skipped only where the ros2 extra is absent (``pip install 'robotrl[ros2]'``, which scripts/setup.sh
installs). Loopback and private domains: see conftest.py. ``ROS_PYTHON_CHECK_FIELDS=1`` is set there,
so every message robotrl hands to rclpy is type-checked field by field.
"""

import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="real-ROS 2 tests need the ros2 extra: pip install 'robotrl[ros2]'")
pytest.importorskip("cyclonedds")

from robotrl.deploy import msgs  # noqa: E402
from robotrl.deploy.ros2 import RclpyTransport, from_rclpy, to_rclpy  # noqa: E402
from robotrl.deploy.transport import RELIABLE_QOS  # noqa: E402

from tests.deploy.helpers import free_domain, spawn, stop  # noqa: E402


def wait(predicate, timeout=60.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


def test_conversions_follow_the_real_field_types_under_check_fields():
    imu = msgs.Imu(orientation=msgs.Quaternion(0.0, 0.0, 0.6, 0.8), orientation_covariance=[1.0] * 9,
                   angular_velocity=msgs.Vector3(1, 2, 3))  # ints in float fields are cast, not asserted on
    ros = to_rclpy(imu)
    assert isinstance(ros.orientation_covariance, np.ndarray)  # double[9]: a numpy array in rclpy
    assert from_rclpy(ros) == imu and isinstance(from_rclpy(ros).orientation_covariance, list)
    status = msgs.DiagnosticArray(status=[msgs.DiagnosticStatus(level=2, name="x")])
    ros = to_rclpy(status)
    assert ros.status[0].level == b"\x02"  # byte field: bytes of length 1
    assert from_rclpy(ros).status[0].level == 2
    for cls in msgs.ROS_TYPES.values():  # every supported type round-trips
        assert from_rclpy(to_rclpy(cls())) == cls()


def test_bag_messages_decode_with_rclpys_own_deserializer(tmp_path):
    from rclpy.serialization import deserialize_message
    from robotrl.deploy.recorder import EpisodeBag
    from robotrl.deploy.ros2 import ros_class
    from rosbags.highlevel import AnyReader

    written = {
        "/joint_states": msgs.JointState(header=msgs.Header(msgs.stamp(12.5), "base"), name=["a", "b"],
                                         position=[0.5, -1.0], velocity=[1.0, 2.0], effort=[]),
        "/imu/data": msgs.Imu(orientation=msgs.Quaternion(0.0, 0.0, 0.6, 0.8), orientation_covariance=[0.1] * 9),
        "/robotrl/status": msgs.DiagnosticArray(status=[msgs.DiagnosticStatus(
            level=1, name="n", values=[msgs.KeyValue("mode", "HOLD")])]),
        "/traj": msgs.JointTrajectory(joint_names=["a"], points=[msgs.JointTrajectoryPoint(
            positions=[0.25], time_from_start=msgs.duration(0.03))]),
        "/odom": msgs.Odometry(child_frame_id="base"),
    }
    bag = EpisodeBag(tmp_path / "bag", {"policy_sha256": "x"})
    for topic, msg in written.items():
        bag.write(topic, msg)
    path = bag.close()
    decoded = {}
    with AnyReader([path]) as reader:
        for conn, _, raw in reader.messages():
            decoded[conn.topic] = deserialize_message(bytes(raw), ros_class(conn.msgtype))
    assert set(decoded) == set(written)
    for topic, msg in written.items():
        assert from_rclpy(decoded[topic]) == msg, topic


def test_node_is_in_the_ros_graph_with_declared_parameters_and_no_remap_warning(humanoid_export, tmp_path):
    from rcl_interfaces.srv import GetParameters

    domain = free_domain()
    probe = RclpyTransport("probe", domain_id=domain, localhost_only=True)
    log = tmp_path / "node.log"
    node = spawn(["robotrl.deploy.node", f"policy:={humanoid_export[2]}", "robot:=humanoid_sim", "transport:=rclpy",
                  "rate_hz:=20", "--ros-args", "-r", "__node:=my_policy", "-r", "__ns:=/arm"], domain, log)
    try:
        wait(lambda: ("my_policy", "/arm") in probe.node.get_node_names_and_namespaces())
        client = probe.node.create_client(GetParameters, "/arm/my_policy/get_parameters")
        assert client.wait_for_service(timeout_sec=30.0)
        future = client.call_async(GetParameters.Request(names=["robot", "rate_hz", "transport"]))
        wait(future.done, timeout=30.0)
        values = future.result().values
        assert values[0].string_value == "humanoid_sim"
        assert values[1].double_value == 20.0 or values[1].integer_value == 20
        assert values[2].string_value == "rclpy"
    finally:
        assert stop(node) == 0, log.read_text()[-2000:]
        probe.close()
    text = log.read_text()
    assert "deprecated" not in text.lower(), text[-2000:]  # rcl never sees the name:=value arguments


@pytest.mark.parametrize("transport", ["cyclonedds", "rclpy"])
def test_sim_robot_reaches_default_qos_ros_subscribers_with_sim_time_clock(transport, tmp_path):
    """A subscriber with rclpy's default QoS (RELIABLE, depth 10) gets the sim robot's state, stamped
    with the sim time that /clock carries."""
    domain = free_domain()
    probe = RclpyTransport("listener", domain_id=domain, localhost_only=True)
    got: dict[str, list] = {"js": [], "clock": [], "imu": []}
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu, JointState

    probe.node.create_subscription(JointState, "/joint_states", lambda m: got["js"].append(m), 10)
    probe.node.create_subscription(Imu, "/imu/data", lambda m: got["imu"].append(m), 10)
    probe.node.create_subscription(Clock, "/clock", lambda m: got["clock"].append(m), 10)
    log = tmp_path / "sim.log"
    sim = spawn(["robotrl.deploy.sim_robot", "task:=humanoid", "lockstep:=false", "use_sim_time:=true",
                 f"transport:={transport}", "publish_command:=false"], domain, log)
    try:
        wait(lambda: len(got["js"]) >= 20 and len(got["clock"]) >= 20 and got["imu"], timeout=90)
    finally:
        assert stop(sim) == 0, log.read_text()[-2000:]
        probe.close()
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in got["js"]]
    clocks = {(m.clock.sec, m.clock.nanosec) for m in got["clock"]}
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))  # sim time moves forward
    assert stamps[0] < 60.0  # simulation time from 0, not wall time
    # each state is stamped with a /clock time; on a loaded machine the listener can miss samples of
    # either KEEP_LAST 1 writer, so require most (not all) stamps within the clock's range to match
    lo, hi = min(clocks), max(clocks)
    in_range = [(m.header.stamp.sec, m.header.stamp.nanosec) for m in got["js"]
                if lo <= (m.header.stamp.sec, m.header.stamp.nanosec) <= hi]
    assert len(in_range) >= 10 and sum(s in clocks for s in in_range) >= 0.8 * len(in_range), (in_range, clocks)
    assert "deprecated" not in log.read_text().lower()


def test_spin_thread_delivers_while_the_caller_never_spins():
    """Messages arrive and are converted on the spin thread; take() is a non-blocking queue read."""
    domain = free_domain()
    a = RclpyTransport("a", domain_id=domain, localhost_only=True)
    b = RclpyTransport("b", domain_id=domain, localhost_only=True)
    try:
        pub = a.publisher("/x", msgs.JointState, RELIABLE_QOS)
        sub = b.subscription("/x", msgs.JointState, RELIABLE_QOS)
        wait(lambda: pub.matched() and sub.matched(), timeout=30)
        sent = time.monotonic()
        for i in range(5):
            pub.publish(msgs.JointState(name=["j"], position=[float(i)]))
        got = []
        wait(lambda: got.extend(sub.take()) or len(got) == 5, timeout=30)
        assert [m.position for _, m in got] == [[float(i)] for i in range(5)]
        assert all(t >= sent for t, _ in got)  # stamped at arrival on the spin thread
        assert b._thread.is_alive() and b._thread.name == "rclpy-spin"
        assert b.receive_threads() == [b._thread]  # the thread an rt_priority node raises with its loop
    finally:
        a.close()
        b.close()
