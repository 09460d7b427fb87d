"""Does overlapping the PPO update with the next rollout pay on this machine? Serial against threaded, in one run.

    flock /tmp/robotrl-cpu.lock python benchmarks/overlap.py          # about 2 minutes on 2 cores
    python benchmarks/overlap.py --quick                               # smoke run (temp dir)

Issue 10 lists "the learner and the simulator overlap instead of taking turns" as a way to use
2 cores. Before building a lagged-policy collector, this measures the ceiling of that idea on
each task's composed ``robotrl train task=<task>`` config (``--num-envs`` worlds):

* ``serial``: one rollout of ``algo.num_steps`` steps, then the PPO update on it (what the
  runner does);
* ``overlap``: the update of rollout k in a second thread while the main thread collects
  rollout k+1 with a copy of the policy (the one-iteration policy lag such a collector has),
  with the update on 1 or 2 torch threads.

Both arms do the same work per iteration and are timed interleaved (``--iterations`` each,
alternating), so they see the same machine load. Also recorded: how many cores each phase keeps
busy on its own (process CPU time over wall-clock). The learning effect of the lag is not
measured: if the time ratio is not above 1 there is nothing to buy. Results:
``benchmarks/results/overlap.json`` (keys ``<task>_serial_s_per_iteration``,
``<task>_overlap_update<k>threads_s_per_iteration``, ``<task>_ratio_overlap_update<k>threads_vs_serial``).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compose_train, fmt, interleaved, load_avg, save, table  # noqa: E402

from robotrl.runners import make_runner  # noqa: E402


def busy_cores(fn) -> tuple[float, float]:  # noqa: ANN001 - a callable
    """``(wall seconds, cores busy)`` of one call: process CPU time over wall-clock."""
    t0, c0 = time.perf_counter(), os.times()
    fn()
    t1, c1 = time.perf_counter(), os.times()
    return t1 - t0, ((c1.user - c0.user) + (c1.system - c0.system)) / (t1 - t0)


def measure(task: str, args: argparse.Namespace) -> dict:
    cfg, config_yaml, _ = compose_train([f"task={task}", f"sim.num_envs={args.num_envs}", "progress=false",
                                         "tensorboard=false"])
    runner = make_runner(cfg, tempfile.mkdtemp(prefix="bench_overlap_"), config_yaml=config_yaml)
    env, algo = runner.env, runner.algo
    state = {"obs": env.reset()}

    def collect(learner) -> None:  # noqa: ANN001 - a PPO
        learner.storage.clear()
        obs = state["obs"]
        for _ in range(cfg.algo.num_steps):
            action = learner.act(obs)
            obs, reward, terminated, truncated, info = env.step(action)
            learner.process_step(obs, reward, terminated, truncated, info)
        state["obs"] = obs

    def update(learner) -> None:  # noqa: ANN001 - a PPO
        with runner.update_threads():
            learner.update(state["obs"])

    for _ in range(3):  # warm up: caches, allocator, the adaptive learning rate
        collect(algo)
        update(algo)
    collect(algo)
    snapshot = copy.deepcopy(algo)  # a full rollout to update on, copied fresh for every timed update
    out: dict = {}
    wall_c, out[f"{task}_collect_cores_busy"] = busy_cores(lambda: collect(copy.deepcopy(snapshot)))
    learner = copy.deepcopy(snapshot)
    wall_u, out[f"{task}_update_cores_busy"] = busy_cores(lambda: update(learner))
    out[f"{task}_collect_s"], out[f"{task}_update_s"] = wall_c, wall_u

    def serial() -> None:
        learner = copy.deepcopy(snapshot)
        collect(copy.deepcopy(snapshot))
        update(learner)

    def overlap(threads: int) -> None:
        learner = copy.deepcopy(snapshot)
        runner._update_threads = threads
        worker = threading.Thread(target=update, args=(learner,))
        worker.start()
        collect(copy.deepcopy(snapshot))
        worker.join()

    arms = {"serial": serial, "overlap_update1threads": lambda: overlap(1),
            "overlap_update2threads": lambda: overlap(2)}
    resolved = runner._update_threads

    def restore() -> None:
        runner._update_threads = resolved

    times, _ = interleaved(arms, rounds=args.iterations, after_each=restore)
    for name in arms:
        out[f"{task}_{name}_s_per_iteration"] = times[name] / args.iterations
    for name in arms:
        if name != "serial":
            out[f"{task}_ratio_{name}_vs_serial"] = times["serial"] / times[name]
    out[f"{task}_num_steps"] = cfg.algo.num_steps
    out[f"{task}_torch_threads_collect"] = torch.get_num_threads()
    out[f"{task}_update_threads_serial"] = resolved
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["humanoid", "tool_use", "driving"])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=20, help="timed iterations per arm and task")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 iterations, results in a temp dir")
    args = p.parse_args()
    if args.quick:
        args.iterations = 2
    fig: dict = {"num_envs": args.num_envs, "iterations_per_arm": args.iterations, **load_avg("at_start")}
    for task in args.tasks:
        print(f"{task}: serial against overlapped iterations, {args.num_envs} worlds ...", flush=True)
        fig |= measure(task, args)
    fig |= load_avg("at_end")
    print(table([(k, fmt(v)) for k, v in fig.items()], f"update/collection overlap, {args.num_envs} worlds"))
    print(f"wrote {save('overlap', fig, out_dir=tempfile.mkdtemp() if args.quick else None)}")


if __name__ == "__main__":
    main()
