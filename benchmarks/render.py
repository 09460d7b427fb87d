"""CPU rendering of batch worlds: a fresh world copy per frame against reused buffers, in one run.

    flock /tmp/robotrl-cpu.lock python benchmarks/render.py            # about 2 minutes on 2 cores
    python benchmarks/render.py --quick                                 # smoke run (temp dir)

For each image task (``tool_use_language`` and ``driving_language``, the VLA's tasks, and
``humanoid``'s tracking camera, the VLM reward's), ``--num-envs`` worlds are stepped with
random actions and then rendered at ``--size`` pixels through the same lean ``BatchRenderer``
two ways, timed interleaved (alternating calls, ``--seconds`` each) so both see the same load:

* ``fresh``: what ``BatchSim.render`` did up to session 49, ``sim.get_world(w)`` (an MjModel copy
  and a new MjData per world) and then ``render_data``;
* ``reused``: ``BatchSim.render`` now, which writes each world into one kept pair
  (``sim.get_world(w, model, data)``).

Both must give the same pixels (checked, and recorded as ``*_pixels_equal``). Then the env
steps/s with an image of every world every step (``TaskEnv(image_size=...)``, random actions)
is timed with the current code. Results: ``benchmarks/results/render.json`` (keys
``<task>_<arm>_frames_per_s``, ``<task>_ratio_reused_vs_fresh``, ``<task>_env_steps_per_s_images``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fmt, interleaved, load_avg, save, table, timed  # noqa: E402

from robotrl.envs.task_env import make_env  # noqa: E402
from robotrl.sim.backend import SimConfig  # noqa: E402
from robotrl.sim.render import BatchRenderer  # noqa: E402


def task_configs() -> dict:
    """The composed task configs benchmarked (their own defaults), by name."""
    from omegaconf import OmegaConf
    from robotrl.tasks.driving.language.config import DrivingLanguageConfig
    from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig

    from robotrl.config import compose_train

    humanoid = OmegaConf.to_object(compose_train(["task=humanoid"])).task
    return {"tool_use_language": ToolUseLanguageConfig(), "driving_language": DrivingLanguageConfig(),
            "humanoid": humanoid}


def camera_of(name: str, env) -> str | int:  # noqa: ANN001 - a TaskEnv
    """The camera the task's images (or, for the humanoid, the VLM reward) are rendered from."""
    return env.camera if name != "humanoid" else "track"


def frames_per_s(name: str, cfg, args) -> dict:  # noqa: ANN001 - a task config
    env = make_env(cfg, SimConfig(num_envs=args.num_envs, nthread=0), seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        env.step(torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1)
    camera, size, ids = camera_of(name, env), (args.size, args.size), torch.arange(env.num_envs)
    fresh_renderer = BatchRenderer(env.sim.model, size=size, lean=True)

    def fresh() -> np.ndarray:
        return np.stack([fresh_renderer.render_data(*env.sim.get_world(int(w)), camera) for w in ids])

    def reused() -> np.ndarray:
        return env.sim.render(camera, ids, size)

    equal = bool(np.array_equal(fresh(), reused()))
    times, calls = interleaved({"fresh": fresh, "reused": reused}, seconds=args.seconds)
    fresh_renderer.close()
    out = {f"{name}_{arm}_frames_per_s": calls[arm] * len(ids) / times[arm] for arm in times}
    out[f"{name}_ratio_reused_vs_fresh"] = out[f"{name}_reused_frames_per_s"] / out[f"{name}_fresh_frames_per_s"]
    out[f"{name}_pixels_equal"] = equal
    out[f"{name}_camera"] = str(camera)
    return out


def env_steps_per_s(name: str, cfg, args) -> dict:  # noqa: ANN001 - a task config
    if name == "humanoid":
        return {}  # its images come from the VLM reward wrapper, not TaskEnv observations
    env = make_env(cfg, SimConfig(num_envs=args.num_envs, nthread=0), seed=0, image_size=(args.size, args.size))
    env.reset()
    gen = torch.Generator().manual_seed(0)

    def step() -> int:
        env.step(torch.rand(env.num_envs, env.num_actions, generator=gen) * 2 - 1)
        return env.num_envs

    return {f"{name}_env_steps_per_s_images": timed(step, min_seconds=args.seconds, warmup=5)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="image side in pixels")
    p.add_argument("--seconds", type=float, default=10.0, help="timed seconds per arm and task")
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="smoke run: 1 s per arm, results in a temp dir")
    args = p.parse_args()
    if args.quick:
        args.seconds = 1.0
    torch.set_num_threads(args.torch_threads)
    fig: dict = {"num_envs": args.num_envs, "image_size_px": args.size, "seconds_per_arm": args.seconds,
                 "torch_threads": args.torch_threads, **load_avg("at_start")}
    for name, cfg in task_configs().items():
        print(f"{name}: rendering {args.num_envs} worlds at {args.size} px ...", flush=True)
        fig |= frames_per_s(name, cfg, args) | env_steps_per_s(name, cfg, args)
    fig |= load_avg("at_end")
    print(table([(k, fmt(v)) for k, v in fig.items()], f"rendering, {args.num_envs} worlds, {args.size} px"))
    path = save("render", fig, out_dir=tempfile.mkdtemp() if args.quick else None)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
