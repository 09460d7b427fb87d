"""The robot contract, in process: FakeRobot, send_action clipping, profile input thresholds, and the
policy node driven through the fake robot on a manual clock (no DDS, no threads, no sleeps)."""

import math

import numpy as np
import pytest
import yaml
from robotrl.deploy import msgs
from robotrl.deploy.fake_robot import FakeRobot, ManualClock, MemoryTelemetry
from robotrl.deploy.observation import RobotState, build_observation
from robotrl.deploy.profile import RobotProfile, load_profile, profile_path
from robotrl.deploy.robot import Robot

ARM_YAML = yaml.safe_load(profile_path("example_arm").read_text())
JOINTS = list(reversed(ARM_YAML["joints"]["names"]))  # policy order differs from the controller's
LIMITS = np.asarray(ARM_YAML["joints"]["position_limits"])[::-1]
PERIOD = 1.0 / ARM_YAML["rate_hz"]


def arm(**safety) -> RobotProfile:
    profile = load_profile("example_arm")
    for key, value in safety.items():
        setattr(profile.safety, key, value)
    return profile.validate()


def test_fake_robot_streams_its_state_and_needs_connect():
    clock = ManualClock()
    robot = FakeRobot(arm(), JOINTS, clock)
    assert isinstance(robot, Robot) and not robot.is_connected and robot.joint_names == JOINTS
    with pytest.raises(RuntimeError, match="connect"):
        robot.get_observation()
    robot.connect()
    robot.joint_pos = np.linspace(-0.5, 0.5, len(JOINTS))
    robot.ang_vel = np.array([0.1, 0.2, 0.3])
    clock.advance(0.5)
    inputs = robot.get_observation()
    assert sorted(rx.name for rx in inputs.received) == ["cmd_vel", "imu", "joint_states", "odom"]
    assert all(rx.accepted and rx.arrival == clock() for rx in inputs.received)
    assert np.array_equal(inputs.state.joint_pos, robot.joint_pos)
    assert np.array_equal(inputs.state.ang_vel, [0.1, 0.2, 0.3]) and inputs.state.age("joint_states", clock()) == 0
    robot.streaming.discard("joint_states")
    clock.advance(0.1)
    assert inputs.state.age("joint_states", clock()) == pytest.approx(0.1)  # stale now: nothing streamed
    robot.disconnect()
    with pytest.raises(RuntimeError, match="send_action"):
        robot.send_action(np.zeros(len(JOINTS)))


def test_send_action_returns_the_clipped_command_actually_sent():
    robot = FakeRobot(arm(), JOINTS)
    robot.connect()
    wanted = np.array([10.0, -10.0, 0.3, 5.0, -0.2, -7.0])
    sent = robot.send_action(wanted)
    # clipped to the position limits written in example_arm.yaml, in policy order
    assert np.array_equal(sent, np.clip(wanted, LIMITS[:, 0], LIMITS[:, 1]))
    assert sent[0] == LIMITS[0, 1] and sent[1] == LIMITS[1, 0] and sent[2] == 0.3
    assert np.array_equal(robot.sent[-1], sent)
    # the controller message carries the sent command in the controller's joint order
    assert robot.last_message.joint_names == ARM_YAML["joints"]["names"]
    assert robot.last_message.points[0].positions == sent[::-1].tolist()


def test_send_action_clips_torque_to_effort_and_refuses_nan_or_wrong_shape():
    profile = arm()
    profile.command_kind = "torque"
    robot = FakeRobot(profile, JOINTS)
    robot.connect()
    effort = np.asarray(ARM_YAML["joints"]["effort_limits"])[::-1]
    sent = robot.send_action(np.full(len(JOINTS), 1e3))
    assert np.array_equal(sent, effort)
    with pytest.raises(ValueError, match="NaN"):
        robot.send_action(np.full(len(JOINTS), np.nan))
    with pytest.raises(ValueError, match="shape"):
        robot.send_action(np.zeros(3))
    assert len(robot.sent) == 1  # nothing was sent for the refused commands


def imu(w_xyz, quat_wxyz=(1.0, 0.0, 0.0, 0.0)) -> msgs.Imu:
    w, x, y, z = quat_wxyz
    return msgs.Imu(orientation=msgs.Quaternion(x=x, y=y, z=z, w=w), angular_velocity=msgs.Vector3(*w_xyz))


def odom(lin) -> msgs.Odometry:
    msg = msgs.Odometry()
    msg.twist.twist.linear = msgs.Vector3(*lin)
    return msg


