"""task.scenarios + task.scenario_mix: the mined regions reach the task's resets."""

import torch

from robotrl.twin.scenarios import Region, ScenarioFile


def _env(path, mix, n=200):
    from robotrl.tasks.humanoid.config import HumanoidConfig
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    cfg = HumanoidConfig(scenarios=str(path), scenario_mix=mix, standing_prob=0.0)
    return TaskEnv(cfg, SimConfig(num_envs=n, nthread=1), seed=0), HumanoidTask.scenario_params


def test_scenario_mix_reaches_the_resets(tmp_path):
    from robotrl.tasks.humanoid.task import HumanoidTask

    region = Region(bounds={"cmd_vx": [1.4, 1.5], "friction": [0.4, 0.45]}, failure_rate=1.0, samples=10)
    path = ScenarioFile("humanoid", HumanoidTask.scenario_params, [region]).save(tmp_path / "s.yaml")
    env, _ = _env(path, 0.5)
    vx, fr = env.task.command[:, 0], env.task.friction_scale
    in_region = (vx >= 1.4) & (fr <= 0.45)
    frac = in_region.float().mean().item()
    assert 0.35 < frac < 0.65  # about half the worlds, the rest from the task's own ranges (friction >= 0.6)
    got = env.sim.model_field("geom_friction")[in_region][:, :, 0]
    assert torch.allclose(got, torch.as_tensor(env.sim.model.geom_friction[:, 0]) * fr[in_region, None].double())
    env_off, _ = _env(path, 0.0)
    assert not ((env_off.task.command[:, 0] >= 1.4) & (env_off.task.friction_scale <= 0.45)).any()


def test_unknown_scenario_parameter_is_an_error(tmp_path):
    import pytest
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.twin.scenarios import ScenarioParam

    params = [*HumanoidTask.scenario_params, ScenarioParam("handle_thickness", 0.0, 1.0)]
    path = ScenarioFile("humanoid", params, [Region({"handle_thickness": [0, 0.1]}, 1.0, 5)]).save(tmp_path / "b.yaml")
    with pytest.raises(ValueError, match="handle_thickness"):
        _env(path, 0.5, n=4)
