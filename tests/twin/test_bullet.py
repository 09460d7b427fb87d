"""The same robot in PyBullet: exact kinematics and inertia, open-loop replay of a MuJoCo bag, sim-to-sim."""

import copy

import mujoco
import numpy as np
import pytest
import torch

pytest.importorskip("pybullet")

from robotrl.twin.bullet import BulletWorld, use_pybullet  # noqa: E402
from robotrl.twin.record import make_task_env  # noqa: E402


def random_state(m, d, seed=0):
    rng = np.random.default_rng(seed)
    qpos, qvel = d.qpos.copy(), rng.normal(size=m.nv) * 0.5
    for j in range(m.njnt):
        if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            qpos[m.jnt_qposadr[j]] += rng.uniform(-0.5, 0.5)
        elif m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            a = m.jnt_qposadr[j]
            qpos[a + 3:a + 7] = rng.normal(size=4) / 2
            qpos[a + 3:a + 7] /= np.linalg.norm(qpos[a + 3:a + 7])
    return qpos, qvel


@pytest.mark.parametrize("task", ["humanoid", "tool_use"])
def test_rebuilt_robot_has_mujocos_centres_of_mass_and_velocities(task):
    import pybullet as pb

    m, d = make_task_env(task).sim.get_world(0)
    qpos, qvel = random_state(m, d)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    world = BulletWorld(m)
    world.set_state(qpos, qvel)
    assert len(world.link_of) == m.nbody - 1 - int((m.body_mocapid >= 0).sum())
    for b, (body, link) in world.link_of.items():
        if link < 0:
            com = pb.getBasePositionAndOrientation(body, physicsClientId=world.client)[0]
            vel = pb.getBaseVelocity(body, physicsClientId=world.client)[0]
        else:
            state = pb.getLinkState(body, link, computeLinkVelocity=1, computeForwardKinematics=1,
                                    physicsClientId=world.client)
            com, vel = state[0], state[6]
        mj_vel = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, mj_vel, 0)
        np.testing.assert_allclose(com, d.xipos[b], atol=1e-9, err_msg=m.body(b).name)
        np.testing.assert_allclose(vel, mj_vel[3:], atol=1e-9, err_msg=m.body(b).name)
    back_q, back_v = np.zeros(m.nq), np.zeros(m.nv)
    for _, _, adr, _ in world.free:  # q and -q are one rotation: get_state keeps the sign already there
        back_q[adr + 3:adr + 7] = qpos[adr + 3:adr + 7]
    world.get_state(back_q, back_v)
    np.testing.assert_allclose(back_q, qpos, atol=1e-7)
    np.testing.assert_allclose(back_v, qvel, atol=1e-9)
    world.close()


def test_rebuilt_arm_and_hand_have_mujocos_mass_matrix():
    import pybullet as pb

    m, _ = make_task_env("tool_use").sim.get_world(0)
    m = copy.copy(m)
    m.dof_armature[:] = 0  # armature is a rotor in PyBullet (no inverse dynamics for a disc of no width)
    d = mujoco.MjData(m)
    d.qpos[:] = random_state(m, mujoco.MjData(m), seed=1)[0]
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    world = BulletWorld(m)
    world.set_state(d.qpos, d.qvel)
    body, links = world._links[0]
    q = [pb.getJointState(body, lk, physicsClientId=world.client)[0] for lk in links]
    bullet = np.asarray(pb.calculateMassMatrix(body, q, physicsClientId=world.client))
    dofs = world.jv[: len(links)]
    assert len(links) == 23  # 7 arm + 16 hand joints
    np.testing.assert_allclose(bullet, full[np.ix_(dofs, dofs)], atol=1e-4)  # rotors of 1e-6 kg
    world.close()


def test_free_fall_matches_mujoco_without_contacts():
    import pybullet as pb

    m, d = make_task_env("humanoid").sim.get_world(0)
    m = copy.copy(m)
    m.geom_contype[:] = 0
    m.geom_conaffinity[:] = 0
    d.qvel[:] = 0.0
    mujoco.mj_forward(m, d)
    world = BulletWorld(m)
    world.set_state(d.qpos, d.qvel)
    z0 = float(d.subtree_com[1, 2])
    world.step(np.zeros(m.nu), 20)
    mujoco.mj_step(m, d, 20)
    mujoco.mj_forward(m, d)
    coms = [pb.getBasePositionAndOrientation(body, physicsClientId=world.client)[0] if link < 0 else
            pb.getLinkState(body, link, computeForwardKinematics=1, physicsClientId=world.client)[0]
            for body, link in (world.link_of[b] for b in range(1, m.nbody))]
    z_bullet = float(np.average(np.asarray(coms)[:, 2], weights=m.body_mass[1:]))
    fall = 0.5 * 9.81 * (20 * m.opt.timestep) ** 2  # whole-body COM: ballistic, 1.8 cm in 60 ms
    assert z0 - d.subtree_com[1, 2] == pytest.approx(fall, rel=0.06)  # semi-implicit Euler, 20 steps
    assert z0 - z_bullet == pytest.approx(fall, rel=0.06)  # 40 half steps
    q = np.zeros(m.nq)
    world.get_state(q, np.zeros(m.nv))
    assert q[2] == pytest.approx(d.qpos[2], abs=2e-3)  # the torso, after 60 ms of internal motion