def test_profile_defaults_are_the_former_hard_coded_thresholds():
    s = load_profile("humanoid_sim").safety  # the shipped YAML does not set them
    assert (s.input_max_ang_vel, s.input_max_lin_vel, s.input_quat_norm_tol, s.cmd_vel_timeout_s) == (
        50.0, 50.0, 0.05, 0.5)


def test_profile_thresholds_reject_out_of_range_inputs():
    tight = RobotState(arm(input_max_ang_vel=2.0, input_max_lin_vel=1.0, input_quat_norm_tol=0.01), JOINTS)
    loose = RobotState(arm(input_quat_norm_tol=0.1), JOINTS)
    assert tight.ingest_imu(imu((1.9, 0.0, 0.0)), 0.0)
    assert not tight.ingest_imu(imu((0.0, -2.1, 0.0)), 0.0)
    assert loose.ingest_imu(imu((0.0, -2.1, 0.0)), 0.0)  # 2.1 rad/s is fine under the default 50
    assert not tight.ingest_imu(imu((0, 0, 0), (1.02, 0.0, 0.0, 0.0)), 0.0)  # norm off by 0.02 > 0.01
    assert loose.ingest_imu(imu((0, 0, 0), (1.08, 0.0, 0.0, 0.0)), 0.0)  # 0.08 <= 0.1
    assert np.allclose(loose.quat, [1.0, 0.0, 0.0, 0.0])  # accepted quaternions are normalized
    assert tight.ingest_odom(odom((0.9, 0.0, 0.0)), 0.0)
    assert not tight.ingest_odom(odom((0.0, 0.0, -1.5)), 0.0)
    assert tight.rejected == {"imu/out_of_range": 2, "odom/out_of_range": 1}
    # joint positions beyond limit + input_position_margin, velocities beyond factor * limit
    state = RobotState(arm(input_position_margin=0.1, input_velocity_factor=1.5), JOINTS)
    hi, vmax = LIMITS[:, 1], np.asarray(ARM_YAML["joints"]["velocity_limits"])[::-1]
    ok = msgs.JointState(name=JOINTS, position=(hi + 0.09).tolist(), velocity=(1.4 * vmax).tolist())
    far = msgs.JointState(name=JOINTS, position=(hi + 0.11).tolist(), velocity=[0.0] * len(JOINTS))
    fast = msgs.JointState(name=JOINTS, position=[0.0] * len(JOINTS), velocity=(1.6 * vmax).tolist())
    assert state.ingest_joint_state(ok, 0.0)
    assert not state.ingest_joint_state(far, 0.0) and not state.ingest_joint_state(fast, 0.0)
    assert state.rejected == {"joint_states/out_of_range": 2}


def test_cmd_vel_timeout_comes_from_the_profile():
    terms = [{"name": "cmd", "size": 2, "source": "command_vx_yaw", "scale": 1.0, "offset": 0.0}]
    state = RobotState(arm(cmd_vel_timeout_s=0.2), JOINTS)
    twist = msgs.Twist()
    twist.linear.x, twist.angular.z = 0.7, -0.3
    assert state.ingest_cmd_vel(twist, 1.0)
    last = np.zeros(len(JOINTS))
    assert np.allclose(build_observation(terms, state, last, 1.19), [0.7, -0.3])
    assert np.array_equal(build_observation(terms, state, last, 1.21), [0.0, 0.0])


@pytest.mark.parametrize(("key", "value"), [("input_max_ang_vel", -1.0), ("input_quat_norm_tol", 0),
                                            ("input_max_lin_vel", "fast"), ("cmd_vel_timeout_s", math.inf),
                                            ("input_position_margin", -0.1)])
def test_bad_threshold_is_an_error_that_names_it(tmp_path, key, value):
    data = yaml.safe_load(profile_path("example_arm").read_text())
    data["safety"][key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=rf"safety\.{key}={value!r}".replace("(", r"\(")):
        load_profile(str(path))


