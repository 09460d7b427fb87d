"""PPO's update: the first mini-batch sees exactly the rollout's policy (no spurious KL)."""

import torch

from robotrl.algos.ppo import PPO, PPOConfig
from robotrl.policies.mlp import ActorCritic, PolicyConfig


def _rollout(ppo, steps, obs_scale):
    gen = torch.Generator().manual_seed(0)
    obs = {"policy": torch.randn(8, 4, generator=gen) * obs_scale}
    for _ in range(steps):
        ppo.act(obs)
        obs = {"policy": torch.randn(8, 4, generator=gen) * obs_scale + 5.0}
        ppo.process_step(obs, torch.ones(8), torch.zeros(8, dtype=torch.bool), torch.zeros(8, dtype=torch.bool), {})
    return obs


def test_normalizer_is_frozen_during_rollout_so_the_first_step_has_zero_kl():
    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16]))
    cfg = PPOConfig(num_steps=6, num_epochs=1, num_minibatches=1, schedule="fixed", lr=0.0)
    ppo = PPO(policy, cfg, num_envs=8, device=torch.device("cpu"))
    mean_before = policy.obs_norm.mean.clone()
    obs = _rollout(ppo, 6, obs_scale=10.0)
    assert torch.equal(policy.obs_norm.mean, mean_before)  # untouched while collecting
    stats = ppo.update(obs)
    assert stats["kl"] < 1e-10  # lr=0: same policy, same normalization -> exactly zero KL
    assert not torch.equal(policy.obs_norm.mean, mean_before)  # folded in after the update


def test_update_changes_the_policy_and_clears_the_rollout():
    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16]))
    ppo = PPO(policy, PPOConfig(num_steps=4, num_minibatches=2), num_envs=8, device=torch.device("cpu"))
    before = [p.clone() for p in policy.parameters()]
    obs = _rollout(ppo, 4, obs_scale=1.0)
    assert ppo.ready()
    stats = ppo.update(obs)
    assert not ppo.ready() and ppo.storage.step == 0
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
    assert {"loss/policy", "loss/value", "loss/entropy", "kl", "lr"} <= set(stats)
