"""The humanoid's scenario read off a bag: the failing command and the largest push, in the world frame."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from robotrl.tasks.humanoid.bag_scenario import PUSH_THRESHOLD, scenario_from_episode

from robotrl.twin.episode import Episode


def _episode(base_lin_vel, base_quat, cmd_vel=None) -> Episode:
    t = len(base_lin_vel)
    zeros = np.zeros((t, 1))
    return Episode(path=Path("bags/ep"), robot="humanoid_sim", task="humanoid", joint_names=["j"],
                   t=np.arange(t) * 0.015, q=zeros, dq=zeros, tau=zeros, command=zeros[1:],
                   command_held=np.zeros(t - 1, dtype=bool), base_pos=np.zeros((t, 3)),
                   base_quat=np.asarray(base_quat, float), base_lin_vel=np.asarray(base_lin_vel, float),
                   cmd_vel=None if cmd_vel is None else np.asarray(cmd_vel, float))


def test_push_is_the_largest_world_frame_velocity_jump_less_the_gaits_and_the_command_the_last_one():
    # base yawed +90 deg: body x is world y, body y is world -x
    yaw90 = [math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]
    body = np.tile([0.3, 0.0, 0.0], (8, 1))  # walking forward: world (0, 0.3)
    body[5:, 1] = -0.5  # a kick of 0.5 m/s along body -y from state 5 on: world +x
    body[7:, 0] = 0.35  # the gait's own change, below the threshold, two steps later
    cmd = np.tile([0.4, 0.1], (8, 1))
    cmd[-1] = [0.9, -0.2]
    got = scenario_from_episode(_episode(body, np.tile(yaw90, (8, 1)), cmd))
    assert got["cmd_vx"] == pytest.approx(0.9) and got["cmd_yaw"] == pytest.approx(-0.2)
    assert got["push_vel"] == pytest.approx(0.5) and got["push_dir"] == pytest.approx(0.0, abs=1e-9)
    # the gait accelerating along world +y by 0.04 m/s per step around the kick: its share is taken off
    body[:, 0] += 0.04 * np.arange(8)
    got = scenario_from_episode(_episode(body, np.tile(yaw90, (8, 1)), cmd))
    assert got["push_vel"] == pytest.approx(0.5) and got["push_dir"] == pytest.approx(0.0, abs=1e-9)


def test_jumps_below_the_threshold_report_no_push_and_missing_signals_report_nothing():
    body = np.tile([0.3, 0.0, 0.0], (6, 1))
    body[3:, 1] = 0.9 * PUSH_THRESHOLD
    identity = np.tile([1.0, 0.0, 0.0, 0.0], (6, 1))
    assert scenario_from_episode(_episode(body, identity)) == {}
    assert scenario_from_episode(_episode(body, identity), push_threshold=0.1)["push_dir"] == pytest.approx(
        math.pi / 2)
    bare = _episode(body, identity)
    bare.base_lin_vel = bare.base_quat = None
    assert scenario_from_episode(bare) == {}


def test_pushes_of_the_sim_robot_are_recovered_from_its_bags(tmp_path):
    pytest.importorskip("rosbags")
    pytest.importorskip("cyclonedds")  # the recorder writes robotrl.deploy.msgs structs
    from robotrl.deploy.profile import load_profile

    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import record_episode

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(63, 17), torch.nn.Tanh())

    def policy(obs, k):
        return net(obs) * 0.5

    profile = load_profile("humanoid_sim")
    pushes = {"push_interval_s": 0.3}  # randomize is off: only the scenario's pushes apply, every 20 steps
    cases = {"strong": {"push_vel": 1.0, "push_dir": 0.5, "cmd_vx": 1.2, "cmd_yaw": 0.3},
             "weak": {"push_vel": 0.4, "push_dir": -2.0, "cmd_vx": 1.2, "cmd_yaw": 0.3},
             "none": {"cmd_vx": 1.2, "cmd_yaw": 0.3}}
    for name, scenario in cases.items():
        ep = load_episode(record_episode("humanoid", tmp_path, policy, 120, profile=profile, overrides=pushes,
                                         scenario=scenario, name=name))
        assert ep.num_steps > 21, f"{name}: the episode ended before the first push"
        got = scenario_from_episode(ep)
        assert got["cmd_vx"] == pytest.approx(1.2) and got["cmd_yaw"] == pytest.approx(0.3)
        if "push_vel" not in scenario:
            assert "push_vel" not in got and "push_dir" not in got
            continue
        assert got["push_vel"] == pytest.approx(scenario["push_vel"], abs=0.03)
        assert got["push_dir"] == pytest.approx(scenario["push_dir"], abs=0.04)


def test_a_ground_contact_jolt_is_passed_over_for_the_smaller_horizontal_push():
    body = np.tile([0.3, 0.0, 0.0], (9, 1))
    body[3:, 1] = 0.6  # the push: +y
    body[6:] += [1.0, 0.0, 1.5]  # the torso striking the ground: a larger jump, mostly upward
    got = scenario_from_episode(_episode(body, np.tile([1.0, 0.0, 0.0, 0.0], (9, 1))))
    assert got["push_vel"] == pytest.approx(0.6) and got["push_dir"] == pytest.approx(math.pi / 2)
