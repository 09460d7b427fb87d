"""Shared test helpers: a humanoid checkpoint as the training runner writes it, processes, DDS peers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def make_humanoid_checkpoint(root: Path, seed: int = 0, steps: int = 40) -> Path:
    """An untrained humanoid ActorCritic with a filled obs normalizer, saved with runner-style meta."""
    from robotrl.envs.task_env import TaskEnv
    from robotrl.policies.mlp import ActorCritic, PolicyConfig
    from robotrl.runners.checkpoint import prefixed, save_checkpoint
    from robotrl.sim.backend import SimConfig
    from robotrl.tasks.humanoid.config import HumanoidConfig

    torch.manual_seed(seed)
    cfg = HumanoidConfig(randomize=False)
    env = TaskEnv(cfg, SimConfig(num_envs=4), seed=seed)
    dims = env.obs_dims
    policy = ActorCritic(dims["policy"], dims["critic"], env.num_actions, PolicyConfig(init_std=0.5))
    obs = env.reset()
    for _ in range(steps):
        policy.update_normalizers(obs["policy"], obs["critic"])
        obs, *_ = env.step(torch.rand(4, env.num_actions) * 2 - 1)
    task = env.task
    meta = {
        "task": {"name": "humanoid", "config": asdict(cfg)},
        "policy": {"obs_dim": policy.obs_dim, "critic_dim": policy.critic_dim, "action_dim": policy.action_dim,
                   "config": asdict(policy.cfg)},
        "obs_layout": [list(x) for x in task.obs_layout()], "joint_names": task.joint_names,
        "action_spec": task.action_spec(), "step_dt": env.step_dt, "config_yaml": "task: humanoid\n",
        "config_hash": "test0000", "env_steps": 0,
    }
    save_checkpoint(root / "checkpoints", 0, prefixed(policy.state_dict(), "policy"), meta)
    return root


def free_domain() -> int:
    """A ROS domain id unlikely to collide with other tests or engineers (10..229)."""
    return 10 + (os.getpid() * 7 + time.monotonic_ns() // 1000) % 220


def spawn(args: list[str], domain: int, log_path: Path) -> subprocess.Popen:
    """Start a console-script module as a real process on ``domain``, localhost only."""
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain), "PYTHONUNBUFFERED": "1"}
    log = open(log_path, "w")
    return subprocess.Popen([sys.executable, "-m", *args, "localhost_only:=true"], stdout=log,
                            stderr=subprocess.STDOUT, env=env, cwd=REPO)


def stop(proc: subprocess.Popen, timeout: float = 5.0) -> int:
    """SIGINT then wait (SIGKILL if it hangs); returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(2)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
