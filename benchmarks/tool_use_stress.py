"""tool_use off its training distribution: one checkpoint, ``robotrl eval`` with task overrides, in one run.

    python benchmarks/tool_use_stress.py --checkpoint runs/tool_use/<stamp>      # about 4 minutes on 2 cores
    python benchmarks/tool_use_stress.py --checkpoint <run> --rows nominal tools_large --num-envs 64

Every row evaluates the same checkpoint through ``robotrl.runners.evaluate.evaluate`` (what
``robotrl eval`` runs) on one composed eval config: the same worlds, episodes (one per
world), seed, split (``train``, at the curriculum stage the run reached), deterministic
actions and the training's domain randomization (``randomize=true``; ``robotrl eval``
turns it off by default). Only the row's ``task.<field>`` overrides differ, each outside
what training drew:

* ``tools_small`` / ``tools_large``: every tool 0.75-0.85x / 1.2-1.3x its size (``task.tool_size_scale``;
  densities kept, so mass goes with the cube); training uses the pool as generated;
* ``spawn_wide``: tool spawn square +-10 cm instead of +-5 cm (``task.spawn_range``);
* ``dynamics_light`` / ``dynamics_heavy``: tool mass, friction, actuator gains and joint damping
  multiplied by 0.5-0.7 / 1.3-1.6 instead of 0.7-1.3 (``task.dynamics_range``);
* ``kicks_3x``: force and torque kicks on the tool three times as strong (``task.kick_accel``);
* ``pose_noise_3x``: three times the noise on the observed tool pose (3 cm, 15 degrees).

Figures (lift rate, goals per episode, drop rate, reach rate, return) go to
``benchmarks/results/tool_use.json`` under ``<prefix>_<row>_*`` (default prefix ``cpu_stress``),
each row's lift rate also as a ratio to the nominal row's.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, fmt, load_avg, save, table  # noqa: E402

ROWS: dict[str, dict[str, Any]] = {
    "nominal": {},
    "tools_small": {"tool_size_scale": [0.75, 0.85]},
    "tools_large": {"tool_size_scale": [1.2, 1.3]},
    "spawn_wide": {"spawn_range": 0.10},
    "dynamics_light": {"dynamics_range": [0.5, 0.7]},
    "dynamics_heavy": {"dynamics_range": [1.3, 1.6]},
    "kicks_3x": {"kick_accel": 6.0},
    "pose_noise_3x": {"object_pos_noise": 0.03, "object_rot_noise": 0.2618},
}
METRICS = {"lifted": "lift_rate", "goals_reached": "goals_per_episode", "dropped": "drop_rate",
           "reached": "reach_rate", "return": "return", "episodes": "episodes_count"}


def compose_eval(checkpoint: str, num_envs: int, seed: int) -> Any:
    """``robotrl eval checkpoint=<checkpoint>`` composed as the CLI does, without video; built once."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from robotrl.config import register_configs

    register_configs()
    overrides = [f"checkpoint={checkpoint}", f"num_envs={num_envs}", f"episodes={num_envs}", f"seed={seed}",
                 "video=false", "split=train", "deterministic=true", "randomize=true"]
    with initialize_config_module(config_module="robotrl.configs", version_base="1.3"):
        cfg = compose(config_name="eval", overrides=overrides)
    return OmegaConf.to_object(cfg)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True, help="tool_use run dir (or checkpoint file)")
    p.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--num-envs", type=int, default=256, help="worlds, one episode each")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--prefix", default="cpu_stress")
    p.add_argument("--out-dir", default=str(RESULTS_DIR))
    args = p.parse_args()

    from robotrl.runners.evaluate import evaluate

    base = compose_eval(args.checkpoint, args.num_envs, args.seed)
    fig: dict[str, Any] = {"command": "python benchmarks/tool_use_stress.py " + " ".join(sys.argv[1:]),
                           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                    text=True).stdout.strip(),
                           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "checkpoint": args.checkpoint, "num_envs": args.num_envs, "seed": args.seed,
                           **load_avg("at_start")}
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for row in args.rows:
            start = time.time()
            cfg = replace(base, task=dict(ROWS[row]), out_dir=str(Path(tmp) / row))
            out = evaluate(cfg)
            results[row] = out
            fig[f"{row}_overrides"] = " ".join(f"task.{k}={v}" for k, v in ROWS[row].items()) or "(none)"
            for key, name in METRICS.items():
                if key in out:
                    fig[f"{row}_{name}"] = out[key]
            fig[f"{row}_wall_s"] = round(time.time() - start, 1)
            print(f"{row}: lift {out.get('lifted', float('nan')):.3f}, goals {out.get('goals_reached', 0):.2f}, "
                  f"drop {out.get('dropped', float('nan')):.3f} ({fig[f'{row}_wall_s']} s)", flush=True)
    nominal = results.get("nominal", {}).get("lifted")
    if nominal:
        for row, out in results.items():
            fig[f"{row}_lift_rate_ratio_vs_nominal"] = out["lifted"] / nominal
    fig.update(load_avg("at_end"))
    save("tool_use", {f"{args.prefix}_{k}": v for k, v in fig.items()}, out_dir=args.out_dir)
    rows = [(row, f"lift {fmt(out.get('lifted'))}  goals {fmt(out.get('goals_reached'))}  "
                  f"drop {fmt(out.get('dropped'))}  reach {fmt(out.get('reached'))}  ({fig[f'{row}_overrides']})")
            for row, out in results.items()]
    print(table(rows, f"tool_use stress, {args.num_envs} episodes per row ({args.checkpoint})"))


if __name__ == "__main__":
    main()
