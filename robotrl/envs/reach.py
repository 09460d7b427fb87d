"""PointReach: a tiny pure-torch VecEnv for fast algorithm tests and benchmarks.

A point in ``[-1, 1]^d`` moves by ``step_size * action`` each step (velocity control) and
must come within ``radius`` of a goal. Reaching the goal is a success and ends the episode;
otherwise the episode times out after ``max_episode_length`` steps. There is no physics
engine, so thousands of worlds step in microseconds and an algorithm's learning can be
checked in seconds.

Observation ``policy`` ``(N, 2d)``: ``[position, goal - position]``. Reward: ``dense``
gives ``-|goal - position|`` per step plus 1 on success; ``sparse`` gives 1 on success only
(ResFiT). ``info["success"]`` ``(N,)`` flags the worlds that succeeded this step.
``scripted_action()`` is the optimal proportional controller, for ``robotrl collect``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from robotrl.envs.base import Obs, StepResult, VecEnv

REWARDS = ("dense", "sparse")


@dataclass
class ReachConfig:
    """PointReach settings.

    Attributes:
        num_envs: worlds ``N``.
        dim: workspace dimension ``d`` (action size).
        radius: success distance.
        step_size: largest move per step (at ``|action| = 1``).
        max_episode_length: steps before a time-out.
        reward: ``dense`` or ``sparse``.
        action_bias: constant added to every action by the "plant" (a miscalibrated actuator);
            0 in the plain task.

    """

    num_envs: int = 64
    dim: int = 2
    radius: float = 0.05
    step_size: float = 0.1
    max_episode_length: int = 50
    reward: str = "dense"
    action_bias: float = 0.0


class PointReach(VecEnv):
    """Point-mass reaching (see module docstring); every tensor on ``device``."""

    def __init__(self, cfg: ReachConfig, device: torch.device | str = "cpu", seed: int = 0) -> None:
        if cfg.reward not in REWARDS:
            raise ValueError(f"Unknown reach reward {cfg.reward!r}; valid: {', '.join(REWARDS)}.")
        self.cfg = cfg
        self.device = torch.device(device)
        self.num_envs, self.num_actions = cfg.num_envs, cfg.dim
        self.max_episode_length = cfg.max_episode_length
        self.step_dt = 0.05
        self.obs_dims = {"policy": 2 * cfg.dim}
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        n, d = cfg.num_envs, cfg.dim
        self.pos = torch.zeros(n, d, device=self.device)
        self.goal = torch.zeros(n, d, device=self.device)
        self.episode_step = torch.zeros(n, dtype=torch.long, device=self.device)
        self.episode_return = torch.zeros(n, device=self.device)

    def _uniform(self, k: int, low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(k, self.cfg.dim, generator=self.gen, device=self.device)

    def _reset_ids(self, ids: torch.Tensor) -> None:
        self.pos[ids] = self._uniform(ids.numel(), -0.9, 0.9)
        self.goal[ids] = self._uniform(ids.numel(), -0.9, 0.9)
        self.episode_step[ids] = 0
        self.episode_return[ids] = 0.0

    def _observe(self) -> Obs:
        return {"policy": torch.cat([self.pos, self.goal - self.pos], dim=1)}

    def reset(self) -> Obs:
        """Reset every world."""
        self._reset_ids(torch.arange(self.num_envs, device=self.device))
        return self._observe()

    def scripted_action(self) -> torch.Tensor:
        """Optimal ``(N, d)`` action: head to the goal at full speed, slowing inside one step."""
        return ((self.goal - self.pos) / self.cfg.step_size).clamp(-1.0, 1.0)

    def step(self, action: torch.Tensor) -> StepResult:
        """Move, score, and autoreset finished worlds (see ``robotrl.envs.base``)."""
        if action.shape != (self.num_envs, self.num_actions):
            raise ValueError(
                f"action must have shape ({self.num_envs}, {self.num_actions}), got {tuple(action.shape)}."
            )
        action = action.to(self.device).clamp(-1.0, 1.0)
        move = (action + self.cfg.action_bias).clamp(-1.0, 1.0)
        self.pos = (self.pos + self.cfg.step_size * move).clamp(-1.0, 1.0)
        self.episode_step += 1
        dist = (self.goal - self.pos).norm(dim=1)
        success = dist < self.cfg.radius
        reward = success.float()
        if self.cfg.reward == "dense":
            reward = reward - dist
        terminated = success
        truncated = (self.episode_step >= self.max_episode_length) & ~terminated
        self.episode_return += reward
        final_obs = self._observe()
        info: dict[str, Any] = {
            "final_obs": final_obs,
            "success": success,
            "sim_resets": 0,
            "reward_terms": {},
        }
        done_ids = (terminated | truncated).nonzero().squeeze(1)
        if done_ids.numel():
            info["episode"] = {
                "return": self.episode_return[done_ids].clone(),
                "length": self.episode_step[done_ids].float(),
                "success": success[done_ids].float(),
            }
            self._reset_ids(done_ids)
        return self._observe(), reward, terminated, truncated, info
