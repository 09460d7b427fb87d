"""Pure, batched geometry and DexPBT-style reward terms of the tool-use task.

Every function takes ``(N, ...)`` float tensors and returns new tensors (no state). The
task keeps the best-so-far distances and flags and passes them in explicitly.
"""

from __future__ import annotations

import torch

from robotrl.rotations import quat_rotate_inverse_wxyz, quat_rotate_wxyz

_CORNERS = torch.tensor(
    [[sx, sy, sz] for sx in (-1.0, 1.0) for sy in (-1.0, 1.0) for sz in (-1.0, 1.0)]
)  # (8, 3)


def keypoints_local(bbox_center: torch.Tensor, bbox_half: torch.Tensor, min_half: float) -> torch.Tensor:
    """The 8 keypoints of each tool in its own frame: ``(N, 8, 3)``.

    Keypoints are the corners of the tool's bounding box, each half-extent raised to at
    least ``min_half`` so that thin tools still reveal their orientation.
    """
    half = bbox_half.clamp(min=min_half)
    return bbox_center[:, None, :] + _CORNERS.to(half)[None] * half[:, None, :]


def to_world(pos: torch.Tensor, quat: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
    """Points ``local`` ``(N, K, 3)`` in frames ``(pos (N, 3), quat (N, 4))`` -> world ``(N, K, 3)``."""
    k = local.shape[1]
    return pos[:, None, :] + quat_rotate_wxyz(quat[:, None, :].expand(-1, k, -1), local)


def box_distance(
    points: torch.Tensor, pos: torch.Tensor, quat: torch.Tensor, center: torch.Tensor, half: torch.Tensor
) -> torch.Tensor:
    """Distance ``(N, K)`` of world points ``(N, K, 3)`` to each tool's oriented bounding box (0 inside)."""
    k = points.shape[1]
    local = quat_rotate_inverse_wxyz(quat[:, None, :].expand(-1, k, -1), points - pos[:, None, :])
    outside = (local - center[:, None, :]).abs() - half[:, None, :]
    return outside.clamp(min=0.0).norm(dim=-1)


def max_keypoint_distance(keypoints: torch.Tensor, goal_keypoints: torch.Tensor) -> torch.Tensor:
    """Largest distance ``(N,)`` between matching keypoints ``(N, K, 3)`` of tool and goal."""
    return (keypoints - goal_keypoints).norm(dim=-1).amax(dim=1)


def fingertip_approach(
    best: torch.Tensor, dist: torch.Tensor, active: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum over fingertips of the improvement on the closest distance so far, while ``active``.

    Args:
        best: ``(N, F)`` closest fingertip-to-tool distance so far (m).
        dist: ``(N, F)`` current distances.
        active: ``(N,)`` bool, the term is paid only before the tool is lifted.

    Returns:
        ``(term (N,), new_best (N, F))``; the term is >= 0 and in metres.

    """
    gain = (best - dist).clamp(min=0.0).sum(dim=1) * active.float()
    return gain, torch.minimum(best, dist)


def grasp(
    tips: torch.Tensor, tip_dist: torch.Tensor, pos: torch.Tensor, quat: torch.Tensor, center: torch.Tensor,
    half: torch.Tensor, reach: float, active: torch.Tensor,
) -> torch.Tensor:
    """1 where the thumb opposes a finger across the tool, while ``active`` (before the lift).

    Opposition: the thumb (last fingertip) and at least one other fingertip are within ``reach``
    of the tool box, and the midpoint of the thumb and that finger lies inside the box (so the
    two are on opposite sides, not side by side on one face).

    Args:
        tips: ``(N, F, 3)`` world fingertip positions, thumb last.
        tip_dist: ``(N, F)`` their distances to the tool box (m).
        pos: ``(N, 3)`` tool position.
        quat: ``(N, 4)`` tool orientation (wxyz).
        center: ``(N, 3)`` tool box centre in the tool frame.
        half: ``(N, 3)`` tool box half-extents.
        reach: contact distance (m).
        active: ``(N,)`` bool.

    Returns:
        ``(N,)`` float in ``{0, 1}``.

    """
    mid = 0.5 * (tips[:, :-1] + tips[:, -1:])  # (N, F-1, 3)
    inside = box_distance(mid, pos, quat, center, half) <= 0.0
    opposed = inside & (tip_dist[:, :-1] < reach) & (tip_dist[:, -1:] < reach)
    return (opposed.any(dim=1) & active).float()


def lift(height: torch.Tensor, lifted: torch.Tensor, lift_height: float) -> torch.Tensor:
    """Height of the tool above its resting height, clipped to ``[0, lift_height]``, until lifted."""
    return height.clamp(min=0.0, max=lift_height) * (~lifted).float()


def held_lift(height: torch.Tensor, held: torch.Tensor, lift_height: float) -> torch.Tensor:
    """Height of a held tool above rest, clipped to ``[0, lift_height]``, before and after the lift.

    Not stopped at the lift (unlike ``lift``): a term that stopped there paid most for hovering just below it.
    """
    return height.clamp(min=0.0, max=lift_height) * held.float()


def held_goal(dist: torch.Tensor, holding: torch.Tensor, sigma: float) -> torch.Tensor:
    """``exp(-dist / sigma)`` ``(N,)`` of the max keypoint distance to the goal where ``holding``, else 0."""
    return torch.exp(dist / -sigma) * holding.float()


def keypoint_progress(
    best: torch.Tensor, dist: torch.Tensor, lifted: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Improvement ``(N,)`` of the best-so-far max keypoint distance to the goal, after the lift.

    Returns ``(term, new_best)``; worlds not lifted keep ``best`` and earn 0.
    """
    gain = (best - dist).clamp(min=0.0) * lifted.float()
    return gain, torch.where(lifted, torch.minimum(best, dist), best)


def joint_velocity_penalty(qvel: torch.Tensor) -> torch.Tensor:
    """``-sum(qvel^2)`` over the robot's joints ``(N, J)``: always <= 0."""
    return -qvel.square().sum(dim=1)
