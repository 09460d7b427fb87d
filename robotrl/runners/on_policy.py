"""On-policy runner: owns the loop, the device, checkpoints, logging and progress.

The loop is the rsl_rl one: act, env step, process step, (horizon full) update, log,
checkpoint. Algorithms hold the math; the env holds the worlds.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict, deque
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from robotrl.algos.ppo import PPO
from robotrl.envs.task_env import TaskEnv, make_env
from robotrl.logging import MetricsLogger, TrainProgress
from robotrl.policies.mlp import ActorCritic
from robotrl.runners.checkpoint import load_checkpoint, save_checkpoint

log = logging.getLogger(__name__)


class EpisodeStats:
    """Keeps the last ``window`` finished episodes of every statistic the env reports."""

    def __init__(self, window: int = 100) -> None:
        self._values: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=window))
        self.count = 0

    def add(self, episode: dict[str, torch.Tensor]) -> None:
        """Fold a step's ``info["episode"]`` (``(k,)`` tensors) in."""
        for key, value in episode.items():
            self._values[key].extend(value.detach().cpu().tolist())
        self.count += len(next(iter(episode.values()))) if episode else 0

    def means(self) -> dict[str, float]:
        """``episode/<key>`` means over the window."""
        return {f"episode/{k}": sum(v) / len(v) for k, v in self._values.items() if v}


def config_hash(config_yaml: str) -> str:
    """Short sha256 of the resolved training config."""
    return hashlib.sha256(config_yaml.encode()).hexdigest()[:16]


class OnPolicyRunner:
    """Trains ``cfg.algo`` (PPO) on ``cfg.task`` and writes everything to ``run_dir``."""

    def __init__(self, cfg: Any, run_dir: str | Path, config_yaml: str = "") -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.config_yaml = config_yaml or OmegaConf.to_yaml(OmegaConf.structured(cfg))
        torch.manual_seed(cfg.seed)
        self.env: TaskEnv = make_env(cfg.task, cfg.sim, seed=cfg.seed)
        if self.env.device.type == "cpu" and cfg.torch_threads > 0:
            torch.set_num_threads(cfg.torch_threads)
        dims = self.env.obs_dims
        policy = ActorCritic(dims["policy"], dims.get("critic", dims["policy"]), self.env.num_actions, cfg.policy)
        self.algo = PPO(policy, cfg.algo, self.env.num_envs, self.env.device)
        self.iteration = 0
        self.env_steps = 0
        self.elapsed_s = 0.0

    # --- checkpoints -------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """JSON metadata stored beside the weights (what export and deploy read)."""
        task = self.env.task
        policy = self.algo.policy
        return {
            "task": {"name": self.cfg.task.name, "config": asdict(self.cfg.task)},
            "policy": {"obs_dim": policy.obs_dim, "critic_dim": policy.critic_dim,
                       "action_dim": policy.action_dim, "config": asdict(policy.cfg)},
            "algo": self.cfg.algo.name,
            "obs_layout": [list(x) for x in task.obs_layout()],
            "joint_names": task.joint_names,
            "action_spec": task.action_spec(),
            "step_dt": self.env.step_dt,
            "config_yaml": self.config_yaml,
            "config_hash": config_hash(self.config_yaml),
            "env_steps": self.env_steps,
            "elapsed_s": self.elapsed_s,
            "algo_state": self.algo.state_meta(),
        }

    def save(self) -> Path:
        """Atomically write a checkpoint of the current iteration."""
        tensors = {**self.algo.state_tensors(), "rng.torch": torch.get_rng_state(),
                   "rng.env": self.env.gen.get_state()}
        return save_checkpoint(self.run_dir / "checkpoints", self.iteration, tensors, self.meta())

    def restore(self) -> bool:
        """Continue from the newest checkpoint in ``run_dir``; False if there is none."""
        if not (self.run_dir / "checkpoints" / "latest.json").is_file():
            log.warning("resume=true but %s has no checkpoint yet; starting fresh", self.run_dir)
            return False
        tensors, meta = load_checkpoint(self.run_dir)
        self.algo.load_state_tensors(tensors, meta)
        torch.set_rng_state(tensors["rng.torch"])
        self.env.gen.set_state(tensors["rng.env"])
        self.iteration, self.env_steps = meta["iteration"], meta["env_steps"]
        self.elapsed_s = meta.get("elapsed_s", 0.0)
        log.info("resumed from %s at iteration %d (%d env steps)", meta["name"], self.iteration, self.env_steps)
        return True

    # --- loop ----------------------------------------------------------------------
    def learn(self) -> dict[str, float]:
        """Run until ``max_iterations`` or ``max_time_s``; return the last logged metrics."""
        cfg = self.cfg
        if cfg.resume:
            self.restore()
        logger = MetricsLogger(self.run_dir, tensorboard=cfg.tensorboard)
        stats = EpisodeStats()
        obs = self.env.reset()
        last: dict[str, float] = {}
        start_wall = time.perf_counter() - self.elapsed_s
        log.info("training %s with %s: %d worlds on %s, run dir %s", cfg.task.name, cfg.algo.name,
                 self.env.num_envs, self.env.device, self.run_dir)
        try:
            with TrainProgress(cfg.max_iterations, enabled=cfg.progress, start=self.iteration) as bar:
                while self.iteration < cfg.max_iterations:
                    t0 = time.perf_counter()
                    obs, sim_resets = self._collect(obs, stats)
                    t1 = time.perf_counter()
                    update = self.algo.update(obs)
                    t2 = time.perf_counter()
                    self.iteration += 1
                    self.elapsed_s = time.perf_counter() - start_wall
                    steps = cfg.algo.num_steps * self.env.num_envs
                    self.env_steps += steps
                    last = {
                        "iteration": self.iteration, "time_s": self.elapsed_s,
                        "perf/steps_per_s": steps / (t2 - t0), "perf/collect_s": t1 - t0, "perf/update_s": t2 - t1,
                        "sim_resets": sim_resets, "episodes": stats.count, **stats.means(), **update,
                    }
                    logger.log(self.env_steps, last)
                    bar.update(self.iteration, last)
                    if self.iteration % cfg.save_interval == 0:
                        self.save()
                    if cfg.max_time_s > 0 and self.elapsed_s >= cfg.max_time_s:
                        log.info("time budget of %.0f s reached at iteration %d", cfg.max_time_s, self.iteration)
                        break
        except KeyboardInterrupt:
            log.warning("interrupted: saving a checkpoint at iteration %d", self.iteration)
        finally:
            self.save()
            logger.close()
        log.info("done: %d iterations, %d env steps in %.0f s; checkpoint in %s", self.iteration,
                 self.env_steps, self.elapsed_s, self.run_dir / "checkpoints")
        return last

    def _collect(self, obs: dict[str, torch.Tensor], stats: EpisodeStats) -> tuple[dict[str, torch.Tensor], int]:
        sim_resets = 0
        for _ in range(self.cfg.algo.num_steps):
            action = self.algo.act(obs)
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.algo.process_step(obs, reward, terminated, truncated, info)
            sim_resets += info["sim_resets"]
            if "episode" in info:
                stats.add(info["episode"])
        return obs, sim_resets
