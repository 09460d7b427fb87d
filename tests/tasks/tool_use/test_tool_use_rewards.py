"""Keypoint/goal frames and every reward term, checked on hand-constructed states."""

import math

import pytest
import torch
from robotrl.tasks.tool_use import rewards as R

IDENT = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
YAW90 = torch.tensor([[math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]])


def test_keypoints_are_box_corners_with_minimum_half_extent():
    center = torch.tensor([[0.02, 0.0, 0.0]])
    half = torch.tensor([[0.10, 0.01, 0.05]])
    kp = R.keypoints_local(center, half, min_half=0.03)
    assert kp.shape == (1, 8, 3)
    # y half-extent 0.01 is raised to 0.03; x and z are kept
    assert torch.allclose(kp[0].amax(0), torch.tensor([0.12, 0.03, 0.05]))
    assert torch.allclose(kp[0].amin(0), torch.tensor([-0.08, -0.03, -0.05]))
    assert torch.allclose(kp[0].mean(0), center[0])


def test_keypoints_in_world_follow_translation_and_rotation():
    local = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]])
    pos = torch.tensor([[0.5, -0.2, 0.1]])
    world = R.to_world(pos, YAW90, local)
    # 90 deg about z: x -> y, y -> -x
    expected = torch.tensor([[[0.5, 0.8, 0.1], [-1.5, -0.2, 0.1]]])
    assert torch.allclose(world, expected, atol=1e-6)


def test_goal_keypoint_distance_on_constructed_goals():
    local = R.keypoints_local(torch.zeros(1, 3), torch.tensor([[0.1, 0.03, 0.03]]), 0.03)
    tool = R.to_world(torch.zeros(1, 3), IDENT, local)
    # goal translated by 5 cm: every keypoint is 5 cm away
    goal = R.to_world(torch.tensor([[0.0, 0.05, 0.0]]), IDENT, local)
    assert R.max_keypoint_distance(tool, goal).item() == pytest.approx(0.05, abs=1e-6)
    # goal yawed by 90 deg: the corner (0.1, 0.03) moves to (-0.03, 0.1): distance sqrt(0.13^2 + 0.07^2)
    goal = R.to_world(torch.zeros(1, 3), YAW90, local)
    assert R.max_keypoint_distance(tool, goal).item() == pytest.approx(math.hypot(0.13, 0.07), abs=1e-6)
    # same pose: zero
    assert R.max_keypoint_distance(tool, tool).item() == pytest.approx(0.0, abs=1e-7)


def test_box_distance_inside_outside_and_rotated():
    center, half = torch.zeros(1, 3), torch.tensor([[0.1, 0.02, 0.01]])
    pts = torch.tensor([[[0.0, 0.0, 0.0], [0.15, 0.0, 0.0], [0.0, 0.0, 0.04], [0.13, 0.06, 0.0]]])
    d = R.box_distance(pts, torch.zeros(1, 3), IDENT, center, half)
    assert torch.allclose(d, torch.tensor([[0.0, 0.05, 0.03, 0.05]]), atol=1e-6)
    # yawed box: a point 0.15 along world y is 0.05 beyond the (now y-aligned) long side
    d = R.box_distance(torch.tensor([[[0.0, 0.15, 0.0]]]), torch.zeros(1, 3), YAW90, center, half)
    assert d.item() == pytest.approx(0.05, abs=1e-6)


def test_fingertip_approach_pays_only_improvements_before_lift():
    best = torch.tensor([[0.10, 0.10, 0.10, 0.10], [0.10, 0.10, 0.10, 0.10], [0.1, 0.1, 0.1, 0.1]])
    dist = torch.tensor([[0.08, 0.09, 0.12, 0.10], [0.12, 0.12, 0.12, 0.12], [0.05, 0.05, 0.05, 0.05]])
    active = torch.tensor([True, True, False])
    term, new_best = R.fingertip_approach(best, dist, active)
    assert torch.allclose(term, torch.tensor([0.03, 0.0, 0.0]), atol=1e-6)  # 2 cm + 1 cm; moving away: 0
    assert torch.allclose(new_best[0], torch.tensor([0.08, 0.09, 0.10, 0.10]))
    assert torch.allclose(new_best[1], best[1])  # moving away keeps the best
    assert (term >= 0).all()


def test_lift_term_clipped_and_off_after_lift():
    height = torch.tensor([-0.01, 0.05, 0.30, 0.05])
    lifted = torch.tensor([False, False, False, True])
    term = R.lift(height, lifted, lift_height=0.15)
    assert torch.allclose(term, torch.tensor([0.0, 0.05, 0.15, 0.0]))


def test_keypoint_progress_after_lift_only():
    best = torch.tensor([0.30, 0.30, 0.30])
    dist = torch.tensor([0.25, 0.35, 0.10])
    lifted = torch.tensor([True, True, False])
    term, new_best = R.keypoint_progress(best, dist, lifted)
    assert torch.allclose(term, torch.tensor([0.05, 0.0, 0.0]), atol=1e-6)
    assert torch.allclose(new_best, torch.tensor([0.25, 0.30, 0.30]))


def test_joint_velocity_penalty_sign_and_magnitude():
    qvel = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]])
    pen = R.joint_velocity_penalty(qvel)
    assert torch.allclose(pen, torch.tensor([-5.25, 0.0]))


def test_grasp_pays_for_thumb_opposing_a_finger_across_the_tool_only():
    # Tool: identity pose at the origin, box half-extents 2 x 1 x 1 cm; reach 1 cm.
    pos, quat = torch.zeros(4, 3), torch.tensor([[1.0, 0, 0, 0]]).repeat(4, 1)
    center, half = torch.zeros(4, 3), torch.tensor([[0.02, 0.01, 0.01]]).repeat(4, 1)
    far = [0.5, 0.5, 0.5]
    tips = torch.tensor([
        [[0.0, 0.015, 0.0], far, far, [0.0, -0.015, 0.0]],    # index and thumb on opposite y faces
        [[0.0, 0.015, 0.0], far, far, [0.01, 0.015, 0.0]],    # both on the +y face: side by side
        [far, far, [0.0, 0.0, 0.015], [0.0, 0.0, -0.015]],   # ring and thumb above and below
        [[0.0, 0.015, 0.0], far, far, [0.0, -0.035, 0.0]],   # thumb 2.5 cm away: out of reach
    ])
    dist = R.box_distance(tips, pos, quat, center, half)
    active = torch.tensor([True, True, True, True])
    assert R.grasp(tips, dist, pos, quat, center, half, 0.01, active).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert R.grasp(tips, dist, pos, quat, center, half, 0.01, ~active).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_held_lift_pays_clipped_height_of_held_tools_whether_lifted_or_not():
    height = torch.tensor([-0.02, 0.05, 0.15, 0.40, 0.10])
    held = torch.tensor([True, True, True, True, False])
    term = R.held_lift(height, held, lift_height=0.15)
    torch.testing.assert_close(term, torch.tensor([0.0, 0.05, 0.15, 0.15, 0.0]))


def test_held_goal_is_exp_of_minus_distance_over_sigma_where_held():
    dist = torch.tensor([0.0, 0.3, 0.6, 0.0])
    holding = torch.tensor([True, True, True, False])
    term = R.held_goal(dist, holding, sigma=0.3)
    # exp(0) = 1, exp(-1) = 0.367879, exp(-2) = 0.135335, not holding = 0
    torch.testing.assert_close(term, torch.tensor([1.0, 0.367879, 0.135335, 0.0]), atol=1e-6, rtol=0)
