"""Runner base: the training loop, checkpoints, logging and progress shared by every algorithm.

A subclass builds ``self.env`` and ``self.algo`` and implements ``_iterate`` (one
iteration of data collection and updates). Everything else (resume, atomic checkpoints
with metadata for export and deploy, JSONL/TensorBoard metrics, the progress bar, the
wall-clock budget, saving on a normal exit and on Ctrl-C but never after an error) lives here once.
"""

from __future__ import annotations

import abc
import hashlib
import logging
import os
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from robotrl.algos.base import Algorithm
from robotrl.cluster.ddp import DataParallel, from_env, rank_seed
from robotrl.envs.base import VecEnv
from robotrl.monitoring import MetricsLogger, TrainProgress
from robotrl.sim.backend import set_cuda_matmul
from robotrl.storage.checkpoint import load_checkpoint, prefixed, save_checkpoint, strip

log = logging.getLogger(__name__)


def config_hash(config_yaml: str) -> str:
    """Short sha256 of the resolved training config."""
    return hashlib.sha256(config_yaml.encode()).hexdigest()[:16]


def resolve_update_threads(requested: int) -> int:
    """Torch threads for an update: ``requested`` if > 0; for 0, the CPUs this process may use.

    With 0, those CPUs are shared among the node's torchrun ranks (``LOCAL_WORLD_SIZE``), at least 1.

    Raises:
        ValueError: ``requested`` < 0.

    """
    if requested < 0:
        raise ValueError(f"update_threads must be >= 0 (0: every CPU this process may use), got {requested}.")
    if requested > 0:
        return requested
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cpus // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))


class EpisodeStats:
    """The last ``window`` finished episodes of every statistic, and the physics-failure count."""

    def __init__(self, window: int = 100) -> None:
        self._values: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=window))
        self.count = 0
        self.sim_resets = 0
        self.nan_resets = 0

    def observe(self, info: dict[str, Any]) -> None:
        """Fold a step's ``info`` in (``episode`` statistics, ``sim_resets`` and ``nan_resets``)."""
        self.sim_resets += int(info.get("sim_resets", 0))
        self.nan_resets += int(info.get("nan_resets", 0))
        if "episode" in info:
            self.add(info["episode"])

    def add(self, episode: dict[str, torch.Tensor]) -> None:
        """Fold ``(k,)`` tensors of ``k`` finished episodes in."""
        for key, value in episode.items():
            self._values[key].extend(value.detach().cpu().tolist())
        self.count += len(next(iter(episode.values()))) if episode else 0

    def means(self) -> dict[str, float]:
        """``episode/<key>`` means over the window."""
        return {f"episode/{k}": sum(v) / len(v) for k, v in self._values.items() if v}


