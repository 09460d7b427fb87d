"""Pure RL math. No state, no I/O: every function is tested against hand-worked numbers.

Shapes: ``T`` time steps, ``B`` parallel worlds (or a flat batch where noted).
"""

from __future__ import annotations

import math

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


def ppo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    clip: float,
    value_clip: float | None,
    value_coef: float,
    entropy_coef: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO total loss ``L_clip + value_coef * L_value - entropy_coef * mean(H)``.

    The entropy enters with a minus sign: with ``entropy_coef > 0`` a more random policy has
    a lower loss, so minimizing the loss is an entropy *bonus*. Actions are ``[B, A]``; the
    per-sample log-probabilities and entropies are already summed over the ``A`` dimensions.

    Args:
        log_prob: ``[B]`` log-probabilities of the taken actions under the current policy.
        old_log_prob: ``[B]`` under the policy that collected the data.
        advantages: ``[B]`` advantages (normalized or not, as the caller chooses).
        values: ``[B]`` current value estimates ``V(s)``.
        old_values: ``[B]`` values stored at collection time.
        returns: ``[B]`` value targets.
        entropy: ``[B]`` policy entropy per sample.
        clip: surrogate ratio clip ``eps`` (``clipped_surrogate_loss``).
        value_clip: value clip, or ``None`` for the plain squared error (``clipped_value_loss``).
        value_coef: weight of the value term.
        entropy_coef: weight of the entropy bonus.

    Returns:
        ``(loss, metrics)``: the scalar loss to minimize, and detached scalars
        ``loss/policy``, ``loss/value`` (unweighted) and ``loss/entropy`` (mean entropy).

    """
    policy_loss = clipped_surrogate_loss(log_prob, old_log_prob, advantages, clip)
    value_loss = clipped_value_loss(values, old_values, returns, value_clip)
    mean_entropy = entropy.mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * mean_entropy
    metrics = {
        "loss/policy": policy_loss.detach(),
        "loss/value": value_loss.detach(),
        "loss/entropy": mean_entropy.detach(),
    }
    return loss, metrics


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


# --- off-policy math (SAC, TD3/REDQ, residual RL) -----------------------------------


def nstep_returns(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    valid: torch.Tensor,
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Truncated n-step return from step ``t`` that stops at the first episode end.

    Step ``k`` (``0 <= k < n``) is used when every step before it was valid and did not end
    the episode. With ``m`` steps used and ``j = m - 1`` the last used step, the target is
    ``R + D * Q(s'_j)`` where ``s'_j`` is the (pre-reset) observation after step ``j``,
    ``R = sum_{k<m} gamma^k r_k`` and ``D = gamma^m * (1 - terminated_j)``. A time-out
    (``truncated_j``) stops the sum but still bootstraps; a termination does not.

    Args:
        rewards: ``[n, B]`` rewards of steps ``t .. t+n-1`` of the same world.
        terminated: ``[n, B]`` bool, the task ended the episode after step ``k``.
        truncated: ``[n, B]`` bool, the episode hit its time limit after step ``k``.
        valid: ``[n, B]`` bool, step ``k`` exists (was written); ``valid[0]`` must be True.
        gamma: discount.

    Returns:
        ``(R, D, j)``: ``[B]`` return, ``[B]`` bootstrap discount and ``[B]`` int64 index of
        the last used step (where the bootstrap observation lives).

    """
    n, b = rewards.shape
    ret = torch.zeros(b, dtype=rewards.dtype, device=rewards.device)
    disc = torch.ones_like(ret)
    last = torch.zeros(b, dtype=torch.long, device=rewards.device)
    term_last = torch.zeros(b, dtype=torch.bool, device=rewards.device)
    alive = torch.ones(b, dtype=torch.bool, device=rewards.device)
    for k in range(n):
        use = alive & valid[k]
        ret = torch.where(use, ret + disc * rewards[k], ret)
        disc = torch.where(use, disc * gamma, disc)
        last = torch.where(use, torch.full_like(last, k), last)
        term_last = torch.where(use, terminated[k], term_last)
        alive = use & ~(terminated[k] | truncated[k])
    return ret, disc * (~term_last).to(ret.dtype), last


def td_target(returns: torch.Tensor, discount: torch.Tensor, next_value: torch.Tensor) -> torch.Tensor:
    """Bootstrapped target ``R + D * V(s')``; all inputs ``[B]`` (see ``nstep_returns``)."""
    return returns + discount * next_value


