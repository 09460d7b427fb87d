"""Residual RL benchmark (ResFiT vs RLPD), and SAC and FastTD3 against PPO on the humanoid.

Part ``residual`` (per seed, 4-D PointReach with a sparse success reward, radius 0.05):
  1. record 20 successful demonstrations from a noisy scripted teacher (noise std 0.5);
  2. fit a chunked BC base (chunk 5, temporal ensembling) on them: ``base_success``;
  3. ResFiT residual (s = 0.3, gamma = 0.95, UTD 4, 10 Q heads, n-step 3) on that base, with the
     demos (base actions relabelled) in a 50/50 batch,
     for ``--env-steps`` env steps: ``residual_success``;
  4. RLPD: the same learner and demos with no base, same env steps: ``rlpd_success``.
  Success is the deterministic policy's, on the first episode of each of 256 held-out worlds.

Part ``sac_ppo``: PPO, SAC and FastTD3 on ``humanoid`` from the CLI's composed configs (the same
task config; each learner's ``tuning/humanoid_<algo>`` file), one after the other in one run,
each for ``--seconds`` of wall-clock on this machine; the
deterministic return is evaluated on ``--eval-episodes`` episodes (16) of the composed task config
(``--eval-schema-task``: the schema's defaults, without action delay and observation noise, as
the figures under the plain ``humanoid_`` keys were); return-vs-steps and return-vs-time points
come from each run's ``metrics.jsonl``. ``--prefix`` names the keys and the curve files.

Part ``driving_residual``: ResFiT on a *deliberately weakened* driving base. The base is the
trained PPO driver (``runs/driving_deploy_lap``, its deterministic Beta-mean action) with a
steering error put in on purpose: ``steer' = clip(gain * steer + bias)``, ``throttle' =
clip(throttle + throttle_bias)`` in normalized action space (``WeakenedBase``). The residual
(64 worlds, the task's own CaRL reward, no demonstrations) trains in stages of at most
``--stage-seconds`` each, its whole state (networks, Adam, replay) cached in ``--state-dir``,
until ``--budget-cpu-s`` of training CPU time or ``--driving-env-steps`` env steps. Base and
base + residual are scored with one protocol: a fresh env of 256 worlds on the train track
set with a fixed eval seed (same tracks, starts, obstacles and traffic every time),
deterministic actions, the first episode of each world; success = a completed lap.

    python benchmarks/residual.py --part residual --seeds 0 1 2 --env-steps 32000
    python benchmarks/residual.py --part sac_ppo --seconds 180   # PPO, SAC and FastTD3, ~10 min
    python benchmarks/residual.py --part driving_residual --fresh   # stage 1; repeat without --fresh

Results are merged into ``benchmarks/results/residual.json`` (flat, units in key names).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, machine, save, table  # noqa: E402

from robotrl.algos.bc import BC, BCConfig  # noqa: E402
from robotrl.algos.residual import Residual, ResidualConfig, relabel_base_actions  # noqa: E402
from robotrl.data.collect import collect  # noqa: E402
from robotrl.envs.reach import PointReach, ReachConfig  # noqa: E402
from robotrl.envs.residual import BaseActionEnv  # noqa: E402
from robotrl.policies.frozen import FrozenPolicy, ZeroPolicy, load_frozen  # noqa: E402
from robotrl.runners.off_policy import evaluate_success  # noqa: E402
from robotrl.storage.demos import demos_to_buffer  # noqa: E402

REACH = dict(dim=4, radius=0.05, reward="sparse", max_episode_length=50)
NUM_ENVS, EVAL_ENVS = 16, 256


def residual_config(**kw) -> ResidualConfig:
    # ResFiT's structure; step sizes, horizon and scale tuned on seed 0 of the 2-D variant (a short
    # sweep over scale 0.1/0.2/0.3 and gamma 0.99/0.95): s = 0.3, gamma = 0.95. RLPD gets the same.
    base = dict(actor_lr=3e-4, critic_lr=3e-4, critic_warmup_updates=500, learning_starts=1000, utd=4.0,
                batch_size=256, actor_hidden=[64, 64], critic_hidden=[64, 64], explore_sigma=0.05, scale=0.3,
                gamma=0.95)
    return ResidualConfig(**{**base, **kw})


def run_learner(base, demos_eps, seed: int, env_steps: int, cfg: ResidualConfig, evals: int = 4) -> list[tuple]:
    """Train the residual (or RLPD when base is None); return [(env_steps, success)]."""
    torch.manual_seed(seed)
    env = BaseActionEnv(PointReach(ReachConfig(num_envs=NUM_ENVS, **REACH), seed=seed),
                        base.spawn(NUM_ENVS) if base else None, "sparse")
    ev = BaseActionEnv(PointReach(ReachConfig(num_envs=EVAL_ENVS, **REACH), seed=1000 + seed),
                       base.spawn(EVAL_ENVS) if base else None, "sparse")
    labeller = base if base is not None else ZeroPolicy(REACH["dim"])
    ba, nba = relabel_base_actions(labeller, demos_eps, "cpu")
    demos = demos_to_buffer(demos_eps, "cpu", True, ba, nba)
    algo = Residual(env.obs_dims["policy"], REACH["dim"], cfg, NUM_ENVS, "cpu", demos=demos, has_base=base is not None,
                    seed=seed)

    def score() -> float:
        return evaluate_success(ev, lambda o: algo.policy(o["policy"]))["success"]

    curve = [(0, score())]
    obs = env.reset()
    steps = env_steps // NUM_ENVS
    marks = {round(steps * (i + 1) / evals) for i in range(evals)}
    for step in range(1, steps + 1):
        action = algo.act(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        algo.process_step(obs, reward, terminated, truncated, info)
        if algo.ready():
            algo.update(obs)
        if step in marks:
            curve.append((step * NUM_ENVS, score()))
    return curve


def part_residual(seeds: list[int], env_steps: int, rlpd_sigma: float, methods: list[str]) -> tuple[dict, list]:
    out: dict = {}
    rows = []
    for seed in seeds:
        teacher_env = PointReach(ReachConfig(num_envs=8, **REACH), seed=seed)
        eps = collect(teacher_env, lambda o, e=teacher_env: e.scripted_action(), episodes=20, noise=0.5,
                      success_only=True, seed=seed)
        torch.manual_seed(seed)
        bc = BC(eps, BCConfig(chunk=5, execution="ensemble", hidden=[128, 128], updates_per_iteration=50),
                "cpu", num_envs=1, seed=seed)
        for _ in range(40):
            bc.update()
        for method in methods:
            t0 = time.perf_counter()
            if method == "residual":
                curve = run_learner(bc.executor, eps, seed, env_steps, residual_config())
                out[f"seed{seed}_base_success"] = curve[0][1]
            else:
                curve = run_learner(None, eps, seed, env_steps, residual_config(explore_sigma=rlpd_sigma))
            wall = time.perf_counter() - t0
            out |= {f"seed{seed}_{method}_success": curve[-1][1], f"seed{seed}_{method}_wall_s": wall,
                    f"seed{seed}_{method}_curve_env_steps_success": [list(x) for x in curve]}
            rows.append((f"seed {seed} {method}", " -> ".join(f"{s:.3f}@{n}" for n, s in curve) + f" ({wall:.0f} s)"))
            print(rows[-1], flush=True)
    return out, rows


def summarize(figures: dict) -> dict:
    """Means over every seed stored so far (this run's and earlier merged ones)."""
    def has(s: int) -> bool:
        return all(f"seed{s}_{m}_success" in figures for m in ("base", "residual", "rlpd"))

    seeds = sorted({int(m.group(1)) for k in figures if (m := re.match(r"seed(\d+)_", k))})
    seeds = [s for s in seeds if has(s)]
    if not seeds:
        return {}
    mean = {m: statistics.mean(figures[f"seed{s}_{m}_success"] for s in seeds) for m in ("base", "residual", "rlpd")}
    gap = 1.0 - mean["base"]
    closed = (mean["residual"] - mean["base"]) / gap if gap > 0 else float("nan")
    return {"seeds": seeds, "base_success": mean["base"], "residual_success": mean["residual"],
            "rlpd_success": mean["rlpd"], "residual_gap_closed_fraction": closed,
            "residual_beats_rlpd": mean["residual"] > mean["rlpd"]}


def part_sac_ppo(seconds: float, algos: list[str], episodes: int = 16, prefix: str = "humanoid",
                 eval_composed: bool = True, seed: int = 0) -> tuple[dict, list]:
    from hydra import compose, initialize_config_module
    from learning import write_curves  # the equal-footing benchmark's curve plot (PNG and CSV)
    from omegaconf import OmegaConf
    from robotrl.tasks import config_class

    from robotrl.config import register_configs
    from robotrl.envs.task_env import TaskEnv
    from robotrl.monitoring import read_metrics
    from robotrl.runners import make_runner
    from robotrl.runners.evaluate import run_episodes
    from robotrl.sim import SimConfig

    register_configs()
    out, rows, curves = {}, [], {}
    for algo in algos:
        run_dir = tempfile.mkdtemp(prefix=f"bench_{algo}_")
        with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
            cfg = compose(config_name="train", overrides=[
                "task=humanoid", f"algo={algo}", "progress=false", "tensorboard=false", "save_interval=100000",
                f"max_time_s={seconds}", "max_iterations=1000000", f"run_dir={run_dir}", f"seed={seed}"])
        train_cfg = OmegaConf.to_object(cfg)
        runner = make_runner(train_cfg, run_dir)
        runner.learn()
        # the composed task config the learners trained on (action delay, observation noise); the
        # 2026-11 figures under the plain ``humanoid_`` keys used the schema's defaults (neither)
        env = TaskEnv(train_cfg.task if eval_composed else config_class("humanoid")(), SimConfig(num_envs=episodes),
                      seed=12345)
        final = run_episodes(env, runner.algo.policy, episodes, deterministic=True)
        curve = [(r["env_steps"], round(r["time_s"], 1), r.get("episode/return"))
                 for r in read_metrics(run_dir) if r.get("episode/return") is not None]
        curves[algo] = [(t, s, r) for s, t, r in curve]
        stride = max(1, len(curve) // 8)
        out |= {f"{prefix}_{algo}_env_steps": runner.env_steps, f"{prefix}_{algo}_wall_s": runner.elapsed_s,
                f"{prefix}_{algo}_eval_return": final["return"],
                f"{prefix}_{algo}_eval_episode_length": final["length"],
                f"{prefix}_{algo}_steps_per_s": runner.env_steps / max(runner.elapsed_s, 1e-9),
                f"{prefix}_{algo}_curve_env_steps_time_s_train_return": [list(c) for c in curve[::stride]]}
        rows.append((f"{prefix} {algo}", f"{runner.env_steps} steps in {runner.elapsed_s:.0f} s, "
                                         f"eval return {final['return']:.1f} (len {final['length']:.0f})"))
        print(rows[-1], flush=True)
    if "ppo" in algos:
        for algo in algos:
            out[f"{prefix}_{algo}_eval_return_over_ppo"] = out[f"{prefix}_{algo}_eval_return"] / out[
                f"{prefix}_ppo_eval_return"]
    png, _ = write_curves(curves, RESULTS_DIR, f"{prefix}_offpolicy",
                          f"humanoid, {seconds:.0f} s wall-clock each on this machine: {', '.join(algos)}")
    out[f"{prefix}_offpolicy_curves_png"] = png.name
    return out, rows


# --- driving: ResFiT on a deliberately weakened PPO driver ------------------------------------
DRIVING_WORLDS, DRIVING_EVAL_WORLDS, DRIVING_EVAL_SEED = 64, 256, 9001


class WeakenedBase(FrozenPolicy):
    """A trained policy made worse on purpose, in normalized action space (column 0 steers).

    ``steer' = clip(gain * steer + bias, -1, 1)`` (a mis-calibrated steering servo: gain and
    offset error) and ``throttle' = clip(throttle + throttle_bias, -1, 1)``.
    """

    def __init__(self, inner: FrozenPolicy, gain: float, bias: float, throttle_bias: float) -> None:
        self.inner, self.gain, self.bias, self.throttle_bias = inner, gain, bias, throttle_bias
        self.action_dim = inner.action_dim

    def _weaken(self, action: torch.Tensor) -> torch.Tensor:
        steer = action[:, :1] * self.gain + self.bias
        return torch.cat([steer, action[:, 1:2] + self.throttle_bias, action[:, 2:]], 1).clamp(-1.0, 1.0)

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """The inner policy's action, weakened."""
        return self._weaken(self.inner.act(obs))

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """The inner policy's stateless action, weakened."""
        return self._weaken(self.inner.predict(obs))


def driving_env(num_envs: int, seed: int, base: FrozenPolicy, reward: str, split: str = "train") -> BaseActionEnv:
    from robotrl.tasks.driving.config import DrivingConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig

    return BaseActionEnv(TaskEnv(DrivingConfig(split=split), SimConfig(num_envs=num_envs), seed=seed), base, reward)


def driving_eval(base: FrozenPolicy, actor=None, split: str = "train") -> dict[str, float]:
    """Lap success of ``base`` (+ ``actor``'s residual) on the fixed eval worlds (fresh env each call)."""
    env = driving_env(DRIVING_EVAL_WORLDS, DRIVING_EVAL_SEED, base, "sparse", split)
    act = (lambda o: o["base_action"]) if actor is None else (lambda o: actor(o["policy"]))
    with torch.no_grad():
        return evaluate_success(env, act)


def driving_residual_config(scale: float) -> ResidualConfig:
    """ResFiT's structure (10 LayerNorm Q heads, REDQ min of 2, n-step 3, TD3 noise), CPU-sized nets."""
    return ResidualConfig(scale=scale, reward="env", actor_lr=1e-4, critic_lr=3e-4, critic_warmup_updates=2000,
                          learning_starts=5000, utd=2.0, batch_size=256, actor_hidden=[128, 128],
                          critic_hidden=[128, 128], explore_sigma=0.1, gamma=0.99, n_step=3)


def driving_figures(progress: dict) -> dict:
    """Flat ``driving_residual_*`` keys (``driving_residual_seed<k>_*`` for seed k > 0) from the cached progress."""
    curve = progress["curve"]
    seed = progress["settings"]["seed"]
    prefix = "driving_residual_" if seed == 0 else f"driving_residual_seed{seed}_"
    base, final = progress["base"]["success"], curve[-1][-1]
    out = {f"driving_residual_{k}": v for k, v in progress["settings"].items()}
    out |= {
        "driving_residual_base_success": base,
        "driving_residual_unweakened_base_success": progress["unweakened"]["success"],
        "driving_residual_success": final,
        "driving_residual_gain_points": 100.0 * (final - base),
        "driving_residual_env_steps": progress["env_steps"],
        "driving_residual_train_wall_s": progress["train_wall_s"],
        "driving_residual_train_cpu_s": progress["train_cpu_s"],
        "driving_residual_stages": progress["stage"],
        "driving_residual_updates": progress["updates"],
        "driving_residual_curve_env_steps_train_wall_s_train_cpu_s_success": curve,
        "driving_residual_train_lap_rate_per_stage": progress["train_lap_rate"],
        "driving_residual_target_points": 15.0,
        "driving_residual_target_met": (final - base) >= 0.15 and progress["train_cpu_s"] <= 1800.0,
        "driving_residual_eval": f"{DRIVING_EVAL_WORLDS} worlds, train track set, seed {DRIVING_EVAL_SEED}, "
                                 "deterministic, first episode per world, success = completed lap",
        "driving_residual_load_avg_1min_per_stage": progress["load_avg"],
        "driving_residual_commands_per_stage": progress.get("commands", []),
        "driving_residual_machine_cpu_per_stage": progress.get("machine_cpu", []),
    } | ({"driving_residual_heldout_base_success": progress["heldout"]["base"],
          "driving_residual_heldout_success": progress["heldout"]["residual"],
          "driving_residual_base_success_repeat": progress["base_repeat"]} if "heldout" in progress else {})
    return {prefix + k.removeprefix("driving_residual_"): v for k, v in out.items()}


def plot_driving(progress: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = progress["curve"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, col, label in ((axes[0], 0, "env steps (millions)"), (axes[1], 2, "training CPU time (s)")):
        ax.plot([c[col] / (1e6 if col == 0 else 1) for c in curve], [c[3] for c in curve], "o-",
                label="weakened base + residual")
        ax.axhline(progress["base"]["success"], color="gray", ls="--", label="weakened base")
        ax.axhline(progress["unweakened"]["success"], color="green", ls=":", label="unweakened PPO driver")
        ax.set_xlabel(label)
    axes[0].set_ylabel(f"lap success ({DRIVING_EVAL_WORLDS} eval worlds)")
    axes[0].legend(loc="lower right")
    fig.suptitle(f"ResFiT residual on a weakened driving base (seed {progress['settings']['seed']})")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def add_point(progress: dict, stage_steps: int, stage_wall: float, stage_cpu: float, success: float) -> None:
    """Append ``[env steps, training wall s, training CPU s, success]`` (totals so far) to the curve."""
    progress["curve"].append([progress["env_steps"] + stage_steps, round(progress["train_wall_s"] + stage_wall, 1),
                              round(progress["train_cpu_s"] + stage_cpu, 1), success])
    print("curve point", progress["curve"][-1], flush=True)


def part_driving(args: argparse.Namespace) -> tuple[dict, list]:
    state_dir = Path(args.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    state_path, progress_path = state_dir / "state.pt", state_dir / "progress.json"
    settings = {"base_checkpoint": args.base, "steer_gain": args.steer_gain, "steer_bias": args.steer_bias,
                "throttle_bias": args.throttle_bias, "scale": args.scale, "reward": "env", "worlds": DRIVING_WORLDS,
                "eval_worlds": DRIVING_EVAL_WORLDS, "eval_seed": DRIVING_EVAL_SEED, "seed": args.seed}
    inner, _ = load_frozen(args.base, DRIVING_WORLDS)
    weak = WeakenedBase(inner, args.steer_gain, args.steer_bias, args.throttle_bias)
    cfg = driving_residual_config(args.scale)
    fresh = args.fresh or not progress_path.exists()
    if fresh:
        progress = {"settings": settings, "stage": 0, "env_steps": 0, "updates": 0, "train_wall_s": 0.0,
                    "train_cpu_s": 0.0, "train_lap_rate": [], "load_avg": [],
                    "base": driving_eval(weak), "unweakened": driving_eval(inner)}
        progress["curve"] = [[0, 0.0, 0.0, progress["base"]["success"]]]
        print(f"base {progress['base']}, unweakened {progress['unweakened']}", flush=True)
    else:
        progress = json.loads(progress_path.read_text())
        if progress["settings"] != settings:
            raise SystemExit(f"{state_dir} was made with {progress['settings']}; pass --fresh to start over.")
    stage = progress["stage"] + 1
    torch.manual_seed(args.seed * 1000 + stage)
    env = driving_env(DRIVING_WORLDS, args.seed * 1000 + stage, weak, "env")
    algo = Residual(env.obs_dims["policy"], env.num_actions, cfg, DRIVING_WORLDS, "cpu", has_base=True,
                    seed=args.seed * 1000 + stage)
    if not fresh:
        state = torch.load(state_path)
        algo.load_state_tensors(state["algo"], {"algo_state": state["meta"]})
        algo.replay.load_state_tensors(state["replay"])
    budget_cpu = args.budget_cpu_s - progress["train_cpu_s"]
    budget_steps = args.driving_env_steps - progress["env_steps"]
    steps, laps, episodes, wall, cpu = 0, 0.0, 0.0, 0.0, 0.0
    marks = [args.stage_seconds * (i + 1) / args.evals_per_stage for i in range(args.evals_per_stage - 1)]
    obs = env.reset()
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    while steps < budget_steps:
        action = algo.act(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        algo.process_step(obs, reward, terminated, truncated, info)
        if algo.ready():
            algo.update(obs)
        steps += DRIVING_WORLDS
        done = terminated | truncated
        laps += float(info["success"][done].sum())
        episodes += float(done.sum())
        if (steps // DRIVING_WORLDS) % 32:
            continue
        now_wall, now_cpu = wall + time.perf_counter() - t_wall, cpu + time.process_time() - t_cpu
        if now_wall >= args.stage_seconds or now_cpu >= budget_cpu:
            break
        if marks and now_wall >= marks[0]:  # an eval inside the stage; its time is not training time
            marks.pop(0)
            wall, cpu = now_wall, now_cpu
            add_point(progress, steps, wall, cpu, driving_eval(weak, algo.policy.eval())["success"])
            algo.policy.train()
            t_wall, t_cpu = time.perf_counter(), time.process_time()
    wall, cpu = wall + time.perf_counter() - t_wall, cpu + time.process_time() - t_cpu
    algo.replay.truncated[(algo.replay.ptr - 1) % algo.replay.capacity] = True  # the stage cuts every episode
    actor = algo.policy.eval()
    add_point(progress, steps, wall, cpu, driving_eval(weak, actor)["success"])
    progress["env_steps"] += steps
    progress["train_wall_s"] += wall
    progress["train_cpu_s"] += cpu
    progress["updates"] = algo.num_updates
    progress["stage"] = stage
    progress["train_lap_rate"].append(laps / max(episodes, 1.0))
    progress["load_avg"].append(os.getloadavg()[0])
    progress.setdefault("commands", []).append("python " + " ".join(sys.argv))
    progress.setdefault("machine_cpu", []).append(machine()["machine_cpu"])
    if args.heldout:
        progress["base_repeat"] = driving_eval(weak)["success"]  # the protocol is deterministic: equals base
        progress["heldout"] = {"base": driving_eval(weak, split="heldout")["success"],
                               "residual": driving_eval(weak, actor, split="heldout")["success"]}
    torch.save({"algo": algo.state_tensors(), "meta": algo.state_meta(), "replay": algo.replay.state_tensors()},
               state_path)
    progress_path.write_text(json.dumps(progress, indent=1))
    name = "residual_driving" + (f"_seed{args.seed}" if args.seed else "")
    plot_driving(progress, Path(__file__).resolve().parent / "results" / f"{name}.png")
    rows = [(f"stage {stage}", f"{steps} env steps, {wall:.0f} s wall, {cpu:.0f} s CPU, "
                               f"train lap rate {progress['train_lap_rate'][-1]:.3f}, updates {algo.num_updates}")]
    rows += [("curve env_steps/wall_s/cpu_s/success", " ".join(f"{c[0]}/{c[1]}/{c[2]}/{c[3]:.3f}"
                                                               for c in progress["curve"]))]
    return driving_figures(progress), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("residual", "sac_ppo", "driving_residual"), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=32000)
    parser.add_argument("--rlpd-sigma", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--eval-episodes", type=int, default=16, help="sac_ppo: deterministic eval episodes")
    parser.add_argument("--prefix", default="humanoid", help="sac_ppo: key prefix and curve file name")
    parser.add_argument("--eval-schema-task", action="store_true",
                        help="sac_ppo: evaluate on the task schema's defaults (the 2026-11 humanoid_ keys), not the "
                             "composed task config")
    parser.add_argument("--algos", nargs="+", choices=("ppo", "sac", "fasttd3"), default=["ppo", "sac", "fasttd3"])
    parser.add_argument("--methods", nargs="+", choices=("residual", "rlpd"), default=["residual", "rlpd"])
    parser.add_argument("--base", default="runs/driving_deploy_lap/checkpoints", help="driving PPO checkpoint")
    parser.add_argument("--steer-gain", type=float, default=1.0)
    parser.add_argument("--steer-bias", type=float, default=0.0)
    parser.add_argument("--throttle-bias", type=float, default=0.0)
    parser.add_argument("--scale", type=float, default=0.3, help="residual scale s (driving)")
    parser.add_argument("--state-dir", default="runs/residual_driving")
    parser.add_argument("--stage-seconds", type=float, default=420.0)
    parser.add_argument("--evals-per-stage", type=int, default=1, help="curve points per driving stage")
    parser.add_argument("--budget-cpu-s", type=float, default=1800.0)
    parser.add_argument("--driving-env-steps", type=int, default=3_000_000)
    parser.add_argument("--seed", type=int, default=0, help="driving run seed; sac_ppo: every learner's seed")
    parser.add_argument("--fresh", action="store_true", help="start the driving run over")
    parser.add_argument("--heldout", action="store_true",
                        help="also score base and residual on held-out tracks, and the base again (final stage)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    path = Path(__file__).resolve().parent / "results" / "residual.json"
    if args.part == "residual":
        figures, rows = part_residual(args.seeds, args.env_steps, args.rlpd_sigma, args.methods)
        figures |= {"env_steps": args.env_steps, "num_envs": NUM_ENVS, "eval_worlds": EVAL_ENVS,
                    "task": "PointReach dim 4 radius 0.05 sparse, 50 steps", "utd_updates_per_vector_step": 4.0,
                    "rlpd_explore_sigma": args.rlpd_sigma}
    elif args.part == "driving_residual":
        figures, rows = part_driving(args)  # the commands are in driving_residual_commands_per_stage
    else:
        figures, rows = part_sac_ppo(args.seconds, args.algos, args.eval_episodes, args.prefix,
                                     not args.eval_schema_task, args.seed)
        figures |= {f"{args.prefix}_budget_wall_s": args.seconds, f"{args.prefix}_eval_episodes": args.eval_episodes,
                    f"{args.prefix}_eval_task": "schema defaults" if args.eval_schema_task else "composed task config",
                    f"{args.prefix}_seed": args.seed}

    old = json.loads(path.read_text()) if path.exists() else {}
    summary = summarize({**old, **figures}) if args.part != "driving_residual" else {}
    save("residual", {**figures, **summary})
    rows += [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in summary.items()]
    print(table(rows, f"residual benchmark ({args.part})"))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
