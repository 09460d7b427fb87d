"""Throughput: robotrl against gymnasium, SB3, EnvPool and raw mujoco.batch, in one run.

    python benchmarks/throughput.py                  # ~4 minutes on 2 cores
    python benchmarks/throughput.py --num-envs 256 --seconds 10

Env stepping uses gymnasium's humanoid XML *with its own options* (PGS, RK4) and frame
skip 5, random actions, and the same observation work everywhere: gymnasium Humanoid-v5's
348-d observation, which needs ``cfrc_ext`` (``mj_rnePostConstraint``). Rows:

* gymnasium ``Humanoid-v5``, one env; SB3 ``DummyVecEnv(8)`` of it; EnvPool ``Humanoid-v5``.
* raw ``mujoco.batch``: a hand-written numpy loop (bind, step, concatenate obs, reset falls).
* robotrl VecEnv (``task=humanoid task.gym_model=true task.gym_obs=true``): torch tensors,
  rewards, autoreset, episode statistics on top.
* robotrl VecEnv with the task's own defaults (Newton + implicit-fast, proprioceptive obs).

End to end: robotrl PPO (``robotrl train task=humanoid`` defaults) and SB3 PPO on gymnasium
``Humanoid-v5`` (DummyVecEnv(8)), training steps per second of wall-clock.
Results: ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import save, table, timed  # noqa: E402

FRAME_SKIP = 5


def gym_single(seconds: float) -> float:
    import gymnasium as gym

    env = gym.make("Humanoid-v5")
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def run() -> int:
        for _ in range(100):
            _, _, term, trunc, _ = env.step(rng.uniform(-0.4, 0.4, 17))
            if term or trunc:
                env.reset()
        return 100

    return timed(run, seconds)


def sb3_dummy(seconds: float, n: int = 8) -> float:
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: gym.make("Humanoid-v5")] * n)
    venv.reset()
    rng = np.random.default_rng(0)

    def run() -> int:
        for _ in range(20):
            venv.step(rng.uniform(-0.4, 0.4, (n, 17)))
        return 20 * n

    return timed(run, seconds)


def envpool_rate(seconds: float, n: int, threads: int) -> float | None:
    try:
        import envpool
    except ImportError:
        return None
    env = envpool.make("Humanoid-v5", env_type="gymnasium", num_envs=n, batch_size=n, num_threads=threads, seed=0)
    env.reset()
    rng = np.random.default_rng(0)

    def run() -> int:
        for _ in range(20):
            env.step(rng.uniform(-0.4, 0.4, (n, 17)).astype(np.float32))
        return 20 * n

    return timed(run, seconds)


def raw_batch(seconds: float, n: int, threads: int) -> float:
    """What a user writes by hand on mujoco.batch: same model, same observation work."""
    import mujoco.batch as mjb
    from robotrl.tasks.humanoid.config import HumanoidConfig
    from robotrl.tasks.humanoid.task import HumanoidTask

    model = HumanoidTask(HumanoidConfig(gym_model=True, gym_obs=True), 1, torch.device("cpu")).build_model()
    batch = mjb.Batch(model, n, threads)
    qpos, qvel, ctrl = batch.bind("qpos"), batch.bind("qvel"), batch.bind("ctrl")
    cinert, cvel, qfrc, cfrc = (batch.bind(f) for f in ("cinert", "cvel", "qfrc_actuator", "cfrc_ext"))
    batch.reset()
    rng = np.random.default_rng(0)

    def run() -> int:
        for _ in range(20):
            ctrl[:] = rng.uniform(-0.4, 0.4, ctrl.shape)
            batch.step(nstep=FRAME_SKIP)
            obs = np.concatenate([qpos[:, 2:], qvel, cinert[:, 1:].reshape(n, -1), cvel[:, 1:].reshape(n, -1),
                                  qfrc[:, 6:], cfrc[:, 1:].reshape(n, -1)], axis=1)
            fallen = np.flatnonzero((qpos[:, 2] < 1.0) | (qpos[:, 2] > 2.0))
            if fallen.size:
                batch.reset(ids=fallen)
        assert obs.shape == (n, 348)
        return 20 * n

    return timed(run, seconds)


def robotrl_env(seconds: float, n: int, threads: int, **task_kwargs: object) -> float:
    from robotrl.tasks.humanoid.config import HumanoidConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim import SimConfig

    torch.set_num_threads(1)  # what robotrl's runners use on CPU (see TrainConfig.torch_threads)
    env = TaskEnv(HumanoidConfig(randomize=False, obs_noise_std=0.0, action_delay_max=0, **task_kwargs),
                  SimConfig(num_envs=n, nthread=threads), seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)

    def run() -> int:
        for _ in range(20):
            env.step(torch.rand(n, 17, generator=gen) * 2 - 1)
        return 20 * n

    return timed(run, seconds)


def robotrl_ppo(seconds: float, n: int, threads: int) -> float:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from robotrl.config import register_configs
    from robotrl.runners import make_runner

    register_configs()
    with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "task=humanoid", f"sim.num_envs={n}", f"sim.nthread={threads}", "progress=false",
            "tensorboard=false", "save_interval=100000", f"max_time_s={seconds}", "max_iterations=100000"])
    runner = make_runner(OmegaConf.to_object(cfg), tempfile.mkdtemp(prefix="bench_ppo_"))
    start = time.perf_counter()
    runner.learn()
    return runner.env_steps / (time.perf_counter() - start)


def sb3_ppo(seconds: float, n: int = 8) -> float:
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    class Budget(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            return time.perf_counter() - self.start < seconds

    torch.set_num_threads(os.cpu_count() or 1)  # SB3's default; no simulator pool competes here
    venv = DummyVecEnv([lambda: gym.make("Humanoid-v5")] * n)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=512, device="cpu", verbose=0, seed=0)
    start = time.perf_counter()
    model.learn(total_timesteps=10**9, callback=Budget())
    return model.num_timesteps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=8.0, help="timing window per env row")
    parser.add_argument("--train-seconds", type=float, default=60.0, help="wall-clock per training row")
    args = parser.parse_args()
    n, th, s = args.num_envs, args.threads, args.seconds

    fig: dict[str, float] = {"num_envs": n, "threads": th, "frame_skip": FRAME_SKIP}
    fig["gymnasium_single_steps_per_s"] = gym_single(s)
    fig["sb3_dummyvecenv8_steps_per_s"] = sb3_dummy(s)
    ep = envpool_rate(s, n, th)
    if ep is not None:
        fig["envpool_steps_per_s"] = ep
    fig["mujoco_batch_raw_steps_per_s"] = raw_batch(s, n, th)
    fig["robotrl_vecenv_steps_per_s"] = robotrl_env(s, n, th, gym_model=True, gym_obs=True)
    fig["robotrl_vecenv_task_defaults_steps_per_s"] = robotrl_env(s, n, th)
    fig["robotrl_ppo_train_steps_per_s"] = robotrl_ppo(args.train_seconds, n, th)
    fig["sb3_ppo_train_steps_per_s"] = sb3_ppo(args.train_seconds)

    fig["ratio_robotrl_vs_mujoco_batch"] = fig["robotrl_vecenv_steps_per_s"] / fig["mujoco_batch_raw_steps_per_s"]
    if "envpool_steps_per_s" in fig:
        fig["ratio_robotrl_vs_envpool"] = fig["robotrl_vecenv_steps_per_s"] / fig["envpool_steps_per_s"]
    fig["ratio_robotrl_vs_gymnasium_single"] = fig["robotrl_vecenv_steps_per_s"] / fig["gymnasium_single_steps_per_s"]
    fig["ratio_robotrl_ppo_vs_sb3_ppo"] = fig["robotrl_ppo_train_steps_per_s"] / fig["sb3_ppo_train_steps_per_s"]
    path = save("throughput", fig, merge=False)
    rows = [(k, f"{v:,.2f}" if isinstance(v, float) else str(v)) for k, v in fig.items()]
    print(table(rows, f"Humanoid throughput, {n} worlds, {th} threads (saved to {path})"))


if __name__ == "__main__":
    main()
