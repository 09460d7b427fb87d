"""Driving benchmark: env throughput on CPU, and PPO training with held-out evaluation.

    python benchmarks/driving.py throughput            # env steps/s, 64 worlds (about 1 min)
    python benchmarks/driving.py train --minutes 14    # robotrl train task=driving, then evaluate
    python benchmarks/driving.py eval --run runs/...   # evaluate an existing run only
    python benchmarks/driving.py stress --run runs/... # held-out tracks with traffic, off the training distribution
    python benchmarks/driving.py widen --arm nominal --minutes 10 --run runs/widen   # then --arm wide,
    python benchmarks/driving.py widen --arm compare --run runs/widen                # then both on STRESS

Held-out evaluation runs one episode per world (2 x 128 worlds, deterministic actions) on the
held-out track seeds, once with the road clear (``scenario_prob=0``) and once with 3
obstacles and 2 traffic vehicles in every episode (``scenario_prob=1``). Taking exactly one
episode per world avoids over-counting short (failed) episodes. ``stress`` evaluates the same way
(held-out tracks, traffic in every episode) under task overrides that leave the training
distribution (``STRESS``: tighter turns, narrower roads, denser and faster traffic), beside the
in-distribution reference, with keys ``stress_<name>_<metric>``. Results are merged into
``benchmarks/results/driving.json`` as flat keys, with the machine and the date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from robotrl.tasks.driving.config import DrivingConfig

from robotrl.envs.task_env import TaskEnv
from robotrl.sim.backend import SimConfig

RESULTS = Path(__file__).resolve().parent / "results" / "driving.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402


def throughput(num_envs: int = 64, steps: int = 300, repeats: int = 5, **overrides) -> tuple[float, float]:
    """Median and best env steps/s of TaskEnv over ``repeats`` timed runs of random actions.

    Includes physics, rays, reward, observations and autoreset (random actions crash often,
    so resets are frequent). The machine is shared: the best run is the least disturbed one.
    """
    env = TaskEnv(DrivingConfig(**overrides), SimConfig(num_envs=num_envs), seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    action = lambda: torch.rand(num_envs, 2, generator=gen) * 2 - 1  # noqa: E731
    for _ in range(20):
        env.step(action())
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            env.step(action())
        rates.append(num_envs * steps / (time.perf_counter() - start))
    rates.sort()
    return rates[len(rates) // 2], rates[-1]


def episodes_once(policy, cfg, num_envs: int, seed: int) -> dict[str, torch.Tensor]:
    """Run every world until its first episode ends; ``{metric: (k,)}`` over the k finished worlds."""
    env = TaskEnv(cfg, SimConfig(num_envs=num_envs), seed=seed)
    obs = env.reset()
    done = torch.zeros(num_envs, dtype=torch.bool)
    stats: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for _ in range(env.max_episode_length + 1):
            obs, _, terminated, truncated, info = env.step(policy.act_inference(obs["policy"]))
            ended = (terminated | truncated).nonzero().squeeze(1)
            for row, world in enumerate(ended.tolist()):
                if done[world]:
                    continue
                done[world] = True
                for key, value in info["episode"].items():
                    stats.setdefault(key, torch.zeros(num_envs))[world] = value[row]
            if done.all():
                break
    return {k: v[done] for k, v in stats.items()}


# The training distribution of the shipped driving task before its randomization was widened. Every
# stress setting states all of these fields, so that policies trained on different distributions are
# evaluated on the same tracks and traffic.
NOMINAL: dict = {"min_turn_radius": 1.5, "track_radius": [5.0, 9.0], "half_width": [0.8, 1.0],
                 "num_obstacles": 3, "num_traffic": 2, "traffic_speed": [0.6, 1.2]}
# name -> task overrides on top of NOMINAL
STRESS: dict[str, dict] = {
    name: {**NOMINAL, **changes}
    for name, changes in {
        "reference": {},
        "tight_turns": {"min_turn_radius": 1.0, "track_radius": [4.0, 6.0]},
        "narrow_road": {"half_width": [0.6, 0.7]},
        "dense_traffic": {"num_obstacles": 5, "num_traffic": 4},
        "fast_traffic": {"traffic_speed": [1.2, 1.8]},
        "all_combined": {"min_turn_radius": 1.0, "track_radius": [4.0, 6.0], "half_width": [0.6, 0.7],
                         "num_obstacles": 5, "num_traffic": 4, "traffic_speed": [1.2, 1.8]},
    }.items()
}
# the widened training distribution compared against NOMINAL by ``widen``
WIDE: dict = {"min_turn_radius": 1.0, "track_radius": [4.0, 9.0], "half_width": [0.6, 1.0],
              "traffic_speed": [0.6, 1.8]}


def overrides_args(overrides: dict) -> list[str]:
    """``{field: value}`` as ``task.<field>=<value>`` Hydra overrides."""
    return [f"task.{k}={str(v).replace(' ', '')}" for k, v in overrides.items()]


def evaluate_run(
    run_dir: str, scenario_prob: float, num_envs: int = 128, rounds: int = 2, split: str = "heldout",
    **overrides,
) -> dict:
    """One deterministic episode per world, ``rounds`` env seeds of ``num_envs`` worlds, pooled.

    ``overrides`` are task config fields (as ``robotrl eval task.<field>=...``). ``*_se`` keys are
    standard errors of the mean over episodes.
    """
    from robotrl.tasks import task_config_from_meta

    from robotrl.policies.io import load_policy

    policy, meta = load_policy(run_dir)
    cfg = task_config_from_meta(meta, split=split, scenario_prob=scenario_prob, randomize=False, num_tracks=32,
                                 **overrides)
    parts = [episodes_once(policy, cfg, num_envs, seed=123 + r) for r in range(rounds)]
    stats = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    n = len(stats["route_completion"])
    mean = {k: float(v.mean()) for k, v in stats.items()}
    se = {k: float(v.std() / n**0.5) for k, v in stats.items()}
    laps = mean.get("lap_completed", 0.0)
    return {
        "route_completion": mean["route_completion"],
        "route_completion_se": se["route_completion"],
        "collision_rate": mean["collision"],
        "collision_rate_se": se["collision"],
        "collision_obstacle_rate": mean["collision_obstacle"],
        "collision_traffic_rate": mean["collision_traffic"],
        "collision_rear_ended_rate": mean["collision_rear_ended"],
        "off_road_rate": mean["off_road"],
        "wrong_way_rate": mean["wrong_way"],
        "rollover_rate": mean["rollover"],
        "lap_rate": laps,
        "lap_time_s": mean["lap_time_s"] / laps if laps > 0 else float("nan"),
        "infractions_per_km": mean["infractions"] / max(mean["distance_km"], 1e-9),
        "mean_speed_mps": mean["mean_speed"],
        "episodes": n,
    }


def train(minutes: float, run_dir: str, seed: int, extra: list[str]) -> float:
    cmd = [
        "robotrl",
        "train",
        "task=driving",
        f"max_time_s={60 * minutes:.0f}",
        "max_iterations=1000000",
        f"run_dir={run_dir}",
        f"seed={seed}",
        "progress=false",
        "tensorboard=false",
        *extra,
    ]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - start


def training_progress(run_dir: str) -> dict:
    """Env steps and learner wall-clock time of the run's last logged iteration."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    last = max(rows, key=lambda r: r.get("env_steps", 0))
    return {
        "train_env_steps": last.get("env_steps"),
        "train_time_s": last.get("time_s"),
        "train_iterations": last.get("iteration"),
        "train_route_completion_last": last.get("episode/route_completion"),
    }


