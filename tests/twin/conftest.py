"""Twin fixtures: short humanoid bags recorded in process (deploy layout) under known physics."""

import pytest
import torch

pytest.importorskip("rosbags")
pytest.importorskip("cyclonedds")  # the recorder writes robotrl.deploy.msgs structs


def excitation(steps: int = 200, dim: int = 17, seed: int = 0, amplitude: float = 0.5):
    """A fixed random command sequence as an ``ActionFn`` (open-loop excitation)."""
    g = torch.Generator().manual_seed(seed)
    acts = (torch.rand(steps, dim, generator=g) * 2 - 1) * amplitude
    return lambda obs, k: acts[k : k + 1]


@pytest.fixture(scope="session")
def humanoid_profile():
    from robotrl.deploy.profile import load_profile

    return load_profile("humanoid_sim")


@pytest.fixture(scope="session")
def nominal_bag(tmp_path_factory, humanoid_profile):
    from robotrl.twin.record import record_episode

    root = tmp_path_factory.mktemp("bags_nominal")
    return record_episode("humanoid", root, excitation(), 25, profile=humanoid_profile)


@pytest.fixture(scope="session")
def perturbed_bag(tmp_path_factory, humanoid_profile):
    from robotrl.twin.physics import Physics
    from robotrl.twin.record import record_episode

    root = tmp_path_factory.mktemp("bags_perturbed")
    truth = Physics(body_mass=1.15, dof_damping=1.3, actuator_gain=0.85)
    return record_episode("humanoid", root, excitation(seed=1), 25, physics=truth, profile=humanoid_profile), truth


PUSH_TRUTH = {"object_mass": 1.3, "geom_friction": 0.8}


def push(joint: int = 4, sign: float = 1.0):
    """An open-loop arm command that pushes tool_use's tool along the table (one arm joint at full speed)."""
    action = torch.zeros(1, 23)
    action[0, joint] = sign
    return lambda obs, k: action


@pytest.fixture(scope="session")
def tool_profile():
    from robotrl.twin.record import make_task_env, task_profile

    return task_profile(make_task_env("tool_use"), "tool_use_twin")


@pytest.fixture(scope="session")
def tool_push_bags(tmp_path_factory, tool_profile):
    """Two 30-step tool_use bags of the same push: nominal physics, and a heavier tool on less friction."""
    from robotrl.twin.physics import Physics
    from robotrl.twin.record import record_episode

    root = tmp_path_factory.mktemp("bags_push")
    truth = Physics(**PUSH_TRUTH)
    nominal = record_episode("tool_use", root, push(), 30, profile=tool_profile, name="nominal")
    perturbed = record_episode("tool_use", root, push(), 30, physics=truth, profile=tool_profile, name="perturbed")
    return nominal, perturbed, truth
