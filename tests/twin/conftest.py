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
