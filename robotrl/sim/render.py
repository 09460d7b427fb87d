"""Headless rendering of batch worlds through MuJoCo's OpenGL renderer (EGL or OSMesa).

``MUJOCO_GL`` picks the GL backend; when it is unset we choose ``egl`` (installed by
``scripts/setup.sh``). Training-time cameras use *lean* settings (no shadows,
reflections, skybox or multisampling, coarse tessellation, framebuffer = image size):
about 100x faster than the defaults with software GL. Eval videos use full quality.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import TYPE_CHECKING

import mujoco
import numpy as np

if TYPE_CHECKING:
    import torch

    from robotrl.sim.backend import BatchSim

log = logging.getLogger(__name__)




def lean_model(model: mujoco.MjModel, size: tuple[int, int]) -> mujoco.MjModel:
    """Copy of ``model`` with cheap visual settings for a ``(H, W)`` image."""
    m = mujoco.MjModel.from_xml_string("<mujoco/>") if model is None else model.__copy__()
    m.vis.quality.offsamples = 0
    m.vis.quality.numslices = 8
    m.vis.quality.numstacks = 4
    m.vis.global_.offheight = max(int(size[0]), 1)
    m.vis.global_.offwidth = max(int(size[1]), 1)
    for g in range(m.ngeom):
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE:
            m.geom_size[g, 2] = 1.0
    m.mat_texid[:] = -1
    return m


class BatchRenderer:
    """Renders selected worlds of a BatchSim one after another into ``(k, H, W, 3)`` uint8."""

    def __init__(self, model: mujoco.MjModel, size: tuple[int, int] = (84, 84), lean: bool = True) -> None:
        self.size = size
        self.lean = lean
        height, width = size
        self._model = lean_model(model, size) if lean else _sized(model, size)
        try:
            self._renderer = mujoco.Renderer(self._model, height=height, width=width)
        except Exception as err:  # GL context creation failures come as several types
            raise RuntimeError(
                f"Could not create a headless OpenGL context (MUJOCO_GL={os.environ.get('MUJOCO_GL')}): {err}. "
                "Run scripts/setup.sh to install EGL/OSMesa, or set MUJOCO_GL=osmesa."
            ) from err
        self._opt = mujoco.MjvOption()
        self._planes = np.flatnonzero(self._model.geom_type == mujoco.mjtGeom.mjGEOM_PLANE)
        # render_worlds writes each world into one reused (model, data) pair of the sim it last rendered;
        # a weak reference, so that a sim holding this renderer is not kept alive by a cycle
        self._world: tuple[weakref.ref, mujoco.MjModel, mujoco.MjData] | None = None
        if lean:
            flags = self._renderer.scene.flags
            flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
            flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = 0

    def render_data(self, model: mujoco.MjModel, data: mujoco.MjData, camera: str | int) -> np.ndarray:
        """Render one ``(model, data)`` pair: ``(H, W, 3)`` uint8."""
        if self.lean:
            for name in ("geom_rgba", "geom_size", "geom_pos", "geom_quat", "body_pos", "body_quat"):
                src = getattr(model, name)
                dst = getattr(self._model, name)
                if src.shape == dst.shape:
                    dst[:] = src
            self._model.geom_size[self._planes, 2] = 1.0
        self._renderer.update_scene(data, camera=camera, scene_option=self._opt)
        if self.lean:
            flags = self._renderer.scene.flags
            flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
            flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = 0
        return self._renderer.render().copy()

    def render_worlds(self, sim: BatchSim, camera: str | int, ids: torch.Tensor) -> np.ndarray:
        """Render worlds ``ids`` of ``sim``: ``(k, H, W, 3)`` uint8.

        Each world is written into one ``(MjModel, MjData)`` pair that is kept for the next call
        (``sim.get_world(w, model, data)``): a fresh copy per world cost more than drawing it.
        """
        frames = []
        for world in ids.tolist():
            if self._world is None or self._world[0]() is not sim:
                model, data = sim.get_world(int(world))
                self._world = (weakref.ref(sim), model, data)
            else:
                model, data = sim.get_world(int(world), self._world[1], self._world[2])
            frames.append(self.render_data(model, data, camera))
        return np.stack(frames) if frames else np.zeros((0, *self.size, 3), np.uint8)

    def close(self) -> None:
        """Release the GL context."""
        self._renderer.close()


def _sized(model: mujoco.MjModel, size: tuple[int, int]) -> mujoco.MjModel:
    m = model.__copy__()
    m.vis.global_.offheight = max(m.vis.global_.offheight, int(size[0]))
    m.vis.global_.offwidth = max(m.vis.global_.offwidth, int(size[1]))
    return m


def write_video(frames: list[np.ndarray] | np.ndarray, path: str, fps: int = 30) -> str:
    """Write ``(T, H, W, 3)`` uint8 frames to an MP4 (H.264 via imageio-ffmpeg)."""
    import imageio.v2 as imageio

    with imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=1) as writer:
        for frame in frames:
            writer.append_data(np.asarray(frame))  # type: ignore[attr-defined]  # imageio's ffmpeg writer
    log.info("wrote video %s (%d frames)", path, len(frames))
    return path