@pytest.fixture(scope="module")
def arm_bag(tmp_path_factory):
    pytest.importorskip("rosbags")
    pytest.importorskip("cyclonedds")
    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import record_episode, task_profile

    g = torch.Generator().manual_seed(0)
    acts = (torch.rand(20, 23, generator=g) * 2 - 1) * 0.6
    profile = task_profile(make_task_env("tool_use"), "tool_use_twin")
    bag = record_episode("tool_use", tmp_path_factory.mktemp("arm"), lambda obs, k: acts[k:k + 1], 20,
                         profile=profile)
    return load_episode(bag, profile)


def test_open_loop_in_pybullet_tracks_the_arm_of_a_mujoco_bag(arm_bag):
    from robotrl.twin.replay import Twin

    ep = arm_bag
    roll = Twin("tool_use", [ep], engine="pybullet", nthread=1).open_loop()
    err = np.abs(roll.q[0, : ep.num_steps] - ep.q)
    assert err[0].max() < 1e-9  # the same recorded start
    assert err[:, :7].max() < 0.05  # the stiff position-controlled arm: same robot, another engine
    # the light fingers are where the engines differ (armature as rotors, explicit damping)
    assert err[:, 7:].max() > err[:, :7].max()


def test_task_env_in_pybullet_sees_task_writes_to_the_state():
    env = make_task_env("humanoid")
    use_pybullet(env)
    env.reset()
    qvel = env.sim.bind("qvel")
    x0 = float(env.sim.bind("qpos")[0, 0])
    qvel[0, 0] += 2.0  # a push, written by the task between steps
    env.step(torch.zeros(1, env.num_actions))
    assert float(env.sim.bind("qpos")[0, 0]) - x0 == pytest.approx(2.0 * env.step_dt, rel=0.2)


def test_unsupported_task_names_the_tasks_that_run():
    env = make_task_env("driving")
    with pytest.raises(NotImplementedError, match="humanoid.*tool_use"):
        use_pybullet(env)


def test_twin_report_cli_adds_the_pybullet_replay(nominal_bag, tmp_path):
    import json

    from robotrl.cli import main

    assert main(["twin", "report", f"bags={nominal_bag.parent}", "task=humanoid", "engines=mujoco,pybullet",
                 f"out={tmp_path}"]) == 0
    body = json.loads((tmp_path / "report.json").read_text())
    mujoco_row, bullet_row = body["rollouts"]["nominal"][0], body["rollouts"]["nominal_pybullet"][0]
    assert max(mujoco_row["q"]["max"]) < 1e-6  # the bag's own engine reproduces it
    assert 1e-6 < max(bullet_row["q"]["max"]) < 1.0  # another engine: close, not exact
    assert bullet_row["divergence_time_s"] <= mujoco_row["divergence_time_s"]


def test_bag_recorded_in_pybullet_replays_exactly_in_the_pybullet_twin(humanoid_profile, tmp_path):
    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import record_episode
    from robotrl.twin.replay import Twin

    g = torch.Generator().manual_seed(0)
    acts = (torch.rand(15, 17, generator=g) * 2 - 1) * 0.5
    bag = record_episode("humanoid", tmp_path, lambda obs, k: acts[k:k + 1], 12, profile=humanoid_profile,
                         engine="pybullet")
    ep = load_episode(bag, humanoid_profile)
    assert ep.metadata["engine"] == "pybullet"
    errors = {engine: np.abs(Twin("humanoid", [ep], engine=engine, nthread=1).open_loop().q[0, : ep.num_steps]
                             - ep.q).max() for engine in ("pybullet", "mujoco")}
    assert errors["pybullet"] < 1e-9  # the "real" robot's own engine
    assert errors["mujoco"] > 1e-3  # the MuJoCo twin of a PyBullet robot: a dynamics gap to calibrate


def test_teacher_forcing_keeps_the_twins_tool_where_it_is(arm_bag):
    from robotrl.twin.replay import Twin

    twin = Twin("tool_use", [arm_bag], nthread=1)
    twin.open_loop()
    tool = slice(twin.task._tq, twin.task._tq + 7)
    twin.sim.bind("qpos")[0, tool.start] += 0.05  # the twin's tool has moved away from its initial pose
    now = twin.sim.bind("qpos")[0].clone()
    kept, _ = twin.recorded_state(np.array([0]), 5, keep_unobserved=True)
    initial, _ = twin.recorded_state(np.array([0]), 5)
    np.testing.assert_allclose(kept[0, tool], now[tool])  # teacher forcing: the tool is not teleported back
    assert not np.allclose(initial[0, tool], now[tool])
    np.testing.assert_allclose(kept[0, twin.qadr], arm_bag.q[5])  # the robot is forced to the recording
    roll = Twin("tool_use", [arm_bag], nthread=1).teacher_forced(1)
    # MuJoCo bag, MuJoCo twin: exact up to the solver warm start each reset drops (1e-6)
    assert np.abs(roll.q[0, : arm_bag.num_steps] - arm_bag.q).max() < 1e-5
