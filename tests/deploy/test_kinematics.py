"""Robot-side forward kinematics (numpy) against MuJoCo's mj_kinematics, and the box geometry helpers."""

import numpy as np
import pytest
import torch

mujoco = pytest.importorskip("mujoco")

from robotrl.deploy.kinematics import Kinematics, box_distance, box_keypoints  # noqa: E402

ARMS = ["kuka_iiwa", "floating"]


def _model(arm):
    from robotrl.tasks.tool_use.config import ToolUseConfig
    from robotrl.tasks.tool_use.task import ToolUseTask

    if arm == "kuka_iiwa":
        pytest.importorskip("pybullet_data", reason="the KUKA iiwa model ships with pybullet: pip install pybullet")
    task = ToolUseTask(ToolUseConfig(arm=arm), 1, torch.device("cpu"))
    return task.build_model(), task.cfg


@pytest.mark.parametrize("arm", ARMS)
def test_tool_use_tree_matches_mj_kinematics_at_random_joint_angles(arm):
    from robotrl.tasks.tool_use import robot_io

    model, cfg = _model(arm)
    tree = robot_io.kinematics(model, cfg)
    assert tree["lag_s"] == model.opt.timestep
    kin = Kinematics(tree)  # evaluated at q - lag_s * qd: given q + lag_s * qd, it must give MuJoCo's at q
    assert set(kin.joint_names) == set(robot_io.joint_names(cfg))  # the whole arm and hand, nothing else
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    bodies = [model.body(n).id for n in kin.body_names]
    sites = [model.site(n).id for n in kin.site_names]
    for _ in range(20):
        q, qd = {}, {}
        for name in kin.joint_names:
            j = model.joint(name).id
            lo, hi = model.jnt_range[j]
            data.qpos[model.jnt_qposadr[j]] = rng.uniform(lo, hi)
            qd[name] = rng.normal()
            q[name] = data.qpos[model.jnt_qposadr[j]] + kin.lag_s * qd[name]
        mujoco.mj_kinematics(model, data)
        xpos, xquat, site_xpos = kin.forward(q, qd)
        np.testing.assert_allclose(xpos, data.xpos[bodies], atol=1e-12)
        np.testing.assert_allclose(xquat, data.xquat[bodies], atol=1e-12)  # same sign, not just the same rotation
        np.testing.assert_allclose(site_xpos, data.site_xpos[sites], atol=1e-12)


def test_kinematics_rejects_ball_joints_children_before_parents_and_a_lag_without_velocities():
    body = {"name": "b", "parent": -1, "pos": [0, 0, 0], "quat": [1, 0, 0, 0]}
    with pytest.raises(ValueError, match="hinge and slide"):
        Kinematics({"bodies": [{**body, "joints": [{"name": "j", "type": "ball", "axis": [0, 0, 1], "pos": [0, 0, 0],
                                                    "qpos0": 0.0}]}]})
    with pytest.raises(ValueError, match="listed before"):
        Kinematics({"bodies": [{**body, "parent": 1}, {**body, "name": "c"}]})
    slide = {**body, "joints": [{"name": "j", "type": "slide", "axis": [0, 0, 1], "pos": [0, 0, 0], "qpos0": 0.0}]}
    with pytest.raises(ValueError, match="needs joint velocities"):
        Kinematics({"lag_s": 0.005, "bodies": [slide]}).forward({"j": 0.1})
    xpos, _, _ = Kinematics({"lag_s": 0.005, "bodies": [slide]}).forward({"j": 0.1}, {"j": 2.0})
    np.testing.assert_allclose(xpos[0], [0.0, 0.0, 0.09], atol=1e-15)


def test_box_keypoints_and_distance_match_hand_worked_numbers():
    quat = np.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)])  # 90 deg about z
    kp = box_keypoints(np.array([1.0, 0.0, 0.0]), quat, np.array([0.1, 0.0, 0.0]), np.array([0.2, 0.01, 0.05]), 0.03)
    # corner (-1, -1, -1): local (0.1 - 0.2, -0.03, -0.05) -> rotated (0.03, -0.1, -0.05) -> + pos
    np.testing.assert_allclose(kp[0], [1.03, -0.1, -0.05], atol=1e-12)
    np.testing.assert_allclose(kp[7], [1.0 - 0.03, 0.3, 0.05], atol=1e-12)  # corner (+1, +1, +1)
    d = box_distance(np.array([[1.0, 0.1, 0.0], [1.0, 0.5, 0.0], [1.3, 0.1, 0.0]]), np.array([1.0, 0.0, 0.0]), quat,
                     np.array([0.1, 0.0, 0.0]), np.array([0.2, 0.01, 0.05]))
    # the box spans world x 1 +- 0.01, y -0.1 .. 0.3: inside, 0.2 beyond its far end, 0.29 to its side
    np.testing.assert_allclose(d, [0.0, 0.2, 0.29], atol=1e-12)
