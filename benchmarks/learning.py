"""Learning: robotrl PPO against SB3 PPO on the same task for the same wall-clock budget.

    python benchmarks/learning.py                      # 2 x 10 minutes + evaluation
    python benchmarks/learning.py --budget 300 --num-envs 64

Both learners train on robotrl's humanoid task (defaults: Newton solver, velocity
commands, domain randomization), 64 worlds. SB3 PPO trains through robotrl's SB3 adapter
with ``VecNormalize`` observations (its counterpart of our running normalization) and the
same rollout shape (32 steps x 64 worlds, 4 mini-batches of 512, 5 epochs).

Each final policy is evaluated deterministically on the same held-aside seed (64
episodes), as is each learner's untrained policy; the *gain* is final minus untrained
return. Results: ``benchmarks/results/learning.json``.
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
from common import save, table  # noqa: E402
from robotrl.tasks.humanoid.config import HumanoidConfig  # noqa: E402

from robotrl.envs.task_env import TaskEnv  # noqa: E402
from robotrl.runners.evaluate import run_episodes  # noqa: E402
from robotrl.sim import SimConfig  # noqa: E402

EVAL_SEED = 12345


def evaluate(policy: object, episodes: int, threads: int) -> dict[str, float]:
    env = TaskEnv(HumanoidConfig(), SimConfig(num_envs=episodes, nthread=threads), seed=EVAL_SEED)
    stats = run_episodes(env, policy, episodes, deterministic=True)
    return {"return": stats["return"], "forward_vel": stats["forward_vel"], "length": stats["length"]}


class SB3Deterministic:
    """Gives an SB3 model (with its VecNormalize) the ``act_inference`` interface."""

    def __init__(self, model: object, venv: object) -> None:
        self.model, self.venv = model, venv

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        norm = self.venv.normalize_obs(obs.cpu().numpy())
        action, _ = self.model.predict(norm, deterministic=True)
        return torch.as_tensor(action, dtype=torch.float32)


def train_robotrl(budget: float, n: int, threads: int, episodes: int) -> dict[str, float]:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from robotrl.config import register_configs
    from robotrl.runners import make_runner

    register_configs()
    with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "task=humanoid", f"sim.num_envs={n}", f"sim.nthread={threads}", "progress=false",
            "tensorboard=false", "save_interval=100000", f"max_time_s={budget}", "max_iterations=1000000"])
    runner = make_runner(OmegaConf.to_object(cfg), tempfile.mkdtemp(prefix="bench_learn_"))
    untrained = evaluate(runner.algo.policy, episodes, threads)
    start = time.perf_counter()
    runner.learn()
    wall = time.perf_counter() - start
    final = evaluate(runner.algo.policy, episodes, threads)
    return {"untrained_return": untrained["return"], "final_return": final["return"],
            "final_forward_vel_mps": final["forward_vel"], "final_episode_length": final["length"],
            "env_steps": runner.env_steps, "wall_s": wall}


def train_sb3(budget: float, n: int, threads: int, episodes: int) -> dict[str, float]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    from robotrl.envs.adapters import make_sb3_vec_env

    class Budget(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            return time.perf_counter() - self.start < budget

    env = TaskEnv(HumanoidConfig(), SimConfig(num_envs=n, nthread=threads), seed=0)
    venv = VecNormalize(make_sb3_vec_env(env), norm_obs=True, norm_reward=False)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=512, n_epochs=5, learning_rate=3e-4, device="cpu",
                policy_kwargs={"net_arch": [256, 128, 64]}, seed=0, verbose=0)
    untrained = evaluate(SB3Deterministic(model, venv), episodes, threads)
    start = time.perf_counter()
    model.learn(total_timesteps=10**9, callback=Budget())
    wall = time.perf_counter() - start
    venv.training = False
    final = evaluate(SB3Deterministic(model, venv), episodes, threads)
    return {"untrained_return": untrained["return"], "final_return": final["return"],
            "final_forward_vel_mps": final["forward_vel"], "final_episode_length": final["length"],
            "env_steps": model.num_timesteps, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=600.0, help="training wall-clock per learner, seconds")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--episodes", type=int, default=64)
    args = parser.parse_args()
    torch.manual_seed(0)
    np.random.seed(0)
    ours = train_robotrl(args.budget, args.num_envs, args.threads, args.episodes)
    theirs = train_sb3(args.budget, args.num_envs, args.threads, args.episodes)
    fig: dict[str, float] = {"budget_s": args.budget, "num_envs": args.num_envs}
    fig.update({f"robotrl_ppo_{k}": v for k, v in ours.items()})
    fig.update({f"sb3_ppo_{k}": v for k, v in theirs.items()})
    gain_ours = ours["final_return"] - ours["untrained_return"]
    gain_theirs = theirs["final_return"] - theirs["untrained_return"]
    fig["robotrl_ppo_return_gain"] = gain_ours
    fig["sb3_ppo_return_gain"] = gain_theirs
    fig["ratio_return_gain_robotrl_vs_sb3"] = gain_ours / gain_theirs if gain_theirs > 0 else float("inf")
    fig["ratio_env_steps_robotrl_vs_sb3"] = ours["env_steps"] / max(theirs["env_steps"], 1)
    path = save("learning", fig, merge=False)
    rows = [(k, f"{v:,.3f}" if isinstance(v, float) else str(v)) for k, v in fig.items()]
    print(table(rows, f"Humanoid learning, {args.budget:.0f} s per learner (saved to {path})"))


if __name__ == "__main__":
    main()
