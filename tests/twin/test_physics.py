"""Physics multipliers: which bodies ``object_mass`` scales, and the YAML round trip of the new field."""

import numpy as np
import pytest

from robotrl.twin.physics import Physics, load_physics, model_with, object_bodies, save_physics
from robotrl.twin.record import make_task_env


@pytest.fixture(scope="module")
def tool_model():
    return make_task_env("tool_use").sim.model


def test_object_bodies_are_the_tool_and_never_a_floating_robots_root(tool_model):
    assert object_bodies(tool_model).tolist() == [tool_model.body("tool").id]
    humanoid = make_task_env("humanoid").sim.model
    assert int(humanoid.jnt_type[0]) == 0  # floating root: a free joint, but the robot's own
    assert object_bodies(humanoid).size == 0


def test_object_mass_scales_the_tool_on_top_of_body_mass_and_leaves_the_robot_at_body_mass(tool_model):
    m = model_with(tool_model, Physics(body_mass=1.1, object_mass=1.5))
    tool = tool_model.body("tool").id
    robot = np.arange(tool_model.nbody) != tool
    assert m.body_mass[tool] == pytest.approx(1.65 * tool_model.body_mass[tool])
    np.testing.assert_allclose(m.body_inertia[tool], 1.65 * tool_model.body_inertia[tool])
    np.testing.assert_allclose(m.body_mass[robot], 1.1 * tool_model.body_mass[robot])
    np.testing.assert_allclose(m.body_inertia[robot], 1.1 * tool_model.body_inertia[robot])


def test_object_mass_round_trips_through_yaml_and_must_be_positive(tmp_path):
    physics = Physics(object_mass=1.7, geom_friction=0.6)
    assert load_physics(save_physics(physics, tmp_path / "p.yaml")) == physics
    (tmp_path / "bad.yaml").write_text("physics:\n  object_mass: 0.0\n")
    with pytest.raises(ValueError, match="object_mass"):
        load_physics(tmp_path / "bad.yaml")
