"""Pure VLM reward functions on embeddings (no encoder, no env): VLM-RM and VLM-RL's CLG.

All inputs are torch tensors; embeddings are L2-normalized ``(N, D)`` image rows and ``(D,)``
text vectors from an ``ImageTextEncoder``.
"""

from __future__ import annotations

import torch


def vlm_rm_projection(goal: torch.Tensor, baseline: torch.Tensor, alpha: float) -> torch.Tensor:
    """VLM-RM's ``(D, D)`` projection ``P = alpha * d d^T / |d|^2 + (1 - alpha) I`` with ``d = goal - baseline``.

    Raises:
        ValueError: ``alpha`` outside ``[0, 1]``, or goal and baseline equal while ``alpha > 0``.

    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"VLM-RM alpha must be in [0, 1], got {alpha}.")
    d = goal - baseline
    eye = torch.eye(goal.shape[-1], dtype=goal.dtype, device=goal.device)
    norm2 = d.square().sum()
    if alpha > 0 and float(norm2) == 0.0:
        raise ValueError("VLM-RM: the goal and baseline prompts embed identically; the direction d = g - b is 0.")
    return alpha * torch.outer(d, d) / norm2.clamp(min=1e-12) + (1.0 - alpha) * eye


def vlm_rm_reward(image: torch.Tensor, goal: torch.Tensor, baseline: torch.Tensor, alpha: float) -> torch.Tensor:
    """VLM-RM reward ``R = 1 - 0.5 * |(x - g) P|^2`` for each image embedding ``x``.

    Args:
        image: ``(N, D)`` unit image embeddings ``x``.
        goal: ``(D,)`` unit goal-prompt embedding ``g``.
        baseline: ``(D,)`` unit baseline-prompt embedding ``b``.
        alpha: partial-projection strength; ``0`` gives the cosine similarity ``x . g``.

    Returns:
        ``(N,)`` rewards.

    """
    proj = vlm_rm_projection(goal, baseline, alpha)
    return 1.0 - 0.5 * ((image - goal) @ proj).square().sum(-1)


def clg_reward(sim_positive: torch.Tensor, sim_negative: torch.Tensor, threshold: float = 0.03) -> torch.Tensor:
    """VLM-RL contrasting language goals: ``z = clip(sim_neg - sim_pos, 0, threshold)``, ``r = 1 - z / threshold``.

    Args:
        sim_positive: ``(N,)`` similarity of each frame to the positive goal ("the road is clear").
        sim_negative: ``(N,)`` similarity to the negative goal ("two cars have collided"), or
            ``(N, K)`` similarities to ``K`` negative goals, of which each frame's closest counts
            (``sim_neg = max_k``): a frame is as unsafe as the danger it most resembles.
        threshold: the clip bound (0.03 in VLM-RL).

    Returns:
        ``(N,)`` in ``[0, 1]``: 1 when the frame is at least as close to the positive goal.

    """
    if threshold <= 0:
        raise ValueError(f"CLG threshold must be > 0, got {threshold}.")
    if sim_negative.dim() == 2:
        sim_negative = sim_negative.amax(-1)
    z = (sim_negative - sim_positive).clamp(0.0, threshold)
    return 1.0 - z / threshold


def clg_speed_reward(r_clg: torch.Tensor, speed: torch.Tensor, v_max: float,
                     factors: torch.Tensor | None = None) -> torch.Tensor:
    """VLM-RL's combined reward: the CLG score gates the desired speed ``v_des = r_clg * v_max``.

    ``r = (1 - |v - v_des| / v_max) * prod(factors)``, where the factors are the vehicle-state
    terms in ``[0, 1]`` (lane centring, heading, lane deviation; CaRL's soft penalties here).

    Args:
        r_clg: ``(N,)`` CLG scores in ``[0, 1]``.
        speed: ``(N,)`` forward speed, m/s.
        v_max: the speed a clear road asks for, m/s.
        factors: optional ``(N, F)`` multiplicative factors.

    Returns:
        ``(N,)`` rewards.

    """
    r = 1.0 - (speed - r_clg * v_max).abs() / v_max
    return r * factors.prod(-1) if factors is not None and factors.numel() else r


def cosine_scores(image: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
    """``(N, D) x (M, D) -> (N, M)`` cosine similarities of unit embeddings."""
    return image @ texts.T