def redq_min(q_heads: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
    """REDQ in-target minimization: ``min_{i in heads} Q_i``.

    Args:
        q_heads: ``[H, B]`` target Q values of every head.
        heads: ``[K]`` int64 indices of the randomly chosen heads (``K`` = 2 in ResFiT).

    Returns:
        ``[B]`` minimum over the chosen heads.

    """
    return q_heads.index_select(0, heads).min(0).values


def categorical_projection(
    next_probs: torch.Tensor, returns: torch.Tensor, discount: torch.Tensor, v_min: float, v_max: float
) -> torch.Tensor:
    """C51 projection of the bootstrapped distribution ``R + D * Z(s')`` onto the fixed support.

    The support is ``z_k = v_min + k * dz``, ``k = 0 .. K-1``, ``dz = (v_max - v_min) / (K - 1)``.
    Each atom ``z_k`` moves to ``Tz_k = clip(R + D * z_k, v_min, v_max)``, and its probability is
    split between the two neighbouring atoms in proportion to closeness (all of it to one atom when
    ``Tz_k`` lands exactly on it).

    Args:
        next_probs: ``[B, K]`` probabilities of the target distribution at ``s'``.
        returns: ``[B]`` n-step return ``R`` (see ``nstep_returns``).
        discount: ``[B]`` bootstrap discount ``D`` (0 after a termination).
        v_min: lowest atom.
        v_max: highest atom.

    Returns:
        ``[B, K]`` projected probabilities (each row sums to 1).

    """
    b, k = next_probs.shape
    support = torch.linspace(v_min, v_max, k, device=next_probs.device, dtype=next_probs.dtype)
    dz = (v_max - v_min) / (k - 1)
    tz = (returns[:, None] + discount[:, None] * support[None]).clamp(v_min, v_max)
    pos = (tz - v_min) / dz  # [B, K] fractional atom index
    lower = pos.floor().clamp(0, k - 1)
    upper = pos.ceil().clamp(0, k - 1)
    w_upper = pos - lower  # 0 when pos is an integer: then lower == upper takes everything
    out = torch.zeros_like(next_probs)
    out.scatter_add_(1, lower.long(), next_probs * (1.0 - w_upper))
    out.scatter_add_(1, upper.long(), next_probs * w_upper)
    return out


def categorical_td_loss(logits: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of every critic head's distribution against the projected target.

    Args:
        logits: ``[H, B, K]`` critic logits of ``H`` heads.
        target_probs: ``[B, K]`` projected target (no gradient flows into it).

    Returns:
        Scalar: ``sum_h mean_b -sum_k target_bk * log_softmax(logits)_hbk``.

    """
    log_p = torch.log_softmax(logits, dim=-1)
    return -(target_probs.detach()[None] * log_p).sum(-1).mean(1).sum()


def clipped_double_distribution(probs: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Per sample, the distribution of the head with the smallest expected value (clipped double Q).

    Args:
        probs: ``[H, B, K]`` target distributions of ``H`` heads.
        values: ``[H, B]`` their expected values.

    Returns:
        ``[B, K]``.

    """
    head = values.argmin(0)  # [B]
    return probs.gather(0, head[None, :, None].expand(1, *probs.shape[1:])).squeeze(0)


def residual_action(base_action: torch.Tensor, raw: torch.Tensor, scale: float) -> torch.Tensor:
    """ResFiT composition ``clip(a_base + scale * tanh(raw), -1, 1)``; all ``[B, A]``."""
    return (base_action + scale * torch.tanh(raw)).clamp(-1.0, 1.0)


def tanh_gaussian_log_prob(mean: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
    """Log-density of ``a = tanh(u)``, ``u ~ N(mean, exp(log_std)^2)``, summed over actions.

    Uses the stable ``log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u))``.

    Args:
        mean: ``[B, A]``.
        log_std: ``[B, A]``.
        pre_tanh: ``[B, A]`` the sample ``u`` before the squashing.

    Returns:
        ``[B]`` log-probabilities of the squashed actions.

    """
    var = torch.exp(2.0 * log_std)
    log_normal = -0.5 * ((pre_tanh - mean).square() / var + 2.0 * log_std + math.log(2.0 * math.pi))
    log_det = 2.0 * (math.log(2.0) - pre_tanh - torch.nn.functional.softplus(-2.0 * pre_tanh))
    return (log_normal - log_det).sum(-1)


def sac_actor_loss(log_prob: torch.Tensor, q: torch.Tensor, alpha: torch.Tensor | float) -> torch.Tensor:
    """SAC policy loss ``mean(alpha * log_pi(a|s) - Q(s, a))``; inputs ``[B]``."""
    return (alpha * log_prob - q).mean()


def sac_temperature_loss(
    log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """Automatic entropy tuning ``-mean(log_alpha * (log_pi + target_entropy))``.

    The gradient raises ``alpha`` when the policy entropy ``-log_pi`` is below the target.

    Args:
        log_alpha: scalar learnable ``log(alpha)``.
        log_prob: ``[B]`` log-probabilities of fresh policy samples (no gradient flows into them).
        target_entropy: desired entropy, usually ``-A``.

    Returns:
        Scalar loss.

    """
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """Polyak averaging ``theta_target <- (1 - tau) theta_target + tau theta_source`` in place."""
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters(), strict=True):
            t.lerp_(s, tau)


# --- VLA RL fine-tuning math (SimpleVLA-RL GRPO, RLinf action-level PPO) -------------


def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantage ``(R - mean_g) / (std_g + eps)`` (SimpleVLA-RL / verl).

    ``std_g`` is the unbiased (``n - 1``) sample standard deviation over the ``G`` rollouts of a
    group, as ``torch.std`` computes it. A group whose rewards are all equal gets advantage 0.

    Args:
        rewards: ``[M, G]`` episode rewards (binary success in SimpleVLA-RL) of ``G`` rollouts
            for each of ``M`` task instances, every rollout of a group started from the same state.
        eps: added to the standard deviation.

    Returns:
        ``[M, G]`` advantages, one per rollout; the caller applies it to every action token.

    """
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True) if rewards.shape[1] > 1 else torch.zeros_like(mean)
    return (rewards - mean) / (std + eps)


def grpo_group_filter(success: torch.Tensor, low: float = 0.1, high: float = 0.9) -> torch.Tensor:
    """Groups to keep: success rate in ``[low, high]`` (inclusive), SimpleVLA-RL's dynamic sampling.

    Groups where every rollout succeeded or every rollout failed carry no learning signal
    (their advantages are all 0) and only dilute the token mean, so they are dropped.

    Args:
        success: ``[M, G]`` bool or 0/1 success of each rollout.
        low: smallest kept success rate.
        high: largest kept success rate.

    Returns:
        ``[M]`` bool mask of kept groups.

    """
    rate = success.float().mean(dim=1)
    return (rate >= low - 1e-9) & (rate <= high + 1e-9)


def asymmetric_clipped_token_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO policy loss on action tokens with an asymmetric ratio clip ("clip-higher"), no KL term.

    Per token ``rho = exp(log_prob - old_log_prob)`` and
    ``l = -min(rho * A, clip(rho, 1 - clip_low, 1 + clip_high) * A)``; the loss is the mean of
    ``l`` over the valid tokens of the whole batch (token-mean aggregation).

    Args:
        log_prob: ``[B, K]`` log-probabilities of the sampled action tokens under the current policy.
        old_log_prob: ``[B, K]`` under the policy that sampled them.
        advantages: ``[B, K]`` per-token advantages (``[B, 1]`` broadcasts one per rollout step).
        mask: ``[B, K]`` bool or 0/1, tokens that count (steps after the episode end are 0).
        clip_low: lower clip ``eps_low`` (0.2 in SimpleVLA-RL).
        clip_high: upper clip ``eps_high`` (0.28 in SimpleVLA-RL).

    Returns:
        ``(loss, metrics)``: scalar loss, and detached ``loss/policy`` and ``clip_fraction``
        (share of valid tokens whose ratio was clipped in the direction that stops the gradient).

    """
    m = mask.to(log_prob.dtype)
    adv = advantages.expand_as(log_prob)
    ratio = torch.exp(log_prob - old_log_prob)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.min(unclipped, clipped)
    count = m.sum().clamp(min=1.0)
    loss = (per_token * m).sum() / count
    clip_frac = ((clipped < unclipped).to(m.dtype) * m).sum() / count
    return loss, {"loss/policy": loss.detach(), "clip_fraction": clip_frac.detach()}


def chunk_rewards(rewards: torch.Tensor, dones: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum env-step rewards into action-chunk rewards for chunk-level GAE (RLinf).

    Args:
        rewards: ``[T, B]`` per env step, ``T`` a multiple of ``chunk``.
        dones: ``[T, B]`` bool, the episode ended after that env step.
        chunk: env steps per policy decision.

    Returns:
        ``([T // chunk, B] rewards, [T // chunk, B] dones)``: the sum over each chunk, and
        whether the episode ended anywhere inside it.

    """
    T, B = rewards.shape
    if T % chunk:
        raise ValueError(f"T={T} is not a multiple of the chunk length {chunk}.")
    return rewards.reshape(T // chunk, chunk, B).sum(1), dones.reshape(T // chunk, chunk, B).any(1)


def action_level_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLinf's action-level GAE: one value and one advantage per *action* (not per token).

    The value head scores each policy decision; every token of that action shares its
    advantage (broadcast with ``asymmetric_clipped_token_loss`` or by summing token
    log-probabilities into the action's log-probability for ``ppo_loss``). The recursion is
    ``compute_gae`` over the ``[T, B]`` decision steps.

    Returns:
        ``(advantages, returns)``, both ``[T, B]``.

    """
    return compute_gae(rewards, values, dones, last_values, gamma, lam)


def scale_by_return_std(reward: torch.Tensor, return_var: torch.Tensor, eps: float = 1e-8,
                        clip: float = 10.0) -> torch.Tensor:
    """Rewards ``[B]`` divided by the std of the discounted return, clipped to ``[-clip, clip]``.

    ``return_var`` is the running variance (a scalar tensor) of every world's discounted return
    ``G_t = gamma * G_{t-1} + r_t`` (reset at episode ends), as in SB3's ``VecNormalize``.
    """
    return (reward / torch.sqrt(return_var + eps)).clamp(-clip, clip)
