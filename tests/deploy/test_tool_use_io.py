"""tool_use on a robot: the observation from joint states, the object pose, box and goal (no DDS).

The sim's messages are built as ``robotrl-sim-robot`` builds them (``tasks/tool_use/robot_io.py``:
``sim_inputs``), validated by ``RobotState.ingest_*`` and turned into the observation by
``build_observation`` with the exported kinematic tree; with domain randomization off (no pose
noise, no delays) it must equal ``ToolUseTask.observe``'s policy observation at every step. The
safety chain's relative/smoothed targets must equal the task's ``apply_action``.
"""

import numpy as np
import pytest
import torch
from robotrl.deploy import msgs
from robotrl.deploy.kinematics import Kinematics
from robotrl.deploy.observation import RobotState, build_observation, required_inputs, static_inputs
from robotrl.deploy.profile import load_profile
from robotrl.deploy.safety import SafetyChain

PROFILES = {"kuka_iiwa": "tool_use_sim", "floating": "tool_use_floating_sim"}


def _env(arm, seed=0):
    from robotrl.tasks.tool_use.config import ToolUseConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    if arm == "kuka_iiwa":
        pytest.importorskip("pybullet_data", reason="the KUKA iiwa model ships with pybullet: pip install pybullet")
    return TaskEnv(ToolUseConfig(arm=arm, randomize=False), SimConfig(num_envs=1), seed=seed)


def _joint_state(env, header):
    task = env.task
    qpos, qvel = task.qpos[0].double().numpy(), task.qvel[0].double().numpy()
    return msgs.JointState(header=header, name=list(task.joint_names), position=qpos[task._qadr.numpy()].tolist(),
                           velocity=qvel[task._dadr.numpy()].tolist())


def _ingest(state, env, hook, profile, t):
    header = msgs.Header(stamp=msgs.stamp(t))
    assert state.ingest_joint_state(_joint_state(env, header), t)
    inputs = hook.sim_inputs(env.task, header, profile)
    assert state.ingest_object_pose(inputs["object_pose"], t)
    assert state.ingest_goal_pose(inputs["goal_pose"], t)
    assert state.ingest_object_box(inputs["object_box"], t)


@pytest.mark.parametrize("arm", ["kuka_iiwa", "floating"])
def test_observation_from_joint_states_and_object_pose_equals_observe(arm):
    from robotrl.tasks.tool_use import robot_io as hook

    env = _env(arm, seed=1)
    task = env.task
    model, cfg = env.sim.model, task.cfg
    terms = hook.obs_terms(model, cfg)
    assert [t["name"] for t in terms] == [n for n, _ in task.obs_layout()]
    assert [t["size"] for t in terms] == [s for _, s in task.obs_layout()]
    assert required_inputs(terms) == ["joint_states", "object_pose"]
    assert static_inputs(terms) == ["goal_pose", "object_box"]
    kin = Kinematics(hook.kinematics(model, cfg))
    profile = load_profile(PROFILES[arm])
    state = RobotState(profile, task.joint_names)
    ends = np.cumsum([t["size"] for t in terms])
    palm = slice(int(ends[6] - 3), int(ends[6]))  # palm_pos: palm position minus its home position
    obs = env.reset()
    gen = np.random.default_rng(0)
    action = np.zeros(task.action_dim)
    palm_moved = 0.0
    for k in range(80):
        _ingest(state, env, hook, profile, 0.02 * k)
        expected = obs["policy"][0].numpy()
        got = build_observation(terms, state, np.zeros(task.action_dim), 0.02 * k,
                                last_command=task.targets[0].double().numpy(), kinematics=kin)
        err = np.abs(got - expected)
        worst = terms[int(np.searchsorted(ends, err.argmax(), side="right"))]["name"]
        assert err.max() < 2e-5, f"step {k}: {err.max():.2e} in {worst}"
        palm_moved = max(palm_moved, float(np.abs(got[palm]).max()))
        action = np.clip(0.8 * action + 0.5 * gen.standard_normal(task.action_dim), -1, 1)
        obs, _, _, _, info = env.step(torch.as_tensor(action, dtype=torch.float32)[None])
        assert "episode" not in info
    assert palm_moved > 0.02  # the arm moved the palm: FK was exercised away from the home pose


