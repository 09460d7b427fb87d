"""Output adapters and transport selection."""

import numpy as np
import pytest
from robotrl.deploy import msgs
from robotrl.deploy.outputs import OutputAdapter
from robotrl.deploy.profile import load_profile
from robotrl.deploy.transport import make_transport, rclpy_available


def test_forward_command_is_in_controller_order():
    profile = load_profile("humanoid_sim")
    policy_order = list(reversed(profile.joints.names))
    out = OutputAdapter(profile, policy_order, 0.015)
    cmd = np.arange(len(policy_order), dtype=float)
    msg = out.message(cmd, 0.0)
    assert isinstance(msg, msgs.Float64MultiArray)
    assert msg.data == list(reversed(cmd.tolist()))


def test_joint_trajectory_one_point_with_time_from_start():
    profile = load_profile("example_arm")
    out = OutputAdapter(profile, profile.joints.names, 0.02)
    msg = out.message(np.full(6, 0.25), 0.0)
    assert msg.joint_names == profile.joints.names and len(msg.points) == 1
    assert msg.points[0].positions == [0.25] * 6 and msg.points[0].effort == []
    assert msgs.to_seconds(msg.points[0].time_from_start) == pytest.approx(1.5 * 0.02)


def test_cmd_vel_fields():
    profile = load_profile("example_arm")
    profile.command_kind, profile.output.adapter = "velocity", "cmd_vel"
    profile.output.twist_fields = ["linear.x", "angular.z"]
    out = OutputAdapter(profile, profile.joints.names[:2], 0.02)
    msg = out.message(np.array([0.5, -0.2]), 0.0)
    assert isinstance(msg, msgs.Twist) and msg.linear.x == 0.5 and msg.angular.z == -0.2 and msg.linear.y == 0.0


def test_transport_selection_auto_picks_rclpy_when_it_imports():
    with pytest.raises(ValueError, match="auto, rclpy, cyclonedds"):
        make_transport("zenoh")
    if not rclpy_available():
        with pytest.raises(ImportError, match=r"robotrl\[ros2\]"):
            make_transport("rclpy")
    tr = make_transport("auto", domain_id=221, localhost_only=True)
    try:
        assert tr.name == ("rclpy" if rclpy_available() else "cyclonedds")
    finally:
        tr.close()
