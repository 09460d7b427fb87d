"""Torch ops per ``TaskEnv.step``: the deterministic half of the VecEnv-overhead figure.

    python benchmarks/ops_profile.py                 # about a minute on 2 cores (use the CPU lock)
    python benchmarks/ops_profile.py --steps 400 --num-envs 256
    python benchmarks/ops_profile.py --label after --gym-healthy-z 0.8 2.1   # ops_before_*'s settings

Timings on a shared machine move with its load; op counts do not. This script steps the two
humanoid envs of ``benchmarks/throughput.py`` (the gymnasium-matched one that is compared
with raw ``mujoco.batch``, and the composed ``task=humanoid`` one) with fixed random actions
and a fixed seed, and counts:

* ``dispatched``: aten ops that reach torch's dispatcher from Python (``TorchDispatchMode``),
  one per eager kernel launch the step pays for;
* ``profiled``: every ``aten::`` event of ``torch.profiler``, nested ones included
  (``aten::to`` -> ``aten::_to_copy`` -> ``aten::copy_`` counts three).

Both are per env step (all worlds), as the mean over ``--steps`` steps (autoresets included)
and for a step without an autoreset (the fewest in the run). The time the step spends outside
``sim.step`` (torch and Python work, microseconds per step) is printed for reference only: it
depends on the load. So does ``observe_reward_after_physics_us`` against ``observe_reward_again_us``:
the task's observation and reward ops timed right after ``sim.step`` and then at once again on
the same state; and ``observe_reward_after_<g>ms_busy_wait_us``: the same ops after a busy-wait of
``g`` ms and no physics (medians), which separates what the physics leaves behind from what any
gap of that length costs on this machine.
Results are merged into ``benchmarks/results/throughput.json`` under
``ops_<label>_*`` keys (``--label before|after``; the file's other keys are kept), so a
before/after pair sits side by side. ``ops_before_*`` was measured at commit 7e1ea4d, whose
gym-matched env still had the task's fall heights (0.8, 2.1): falls, and so autoresets, are
rarer there than with gymnasium's (1.0, 2.0), so compare it with a run of those settings.
``ops_before2_*`` (commit d215791) and ``ops_after2_*`` (the humanoid's signal buffers and
``step`` under ``torch.no_grad()``) both use gymnasium's fall heights.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS_DIR, compose_train, load_avg, table  # noqa: E402
from throughput import gym_matched_overrides  # noqa: E402

from robotrl.envs.task_env import TaskEnv  # noqa: E402


class _Counter(TorchDispatchMode):
    """Counts the aten overloads dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:  # noqa: ANN401
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


def _actions(env: TaskEnv, steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1 for _ in range(steps)]


def profile_env(cfg: Any, steps: int) -> dict[str, float]:
    """Op counts and the non-physics time of ``steps`` env steps of the composed config ``cfg``."""
    torch.set_num_threads(cfg.torch_threads)
    figures: dict[str, float] = {}

    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    per_step, total = [], collections.Counter()
    for action in _actions(env, steps):
        with _Counter() as counter:
            env.step(action)
        per_step.append(sum(counter.ops.values()))
        total.update(counter.ops)
    figures["dispatched_per_step"] = sum(per_step) / steps
    figures["dispatched_per_step_no_reset"] = float(min(per_step))
    top = total.most_common(8)

    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    actions = _actions(env, steps)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for action in actions:
            env.step(action)
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    figures["profiled_per_step"] = sum(e.count for e in events) / steps

    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    sim_time = [0.0]
    sim_step = env.sim.step

    def timed_sim_step(nstep: int = 1) -> torch.Tensor:
        start = time.perf_counter()
        out = sim_step(nstep)
        sim_time[0] += time.perf_counter() - start
        return out

    env.sim.step = timed_sim_step  # type: ignore[method-assign]
    actions = _actions(env, steps)
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    wall = time.perf_counter() - start
    figures["non_physics_us_per_step"] = 1e6 * (wall - sim_time[0]) / steps
    figures["physics_us_per_step"] = 1e6 * sim_time[0] / steps
    figures.update(after_physics_cost(cfg, steps))
    figures.update(gap_cost(cfg, steps))
    print("most dispatched ops:", ", ".join(f"{k} {v / steps:.1f}" for k, v in top))
    return figures