# --- the policy node on the fake robot ---------------------------------------------------------
@pytest.fixture
def rig(tmp_path):
    """(node, robot, telemetry, clock, tick) for example_arm with a constant policy (action 0.5)."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from robotrl.deploy.node import DEFAULTS, PolicyNode

    from tests.deploy.helpers import affine_policy

    spec = affine_policy(tmp_path, JOINTS, PERIOD, bias=0.5)
    profile = arm(soft_start_s=0.0)
    clock = ManualClock()
    robot, telemetry = FakeRobot(profile, JOINTS, clock, PERIOD), MemoryTelemetry()
    node = PolicyNode({**DEFAULTS, "policy": str(spec), "robot": "example_arm", "shutdown_s": 0.0},
                      robot=robot, telemetry=telemetry, clock=clock)

    def tick(n: int = 1) -> dict:
        for _ in range(n):
            node.tick(clock.advance(PERIOD))
        return node.chain.mode.value

    return node, robot, telemetry, clock, tick


def test_node_drives_the_fake_robot_through_the_safety_chain(rig):
    node, robot, telemetry, clock, tick = rig
    node.profile.safety.soft_start_s = 10 * PERIOD
    robot.heartbeat = True
    assert tick(3) == "PASSIVE" and robot.sent == []  # hardware profile: no auto-arm, nothing sent
    robot.request_arm()
    modes = [tick() for _ in range(60)]
    # 10 periods of soft start (the 11th too when float round-off leaves the blend at 0.99999...)
    assert modes[:10] == ["SOFT_START"] * 10 and modes[11:] == ["POLICY"] * 49
    sent = np.asarray(robot.sent)
    cap = min(ARM_YAML["safety"]["delta_cap"], min(ARM_YAML["joints"]["velocity_limits"]) * PERIOD)
    steps = np.diff(sent, axis=0)
    assert np.array_equal(sent[0], np.zeros(len(JOINTS)))  # soft start begins at the measured pose
    assert np.all(steps >= -1e-12) and np.all(steps <= cap + 1e-12) and np.any(steps > 0.99 * cap)
    # the policy asks for 0.5 rad; the torque-estimate clamp (kp * (q_cmd - q) <= effort, q = 0)
    # stops the shoulders and the elbow short of it: all numbers from the YAML
    joints = ARM_YAML["joints"]
    reach = np.minimum(0.5, np.asarray(joints["effort_limits"]) / np.asarray(joints["kp"]))[::-1]
    assert np.allclose(sent[-1], reach) and np.any(reach < 0.5)
    assert np.array_equal(node.chain.last_command, sent[-1])
    last = telemetry.statuses()[-1]
    assert last["mode"] == "POLICY" and last["ticks"] == "63" and last["accepted/joint_states"] == "63"
    assert last["tick/joint_states"] == "62" and last["tick/estop"] == "62"
    commands = [m.data for k, m in telemetry.reports if k == "command"]
    assert np.allclose(commands, sent)  # the debug topic carries what was actually sent


def test_stale_joint_states_hold_within_four_periods_and_latch(rig):
    node, robot, telemetry, clock, tick = rig
    robot.heartbeat = True
    robot.request_arm()
    tick(5)
    robot.streaming.discard("joint_states")
    modes = [tick() for _ in range(6)]
    first = modes.index("HOLD") + 1  # periods after the last joint_states message
    assert 3 <= first <= 4, modes
    status = next(s for s in telemetry.statuses() if s["mode"] == "HOLD")
    assert "stale:joint_states" in status["faults"]
    assert int(status["ticks"]) - 1 - int(status["tick/joint_states"]) == first
    robot.streaming.add("joint_states")
    assert tick(10) == "HOLD"  # fresh again, still latched
    held = robot.sent[-1]
    assert np.allclose(robot.sent[-10:], held)  # HOLD keeps the last position command
    robot.request_arm()
    assert tick() == "POLICY" and not node.chain.faults


def test_estop_heartbeat_loss_damps_after_the_profile_timeout(rig):
    node, robot, telemetry, clock, tick = rig
    robot.heartbeat = True
    robot.request_arm()
    tick(5)
    robot.heartbeat = False
    modes = [tick() for _ in range(20)]
    first = modes.index("DAMP") + 1
    timeout = ARM_YAML["safety"]["estop_timeout_s"] / PERIOD  # 15 periods
    assert timeout <= first <= timeout + 1, modes
    assert "estop" in node.chain.faults
    robot.joint_pos = np.full(len(JOINTS), robot.sent[-1][0])
    robot.heartbeat = True
    assert tick(5) == "DAMP"  # latched until an explicit re-arm
    robot.press_estop()
    robot.request_arm()  # refused: the stop is pressed
    assert tick() == "DAMP" and "arm_refused:estop" in telemetry.statuses()[-1]["events"]


def test_shutdown_sends_damp_and_disconnects(rig):
    node, robot, telemetry, clock, tick = rig
    robot.heartbeat = True
    robot.request_arm()
    tick(10)
    robot.joint_pos = np.full(len(JOINTS), 0.15)
    node.shutdown()
    # DAMP on a position robot commands the measured pose, within the delta cap of the last command
    assert np.allclose(robot.sent[-1], np.clip(0.15, robot.sent[-2] - 0.02, robot.sent[-2] + 0.02))
    assert not robot.is_connected and telemetry.statuses()[-1]["lifecycle"] == "finalized"


def test_node_refuses_a_robot_with_other_joints(tmp_path):
    pytest.importorskip("onnx")
    from robotrl.deploy.node import DEFAULTS, PolicyNode

    from tests.deploy.helpers import affine_policy

    spec = affine_policy(tmp_path, JOINTS, PERIOD, bias=0.0)
    robot = FakeRobot(arm(), list(reversed(JOINTS)))
    with pytest.raises(ValueError, match="joint_names"):
        PolicyNode({**DEFAULTS, "policy": str(spec), "robot": "example_arm"}, robot=robot,
                   telemetry=MemoryTelemetry())


class _ReadingClock(ManualClock):
    """A manual clock that moves 1 ms each time it is read (so a node's wait loop ends)."""

    def __call__(self) -> float:
        self.t += 1e-3
        return self.t


def _synced_node(tmp_path, wait_periods: object) -> tuple:
    """(node, robot, clock): a ``sync_inputs`` node on the fake robot, armed and in POLICY, on a reading clock."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from robotrl.deploy.node import DEFAULTS, PolicyNode

    from tests.deploy.helpers import affine_policy

    spec = affine_policy(tmp_path, JOINTS, PERIOD, bias=0.5)
    clock = _ReadingClock()
    robot, telemetry = FakeRobot(arm(soft_start_s=0.0), JOINTS, clock, PERIOD), MemoryTelemetry()
    node = PolicyNode({**DEFAULTS, "policy": str(spec), "robot": "example_arm", "shutdown_s": 0.0,
                       "sync_inputs": True, "sync_wait_periods": wait_periods},
                      robot=robot, telemetry=telemetry, clock=clock)
    robot.heartbeat = True
    robot.request_arm()
    for _ in range(3):
        node.tick(clock.advance(PERIOD))
    assert node.chain.mode.value == "POLICY"
    return node, robot, clock


@pytest.mark.parametrize("wait_periods", [0.8, 3.0])
def test_sync_inputs_waits_sync_wait_periods_for_a_new_state_then_counts_a_timeout(tmp_path, wait_periods):
    node, robot, clock = _synced_node(tmp_path, str(wait_periods))
    deadline = clock.advance(PERIOD)
    node.tick(deadline)  # a new state each read: no wait
    assert clock() - deadline < 0.5 * PERIOD and node.chain.counters["sync_timeouts"] == 0
    robot.streaming = robot.streaming - {"joint_states"}  # the lockstep sim is late: no newer state
    deadline = clock.advance(PERIOD)
    node.tick(deadline)
    waited = clock() - deadline
    assert wait_periods * PERIOD <= waited < wait_periods * PERIOD + 0.01
    assert node.chain.counters["sync_timeouts"] == 1


@pytest.mark.parametrize("value", [0, -1, "nan"])
def test_bad_sync_wait_periods_is_an_error_that_names_it(tmp_path, value):
    pytest.importorskip("onnx")
    from robotrl.deploy.node import DEFAULTS, PolicyNode

    from tests.deploy.helpers import affine_policy

    spec = affine_policy(tmp_path, JOINTS, PERIOD, bias=0.0)
    robot = FakeRobot(arm(), JOINTS)
    with pytest.raises(ValueError, match="sync_wait_periods"):
        PolicyNode({**DEFAULTS, "policy": str(spec), "robot": "example_arm", "sync_wait_periods": value},
                   robot=robot, telemetry=MemoryTelemetry())


def test_a_stop_request_ends_the_sync_wait_at_once_without_counting_a_timeout(tmp_path):
    node, robot, clock = _synced_node(tmp_path, 4.0)
    robot.streaming = robot.streaming - {"joint_states"}  # the sim has finished: no state comes
    node.request_stop()
    deadline = clock.advance(PERIOD)
    node.tick(deadline)
    assert clock() - deadline < 0.5 * PERIOD and node.chain.counters["sync_timeouts"] == 0
