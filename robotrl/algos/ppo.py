"""PPO for massively parallel envs (rsl_rl-style).

GAE with time-out bootstrapping, clipped surrogate and value losses, entropy bonus,
adaptive-KL learning rate, running observation normalization and mini-batch epochs.
The math lives in ``robotrl.algos.functional``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from robotrl.algos import functional as F
from robotrl.algos.base import Algorithm
from robotrl.policies.mlp import ActorCritic
from robotrl.policies.normalizer import RunningNorm
from robotrl.storage.checkpoint import optimizer_tensors, prefixed, restore_optimizer, strip
from robotrl.storage.rollout import RolloutStorage

SCHEDULES = ("adaptive", "fixed")


@dataclass
class PPOConfig:
    """PPO hyperparameters.

    Attributes:
        name: registered algorithm name.
        num_steps: rollout horizon per world before each update.
        num_epochs: passes over the rollout per update.
        num_minibatches: mini-batches per epoch.
        gamma: discount.
        lam: GAE lambda.
        clip: surrogate ratio clip.
        value_clip: value-loss clip (negative disables it).
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        lr: initial Adam learning rate.
        schedule: ``adaptive`` (KL-driven lr) or ``fixed``.
        desired_kl: KL target of the adaptive schedule.
        lr_min: floor of the adaptive schedule's step size.
        lr_max: ceiling of the adaptive schedule's step size (rsl_rl's 1e-2; a lower cap keeps a
            quiet stretch of small KLs from growing the rate into a destructive update).
        max_grad_norm: global gradient-norm clip.
        normalize_advantages: per mini-batch advantage normalization.
        normalize_rewards: divide rewards by the running std of each world's discounted return
            (what SB3's ``VecNormalize`` does), so that values and returns are O(1) whatever the
            task's reward scale; the absolute ``value_clip`` assumes that.

    """

    name: str = "ppo"
    num_steps: int = 24
    num_epochs: int = 5
    num_minibatches: int = 4
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_clip: float = 0.2
    value_coef: float = 1.0
    entropy_coef: float = 0.005
    lr: float = 1.0e-3
    schedule: str = "adaptive"
    desired_kl: float = 0.01
    lr_min: float = 1.0e-5
    lr_max: float = 1.0e-2
    max_grad_norm: float = 1.0
    normalize_advantages: bool = True
    normalize_rewards: bool = False


class PPO(Algorithm):
    """Proximal policy optimization over a ``[num_steps, B]`` rollout (see ``Algorithm``)."""

    policy: ActorCritic

    def __init__(self, policy: ActorCritic, cfg: PPOConfig, num_envs: int, device: torch.device) -> None:
        if cfg.schedule not in SCHEDULES:
            raise ValueError(f"Unknown algo.schedule={cfg.schedule!r}; valid: {', '.join(SCHEDULES)}.")
        if cfg.schedule == "adaptive" and not 0.0 < cfg.lr_min <= cfg.lr <= cfg.lr_max:
            raise ValueError(f"PPO needs 0 < algo.lr_min <= algo.lr <= algo.lr_max, got lr_min={cfg.lr_min}, "
                             f"lr={cfg.lr}, lr_max={cfg.lr_max}; set the bounds around the initial rate.")
        self.cfg = cfg
        self.policy = policy.to(device)
        self.device = device
        self.lr = cfg.lr
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr)
        self.storage = RolloutStorage(
            cfg.num_steps, num_envs, policy.obs_dim, policy.critic_dim, policy.action_dim, device
        )
        self._pending: dict[str, torch.Tensor] = {}
        self.return_norm = RunningNorm(1).to(device)
        self._discounted_return = torch.zeros(num_envs, device=device)

    @staticmethod
    def _critic_obs(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return obs.get("critic", obs["policy"])

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Sample actions and remember obs, log-probs and values for ``process_step``."""
        critic_obs = self._critic_obs(obs)
        action, log_prob = self.policy.act(obs["policy"])
        self._pending = {
            "obs": obs["policy"], "critic_obs": critic_obs, "actions": action,
            "log_probs": log_prob, "values": self.policy.evaluate(critic_obs),
        }
        return action

    @torch.no_grad()
    def process_step(
        self,
        obs: dict[str, torch.Tensor],
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        info: dict[str, Any],
    ) -> None:
        """Store the transition (reward scaled if ``normalize_rewards``); value time-outs' final obs."""
        if self.cfg.normalize_rewards:
            self._discounted_return = self._discounted_return * self.cfg.gamma + reward
            self.return_norm.update(self._discounted_return[:, None])
            reward = F.scale_by_return_std(reward, self.return_norm.var[0])
            self._discounted_return[terminated | truncated] = 0.0
        final_values = torch.zeros_like(reward)
        if truncated.any():
            final_values = self.policy.evaluate(self._critic_obs(info["final_obs"]))
        self.storage.add(
            **self._pending, rewards=reward, dones=terminated | truncated,
            truncated=truncated & ~terminated, final_values=final_values,
        )

    def ready(self) -> bool:
        """True when the rollout horizon is full."""
        return self.storage.step >= self.cfg.num_steps

    def update(self, obs: dict[str, torch.Tensor]) -> dict[str, float]:
        """GAE, then ``num_epochs x num_minibatches`` clipped PPO steps; clears the rollout.

        Returns mean losses and KL over the mini-batches, ``lr`` (the step size the next update
        starts from), ``lr_mean`` (the mean step size taken; under ``schedule=adaptive`` the
        rate moves within an update, so ``lr`` alone can read the floor while most steps were larger)
        and ``action_std`` (the mean std of the actions the mini-batches were scored with, in the
        env's ``[-1, 1]`` units, for the Gaussian and the Beta head alike). After each step the
        Gaussian std is projected onto ``policy.max_std`` when that is set.
        """
        s, c = self.storage, self.cfg
        with torch.no_grad():
            last_values = self.policy.evaluate(self._critic_obs(obs))
            rewards = F.bootstrap_timeouts(s.rewards, s.truncated, s.final_values, c.gamma)
            adv, ret = F.compute_gae(rewards, s.values, s.dones, last_values, c.gamma, c.lam)
            s.set_returns(adv, ret)
        totals = {"loss/policy": 0.0, "loss/value": 0.0, "loss/entropy": 0.0, "kl": 0.0, "lr_mean": 0.0,
                  "action_std": 0.0}
        n = 0
        value_clip = c.value_clip if c.value_clip > 0 else None
        for batch in s.minibatches(c.num_minibatches, c.num_epochs):
            dist = self.policy.distribution(batch["obs"])
            sample = self.policy.from_action(batch["actions"])
            log_prob = dist.log_prob(sample).sum(-1)
            entropy = dist.entropy().sum(-1)
            values = self.policy.evaluate(batch["critic_obs"])
            advantages = F.normalize(batch["advantages"]) if c.normalize_advantages else batch["advantages"]
            with torch.no_grad():
                kl = float(F.approx_kl(batch["log_probs"], log_prob))
            if c.schedule == "adaptive":
                self.lr = F.adaptive_lr(self.lr, kl, c.desired_kl, lr_min=c.lr_min, lr_max=c.lr_max)
                for group in self.optimizer.param_groups:
                    group["lr"] = self.lr
            loss, metrics = F.ppo_loss(
                log_prob, batch["log_probs"], advantages, values, batch["values"], batch["returns"], entropy,
                c.clip, value_clip, c.value_coef, c.entropy_coef,
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
            self.optimizer.step()
            self.policy.clamp_std()
            for key, metric in metrics.items():
                totals[key] += metric.item()
            totals["kl"] += kl
            totals["action_std"] += float(self.policy.action_std(dist).detach().mean())
            totals["lr_mean"] += self.lr
            n += 1
        # Normalizer statistics move only between iterations: during the rollout and the
        # update they are fixed, so stored log-probs and values match what the update sees.
        self.policy.update_normalizers(s.obs.flatten(0, 1), s.critic_obs.flatten(0, 1))
        s.clear()
        stats = {k: v / max(n, 1) for k, v in totals.items()}
        stats["lr"] = self.lr
        return stats

    # --- checkpointing -------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Policy weights, normalizers, Adam state and the reward scale's return statistics."""
        optim, _ = optimizer_tensors(self.optimizer)
        returns = {**self.return_norm.state_dict(), "discounted": self._discounted_return}
        return {**prefixed(self.policy.state_dict(), "policy"), **prefixed(optim, "optim"),
                **prefixed(returns, "return_norm")}

    def policy_meta(self) -> dict[str, Any]:
        """Shapes and settings of the actor-critic (``robotrl.policies.io.policy_from_meta``)."""
        p = self.policy
        return {"kind": "actor_critic", "obs_dim": p.obs_dim, "critic_dim": p.critic_dim,
                "action_dim": p.action_dim, "config": asdict(p.cfg)}

    def state_meta(self) -> dict[str, Any]:
        """Learning rate and optimizer hyperparameters."""
        _, groups = optimizer_tensors(self.optimizer)
        return {"lr": self.lr, "optim": groups}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Restore weights, normalizers, Adam state and the adaptive learning rate."""
        self.policy.load_state_dict(strip(tensors, "policy"))
        algo_meta = meta.get("algo_state", {})
        if "optim" in algo_meta:
            restore_optimizer(self.optimizer, strip(tensors, "optim"), algo_meta["optim"])
        self.lr = algo_meta.get("lr", self.lr)
        returns = strip(tensors, "return_norm")
        if returns:
            self._discounted_return.copy_(returns.pop("discounted"))
            self.return_norm.load_state_dict(returns)
