"""Batch jobs: evaluation of a checkpoint and demonstration collection, one scenario at a time.

A job is a picklable callable ``job(scenario) -> dict`` (``robotrl.cluster.batch``); these
are dataclasses so ``robotrl batch <name> key=value`` can fill them in, type-checked. A job
with a ``write(path, results, meta)`` method writes its own merged file (collection writes
HDF5); the others are merged into JSON by ``write_results``.

Other packages add jobs to ``robotrl batch`` with ``register_job`` (the twin's failure
mining, for instance), or call ``run_batch`` with their own callable directly.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robotrl.cluster.batch import Scenario

log = logging.getLogger(__name__)

JOBS: dict[str, type] = {}


def register_job(name: str, cls: type) -> type:
    """Make the dataclass ``cls`` (a ``job(scenario) -> dict`` callable) available as ``robotrl batch <name>``."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"batch job {name!r} must be a dataclass (its fields are the command-line arguments)")
    JOBS[name] = cls
    return cls


@dataclass
class EvalJob:
    """Evaluate a checkpoint in every scenario: ``run_episodes`` statistics per scenario.

    Attributes:
        checkpoint: run directory, its ``checkpoints/`` directory or a ``ckpt_*.safetensors``.
        num_envs: worlds per scenario (one BatchSim in the worker).
        episodes: episodes per scenario (every world contributes ``ceil(episodes / num_envs)``).
        deterministic: act with the mean action.
        split: ``train`` (at the curriculum stage the run reached) or ``heldout``.
        randomize: keep domain randomization on.
        threads: simulation threads of the worker's BatchSim.

    """

    checkpoint: str = ""
    num_envs: int = 8
    episodes: int = 8
    deterministic: bool = True
    split: str = "train"
    randomize: bool = False
    threads: int = 1

    def check(self) -> None:
        """Before any scenario runs: a ``ValueError`` without a checkpoint, ``FileNotFoundError`` if it is absent."""
        from robotrl.storage.checkpoint import resolve

        if not self.checkpoint:
            raise ValueError("the eval job needs checkpoint=<run dir or ckpt file>")
        resolve(self.checkpoint)

    def __call__(self, scenario: Scenario) -> dict[str, Any]:
        """Mean return, length, success, ... of the checkpoint in ``scenario``."""
        from robotrl.envs.task_env import TaskEnv
        from robotrl.policies.io import load_policy
        from robotrl.runners.evaluate import run_episodes
        from robotrl.sim.backend import SimConfig
        from robotrl.storage.checkpoint import load_checkpoint, resolve, strip
        from robotrl.tasks import task_config_from_meta

        if not self.checkpoint:
            raise ValueError("the eval job needs checkpoint=<run dir or ckpt file>")
        weights = resolve(self.checkpoint)
        tensors, meta = load_checkpoint(weights)
        task_cfg = task_config_from_meta(meta, split=self.split, randomize=self.randomize, **scenario.task)
        env = TaskEnv(task_cfg, SimConfig(num_envs=self.num_envs, nthread=self.threads), seed=scenario.seed)
        try:
            if self.split == "train":
                env.task.load_state_dict(strip(tensors, "task"))
            policy, _ = load_policy(weights, device=env.device)
            return run_episodes(env, policy, self.episodes, self.deterministic)
        finally:
            env.close()


