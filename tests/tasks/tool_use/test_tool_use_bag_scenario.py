"""tool_use's scenario read off a bag: the tool's start pose and size and the first goal, from the perception topics."""

import math
from pathlib import Path

import numpy as np
import pytest
from robotrl.tasks.tool_use import constants as C
from robotrl.tasks.tool_use import tools
from robotrl.tasks.tool_use.bag_scenario import family_from_box, scenario_from_episode

from robotrl.twin.episode import Episode


def _yaw_quat(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _episode(object_pose=None, goal_pose=None, object_box=None, t: int = 4) -> Episode:
    zeros = np.zeros((t, 1))
    return Episode(path=Path("bags/ep"), robot="tool_use_sim", task="tool_use", joint_names=["j"],
                   t=np.arange(t) * 0.02, q=zeros, dq=zeros, tau=zeros, command=zeros[1:],
                   command_held=np.zeros(t - 1, dtype=bool), object_pose=object_pose, goal_pose=goal_pose,
                   object_box=object_box)


def test_start_pose_size_and_goal_come_from_the_first_recorded_messages():
    x0, y0 = C.SPAWN_CENTER
    pose = np.full((4, 7), np.nan)  # no pose message before state 1
    pose[1] = [x0 + 0.03, y0 - 0.05, 0.02, *_yaw_quat(0.7)]
    pose[2:] = [x0 + 0.10, y0, 0.15, *_yaw_quat(-1.0)]  # the tool moves later: not the start
    goal = np.tile([0.55, 0.1, 0.3, *_yaw_quat(0.7 + 0.4)], (4, 1))  # a turn of 0.4 rad from the start
    goal[3] = [0.6, -0.1, 0.2, *_yaw_quat(2.0)]  # the second goal
    box = np.array([0.0, 0.0, 0.01, 0.09, 0.02, 0.015, 0.015])
    got = scenario_from_episode(_episode(pose, goal, box))
    assert got["spawn_x"] == pytest.approx(0.03) and got["spawn_y"] == pytest.approx(-0.05)
    assert got["spawn_yaw"] == pytest.approx(0.7)
    assert got["tool_size"] == pytest.approx(0.18)
    assert (got["goal_x"], got["goal_y"], got["goal_z"]) == pytest.approx((0.55, 0.1, 0.3))
    assert got["goal_yaw"] == pytest.approx(0.4)


def test_tool_family_is_read_off_the_boxes_of_tools_the_reference_never_held_and_bad_boxes_are_refused():
    # held-out instances of the training families and the held-out family's brushes: none is a reference tool
    pool = tools.tool_pool("heldout", 16) + tools.tool_pool("heldout_family", 16)
    right = {f: [] for f in tools.FAMILIES}
    for tool in pool:
        right[tool.family].append(tools.FAMILIES[family_from_box(tool.bbox()[1])] == tool.family)
    per_family = {f: float(np.mean(r)) for f, r in right.items()}
    assert min(per_family.values()) >= 0.8, per_family  # measured: 1.0 for every training family, 0.875 brush
    assert np.mean([x for r in right.values() for x in r]) >= 0.95, per_family
    hammer = tools.sample_tool("hammer", 5_000_000)
    half = hammer.bbox()[1]
    assert family_from_box(half) == family_from_box(half[::-1]) == tools.FAMILIES.index("hammer")  # axis order
    box = np.array([0.0, 0.0, 0.0, *half, 0.02])
    assert scenario_from_episode(_episode(object_box=box))["tool_family"] == tools.FAMILIES.index("hammer")
    for bad in ([0.1, 0.02], [0.1, 0.0, 0.01], [0.1, float("nan"), 0.01]):
        with pytest.raises(ValueError, match="three positive half-extents"):
            family_from_box(np.array(bad))


def test_a_bag_without_perception_topics_reports_nothing_and_a_goal_without_a_start_has_no_goal_yaw():
    assert scenario_from_episode(_episode()) == {}
    got = scenario_from_episode(_episode(goal_pose=np.tile([0.5, 0.0, 0.25, 1.0, 0.0, 0.0, 0.0], (4, 1))))
    assert set(got) == {"goal_x", "goal_y", "goal_z"}


def test_the_scenario_of_a_sim_robot_bag_is_recovered(tmp_path):
    pytest.importorskip("rosbags")
    pytest.importorskip("cyclonedds")  # the recorder writes robotrl.deploy.msgs structs
    from robotrl.deploy.profile import load_profile

    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import record_episode

    scenario = {"tool_size": 0.2, "spawn_x": 0.05, "spawn_y": -0.04, "spawn_yaw": 1.1,
                "goal_x": 0.6, "goal_y": 0.1, "goal_z": 0.3, "goal_yaw": -0.8}
    ep = load_episode(record_episode("tool_use", tmp_path, lambda obs, k: obs[:, :0].new_zeros(1, 23), 6,
                                     profile=load_profile("tool_use_sim"), scenario=scenario, name="ep"))
    got = scenario_from_episode(ep)
    for name in ("spawn_x", "spawn_y", "goal_x", "goal_y", "goal_z"):
        assert got[name] == pytest.approx(scenario[name], abs=2e-3), name
    for name in ("spawn_yaw", "goal_yaw"):
        assert got[name] == pytest.approx(scenario[name], abs=0.02), name
    # the pool's nearest size to the one asked for: within the pool's spacing of sizes
    assert got["tool_size"] == pytest.approx(scenario["tool_size"], abs=0.03)
