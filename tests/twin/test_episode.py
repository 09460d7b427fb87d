"""Bag loading: the deploy layout into a typed Episode, and clear errors for bad bags."""

import shutil

import numpy as np
import pytest

from robotrl.twin.episode import BagError, load_episode, load_episodes


def test_episode_has_aligned_states_commands_and_base(nominal_bag, humanoid_profile):
    ep = load_episode(nominal_bag)  # profile from the bag's metadata
    assert ep.robot == "humanoid_sim" and ep.task == "humanoid"
    assert ep.joint_names == humanoid_profile.joints.names
    T, J = ep.q.shape
    assert T >= 5 and J == 17
    assert ep.command.shape == (T - 1, J) and not ep.command_held.any()
    assert ep.base_pos.shape == (T, 3) and ep.base_quat.shape == (T, 4)
    assert np.allclose(np.linalg.norm(ep.base_quat, axis=1), 1.0)
    assert ep.dt == pytest.approx(0.015)
    assert ep.observation.shape[0] == T - 1 and ep.action.shape == (T - 1, 17)
    assert ep.cmd_vel.shape == (T, 2)
    # effort is the joint torque the motors applied (qfrc_actuator): gear * command of step k, in the state after
    # it; the humanoid's motors take commands in [-0.4, 0.4], so a torque is not its command
    from robotrl.twin.record import actuator_ids, make_task_env

    model = make_task_env("humanoid").sim.model
    gear = model.actuator_gear[actuator_ids(model, ep.joint_names), 0]
    assert (gear > 1.0).all()
    assert np.allclose(ep.tau[1:], gear * ep.command)


def test_joints_are_mapped_by_name_not_index(nominal_bag, humanoid_profile, tmp_path):
    import dataclasses

    joints = dataclasses.replace(humanoid_profile.joints, names=list(reversed(humanoid_profile.joints.names)))
    reordered = dataclasses.replace(humanoid_profile, joints=joints)
    ep, rev = load_episode(nominal_bag), load_episode(nominal_bag, reordered)
    assert np.array_equal(rev.q, ep.q[:, ::-1]) and np.array_equal(rev.dq, ep.dq[:, ::-1])


def test_truncated_bag_names_topic_and_problem(nominal_bag, tmp_path):
    bad = tmp_path / "truncated"
    shutil.copytree(nominal_bag, bad)
    mcap = next(bad.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])
    with pytest.raises(BagError, match=r"truncated|corrupt") as err:
        load_episode(bad)
    assert str(bad) in str(err.value)


def test_corrupt_metadata_is_an_error(nominal_bag, tmp_path):
    bad = tmp_path / "corrupt"
    shutil.copytree(nominal_bag, bad)
    (bad / "metadata.yaml").write_text("rosbag2_bagfile_information: [unclosed\n")
    with pytest.raises(BagError, match="metadata.yaml is corrupt"):
        load_episode(bad)


def test_bag_from_another_robot_names_topic_and_joints(nominal_bag, tmp_path):
    from robotrl.deploy.profile import load_profile

    with pytest.raises(BagError, match=r"/joint_states: joints \['shoulder_pan'"):
        load_episode(nominal_bag, load_profile("example_arm"))


def test_missing_command_topic_is_named(nominal_bag, humanoid_profile):
    import dataclasses

    other = dataclasses.replace(humanoid_profile,
                                output=dataclasses.replace(humanoid_profile.output, topic="/nope/commands"))
    with pytest.raises(BagError, match=r"topic /nope/commands \(sent commands\) has no messages"):
        load_episode(nominal_bag, other)


def test_load_episodes_reads_a_directory(nominal_bag):
    eps = load_episodes(nominal_bag.parent)
    assert len(eps) == 1
    with pytest.raises(BagError, match="no rosbag2 bags"):
        load_episodes(nominal_bag.parent / "no_such_dir")
