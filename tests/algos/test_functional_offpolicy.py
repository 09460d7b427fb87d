"""Off-policy math in robotrl.algos.functional against hand-worked numbers."""

import math

import pytest
import torch

from robotrl.algos import functional as F

G = 0.9


def _nstep(rewards, terminated, truncated, valid=None):
    r = torch.tensor(rewards, dtype=torch.float32)[:, None]
    te = torch.tensor(terminated)[:, None]
    tr = torch.tensor(truncated)[:, None]
    v = torch.ones_like(te) if valid is None else torch.tensor(valid)[:, None]
    ret, disc, last = F.nstep_returns(r, te, tr, v, G)
    return ret.item(), disc.item(), last.item()


def test_nstep_full_horizon():
    # 1 + 0.9*2 + 0.81*3 = 5.23, bootstrap gamma^3 = 0.729 from s'_2
    ret, disc, last = _nstep([1.0, 2.0, 3.0], [False] * 3, [False] * 3)
    assert ret == pytest.approx(5.23)
    assert disc == pytest.approx(0.729)
    assert last == 2


def test_nstep_stops_at_termination_without_bootstrap():
    # terminated after step 1: 1 + 0.9*2 = 2.8, no bootstrap, reward 3 belongs to the next episode
    ret, disc, last = _nstep([1.0, 2.0, 3.0], [False, True, False], [False] * 3)
    assert ret == pytest.approx(2.8)
    assert disc == 0.0
    assert last == 1


def test_nstep_stops_at_timeout_but_bootstraps():
    # time-out after step 0: 1, bootstrap gamma^1 = 0.9 from the pre-reset obs s'_0
    ret, disc, last = _nstep([1.0, 2.0, 3.0], [False] * 3, [True, False, False])
    assert ret == pytest.approx(1.0)
    assert disc == pytest.approx(0.9)
    assert last == 0


def test_nstep_termination_on_first_step():
    ret, disc, last = _nstep([5.0, 2.0, 3.0], [True, False, False], [False] * 3)
    assert (ret, disc, last) == (5.0, 0.0, 0)


def test_nstep_truncated_by_unwritten_data():
    # only 2 steps written after t: 1 + 0.9*2 = 2.8, bootstrap 0.81 from s'_1
    ret, disc, last = _nstep([1.0, 2.0, 99.0], [False] * 3, [False] * 3, valid=[True, True, False])
    assert ret == pytest.approx(2.8)
    assert disc == pytest.approx(0.81)
    assert last == 1


def test_nstep_batched_columns_are_independent():
    r = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    te = torch.tensor([[True, False], [False, False]])
    tr = torch.zeros(2, 2, dtype=torch.bool)
    ret, disc, last = F.nstep_returns(r, te, tr, torch.ones(2, 2, dtype=torch.bool), G)
    assert ret.tolist() == pytest.approx([1.0, 1.9])
    assert disc.tolist() == pytest.approx([0.0, 0.81])
    assert last.tolist() == [0, 1]


def test_td_target():
    assert F.td_target(
        torch.tensor([2.8]), torch.tensor([0.81]), torch.tensor([10.0])
    ).item() == pytest.approx(10.9)


def test_redq_min_uses_only_sampled_heads():
    q = torch.tensor([[5.0, 1.0], [3.0, 7.0], [-100.0, -100.0], [4.0, 2.0]])
    assert F.redq_min(q, torch.tensor([0, 1])).tolist() == [3.0, 1.0]
    assert F.redq_min(q, torch.tensor([3, 0])).tolist() == [4.0, 1.0]
    # head 2 is the global min but is not sampled
    assert F.redq_min(q, torch.tensor([1, 3])).tolist() == [3.0, 2.0]


def test_residual_action_composition_and_clip():
    base = torch.tensor([[0.5, -0.95, 0.0]])
    raw = torch.tensor([[0.0, -10.0, math.atanh(0.5)]])
    out = F.residual_action(base, raw, 0.1)
    # 0.5 + 0 ; -0.95 - 0.1 -> clipped to -1 ; 0 + 0.1*0.5
    assert out.tolist()[0] == pytest.approx([0.5, -1.0, 0.05])