@pytest.mark.parametrize("arm", ["kuka_iiwa", "floating"])
def test_chain_targets_equal_apply_action_and_sim_action_inverts_them(arm):
    """Step 4 of the safety chain (relative arm targets, smoothed hand targets) is the task's apply_action,
    and the sim robot's sim_action maps the command back to the action."""
    from robotrl.tasks.tool_use import robot_io as hook

    env = _env(arm)
    task = env.task
    env.reset()
    spec = {"action_spec": task.action_spec(), "joint_names": task.joint_names, "obs_terms": [], "obs_norm": None}
    chain = SafetyChain(spec, load_profile(PROFILES[arm]), env.step_dt)
    state = RobotState(load_profile(PROFILES[arm]), task.joint_names)
    gen = np.random.default_rng(1)
    for _ in range(10):
        chain.last_command = task.targets[0].double().numpy().copy()
        action = np.clip(gen.uniform(-0.9, 0.9, task.action_dim), -1, 1)
        got = chain._targets(action, state)
        np.testing.assert_allclose(hook.sim_action(task, got), action, atol=1e-4)
        task.apply_action(torch.as_tensor(action, dtype=torch.float32)[None])
        np.testing.assert_allclose(got, task.targets[0].double().numpy(), atol=1e-5)
        np.testing.assert_allclose(chain._action_of(got, chain.last_command), action, atol=1e-5)


def test_object_pose_validation_and_lifted_latch():
    """Wrong frame, NaN and non-unit quaternions are dropped and counted; ``object_lifted`` needs the
    height *and* the fingertips at the box, stays latched when the object is lowered, and clears on arm."""
    profile = load_profile("tool_use_floating_sim")
    state = RobotState(profile, profile.joints.names)

    def pose(x, y, z, qw=1.0, frame="world"):
        return msgs.PoseStamped(header=msgs.Header(frame_id=frame), pose=msgs.Pose(
            msgs.Point(x, y, z), msgs.Quaternion(x=0.0, y=0.0, z=0.0, w=qw)))

    assert not state.ingest_object_pose(pose(0.5, 0.0, 0.02, frame="camera"), 0.0)
    assert not state.ingest_object_pose(pose(float("nan"), 0.0, 0.02), 0.0)
    assert not state.ingest_object_pose(pose(0.5, 0.0, 0.02, qw=1.2), 0.0)
    assert not state.ingest_object_box(msgs.Float64MultiArray(data=[0.0] * 6), 0.0)
    assert not state.ingest_object_box(msgs.Float64MultiArray(data=[0, 0, 0, 0.1, 0.0, 0.02, 0.02]), 0.0)
    assert dict(state.rejected) == {"object_pose/wrong_frame": 1, "object_pose/nan": 1, "object_pose/out_of_range": 1,
                                    "object_box/wrong_length": 1, "object_box/out_of_range": 1}
    assert state.ingest_object_box(msgs.Float64MultiArray(data=[0.0, 0, 0, 0.1, 0.02, 0.02, 0.02]), 0.0)
    # a one-site "hand": the site's world position is the body's, which sits at the origin plus a slide joint
    kin = Kinematics({"bodies": [{"name": "hand", "parent": -1, "pos": [0.5, 0.0, 0.0], "quat": [1, 0, 0, 0],
                                  "joints": [{"name": "wrist_z", "type": "slide", "axis": [0, 0, 1], "pos": [0, 0, 0],
                                              "qpos0": 0.0}]}],
                      "sites": [{"name": "tip", "body": 0, "pos": [0.0, 0.0, 0.0]}]})
    term = [{"name": "lifted", "size": 1, "source": "object_lifted", "sites": ["tip"], "lift_height": 0.15,
             "hand_dist": 0.05, "scale": 1.0, "offset": 0.0}]
    z = profile.joints.names.index("wrist_z")

    def lifted(obj_z, hand_z):
        assert state.ingest_object_pose(pose(0.5, 0.0, obj_z), 0.0)
        state.joint_pos[z] = hand_z
        return float(build_observation(term, state, np.zeros(1), 0.0, kinematics=kin)[0])

    assert lifted(0.02, 0.3) == 0.0  # on the table
    assert lifted(0.30, 0.5) == 0.0  # high, but the hand 0.18 m above the box: knocked up, not lifted
    assert lifted(0.16, 0.17) == 0.0  # hand at the box, but 0.14 m above rest: not high enough
    assert lifted(0.18, 0.19) == 1.0  # 0.16 m above rest with the hand 0.01 m off the box's top face
    assert lifted(0.02, 0.02) == 1.0  # latched when lowered
    state.new_episode()
    assert lifted(0.02, 0.02) == 0.0
