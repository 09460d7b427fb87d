"""BaseActionEnv: wraps a VecEnv around a frozen base policy, so the residual sees its action.

ResFiT runs the frozen (chunked) base policy inside the environment. Every step the
wrapper asks the base for the action of the current observation and appends it to the
observation: ``obs["policy"]`` becomes ``(N, P + A)`` = ``[task observation, base action]``,
and ``obs["base_action"]`` is the ``(N, A)`` base action alone. The agent returns the final
action (``a_base + residual``); the wrapper passes it to the env unchanged.

``info["final_obs"]["policy"]`` gets the same treatment: for worlds whose episode ended,
the base action appended is the base's stateless prediction for the pre-reset observation,
so time-outs bootstrap from a well-defined ``(s', a_base')``.

A base with ``takes_obs_dict = True`` (a VLA: ``robotrl.policies.vla.VLABase``) is given the
whole observation dict (``image``, ``instruction``, ...) instead of ``obs["policy"]``. A base
with ``feature_dim > 0`` also exposes ``features`` ``(N, F)`` of its last ``act``/``predict``
call (ResFiT's base features); they go between the task observation and the base action:
``obs["policy"]`` = ``[task observation, features, base action]``.

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
        self._dict_input = bool(getattr(self.base, "takes_obs_dict", False))
        self._feature_dim = int(getattr(self.base, "feature_dim", 0))
        self.obs_dims = {"policy": env.obs_dims["policy"] + self._feature_dim + env.num_actions}

    def _base_input(self, obs: Obs, ids: torch.Tensor | None = None) -> Any:
        if not self._dict_input:
            return obs["policy"] if ids is None else obs["policy"][ids]
        return obs if ids is None else {k: v[ids] for k, v in obs.items()}

    def _features(self) -> list[torch.Tensor]:
        return [self.base.features.clone()] if self._feature_dim else []  # type: ignore[attr-defined]

    def _wrap(self, obs: Obs, base_action: torch.Tensor, features: list[torch.Tensor]) -> Obs:
        return {"policy": torch.cat([obs["policy"], *features, base_action], dim=1), "base_action": base_action}

    def reset(self) -> Obs:
        """Reset the env and the base's chunk state."""
        obs = self.env.reset()
        self.base.reset(torch.arange(self.num_envs, device=self.device))
        base_action = self.base.act(self._base_input(obs))
        return self._wrap(obs, base_action, self._features())

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
        base_next = self.base.act(self._base_input(obs))
        features_next = self._features()
        final_policy = info["final_obs"]["policy"]
        base_final = base_next.clone()
        features_final = [f.clone() for f in features_next]
        if done_ids.numel():
            base_final[done_ids] = self.base.predict(self._base_input(info["final_obs"], done_ids))
            for full, rows in zip(features_final, self._features(), strict=True):
                full[done_ids] = rows
        info = {
            **info,
            "success": success,
            "final_obs": {"policy": torch.cat([final_policy, *features_final, base_final], dim=1)},
        }
        return self._wrap(obs, base_next, features_next), reward, terminated, truncated, info

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()
