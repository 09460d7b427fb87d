"""Failed worlds per world-step: MuJoCo Warp (float32) against mujoco.batch (float64), one composed config.

    pip install 'robotrl[gpu]'                                   # MuJoCo Warp (runs on its CPU device too)
    python benchmarks/warp_divergence.py                         # tool_use_gpu, 64 worlds, Warp's CPU device
    python benchmarks/warp_divergence.py --override task.integrator=implicitfast
    python benchmarks/warp_divergence.py --device cuda --worlds 4096
    python benchmarks/warp_divergence.py --task humanoid_gpu --override task.push_interval_s=0
    python benchmarks/warp_divergence.py --geom-solref 0.04     # softer contacts (every geom's solref time constant)

The composed ``task=<task> sim.num_envs=<worlds>`` config is built once; each backend gets it, with
only ``sim.backend``/``sim.device`` changed, the same env seed and the same action sequence:
zeros (the robot holds its first targets) and uniform random actions in [-1, 1] (as early in
training). A world counts as failed when the backend reports it (NaN/Inf state or ``|qvel|`` above
``sim.divergence_threshold``); ``TaskEnv`` resets it and counts it in ``info["sim_resets"]``. For
Warp the table also names the joints whose velocity was largest when a world failed.

Why: the H200 run of ``tool_use_gpu`` reset about 100 of 24,576 worlds per step for diverged
physics (gpu.json ``gpu_h200_tool_use_note``); this script reproduces such rates without a GPU.
Keys start with the task, worlds x steps and the overrides' last names
(``tool_use_gpu_64x200_integrator-implicitfast_...``).
Results: ``benchmarks/results/warp_divergence.json``.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time
from dataclasses import replace
from typing import Any

import mujoco
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compose_train, save, table  # noqa: E402

log = logging.getLogger("benchmarks.warp_divergence")


def soften_contacts(timeconst: float) -> None:
    """Give every geom of the next models built the contact time constant ``timeconst`` (s), on both backends."""
    import robotrl.envs.task_env as task_env

    build = task_env.make_sim

    def make_sim(model: Any, cfg: Any) -> Any:
        model.geom_solref[:, 0] = timeconst
        return build(model, cfg)

    task_env.make_sim = make_sim  # type: ignore[assignment]


def rollout(cfg: Any, sim_cfg: Any, mode: str, steps: int, seed: int) -> dict[str, Any]:
    """Roll ``steps`` env steps with ``mode`` actions; failed worlds, their worst joints, wall time."""
    from robotrl.envs.task_env import make_env

    env = make_env(cfg.task, sim_cfg, seed=seed)
    model, sim = env.sim.model, env.sim
    worst: collections.Counter[str] = collections.Counter()
    step = sim.step

    def counted(nstep: int = 1) -> torch.Tensor:
        bad = step(nstep)
        if bad.numel():
            dofs = sim.bind("qvel")[bad].abs().nan_to_num(float("inf")).argmax(dim=1).tolist()
            worst.update(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.dof_jntid[d])) or str(d)
                         for d in dofs)
        return bad

    sim.step = counted  # type: ignore[method-assign]
    gen = torch.Generator().manual_seed(seed)
    n = sim_cfg.num_envs
    t0 = time.perf_counter()
    for _ in range(steps):
        action = torch.rand(n, env.num_actions, generator=gen) * 2 - 1
        env.step((action if mode == "random" else torch.zeros_like(action)).to(env.device))
    wall = time.perf_counter() - t0
    failed = env.total_sim_resets
    env.close()
    return {"failed": failed, "per_world_step": failed / (n * steps), "wall_s": wall,
            "worst_joints": ", ".join(f"{k} {v}" for k, v in worst.most_common(3))}


def main() -> None:
    """Compose once, run every (action mode, backend) pair, print the table, save the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="tool_use_gpu")
    ap.add_argument("--worlds", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--device", default="cpu", help="Warp's device: cpu (Warp's CPU device) or cuda")
    ap.add_argument("--modes", nargs="+", default=["zero", "random"], choices=["zero", "random"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--override", nargs="*", default=[], help="Hydra overrides for the composed config")
    ap.add_argument("--geom-solref", type=float, default=0.0, help="contact time constant (s) for every geom of "
                    "both backends' models (0: the task's own, MuJoCo's 0.02 default)")
    ap.add_argument("--tag", default="", help="key prefix, to keep a rerun beside earlier figures of the same config")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("robotrl.envs.task_env").setLevel(logging.ERROR)  # one warning per failed step otherwise
    cfg, _, _ = compose_train([f"task={args.task}", f"sim.num_envs={args.worlds}", *args.override])
    # each override as its key's last name and its value: task.timestep=0.01 -> timestep-0.01
    parts = (o.partition("=") for o in args.override)
    tag = "_".join([args.task, f"{args.worlds}x{args.steps}", *(f"{k.rsplit('.', 1)[-1]}-{v}" for k, _, v in parts)])
    if args.geom_solref:
        soften_contacts(args.geom_solref)
        tag = f"{tag}_solref{args.geom_solref:g}"
    if args.tag:
        tag = f"{args.tag}_{tag}"
    backends = {"mujoco_batch": replace(cfg.sim, backend="cpu"),
                "warp": replace(cfg.sim, backend="warp", device=args.device)}
    fig: dict[str, Any] = {f"{tag}_{k}": v for k, v in (("worlds", args.worlds), ("steps", args.steps),
                                                               ("warp_device", args.device), ("seed", args.seed),
                                                               ("overrides", " ".join(args.override)))}
    rows = []
    for mode in args.modes:
        for name, sim_cfg in backends.items():
            res = rollout(cfg, sim_cfg, mode, args.steps, args.seed)
            for key, value in res.items():
                fig[f"{tag}_{mode}_{name}_{key}"] = value
            rows.append((f"{mode} actions, {name}", f"{res['failed']} failed ({res['per_world_step']:.4%} of "
                         f"world-steps) in {res['wall_s']:.1f} s; {res['worst_joints'] or '-'}"))
    log.info("\n%s", table(rows, f"failed worlds: {tag}, {args.worlds} worlds x {args.steps} steps"))
    path = save("warp_divergence", fig, merge=True)
    log.info("saved %s", path)


if __name__ == "__main__":
    main()
