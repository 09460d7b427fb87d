"""A tiny trained humanoid checkpoint shared by the cluster tests."""

import pytest

from robotrl.runners import make_runner


@pytest.fixture(scope="session")
def humanoid_checkpoint(tmp_path_factory):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from robotrl.config import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "task=humanoid", "sim.num_envs=4", "sim.nthread=1", "algo.num_steps=4", "max_iterations=2",
            "progress=false", "tensorboard=false", "eval_at_end=false"])
    GlobalHydra.instance().clear()
    run_dir = tmp_path_factory.mktemp("humanoid_run")
    make_runner(OmegaConf.to_object(cfg), run_dir).learn()
    return str(run_dir)
