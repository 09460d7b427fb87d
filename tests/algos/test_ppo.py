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


def _record_step_lrs(ppo):
    """A list that gets the optimizer's learning rate at every ``optimizer.step`` of ``ppo``."""
    seen = []
    original = ppo.optimizer.step

    def record(*args, **kwargs):
        seen.append(ppo.optimizer.param_groups[0]["lr"])
        return original(*args, **kwargs)

    ppo.optimizer.step = record
    return seen


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
    assert {"loss/policy", "loss/value", "loss/entropy", "kl", "lr", "lr_mean"} <= set(stats)


def test_adaptive_schedule_reports_the_mean_step_size_taken_beside_the_final_one():
    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16]))
    cfg = PPOConfig(num_steps=4, num_epochs=2, num_minibatches=2, schedule="adaptive", lr=1e-3, desired_kl=0.01)
    ppo = PPO(policy, cfg, num_envs=8, device=torch.device("cpu"))
    seen = _record_step_lrs(ppo)
    stats = ppo.update(_rollout(ppo, 4, obs_scale=1.0))
    assert len(seen) == 4
    assert abs(stats["lr_mean"] - sum(seen) / 4) < 1e-12
    assert stats["lr"] == ppo.lr == ppo.optimizer.param_groups[0]["lr"]
    # The first mini-batch sees the rollout policy itself (KL 0), so its step keeps the initial rate.
    assert seen[0] == 1e-3


def test_normalize_rewards_stores_rewards_divided_by_the_discounted_return_std_and_checkpoints_it():
    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16]))
    cfg = PPOConfig(num_steps=4, normalize_rewards=True, gamma=0.5)
    ppo = PPO(policy, cfg, num_envs=8, device=torch.device("cpu"))
    _rollout(ppo, 4, obs_scale=1.0)  # reward 1 every step in all 8 worlds: G = 1, 1.5, 1.75, 1.875
    # Running variance of the returns seen so far (8 equal worlds each step):
    #   step 1: {1}                  var ~0 -> 1/sqrt(~0) huge -> clipped to 10
    #   step 2: {1, 1.5}             var 0.0625 -> reward 1/0.25 = 4
    #   step 3: {1, 1.5, 1.75}       var 0.09722 -> 1/0.31180 = 3.2071
    #   step 4: {1, 1.5, 1.75, 1.875} var 0.11230 -> 1/0.33511 = 2.9841
    stored = ppo.storage.rewards[:4, 0]
    assert torch.allclose(stored, torch.tensor([10.0, 4.0, 3.2071, 2.9841]), atol=2e-3)
    assert torch.allclose(ppo.return_norm.var, torch.tensor([0.11230]), atol=1e-4)
    restored = PPO(ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16])), cfg, 8,
                   torch.device("cpu"))
    restored.load_state_tensors(ppo.state_tensors(), {"algo_state": ppo.state_meta()})
    assert torch.equal(restored.return_norm.var, ppo.return_norm.var)
    assert torch.equal(restored._discounted_return, ppo._discounted_return)


def test_adaptive_schedule_never_steps_above_lr_max_even_when_every_kl_is_small():
    import pytest

    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16]))
    # with desired_kl 1.0 every mini-batch's KL after the first is far below desired_kl / 2, so the
    # schedule grows the rate by 1.5x per mini-batch (1e-4 -> 1.5e-4 -> ...) until the cap holds it
    cfg = PPOConfig(num_steps=4, num_epochs=10, num_minibatches=2, lr=1e-4, lr_min=1e-5, lr_max=3e-4,
                    desired_kl=1.0)
    ppo = PPO(policy, cfg, num_envs=8, device=torch.device("cpu"))
    seen = _record_step_lrs(ppo)
    ppo.update(_rollout(ppo, 4, obs_scale=1.0))
    assert max(seen) == 3e-4 and seen.count(3e-4) > 10  # reached the cap and stayed there
    # the first mini-batch has KL 0 (the rollout's own policy) and keeps the rate; then 1.5x a step
    assert seen[:5] == pytest.approx([1e-4, 1.5e-4, 2.25e-4, 3e-4, 3e-4], rel=1e-12)


def test_lr_outside_the_adaptive_bounds_is_an_error_that_names_them():
    import pytest

    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16]))
    with pytest.raises(ValueError, match="lr_max"):
        PPO(policy, PPOConfig(lr=1e-3, lr_max=5e-4), num_envs=8, device=torch.device("cpu"))
    PPO(policy, PPOConfig(lr=1e-3, lr_max=5e-4, schedule="fixed"), num_envs=8, device=torch.device("cpu"))


def test_update_with_max_std_keeps_the_std_at_the_bound_and_reports_the_spread_taken():
    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16], init_std=0.8, max_std=0.9))
    # a large entropy bonus and step size push the std up hard; the projection stops it at 0.9
    cfg = PPOConfig(num_steps=4, num_epochs=4, num_minibatches=2, schedule="fixed", lr=0.1, entropy_coef=10.0)
    ppo = PPO(policy, cfg, num_envs=8, device=torch.device("cpu"))
    stats = ppo.update(_rollout(ppo, 4, obs_scale=1.0))
    assert torch.allclose(policy.log_std.exp(), torch.full((2,), 0.9))
    assert 0.8 <= stats["action_std"] <= 0.9 + 1e-6  # the mean std the mini-batches were scored with
    free = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[16], critic_hidden=[16], init_std=0.8))
    ppo = PPO(free, cfg, num_envs=8, device=torch.device("cpu"))
    ppo.update(_rollout(ppo, 4, obs_scale=1.0))
    assert bool((free.log_std.exp() > 0.9).all())  # without the bound the same update goes past it
