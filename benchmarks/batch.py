"""Scaling out on this machine: robotrl batch on Ray against one process, and DDP 2 ranks against 1.

    flock /tmp/robotrl-cpu.lock python benchmarks/batch.py            # about 4 minutes on 2 cores
    flock /tmp/robotrl-cpu.lock python benchmarks/batch.py --quick    # smoke run, temp dir

Batch rows: one eval job (a briefly trained humanoid checkpoint, ``--num-envs`` worlds and
``--episodes`` episodes per scenario, ``episode_length_s`` 2) over ``--scenarios`` scenarios,
the same scenario list and job object for every row:

* in one process with 1 simulation thread, and with 2 (``workers=0``, no Ray);
* as Ray tasks on a local instance (127.0.0.1) with 1 and with 2 workers of 1 thread each.

Every row is timed on a second pass over the scenarios, after a warm-up pass (for Ray it starts
the worker processes; their import time is reported separately as ``ray_*_first_pass_s``).
Overhead at equal cores: Ray 1 worker against 1 thread in-process, Ray 2 workers against
2 threads in-process. Every row's merged results are checked byte-identical.

DDP rows: ``robotrl train task=humanoid`` for ``--iterations`` PPO iterations at the same total
worlds: one process with ``2E`` worlds on 2 simulation threads, and ``torchrun`` with 2 ranks of
``E`` worlds on 1 thread each (gloo on loopback). Steps/s are env steps of all ranks over the
wall-clock between the first and the last logged iteration (the first is warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import save, table  # noqa: E402


def _train(run_dir: Path, iters: int, envs: int, threads: int, extra: list[str], torchrun: int = 0) -> float:
    args = ["-m", "robotrl.cli", "train", "task=humanoid", f"run_dir={run_dir}", f"max_iterations={iters}",
            f"sim.num_envs={envs}", f"sim.nthread={threads}", "progress=false", "tensorboard=false",
            "eval_at_end=false", "max_time_s=0", f"save_interval={iters}", *extra]
    if torchrun:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={torchrun}",
               "--master_addr=127.0.0.1", f"--master_port={port}", *args]
    else:
        cmd = [sys.executable, *args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-3000:])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return (rows[-1]["env_steps"] - rows[0]["env_steps"]) / (rows[-1]["time_s"] - rows[0]["time_s"])


def bench_batch(args: argparse.Namespace, tmp: Path) -> dict:
    from robotrl.cluster import EvalJob, grid, run_batch, write_results
    from robotrl.cluster.batch import init_ray

    ckpt = tmp / "ckpt"
    _train(ckpt, 2, 8, 1, ["algo.num_steps=8"])
    scenarios = grid({"episode_length_s": [2.0], "push_vel": [0.0, 0.5]}, seeds=list(range(args.scenarios // 2)))
    out: dict = {"batch_scenarios": len(scenarios), "batch_num_envs_per_scenario": args.num_envs,
                 "batch_episodes_per_scenario": args.episodes}
    files = []

    def timed(name: str, job: EvalJob, workers: int) -> None:
        t0 = time.perf_counter()
        results = run_batch(job, scenarios, workers=workers, threads=job.threads, progress=False)
        out[f"{name}_scenarios_per_s"] = len(scenarios) / (time.perf_counter() - t0)
        files.append(write_results(tmp / f"{name}.json", results, {"job": "eval"}).read_bytes())

    def job(threads: int) -> EvalJob:
        return EvalJob(checkpoint=str(ckpt), num_envs=args.num_envs, episodes=args.episodes, threads=threads)

    for threads in (1, 2):
        run_batch(job(threads), scenarios, workers=0, progress=False)  # warm-up pass, as for Ray
        timed(f"inprocess_{threads}thread{'s' if threads > 1 else ''}", job(threads), 0)
    for workers in (1, 2):
        t0 = time.perf_counter()
        ray = init_ray(workers)
        out[f"ray_{workers}w_start_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_batch(job(1), scenarios, workers=workers, progress=False)  # warm-up: starts the worker processes
        out[f"ray_{workers}w_first_pass_s"] = time.perf_counter() - t0
        timed(f"ray_{workers}w", job(1), workers)
        ray.shutdown()
    out["batch_results_identical_across_rows"] = all(f == files[0] for f in files)
    out["ray_1w_vs_inprocess_1thread_overhead_pct"] = 100 * (
        out["inprocess_1thread_scenarios_per_s"] / out["ray_1w_scenarios_per_s"] - 1)
    out["ray_2w_vs_inprocess_2threads_overhead_pct"] = 100 * (
        out["inprocess_2threads_scenarios_per_s"] / out["ray_2w_scenarios_per_s"] - 1)
    out["ray_2w_vs_inprocess_1thread_speedup"] = (
        out["ray_2w_scenarios_per_s"] / out["inprocess_1thread_scenarios_per_s"])
    return out


def bench_ddp(args: argparse.Namespace, tmp: Path) -> dict:
    e = args.ddp_envs
    extra = [f"algo.num_steps={args.num_steps}"]
    one = _train(tmp / "ddp1", args.iterations, 2 * e, 2, extra)
    two = _train(tmp / "ddp2", args.iterations, e, 1, extra, torchrun=2)
    return {"ddp_total_worlds": 2 * e, "ddp_iterations": args.iterations, "ddp_num_steps": args.num_steps,
            "ddp_1rank_env_steps_per_s": one, "ddp_2ranks_env_steps_per_s": two, "ddp_2ranks_vs_1rank": two / one}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", type=int, default=16)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--ddp-envs", type=int, default=32, help="worlds per rank (the single process gets twice this)")
    p.add_argument("--num-steps", type=int, default=24)
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--quick", action="store_true", help="tiny smoke run, results in a temp dir")
    args = p.parse_args()
    if args.quick:
        args.scenarios, args.num_envs, args.episodes, args.ddp_envs, args.iterations = 4, 2, 2, 4, 3
    os.environ.setdefault("MUJOCO_GL", "egl")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        figures = {**bench_batch(args, Path(d)), **bench_ddp(args, Path(d))}
    figures |= {"load_avg_1min_before": load_before[0], "multi_gpu_scaling": "unmeasured: no multi-GPU machine"}
    rows = [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in figures.items()]
    print(table(rows, "robotrl batch (Ray vs one process) and DDP (2 ranks vs 1), CPU"))
    path = save("batch", figures, merge=False, out_dir=tempfile.mkdtemp() if args.quick else None)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
