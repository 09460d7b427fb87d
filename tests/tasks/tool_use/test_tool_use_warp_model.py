"""The tool-use model is accepted by MuJoCo Warp (the GPU recipe's backend), checked on Warp's CPU device."""

import numpy as np
import pytest
import torch
from robotrl.tasks.tool_use.config import ToolUseConfig
from robotrl.tasks.tool_use.task import PER_WORLD_FIELDS, ToolUseTask


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["kuka_iiwa", "floating"])
def test_model_converts_and_steps_in_mujoco_warp(arm):
    if arm == "kuka_iiwa":
        pytest.importorskip("pybullet_data", reason="the KUKA arm needs pybullet_data: pip install pybullet")
    wp = pytest.importorskip("warp", reason="pip install robotrl[gpu]")
    mjw = pytest.importorskip("mujoco_warp", reason="pip install robotrl[gpu]")
    import mujoco

    model = ToolUseTask(ToolUseConfig(arm=arm), 2, torch.device("cpu")).build_model()
    assert model.opt.solver in (mujoco.mjtSolver.mjSOL_NEWTON, mujoco.mjtSolver.mjSOL_CG)  # Warp has no PGS
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(model, batch_sizes={name: 2 for name in PER_WORLD_FIELDS})  # all batchable
        d = mjw.put_data(model, data, nworld=2)
        for _ in range(10):
            mjw.step(m, d)
        qpos = d.qpos.numpy()
    ref = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, ref, 0)
    mujoco.mj_step(model, ref, nstep=10)
    assert np.isfinite(qpos).all()
    np.testing.assert_allclose(qpos[0], ref.qpos, atol=1e-3)  # same physics as the CPU backend


def test_gpu_recipe_declares_every_per_world_field(train_cfg):
    cfg = train_cfg("task=tool_use_gpu", "sim=warp")
    assert set(PER_WORLD_FIELDS) <= set(cfg.sim.per_world_fields)
    assert cfg.sim.backend == "warp" and cfg.sim.num_envs >= 4096
    assert cfg.policy.actor_hidden == [1024, 1024, 512, 512] and cfg.algo.clip == 0.1 and cfg.algo.num_steps == 16


def test_gpu_recipe_shares_the_cpu_recipes_task_settings_and_rewards(train_cfg):
    # What made tool_use_gpu lift and reach goals on an H200 (session 42; 12 s episodes, 0.005 s x 4 and
    # delays of 3 had not in 5 minutes): the CPU main job's step, episode length, delays and reward weights.
    gpu, cpu = train_cfg("task=tool_use_gpu", "sim=warp"), train_cfg("task=tool_use")
    for name in ("timestep", "frame_skip", "episode_length_s", "obs_delay_max", "object_delay_max",
                 "action_delay_max", "reward_scales"):
        assert getattr(gpu.task, name) == getattr(cpu.task, name), name
    assert (gpu.task.timestep, gpu.task.frame_skip) == (0.01, 2)
    assert gpu.policy.init_std == cpu.policy.init_std and gpu.algo.entropy_coef == cpu.algo.entropy_coef


def test_gpu_recipe_integrates_with_euler_and_a_bad_integrator_name_is_a_clear_error(train_cfg):
    import mujoco

    assert train_cfg("task=tool_use_gpu", "sim=warp").task.integrator == "euler"
    assert train_cfg("task=tool_use").task.integrator == "implicitfast"
    model = ToolUseTask(ToolUseConfig(arm="floating", integrator="euler"), 1, torch.device("cpu")).build_model()
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    with pytest.raises(ValueError, match="task.integrator='rk5'.*valid: implicitfast, euler"):
        ToolUseTask(ToolUseConfig(arm="floating", integrator="rk5"), 1, torch.device("cpu")).build_model()


def _warp_failures(train_cfg, integrator: str, steps: int = 120) -> int:
    """Worlds reset for diverged physics: 32 worlds of task=tool_use_gpu on Warp's CPU device, random actions."""
    from robotrl.envs.task_env import make_env

    cfg = train_cfg("task=tool_use_gpu", "sim=warp", "sim.device=cpu", "sim.num_envs=32",
                    f"task.integrator={integrator}")
    env = make_env(cfg.task, cfg.sim, seed=0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        env.step(torch.rand(32, env.num_actions, generator=gen) * 2 - 1)
    return env.total_sim_resets


@pytest.mark.slow
def test_on_warp_both_integrators_keep_every_world_once_set_consts_outputs_are_per_world(train_cfg, monkeypatch):
    pytest.importorskip("mujoco_warp", reason="pip install robotrl[gpu]")
    pytest.importorskip("pybullet_data", reason="the KUKA arm needs pybullet_data: pip install pybullet")
    import robotrl.sim.mujoco_warp as backend

    # What the Warp "implicitfast blow-ups" were: tool_use writes masses and inertias per world, set_const wrote the
    # constants it derives from them (dof_invweight0, ...) into rows shared by all worlds, and the last world won.
    assert _warp_failures(train_cfg, "implicitfast") == 0
    assert _warp_failures(train_cfg, "euler") == 0
    monkeypatch.setattr(backend, "_SETCONST_OUTPUTS", ())  # the old, shared outputs
    assert _warp_failures(train_cfg, "implicitfast") > 0
