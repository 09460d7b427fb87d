"""Expose a robotrl VecEnv to other libraries: gymnasium ``VectorEnv`` and SB3 ``VecEnv``.

Both present the ``policy`` observation as a flat ``Box`` and numpy arrays, and keep the
env's same-step autoreset: the observation returned for a finished world is already the
first of its next episode, and the last one is in the info (gymnasium ``final_obs``
with ``AutoresetMode.SAME_STEP``; SB3 ``terminal_observation`` with ``TimeLimit.truncated``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from robotrl.envs.base import VecEnv


def _spaces(env: VecEnv) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    obs = gym.spaces.Box(-np.inf, np.inf, (env.obs_dims["policy"],), np.float32)
    act = gym.spaces.Box(-1.0, 1.0, (env.num_actions,), np.float32)
    return obs, act


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


class GymVectorEnv(gym.vector.VectorEnv):
    """gymnasium ``VectorEnv`` view of a robotrl VecEnv (same-step autoreset)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env: VecEnv) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space, self.single_action_space = _spaces(env)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every world; ``seed`` reseeds the env's generator."""
        if seed is not None and hasattr(self.env, "gen"):
            self.env.gen.manual_seed(seed)
        return _np(self.env.reset()["policy"]), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step with ``(N, A)`` numpy actions; numpy outputs."""
        action = torch.as_tensor(np.asarray(actions), dtype=torch.float32, device=self.env.device)
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = _np(terminated | truncated)
        out: dict[str, Any] = {}
        if done.any():
            out["final_obs"] = np.where(done[:, None], _np(info["final_obs"]["policy"]), np.nan)
            out["_final_obs"] = done
        return _np(obs["policy"]), _np(reward), _np(terminated), _np(truncated), out

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped env."""
        self.env.close()


def make_sb3_vec_env(env: VecEnv) -> Any:
    """An SB3 ``VecEnv`` over ``env`` (needs ``pip install robotrl[sb3]``)."""
    try:
        from stable_baselines3.common.vec_env import VecEnv as SB3VecEnv
    except ImportError as err:
        raise ImportError("The SB3 adapter needs stable-baselines3: pip install 'robotrl[sb3]'") from err

    class SB3Adapter(SB3VecEnv):
        """SB3 view of a robotrl VecEnv; episode statistics come as ``info["episode"]``."""

        def __init__(self, inner: VecEnv) -> None:
            self.env = inner
            self.render_mode = None
            obs_space, act_space = _spaces(inner)
            super().__init__(inner.num_envs, obs_space, act_space)
            self._actions: torch.Tensor | None = None

        def reset(self) -> np.ndarray:
            return _np(self.env.reset()["policy"])

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = torch.as_tensor(np.asarray(actions), dtype=torch.float32, device=self.env.device)

        def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
            if self._actions is None:
                raise RuntimeError("step_wait() called before step_async(actions).")
            obs, reward, terminated, truncated, info = self.env.step(self._actions)
            done = _np(terminated | truncated)
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            ids = np.flatnonzero(done)
            if ids.size:
                final = _np(info["final_obs"]["policy"])
                trunc = _np(truncated & ~terminated)
                ep = info.get("episode", {})
                ep_ret = _np(ep["return"]) if "return" in ep else None
                ep_len = _np(ep["length"]) if "length" in ep else None
                for j, i in enumerate(ids):
                    infos[i]["terminal_observation"] = final[i]
                    infos[i]["TimeLimit.truncated"] = bool(trunc[i])
                    if ep_ret is not None and ep_len is not None:
                        infos[i]["episode"] = {"r": float(ep_ret[j]), "l": int(ep_len[j]), "t": 0.0}
            return _np(obs["policy"]), _np(reward), done, infos

        def close(self) -> None:
            self.env.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            owner = self.env if hasattr(self.env, attr_name) else self
            return [getattr(owner, attr_name)] * len(self._indices(indices))

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            setattr(self.env, attr_name, value)

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
            return [getattr(self.env, method_name)(*args, **kwargs)]

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False] * len(self._indices(indices))

        def seed(self, seed: int | None = None) -> Sequence[None | int]:
            if seed is not None and hasattr(self.env, "gen"):
                self.env.gen.manual_seed(seed)
            return [seed] * self.num_envs

        def _indices(self, indices: Any) -> list[int]:
            if indices is None:
                return list(range(self.num_envs))
            return [indices] if isinstance(indices, int) else list(indices)

    return SB3Adapter(env)
