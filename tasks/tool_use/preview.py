"""``robotrl tools preview``: render a contact sheet (PNG) of procedurally generated tools.

Example::

    robotrl tools preview --seed 0 --n 12 --out contact_sheet.png
    robotrl tools preview --split heldout_family --n 6

Each tool is dropped on a table and allowed to settle, then rendered headless (EGL by
default; set ``MUJOCO_GL=osmesa`` where EGL is missing).
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import argparse  # noqa: E402
import logging  # noqa: E402

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from robotrl.tasks.tool_use import tools  # noqa: E402

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robotrl tools preview", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="tool generator seed")
    p.add_argument("--n", type=int, default=12, help="number of tools on the sheet")
    p.add_argument("--split", default="all", choices=("all", *tools.SPLITS),
                   help="which tools: all families, or one split's pool")
    p.add_argument("--size", type=int, default=240, help="pixels per tile")
    p.add_argument("--out", default="contact_sheet.png", help="output PNG path")
    return p


def sample_sheet(split: str, n: int, seed: int) -> list[tools.ToolSpec]:
    """``n`` tools cycling over the families of ``split`` (``all``: every family, training indices)."""
    families = tools.FAMILIES if split == "all" else tools.split_families(split)
    offset = tools.HELDOUT_INDEX_OFFSET if split == "heldout" else 0
    nf = len(families)
    return [tools.sample_tool(families[i % nf], offset + i // nf, seed) for i in range(n)]


def render_tool(tool: tools.ToolSpec, size: int) -> np.ndarray:
    """Settle ``tool`` on a table for 0.5 s and render it: ``(size, size, 3)`` uint8."""
    from robotrl.sim.render import BatchRenderer

    spec = tools.tool_scene(tool, height=0.01)
    spec.worldbody.add_light(pos=[0, 0, 1.0], dir=[0, 0, -1], diffuse=[0.9, 0.9, 0.9])
    spec.worldbody.add_camera(name="sheet", pos=[0.05, -0.32, 0.26], xyaxes=[1, 0, 0, 0, 0.63, 0.77])
    model = spec.compile()
    data = mujoco.MjData(model)
    for _ in range(int(0.5 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    renderer = BatchRenderer(model, size=(size, size), lean=False)
    try:
        return renderer.render_data(model, data, "sheet")
    finally:
        renderer.close()


def contact_sheet(sheet: list[tools.ToolSpec], size: int, out: str) -> str:
    """Render every tool of ``sheet`` into a labelled grid and save it as PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(sheet), 6)
    rows = int(np.ceil(len(sheet) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 2.4 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, tool in zip(axes.flat, sheet, strict=True):
        ax.imshow(render_tool(tool, size))
        split = "held-out family" if tool.family in tools.HELDOUT_FAMILIES else (
            "held-out inst." if tool.index >= tools.HELDOUT_INDEX_OFFSET else "train")
        handle_vol, head_vol = tool.volume()
        mass = handle_vol * tool.handle_density + head_vol * tool.head_density
        ax.set_title(f"{tool.family} #{tool.index % tools.HELDOUT_INDEX_OFFSET}\n"
                     f"{2 * tool.handle_half[0] * 100:.0f} cm, {mass * 1000:.0f} g, {split}", fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    log.info("wrote tool contact sheet %s (%d tools)", out, len(sheet))
    return out


def plot_trace(trace: dict[str, np.ndarray], out_dir: str, step_dt: float) -> str:
    """Goal errors, tool height and goals reached of one world over time -> ``tool_use_trace.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(len(trace["goal_pos_err"])) * step_dt
    fig, axes = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
    axes[0].plot(t, trace["goal_pos_err"], label="position error (m)")
    axes[0].plot(t, trace["goal_rot_err"] / np.pi, label="orientation error (rad / pi)")
    axes[0].legend(fontsize=8)
    axes[1].plot(t, trace["tool_height"], label="tool height (m)")
    axes[1].plot(t, trace["lifted"] * 0.15, "--", label="lifted")
    axes[1].legend(fontsize=8)
    axes[2].step(t, trace["goals_reached"], where="post")
    axes[2].set_ylabel("goals reached")
    axes[2].set_xlabel("time (s)")
    fig.tight_layout()
    path = os.path.join(out_dir, "tool_use_trace.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    """Entry point of ``robotrl tools preview``; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.n < 1:
        raise ValueError(f"--n must be >= 1, got {args.n}.")
    contact_sheet(sample_sheet(args.split, args.n, args.seed), args.size, args.out)
    return 0
