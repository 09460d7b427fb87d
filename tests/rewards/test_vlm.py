"""VLM-RM and CLG reward functions against hand-worked numbers."""

import math

import numpy as np
import pytest
import torch

from robotrl.rewards.vlm import clg_reward, clg_speed_reward, vlm_rm_projection, vlm_rm_reward

G = torch.tensor([0.0, 1.0])  # goal
B = torch.tensor([1.0, 0.0])  # baseline: d = g - b = (-1, 1), |d|^2 = 2
X = torch.tensor([[0.6, 0.8]])  # x - g = (0.6, -0.2)


def test_projection_at_half_alpha_is_hand_worked_matrix():
    # 0.5 * [[.5, -.5], [-.5, .5]] + 0.5 * I
    torch.testing.assert_close(vlm_rm_projection(G, B, 0.5), torch.tensor([[0.75, -0.25], [-0.25, 0.75]]))


def test_vlm_rm_half_alpha_hand_worked():
    # (x - g) P = (0.6*.75 + 0.2*.25, -0.6*.25 - 0.2*.75) = (0.5, -0.3); |.|^2 = 0.34; R = 1 - 0.17
    torch.testing.assert_close(vlm_rm_reward(X, G, B, 0.5), torch.tensor([0.83]))


def test_vlm_rm_alpha_zero_is_cosine_similarity():
    torch.testing.assert_close(vlm_rm_reward(X, G, B, 0.0), torch.tensor([0.8]))
    x = torch.nn.functional.normalize(torch.randn(5, 7), dim=1)
    g = torch.nn.functional.normalize(torch.randn(7), dim=0)
    b = torch.nn.functional.normalize(torch.randn(7), dim=0)
    torch.testing.assert_close(vlm_rm_reward(x, g, b, 0.0), x @ g)


def test_vlm_rm_full_projection_keeps_only_the_goal_direction():
    # P = d d^T/|d|^2: (x - g) P = (0.4, -0.4); |.|^2 = 0.32; R = 0.84
    torch.testing.assert_close(vlm_rm_reward(X, G, B, 1.0), torch.tensor([0.84]))
    # moving x orthogonally to d does not change the reward at alpha = 1
    x2 = X + 0.1 * torch.tensor([[1.0, 1.0]]) / math.sqrt(2)
    torch.testing.assert_close(vlm_rm_reward(x2, G, B, 1.0), torch.tensor([0.84]))


def test_vlm_rm_rejects_bad_alpha_and_identical_prompts():
    with pytest.raises(ValueError, match="alpha"):
        vlm_rm_reward(X, G, B, 1.5)
    with pytest.raises(ValueError, match="identically"):
        vlm_rm_reward(X, G, G, 0.5)


def test_clg_hand_worked():
    pos = torch.tensor([0.30, 0.30, 0.30, 0.30])
    neg = torch.tensor([0.31, 0.25, 0.40, 0.33])
    # z = 0.01 -> 2/3; z < 0 -> 1; z = 0.1 clipped to 0.03 -> 0; z = 0.03 -> 0
    torch.testing.assert_close(clg_reward(pos, neg, 0.03), torch.tensor([2 / 3, 1.0, 0.0, 0.0]))


def test_clg_with_several_negatives_scores_each_frame_against_its_closest_negative():
    pos = torch.tensor([0.30, 0.30, 0.30])
    neg = torch.tensor([[0.31, 0.25], [0.25, 0.32], [0.20, 0.29]])
    # closest negatives 0.31, 0.32, 0.29: z = 0.01 -> 2/3, z = 0.02 -> 1/3, z < 0 -> 1
    torch.testing.assert_close(clg_reward(pos, neg, 0.03), torch.tensor([2 / 3, 1 / 3, 1.0]))
    # one negative column is the (N,) form
    torch.testing.assert_close(clg_reward(pos, neg[:, :1], 0.03), clg_reward(pos, neg[:, 0], 0.03))


def test_clg_speed_reward_hand_worked():
    r = torch.tensor([1.0, 0.5, 0.0])
    v = torch.tensor([2.0, 2.0, 0.0])
    factors = torch.tensor([[1.0, 0.5], [1.0, 1.0], [0.5, 0.5]])
    # v_max = 4: v_des = 4, 2, 0 -> 1 - |2-4|/4 = 0.5 (x0.5), 1 - 0 = 1, 1 - 0 = 1 (x0.25)
    torch.testing.assert_close(clg_speed_reward(r, v, 4.0, factors), torch.tensor([0.25, 1.0, 0.25]))
    torch.testing.assert_close(clg_speed_reward(r, v, 4.0), torch.tensor([0.5, 1.0, 1.0]))


class _AxisEncoder:
    """A toy encoder: frame ``i`` embeds as unit axis ``frames[i, 0, 0, 0]``; prompts by a fixed table."""

    texts = {"clear": [1.0, 0.0, 0.0], "crash": [0.0, 1.0, 0.0], "obstacle": [0.0, 0.0, 1.0]}

    def encode_image(self, frames):
        return torch.eye(3)[torch.as_tensor(frames[:, 0, 0, 0], dtype=torch.long)]

    def encode_text(self, prompts):
        return torch.tensor([self.texts[p] for p in prompts])


def test_clg_score_fn_counts_the_extra_negatives_only_when_configured():
    from robotrl.rewards.config import VLMRewardConfig
    from robotrl.rewards.env import vlm_score_fn

    frames = np.zeros((3, 2, 2, 3), np.uint8)
    frames[:, 0, 0, 0] = [0, 1, 2]  # a clear frame, a crash, an obstacle ahead
    one = VLMRewardConfig(name="clg", goal="clear", negative="crash")
    both = VLMRewardConfig(name="clg", goal="clear", negative="crash", negatives=["obstacle"])
    torch.testing.assert_close(vlm_score_fn(one, _AxisEncoder())(frames), torch.tensor([1.0, 0.0, 1.0]))
    torch.testing.assert_close(vlm_score_fn(both, _AxisEncoder())(frames), torch.tensor([1.0, 0.0, 0.0]))
