"""``robotrl warp-compile``: fill Warp's kernel cache with a task's CUDA kernels, no GPU needed.

    robotrl warp-compile task=tool_use_gpu                 # sm_90 (H100, H200) into ~/.cache/warp
    robotrl warp-compile task=humanoid_gpu --arch 80,90     # A100 and H100
    robotrl warp-compile task=tool_use_gpu --cache-dir /shared/warpcache   # then WARP_CACHE_PATH=/shared/warpcache

The arguments that are not options are ``robotrl train``'s Hydra overrides: the task and everything
that shapes its model (``task.integrator=euler``, ``sim.njmax=128``) must match the training run,
since MuJoCo Warp generates kernels per model; some are specialized on the world count too (the size of
batched per-world fields), so by default the run's ``sim.num_envs`` worlds are stepped. The command runs
``--steps`` random-action steps on Warp's CPU device while it records which
modules load (``robotrl.sim.warp_aot``), then compiles those for each ``--arch`` and prints what it
wrote. Point a cluster's GPU jobs at the cache (``WARP_CACHE_PATH`` or a shared home) and their
builds skip the compile.

``task=tool_use_gpu`` on 2 CPU cores: 5 minutes and 5.4 GB (109 s stepping 24,576 worlds, 186 s
compiling 46 of 51 module variants; the 5 tile-Cholesky ones need the device). With 8 or 64 worlds
the broadphase kernel came out different, which is why the run's world count is the default.
In front of an H200 (session 42) the GPU found 43 of the 52 modules it loaded in this cache and compiled
9 itself (25 s): the 5 tile-Cholesky variants, and 4 whose CUDA code differs from the CPU trace's (a
broadphase, a dense contact Jacobian, a tiled gradient, the iterative line search). Build: 36 s, 305 s cold.
A likely cause, not checked module by module: MuJoCo Warp chooses some kernel specializations by device
in Python (``wp.get_device().is_cuda``: the threads per group of the dense elliptic-cone gradient,
graph-conditional solver loops, SM-sized grids), which a trace on Warp's CPU device cannot produce; the
GPU compiles such modules on first use.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from typing import Any, cast

import torch
from omegaconf import OmegaConf

from robotrl.config import TrainConfig, compose_train
from robotrl.envs.task_env import make_env
from robotrl.sim.warp_aot import compile_traced, trace_launches

log = logging.getLogger(__name__)


def _arch_list(text: str) -> list[int]:
    try:
        return [int(a) for a in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write compute capabilities as 90 or 80,90") from None


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Options and the remaining Hydra overrides (which must include ``task=``)."""
    ap = argparse.ArgumentParser(prog="robotrl warp-compile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=_arch_list, default=[90],
                    help="CUDA compute capabilities, comma-separated (default: 90)")
    ap.add_argument("--steps", type=int, default=4, help="random-action steps traced (default: 4)")
    ap.add_argument("--worlds", type=int, default=0,
                    help="worlds stepped on Warp's CPU device (default 0: the run's sim.num_envs, which some "
                         "kernels are specialized on when per-world model fields are batched)")
    ap.add_argument("--cache-dir", default=None,
                    help="the directory GPU jobs name with WARP_CACHE_PATH (default: Warp's, ~/.cache/warp)")
    ap.add_argument("--seed", type=int, default=0)
    args, overrides = ap.parse_known_args(argv)
    unknown = [a for a in overrides if a.startswith("-")]
    if unknown:
        ap.error(f"unknown options {unknown}; Hydra overrides are key=value")
    other_sim = [o for o in overrides if (o.startswith("sim=") and o != "sim=warp") or o.startswith("sim.backend=")]
    if other_sim:
        ap.error(f"{other_sim}: warp-compile is for MuJoCo Warp runs; drop them (sim=warp is implied)")
    if not any(o.startswith("task=") for o in overrides):
        ap.error("name the task as robotrl train does: task=tool_use_gpu (plus the run's model overrides)")
    if any(a < 70 for a in args.arch):
        ap.error(f"--arch {args.arch}: compute capabilities are written 70, 80, 86, 89, 90 (sm_XX)")
    if args.steps < 1 or args.worlds < 0:
        ap.error(f"--steps {args.steps} must be at least 1 and --worlds {args.worlds} at least 0")
    return args, overrides


def warp_compile(overrides: list[str], arch: list[int], steps: int = 4, worlds: int = 0,
                 cache_dir: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Trace the composed task on Warp's CPU device, then compile its modules for ``arch``: a summary dict."""
    if not any(o.startswith("sim=") for o in overrides):
        overrides = [*overrides, "sim=warp"]
    cfg = cast(TrainConfig, OmegaConf.to_object(compose_train(overrides)))
    if cfg.sim.backend != "warp":
        raise ValueError(f"sim.backend={cfg.sim.backend!r}: warp-compile is for MuJoCo Warp runs; "
                         "drop the sim= override or use sim=warp.")
    sim = dataclasses.replace(cfg.sim, device="cpu", num_envs=worlds or cfg.sim.num_envs)
    t0 = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)
    with trace_launches() as seen:
        env = make_env(cfg.task, sim, seed=seed)
        env.reset()
        for _ in range(steps):
            action = torch.rand(sim.num_envs, env.num_actions, generator=generator) * 2 - 1
            env.step(action)
    traced_s = time.perf_counter() - t0
    log.info("traced %d module variants in %.0f s; compiling for %s", len(seen), traced_s,
             ", ".join(f"sm_{a}" for a in arch))
    report = compile_traced(seen, arch, cache_dir)
    return dataclasses.asdict(report) | {"overrides": overrides, "traced_s": round(traced_s, 1),
                                         "compile_s": round(time.perf_counter() - t0 - traced_s, 1)}
