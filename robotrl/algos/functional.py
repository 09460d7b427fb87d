"""Pure RL math. No state, no I/O: every function is tested against hand-worked numbers.

Shapes: ``T`` time steps, ``B`` parallel worlds (or a flat batch where noted).
"""

from __future__ import annotations

import torch


def bootstrap_timeouts(
    rewards: torch.Tensor, truncated: torch.Tensor, final_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Add ``gamma * V(s_final)`` to the reward of steps that ended by a time-out.

    A time-out is not a real end of the task, so its return continues past the limit.

    Args:
        rewards: ``[T, B]`` rewards.
        truncated: ``[T, B]`` bool, the episode hit its time limit (and was not terminated).
        final_values: ``[T, B]`` values of the observation *before* the autoreset.
        gamma: discount.

    Returns:
        ``[T, B]`` rewards with time-outs bootstrapped.
    """
    return rewards + gamma * final_values * truncated.to(rewards.dtype)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation.

    ``delta_t = r_t + gamma * (1 - d_t) * V_{t+1} - V_t`` and
    ``A_t = delta_t + gamma * lam * (1 - d_t) * A_{t+1}``.

    Args:
        rewards: ``[T, B]`` (time-outs already bootstrapped, see ``bootstrap_timeouts``).
        values: ``[T, B]`` ``V(s_t)``.
        dones: ``[T, B]`` bool, the episode ended after step ``t`` (terminated or truncated).
        last_values: ``[B]`` ``V(s_T)`` of the observation after the last step.
        gamma: discount.
        lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, both ``[T, B]``; ``returns = advantages + values``.
    """
    T = rewards.shape[0]
    not_done = 1.0 - dones.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    next_adv = torch.zeros_like(last_values)
    next_value = last_values
    for t in reversed(range(T)):
        delta = rewards[t] + gamma * not_done[t] * next_value - values[t]
        next_adv = delta + gamma * lam * not_done[t] * next_adv
        advantages[t] = next_adv
        next_value = values[t]
    return advantages, advantages + values


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero-mean, unit-std copy of ``x`` (over all elements)."""
    return (x - x.mean()) / (x.std() + eps)


def clipped_surrogate_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """PPO policy loss ``-mean(min(rho * A, clip(rho, 1-eps, 1+eps) * A))``.

    Args:
        log_prob: ``[N]`` log-probabilities of the taken actions under the current policy.
        old_log_prob: ``[N]`` under the policy that collected the data.
        advantages: ``[N]``.
        clip: the ratio clip ``eps``.

    Returns:
        Scalar loss.
    """
    ratio = torch.exp(log_prob - old_log_prob)
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    return -torch.min(unclipped, clipped).mean()


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float | None
) -> torch.Tensor:
    """Value loss ``mean(max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2))``.

    With ``clip=None`` it is the plain ``mean((V - R)^2)``. All inputs are ``[N]``.
    """
    if clip is None:
        return (values - returns).square().mean()
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    return torch.max((values - returns).square(), (clipped - returns).square()).mean()


def approx_kl(old_log_prob: torch.Tensor, log_prob: torch.Tensor) -> torch.Tensor:
    """Schulman's low-variance, non-negative estimator of ``KL(old || new)`` from samples of old.

    ``mean((r - 1) - log r)`` with ``r = exp(log_prob - old_log_prob)``; inputs are ``[N]``.
    """
    log_ratio = log_prob - old_log_prob
    return (torch.exp(log_ratio) - 1.0 - log_ratio).mean()


def adaptive_lr(lr: float, kl: float, desired_kl: float, factor: float = 1.5,
                lr_min: float = 1e-5, lr_max: float = 1e-2) -> float:
    """rsl_rl's KL-adaptive step size: shrink when ``kl > 2 * desired``, grow when ``< desired / 2``."""
    if kl > 2.0 * desired_kl:
        return max(lr_min, lr / factor)
    if 0.0 < kl < 0.5 * desired_kl:
        return min(lr_max, lr * factor)
    return lr
