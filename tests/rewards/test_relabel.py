"""Late (asynchronous) VLM scores land on the transition whose frame they scored, in a rollout and a replay buffer."""

import time

import numpy as np
import pytest
import torch

from robotrl.rewards.config import VLMRewardConfig
from robotrl.rewards.env import VLMRewardEnv
from robotrl.rewards.scorer import AsyncScorer, SyncScorer
from robotrl.sim.backend import SimConfig


def brightness(frames: np.ndarray) -> torch.Tensor:
    """A frame-content score: any mix-up of worlds or steps changes it."""
    return torch.from_numpy(frames.reshape(len(frames), -1).astype(np.float32).mean(1) / 255.0)


def slow_brightness(frames):
    time.sleep(0.03)
    return brightness(frames)


def _env(scorer, mode, n=3):
    from robotrl.tasks import config_class

    from robotrl.envs.task_env import make_env

    task_cfg = config_class("humanoid")(randomize=False)
    env = make_env(task_cfg, SimConfig(num_envs=n, nthread=1), seed=3)
    cfg = VLMRewardConfig(name="vlm_rm", mode=mode, scale=2.0, image_size=[24, 24], batch_size=4, max_wait_s=0.01)
    return VLMRewardEnv(env, cfg, scorer)


def _rollout(env, T, seed=0):
    gen = torch.Generator().manual_seed(seed)
    env.reset()
    rewards = torch.zeros(T, env.num_envs)
    for t in range(T):
        action = torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1
        _, r, *_ = env.step(action)
        rewards[t] = r
    return rewards


def test_async_relabelled_rollout_equals_the_sync_rewards_step_by_step():
    T = 40  # humanoid falls within ~40 steps: autoresets happen inside the rollout
    sync_env = _env(SyncScorer(brightness), "sync")
    want = _rollout(sync_env, T)
    async_env = _env(AsyncScorer(slow_brightness, batch_size=4, max_wait_s=0.01), "async")
    got = _rollout(async_env, T)
    assert not torch.allclose(got, want)  # the step-time reward lacks the term
    stats = async_env.relabel_rollout(got)
    torch.testing.assert_close(got, want)
    assert stats["vlm/late_fraction"] > 0.0  # some scores really arrived after the steps
    async_env.close()


def test_relabel_rollout_drops_scores_of_steps_before_the_rollout():
    sync_env = _env(SyncScorer(brightness), "sync")
    want = _rollout(sync_env, 12)
    env = _env(AsyncScorer(brightness, batch_size=4, max_wait_s=0.01), "async")
    base = _rollout(env, 12)  # step-time rewards, no VLM term
    rollout = torch.zeros(7, env.num_envs)  # a 7-step rollout: steps 5..11; scores of steps 0..4 must not land
    env.relabel_rollout(rollout)
    torch.testing.assert_close(rollout, want[5:] - base[5:])
    env.close()


@pytest.mark.parametrize("capacity", [100, 7])
def test_async_scores_relabel_the_right_replay_slots(capacity):
    from robotrl.storage.replay import ReplayBuffer

    T = 15
    sync_env = _env(SyncScorer(brightness), "sync")
    want = _rollout(sync_env, T)
    env = _env(AsyncScorer(slow_brightness, batch_size=4, max_wait_s=0.01), "async")
    replay = ReplayBuffer(capacity, env.num_envs, env.obs_dims["policy"], env.num_actions)
    gen = torch.Generator().manual_seed(0)
    obs = env.reset()
    for _ in range(T):
        action = torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1
        nobs, r, term, trunc, info = env.step(action)
        replay.add(obs["policy"], action, r, info["final_obs"]["policy"], term, trunc)
        obs = nobs
        env.relabel_replay(replay)
    while env.scorer.stats.scored < env.scorer.stats.submitted:  # wait without consuming the scores
        time.sleep(0.01)
    env.relabel_replay(replay)
    kept = min(T, capacity)
    slots = [(replay.ptr - kept + i) % capacity for i in range(kept)]
    torch.testing.assert_close(replay.reward[slots], want[T - kept:])
    env.close()
