"""PPO math against numbers worked out by hand (see the comments for the arithmetic)."""

import math

import pytest
import torch

from robotrl.algos import functional as F


def test_gae_with_a_done_in_the_middle():
    # gamma=0.9, lam=0.8; r=[1,2,3], V=[0.5,1.0,1.5], done after t=1, V(s_3)=2.0
    # t=2: delta=3+0.9*2.0-1.5=3.3, A=3.3
    # t=1: done -> delta=2-1.0=1.0, A=1.0 (no look-ahead)
    # t=0: delta=1+0.9*1.0-0.5=1.4, A=1.4+0.9*0.8*1.0=2.12
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [1.5]])
    dones = torch.tensor([[False], [True], [False]])
    adv, ret = F.compute_gae(rewards, values, dones, torch.tensor([2.0]), gamma=0.9, lam=0.8)
    assert torch.allclose(adv.squeeze(1), torch.tensor([2.12, 1.0, 3.3]))
    assert torch.allclose(ret.squeeze(1), torch.tensor([2.62, 2.0, 4.8]))


def test_gae_lambda_one_is_discounted_return_minus_value():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    values = torch.zeros(2, 2)
    dones = torch.zeros(2, 2, dtype=torch.bool)
    _, ret = F.compute_gae(rewards, values, dones, torch.tensor([10.0, 0.0]), gamma=0.5, lam=1.0)
    # world 0: 1 + 0.5*1 + 0.25*10 = 4.0 ; world 1: 0 + 0.5*1 + 0 = 0.5
    assert torch.allclose(ret[0], torch.tensor([4.0, 0.5]))


def test_timeout_bootstrap_adds_discounted_final_value_only_on_truncation():
    rewards = torch.tensor([[1.0, 1.0]])
    truncated = torch.tensor([[True, False]])
    final_values = torch.tensor([[2.0, 5.0]])
    out = F.bootstrap_timeouts(rewards, truncated, final_values, gamma=0.9)
    assert torch.allclose(out, torch.tensor([[2.8, 1.0]]))


def test_clipped_surrogate_hand_worked():
    # sample 1: ratio 1.5, A=+2 -> min(3.0, 1.2*2=2.4) = 2.4
    # sample 2: ratio 0.5, A=-1 -> min(-0.5, 0.8*-1=-0.8) = -0.8 ; loss = -(2.4-0.8)/2 = -0.8
    old = torch.zeros(2)
    new = torch.tensor([math.log(1.5), math.log(0.5)])
    loss = F.clipped_surrogate_loss(new, old, torch.tensor([2.0, -1.0]), clip=0.2)
    assert loss.item() == pytest.approx(-0.8)


def test_clipped_surrogate_gradient_vanishes_outside_the_trust_region():
    new = torch.tensor([math.log(2.0)], requires_grad=True)
    F.clipped_surrogate_loss(new, torch.zeros(1), torch.tensor([1.0]), clip=0.2).backward()
    assert new.grad.item() == 0.0


def test_clipped_value_loss_takes_the_pessimistic_branch():
    # V=1, V_old=0, R=2, clip 0.5: unclipped (1-2)^2=1, clipped (0.5-2)^2=2.25 -> 2.25
    v = F.clipped_value_loss(torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0]), clip=0.5)
    assert v.item() == pytest.approx(2.25)
    assert F.clipped_value_loss(torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0]), None).item() == 1.0


def test_approx_kl_k3_estimator():
    # r = 2: (2 - 1) - log 2 = 0.306853
    kl = F.approx_kl(torch.zeros(1), torch.tensor([math.log(2.0)]))
    assert kl.item() == pytest.approx(1.0 - math.log(2.0), rel=1e-6)
    assert F.approx_kl(torch.zeros(3), torch.zeros(3)).item() == 0.0


def test_adaptive_lr_moves_against_the_kl():
    assert F.adaptive_lr(1e-3, kl=0.05, desired_kl=0.01) == pytest.approx(1e-3 / 1.5)
    assert F.adaptive_lr(1e-3, kl=0.001, desired_kl=0.01) == pytest.approx(1.5e-3)
    assert F.adaptive_lr(1e-3, kl=0.01, desired_kl=0.01) == 1e-3
    assert F.adaptive_lr(1e-5, kl=1.0, desired_kl=0.01) == 1e-5  # floor


def test_normalize():
    x = F.normalize(torch.tensor([1.0, 2.0, 3.0]))
    assert x.mean().abs() < 1e-6 and (x.std() - 1).abs() < 1e-5


def _ppo_batch(entropy=(1.0, 2.0)):
    # the clipped-surrogate batch above (policy loss -0.8) plus values, returns and entropies
    return {
        "log_prob": torch.tensor([math.log(1.5), math.log(0.5)]),
        "old_log_prob": torch.zeros(2),
        "advantages": torch.tensor([2.0, -1.0]),
        "values": torch.tensor([1.0, 0.0]),
        "old_values": torch.zeros(2),
        "returns": torch.tensor([2.0, 0.5]),
        "entropy": torch.tensor(entropy),
    }


