"""Twin benchmark, triage rows (``python benchmarks/twin.py bag_scenario``; method in twin.py's docstring).

Humanoid bags of the sim robot recorded under known scenario pushes and commands; the scenario
``robotrl twin triage`` reads off each bag (``HumanoidTask.scenario_from_episode``) against the truth.
"""

import math
import tempfile

import numpy as np
import torch

PUSHES = ((1.0, 0.5), (0.4, -2.0), (1.4, 2.5), (0.7, -0.3), (None, None))  # (push_vel m/s, push_dir rad)
COMMANDS = (None, (1.2, 0.3), (0.3, -0.4))  # (cmd_vx, cmd_yaw); None: the task's own draw
PUSH_INTERVAL_S = 0.3  # a scenario push every 20 control steps (randomize is off: no other pushes)


def bag_scenario_rows(seeds=(0, 1, 2)):
    """Per bag: the true push and command and what the bag gave back; plus the summary."""
    from robotrl.deploy.profile import load_profile
    from robotrl.tasks.humanoid.bag_scenario import scenario_from_episode

    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import record_episode

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(63, 17), torch.nn.Tanh())  # the twin tests' policy: falls in 40-70 steps

    def policy(obs, k):
        with torch.no_grad():
            return net(obs) * 0.5

    profile, out, rows = load_profile("humanoid_sim"), tempfile.mkdtemp(prefix="bag_scenario_"), []
    for (push_vel, push_dir), command, seed in ((p, c, s) for p in PUSHES for c in COMMANDS for s in seeds):
        scenario = {} if push_vel is None else {"push_vel": push_vel, "push_dir": push_dir}
        if command is not None:
            scenario.update(cmd_vx=command[0], cmd_yaw=command[1])
        bag = record_episode("humanoid", out, policy, 120, profile=profile, seed=seed, scenario=scenario,
                             overrides={"push_interval_s": PUSH_INTERVAL_S}, name=f"bag_{len(rows):03d}")
        ep = load_episode(bag)
        got = scenario_from_episode(ep)
        row = {"true_push_vel": push_vel, "true_push_dir": push_dir, "seed": seed, "steps": ep.num_steps,
               "read_push_vel": got.get("push_vel"), "read_push_dir": got.get("push_dir"),
               "command_error": float(np.abs(np.subtract([got["cmd_vx"], got["cmd_yaw"]], command)).max())
               if command is not None else None}
        if push_vel is not None and got.get("push_vel") is not None:
            row["push_vel_error"] = abs(got["push_vel"] - push_vel)
            row["push_dir_error_rad"] = abs((got["push_dir"] - push_dir + math.pi) % (2 * math.pi) - math.pi)
        rows.append(row)
    pushed = [r for r in rows if r["true_push_vel"] is not None]
    found = [r for r in pushed if "push_vel_error" in r]
    commanded = [r["command_error"] for r in rows if r["command_error"] is not None]
    summary = {"pushed_bags": len(pushed), "pushes_found": len(found),
               "push_vel_error_max": max(r["push_vel_error"] for r in found),
               "push_vel_error_mean": float(np.mean([r["push_vel_error"] for r in found])),
               "push_dir_error_max_rad": max(r["push_dir_error_rad"] for r in found),
               "push_dir_error_mean_rad": float(np.mean([r["push_dir_error_rad"] for r in found])),
               "unpushed_bags": len(rows) - len(pushed),
               "unpushed_bags_with_a_push_read": sum(r["read_push_vel"] is not None for r in rows
                                                     if r["true_push_vel"] is None),
               "command_error_max": max(commanded), "push_interval_s": PUSH_INTERVAL_S}
    return summary, rows


TOOL_USE_READ = ("spawn_x", "spawn_y", "spawn_yaw", "tool_size", "goal_x", "goal_y", "goal_z", "goal_yaw")


def bag_scenario_tool_use_rows(scenes: int = 8, seeds=(0, 1)):
    """tool_use bags of the sim robot under random scenes: what the bag gives back against the scene set up.

    Each scene draws every parameter ``ToolUseTask.scenario_from_episode`` reads uniformly from its
    ``SCENARIO_PARAMS`` range; the robot holds still for 6 control steps (the start pose and the
    first goal are all the reader uses). ``tool_size`` is compared with the size asked for, so its
    error includes the gap to the pool's nearest tool.
    """
    from robotrl.deploy.profile import load_profile
    from robotrl.tasks.tool_use.bag_scenario import scenario_from_episode
    from robotrl.tasks.tool_use.scenario_params import SCENARIO_PARAMS

    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import record_episode

    ranges = {p.name: (p.low, p.high) for p in SCENARIO_PARAMS if p.name in TOOL_USE_READ}
    rng = np.random.default_rng(0)
    profile, out, rows = load_profile("tool_use_sim"), tempfile.mkdtemp(prefix="bag_scenario_tool_use_"), []
    for scene in range(scenes):
        truth = {name: float(rng.uniform(lo, hi)) for name, (lo, hi) in ranges.items()}
        for seed in seeds:
            bag = record_episode("tool_use", out, lambda obs, k: torch.zeros(1, 23), 6, profile=profile, seed=seed,
                                 scenario=truth, name=f"bag_{len(rows):03d}")
            got = scenario_from_episode(load_episode(bag))
            row = {"scene": scene, "seed": seed, "missing": sorted(set(TOOL_USE_READ) - set(got))}
            for name in TOOL_USE_READ:
                if name in got:
                    err = got[name] - truth[name]
                    row[f"{name}_error"] = abs((err + math.pi) % (2 * math.pi) - math.pi) if "yaw" in name else abs(err)
            rows.append(row)
    summary = {"tool_use_bags": len(rows), "tool_use_bags_missing_a_value": sum(bool(r["missing"]) for r in rows)}
    for name in TOOL_USE_READ:
        errs = [r[f"{name}_error"] for r in rows if f"{name}_error" in r]
        summary[f"tool_use_{name}_error_max"] = max(errs)
        summary[f"tool_use_{name}_error_mean"] = float(np.mean(errs))
    return summary, rows


