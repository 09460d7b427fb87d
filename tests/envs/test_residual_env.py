"""BaseActionEnv (ResFiT's base-in-the-env wrapper) and the PointReach test env."""

import pytest
import torch

from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.envs.residual import BaseActionEnv
from robotrl.policies.frozen import FrozenPolicy


class Counter(FrozenPolicy):
    """Stateful base: action = number of steps since this world's reset (in every dimension) / 100."""

    action_dim = 2

    def __init__(self, n=4):
        self.t = torch.zeros(n)
        self.resets = []

    def reset(self, ids):
        self.t[ids] = 0
        self.resets.append(ids.tolist())

    def act(self, obs):
        a = (self.t / 100)[:, None].expand(-1, 2).clone()
        self.t += 1
        return a

    def predict(self, obs):
        return torch.full((obs.shape[0], 2), -0.5)


def test_reach_success_terminates_and_final_obs_is_pre_reset():
    env = PointReach(ReachConfig(num_envs=3, radius=0.05, reward="sparse"), seed=0)
    env.reset()
    env.goal[0] = env.pos[0] + 0.02  # world 0 succeeds on the next step with a zero action
    obs, reward, terminated, truncated, info = env.step(torch.zeros(3, 2))
    assert terminated.tolist() == [True, False, False] and reward.tolist() == [1.0, 0.0, 0.0]
    assert info["success"].tolist() == [True, False, False] and info["episode"]["success"].tolist() == [1.0]
    assert info["final_obs"]["policy"][0, 2:].norm() == pytest.approx(0.02 * 2**0.5, rel=1e-4)
    assert not torch.equal(info["final_obs"]["policy"][0], obs["policy"][0])  # world 0 was reset
    assert torch.equal(info["final_obs"]["policy"][1:], obs["policy"][1:])


def test_reach_times_out_as_truncation():
    env = PointReach(ReachConfig(num_envs=2, max_episode_length=3, radius=1e-6), seed=0)
    env.reset()
    for _ in range(2):
        _, _, te, tr, _ = env.step(torch.zeros(2, 2))
        assert not tr.any()
    _, _, te, tr, info = env.step(torch.zeros(2, 2))
    assert tr.all() and not te.any() and info["episode"]["length"].tolist() == [3.0, 3.0]


def test_wrapper_appends_base_action_and_resets_base_state_of_finished_worlds():
    inner = PointReach(ReachConfig(num_envs=4, max_episode_length=2, reward="dense"), seed=0)
    base = Counter()
    env = BaseActionEnv(inner, base, reward="sparse")
    assert env.obs_dims["policy"] == 4 + 2
    obs = env.reset()
    assert torch.equal(obs["policy"][:, 4:], obs["base_action"]) and obs["base_action"].eq(0).all()
    obs, reward, te, tr, info = env.step(torch.zeros(4, 2))
    assert obs["base_action"].eq(0.01).all()
    assert reward.eq(0).all()  # sparse: no success, whatever the dense inner reward says
    obs, reward, te, tr, info = env.step(torch.zeros(4, 2))  # every world times out
    assert tr.all() and base.resets[-1] == [0, 1, 2, 3]
    assert obs["base_action"].eq(0.0).all()  # fresh episode: the base starts over
    # final obs carries the base's stateless prediction for the pre-reset observation
    assert info["final_obs"]["policy"][:, 4:].eq(-0.5).all()


def test_wrapper_rejects_a_base_for_another_action_size():
    class Wide(Counter):
        action_dim = 3

    with pytest.raises(ValueError, match="3 dimensions but the env has 2"):
        BaseActionEnv(PointReach(ReachConfig(num_envs=4)), Wide())


def test_sparse_reward_needs_a_success_signal():
    class NoSuccess(PointReach):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            info.pop("success")
            return obs, r, te, tr, info

    env = BaseActionEnv(NoSuccess(ReachConfig(num_envs=2)), None, "sparse")
    env.reset()
    with pytest.raises(ValueError, match="info\\['success'\\]"):
        env.step(torch.zeros(2, 2))
