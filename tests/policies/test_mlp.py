import numpy as np
import torch

from robotrl.policies.mlp import ActorCritic, PolicyConfig
from robotrl.policies.normalizer import RunningNorm


def test_running_norm_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, (1000, 4)).astype(np.float32)
    norm = RunningNorm(4)
    for chunk in np.split(data, 10):
        norm.update(torch.from_numpy(chunk))
    assert np.allclose(norm.mean.numpy(), data.mean(0), atol=1e-4)
    assert np.allclose(norm.var.numpy(), data.var(0), rtol=1e-3)


def test_gaussian_and_beta_heads_give_actions_in_range_and_consistent_log_probs():
    for dist in ("gaussian", "beta"):
        policy = ActorCritic(5, 7, 3, PolicyConfig(actor_hidden=[16], critic_hidden=[16], distribution=dist))
        obs = torch.randn(64, 5)
        action, log_prob = policy.act(obs)
        assert action.shape == (64, 3) and log_prob.shape == (64,)
        recomputed = policy.distribution(obs).log_prob(policy.from_action(action)).sum(-1)
        assert torch.allclose(recomputed, log_prob, atol=1e-4)
        det = policy.act_inference(obs)
        assert det.abs().max() <= 1.0
        assert policy.evaluate(torch.randn(64, 7)).shape == (64,)


def test_orthogonal_init_gives_orthonormal_hidden_weights_and_a_near_zero_actor_output():
    torch.manual_seed(0)
    policy = ActorCritic(8, 8, 3, PolicyConfig(actor_hidden=[16, 16], critic_hidden=[16], init="orthogonal"))
    hidden = policy.actor[2].weight.detach()  # 16 x 16: gain * orthogonal
    assert torch.allclose(hidden @ hidden.T, 2.0 * torch.eye(16), atol=1e-5)
    assert torch.count_nonzero(policy.actor[0].bias) == 0
    out = policy.critic[-1].weight.detach()  # 1 x 16 with gain 1: unit norm
    assert abs(float(out.norm()) - 1.0) < 1e-5
    assert float(policy.actor[-1].weight.detach().norm()) < 0.05  # gain 0.01


def test_unknown_init_is_rejected_with_the_valid_choices():
    import pytest

    with pytest.raises(ValueError, match="valid: default, orthogonal"):
        ActorCritic(2, 2, 1, PolicyConfig(init="xavier"))


def test_action_std_reads_the_spread_in_action_units_for_both_heads():
    gauss = ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=[8], critic_hidden=[8], init_std=0.5))
    obs = torch.randn(4, 3)
    assert torch.allclose(gauss.action_std(gauss.distribution(obs)), torch.full((4, 2), 0.5))
    beta = ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=[8], critic_hidden=[8], distribution="beta"))
    with torch.no_grad():  # output 0 -> alpha = beta = softplus(0) + 1 = 1.6931: var = 1/(4 (2a+1))
        beta.actor[-1].weight.zero_()
        beta.actor[-1].bias.zero_()
    a = 1.0 + float(np.log(2.0))
    expected = 2.0 * (0.25 / (2 * a + 1)) ** 0.5  # std on [0, 1] doubled for [-1, 1]
    assert torch.allclose(beta.action_std(beta.distribution(obs)), torch.full((4, 2), expected), atol=1e-6)


def test_clamp_std_projects_onto_max_std_and_leaves_the_std_free_below_it():
    policy = ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=[8], critic_hidden=[8], init_std=0.8, max_std=1.0))
    with torch.no_grad():
        policy.log_std.copy_(torch.log(torch.tensor([3.0, 0.5])))
    policy.clamp_std()
    assert torch.allclose(policy.log_std.exp(), torch.tensor([1.0, 0.5]))
    # the projected parameter still gets a gradient, so the std can come back down
    policy.distribution(torch.randn(4, 3)).entropy().sum().backward()
    assert policy.log_std.grad is not None and bool((policy.log_std.grad != 0).all())
    unbounded = ActorCritic(3, 3, 2, PolicyConfig(actor_hidden=[8], critic_hidden=[8]))
    with torch.no_grad():
        unbounded.log_std.fill_(float(np.log(40.0)))
    unbounded.clamp_std()  # max_std 0: no bound
    assert torch.allclose(unbounded.log_std.exp(), torch.full((2,), 40.0))


def test_max_std_below_init_std_is_an_error_that_names_both():
    import pytest

    with pytest.raises(ValueError, match=r"policy.max_std=0.5 .* policy.init_std=0.8"):
        ActorCritic(2, 2, 1, PolicyConfig(init_std=0.8, max_std=0.5))