def tool_family_rows() -> dict:
    """``family_from_box`` against the truth on generated tools the reference never held (pure geometry, seconds).

    Pools: the training pool (seed 0, 16 per family), held-out instances (seeds 0 and 7), the training pool at
    sizes x0.85-1.15 (``task.tool_size_scale``) and the held-out family's brushes. Per pool: accuracy and the
    confusions (true family -> read family: count).
    """
    from robotrl.tasks.tool_use import tools
    from robotrl.tasks.tool_use.bag_scenario import FAMILY_REFERENCE, family_from_box

    pools = {"train": tools.tool_pool("train", 16), "heldout": tools.tool_pool("heldout", 16),
             "heldout_seed7_64": tools.tool_pool("heldout", 64, seed=7),
             "train_scaled_085_115": tools.tool_pool("train", 16, scale=(0.85, 1.15)),
             "heldout_family_brush": tools.tool_pool("heldout_family", 16)}
    out: dict = {"reference_tools_per_family": FAMILY_REFERENCE}
    for name, pool in pools.items():
        read = [tools.FAMILIES[family_from_box(t.bbox()[1])] for t in pool]
        out[f"{name}_tools_count"] = len(pool)
        out[f"{name}_accuracy"] = round(float(np.mean([r == t.family for r, t in zip(read, pool, strict=True)])), 4)
        confused: dict[str, int] = {}
        for r, t in zip(read, pool, strict=True):
            if r != t.family:
                confused[f"{t.family}->{r}"] = confused.get(f"{t.family}->{r}", 0) + 1
        out[f"{name}_confusions"] = confused
    return out


def scan_scenario_rows(episodes: int = 40, seed: int = 0) -> tuple[dict, list[dict]]:
    """Driving's obstacles and traffic speed read off the scan (``obstacles_and_traffic``) against the truth.

    ``episodes`` worlds, each a fresh env seed and track with a drawn scenario (obstacles 0..3, traffic
    speed uniform in 0.3-1.5 m/s), driven along the centreline at 1.8 m/s by ``sim_scan_episode`` (the
    fields a bag gives: time, odometry, scan, route). Two lengths of the same worlds: 600 control steps
    (30 s, a whole lap of the bank's 42-52 m tracks) and 200 (10 s, as a failure cut short). Per
    length: the share of bags that give a count, the count's accuracy where given, the share that
    see traffic move, and the speed error (m/s) where they do.
    """
    import time

    import torch
    from robotrl.tasks.driving.bag_scenario import obstacles_and_traffic, sim_scan_episode

    from robotrl.twin.record import make_task_env

    rng = np.random.default_rng(seed)
    draws = [(int(rng.integers(1 << 30)), float(rng.integers(0, 4)), float(rng.uniform(0.3, 1.5)))
             for _ in range(episodes)]
    rows, summary = [], {"episodes": episodes, "seed": seed, "car_speed_m_s": 1.8}
    for steps in (600, 200):
        start = time.perf_counter()
        for env_seed, obstacles, speed in draws:
            env = make_task_env("driving", seed=env_seed)
            truth = {"obstacles": obstacles, "traffic_speed": speed}
            env.task.apply_scenario(torch.tensor([0]), {k: torch.tensor([v]) for k, v in truth.items()}, env.gen)
            got = obstacles_and_traffic(sim_scan_episode(env, steps))
            rows.append({"steps": steps, "env_seed": env_seed, **{f"true_{k}": v for k, v in truth.items()},
                         **{f"read_{k}": round(v, 4) for k, v in got.items()}})
        these = [r for r in rows if r["steps"] == steps]
        counted = [r for r in these if "read_obstacles" in r]
        timed = [r for r in these if "read_traffic_speed" in r]
        errors = [abs(r["read_traffic_speed"] - r["true_traffic_speed"]) for r in timed]
        summary.update({
            f"steps{steps}_scan_coverage_mean": round(float(np.mean([r["read_scan_coverage"] for r in these])), 3),
            f"steps{steps}_obstacles_counted_share": round(len(counted) / len(these), 3),
            f"steps{steps}_obstacles_count_accuracy": (round(float(np.mean(
                [r["read_obstacles"] == r["true_obstacles"] for r in counted])), 3) if counted else None),
            f"steps{steps}_obstacles_seen_at_most_true_share": round(float(np.mean(
                [r["read_obstacles_seen"] <= r["true_obstacles"] for r in these])), 3),
            f"steps{steps}_traffic_seen_share": round(len(timed) / len(these), 3),
            f"steps{steps}_traffic_speed_abs_error_mean": round(float(np.mean(errors)), 3) if errors else None,
            f"steps{steps}_traffic_speed_abs_error_p90": (round(float(np.percentile(errors, 90)), 3)
                                                          if errors else None),
            f"steps{steps}_traffic_speed_abs_error_max": round(float(np.max(errors)), 3) if errors else None,
            f"steps{steps}_wall_s": round(time.perf_counter() - start, 1)})
    return summary, rows
