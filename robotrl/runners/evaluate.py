"""Evaluation: roll out a checkpoint, report episode statistics, write a video and plots."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robotrl.envs.task_env import TaskEnv
from robotrl.policies.io import load_policy
from robotrl.storage.checkpoint import load_checkpoint, resolve, strip
from robotrl.tasks import task_config_from_meta

log = logging.getLogger(__name__)


def run_episodes(env: TaskEnv, policy: Any, episodes: int, deterministic: bool = True,
                 on_step: Any = None) -> dict[str, float]:
    """Roll ``policy`` for every world's first ``ceil(episodes / N)`` episodes; return their means.

    Counting a fixed number of episodes *per world*, rather than the first ``episodes`` to
    finish anywhere, keeps short (failed) episodes from being over-weighted.
    ``on_step(step)`` is called after every env step (for video frames and traces).
    """
    per_world = max(1, -(-episodes // env.num_envs))
    counted = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
    finished: dict[str, list[float]] = {}
    limit = (per_world + 1) * env.max_episode_length + 1
    obs = env.reset()
    step = 0
    with torch.no_grad():
        while step < limit and bool((counted < per_world).any()):
            action = policy.act_inference(obs["policy"]) if deterministic else policy.act(obs["policy"])[0]
            obs, _, terminated, truncated, info = env.step(action)
            step += 1
            if on_step is not None:
                on_step(step)
            if "episode" not in info:
                continue
            ids = (terminated | truncated).nonzero().squeeze(1)  # the rows of info["episode"], in order
            keep = counted[ids] < per_world
            counted[ids] += 1
            for key, value in info["episode"].items():
                finished.setdefault(key, []).extend(value[keep].cpu().tolist())
    if bool((counted < per_world).any()):
        raise RuntimeError(
            f"{int((counted < per_world).sum())} world(s) finished fewer than {per_world} episode(s) within "
            f"{limit} steps; check the task's time limit."
        )
    out = {k: float(np.mean(v)) for k, v in finished.items()}
    out["episodes"] = float(len(finished["return"]))
    return out


def plot_learning_curve(run_dir: Path, out_path: Path) -> Path | None:
    """Episode return and length against env steps, from ``metrics.jsonl``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from robotrl.monitoring import read_metrics

    if not (run_dir / "metrics.jsonl").is_file():
        log.warning("no metrics.jsonl in %s: skipping the learning curve", run_dir)
        return None
    rows = [r for r in read_metrics(run_dir) if r.get("episode/return") is not None]
    if not rows:
        return None
    steps = [r["env_steps"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].plot(steps, [r["episode/return"] for r in rows])
    axes[0].set(xlabel="env steps", ylabel="mean episode return", title="return")
    axes[1].plot(steps, [r.get("episode/length") for r in rows], color="tab:orange")
    axes[1].set(xlabel="env steps", ylabel="mean episode length", title="episode length")
    from matplotlib.ticker import EngFormatter

    for ax in axes:
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 200k, 1.5M: readable at any run length
    fig.suptitle(run_dir.name)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def evaluate(cfg: Any) -> dict[str, Any]:
    """``robotrl eval``: statistics JSON, ``eval.mp4``, ``learning_curve.png`` and task plots."""
    from robotrl.sim.render import BatchRenderer, write_video

    if cfg.engine not in ("mujoco", "pybullet"):
        raise ValueError(f"engine={cfg.engine!r}; valid: mujoco, pybullet (a sim-to-sim check).")
    if cfg.engine == "pybullet" and cfg.sim.backend != "cpu":
        raise ValueError(f"engine=pybullet mirrors PyBullet into a CPU BatchSim; use sim=cpu, not {cfg.sim.backend!r}.")
    weights = resolve(cfg.checkpoint)
    run_dir = weights.parent.parent
    default_dir = "eval" if cfg.engine == "mujoco" else f"eval_{cfg.engine}"
    out_dir = Path(cfg.out_dir) if cfg.out_dir else run_dir / default_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors, meta = load_checkpoint(weights)
    overrides = dict(cfg.task)
    task_cfg = task_config_from_meta(meta, split=cfg.split, randomize=cfg.randomize, **overrides)
    if task_cfg.scenarios and task_cfg.scenario_mix > 0:
        log.info("evaluating with %.0f%% of the resets drawn from task.scenarios=%s, as the run trained; "
                 "task.scenario_mix=0 evaluates the task's own distribution", 100 * task_cfg.scenario_mix,
                 task_cfg.scenarios)
    env = TaskEnv(task_cfg, replace(cfg.sim, num_envs=cfg.num_envs), seed=cfg.seed)
    if cfg.split == "train":
        env.task.load_state_dict(strip(tensors, "task"))  # the curriculum stage the run reached
    bullet = None
    if cfg.engine == "pybullet":
        from robotrl.twin.bullet import use_pybullet

        bullet = use_pybullet(env)  # NotImplementedError names the tasks that run in PyBullet
    policy, _ = load_policy(weights, device=env.device)
    frames: list[np.ndarray] = []
    trace: dict[str, list[np.ndarray]] = {}
    renderer = None
    if cfg.video:
        renderer = BatchRenderer(env.sim.model, size=(cfg.video_size[0], cfg.video_size[1]), lean=False)
    camera: str | int = cfg.camera if cfg.camera else env.task.eval_camera
    if isinstance(camera, str) and camera.lstrip("-").isdigit():
        camera = int(camera)

    first_world = torch.tensor([0])

    def on_step(step: int) -> None:
        if step > cfg.video_steps:
            return
        for key, value in env.task.trace().items():
            trace.setdefault(key, []).append(value[0].detach().cpu().numpy())
        if renderer is not None:
            frames.append(renderer.render_worlds(env.sim, camera, first_world)[0])

    try:
        stats = run_episodes(env, policy, cfg.episodes, cfg.deterministic, on_step)
    finally:
        if bullet is not None:
            bullet.close()
    result: dict[str, Any] = {"checkpoint": str(weights), "task": meta["task"]["name"], "split": cfg.split,
                              "task_overrides": overrides, "scenario_mix": task_cfg.scenario_mix,
                              "backend": cfg.sim.backend, "engine": cfg.engine,
                              "env_steps_trained": meta.get("env_steps"), **stats}
    if renderer is not None and frames:
        result["video"] = write_video(frames, str(out_dir / "eval.mp4"), fps=max(1, round(1.0 / env.step_dt)))
        renderer.close()
    curve = plot_learning_curve(run_dir, out_dir / "learning_curve.png")
    if curve is not None:
        result["learning_curve"] = str(curve)
    arrays = {k: np.stack(v) for k, v in trace.items()}
    result["artifacts"] = env.task.eval_artifacts(arrays, str(out_dir))
    with open(out_dir / f"eval_{cfg.split}.json", "w") as f:
        json.dump(result, f, indent=2)
    return result
