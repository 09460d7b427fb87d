"""Driving on a robot: the observation from Odometry, LaserScan, JointState and the route (no DDS).

The sim robot's messages are built exactly as ``robotrl-sim-robot`` builds them (the task's
deploy hook ``tasks/driving/robot_io.py``), validated by ``RobotState.ingest_*`` and turned into
the observation by ``build_observation``; it must equal ``DrivingTask.observe``. Route geometry,
the scan mapping and the Ackermann safety commands are checked against hand-worked numbers.
"""

import math

import numpy as np
import pytest
import torch
from robotrl.deploy import msgs
from robotrl.deploy.geometry import Route, quat_rotate_inverse_wxyz, scan_at
from robotrl.deploy.observation import RobotState, build_observation
from robotrl.deploy.profile import load_profile
from robotrl.deploy.safety import Mode, SafetyChain


def _messages(env, hook, stamp):
    """JointState, Odometry, LaserScan of world 0, as robotrl-sim-robot publishes them."""
    qpos = env.sim.bind("qpos")[0].double().numpy()
    qvel = env.sim.bind("qvel")[0].double().numpy()
    header = msgs.Header(stamp=msgs.stamp(stamp))
    names, pos, vel, eff = hook.sim_joint_state(env.task)
    js = msgs.JointState(header=header, name=names, position=pos, velocity=vel, effort=eff)
    odom = msgs.Odometry(header=header)
    w, x, y, z = qpos[3:7]
    odom.pose.pose = msgs.Pose(msgs.Point(*qpos[:3].tolist()), msgs.Quaternion(x=x, y=y, z=z, w=w))
    odom.twist.twist = msgs.Twist(msgs.Vector3(*quat_rotate_inverse_wxyz(qpos[3:7], qvel[:3]).tolist()),
                                  msgs.Vector3(*qvel[3:6].tolist()))
    scan = msgs.LaserScan(header=header, **hook.sim_scan(env.task))
    return js, odom, scan


def _path(hook, task):
    _, center, heading, half_width = hook.sim_route(task)
    return msgs.Path(poses=[msgs.PoseStamped(pose=msgs.Pose(
        msgs.Point(float(px), float(py), float(w)),
        msgs.Quaternion(x=0.0, y=0.0, z=math.sin(0.5 * h), w=math.cos(0.5 * h))))
        for (px, py), h, w in zip(center, heading, half_width, strict=True)])


def test_observation_from_car_topics_equals_observe():
    from robotrl.tasks.driving import robot_io as hook
    from robotrl.tasks.driving.config import DrivingConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    cfg = DrivingConfig(randomize=False, scenario_prob=1.0, num_obstacles=6)
    env = TaskEnv(cfg, SimConfig(num_envs=1), seed=3)
    obs = env.reset()
    terms = hook.obs_terms(None, cfg)
    state = RobotState(load_profile("driving_sim"), env.task.joint_names)
    assert state.ingest_route(_path(hook, env.task), 0.0)
    gen = np.random.default_rng(0)
    last, asymmetric, steps = np.zeros(2), 0, 0
    rays = slice(sum(t["size"] for t in terms[:6]), sum(t["size"] for t in terms[:7]))
    for k in range(120):
        for ingest, msg in zip((state.ingest_joint_state, state.ingest_odom, state.ingest_scan),
                               _messages(env, hook, 0.05 * k), strict=True):
            assert ingest(msg, 0.0)
        expected = obs["policy"][0].numpy()
        got = build_observation(terms, state, last, 0.0)
        np.testing.assert_allclose(got, expected, atol=2e-5, err_msg=f"step {k}")
        asymmetric += int(np.abs(got[rays] - got[rays][::-1]).max() > 0.05)
        last = np.clip(np.array([0.3 * math.sin(0.1 * k) + 0.2 * gen.standard_normal(), 0.5]), -1, 1)
        obs, _, _, _, info = env.step(torch.as_tensor(last, dtype=torch.float32)[None])
        steps += 1
        if "episode" in info:
            break
    assert steps >= 30
    assert asymmetric >= 3  # obstacles seen off-centre: the check would catch a reversed beam order


def test_route_projection_on_a_circle_matches_hand_worked_numbers():
    m, radius = 400, 5.0
    a = 2 * np.pi * np.arange(m) / m
    center = radius * np.stack([np.cos(a), np.sin(a)], axis=1)
    route = Route(center, a + np.pi / 2, np.full(m, 0.8))  # counter-clockwise
    chord = 2 * radius * math.sin(math.pi / m)
    assert route.length == pytest.approx(m * chord)
    s, lateral, heading, hw = route.project(np.array([0.0, 4.7]))  # inside the circle at 90 deg: left of it
    assert s == pytest.approx(100 * route.spacing)
    assert lateral == pytest.approx(0.3)
    assert heading == pytest.approx(math.pi)
    assert hw == 0.8
    ahead = route.point_at(np.array([s + 100 * route.spacing]))  # a quarter lap on: (-5, 0)
    np.testing.assert_allclose(ahead[0], [-5.0, 0.0], atol=1e-9)
    assert route.idx == 100
    route.project(np.array([5.0, 0.0]))  # far outside the window: found by the full search
    assert route.idx == 0


def test_scan_at_nearest_beam_and_rep117_values():
    scan = msgs.LaserScan(angle_min=-1.0, angle_max=1.0, angle_increment=0.5, range_min=0.1, range_max=10.0,
                          ranges=[1.0, float("inf"), float("nan"), float("-inf"), 20.0])
    got = scan_at(scan, np.array([-1.0, -0.6, 0.0, 0.26, 0.5, 1.0]), 6.0)
    # beams: -1.0 -> 1.0; -0.6 -> beam -0.5 (+inf: no return); 0 -> NaN (no return); 0.26 -> beam 0.5
    # (-inf: too close, 0); 1.0 -> 20 (beyond range_max: no return)
    np.testing.assert_array_equal(got, [1.0, 6.0, 6.0, 0.0, 0.0, 6.0])


def test_ackermann_commands_clip_to_limits_and_hold_stops_the_throttle():
    spec = {"action_spec": {"kind": "ackermann", "scale": [0.42, 1.0], "offset": [0.0, 0.0]},
            "joint_names": ["steering", "throttle"], "obs_terms": [], "obs_norm": None}
    chain = SafetyChain(spec, load_profile("driving_sim"), 0.05)
    state = RobotState(load_profile("driving_sim"), ["steering", "throttle"])
    np.testing.assert_array_equal(chain.enforce(np.array([0.9, -3.0]), state.joint_pos), [0.42, -1.0])
    chain.last_command = np.array([0.2, 0.7])
    np.testing.assert_array_equal(chain.safe_command(state, Mode.HOLD), [0.2, 0.0])  # keep steering, no throttle
    np.testing.assert_array_equal(chain.safe_command(state, Mode.DAMP), [0.0, 0.0])
