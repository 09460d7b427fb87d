"""Shared fixtures: compose the real Hydra configs shipped in robotrl.configs."""

import os

import pytest
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