def test_tanh_gaussian_log_prob_matches_change_of_variables():
    mean, log_std, u = torch.tensor([[0.3]]), torch.tensor([[math.log(0.5)]]), torch.tensor([[0.8]])
    normal = -0.5 * ((0.8 - 0.3) / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)
    expected = normal - math.log(1 - math.tanh(0.8) ** 2)
    assert F.tanh_gaussian_log_prob(mean, log_std, u).item() == pytest.approx(expected, rel=1e-5)


def test_sac_temperature_loss_value_and_gradient():
    log_alpha = torch.tensor(math.log(0.2), requires_grad=True)
    log_prob = torch.tensor([1.0, 3.0])
    # target entropy -2: -(log 0.2) * mean(1 - 2, 3 - 2) = -(log 0.2) * 0 = 0
    loss = F.sac_temperature_loss(log_alpha, log_prob, target_entropy=-2.0)
    assert loss.item() == pytest.approx(0.0)
    # entropy -log_prob = -3 < target -1: gradient -mean(3 - 1) = -2 (descent raises alpha)
    loss = F.sac_temperature_loss(log_alpha, torch.tensor([3.0]), target_entropy=-1.0)
    loss.backward()
    assert loss.item() == pytest.approx(-math.log(0.2) * 2.0)
    assert log_alpha.grad.item() == pytest.approx(-2.0)


def test_sac_actor_loss():
    assert F.sac_actor_loss(torch.tensor([1.0, -1.0]), torch.tensor([2.0, 4.0]), 0.5).item() == pytest.approx(
        -3.0
    )


def test_soft_update():
    a, b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    with torch.no_grad():
        a.weight.fill_(0.0)
        b.weight.fill_(1.0)
    F.soft_update(a, b, 0.25)
    assert a.weight.item() == pytest.approx(0.25)


# --- FastTD3's categorical critic: support z = [0, 1, 2, 3, 4] (K = 5, dz = 1) -------------------
def test_categorical_projection_splits_mass_between_neighbouring_atoms():
    probs = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]])
    # all mass at z = 2 moves to 0.5 + 0.5 * 2 = 1.5: half to atom 1, half to atom 2
    out = F.categorical_projection(probs, torch.tensor([0.5]), torch.tensor([0.5]), 0.0, 4.0)
    assert torch.allclose(out, torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0]]))


def test_categorical_projection_after_termination_puts_everything_at_the_return():
    probs = torch.full((1, 5), 0.2)
    # D = 0: every atom lands on R = 3.25, 0.75 of the way from atom 3 toward atom 4
    out = F.categorical_projection(probs, torch.tensor([3.25]), torch.tensor([0.0]), 0.0, 4.0)
    assert torch.allclose(out, torch.tensor([[0.0, 0.0, 0.0, 0.75, 0.25]]))


def test_categorical_projection_exact_landing_and_clipping():
    probs = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.2, 0.2]])
    # row 0: z = 0 -> 1 + 1 * 0 = 1 exactly (lower == upper); row 1: everything clipped to v_max = 4
    out = F.categorical_projection(probs, torch.tensor([1.0, 10.0]), torch.tensor([1.0, 1.0]), 0.0, 4.0)
    assert torch.allclose(out, torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]))
    assert torch.allclose(out.sum(1), torch.ones(2))


def test_categorical_td_loss_is_summed_cross_entropy_over_heads():
    logits = torch.zeros(2, 1, 2, requires_grad=True)  # both heads uniform: log p = log 0.5
    loss = F.categorical_td_loss(logits, torch.tensor([[1.0, 0.0]]))
    assert loss.item() == pytest.approx(2 * math.log(2.0))
    loss.backward()  # d/dlogit of -log softmax_0 = softmax - onehot = [-0.5, 0.5] per head
    assert torch.allclose(logits.grad, torch.tensor([[[-0.5, 0.5]], [[-0.5, 0.5]]]))


def test_clipped_double_distribution_takes_the_lower_valued_head_per_sample():
    probs = torch.tensor([[[1.0, 0.0], [0.9, 0.1]], [[0.0, 1.0], [0.2, 0.8]]])  # (H=2, B=2, K=2)
    values = torch.tensor([[1.0, 5.0], [3.0, 2.0]])  # sample 0: head 0 is lower; sample 1: head 1
    out = F.clipped_double_distribution(probs, values)
    assert torch.equal(out, torch.tensor([[1.0, 0.0], [0.2, 0.8]]))
