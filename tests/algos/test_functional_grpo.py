"""GRPO and action-level PPO math against numbers worked out by hand."""

import math

import pytest
import torch

from robotrl.algos import functional as F


def test_grpo_advantage_is_group_normalized_with_unbiased_std():
    # group 0: R=[1,0,0,1]: mean 0.5, unbiased std = sqrt(4*0.25/3) = 0.57735 -> +-0.866025
    # group 1: R=[1,1,1,0]: mean 0.75, std = sqrt((3*0.0625+0.5625)/3) = 0.5 -> [0.5,0.5,0.5,-1.5]
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    adv = F.grpo_advantages(r, eps=0.0)
    s = 0.5 / math.sqrt(1.0 / 3.0)
    assert torch.allclose(adv[0], torch.tensor([s, -s, -s, s]), atol=1e-5)
    assert torch.allclose(adv[1], torch.tensor([0.5, 0.5, 0.5, -1.5]), atol=1e-5)


def test_grpo_advantage_of_an_all_equal_group_is_zero():
    adv = F.grpo_advantages(torch.ones(1, 8))
    assert torch.equal(adv, torch.zeros(1, 8))


def test_group_filter_keeps_success_rates_between_0_1_and_0_9():
    # rates: 0/10, 1/10, 5/10, 9/10, 10/10 -> drop, keep, keep, keep, drop
    success = torch.zeros(5, 10, dtype=torch.bool)
    for row, k in enumerate((0, 1, 5, 9, 10)):
        success[row, :k] = True
    assert F.grpo_group_filter(success).tolist() == [False, True, True, True, False]
    # G=8: 1/8 = 0.125 kept, 0/8 dropped, 8/8 dropped, 7/8 = 0.875 kept
    s8 = torch.tensor([[1, 0, 0, 0, 0, 0, 0, 0], [0] * 8, [1] * 8, [1, 1, 1, 1, 1, 1, 1, 0]])
    assert F.grpo_group_filter(s8).tolist() == [True, False, False, True]


def test_asymmetric_clip_hand_worked():
    # token 1: ratio 1.5, A=+1 -> min(1.5, 1.28) = 1.28      (upper clip 0.28)
    # token 2: ratio 0.5, A=-1 -> min(-0.5, 0.8*-1) = -0.8    (lower clip 0.2)
    # token 3: ratio 1.1, A=+2 -> min(2.2, 2.2) = 2.2         (inside)
    # token 4: masked out (its huge ratio must not count)
    # loss = -(1.28 - 0.8 + 2.2) / 3 = -0.893333
    new = torch.log(torch.tensor([[1.5, 0.5], [1.1, 50.0]]))
    adv = torch.tensor([[1.0, -1.0], [2.0, 5.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss, m = F.asymmetric_clipped_token_loss(new, torch.zeros(2, 2), adv, mask, 0.2, 0.28)
    assert loss.item() == pytest.approx(-(1.28 - 0.8 + 2.2) / 3, abs=1e-6)
    assert m["clip_fraction"].item() == pytest.approx(2 / 3)


def test_asymmetric_clip_upper_bound_differs_from_symmetric_ppo():
    new = torch.log(torch.tensor([[1.25]]))  # inside 1+0.28, outside 1+0.2
    adv = torch.ones(1, 1)
    grpo, _ = F.asymmetric_clipped_token_loss(new, torch.zeros(1, 1), adv, torch.ones(1, 1))
    ppo = F.clipped_surrogate_loss(new.flatten(), torch.zeros(1), adv.flatten(), clip=0.2)
    assert grpo.item() == pytest.approx(-1.25)
    assert ppo.item() == pytest.approx(-1.2)


def test_rollout_advantage_broadcasts_to_every_token_of_the_rollout():
    # one advantage per rollout, [B, 1], applied to its 3 tokens: gradient on each token = -A/(B*3)
    logp = torch.zeros(2, 3, requires_grad=True)
    adv = torch.tensor([[1.0], [-2.0]])
    loss, _ = F.asymmetric_clipped_token_loss(logp, torch.zeros(2, 3), adv, torch.ones(2, 3))
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-1.0] * 3, [2.0] * 3]) / 6)


def test_chunk_rewards_sum_each_chunk_and_carry_dones():
    r = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    d = torch.tensor([[False], [True], [False], [False]])
    cr, cd = F.chunk_rewards(r, d, chunk=2)
    assert cr.flatten().tolist() == [3.0, 7.0]
    assert cd.flatten().tolist() == [True, False]
    with pytest.raises(ValueError, match="multiple"):
        F.chunk_rewards(r[:3], d[:3], chunk=2)


def test_action_level_gae_hand_worked():
    # two decisions, gamma 0.5, lam 1: r=[0, 1], V=[0.2, 0.4], V_last=1.0, no done
    # t=1: delta = 1 + 0.5*1.0 - 0.4 = 1.1 ; t=0: delta = 0 + 0.5*0.4 - 0.2 = 0.0, A = 0 + 0.5*1.1 = 0.55
    adv, ret = F.action_level_gae(torch.tensor([[0.0], [1.0]]), torch.tensor([[0.2], [0.4]]),
                                  torch.zeros(2, 1, dtype=torch.bool), torch.tensor([1.0]), 0.5, 1.0)
    assert torch.allclose(adv.flatten(), torch.tensor([0.55, 1.1]))
    assert torch.allclose(ret.flatten(), torch.tensor([0.75, 1.5]))
