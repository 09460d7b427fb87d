"""Throughput: robotrl against gymnasium, SB3, EnvPool and raw mujoco.batch, in one run.

    python benchmarks/throughput.py                  # about 5 minutes on 2 cores
    python benchmarks/throughput.py --num-envs 256 --seconds 10
    python benchmarks/throughput.py --quick          # smoke run (about 1 minute, temp dir)
    python benchmarks/throughput.py --overhead-only  # VecEnv / raw mujoco.batch at 64 and 256 worlds only

Env stepping uses gymnasium's humanoid XML *with its own options* (PGS, RK4) and frame
skip 5, random actions, and the same observation work everywhere: gymnasium Humanoid-v5's
348-d observation, which needs ``cfrc_ext`` (``mj_rnePostConstraint``). Rows:

* gymnasium ``Humanoid-v5``, one env; SB3 ``DummyVecEnv(8)`` of it; EnvPool ``Humanoid-v5``.
* raw ``mujoco.batch``: a hand-written numpy loop (bind, step, concatenate obs, reset falls).
* robotrl VecEnv (``task=humanoid task.gym_model=true task.gym_obs=true task.healthy_z=[1.0,2.0]``,
  no randomization, noise or delay): torch tensors, rewards, autoreset, episode statistics on top.
  These two are timed *interleaved* (alternating 20-step calls, ``--seconds`` each), so both
  see the same machine load, at ``--num-envs`` and at each of ``--overhead-envs`` (64 and 256):
  keys ``..._steps_per_s`` / ``ratio_robotrl_vs_mujoco_batch`` and ``..._256``. The ops per
  ``TaskEnv.step`` behind that ratio: ``benchmarks/ops_profile.py``.
* robotrl VecEnv on the composed ``task=humanoid`` config (Newton + implicit-fast,
  proprioceptive obs, randomization, action delay, observation noise): the env the PPO rows train on.

End to end, training env steps per second of wall-clock, each for ``--train-seconds``:

* robotrl PPO: ``robotrl train task=humanoid`` composed once through Hydra (``common.compose_train``).
* SB3 PPO through robotrl's SB3 adapter, on the *same* composed config object (same task,
  worlds, threads, seed, budget) with its PPO settings mapped from it (``common.sb3_ppo``).
* SB3 PPO on gymnasium ``Humanoid-v5`` (DummyVecEnv(8)): the same PPO settings and rollout
  size (``num_steps x num_envs`` steps per update), gymnasium's env with SB3's ``Monitor``.

Every training row uses the composed config's ``torch_threads`` (robotrl's runner sets it).

A row that cannot run (EnvPool not installed, say) is printed and saved as ``missing: <why>``.
Results: ``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RESULTS_DIR,
    compose_train,
    fmt,
    load_avg,
    missing,
    save,
    sb3_budget,
    sb3_ppo,
    table,
    timed,
)

FRAME_SKIP = 5
GYM_HEALTHY_Z = (1.0, 2.0)  # gymnasium Humanoid-v5's healthy torso heights


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


def envpool_rate(seconds: float, n: int, threads: int) -> float:
    try:
        import envpool
    except ImportError as err:
        raise ImportError("envpool is not installed: pip install 'robotrl[bench]' "
                          "(envpool >= 1.2.5 needs Python >= 3.11)") from err

    env = envpool.make("Humanoid-v5", env_type="gymnasium", num_envs=n, batch_size=n, num_threads=threads, seed=0)
    env.reset()
    rng = np.random.default_rng(0)

    def run() -> int:
        for _ in range(20):
            env.step(rng.uniform(-0.4, 0.4, (n, 17)).astype(np.float32))
        return 20 * n

    return timed(run, seconds)


def raw_batch_run(n: int, threads: int, task_cfg: Any) -> Callable[[], int]:
    """What a user writes by hand on mujoco.batch: same model, same observation work (20 steps per call)."""
    import mujoco.batch as mjb
    from robotrl.tasks.humanoid.task import HumanoidTask

    model = HumanoidTask(task_cfg, 1, torch.device("cpu")).build_model()
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
            fallen = np.flatnonzero((qpos[:, 2] < GYM_HEALTHY_Z[0]) | (qpos[:, 2] > GYM_HEALTHY_Z[1]))
            if fallen.size:
                batch.reset(ids=fallen)
        assert obs.shape == (n, 348)
        return 20 * n

    return run


def robotrl_env_run(cfg: Any, prepare: Callable[[Any], None] | None = None) -> Callable[[], int]:
    """``TaskEnv`` on ``cfg`` with random actions (20 steps per call); ``prepare(env)`` runs once after the reset."""
    from robotrl.envs.task_env import TaskEnv

    torch.set_num_threads(cfg.torch_threads)  # what robotrl's runners use on CPU
    n = cfg.sim.num_envs
    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    if prepare is not None:
        prepare(env)
    gen = torch.Generator().manual_seed(0)

    def run() -> int:
        for _ in range(20):
            env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
        return 20 * n

    return run


def interleaved(runs: dict[str, Callable[[], int]], seconds: float, warmup: int = 3) -> dict[str, float]:
    """Steps/s of each ``run``, timed in alternating calls for ``seconds`` each, so all see the same load.

    On a shared machine a load change between two back-to-back rows moves their ratio; here the
    rows take turns every call (20 env steps), and a ratio compares like with like.
    """
    for run in runs.values():
        for _ in range(warmup):
            run()
    steps = dict.fromkeys(runs, 0)
    spent = dict.fromkeys(runs, 0.0)
    while min(spent.values()) < seconds:
        for key, run in runs.items():
            start = time.perf_counter()
            steps[key] += run()
            spent[key] += time.perf_counter() - start
    return {key: steps[key] / spent[key] for key in runs}


def overhead_pair(fig: dict[str, Any], n: int, th: int, seconds: float, suffix: str) -> None:
    """Raw ``mujoco.batch`` and the gym-matched VecEnv at ``n`` worlds, interleaved; their ratio."""
    raw_key, env_key = f"mujoco_batch_raw_steps_per_s{suffix}", f"robotrl_vecenv_steps_per_s{suffix}"
    print(f"{raw_key} and {env_key} (interleaved) ...", flush=True)
    try:
        cfg = compose_train(gym_matched_overrides(n, th))[0]
        torch.set_num_threads(cfg.torch_threads)  # what robotrl's runners use on CPU
        rates = interleaved({raw_key: raw_batch_run(n, th, cfg.task), env_key: robotrl_env_run(cfg)}, seconds)
        fig.update(rates)
    except Exception as err:  # reported in the table and the JSON; the script exits non-zero
        traceback.print_exc()
        fig[raw_key] = fig[env_key] = missing(f"{type(err).__name__}: {err}")
        fig["rows_failed"] = fig.get("rows_failed", 0) + 1
    fig[f"ratio_robotrl_vs_mujoco_batch{suffix}"] = ratio(fig, env_key, raw_key)


def gym_matched_overrides(n: int, th: int) -> list[str]:
    """``robotrl train`` overrides of the VecEnv compared with raw mujoco.batch: gymnasium's model, obs and falls.

    The fall heights matter to the physics cost: the task's default ``[0.8, 2.1]`` keeps fallen
    bodies longer on the floor (about 20% more constraint rows than gymnasium's ``[1.0, 2.0]``).
    """
    return ["task=humanoid", f"sim.num_envs={n}", f"sim.nthread={th}", "task.gym_model=true", "task.gym_obs=true",
            "task.randomize=false", "task.obs_noise_std=0", "task.action_delay_max=0",
            f"task.healthy_z=[{GYM_HEALTHY_Z[0]},{GYM_HEALTHY_Z[1]}]"]


def robotrl_ppo(cfg: Any, config_yaml: str) -> float:
    from robotrl.runners import make_runner

    runner = make_runner(cfg, tempfile.mkdtemp(prefix="bench_ppo_"), config_yaml=config_yaml)
    start = time.perf_counter()
    runner.learn()
    return runner.env_steps / (time.perf_counter() - start)


def sb3_ppo_rate(cfg: Any, venv: Any) -> float:
    """SB3 PPO with ``cfg``'s settings on ``venv`` for ``cfg.max_time_s``; trained env steps per second."""
    model, _ = sb3_ppo(cfg, venv)
    budget = sb3_budget(cfg)
    start = time.perf_counter()
    model.learn(total_timesteps=10**12, callback=budget)
    return budget.trained_steps / (time.perf_counter() - start)


def sb3_ppo_adapter(cfg: Any) -> float:
    from robotrl.envs.adapters import make_sb3_vec_env
    from robotrl.envs.task_env import TaskEnv

    torch.set_num_threads(cfg.torch_threads)  # the same as robotrl PPO
    return sb3_ppo_rate(cfg, make_sb3_vec_env(TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)))


