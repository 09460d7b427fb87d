"""Learning: robotrl PPO against SB3 PPO on one composed config, same worlds, same wall-clock budget.

    python benchmarks/learning.py                      # humanoid: 2 x 300 s of training + 4 evaluations, ~12 min
    python benchmarks/learning.py --task humanoid --task tool_use --task driving   # ~36 min
    python benchmarks/learning.py --budget 600 --num-envs 64
    python benchmarks/learning.py --quick              # smoke run (a few seconds each, temp dir)

The training config is composed once through Hydra's compose API with robotrl's packaged
configs, the path ``robotrl train task=humanoid ...`` takes, and that one object goes to both
learners: robotrl PPO (``--robotrl-algo sac|fasttd3``: that learner, composed with ``algo=<name>`` and
checked to give the same task config) through ``make_runner``, SB3 PPO on ``TaskEnv(cfg.task, cfg.sim)``
through robotrl's SB3 adapter, with its PPO settings mapped from ``cfg.algo`` and
``cfg.policy`` (``common.sb3_ppo``; what SB3 cannot match is recorded in the JSON). So both
see the same task (action delay, observation noise, domain randomization), the same number
of worlds and threads, the same seed and the same wall-clock budget; each stops after the
first update that ends past the budget.

Evaluation, the same for both and for each learner's untrained policy: deterministic
actions, ``--episodes`` worlds of the same task config on a held-aside env seed, and only
each world's *first* episode counted (counting every finished episode would over-weight
short ones). The *gain* is final minus untrained return.

Each task is its own comparison (its own composed config, both learners, one after the other).
Results: ``learning.json`` (flat figures prefixed ``<task>_``, the config hash both used,
machine, date, load; a run rewrites the keys it produces and keeps every other key),
``learning_curves_<task>.png`` and ``learning_curves_<task>.csv`` (training
return, the mean of the last 100 finished episodes, against wall-clock and env steps) in
``benchmarks/results/``. ``--prefix P`` files a second configuration of a task beside the
first (another budget, seed or override): its figures, run settings included, go under
``<task>_P_`` and its curves to ``learning_curves_<task>_P.*``, and every other key is kept.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    RESULTS_DIR,
    SB3_DIFFERENCES,
    compose_train,
    fmt,
    load_avg,
    save,
    sb3_budget,
    sb3_distribution,
    sb3_ppo,
    table,
    task_hash,
)

from robotrl.envs.task_env import TaskEnv  # noqa: E402
from robotrl.runners.evaluate import run_episodes  # noqa: E402

EVAL_SEED = 12345
Curve = list[tuple[float, int, float]]  # (wall_s, env_steps, mean training return)
METRIC_NAMES = {"forward_vel": "forward_vel_mps", "success": "success_rate"}  # JSON names of episode metrics


def first_episodes(cfg: Any, policy: Any, episodes: int) -> dict[str, float]:
    """Deterministic rollout of ``episodes`` worlds; means over each world's first episode.

    ``run_episodes`` counts the same number of episodes per world (here one), as ``robotrl eval`` does.
    """
    env = TaskEnv(cfg.task, dataclasses.replace(cfg.sim, num_envs=episodes), seed=EVAL_SEED)
    stats = run_episodes(env, policy, episodes, deterministic=True)
    env.close()
    out = {"return": stats["return"], "episode_length_steps": stats["length"], "episodes_count": int(stats["episodes"])}
    # the task's success and episode metrics (humanoid: episode-mean forward speed; tool_use: reach, lift, goals)
    for key, value in stats.items():
        if key not in ("return", "length", "episodes") and not key.startswith("reward/"):
            out[METRIC_NAMES.get(key, key)] = value
    return out


class SB3Deterministic:
    """Gives an SB3 model (with its VecNormalize) the ``act_inference`` interface."""

    def __init__(self, model: Any, venv: Any) -> None:
        self.model, self.venv = model, venv

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        norm = self.venv.normalize_obs(obs.cpu().numpy())
        action, _ = self.model.predict(norm, deterministic=True)
        return torch.as_tensor(action, dtype=torch.float32)


def summary(untrained: dict, final: dict, env_steps: int, wall: float) -> dict[str, float]:
    out = {"untrained_return": untrained["return"], **{f"final_{k}": v for k, v in final.items()}}
    out |= {"return_gain": final["return"] - untrained["return"], "env_steps_count": env_steps,
            "train_wall_s": wall, "train_env_steps_per_s": env_steps / wall}
    return out


def train_robotrl(cfg: Any, config_yaml: str, episodes: int) -> tuple[dict[str, Any], Curve]:
    from robotrl.monitoring import read_metrics
    from robotrl.runners import make_runner

    run_dir = tempfile.mkdtemp(prefix="bench_learn_robotrl_")
    runner = make_runner(cfg, run_dir, config_yaml=config_yaml)
    untrained = first_episodes(cfg, runner.algo.policy, episodes)
    start = time.perf_counter()
    runner.learn()
    wall = time.perf_counter() - start
    final = first_episodes(cfg, runner.algo.policy, episodes)
    rows = read_metrics(run_dir)
    curve = [(r["time_s"], r["env_steps"], r["episode/return"]) for r in rows if r.get("episode/return") is not None]
    stds = [r["action_std"] for r in rows if r.get("action_std") is not None]
    # the spread of the actions in the last update, in [-1, 1] units (Gaussian or Beta)
    std = stds[-1] if stds else "not logged by this learner"
    return summary(untrained, final, runner.env_steps, wall) | {"final_action_std": std}, curve


def train_sb3(cfg: Any, episodes: int) -> tuple[dict[str, float], Curve]:
    from robotrl.envs.adapters import make_sb3_vec_env

    torch.set_num_threads(cfg.torch_threads)  # what robotrl's runner sets
    model, venv = sb3_ppo(cfg, make_sb3_vec_env(TaskEnv(cfg.task, cfg.sim, seed=cfg.seed)))
    untrained = first_episodes(cfg, SB3Deterministic(model, venv), episodes)
    budget = sb3_budget(cfg)
    start = time.perf_counter()
    model.learn(total_timesteps=10**12, callback=budget)
    wall = time.perf_counter() - start
    venv.training = False
    final = first_episodes(cfg, SB3Deterministic(model, venv), episodes)
    std = float(model.policy.log_std.detach().exp().mean())  # SB3's state-independent Gaussian std
    return summary(untrained, final, budget.trained_steps, wall) | {"final_action_std": std}, budget.curve


def curve_figures(curves: dict[str, Curve]) -> dict[str, Any]:
    """Time-to-skill figures from the two training curves, beside the final-evaluation ratio.

    The final evaluation says where each learner ends; these say how fast it got there. Both
    learners are read against one threshold taken from SB3's curve: its first point plus 90% of
    its rise to its final level (the mean of its last tenth of wall-clock), so "time to 90% of
    SB3's final" is the same bar for both. ``train_return_time_mean`` is the curve's average over
    wall-clock (trapezoids), i.e. the area under it per second; its gain is taken over the
    learner's own first point. A learner that never reaches the bar gets ``"not reached"``.
    """
    def last_tenth(curve: Curve) -> float:
        end = curve[-1][0]
        tail = [r for t, _, r in curve if t >= 0.9 * end]
        return sum(tail) / len(tail)

    def time_mean(curve: Curve) -> float:
        if len(curve) < 2:
            return curve[0][2]
        area = sum((t1 - t0) * (r0 + r1) / 2 for (t0, _, r0), (t1, _, r1) in zip(curve, curve[1:], strict=False))
        return area / (curve[-1][0] - curve[0][0])

    ours_name = next((k for k in curves if k.startswith("robotrl_")), "robotrl_ppo")  # robotrl_<algo>
    ours, theirs = curves.get(ours_name), curves.get("sb3_ppo_adapter")
    if not ours or not theirs:
        return {}
    start = theirs[0][2]
    bar = start + 0.9 * (last_tenth(theirs) - start)
    fig: dict[str, Any] = {"curve_bar_90pct_sb3_final_train_return": bar}
    times: dict[str, float | None] = {}
    means: dict[str, float] = {}
    for name, curve in ((ours_name, ours), ("sb3_ppo_adapter", theirs)):
        times[name] = next((t for t, _, r in curve if r >= bar), None)
        means[name] = time_mean(curve) - curve[0][2]
        fig[f"{name}_curve_final_train_return_last_tenth"] = last_tenth(curve)
        fig[f"{name}_curve_time_to_90pct_sb3_final_s"] = times[name] if times[name] is not None else "not reached"
        fig[f"{name}_curve_train_return_time_mean_gain"] = means[name]
    t_ours, t_theirs = times[ours_name], times["sb3_ppo_adapter"]
    fig["ratio_time_to_90pct_sb3_final_sb3_vs_robotrl"] = (
        t_theirs / t_ours if t_ours and t_theirs else "undefined: a learner never reached the bar")
    fig["ratio_train_return_time_mean_gain_robotrl_vs_sb3"] = (
        means[ours_name] / means["sb3_ppo_adapter"] if means["sb3_ppo_adapter"] > 0
        else "undefined: SB3 mean gain <= 0")
    return fig


def read_curves(path: Path) -> dict[str, Curve]:
    """The curves ``write_curves`` saved, by learner."""
    curves: dict[str, Curve] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            curves.setdefault(row["learner"], []).append(
                (float(row["wall_s"]), int(row["env_steps"]), float(row["train_return_mean_last_100_episodes"])))
    return curves


def curves_only(out_dir: Path) -> dict[str, Any]:
    """``--curves-only``: the time-to-skill figures of every saved robotrl-vs-SB3 curve file, by its label."""
    fig: dict[str, Any] = {}
    rows = []
    for path in sorted(out_dir.glob("learning_curves_*.csv")):
        label = path.stem.removeprefix("learning_curves_")
        part = curve_figures(read_curves(path))
        if not part:  # another benchmark's curves (off-policy learners), not this comparison
            continue
        fig |= {f"{label}_{k}": v for k, v in part.items()}
        ours = next(k for k in part if k.startswith("robotrl_") and k.endswith("_curve_time_to_90pct_sb3_final_s"))
        rows.append((label, "  ".join(f"{fmt(part[k]):>14}" for k in (
            ours, "sb3_ppo_adapter_curve_time_to_90pct_sb3_final_s",
            "ratio_time_to_90pct_sb3_final_sb3_vs_robotrl", "ratio_train_return_time_mean_gain_robotrl_vs_sb3"))))
    print(table(rows, "time to 90% of SB3's final training return: robotrl s, SB3 s, SB3/robotrl; "
                      "mean training-return gain robotrl/SB3"))
    return fig


def write_curves(curves: dict[str, Curve], out_dir: Path, task: str, title: str) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    csv_path = out_dir / f"learning_curves_{task}.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["learner", "wall_s", "env_steps", "train_return_mean_last_100_episodes"])
        for name, curve in curves.items():
            writer.writerows([name, *row] for row in curve)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, curve in curves.items():
        if curve:
            wall, steps, ret = zip(*curve, strict=True)
            axes[0].plot(wall, ret, label=name)
            axes[1].plot(steps, ret, label=name)
    axes[0].set(xlabel="wall-clock (s)", ylabel="training return (mean of last 100 episodes)")
    axes[1].set(xlabel="env steps", ylabel="training return (mean of last 100 episodes)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    png_path = out_dir / f"learning_curves_{task}.png"
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path, csv_path


def compare(task: str, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    """Both learners on one composed config of ``task``: figures prefixed ``<task>_``, curves written."""
    overrides = [f"task={task}", f"sim.num_envs={args.num_envs}", f"sim.nthread={args.threads}",
                 f"max_time_s={args.budget}", "max_iterations=1000000000", "progress=false", "tensorboard=false",
                 "save_interval=1000000000", "eval_at_end=false", *args.override]
    cfg, config_yaml, config_hash = compose_train(overrides)
    env_hash = task_hash(cfg.task)
    fig: dict[str, Any] = {
        "compose_overrides": " ".join(overrides), "config_hash": config_hash, "task_config_hash": env_hash,
        "seed": cfg.seed, "torch_threads": cfg.torch_threads, "robotrl_policy_distribution": cfg.policy.distribution,
        "sb3_policy_distribution": sb3_distribution(cfg),
        # the PPO settings both learners got, as composed (a tuning file edited in the working tree shows here)
        "algo_config": json.dumps(dataclasses.asdict(cfg.algo), sort_keys=True),
        **load_avg("at_start"),
    }
    ours_cfg, ours_yaml, ours_name = cfg, config_yaml, "robotrl_ppo"
    if args.robotrl_algo != "ppo":  # robotrl's off-policy learner on the same task config; SB3 keeps PPO's
        ours_cfg, ours_yaml, ours_hash = compose_train([*overrides, f"algo={args.robotrl_algo}"])
        if task_hash(ours_cfg.task) != env_hash:
            raise RuntimeError(f"algo={args.robotrl_algo} composes another task config; the learners would not "
                               "see the same env (a tuning file sets task fields)")
        ours_name = f"robotrl_{args.robotrl_algo}"
        fig |= {"robotrl_config_hash": ours_hash,
                "robotrl_algo_config": json.dumps(dataclasses.asdict(ours_cfg.algo), sort_keys=True)}
    curves: dict[str, Curve] = {}
    for name, train in ((ours_name, lambda: train_robotrl(ours_cfg, ours_yaml, args.episodes)),
                        ("sb3_ppo_adapter", lambda: train_sb3(cfg, args.episodes))):
        print(f"{task}: training {name} for {args.budget:g} s ...", flush=True)
        result, curves[name] = train()
        fig |= {f"{name}_{k}": v for k, v in result.items()} | load_avg(f"after_{name}")
    if task_hash(cfg.task) != env_hash:
        raise RuntimeError("the task config changed during the benchmark; the learners did not see the same env")
    ours, theirs = fig[f"{ours_name}_return_gain"], fig["sb3_ppo_adapter_return_gain"]
    fig["ratio_return_gain_robotrl_vs_sb3"] = ours / theirs if theirs > 0 else "undefined: SB3 gain <= 0"
    fig["ratio_env_steps_robotrl_vs_sb3"] = fig[f"{ours_name}_env_steps_count"] / max(
        fig["sb3_ppo_adapter_env_steps_count"], 1)
    fig |= curve_figures(curves)
    label = f"{task}_{args.prefix}" if args.prefix else task
    png, csv_path = write_curves(curves, out_dir, label, f"{task}, {args.num_envs} worlds, {args.budget:g} s per "
                                 f"learner, config {config_hash}")
    print(table([(k, fmt(v)) for k, v in fig.items()], f"{label} learning, {args.budget:g} s per learner"))
    print(f"curves: {png}, {csv_path}")
    return {f"{label}_{k}": v for k, v in fig.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=300.0, help="training wall-clock per learner, seconds")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="simulator threads (sim.nthread)")
    parser.add_argument("--episodes", type=int, default=64, help="evaluation worlds, one episode each")
    parser.add_argument("--task", action="append", default=[], help="task to compare on (repeat; default humanoid)")
    parser.add_argument("--override", action="append", default=[], help="extra Hydra override, for both learners")
    parser.add_argument("--out", default="", help="results folder (default benchmarks/results)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 16 worlds, 5 s, 8 episodes, temp dir")
    parser.add_argument("--robotrl-algo", default="ppo", choices=("ppo", "sac", "fasttd3"),
                        help="robotrl's learner (SB3 stays PPO; the task config must compose the same)")
    parser.add_argument("--prefix", default="", help="file this run as <task>_<prefix>_* beside the task's keys")
    parser.add_argument("--curves-only", action="store_true",
                        help="train nothing: add the time-to-skill figures of every saved curve file to learning.json")
    args = parser.parse_args()
    if args.quick:
        args.budget, args.num_envs, args.episodes = 5.0, 16, 8
        args.out = args.out or tempfile.mkdtemp(prefix="bench_learning_quick_")
    out_dir = Path(args.out) if args.out else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = args.task or ["humanoid"]
    if args.curves_only:
        merge_into_results(out_dir, curves_only(out_dir))
        return
    fig: dict[str, Any] = {"budget_s_per_learner": args.budget, "num_envs": args.num_envs, "sim_threads": args.threads,
                           "eval_episodes_count": args.episodes, "eval_seed": EVAL_SEED,
                           "eval_protocol": "deterministic actions, first episode of each world",
                           "sb3_differences": SB3_DIFFERENCES}
    if args.prefix:  # the run settings belong to this configuration only
        fig = {f"{task}_{args.prefix}_{k}": v for task in tasks for k, v in fig.items()}
    for task in tasks:
        fig |= compare(task, args, out_dir)
        if args.prefix:  # the unprefixed "date" is the file's last save
            fig[f"{task}_{args.prefix}_date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    merge_into_results(out_dir, fig)


def merge_into_results(out_dir: Path, fig: dict[str, Any]) -> None:
    """Rewrite what this run produces in ``learning.json`` and keep every other key (other tasks, prefixes)."""
    old = out_dir / "learning.json"
    if old.exists():
        fig = {**json.loads(old.read_text()), **fig}
    path = save("learning", fig, merge=False, out_dir=out_dir)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
