"""ResFiT residual learner: exact base reproduction at init, REDQ target, learning a constant correction."""

import pytest
import torch

from robotrl.algos.residual import Residual, ResidualConfig, relabel_base_actions
from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.envs.residual import BaseActionEnv
from robotrl.policies.frozen import FrozenPolicy
from robotrl.policies.offpolicy import ResidualActor
from robotrl.runners.off_policy import evaluate_success

OFFSET = 0.3


@pytest.fixture(autouse=True)
def _one_thread():
    """Small nets on a shared CPU: intra-op threads only add contention."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class OffsetController(FrozenPolicy):
    """Constructed base: PointReach's optimal controller plus a constant +0.3 on every action."""

    action_dim = 2

    def act(self, obs):
        return ((obs[:, 2:] / 0.1).clamp(-1, 1) + OFFSET).clamp(-1, 1)

    def predict(self, obs):
        return self.act(obs)


def _env(n, seed):
    return BaseActionEnv(
        PointReach(ReachConfig(num_envs=n, radius=0.03, reward="sparse"), seed=seed),
        OffsetController(),
        "sparse",
    )


def test_zero_initialized_residual_reproduces_the_base_exactly():
    torch.manual_seed(0)
    actor = ResidualActor(obs_dim=7, action_dim=3, hidden=[32, 32], scale=0.1)
    obs = torch.randn(64, 7)
    obs[:, -3:] = torch.rand(64, 3) * 2 - 1  # base actions in [-1, 1], including near the bounds
    obs[0, -3:] = torch.tensor([1.0, -1.0, 0.0])
    actor.obs_norm.update(torch.randn(100, 7) * 3)
    assert torch.equal(actor(obs), obs[:, -3:])


def test_untrained_learner_acts_like_the_base_in_the_env():
    env = _env(16, 0)
    algo = Residual(6, 2, ResidualConfig(explore_sigma=0.0), 16, "cpu")
    obs = env.reset()
    for _ in range(5):
        action = algo.act(obs)
        assert torch.equal(action, obs["base_action"])
        obs, *_ = env.step(action)


class _ConstantHeads(torch.nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, obs, action):
        return torch.arange(self.heads, dtype=torch.float32)[:, None].expand(self.heads, obs.shape[0])


def test_redq_target_is_the_min_of_two_random_heads():
    cfg = ResidualConfig(num_q=10, num_min_q=2)
    algo = Residual(6, 2, cfg, 4, "cpu")
    algo.critic_target = _ConstantHeads(10)
    values = torch.stack([algo.critic_target_value(torch.zeros(1, 6))[0] for _ in range(3000)])
    # head i has Q = i. Min of 2 of 10 distinct heads: P(min = k) = (9 - k) / 45, mean 120/45 = 2.67.
    # (min over all heads would always be 0; the mean over heads 4.5.)
    assert values.min() == 0 and values.max() == 8
    assert abs(values.mean().item() - 120 / 45) < 0.15
    assert abs((values == 0).float().mean().item() - 9 / 45) < 0.03


def test_relabelling_runs_the_base_on_demo_observations():
    obs = torch.zeros(4, 4)
    obs[:, 2:] = torch.tensor([[0.05, 0.0], [0.0, -0.2], [0.01, 0.01], [0.0, 0.0]])
    ep = {"obs": obs, "next_obs": obs + 0.5, "actions": torch.zeros(4, 2)}
    base, nxt = relabel_base_actions(OffsetController(), [ep], "cpu")
    assert torch.allclose(base[0], OffsetController().act(obs))
    assert torch.allclose(nxt[0][:3], base[0][1:])
    assert torch.allclose(nxt[0][3], OffsetController().act(obs[3:] + 0.5)[0])


def test_residual_learns_the_constant_correction():
    torch.manual_seed(0)
    env, ev = _env(32, 0), _env(128, 5)
    cfg = ResidualConfig(
        scale=0.5,
        actor_lr=1e-3,
        critic_lr=1e-3,
        critic_warmup_updates=200,
        learning_starts=500,
        utd=1.0,
        batch_size=256,
        actor_hidden=[64, 64],
        critic_hidden=[128, 128],
        explore_sigma=0.1,
    )
    algo = Residual(6, 2, cfg, 32, "cpu", seed=0)
    act = lambda o: algo.policy(o["policy"])  # noqa: E731
    assert evaluate_success(ev, act)["success"] < 0.1  # the offset base never settles inside the radius
    obs = env.reset()
    for _ in range(500):
        action = algo.act(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        algo.process_step(obs, reward, terminated, truncated, info)
        if algo.ready():
            algo.update(obs)
    assert evaluate_success(ev, act)["success"] > 0.9
    # at the goal the correction cancels (most of) the +0.3 offset in both dimensions
    at_goal = torch.zeros(64, 6)
    at_goal[:, :2] = torch.rand(64, 2) - 0.5
    at_goal[:, 4:] = OFFSET
    correction = (algo.policy(at_goal) - at_goal[:, 4:]).mean(0)
    assert (correction < -0.1).all(), correction
