"""VLM reward terms in training: a VecEnv wrapper that renders, scores and relabels.

``VLMRewardEnv`` wraps a ``TaskEnv``. Through ``TaskEnv.pre_reset_hooks`` it renders every
world's end-of-step state (before the autoreset, so a fall or a crash is seen) and hands the
frames, keyed by ``(world, step)``, to a scorer:

* ``mode=sync``: the step waits; ``scale * r`` is added to the reward and appears in
  ``info["reward_terms"][term]`` at once.
* ``mode=async``: the step returns without the term. Runners call one hook before each
  update, and the late rewards land on the transitions they belong to:

  - ``relabel_rollout(rewards)`` (PPO): ``rewards`` is the ``[T, B]`` rollout of the last
    ``T`` steps; waits for outstanding scores, adds ``scale * r`` at row ``step - (t - T)``.
  - ``relabel_replay(replay)`` (SAC): adds the scores ready so far to the replay slots of
    their steps (one slot per env step, newest at ``replay.ptr - 1``), without waiting.

Episode statistics (``info["episode"]``) count the term only in sync mode.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from robotrl.envs.base import Obs, StepResult, VecEnv
from robotrl.rewards.config import MODES, REWARD_KINDS, VLMRewardConfig
from robotrl.rewards.scorer import Scorer, Scores, make_scorer

log = logging.getLogger(__name__)


def vlm_score_fn(cfg: VLMRewardConfig, encoder: Any) -> Any:
    """``(B, H, W, 3)`` uint8 -> ``(B,)`` VLM-RM reward or CLG score, with the prompts embedded once."""
    from robotrl.rewards.vlm import clg_reward, vlm_rm_reward

    if cfg.name == "vlm_rm":
        if not cfg.goal or not cfg.baseline:
            raise ValueError('reward=vlm_rm needs reward.goal="..." and reward.baseline="..." prompts.')
        goal, baseline = encoder.encode_text([cfg.goal, cfg.baseline])
        return lambda frames: vlm_rm_reward(encoder.encode_image(frames), goal, baseline, cfg.alpha)
    if cfg.name == "clg":
        if not cfg.goal or not cfg.negative:
            raise ValueError('reward=clg needs reward.goal="<positive>" and reward.negative="<negative>" prompts.')
        text = encoder.encode_text([cfg.goal, cfg.negative, *cfg.negatives])

        def score(frames: np.ndarray) -> torch.Tensor:
            sims = encoder.encode_image(frames) @ text.T  # (N, 1 + K): the goal, then the K negatives
            return clg_reward(sims[:, 0], sims[:, 1:], cfg.threshold)

        return score
    raise KeyError(f"reward.name={cfg.name!r} has no score function; valid: vlm_rm, clg.")


class VLMRewardEnv(VecEnv):
    """Adds a VLM reward term to a ``TaskEnv`` (see module docstring).

    Args:
        env: the task env (needs ``pre_reset_hooks``, ``sim`` and ``task``).
        cfg: the reward config.
        scorer: sync or async scorer of rendered frames.

    """

    def __init__(self, env: Any, cfg: VLMRewardConfig, scorer: Scorer) -> None:
        if cfg.mode not in MODES:
            raise KeyError(f"Unknown reward.mode={cfg.mode!r}; valid: {', '.join(MODES)}.")
        self.env, self.cfg, self.scorer = env, cfg, scorer
        self.term = cfg.term or cfg.name
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.obs_dims, self.max_episode_length = env.obs_dims, env.max_episode_length
        self.device, self.step_dt = env.device, env.step_dt
        self.camera = cfg.camera or env.task.eval_camera
        self.t = 0  # env steps taken; the step being taken has index self.t
        self._arange = torch.arange(self.num_envs)
        self._context: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.late, self.on_time = 0, 0
        if cfg.name == "clg" and cfg.v_max > 0 and not (hasattr(env.task, "v_fwd") and hasattr(env.task, "factors")):
            raise ValueError(f"reward.v_max > 0 (CLG speed gating) needs a task with v_fwd and factors; "
                             f"{type(env.task).__name__} has not.")
        env.pre_reset_hooks.append(self._render_and_submit)

    # --- env ------------------------------------------------------------------------------
    def reset(self) -> Obs:
        """Reset the task env."""
        return self.env.reset()

    def _render_and_submit(self, env: Any, info: dict[str, Any]) -> None:
        if self.t % self.cfg.every:
            return
        frames = env.sim.render(self.camera, self._arange, tuple(self.cfg.image_size))
        if self.cfg.name == "clg" and self.cfg.v_max > 0:
            task = env.task
            self._context[self.t] = (task.v_fwd.detach().cpu().clone(),
                                     torch.stack(list(task.factors.values()), 1).detach().cpu().clone())
        self.scorer.submit(self._arange, torch.full((self.num_envs,), self.t), frames)

    def step(self, action: torch.Tensor) -> StepResult:
        """Step the task env; in sync mode add the scored term to the reward."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.cfg.mode == "sync":
            scores = self.scorer.collect()
            term = torch.zeros(self.num_envs, device=self.device)
            if len(scores.rewards):
                term[scores.worlds.to(self.device)] = self._values(scores).to(self.device)
            reward = reward + term
            info["reward_terms"][self.term] = term
        self.t += 1
        return obs, reward, terminated, truncated, info

    def _values(self, scores: Scores) -> torch.Tensor:
        """``scale *`` the term for each score (CLG speed gating uses the state stored at that step)."""
        r = scores.rewards
        if self.cfg.name == "clg" and self.cfg.v_max > 0:
            from robotrl.rewards.vlm import clg_speed_reward

            speed = torch.stack([self._context[int(s)][0][int(w)] for w, s in zip(scores.worlds, scores.steps,
                                                                                    strict=True)])
            factors = torch.stack([self._context[int(s)][1][int(w)] for w, s in zip(scores.worlds, scores.steps,
                                                                                      strict=True)])
            r = clg_speed_reward(r, speed, self.cfg.v_max, factors)
            for s in set(scores.steps.tolist()):
                self._context.pop(int(s), None)
        return self.cfg.scale * r

    # --- relabelling hooks ------------------------------------------------------------------
    def relabel_rollout(self, rewards: torch.Tensor) -> dict[str, float]:
        """Add late scores to a ``[T, B]`` rollout of the last ``T`` steps; waits for outstanding ones.

        Returns:
            ``vlm/late_fraction`` (scores not ready when the update began), ``vlm/mean``.

        """
        if self.cfg.mode == "sync":
            return {}
        ready = self.scorer.collect()
        rest = self.scorer.flush()
        self.on_time += len(ready.rewards)
        self.late += len(rest.rewards)
        scores = Scores.cat([ready, rest])
        T = rewards.shape[0]
        row = scores.steps - (self.t - T)
        keep = (row >= 0) & (row < T)
        if not bool(keep.all()):
            log.warning("%d VLM scores belong to steps outside this rollout; dropped", int((~keep).sum()))
        values = self._values(scores)
        rewards.index_put_((row[keep].to(rewards.device), scores.worlds[keep].to(rewards.device)),
                           values[keep].to(rewards.device), accumulate=True)
        n = max(len(scores.rewards), 1)
        return {"vlm/late_fraction": len(rest.rewards) / n, f"vlm/{self.term}_mean": float(values.mean()) if
                len(values) else 0.0}

    def relabel_replay(self, replay: Any) -> dict[str, float]:
        """Add the scores ready so far to their replay slots (``replay.reward`` ``[capacity, W]``).

        The buffer gets one slot per env step, so step ``s`` sits at slot
        ``(replay.ptr - 1 - (t - 1 - s)) mod capacity`` while ``t - 1 - s < replay.size``.
        """
        if self.cfg.mode == "sync":
            return {}
        scores = self.scorer.collect()
        age = (self.t - 1) - scores.steps
        keep = (age >= 0) & (age < replay.size)
        slot = (replay.ptr - 1 - age[keep]) % replay.capacity
        values = self._values(scores)
        replay.reward.index_put_((slot.to(replay.device), scores.worlds[keep].to(replay.device)),
                                 values[keep].to(replay.device), accumulate=True)
        return {"vlm/relabelled": float(int(keep.sum()))}

    def close(self) -> None:
        """Stop the scorer and close the task env."""
        self.scorer.close()
        self.env.close()


def wrap_vlm_rewards(env: VecEnv, cfg: VLMRewardConfig | None, encoder: Any = None) -> VecEnv:
    """``env`` itself for ``reward=none``; else the ``VLMRewardEnv`` with the configured encoder and scorer."""
    if cfg is None or cfg.name == "none":
        return env
    if cfg.name not in REWARD_KINDS:
        raise KeyError(f"Unknown reward={cfg.name!r}. Valid: {', '.join(REWARD_KINDS)}.")
    if encoder is None:
        from dataclasses import replace

        from robotrl.rewards.encoders import make_encoder

        enc_cfg = cfg.encoder if cfg.encoder.task else replace(cfg.encoder, task=env.task.cfg.name)  # type: ignore
        encoder = make_encoder(enc_cfg)
    scorer = make_scorer(vlm_score_fn(cfg, encoder), cfg.mode, cfg.batch_size, cfg.max_wait_s)
    log.info("VLM reward %r (%s, scale %.3g) from %s frames of camera %r", cfg.name, cfg.mode, cfg.scale,
             cfg.image_size, cfg.camera or "eval")
    return VLMRewardEnv(env, cfg, scorer)
