"""Tool-use env throughput on the CPU backend (mujoco.batch): env steps/s through TaskEnv.

    python benchmarks/tool_use.py                 # 64 worlds, 2 threads, both arms
    python benchmarks/tool_use.py --worlds 128 --threads 4
    python benchmarks/tool_use.py --train-run runs/tool_use/<stamp>   # also summarize a training run
    python benchmarks/tool_use.py --arms --train-run runs/screens/<name> --train-prefix cpu_screen_<name>
                                                  # only summarize a screen of overrides, under its own keys

Prints a table and writes flat, unit-named figures to benchmarks/results/tool_use.json
(merged with what is already there, so GPU and learning figures can sit beside them).
One env step = ``frame_skip`` (4) physics substeps of 5 ms plus observation and reward work.
Actions are smoothed random actions, so the hand touches the table and tools.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time

import mujoco
import torch
from robotrl.tasks.tool_use.config import ToolUseConfig

from robotrl.envs.task_env import TaskEnv
from robotrl.monitoring import read_metrics
from robotrl.sim.backend import SimConfig

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "tool_use.json")


def measure(arm: str, worlds: int, threads: int, steps: int, seed: int = 0) -> dict[str, float]:
    env = TaskEnv(ToolUseConfig(arm=arm), SimConfig(num_envs=worlds, nthread=threads), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    action = torch.zeros(worlds, env.num_actions)

    def act():
        nonlocal action
        noise = torch.rand(worlds, env.num_actions, generator=gen) * 2 - 1
        action = (0.8 * action + 0.4 * noise).clamp(-1, 1)
        return action

    for _ in range(20):  # warm-up
        env.step(act())
    start = time.perf_counter()
    for _ in range(steps):
        env.step(act())
    env_rate = steps * worlds / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(steps):
        env.sim.step(env.cfg.frame_skip)
    physics_rate = steps * worlds / (time.perf_counter() - start)
    model = env.sim.model
    return {"env_steps_per_s": env_rate, "physics_only_env_steps_per_s": physics_rate,
            "nv": model.nv, "nu": model.nu, "sim_resets": env.total_sim_resets}


def summarize_run(run_dir: str, prefix: str = "cpu_train") -> dict[str, float]:
    """Learning figures of a ``robotrl train task=tool_use`` run: first vs last fifth of its iterations.

    Keys start with ``prefix`` (``cpu_train`` for the README main job; a screen of overrides gets its own).
    """
    rows = [r for r in read_metrics(run_dir) if "episode/return" in r]
    if len(rows) < 5:
        raise ValueError(f"{run_dir} has {len(rows)} iterations with finished episodes; need at least 5.")
    fifth = max(1, len(rows) // 5)
    out: dict[str, float] = {f"{prefix}_wall_s": round(rows[-1]["time_s"], 1),
                             f"{prefix}_env_steps_count": rows[-1]["env_steps"],
                             f"{prefix}_curriculum_stage_final_index": rows[-1]["episode/curriculum_stage"]}
    for key, name in (("episode/return", "return"), ("episode/reached", "reach_rate"),
                      ("episode/lifted", "lift_rate"), ("episode/reward/lift", "lift_reward"),
                      ("episode/goals_reached", "goals_per_episode"), ("episode/success", "goal_episode_rate"),
                      ("episode/goal_scale", "goal_scale")):
        if key not in rows[-1]:  # goal_scale: runs from before the goal-scale curriculum (session 26)
            continue
        first = sum(r[key] for r in rows[:fifth]) / fifth
        last = sum(r[key] for r in rows[-fifth:]) / fifth
        out[f"{prefix}_{name}_first_fifth_mean"] = round(first, 4)
        out[f"{prefix}_{name}_last_fifth_mean"] = round(last, 4)
    eval_path = os.path.join(run_dir, "eval", "eval_train.json")
    if os.path.exists(eval_path):  # the deterministic evaluation robotrl train runs at the end
        with open(eval_path) as f:
            ev = json.load(f)
        episodes = int(ev["episodes"])
        for key in ("return", "success", "lifted", "reached", "goals_reached", "dropped"):
            out[f"{prefix}_final_eval_{key}_{episodes}_episodes"] = round(float(ev[key]), 4)
    stage_rows = [r for r in rows if r["episode/curriculum_stage"] >= 1.0]
    out[f"{prefix}_lift_stage_reached_at_s"] = round(stage_rows[0]["time_s"], 1) if stage_rows else -1.0
    goal_rows = [r for r in rows if r["episode/curriculum_stage"] >= 2.0]
    out[f"{prefix}_goal_stage_reached_at_s"] = round(goal_rows[0]["time_s"], 1) if goal_rows else -1.0
    if "episode/goal_scale" in rows[-1]:
        out[f"{prefix}_goal_scale_final"] = round(rows[-1]["episode/goal_scale"], 4)
    return out


def plot_run(run_dir: str, path: str) -> None:
    """Lift rate, reach rate, goals per episode and goal scale of a tool_use run against env steps, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_metrics(run_dir) if "episode/lifted" in r]
    steps = [r["env_steps"] / 1e6 for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for key, label in (("episode/reached", "reach rate"), ("episode/lifted", "lift rate"),
                       ("episode/success", "episodes with a goal")):
        axes[0].plot(steps, [r[key] for r in rows], label=label)
    axes[1].plot(steps, [r["episode/goals_reached"] for r in rows], label="goals per episode")
    if "episode/goal_scale" in rows[-1]:
        axes[1].plot(steps, [r.get("episode/goal_scale", float("nan")) for r in rows], label="goal scale")
    axes[1].plot(steps, [r["episode/curriculum_stage"] / 2 for r in rows], "--", label="curriculum stage / 2")
    for ax in axes:
        ax.set_xlabel("env steps (M)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"robotrl train task=tool_use: {os.path.basename(os.path.normpath(run_dir))}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--torch-threads", type=int, default=1, help="torch intra-op threads (1 is fastest here)")
    p.add_argument("--arms", nargs="*", default=["kuka_iiwa", "floating"], help="arms to time (none: skip)")
    p.add_argument("--out", default=RESULTS)
    p.add_argument("--train-run", default="", help="run dir of a tool_use training run to summarize")
    p.add_argument("--train-note", default="", help="how that run was made (command line), stored beside it")
    p.add_argument("--train-plot", default="", help="also save that run's lift/goal curves as this PNG")
    p.add_argument("--train-prefix", default="cpu_train", help="key prefix of the run's figures (a screen's own name)")
    args = p.parse_args()
    torch.set_num_threads(args.torch_threads)
    results: dict[str, object] = {}
    header = ("arm", "worlds", "threads", "env steps/s", "physics-only", "nv", "nu")
    if args.arms:
        print("{:<10} {:>6} {:>7} {:>12} {:>13} {:>4} {:>4}".format(*header))
    for arm in args.arms:
        r = measure(arm, args.worlds, args.threads, args.steps)
        print(f"{arm:<10} {args.worlds:>6} {args.threads:>7} {r['env_steps_per_s']:>12.0f} "
              f"{r['physics_only_env_steps_per_s']:>13.0f} {r['nv']:>4} {r['nu']:>4}")
        prefix = f"cpu_{arm}_{args.worlds}worlds_{args.threads}threads"
        results[f"{prefix}_env_steps_per_s"] = round(r["env_steps_per_s"], 1)
        results[f"{prefix}_physics_only_env_steps_per_s"] = round(r["physics_only_env_steps_per_s"], 1)
        results[f"{prefix}_sim_resets_count"] = r["sim_resets"]
    if args.train_run:
        learning = summarize_run(args.train_run, args.train_prefix)
        for key, value in learning.items():
            print(f"{key:<48} {value}")
        results.update(learning)
        results[f"{args.train_prefix}_command"] = args.train_note or f"(run dir {args.train_run})"
        if args.train_plot:
            plot_run(args.train_run, args.train_plot)
            print(f"wrote {args.train_plot}")
    load1 = os.getloadavg()[0]
    if args.train_run:
        results[f"{args.train_prefix}_summarized_date_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds")
    if args.arms:  # the machine keys describe the throughput figures above
        results.update({
            "cpu_machine": platform.processor() or platform.machine(),
            "cpu_cores_count": os.cpu_count(),
            "cpu_load_avg_1min_at_end": round(load1, 2),
            "cpu_torch_threads_count": args.torch_threads,
            "cpu_date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "mujoco_version": mujoco.__version__,
            "torch_version": torch.__version__,
        })
    merged = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            merged = json.load(f)
    merged.update(results)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out} (1-min load average {load1:.2f}: other jobs on the machine slow these figures)")


if __name__ == "__main__":
    main()
