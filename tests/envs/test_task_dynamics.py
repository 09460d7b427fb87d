"""task.dynamics=<physics.yaml>: calibrated physics as the model's nominal values or the centre of DR."""

import numpy as np
import pytest
import torch
from robotrl.tasks import config_class

from robotrl.envs.task_env import TaskEnv
from robotrl.sim.backend import SimConfig
from robotrl.twin.physics import Physics, save_physics

CALIBRATED = Physics(body_mass=1.2, dof_damping=1.5, actuator_gain=0.8, geom_friction=0.9, delay_steps=2)


@pytest.fixture
def calibrated_file(tmp_path):
    return str(save_physics(CALIBRATED, tmp_path / "calibrated.yaml", {"intervals_95": {"body_mass": 0.01}}))


def humanoid(n=1, **values):
    return TaskEnv(config_class("humanoid")(**values), SimConfig(num_envs=n, nthread=1), seed=0)


def test_nominal_mode_compiles_calibrated_values_into_every_world(calibrated_file):
    nominal = humanoid(randomize=False).sim.model
    env = humanoid(3, dynamics=calibrated_file, dynamics_mode="nominal", randomize=True)
    m = env.sim.model
    np.testing.assert_allclose(m.body_mass, 1.2 * nominal.body_mass)
    np.testing.assert_allclose(m.dof_damping, 1.5 * nominal.dof_damping)
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], 0.8 * nominal.actuator_gainprm[:, 0])
    np.testing.assert_allclose(m.geom_friction[:, 0], 0.9 * nominal.geom_friction[:, 0])
    # randomize=True, but nominal mode: no dynamics randomization, every world is the calibrated model
    per_world = env.sim.model_field("body_mass").numpy()
    np.testing.assert_allclose(per_world, np.broadcast_to(1.2 * nominal.body_mass, per_world.shape))
    friction = env.sim.model_field("geom_friction").numpy()[..., 0]
    np.testing.assert_allclose(friction, np.broadcast_to(0.9 * nominal.geom_friction[:, 0], friction.shape))
    assert env._delay.tolist() == [2, 2, 2]


def test_nominal_mode_delays_actions_by_the_calibrated_steps(calibrated_file):
    env = humanoid(dynamics=calibrated_file, dynamics_mode="nominal", randomize=False, obs_noise_std=0.0)
    ctrl = env.sim.bind("ctrl")
    seen = []
    for k in range(4):
        env.step(torch.full((1, env.num_actions), 0.1 * (k + 1)))
        seen.append(float(ctrl[0, 0]) / float(env.task.ctrl_high[0]))
    assert seen == pytest.approx([0.0, 0.0, 0.1, 0.2], abs=1e-6)


def test_center_mode_randomizes_around_the_calibrated_values(calibrated_file):
    nominal = humanoid(randomize=False).sim.model
    n = 64
    env = humanoid(n, dynamics=calibrated_file, dynamics_mode="center", randomize=True, action_delay_max=2)
    cfg = env.cfg
    ratio = env.sim.model_field("body_mass").numpy()[:, 1:] / nominal.body_mass[1:]
    lo, hi = 1.2 * cfg.mass_range[0], 1.2 * cfg.mass_range[1]
    assert ratio.min() >= lo - 1e-9 and ratio.max() <= hi + 1e-9
    assert ratio.mean() == pytest.approx(1.2 * np.mean(cfg.mass_range), rel=0.02)  # centred on 1.2, not on 1.0
    assert ratio.std() > 0.02  # randomized, not fixed
    friction = env.sim.model_field("geom_friction").numpy()[:, 0, 0] / nominal.geom_friction[0, 0]
    assert friction.min() >= 0.9 * cfg.friction_range[0] - 1e-9 and friction.max() <= 0.9 * cfg.friction_range[1] + 1e-9
    # delay: action_delay_max + 1 = 3 values centred on the calibrated 2
    assert set(env._delay.tolist()) == {1, 2, 3}


def test_without_a_file_the_delay_draws_are_unchanged():
    env = humanoid(64, randomize=True, action_delay_max=2)
    assert env.physics is None
    assert set(env._delay.tolist()) == {0, 1, 2}


def test_bad_mode_and_missing_file_name_the_problem(tmp_path, calibrated_file):
    with pytest.raises(ValueError, match="dynamics_mode='centre'.*center"):
        humanoid(dynamics=calibrated_file, dynamics_mode="centre")
    with pytest.raises(FileNotFoundError, match="missing.yaml.*robotrl twin calibrate"):
        humanoid(dynamics=str(tmp_path / "missing.yaml"))


def test_hydra_train_config_accepts_task_dynamics(train_cfg, calibrated_file):
    cfg = train_cfg("task=humanoid", f"task.dynamics={calibrated_file}", "task.dynamics_mode=nominal")
    assert cfg.task.dynamics == calibrated_file and cfg.task.dynamics_mode == "nominal"
    env = TaskEnv(cfg.task, SimConfig(num_envs=2, nthread=1))
    assert env.physics == CALIBRATED


@pytest.mark.parametrize("task", ["tool_use", "driving"])
def test_other_tasks_run_the_calibrated_robot(task, calibrated_file):
    make = lambda **v: TaskEnv(config_class(task)(**v), SimConfig(num_envs=2, nthread=1))  # noqa: E731
    base = make(randomize=False).sim.model_field("body_mass").numpy()[0]
    env = make(randomize=True, dynamics=calibrated_file, dynamics_mode="nominal")
    mass = env.sim.model_field("body_mass").numpy()[0]
    robot = base > 0
    if task == "tool_use":  # the tool comes from the pool, per world: the calibrated body_mass scales it as well
        tool = env.task._tool_body
        robot[tool] = False
        pooled = env.task.pool_fields["body_mass"][env.task.tool_id].numpy()
        np.testing.assert_allclose(env.sim.model_field("body_mass").numpy()[:, tool], 1.2 * pooled, rtol=1e-6)
    np.testing.assert_allclose(mass[robot], 1.2 * base[robot])
    assert env._delay.tolist() == [2, 2]


def test_tool_use_pool_tools_take_the_calibrated_object_mass(tmp_path):
    path = str(save_physics(Physics(object_mass=1.5), tmp_path / "tool.yaml"))
    make = lambda **v: TaskEnv(config_class("tool_use")(**v), SimConfig(num_envs=4, nthread=1))  # noqa: E731
    env, base = make(randomize=False, dynamics=path), make(randomize=False)
    assert env.task.tool_mass_calibration == pytest.approx(1.5) and base.task.tool_mass_calibration == 1.0
    tool = env.task._tool_body
    for e, scale in ((env, 1.5), (base, 1.0)):
        pooled = e.task.pool_fields["body_mass"][e.task.tool_id].numpy()
        np.testing.assert_allclose(e.sim.model_field("body_mass").numpy()[:, tool], scale * pooled, rtol=1e-6)
    robot = np.arange(env.sim.model.nbody) != tool
    np.testing.assert_allclose(env.sim.model_field("body_mass").numpy()[:, robot],
                               base.sim.model_field("body_mass").numpy()[:, robot])