def after_physics_cost(cfg: Any, steps: int) -> dict[str, float]:
    """Microseconds of the task's ``observe`` + ``reward_terms`` right after physics, and at once again.

    Both passes do the same ops on the same state (neither changes it), so the difference is
    what running after ``sim.step`` costs. ``gap_cost`` shows that most of it is not MuJoCo's
    doing: the same ops after a busy-wait of the same length cost nearly as much.
    """
    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    task, passes = env.task, ([], [])
    for i, action in enumerate(_actions(env, steps)):
        if i % 50 == 0:
            env.reset()  # fallen bodies cost the physics less: keep the state like a training run's
        task.apply_action(action)
        env.sim.step(cfg.task.frame_skip)
        task.update(env.gen)
        for k in range(2):
            start = time.perf_counter()
            task.observe()
            task.reward_terms(action)
            passes[k].append(time.perf_counter() - start)
    return {"observe_reward_after_physics_us": 1e6 * sum(passes[0]) / steps,
            "observe_reward_again_us": 1e6 * sum(passes[1]) / steps,
            "observe_reward_after_physics_median_us": 1e6 * sorted(passes[0])[steps // 2],
            "observe_reward_again_median_us": 1e6 * sorted(passes[1])[steps // 2]}


def gap_cost(cfg: Any, steps: int, gaps_ms: tuple[float, ...] = (0.0, 1.0, 3.0, 7.0)) -> dict[str, float]:
    """Median microseconds of ``observe`` + ``reward_terms`` after a busy-wait of each gap, no physics between.

    The state is a training-like one (a few physics steps after a reset) and never changes, so the
    passes differ only in how long the process did something else first. A busy-wait touches
    almost no memory: what it costs the ops that follow is what the machine (other tenants of a
    VM, the hypervisor) evicts from the core meanwhile. Compare ``after_physics``, a physics step
    of about 7 ms at 64 worlds.
    """
    env = TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)
    env.reset()
    task = env.task
    for action in _actions(env, 10):
        env.step(action)
    action = _actions(env, 1)[0]
    figures = {}
    for gap in gaps_ms:
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            while time.perf_counter() - start < gap / 1e3:
                pass
            start = time.perf_counter()
            task.observe()
            task.reward_terms(action)
            times.append(time.perf_counter() - start)
        figures[f"observe_reward_after_{gap:g}ms_busy_wait_us"] = 1e6 * sorted(times)[len(times) // 2]
    return figures


def merge_keys(path: Path, figures: dict[str, Any]) -> Path:
    """Add ``figures`` to the JSON at ``path``, keeping its other keys (its date and load belong to its own run)."""
    old = json.loads(path.read_text()) if path.exists() else {}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**old, **figures}, indent=2, sort_keys=True) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--steps", type=int, default=200, help="env steps counted per env")
    parser.add_argument("--label", default="after", help="key infix, e.g. before or after a change")
    parser.add_argument("--gym-healthy-z", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                        help="fall heights of the gym-matched env (default throughput.py's, gymnasium's 1.0 2.0; "
                             "0.8 2.1 is the task default that ops_before_* was measured with)")
    parser.add_argument("--out", default="", help="results folder (default benchmarks/results)")
    args = parser.parse_args()
    cfg, _, _ = compose_train(["task=humanoid", f"sim.num_envs={args.num_envs}", f"sim.nthread={args.threads}"])
    gym = gym_matched_overrides(args.num_envs, args.threads)
    if args.gym_healthy_z:
        gym = [o for o in gym if not o.startswith("task.healthy_z=")]
        gym.append(f"task.healthy_z=[{args.gym_healthy_z[0]},{args.gym_healthy_z[1]}]")
    gym_cfg, _, _ = compose_train(gym)
    fig: dict[str, Any] = {f"ops_{args.label}_num_envs": args.num_envs, f"ops_{args.label}_steps": args.steps,
                           **{f"ops_{args.label}_{k}": v for k, v in load_avg("at_start").items()},
                           f"ops_{args.label}_date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                               timespec="seconds"),
                           f"ops_{args.label}_torch_version": torch.__version__,
                           f"ops_{args.label}_gym_matched_overrides": " ".join(gym)}
    for name, c in (("gym_matched", gym_cfg), ("composed", cfg)):
        print(f"{name} ...", flush=True)
        for key, value in profile_env(c, args.steps).items():
            fig[f"ops_{args.label}_{name}_{key}"] = value
    path = merge_keys(Path(args.out or RESULTS_DIR) / "throughput.json", fig)
    print(table([(k, f"{v:,.1f}" if isinstance(v, float) else str(v)) for k, v in fig.items()],
                f"Torch ops per TaskEnv.step, humanoid, {args.num_envs} worlds"))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