class _FrameRecorder:
    """Wraps a TaskEnv for ``collect``: renders every world before each step and cuts the frames per episode.

    ``finished[i]`` holds world ``i``'s episodes in order as ``((T, H, W, 3) uint8, success)``; frame
    ``t`` shows the state the ``t``-th action was taken in (the ``obs`` row ``t`` of the demo).
    """

    def __init__(self, env: Any, camera: str | int, size: tuple[int, int]) -> None:
        self.env, self.camera, self.size = env, camera, size
        self.num_envs, self.device = env.num_envs, env.device
        self.max_episode_length = env.max_episode_length
        self.task = env.task
        self._ids = torch.arange(env.num_envs)
        self._current: list[list[np.ndarray]] = [[] for _ in range(env.num_envs)]
        self.finished: list[list[tuple[np.ndarray, bool]]] = [[] for _ in range(env.num_envs)]

    def reset(self) -> dict[str, torch.Tensor]:
        self._current = [[] for _ in range(self.num_envs)]
        return self.env.reset()

    def step(self, action: torch.Tensor) -> tuple[Any, ...]:
        frames = self.env.sim.render(self.camera, self._ids, self.size)
        for i in range(self.num_envs):
            self._current[i].append(frames[i])
        obs, reward, terminated, truncated, info = self.env.step(action)
        for j, i in enumerate((terminated | truncated).nonzero().squeeze(1).tolist()):
            success = bool(info["episode"]["success"][j] > 0.5)
            self.finished[i].append((np.stack(self._current[i]), success))
            self._current[i] = []
        return obs, reward, terminated, truncated, info

    def kept_frames(self, episodes: int, success_only: bool) -> list[np.ndarray]:
        """Frames of the episodes ``collect`` kept, in its order (episode index, then world)."""
        per_world = max(1, -(-episodes // self.num_envs))
        kept: list[Any] = []
        for i, segments in enumerate(self.finished):
            chosen = [frames for frames, ok in segments if ok or not success_only][:per_world]
            kept.extend((k, i, frames) for k, frames in enumerate(chosen))
        return [frames for _, _, frames in sorted(kept, key=lambda x: (x[0], x[1]))][:episodes]


@dataclass
class CollectJob:
    """Record demonstrations in every scenario (robomimic HDF5, with camera images).

    Attributes:
        task: a registered task name.
        teacher: ``scripted`` or a checkpoint (``robotrl collect``'s teachers).
        episodes: demonstrations per scenario.
        num_envs: worlds per scenario.
        noise: std of Gaussian noise on the teacher's actions (a deliberately noisy teacher).
        success_only: keep successful episodes only.
        images: also record ``obs/image`` ``(T, H, W, 3)`` uint8 from ``camera``.
        camera: camera name or id; empty uses the task's ``eval_camera``.
        image_size: ``[height, width]``.
        threads: simulation threads of the worker's BatchSim.

    """

    task: str = ""
    teacher: str = "scripted"
    episodes: int = 4
    num_envs: int = 4
    noise: float = 0.0
    success_only: bool = False
    images: bool = True
    camera: str = ""
    image_size: list[int] = field(default_factory=lambda: [64, 64])
    threads: int = 1

    def check(self) -> None:
        """Before any scenario runs: a ``ValueError`` without a task or with an unknown one."""
        from robotrl.tasks import config_class

        if not self.task:
            raise ValueError("the collect job needs task=<name>")
        config_class(self.task)

    def __call__(self, scenario: Scenario) -> dict[str, Any]:
        """``{"episodes": [...]}``: numpy arrays per episode (``robotrl.storage.demos`` layout)."""
        from omegaconf import OmegaConf

        from robotrl.data.collect import _teacher, collect
        from robotrl.envs.task_env import TaskEnv
        from robotrl.sim.backend import SimConfig
        from robotrl.tasks import config_class

        if not self.task:
            raise ValueError("the collect job needs task=<name>")
        schema = config_class(self.task)
        task_cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), scenario.task))
        env = TaskEnv(task_cfg, SimConfig(num_envs=self.num_envs, nthread=self.threads), seed=scenario.seed)
        try:
            camera: str | int = self.camera or env.task.eval_camera
            if isinstance(camera, str) and camera.lstrip("-").isdigit():
                camera = int(camera)
            recorder = _FrameRecorder(env, camera, (self.image_size[0], self.image_size[1])) if self.images else None
            teacher = _teacher(env, self.teacher)
            episodes = collect(recorder or env, teacher,  # type: ignore[arg-type]  # the recorder proxies a VecEnv
                               self.episodes, self.noise, self.success_only, scenario.seed)
        finally:
            env.close()
        out = []
        frames = recorder.kept_frames(self.episodes, self.success_only) if recorder is not None else [None] * len(
            episodes)
        for ep, image in zip(episodes, frames, strict=True):
            row = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in ep.items()}
            if image is not None:
                if image.shape[0] != row["actions"].shape[0]:
                    raise RuntimeError(f"{image.shape[0]} frames for a {row['actions'].shape[0]}-step demo")
                row["image"] = image
            out.append(row)
        return {"episodes": out}

    def write(self, path: str | os.PathLike, results: list[dict[str, Any]], meta: dict[str, Any]) -> Path:
        """All demonstrations in scenario order into one HDF5 file (images as ``obs/image``)."""
        import json

        from robotrl.storage.demos import _h5py, write_demos

        episodes = [ep for r in results for ep in r["result"]["episodes"]]
        scenario_of = [r["scenario"]["id"] for r in results for _ in r["result"]["episodes"]]
        env_args = {"task": self.task, "teacher": self.teacher, "noise": self.noise, "batch": meta}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_demos(path, episodes, env_args)
        with _h5py().File(path, "a") as f:
            for i, ep in enumerate(episodes):
                group = f[f"data/demo_{i}"]
                group.attrs["scenario"] = scenario_of[i]
                if "image" in ep:
                    group.create_dataset("obs/image", data=ep["image"], compression="gzip")
            f["data"].attrs["scenarios"] = json.dumps([r["scenario"] for r in results])
        return path


register_job("eval", EvalJob)
register_job("collect", CollectJob)