class Runner(abc.ABC):
    """Owns the loop for ``self.algo`` on ``self.env``; writes everything to ``run_dir``.

    Subclasses set ``env`` (the VecEnv the algorithm acts in), ``task_env`` (the task env
    underneath any wrapper) and ``algo``, then implement ``_iterate``.
    """

    env: VecEnv
    task_env: VecEnv
    algo: Algorithm

    def __init__(self, cfg: Any, run_dir: str | Path, config_yaml: str = "") -> None:
        if getattr(cfg, "keep_checkpoints", 0) < 0:
            raise ValueError(f"keep_checkpoints must be >= 0 (0 keeps every checkpoint), got {cfg.keep_checkpoints}.")
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.config_yaml = config_yaml or OmegaConf.to_yaml(OmegaConf.structured(cfg))
        self.iteration = 0
        self.env_steps = 0
        self.elapsed_s = 0.0
        # Under torchrun every rank owns its worlds and its own seed stream (rank 0 keeps cfg.seed);
        # a subclass that supports it sets ``self.ddp`` once its algorithm exists.
        self.dist = from_env()
        self.rank = self.dist.rank if self.dist else 0
        self.world_size = self.dist.world_size if self.dist else 1
        self.is_main = self.rank == 0
        self.seed = rank_seed(cfg.seed, self.rank)
        self.ddp: DataParallel | None = None
        torch.manual_seed(self.seed)

    def _configure_torch(self, device: torch.device) -> None:
        """Torch settings for ``device``: CPU threads (collecting and updating), or CUDA matmul precision.

        On the CPU: ``cfg.torch_threads`` torch threads while collecting, ``cfg.update_threads`` for updates
        (resolved once here by ``resolve_update_threads``). On a CUDA device the threads are left alone and
        ``cfg.cuda_matmul`` sets torch's float32 matmul precision.
        """
        set_cuda_matmul(device, getattr(self.cfg, "cuda_matmul", "tf32"))
        cpu = device.type == "cpu"
        threads = getattr(self.cfg, "torch_threads", 0)
        if cpu and threads > 0:
            torch.set_num_threads(threads)
        self._update_threads = resolve_update_threads(getattr(self.cfg, "update_threads", 0)) if cpu else 0

    @contextmanager
    def update_threads(self) -> Iterator[None]:
        """Run the block (an update) with the resolved ``cfg.update_threads`` torch threads, then restore.

        The simulator's threads are idle during an update, so the update can use every core that the
        collection's small tensor ops cannot. A no-op off the CPU and before ``_configure_torch``.
        """
        n, before = getattr(self, "_update_threads", 0), torch.get_num_threads()
        if n <= 0 or n == before:
            yield
            return
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    @abc.abstractmethod
    def _iterate(
        self, obs: dict[str, torch.Tensor], stats: EpisodeStats
    ) -> tuple[dict[str, torch.Tensor], dict[str, float], int]:
        """One iteration: returns the latest obs, the update's metrics and the env steps taken."""

    @property
    def finishing(self) -> bool:
        """Whether the iteration just run is the last (iteration count or wall-clock budget reached)."""
        cfg = self.cfg
        return self.iteration >= cfg.max_iterations or (cfg.max_time_s > 0 and self.elapsed_s >= cfg.max_time_s)

    def _after_iteration(self) -> dict[str, float]:
        """Extra metrics after an iteration (periodic evaluations)."""
        return {}

    # --- checkpoints -------------------------------------------------------------
    def extra_meta(self) -> dict[str, Any]:
        """Subclass additions to the checkpoint metadata."""
        return {}

    def extra_tensors(self) -> dict[str, torch.Tensor]:
        """Subclass additions to the checkpoint tensors."""
        return {}

    def meta(self) -> dict[str, Any]:
        """JSON metadata stored beside the weights (what eval, export and deploy read)."""
        task_cfg = self.cfg.task
        meta: dict[str, Any] = {
            "task": {
                "name": getattr(task_cfg, "name", type(self.task_env).__name__),
                "config": asdict(task_cfg) if is_dataclass(task_cfg) and not isinstance(task_cfg, type) else {},
            },
            "policy": self.algo.policy_meta(),
            "algo": self.cfg.algo.name,
            "step_dt": self.env.step_dt,
            "config_yaml": self.config_yaml,
            "config_hash": config_hash(self.config_yaml),
            "env_steps": self.env_steps,
            "elapsed_s": self.elapsed_s,
            "algo_state": self.algo.state_meta(),
            "world_size": self.world_size,
        }
        task = getattr(self.task_env, "task", None)
        if task is not None:
            meta |= {
                "obs_layout": [list(x) for x in task.obs_layout()],
                "joint_names": task.joint_names,
                "action_spec": task.action_spec(),
            }
        return meta | self.extra_meta()

    def rng_tensors(self) -> dict[str, torch.Tensor]:
        """Every random stream of the run: torch's global generator, the env's, the algorithm's."""
        out = {"rng.torch": torch.get_rng_state()}
        gen = getattr(self.task_env, "gen", None)
        if gen is not None:
            out["rng.env"] = gen.get_state()
        for name, algo_gen in self.algo.generators().items():
            out[f"rng.algo.{name}"] = algo_gen.get_state()
        return out

    def task_tensors(self) -> dict[str, torch.Tensor]:
        """The task's state that outlives episodes (a curriculum stage), as ``task.<key>``."""
        task = getattr(self.task_env, "task", None)
        return prefixed(task.state_dict(), "task") if task is not None else {}

    def save(self) -> Path:
        """Atomically write a checkpoint of the current iteration."""
        tensors = {**self.algo.state_tensors(), **self.extra_tensors(), **self.rng_tensors(), **self.task_tensors()}
        return save_checkpoint(self.run_dir / "checkpoints", self.iteration, tensors, self.meta(),
                               keep=getattr(self.cfg, "keep_checkpoints", 5))

    def restore(self) -> bool:
        """Continue from the newest checkpoint in ``run_dir``; False if there is none.

        The weights, optimizer states, every random stream (``rng_tensors``) and the task's state
        come back, so the run continues where it was rather than replaying its first draws.
        """
        if not (self.run_dir / "checkpoints" / "latest.json").is_file():
            log.warning("resume=true but %s has no checkpoint yet; starting fresh", self.run_dir)
            return False
        tensors, meta = load_checkpoint(self.run_dir)
        self.algo.load_state_tensors(tensors, meta)
        torch.set_rng_state(tensors["rng.torch"])
        gen = getattr(self.task_env, "gen", None)
        if gen is not None and "rng.env" in tensors:
            gen.set_state(tensors["rng.env"])
        for name, algo_gen in self.algo.generators().items():
            if f"rng.algo.{name}" in tensors:
                algo_gen.set_state(tensors[f"rng.algo.{name}"])
        task = getattr(self.task_env, "task", None)
        if task is not None:
            task.load_state_dict(strip(tensors, "task"))
        self.restore_extra(tensors, meta)
        self.iteration, self.env_steps = meta["iteration"], meta["env_steps"]
        if not self.is_main:  # the checkpoint holds rank 0's streams; other ranks draw fresh ones
            torch.manual_seed(rank_seed(self.cfg.seed, self.rank, self.iteration))
            if gen is not None:
                gen.manual_seed(rank_seed(self.cfg.seed, self.rank, self.iteration))
        self.elapsed_s = meta.get("elapsed_s", 0.0)
        log.info("resumed from %s at iteration %d (%d env steps)", meta["name"], self.iteration, self.env_steps)
        return True

    def restore_extra(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:  # noqa: B027
        """Subclass state beyond the algorithm's (a replay buffer)."""

    def _checkpoint(self) -> None:
        """Rank 0 saves; under DDP every rank first checks that the weights are still identical."""
        if self.ddp is not None:
            divergence = self.ddp.max_divergence()
            if divergence > 0:
                raise RuntimeError(f"DDP ranks diverged (max |difference| {divergence:.3g}) at iteration "
                                   f"{self.iteration}; no checkpoint written")
        if self.is_main:
            self.save()

    # --- loop ----------------------------------------------------------------------
    def learn(self) -> dict[str, float]:
        """Run until ``max_iterations`` or ``max_time_s``; return the last logged metrics (rank 0 logs and saves)."""
        cfg = self.cfg
        if self.dist is not None and self.ddp is None:
            raise RuntimeError(f"torchrun with {self.world_size} ranks: algo={cfg.algo.name} has no data-parallel "
                               "support; use algo=ppo or a single process")
        if cfg.resume:
            self.restore()
        logger = MetricsLogger(self.run_dir, tensorboard=cfg.tensorboard) if self.is_main else None
        stats = EpisodeStats()
        obs = self.env.reset()
        last: dict[str, float] = {}
        start_wall = time.perf_counter() - self.elapsed_s
        log.info("training %s with %s: %d worlds on %s, run dir %s", getattr(cfg.task, "name", "env"),
                 cfg.algo.name, self.env.num_envs, self.env.device, self.run_dir)
        if cfg.max_time_s > 0:
            log.info("budget: %.0f s of wall-clock (max_time_s), the primary stop, or %d iterations if sooner; "
                     "change it with max_time_s=<seconds>", cfg.max_time_s, cfg.max_iterations)
        else:
            log.info("budget: %d iterations (max_iterations); no wall-clock limit (max_time_s=0)", cfg.max_iterations)
        try:
            with TrainProgress(cfg.max_iterations, enabled=cfg.progress and self.is_main, start=self.iteration,
                               max_time_s=cfg.max_time_s) as bar:
                while self.iteration < cfg.max_iterations:
                    t0 = time.perf_counter()
                    with self.ddp.sync_normalizers() if self.ddp is not None else nullcontext():
                        obs, update, steps = self._iterate(obs, stats)
                    steps *= self.world_size  # env steps of all ranks
                    self.iteration += 1
                    self.elapsed_s = time.perf_counter() - start_wall
                    self.env_steps += steps
                    last = {
                        "iteration": self.iteration, "time_s": self.elapsed_s,
                        "perf/steps_per_s": steps / max(time.perf_counter() - t0, 1e-9),
                        "sim_resets": stats.sim_resets, "nan_resets": stats.nan_resets, "episodes": stats.count,
                        **stats.means(), **update,
                    }
                    last |= self._after_iteration()
                    if logger is not None:
                        logger.log(self.env_steps, last)
                    bar.update(self.iteration, last)
                    if self.iteration % cfg.save_interval == 0:
                        self._checkpoint()
                    out_of_time = cfg.max_time_s > 0 and self.elapsed_s >= cfg.max_time_s
                    if self.ddp is not None:
                        out_of_time = self.ddp.any(out_of_time)  # every rank stops at the same iteration
                    if out_of_time:
                        log.info("time budget of %.0f s reached at iteration %d", cfg.max_time_s, self.iteration)
                        break
        except KeyboardInterrupt:
            log.warning("interrupted: saving a checkpoint at iteration %d", self.iteration)
            if self.is_main:
                self.save()
        except BaseException:
            # A half-updated state must never become ``latest``: keep the last good checkpoint.
            log.error("training failed at iteration %d; no checkpoint written, the last good one stays latest",
                      self.iteration)
            raise
        else:
            self._checkpoint()
        finally:
            if logger is not None:
                logger.close()
        log.info("done: %d iterations, %d env steps in %.0f s; checkpoint in %s", self.iteration,
                 self.env_steps, self.elapsed_s, self.run_dir / "checkpoints")
        return last
