"""TaskEnv: the generic VecEnv that runs any registered task on any BatchSim backend.

It owns what every task shares: per-world autoreset, time-outs kept apart from
terminations, episode statistics, the reward sum over named terms, action delay and
observation noise (domain-randomization plumbing), and recovery of worlds whose physics
failed. Tasks own the model, observations, reward terms and randomizers.

Non-finite values that come from *task code* (a reward term or an observation going NaN
or Inf in a world whose physics is fine) are never silently zeroed: the world is reset like
a failed simulation (reward 0, ``terminated``), counted per name and per world in
``info["nan_reward"]`` / ``info["nan_obs"]``, and once a name's count passes
``task.nan_max_count`` world-steps *and* ``task.nan_max_fraction`` of all world-steps the env
raises ``FloatingPointError`` naming it: a task bug stops the run instead of training on zeros.

Calibrated dynamics (``task.dynamics=<physics.yaml>``, ``robotrl.twin.physics``): the file's
multipliers are compiled into the task's model before the sim is built, so every per-world field
a task derives from ``sim.model`` starts from the calibrated values. With ``task.dynamics_mode=center``
the task's randomizers scale those values and the action delay is drawn from ``action_delay_max + 1``
values around the calibrated ``delay_steps``; with ``nominal`` the ``randomize`` hook is not called and
every world has the calibrated delay.

``env.pre_reset_hooks``: callables ``hook(env, info)`` run every step after physics and the
reward, before the autoreset, so they see the end-of-step state of every world, including those
about to be reset (``robotrl.rewards.env`` renders the frames it scores here). They may add keys to ``info``.
Like the rest of ``step`` and ``reset``, they run under ``torch.no_grad()``: the env records no autograd
graph (that saves per-op autograd bookkeeping on every step).

Images and instructions (VLA tasks): with ``image_size=(H, W)`` the env renders every world
from the task's ``image_camera`` (else its ``eval_camera``) with the lean settings of
``robotrl.sim.render`` into ``obs["image"]`` ``(N, H, W, 3)`` uint8; after an autoreset only
the reset worlds are rendered again. A task with ``instructions`` (list of texts) and
``instruction_ids()`` adds ``obs["instruction"]`` ``(N,)`` int64 indices into
``env.instructions``; ``instruction_embeddings(encoder)`` embeds that list once and caches it
(``robotrl.envs.instructions``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import torch

from robotrl.envs.base import Obs, StepResult, VecEnv
from robotrl.sim.backend import SimConfig, default_device, make_sim
from robotrl.tasks import TaskConfig, task_class

log = logging.getLogger(__name__)


class TaskEnv(VecEnv):
    """Batched env over ``sim.num_envs`` worlds of task ``task_cfg.name`` (see ``VecEnv``)."""

    def __init__(self, task_cfg: TaskConfig, sim_cfg: SimConfig, seed: int = 0,
                 image_size: tuple[int, int] | None = None) -> None:
        self.device = default_device(sim_cfg)
        self.num_envs = sim_cfg.num_envs
        self.task = task_class(task_cfg.name)(task_cfg, self.num_envs, self.device)
        self.cfg = task_cfg
        model = self.task.build_model()
        self.physics = None
        if task_cfg.dynamics or task_cfg.dynamics_mode != "center":
            from robotrl.twin.physics import model_with, task_dynamics

            self.physics = task_dynamics(task_cfg.dynamics, task_cfg.dynamics_mode)
            model = model_with(model, self.physics) if self.physics is not None else model
        self.sim = make_sim(model, sim_cfg)
        self.task.setup(self.sim)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        self.num_actions = self.task.action_dim
        self.step_dt = float(self.sim.model.opt.timestep * task_cfg.frame_skip)
        self.max_episode_length = max(1, round(task_cfg.episode_length_s / self.step_dt))
        n, dev = self.num_envs, self.device
        self.episode_step = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_return = torch.zeros(n, dtype=torch.float32, device=dev)
        self._term_names: tuple[str, ...] = ()
        self._term_scales = torch.zeros(0, 1, device=dev)
        self._episode_terms = torch.zeros(0, n, device=dev)
        self._episode_term_rows = self._episode_terms.unbind(0)  # views, for ``_finish_episodes``' one stack
        self.total_sim_resets = 0
        self.total_nan_resets = 0
        self.nan_counts: dict[str, int] = {}
        self._world_steps = 0
        self._base_delay = self.physics.delay_steps if self.physics is not None else 0
        delay_slots = self._base_delay + task_cfg.action_delay_max + 1
        # Ring buffer of the last ``delay_slots`` actions (no copy of the history per step): the
        # action of ``d`` steps ago is in slot ``(head + d) % delay_slots``.
        self._action_hist = torch.zeros(delay_slots, n, self.num_actions, device=dev)
        self._hist_slots = self._action_hist.unbind(0)
        self._head = 0
        self._delay = torch.zeros(n, dtype=torch.long, device=dev)
        self._arange = torch.arange(n, device=dev)
        self._obs: Obs = {}
        self.pre_reset_hooks: list[Callable[[TaskEnv, dict[str, Any]], None]] = []
        self.image_size = tuple(image_size) if image_size else None
        self.camera = getattr(self.task, "image_camera", self.task.eval_camera)
        self.instructions: list[str] = list(getattr(self.task, "instructions", []))
        self.obs_dims = {k: int(v.shape[1]) for k, v in self.reset().items() if v.ndim == 2}

    # ------------------------------------------------------------------------------
    @torch.no_grad()
    def reset(self) -> Obs:
        """Reset every world (new initial states, new randomization)."""
        self._reset_ids(self._arange)
        self._obs = self._observe()
        return self._obs

    @torch.no_grad()
    def step(self, action: torch.Tensor) -> StepResult:
        """One control step for all worlds; see ``robotrl.envs.base`` for the outputs."""
        if action.shape != (self.num_envs, self.num_actions):
            raise ValueError(
                f"action must have shape ({self.num_envs}, {self.num_actions}), got {tuple(action.shape)}."
            )
        action = torch.nan_to_num(action.to(self.device, torch.float32)).clamp_(-1.0, 1.0)
        applied = self._delayed(action)
        self.task.apply_action(applied)
        invalid = self.sim.step(self.cfg.frame_skip)
        self.task.update(self.gen)
        self.episode_step += 1

        scaled = self._scale_terms(self.task.reward_terms(applied))  # (K, N)
        terminated = self.task.terminated()
        truncated = self.episode_step >= self.max_episode_length
        if invalid.numel():
            scaled[:, invalid] = 0.0
            terminated[invalid] = True
            truncated[invalid] = False
            self.total_sim_resets += int(invalid.numel())
            log.warning("reset %d world(s) whose physics failed: %s", invalid.numel(), invalid.tolist()[:8])
        obs = self._observe()
        info: dict[str, Any] = {"sim_resets": int(invalid.numel())}
        self._world_steps += self.num_envs
        if not self._all_finite(obs, scaled):
            self._reset_non_finite(scaled, obs, invalid, terminated, truncated, info)
        reward = scaled.sum(0)

        self.episode_return += reward
        self._episode_terms += scaled
        done = terminated | truncated
        info["reward_terms"] = dict(zip(self._term_names, scaled.unbind(0), strict=True))
        info["final_obs"] = obs
        for hook in self.pre_reset_hooks:
            hook(self, info)
        done_ids = done.nonzero().squeeze(1)
        if done_ids.numel():
            info["episode"] = self._finish_episodes(done_ids)
            self._reset_ids(done_ids)
            obs = self._observe(render_ids=done_ids, previous=obs)
            if not self._all_finite(obs):
                self._count_reset_obs(obs, done_ids, info)
        self._obs = obs
        return obs, reward, terminated, truncated, info

    # ------------------------------------------------------------------------------
    @staticmethod
    def _all_finite(obs: Obs, scaled: torch.Tensor | None = None) -> bool:
        """Whether every float observation (and ``scaled``) is finite: one host sync for all of them.

        A NaN or Inf entry makes its tensor's sum non-finite, and so the sum of the sums (added in
        float64, so that finite sums do not overflow there).
        """
        sums = [v.sum() for v in obs.values() if v.is_floating_point()]
        if scaled is not None:
            sums.append(scaled.sum())
        if not sums:
            return True
        total = sums[0] if len(sums) == 1 else torch.stack(sums).sum(dtype=torch.float64)
        return math.isfinite(total.item())

    def _count_reset_obs(self, obs: Obs, ids: torch.Tensor, info: dict[str, Any]) -> None:
        """Non-finite observations of freshly reset worlds ``ids``: counted as ``obs/<name>``, replaced by 0."""
        fresh = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        fresh[ids] = True
        for k, v in obs.items():
            if not v.is_floating_point():
                continue
            mask = ~torch.isfinite(v.reshape(self.num_envs, -1)).all(1) & fresh
            if bool(mask.any()):
                info.setdefault("nan_obs", {})[k] = info.get("nan_obs", {}).get(k, mask) | mask
                self.nan_counts["obs/" + k] = self.nan_counts.get("obs/" + k, 0) + int(mask.sum())
                obs[k] = torch.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
        log.warning("task %r gave non-finite observations right after reset in worlds %s", self.cfg.name,
                    ids.tolist()[:8])
        self._check_nan_limit()

    def _check_nan_limit(self) -> None:
        limit = max(self.cfg.nan_max_count, self.cfg.nan_max_fraction * self._world_steps)
        over = {k: c for k, c in self.nan_counts.items() if c > limit}
        if over:
            raise FloatingPointError(
                f"Task {self.cfg.name!r} produced non-finite values in {over} world-steps out of "
                f"{self._world_steps} (limit {limit:.0f}): a bug in the task's "
                + ", ".join(("reward term " if k.startswith("reward/") else "observation ") + repr(k.split("/", 1)[1])
                            for k in over)
                + ". Worlds with physics failures are not counted here; raise task.nan_max_count to tolerate it."
            )

    def _reset_non_finite(self, scaled: torch.Tensor, obs: Obs, invalid: torch.Tensor, terminated: torch.Tensor,
                          truncated: torch.Tensor, info: dict[str, Any]) -> None:
        """Count NaN/Inf reward terms ``(K, N)`` and observations per name and world, end those worlds.

        Worlds whose physics failed (``invalid``) are already being reset and are not counted
        here. Non-finite observation entries are replaced by 0 in ``obs`` so that ``final_obs`` never feeds
        NaN to a normalizer; the world is terminated, so nothing bootstraps from that row.
        """
        healthy = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        healthy[invalid] = False
        bad_reward = {name: ~torch.isfinite(row) & healthy for name, row in zip(self._term_names, scaled, strict=True)}
        bad_obs = {k: ~torch.isfinite(v.reshape(self.num_envs, -1)).all(1) & healthy
                   for k, v in obs.items() if v.is_floating_point()}
        info["nan_reward"] = {k: m for k, m in bad_reward.items() if bool(m.any())}
        info["nan_obs"] = {k: m for k, m in bad_obs.items() if bool(m.any())}
        worlds = torch.zeros_like(healthy)
        for prefix, masks in (("reward/", info["nan_reward"]), ("obs/", info["nan_obs"])):
            for name, mask in masks.items():
                worlds |= mask
                self.nan_counts[prefix + name] = self.nan_counts.get(prefix + name, 0) + int(mask.sum())
        for k, v in obs.items():
            if v.is_floating_point():
                obs[k] = torch.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
        scaled.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        scaled[:, worlds] = 0.0
        terminated |= worlds
        truncated &= ~worlds
        count = int(worlds.sum())
        info["nan_resets"] = count
        self.total_nan_resets += count
        if count:
            log.warning("reset %d world(s) with non-finite task values: %s", count,
                        sorted(f"{p}{k}" for p, m in (("reward/", info["nan_reward"]), ("obs/", info["nan_obs"]))
                               for k in m))
        self._check_nan_limit()

    def _delayed(self, action: torch.Tensor) -> torch.Tensor:
        """The action each world applies now: its own from ``_delay[i]`` steps ago (0 before its episode)."""
        slots = len(self._hist_slots)
        if slots == 1:
            return action
        self._head = (self._head - 1) % slots
        self._hist_slots[self._head].copy_(action)
        return self._action_hist[(self._delay + self._head) % slots, self._arange]

    def _scale_terms(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(K, N)`` scaled terms, rows in ``self._term_names`` order (one stack, one multiply)."""
        names = tuple(terms)
        if names != self._term_names:
            scales = self.cfg.reward_scales
            missing = sorted(set(terms) - set(scales))
            if missing:
                raise KeyError(
                    f"Task {self.cfg.name!r} has reward terms without a scale: {missing}. "
                    f"Add them to task.reward_scales (known: {sorted(scales)})."
                )
            self._term_names = names
            self._term_scales = torch.tensor([scales[n] for n in names], device=self.device).unsqueeze(1)
            self._episode_terms = torch.zeros(len(names), self.num_envs, device=self.device)
            self._episode_term_rows = self._episode_terms.unbind(0)
        return torch.stack([terms[n] for n in names]).float() * self._term_scales

    def _observe(self, render_ids: torch.Tensor | None = None, previous: Obs | None = None) -> Obs:
        """Task observation plus ``image`` (worlds ``render_ids`` re-rendered over ``previous``) and ``instruction``."""
        obs = dict(self.task.observe())
        if self.image_size is not None:
            if render_ids is None or previous is None:
                obs["image"] = self._render(self._arange)
            else:
                obs["image"] = previous["image"].clone()
                obs["image"][render_ids] = self._render(render_ids)
        if self.instructions:
            obs["instruction"] = self.task.instruction_ids().clone()
        if self.cfg.obs_noise_std > 0:
            if render_ids is None or previous is None:
                noise = torch.randn(obs["policy"].shape, generator=self.gen, device=self.device)
                obs["policy"] = obs["policy"] + self.cfg.obs_noise_std * noise
            else:  # only the reset worlds get a new draw; the others keep the one ``final_obs`` holds
                fresh = obs["policy"][render_ids]
                noise = torch.randn(fresh.shape, generator=self.gen, device=self.device)
                obs["policy"] = previous["policy"].clone()
                obs["policy"][render_ids] = fresh + self.cfg.obs_noise_std * noise
        return obs

    @torch.no_grad()
    def reset_groups(self, group_size: int) -> Obs:
        """Reset every world, then make each block of ``group_size`` worlds a copy of its first world.

        GRPO's groups: ``G`` rollouts of one task instance from one reset state, side by side
        in the batch (worlds ``g*G .. g*G+G-1``). Needs the task's ``copy_worlds(src, dst)``.

        Raises:
            ValueError: ``num_envs`` is not a multiple of ``group_size``.
            NotImplementedError: the task cannot copy world state.

        """
        if self.num_envs % group_size:
            raise ValueError(f"num_envs={self.num_envs} is not a multiple of group_size={group_size}.")
        if not hasattr(self.task, "copy_worlds"):
            raise NotImplementedError(f"Task {self.cfg.name!r} has no copy_worlds(src, dst): no same-state groups.")
        self._reset_ids(self._arange)
        src = torch.div(self._arange, group_size, rounding_mode="floor") * group_size
        dst = (self._arange != src).nonzero().squeeze(1)
        self.task.copy_worlds(src[dst], dst)
        self._delay[dst] = self._delay[src[dst]]
        self._obs = self._observe()
        return self._obs

    def _render(self, ids: torch.Tensor) -> torch.Tensor:
        """``(k, H, W, 3)`` uint8 frames of worlds ``ids`` on ``self.device``."""
        assert self.image_size is not None, "images were not requested (TaskEnv(image_size=...))"
        return self.sim.render_tensor(self.camera, ids, (self.image_size[0], self.image_size[1]))

    def instruction_embeddings(self, encoder: Any) -> torch.Tensor:
        """``(L, D)`` embeddings of ``self.instructions`` by ``encoder``, computed once and cached.

        Args:
            encoder: an ``robotrl.envs.instructions.TextEncoder`` (``name`` and ``encode(texts)``).

        """
        from robotrl.envs.instructions import cached_embeddings

        if not self.instructions:
            raise ValueError(f"Task {self.cfg.name!r} has no instructions to embed.")
        return cached_embeddings(encoder, self.instructions).to(self.device)

    def _finish_episodes(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        rows = {"return": self.episode_return, "length": self.episode_step, "success": self.task.success(),
                **self.task.episode_metrics()}
        names = [*rows, *(f"reward/{name}" for name in self._term_names)]
        # one stack (bool and int rows promote to float32) and one gather for all rows
        table = torch.stack([*rows.values(), *self._episode_term_rows]).index_select(1, ids)
        if table.dtype != torch.float32:  # a float64 metric promoted the table
            table = table.float()
        return dict(zip(names, table.unbind(0), strict=True))

    def _reset_ids(self, ids: torch.Tensor) -> None:
        fixed = self.physics is not None and self.cfg.dynamics_mode == "nominal"
        if self.cfg.randomize and not fixed:
            self.task.randomize(ids, self.gen)
        self.task.reset(ids, self.gen)
        self.episode_step.index_fill_(0, ids, 0)
        self.episode_return.index_fill_(0, ids, 0.0)
        self._episode_terms.index_fill_(1, ids, 0.0)
        if len(self._hist_slots) > 1:
            self._action_hist.index_fill_(1, ids, 0.0)
        spread = self.cfg.action_delay_max if self.cfg.randomize and not fixed else 0
        low = max(0, self._base_delay - spread // 2)  # centred on the calibrated delay (0..spread without a file)
        if spread > 0:
            self._delay[ids] = torch.randint(low, low + spread + 1, (ids.numel(),), generator=self.gen,
                                             device=self.device)
        elif self._base_delay:
            self._delay[ids] = self._base_delay

    def close(self) -> None:
        """Nothing to release on CPU; Warp buffers go with the object."""


def make_env(task_cfg: TaskConfig, sim_cfg: SimConfig, seed: int = 0,
             image_size: tuple[int, int] | None = None) -> TaskEnv:
    """Build the VecEnv for a task config on ``sim_cfg``'s backend (``image_size``: render ``obs["image"]``)."""
    return TaskEnv(task_cfg, sim_cfg, seed=seed, image_size=image_size)
