"""BaseActionEnv: wraps a VecEnv around a frozen base policy, so the residual sees its action.

ResFiT runs the frozen (chunked) base policy inside the environment. Every step the
wrapper asks the base for the action of the current observation and appends it to the
observation: ``obs["policy"]`` becomes ``(N, P + A)`` = ``[task observation, base action]``,
and ``obs["base_action"]`` is the ``(N, A)`` base action alone. The agent returns the final
action (``a_base + residual``); the wrapper passes it to the env unchanged.

``info["final_obs"]["policy"]`` gets the same treatment: for worlds whose episode ended,
the base action appended is the base's stateless prediction for the pre-reset observation,
so time-outs bootstrap from a well-defined ``(s', a_base')``.

With ``reward="sparse"`` the reward is ResFiT's: 1 on the step the task reports success, 0
otherwise (the task is expected to end the episode on success). Success comes from
``info["success"]`` when the env provides it, else from ``TaskEnv.task.success()`` (with
``info["episode"]["success"]`` for worlds reset this step).
"""

from __future__ import annotations

from typing import Any

import torch

from robotrl.envs.base import Obs, StepResult, VecEnv
from robotrl.policies.frozen import FrozenPolicy, ZeroPolicy

REWARDS = ("sparse", "env")


def step_success(env: VecEnv, info: dict[str, Any], done: torch.Tensor) -> torch.Tensor:
    """``(N,)`` bool: worlds that were in a success state at the end of this step (pre-reset).

    Raises:
        ValueError: the env reports no success signal.

    """
    if "success" in info:
        return info["success"].bool()
    task = getattr(env, "task", None)
    if task is None:
        raise ValueError(
            f"{type(env).__name__} reports no success: put a (N,) bool info['success'] in step(), "
            "or use algo.reward=env."
        )
    success = task.success().clone()
    done_ids = done.nonzero().squeeze(1)
    if done_ids.numel() and "episode" in info:
        success[done_ids] = info["episode"]["success"].bool()
    return success


class BaseActionEnv(VecEnv):
    """``env`` with the base policy's action appended to the observation (see module docstring).

    Args:
        env: the task's VecEnv.
        base: the frozen base policy (None: zero base action, the RLPD baseline).
        reward: ``sparse`` (1 at success) or ``env`` (the task's own reward).

    """

    def __init__(self, env: VecEnv, base: FrozenPolicy | None, reward: str = "sparse") -> None:
        if reward not in REWARDS:
            raise ValueError(f"Unknown residual reward {reward!r}; valid: {', '.join(REWARDS)}.")
        self.env = env
        self.base = base if base is not None else ZeroPolicy(env.num_actions)
        if self.base.action_dim != env.num_actions:
            raise ValueError(
                f"Base policy acts in {self.base.action_dim} dimensions but the env has {env.num_actions}; "
                "pass a base trained on this task."
            )
        self.reward_mode = reward
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.max_episode_length, self.device, self.step_dt = env.max_episode_length, env.device, env.step_dt
        self.obs_dims = {"policy": env.obs_dims["policy"] + env.num_actions}

    def _wrap(self, obs: Obs, base_action: torch.Tensor) -> Obs:
        return {"policy": torch.cat([obs["policy"], base_action], dim=1), "base_action": base_action}

    def reset(self) -> Obs:
        """Reset the env and the base's chunk state."""
        obs = self.env.reset()
        self.base.reset(torch.arange(self.num_envs, device=self.device))
        return self._wrap(obs, self.base.act(obs["policy"]))

    def step(self, action: torch.Tensor) -> StepResult:
        """Step with the final ``(N, A)`` action; see the module docstring for the outputs."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = terminated | truncated
        success = step_success(self.env, info, done)
        if self.reward_mode == "sparse":
            reward = success.float()
        done_ids = done.nonzero().squeeze(1)
        if done_ids.numel():
            self.base.reset(done_ids)
        base_next = self.base.act(obs["policy"])
        final_policy = info["final_obs"]["policy"]
        base_final = base_next.clone()
        if done_ids.numel():
            base_final[done_ids] = self.base.predict(final_policy[done_ids])
        info = {
            **info,
            "success": success,
            "final_obs": {"policy": torch.cat([final_policy, base_final], dim=1)},
        }
        return self._wrap(obs, base_next), reward, terminated, truncated, info

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()
