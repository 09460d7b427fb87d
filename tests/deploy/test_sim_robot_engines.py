"""robotrl-sim-robot physics:=<yaml> (perturbed or calibrated physics) and engine:=pybullet, over real DDS."""

import time

import numpy as np
import pytest
import torch

from tests.deploy.helpers import free_domain, spawn, stop

pytest.importorskip("cyclonedds")
pytest.importorskip("pybullet")

PHYSICS = {"body_mass": 1.15, "dof_damping": 1.3, "actuator_gain": 0.85, "delay_steps": 1}


@pytest.fixture
def physics_file(tmp_path):
    from robotrl.twin.physics import Physics, save_physics

    return str(save_physics(Physics(**PHYSICS), tmp_path / "physics.yaml"))


def test_physics_file_perturbs_the_sim_robot(physics_file):
    from robotrl.deploy.sim_robot import DEFAULTS, SimRobot
    from robotrl.tasks.humanoid.config import HumanoidConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    nominal = TaskEnv(HumanoidConfig(randomize=False), SimConfig(num_envs=1)).sim.model
    robot = SimRobot({**DEFAULTS, "physics": physics_file, "transport": "cyclonedds", "domain_id": free_domain(),
                      "localhost_only": True})
    try:
        model = robot.env.sim.model
        np.testing.assert_allclose(model.body_mass, 1.15 * nominal.body_mass)
        np.testing.assert_allclose(model.dof_damping, 1.3 * nominal.dof_damping)
        np.testing.assert_allclose(model.actuator_gainprm[:, 0], 0.85 * nominal.actuator_gainprm[:, 0])
        assert robot.env._delay.tolist() == [1]
    finally:
        robot.transport.close()


def test_pybullet_sim_robot_over_dds_matches_the_in_process_robot(physics_file, tmp_path):
    from robotrl.deploy import msgs
    from robotrl.deploy.profile import load_profile
    from robotrl.deploy.transport import RELIABLE_QOS, SENSOR_QOS, make_transport
    from robotrl.tasks.humanoid.config import HumanoidConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig
    from robotrl.twin.bullet import use_pybullet

    steps = 6
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, 17))
    env = TaskEnv(HumanoidConfig(randomize=False, dynamics=physics_file, dynamics_mode="nominal"),
                  SimConfig(num_envs=1), seed=0)
    use_pybullet(env)
    env.reset()
    qadr = [env.sim.model.jnt_qposadr[env.sim.model.joint(n).id] for n in env.task.joint_names]
    expected = []
    for a in actions:
        env.step(torch.as_tensor(a, dtype=torch.float32)[None])
        expected.append(env.sim.bind("qpos")[0].numpy()[qadr].copy())

    domain = free_domain()
    sim = spawn(["robotrl.deploy.sim_robot", "task:=humanoid", "engine:=pybullet", f"physics:={physics_file}",
                 "use_sim_time:=true", "lockstep:=true", "transport:=cyclonedds"], domain, tmp_path / "sim.log")
    tr = make_transport("cyclonedds", domain_id=domain, localhost_only=True)
    topic = load_profile("humanoid_sim").output.topic
    pub = tr.publisher(topic, msgs.Float64MultiArray, RELIABLE_QOS)
    sub = tr.subscription("/joint_states", msgs.JointState, SENSOR_QOS)
    period = env.step_dt
    got: dict[int, np.ndarray] = {}

    def wait_for(step: int, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while step not in got and time.monotonic() < end and sim.poll() is None:
            for _, m in sub.take():
                k = round((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec) / period)
                got[k] = np.asarray(m.position)
            time.sleep(0.005)
        assert step in got, (tmp_path / "sim.log").read_text()[-2000:]

    try:
        wait_for(0)
        end = time.monotonic() + 30
        while pub.matched() == 0 and time.monotonic() < end:
            time.sleep(0.05)
        assert pub.matched(), f"the sim robot never subscribed to {topic}"
        for k, a in enumerate(actions):
            pub.publish(msgs.Float64MultiArray(data=(0.4 * a).tolist()))  # ctrl = 0.4 * action (the ctrl range)
            wait_for(k + 1)
    finally:
        tr.close()
        stop(sim)
    log = (tmp_path / "sim.log").read_text()
    assert "engine pybullet" in log and "body_mass=1.15" in log
    for k in range(steps):
        np.testing.assert_allclose(got[k + 1], expected[k], atol=1e-9, err_msg=f"step {k + 1}")
    assert np.abs(expected[-1] - expected[0]).max() > 1e-3  # the commands moved the robot
