"""gymnasium and SB3 adapters; SB3's own PPO trains through ours (the peer check)."""

import numpy as np
import pytest
import torch
from robotrl.tasks.humanoid.config import HumanoidConfig

from robotrl.envs.adapters import GymVectorEnv, make_sb3_vec_env
from robotrl.envs.task_env import TaskEnv
from robotrl.sim import SimConfig


def _env(n=4, length=0.15):
    return TaskEnv(HumanoidConfig(randomize=False, episode_length_s=length), SimConfig(num_envs=n, nthread=2))


def test_gymnasium_vector_env_same_step_autoreset():
    env = GymVectorEnv(_env())
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, env.single_observation_space.shape[0]) and obs.dtype == np.float32
    for _ in range(10):
        obs, rew, term, trunc, info = env.step(np.zeros((4, env.single_action_space.shape[0]), np.float32))
    assert trunc.all() and info["_final_obs"].all()
    assert not np.allclose(info["final_obs"], obs)
    assert env.action_space.shape == (4, 17)


def test_sb3_vec_env_reports_terminal_observation_and_timelimit():
    venv = make_sb3_vec_env(_env())
    venv.reset()
    for _ in range(10):
        venv.step_async(np.zeros((4, 17), np.float32))
        obs, rew, done, infos = venv.step_wait()
    assert done.all()
    assert all(i["TimeLimit.truncated"] for i in infos)
    assert all(i["terminal_observation"].shape == obs.shape[1:] for i in infos)
    assert all(i["episode"]["l"] == 10 for i in infos)


def test_sb3_ppo_trains_through_the_adapter():
    sb3 = pytest.importorskip("stable_baselines3")
    torch.manual_seed(0)
    venv = make_sb3_vec_env(_env(n=8, length=1.5))
    model = sb3.PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, verbose=0, device="cpu", seed=0)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=8 * 32 * 2)
    assert model.num_timesteps >= 512
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    assert len(model.ep_info_buffer) > 0  # episode stats flowed through the infos