def test_ppo_loss_hand_worked():
    # policy: -0.8 (test_clipped_surrogate_hand_worked)
    # value, clip 0.5: sample 1 V=1, V_old=0, R=2 -> max((1-2)^2=1, (0.5-2)^2=2.25) = 2.25
    #                  sample 2 V=0, V_old=0, R=0.5 -> max(0.25, 0.25) = 0.25 ; mean = 1.25
    # entropy: mean(1, 2) = 1.5
    # loss = -0.8 + 0.5 * 1.25 - 0.1 * 1.5 = -0.8 + 0.625 - 0.15 = -0.325
    loss, metrics = F.ppo_loss(**_ppo_batch(), clip=0.2, value_clip=0.5, value_coef=0.5, entropy_coef=0.1)
    assert loss.item() == pytest.approx(-0.325)
    assert metrics["loss/policy"].item() == pytest.approx(-0.8)
    assert metrics["loss/value"].item() == pytest.approx(1.25)
    assert metrics["loss/entropy"].item() == pytest.approx(1.5)
    assert set(metrics) == {"loss/policy", "loss/value", "loss/entropy"}


def test_ppo_loss_without_value_clip_is_the_plain_squared_error():
    # value: mean((1-2)^2, (0-0.5)^2) = mean(1, 0.25) = 0.625 ; loss = -0.8 + 0.5 * 0.625 - 0.1 * 1.5 = -0.6375
    loss, metrics = F.ppo_loss(**_ppo_batch(), clip=0.2, value_clip=None, value_coef=0.5, entropy_coef=0.1)
    assert metrics["loss/value"].item() == pytest.approx(0.625)
    assert loss.item() == pytest.approx(-0.6375)


def test_ppo_loss_higher_entropy_lowers_the_loss():
    # entropy (2, 3): mean 2.5, one more than (1, 2) -> loss drops by 0.1 * 1.0: -0.325 - 0.1 = -0.425
    low, _ = F.ppo_loss(**_ppo_batch((1.0, 2.0)), clip=0.2, value_clip=0.5, value_coef=0.5, entropy_coef=0.1)
    high, metrics = F.ppo_loss(**_ppo_batch((2.0, 3.0)), clip=0.2, value_clip=0.5, value_coef=0.5, entropy_coef=0.1)
    assert metrics["loss/entropy"].item() == pytest.approx(2.5)
    assert high.item() == pytest.approx(-0.425) and high < low
    # zero coefficient: entropy does not matter
    a, _ = F.ppo_loss(**_ppo_batch((1.0, 2.0)), clip=0.2, value_clip=0.5, value_coef=0.5, entropy_coef=0.0)
    b, _ = F.ppo_loss(**_ppo_batch((2.0, 3.0)), clip=0.2, value_clip=0.5, value_coef=0.5, entropy_coef=0.0)
    assert a.item() == pytest.approx(b.item()) == pytest.approx(-0.8 + 0.625)


def test_ppo_loss_value_coef_scales_the_value_term():
    # value_coef 0.5 -> 2.0 adds 1.5 * 1.25 = 1.875: -0.325 + 1.875 = 1.55 ; the metric stays unweighted
    loss, metrics = F.ppo_loss(**_ppo_batch(), clip=0.2, value_clip=0.5, value_coef=2.0, entropy_coef=0.1)
    assert loss.item() == pytest.approx(1.55)
    assert metrics["loss/value"].item() == pytest.approx(1.25)


def test_ppo_loss_gradients_have_the_hand_worked_signs():
    batch = _ppo_batch()
    for key in ("log_prob", "values", "entropy"):
        batch[key] = batch[key].clone().requires_grad_(True)
    loss, metrics = F.ppo_loss(**batch, clip=0.2, value_clip=0.5, value_coef=0.5, entropy_coef=0.1)
    loss.backward()
    # entropy bonus: d/dH_i of -0.1 * mean(H) = -0.1 / 2 = -0.05 for each sample
    assert torch.allclose(batch["entropy"].grad, torch.tensor([-0.05, -0.05]))
    # value, sample 1: the clipped branch (0.5 - 2)^2 wins and V - V_old = 1 > 0.5 is clipped -> no gradient
    # sample 2: d/dV of 0.5 * (V - 0.5)^2 / 2 at V=0 = 0.5 * 2 * (-0.5) / 2 = -0.25
    assert torch.allclose(batch["values"].grad, torch.tensor([0.0, -0.25]))
    # policy: both samples sit on the clipped branch (1.5 > 1.2 with A > 0, 0.5 < 0.8 with A < 0)
    assert torch.equal(batch["log_prob"].grad, torch.zeros(2))
    assert all(not m.requires_grad for m in metrics.values())


def test_scale_by_return_std_divides_by_the_std_and_clips():
    # var 4 -> std 2: 2 -> 1, 0.5 -> 0.25, -50 -> -25 clipped to -10
    out = F.scale_by_return_std(torch.tensor([2.0, 0.5, -50.0]), torch.tensor(4.0), eps=0.0)
    assert torch.allclose(out, torch.tensor([1.0, 0.25, -10.0]))