def save(results: dict) -> None:
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    old.update(results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")
    width = max(len(k) for k in old)
    print(f"\n{'metric':<{width}}  value")
    for key in sorted(old):
        value = old[key]
        print(f"{key:<{width}}  {value:.4g}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    print(f"\nsaved {RESULTS}")


def widen(args: argparse.Namespace, results: dict) -> None:
    """Nominal against widened training randomization: the same seed, budget and command but WIDE.

    ``--arm nominal`` and ``--arm wide`` each train one run; ``--arm compare`` evaluates both on every
    STRESS setting (held-out tracks, traffic in every episode), so the cost of widening shows in the
    ``reference`` row and its gain in the others.
    """
    arms = {"nominal": NOMINAL, "wide": {**NOMINAL, **WIDE}}
    for key in ("widen_date", "widen_load_avg_1min"):  # one per arm and per comparison
        results[key.replace("widen_", f"widen_{args.arm}_")] = results.pop(key)
    if args.arm != "compare":
        extra = overrides_args(arms[args.arm]) + args.overrides
        wall = train(args.minutes, f"{args.run}_{args.arm}", args.seed, extra)
        progress = training_progress(f"{args.run}_{args.arm}")
        results.update({f"widen_{args.arm}_{k}": v for k, v in progress.items()})
        results[f"widen_{args.arm}_train_wall_s"] = wall
        results[f"widen_{args.arm}_train_overrides"] = " ".join(extra)
        results[f"widen_{args.arm}_seed"] = args.seed
        save(results)
        return
    metrics = ("route_completion", "route_completion_se", "collision_rate", "collision_rate_se", "off_road_rate",
               "lap_rate", "mean_speed_mps")
    print(f"{'setting':<14} {'arm':<8} {'route':>6} {'laps':>5} {'collide':>7} {'off-road':>8}", flush=True)
    for name, overrides in STRESS.items():
        row = {}
        for arm in arms:
            r = evaluate_run(f"{args.run}_{arm}", 1.0, **overrides)
            row[arm] = r
            results.update({f"widen_{arm}_{name}_{k}": r[k] for k in metrics})
            print(f"{name:<14} {arm:<8} {r['route_completion']:6.3f} {r['lap_rate']:5.2f} "
                  f"{r['collision_rate']:7.3f} {r['off_road_rate']:8.3f}", flush=True)
        for k in ("route_completion", "collision_rate", "lap_rate"):
            results[f"widen_delta_{name}_{k}"] = row["wide"][k] - row["nominal"][k]
        results[f"widen_{name}_overrides"] = " ".join(overrides_args(overrides))
    results["widen_runs"] = f"{args.run}_nominal {args.run}_wide"
    save(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["throughput", "train", "eval", "stress", "widen"])
    parser.add_argument("--arm", choices=["nominal", "wide", "compare"], default="compare",
                        help="widen: train one arm (run dir <run>_<arm>), or evaluate both side by side")
    parser.add_argument("--minutes", type=float, default=14.0, help="training wall-clock budget")
    parser.add_argument("--run", default="runs/driving/benchmark", help="run directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--suffix", default="", help="append to every result key (e.g. _seed1 for a repeat)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for robotrl train")
    args = parser.parse_args()
    results = machine()
    # each mode stamps its own date and CPU load: the JSON merges results of several runs
    results[f"{args.mode}_date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results[f"{args.mode}_load_avg_1min"] = os.getloadavg()[0]
    if args.mode == "throughput":
        for name, overrides in (
            ("", {}),
            ("_traffic", {"scenario_prob": 1.0}),
            ("_no_scenario_model", {"num_obstacles": 0, "num_traffic": 0}),
        ):
            median, best = throughput(64, **overrides)
            results[f"env_steps_per_s_cpu_64{name}"] = median
            results[f"env_steps_per_s_cpu_64{name}_best"] = best
        results["throughput_cpu_threads"] = os.cpu_count()
        save(results)
        return
    if args.mode == "stress":
        results["stress_run"] = args.run
        print(f"{'setting':<14} {'route':>6} {'laps':>5} {'collide':>7} {'off-road':>8}", flush=True)
        for name, overrides in STRESS.items():
            r = evaluate_run(args.run, 1.0, **overrides)
            results.update({f"stress_{name}_{k}": v for k, v in r.items()})
            results[f"stress_{name}_overrides"] = " ".join(overrides_args(overrides))
            print(f"{name:<14} {r['route_completion']:6.3f} {r['lap_rate']:5.2f} {r['collision_rate']:7.3f} "
                  f"{r['off_road_rate']:8.3f}", flush=True)
        save(results)
        return
    if args.mode == "widen":
        widen(args, results)
        return
    if args.mode == "train":
        results["train_wall_s_with_final_eval"] = train(args.minutes, args.run, args.seed, args.overrides)
        results["train_overrides"] = " ".join(args.overrides)
    results.update(training_progress(args.run))
    results["train_seed"] = args.seed
    for suffix, prob in (("heldout", 0.0), ("heldout_traffic", 1.0)):
        start = time.perf_counter()
        for key, value in evaluate_run(args.run, prob).items():
            results[f"{key}_{suffix}"] = value
        print(f"evaluated {suffix} in {time.perf_counter() - start:.0f} s", flush=True)
    results["collision_rate"] = results["collision_rate_heldout_traffic"]
    results["collision_rate_se"] = results["collision_rate_se_heldout_traffic"]
    keep = set(machine())
    save({k if k in keep else k + args.suffix: v for k, v in results.items()})


if __name__ == "__main__":
    sys.exit(main())
