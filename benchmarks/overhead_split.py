"""VecEnv overhead, split: physics against everything else per step, raw ``mujoco.batch`` against the VecEnv.

    flock /tmp/robotrl-cpu.lock python benchmarks/overhead_split.py            # about 2 minutes on 2 cores
    flock /tmp/robotrl-cpu.lock python benchmarks/overhead_split.py --compile  # + a torch.compile arm
    flock /tmp/robotrl-cpu.lock python benchmarks/overhead_split.py --sections # + the VecEnv step by method

``benchmarks/throughput.py --overhead-only`` gives the ratio issue 10 sets targets on (0.9x at 64 worlds, 0.95x
at 256). This script says where the gap lies. The same two loops as that ratio (``throughput.raw_batch_run``
and ``throughput.robotrl_env_run``, the gymnasium-matched humanoid), timed interleaved in 20-step calls, with
``mujoco.batch.Batch.step`` wrapped in a timer: per env step (all worlds), the milliseconds inside MuJoCo's
batched step (``physics_ms``) and outside it (``other_ms``: the raw loop's observation concatenation and
resets; the VecEnv's torch work, rewards, episode statistics, reset noise and the forward of reset worlds).

``--compile`` adds a third arm: the VecEnv with the task's ``observe``, ``reward_terms`` and ``terminated``
wrapped in ``torch.compile`` (inductor, C++ on the CPU; ``dynamic=False``), the fusion issue 10 names as a
candidate. Its compile time is measured apart (``compile_warmup_s``) and not counted in the rate.

``--sections`` then steps the VecEnv alone (``--section-steps`` steps after a warm-up) with the methods a step
calls wrapped in timers: milliseconds per step in each (``sections_<n>_<method>_ms``) and calls per step. The
sections nest: ``TaskEnv._reset_ids`` holds ``HumanoidTask.reset``, which holds ``CpuBatchSim.reset`` (the state
rows and the forward of the reset worlds); the wrappers add a few microseconds per call.

Results are merged into ``benchmarks/results/throughput.json`` under ``split_<label>_*`` keys.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compose_train, load_avg, save, table  # noqa: E402
from throughput import gym_matched_overrides, raw_batch_run  # noqa: E402


class _PhysicsClock:
    """Wraps ``mujoco.batch.Batch.step`` so every call's wall time adds to ``seconds``."""

    def __init__(self) -> None:
        import mujoco.batch as mjb

        self.seconds = 0.0
        self._orig = mjb.Batch.step
        clock = self

        def step(batch: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return clock._orig(batch, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - start

        mjb.Batch.step = step


def env_run(cfg: Any, compile_task: bool) -> tuple[Callable[[], int], float]:
    """``TaskEnv`` on ``cfg`` with random actions (20 steps per call), and the seconds its first 3 calls took."""
    from robotrl.envs.task_env import TaskEnv

    n = cfg.sim.num_envs
    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    if compile_task:
        for name in ("observe", "reward_terms", "terminated"):
            setattr(env.task, name, torch.compile(getattr(env.task, name), dynamic=False))
    gen = torch.Generator().manual_seed(0)

    def run() -> int:
        for _ in range(20):
            env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
        return 20 * n

    start = time.perf_counter()
    for _ in range(3):  # warm-up (and, compiled, the compilation)
        run()
    return run, time.perf_counter() - start


def split(n: int, threads: int, seconds: float, compile_task: bool, clock: _PhysicsClock) -> dict[str, float]:
    """Interleaved 20-step calls of each arm for ``seconds`` each: steps/s, physics and other ms per step."""
    cfg = compose_train(gym_matched_overrides(n, threads))[0]
    torch.set_num_threads(cfg.torch_threads)  # what robotrl's runners use on CPU
    arms: dict[str, Callable[[], int]] = {"raw": raw_batch_run(n, threads, cfg.task)}
    arms["raw"]()
    out: dict[str, float] = {}
    arms["vecenv"], _ = env_run(cfg, False)
    if compile_task:
        arms["vecenv_compiled"], out[f"vecenv_compiled_{n}_compile_warmup_s"] = env_run(cfg, True)
    steps = dict.fromkeys(arms, 0)
    wall = dict.fromkeys(arms, 0.0)
    physics = dict.fromkeys(arms, 0.0)
    while min(wall.values()) < seconds:
        for name, run in arms.items():
            clock.seconds = 0.0
            start = time.perf_counter()
            steps[name] += run()
            wall[name] += time.perf_counter() - start
            physics[name] += clock.seconds
    for name in arms:
        env_steps = steps[name] / n  # vectorized steps
        out[f"{name}_{n}_steps_per_s"] = steps[name] / wall[name]
        out[f"{name}_{n}_physics_ms"] = 1e3 * physics[name] / env_steps
        out[f"{name}_{n}_other_ms"] = 1e3 * (wall[name] - physics[name]) / env_steps
    for name in arms:
        if name != "raw":
            out[f"ratio_{name}_vs_raw_{n}"] = out[f"{name}_{n}_steps_per_s"] / out[f"raw_{n}_steps_per_s"]
    return out


SECTIONS = (("sim", "step"), ("task", "apply_action"), ("task", "update"), ("task", "reward_terms"),
            ("task", "terminated"), ("env", "_scale_terms"), ("env", "_observe"), ("env", "_all_finite"),
            ("env", "_finish_episodes"), ("env", "_reset_ids"), ("task", "reset"), ("sim", "reset"))


def sections(n: int, threads: int, steps: int) -> dict[str, float]:
    """Milliseconds per VecEnv step inside each of ``SECTIONS`` (nested ones overlap), and calls per step."""
    from robotrl.envs.task_env import TaskEnv

    cfg = compose_train(gym_matched_overrides(n, threads))[0]
    torch.set_num_threads(cfg.torch_threads)
    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    spent: dict[str, float] = {}
    calls: dict[str, int] = {}

    def wrap(owner: Any, method: str) -> None:
        label = f"{type(owner).__name__}.{method}"
        inner = getattr(owner, method)
        spent[label], calls[label] = 0.0, 0

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - start
                calls[label] += 1

        setattr(owner, method, timed)

    owners = {"env": env, "task": env.task, "sim": env.sim}
    for owner, method in SECTIONS:
        wrap(owners[owner], method)
    gen = torch.Generator().manual_seed(0)
    for _ in range(60):
        env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
    spent.update(dict.fromkeys(spent, 0.0))
    calls.update(dict.fromkeys(calls, 0))
    start = time.perf_counter()
    for _ in range(steps):
        env.step(torch.rand(n, env.num_actions, generator=gen) * 2 - 1)
    out = {f"sections_{n}_step_total_ms": 1e3 * (time.perf_counter() - start) / steps}
    for label in spent:
        out[f"sections_{n}_{label}_ms"] = 1e3 * spent[label] / steps
        out[f"sections_{n}_{label}_calls_per_step"] = calls[label] / steps
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=10.0, help="timing window per arm and world count")
    parser.add_argument("--compile", action="store_true", help="add the torch.compile arm (module docstring)")
    parser.add_argument("--sections", action="store_true", help="time the VecEnv's step by method (docstring)")
    parser.add_argument("--section-steps", type=int, default=1500)
    parser.add_argument("--label", default="run", help="key prefix: split_<label>_*")
    parser.add_argument("--out", default="", help="results folder (default benchmarks/results)")
    args = parser.parse_args()

    clock = _PhysicsClock()
    fig: dict[str, Any] = {**load_avg("at_start"), "threads": args.threads, "seconds_per_arm": args.seconds}
    for n in args.envs:
        fig.update(split(n, args.threads, args.seconds, args.compile, clock))
    if args.sections:
        for n in args.envs:
            fig.update(sections(n, args.threads, args.section_steps))
    fig.update(load_avg("at_end"))
    rows = [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in fig.items()]
    print(table(rows, "VecEnv overhead, split per step (ms) and rate"))
    path = save("throughput", {f"split_{args.label}_{k}": v for k, v in fig.items()},
                out_dir=args.out or None)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
