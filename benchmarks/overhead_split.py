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
from common import compose_train, interleaved, load_avg, save, table  # noqa: E402
from throughput import gym_matched_overrides, raw_batch_run, robotrl_env_run  # noqa: E402

SECTIONS = (("sim", "step"), ("task", "apply_action"), ("task", "update"), ("task", "reward_terms"),
            ("task", "terminated"), ("env", "_scale_terms"), ("env", "_observe"), ("env", "_all_finite"),
            ("env", "_finish_episodes"), ("env", "_reset_ids"), ("task", "reset"), ("sim", "reset"))


def _timed(inner: Callable[..., Any], spent: dict[str, float], calls: dict[str, int], label: str) -> Callable[..., Any]:
    """``inner`` with each call's wall time added to ``spent[label]`` and counted in ``calls[label]``."""
    spent[label], calls[label] = 0.0, 0

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - start
            calls[label] += 1

    return timed


def _compile_task(env: Any) -> None:
    """The task's ``observe``, ``reward_terms`` and ``terminated`` through ``torch.compile`` (module docstring)."""
    for name in ("observe", "reward_terms", "terminated"):
        setattr(env.task, name, torch.compile(getattr(env.task, name), dynamic=False))


def _time_sections(env: Any, spent: dict[str, float], calls: dict[str, int]) -> None:
    """Every method of ``SECTIONS`` on ``env`` wrapped by ``_timed``."""
    owners = {"env": env, "task": env.task, "sim": env.sim}
    for owner, method in SECTIONS:
        target = owners[owner]
        label = f"{type(target).__name__}.{method}"
        setattr(target, method, _timed(getattr(target, method), spent, calls, label))


def split(n: int, threads: int, seconds: float, compile_task: bool) -> dict[str, float]:
    """Interleaved 20-step calls of each arm for ``seconds`` each: steps/s, physics and other ms per step."""
    import mujoco.batch as mjb

    cfg = compose_train(gym_matched_overrides(n, threads))[0]
    runs: dict[str, Callable[[], int]] = {"raw": raw_batch_run(n, threads, cfg.task), "vecenv": robotrl_env_run(cfg)}
    out: dict[str, float] = {}
    if compile_task:
        runs["vecenv_compiled"] = robotrl_env_run(cfg, prepare=_compile_task)
        start = time.perf_counter()
        runs["vecenv_compiled"]()  # the first call compiles
        out[f"vecenv_compiled_{n}_compile_warmup_s"] = time.perf_counter() - start
    for run in runs.values():  # warm-up
        run()
    physics: dict[str, float] = {}
    orig_step = mjb.Batch.step
    mjb.Batch.step = _timed(orig_step, physics, {}, "now")  # MuJoCo's batched step, for whichever arm runs
    arms = {}
    for name, run in runs.items():
        physics[name] = 0.0

        def arm(run: Callable[[], int] = run, name: str = name) -> None:
            before = physics["now"]
            run()
            physics[name] += physics["now"] - before

        arms[name] = arm
    try:
        wall, calls = interleaved(arms, seconds=seconds)
    finally:
        mjb.Batch.step = orig_step
    for name in runs:
        steps = 20 * calls[name]  # vectorized steps (20 per call)
        out[f"{name}_{n}_steps_per_s"] = steps * n / wall[name]
        out[f"{name}_{n}_physics_ms"] = 1e3 * physics[name] / steps
        out[f"{name}_{n}_other_ms"] = 1e3 * (wall[name] - physics[name]) / steps
    for name in runs:
        if name != "raw":
            out[f"ratio_{name}_vs_raw_{n}"] = out[f"{name}_{n}_steps_per_s"] / out[f"raw_{n}_steps_per_s"]
    return out


def sections(n: int, threads: int, steps: int) -> dict[str, float]:
    """Milliseconds per VecEnv step inside each of ``SECTIONS`` (nested ones overlap), and calls per step."""
    cfg = compose_train(gym_matched_overrides(n, threads))[0]
    spent: dict[str, float] = {}
    calls: dict[str, int] = {}
    run = robotrl_env_run(cfg, prepare=lambda env: _time_sections(env, spent, calls))
    for _ in range(3):  # warm-up
        run()
    spent.update(dict.fromkeys(spent, 0.0))
    calls.update(dict.fromkeys(calls, 0))
    start, done = time.perf_counter(), 0
    while done < steps:
        done += run() // n
    out = {f"sections_{n}_step_total_ms": 1e3 * (time.perf_counter() - start) / done}
    for label in spent:
        out[f"sections_{n}_{label}_ms"] = 1e3 * spent[label] / done
        out[f"sections_{n}_{label}_calls_per_step"] = calls[label] / done
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

    fig: dict[str, Any] = {**load_avg("at_start"), "threads": args.threads, "seconds_per_arm": args.seconds}
    for n in args.envs:
        fig.update(split(n, args.threads, args.seconds, args.compile))
    if args.sections:
        for n in args.envs:
            fig.update(sections(n, args.threads, args.section_steps))
    fig.update(load_avg("at_end"))
    rows = [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in fig.items()]
    print(table(rows, "VecEnv overhead, split per step (ms) and rate"))
    path = save("throughput", {f"split_{args.label}_{k}": v for k, v in fig.items()}, out_dir=args.out or None)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