def sb3_ppo_gymnasium(cfg: Any, n: int = 8) -> float:
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(cfg.torch_threads)  # the same as robotrl PPO
    return sb3_ppo_rate(cfg, DummyVecEnv([lambda: Monitor(gym.make("Humanoid-v5"))] * n))


def measure(fig: dict[str, Any], key: str, fn: Callable[[], float]) -> None:
    """``fig[key] = fn()``, or ``missing: <why>`` when the row cannot run."""
    print(f"{key} ...", flush=True)
    try:
        fig[key] = fn()
    except ImportError as err:
        hint = "" if "robotrl[" in str(err) else " (pip install 'robotrl[bench]')"
        fig[key] = missing(f"{err}{hint}")
    except Exception as err:  # a crash is reported in the table and the JSON, and the script exits non-zero
        traceback.print_exc()
        fig[key] = missing(f"{type(err).__name__}: {err}")
        fig["rows_failed"] = fig.get("rows_failed", 0) + 1


def ratio(fig: dict[str, Any], num: str, den: str) -> float | str:
    a, b = fig[num], fig[den]
    if isinstance(a, str) or isinstance(b, str):
        return missing(f"needs both {num} and {den}")
    return a / b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=8.0, help="timing window per env row")
    parser.add_argument("--train-seconds", type=float, default=60.0, help="wall-clock per training row")
    parser.add_argument("--out", default="", help="results folder (default benchmarks/results)")
    parser.add_argument("--overhead-envs", type=int, nargs="+", default=[64, 256],
                        help="world counts of the interleaved raw mujoco.batch / VecEnv pairs (besides --num-envs)")
    parser.add_argument("--overhead-only", action="store_true",
                        help="only the raw mujoco.batch / VecEnv pairs (a minute or two)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 16 worlds, 1 s env rows, 5 s training rows")
    args = parser.parse_args()
    if args.quick:
        args.num_envs, args.seconds, args.train_seconds, args.overhead_envs = 16, 1.0, 5.0, [16]
        args.out = args.out or tempfile.mkdtemp(prefix="bench_throughput_quick_")
    n, th, s = args.num_envs, args.threads, args.seconds

    overrides = ["task=humanoid", f"sim.num_envs={n}", f"sim.nthread={th}", f"max_time_s={args.train_seconds}",
                 "max_iterations=1000000000", "progress=false", "tensorboard=false", "save_interval=1000000000",
                 "eval_at_end=false"]
    cfg, config_yaml, config_hash = compose_train(overrides)
    _, _, gym_hash = compose_train([*overrides, *gym_matched_overrides(n, th)[3:]])
    fig: dict[str, Any] = {"num_envs": n, "threads": th, "frame_skip": FRAME_SKIP, "env_row_seconds": s,
                           "train_row_seconds": args.train_seconds, "compose_overrides": " ".join(overrides),
                           "config_hash": config_hash, "robotrl_vecenv_gym_matched_config_hash": gym_hash,
                           "torch_threads_training_rows": cfg.torch_threads, **load_avg("at_start")}
    pairs = sorted({n, *args.overhead_envs})
    for m in pairs:
        overhead_pair(fig, m, th, s, "" if m == n else f"_{m}")
    fig["overhead_pair_envs"] = " ".join(map(str, pairs))
    fig.update(load_avg("after_overhead_pairs"))
    if not args.overhead_only:
        measure(fig, "gymnasium_single_steps_per_s", lambda: gym_single(s))
        measure(fig, "sb3_dummyvecenv8_steps_per_s", lambda: sb3_dummy(s))
        measure(fig, "envpool_steps_per_s", lambda: envpool_rate(s, n, th))
        measure(fig, "robotrl_vecenv_composed_task_steps_per_s", lambda: timed(robotrl_env_run(cfg), s))
        measure(fig, "robotrl_ppo_train_steps_per_s", lambda: robotrl_ppo(cfg, config_yaml))
        measure(fig, "sb3_ppo_adapter_train_steps_per_s", lambda: sb3_ppo_adapter(cfg))
        measure(fig, "sb3_ppo_gymnasium_train_steps_per_s", lambda: sb3_ppo_gymnasium(cfg))
        finish_ratios(fig)
    path = save("throughput", fig, out_dir=args.out or RESULTS_DIR)  # merged: keeps ops_profile.py's keys
    print(table([(k, fmt(v)) for k, v in fig.items()], f"Humanoid throughput, {n} worlds, {th} threads"))
    ratios = {m: fig["ratio_robotrl_vs_mujoco_batch" + ("" if m == n else f"_{m}")] for m in pairs}
    print("VecEnv / raw mujoco.batch (interleaved, same run): "
          + ", ".join(f"{m} worlds {fmt(r)}" for m, r in ratios.items())
          + f"; 1-min load average {fig['load_avg_1min_at_start']:.2f} at start, "
          + f"{fig['load_avg_1min_after_overhead_pairs']:.2f} after the pairs")
    print(f"saved {path}")
    return 1 if fig.get("rows_failed") else 0


def finish_ratios(fig: dict[str, Any]) -> None:
    """The ratios between the rows other than the overhead pairs."""
    fig["ratio_robotrl_vs_envpool"] = ratio(fig, "robotrl_vecenv_steps_per_s", "envpool_steps_per_s")
    fig["ratio_robotrl_vs_gymnasium_single"] = ratio(fig, "robotrl_vecenv_steps_per_s", "gymnasium_single_steps_per_s")
    fig["ratio_robotrl_ppo_vs_sb3_ppo_adapter"] = ratio(fig, "robotrl_ppo_train_steps_per_s",
                                                        "sb3_ppo_adapter_train_steps_per_s")
    fig["ratio_robotrl_ppo_vs_sb3_ppo_gymnasium"] = ratio(fig, "robotrl_ppo_train_steps_per_s",
                                                          "sb3_ppo_gymnasium_train_steps_per_s")


if __name__ == "__main__":
    sys.exit(main())
