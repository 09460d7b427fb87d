"""On-policy runner (PPO): act, env step, process step, and an update when the horizon is full.

The loop, checkpoints, logging and progress live in ``robotrl.runners.base.Runner``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from robotrl.algos.ppo import PPO
from robotrl.cluster.ddp import make_data_parallel
from robotrl.envs.task_env import make_env
from robotrl.policies.mlp import ActorCritic
from robotrl.rewards.env import wrap_vlm_rewards
from robotrl.runners.base import EpisodeStats, Runner, config_hash

log = logging.getLogger(__name__)

__all__ = ["EpisodeStats", "OnPolicyRunner", "config_hash"]


class OnPolicyRunner(Runner):
    """Trains ``cfg.algo`` (PPO) on ``cfg.task`` and writes everything to ``run_dir``."""

    algo: PPO

    def __init__(self, cfg: Any, run_dir: str | Path, config_yaml: str = "") -> None:
        super().__init__(cfg, run_dir, config_yaml)
        sim = cfg.sim
        if self.dist is not None and sim.backend == "warp" and sim.device == "cuda":
            sim = replace(sim, device=f"cuda:{self.dist.local_rank}")  # one GPU per rank on the node
        self.env = self.task_env = make_env(cfg.task, sim, seed=self.seed)
        self._configure_torch(self.env.device)
        # reward=vlm_rm|clg: a VLM reward term scored from rendered frames (robotrl.rewards.env); none: no-op
        self.env = wrap_vlm_rewards(self.task_env, getattr(cfg, "reward", None))
        dims = self.env.obs_dims
        policy = ActorCritic(dims["policy"], dims.get("critic", dims["policy"]), self.env.num_actions, cfg.policy)
        self.algo = PPO(policy, cfg.algo, self.env.num_envs, self.env.device)
        self.ddp = make_data_parallel(self.algo)  # torchrun: gradients, lr and normalizers synced across ranks

    def _iterate(
        self, obs: dict[str, torch.Tensor], stats: EpisodeStats
    ) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
        t0 = time.perf_counter()
        for _ in range(self.cfg.algo.num_steps):
            action = self.algo.act(obs)
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.algo.process_step(obs, reward, terminated, truncated, info)
            stats.observe(info)
        t1 = time.perf_counter()
        relabel = getattr(self.env, "relabel_rollout", None)  # late async VLM scores onto their transitions
        late = relabel(self.algo.storage.rewards) if relabel is not None else {}
        with self.update_threads():
            update = self.algo.update(obs) | late
        update |= {"perf/collect_s": t1 - t0, "perf/update_s": time.perf_counter() - t1}
        return obs, update, self.cfg.algo.num_steps * self.env.num_envs
