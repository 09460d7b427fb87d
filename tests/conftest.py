"""Shared fixtures: compose the real Hydra configs shipped in robotrl.configs."""

import os

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from robotrl.config import register_configs

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture
def train_cfg():
    """Compose ``train.yaml`` with overrides and return the typed TrainConfig."""

    def _compose(*overrides: str):
        register_configs()
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
            cfg = compose(config_name="train", overrides=list(overrides))
        return OmegaConf.to_object(cfg)

    return _compose


@pytest.fixture
def one_torch_thread():
    """Small models train 10x slower with 2 spinning threads on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def local_ray():
    """Ray with 2 CPUs on 127.0.0.1 for one test module (shut down after it)."""
    pytest.importorskip("ray", reason="pip install 'robotrl[cluster]'")
    from robotrl.cluster.batch import init_ray

    ray = init_ray(2)
    yield ray
    ray.shutdown()
