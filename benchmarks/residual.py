"""Residual RL benchmark (ResFiT vs RLPD) and SAC vs PPO on the humanoid.

Part ``residual`` (per seed, 4-D PointReach with a sparse success reward, radius 0.05):
  1. record 20 successful demonstrations from a noisy scripted teacher (noise std 0.5);
  2. fit a chunked BC base (chunk 5, temporal ensembling) on them: ``base_success``;
  3. ResFiT residual (s = 0.3, gamma = 0.95, UTD 4, 10 Q heads, n-step 3) on that base, with the
     demos (base actions relabelled) in a 50/50 batch,
     for ``--env-steps`` env steps: ``residual_success``;
  4. RLPD: the same learner and demos with no base, same env steps: ``rlpd_success``.
  Success is the deterministic policy's, on the first episode of each of 256 held-out worlds.

Part ``sac_ppo``: SAC and PPO on ``humanoid`` from the CLI's composed configs (the
``tuning/humanoid_*`` files), each for ``--seconds`` of wall-clock on this machine; the
deterministic return is evaluated on 16 episodes; return-vs-steps and return-vs-time points
come from each run's ``metrics.jsonl``.

    python benchmarks/residual.py --part residual --seeds 0 1 2 --env-steps 32000
    python benchmarks/residual.py --part sac_ppo --seconds 90 --algos ppo   # then --algos sac

Results are merged into ``benchmarks/results/residual.json`` (flat, units in key names).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save, table  # noqa: E402

from robotrl.algos.bc import BC, BCConfig  # noqa: E402
from robotrl.algos.residual import Residual, ResidualConfig, relabel_base_actions  # noqa: E402
from robotrl.data.collect import collect  # noqa: E402
from robotrl.envs.reach import PointReach, ReachConfig  # noqa: E402
from robotrl.envs.residual import BaseActionEnv  # noqa: E402
from robotrl.policies.frozen import ZeroPolicy  # noqa: E402
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


def part_sac_ppo(seconds: float, algos: list[str], episodes: int = 16) -> tuple[dict, list]:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf
    from robotrl.tasks import config_class

    from robotrl.config import register_configs
    from robotrl.envs.task_env import TaskEnv
    from robotrl.monitoring import read_metrics
    from robotrl.runners import make_runner
    from robotrl.runners.evaluate import run_episodes
    from robotrl.sim import SimConfig

    register_configs()
    out, rows = {}, []
    for algo in algos:
        run_dir = tempfile.mkdtemp(prefix=f"bench_{algo}_")
        with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
            cfg = compose(config_name="train", overrides=[
                "task=humanoid", f"algo={algo}", "progress=false", "tensorboard=false", "save_interval=100000",
                f"max_time_s={seconds}", "max_iterations=1000000", f"run_dir={run_dir}"])
        runner = make_runner(OmegaConf.to_object(cfg), run_dir)
        runner.learn()
        env = TaskEnv(config_class("humanoid")(), SimConfig(num_envs=episodes), seed=12345)
        final = run_episodes(env, runner.algo.policy, episodes, deterministic=True)
        curve = [(r["env_steps"], round(r["time_s"], 1), r.get("episode/return"))
                 for r in read_metrics(run_dir) if r.get("episode/return") is not None]
        stride = max(1, len(curve) // 8)
        out |= {f"humanoid_{algo}_env_steps": runner.env_steps, f"humanoid_{algo}_wall_s": runner.elapsed_s,
                f"humanoid_{algo}_eval_return": final["return"],
                f"humanoid_{algo}_eval_episode_length": final["length"],
                f"humanoid_{algo}_steps_per_s": runner.env_steps / max(runner.elapsed_s, 1e-9),
                f"humanoid_{algo}_curve_env_steps_time_s_train_return": [list(c) for c in curve[::stride]]}
        rows.append((f"humanoid {algo}", f"{runner.env_steps} steps in {runner.elapsed_s:.0f} s, "
                                         f"eval return {final['return']:.1f} (len {final['length']:.0f})"))
        print(rows[-1], flush=True)
    return out, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("residual", "sac_ppo"), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=32000)
    parser.add_argument("--rlpd-sigma", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--algos", nargs="+", choices=("ppo", "sac"), default=["ppo", "sac"])
    parser.add_argument("--methods", nargs="+", choices=("residual", "rlpd"), default=["residual", "rlpd"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    path = Path(__file__).resolve().parent / "results" / "residual.json"
    if args.part == "residual":
        figures, rows = part_residual(args.seeds, args.env_steps, args.rlpd_sigma, args.methods)
        figures |= {"env_steps": args.env_steps, "num_envs": NUM_ENVS, "eval_worlds": EVAL_ENVS,
                    "task": "PointReach dim 4 radius 0.05 sparse, 50 steps", "utd_updates_per_vector_step": 4.0,
                    "rlpd_explore_sigma": args.rlpd_sigma}
    else:
        figures, rows = part_sac_ppo(args.seconds, args.algos)
        figures |= {"humanoid_budget_wall_s": args.seconds}
    import json

    old = json.loads(path.read_text()) if path.exists() else {}
    summary = summarize({**old, **figures})
    save("residual", {**figures, **summary})
    rows += [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in summary.items()]
    print(table(rows, f"residual benchmark ({args.part})"))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
