"""GPU backend: MuJoCo Warp on CUDA, ``nstep`` substeps captured in a CUDA graph.

Bound fields are ``wp.to_torch`` views of the Warp arrays (float32, zero-copy, on the
same CUDA device). Per-world model fields must be declared up front because MuJoCo Warp
allocates the batch dimension in ``put_model``: ``SimConfig.per_world_fields`` lists
them. MuJoCo Warp has no PGS solver: task models use Newton or CG.

This module is only imported when ``sim.backend=warp`` (``robotrl.sim.backend.make_sim``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import torch

from robotrl.sim.backend import BatchSim, SimConfig

log = logging.getLogger(__name__)

try:
    import mujoco_warp as mjw
    import warp as wp
except ImportError as err:  # pragma: no cover - depends on the install
    raise ImportError(
        "sim.backend=warp needs MuJoCo Warp: pip install 'robotrl[gpu]' (mujoco-warp, warp-lang)."
    ) from err

# Fields that set_const must recompute after an edit (see mujoco_warp.set_const).
_SETCONST = {"body_mass", "body_inertia", "body_ipos", "body_iquat", "qpos0", "dof_armature", "body_pos",
             "body_quat", "actuator_gear"}
# What set_const writes (mujoco_warp.set_const, all groups), world by world at row ``world % rows``: with a
# per-world input above, a shared output is one row that every world overwrites (the last one wins), so the
# outputs are made per world too. Seen with tool_use_language's per-world qpos0: every world held its tool at
# another world's weld pose (eq_data), and the scripted teacher's success fell from 1.0 to 0.78.
_SETCONST_OUTPUTS = ("body_subtreemass", "dof_invweight0", "body_invweight0", "tendon_invweight0", "actuator_acc0",
                     "eq_data", "tendon_length0", "cam_pos0", "cam_poscom0", "cam_mat0", "light_pos0",
                     "light_poscom0", "light_dir0", "geom_aabb", "geom_rbound")


class WarpBatchSim(BatchSim):
    """``nsim`` worlds on MuJoCo Warp (see ``robotrl.sim.backend``)."""

    def __init__(self, model: mujoco.MjModel, cfg: SimConfig) -> None:
        if model.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
            raise ValueError("MuJoCo Warp does not support the PGS solver: build the task model with Newton or CG.")
        wp.init()
        self.model = model
        self.nsim = cfg.num_envs
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self._wp_device = wp.get_device(str(self.device))
        batched = {name: cfg.num_envs for name in cfg.per_world_fields}
        if _SETCONST & set(batched):
            batched |= {name: cfg.num_envs for name in _SETCONST_OUTPUTS}
        with wp.ScopedDevice(self._wp_device):
            self.m = mjw.put_model(model, batch_sizes=batched)
            data = mujoco.MjData(model)
            mujoco.mj_forward(model, data)
            kwargs = {}
            if cfg.nconmax > 0:
                kwargs["nconmax"] = cfg.nconmax
            if cfg.njmax > 0:
                kwargs["njmax"] = cfg.njmax
            self.d = mjw.put_data(model, data, nworld=cfg.num_envs, **kwargs)
        self._per_world = set(cfg.per_world_fields)
        self._views: dict[str, torch.Tensor] = {}
        self._graphs: dict[object, Any] = {}  # key -> wp.Graph
        self._const_dirty = False  # a set_const field was written: set_const runs before the next forward or step
        self._reset_mask = torch.zeros(self.nsim, dtype=torch.bool, device=self.device)
        self._wp_reset_mask = wp.from_torch(self._reset_mask)
        self._host_data = mujoco.MjData(model)
        self._render_ctx: Any = None  # mjw.RenderContext
        self._render_key: tuple[int, tuple[int, int]] | None = None
        self._rgb: Any = None  # wp.array (nsim, H, W) of vec3
        self._qpos = self.bind("qpos")
        self._qvel = self.bind("qvel")
        log.info("MuJoCo Warp: %d worlds on %s (per-world fields: %s)", self.nsim, self.device,
                 ", ".join(sorted(self._per_world)) or "none")

    def bind(self, field: str) -> torch.Tensor:
        """Live ``(nsim, ...)`` float32 torch view of Warp data field ``field``."""
        if field not in self._views:
            arr = getattr(self.d, field, None)
            if arr is None:
                raise KeyError(f"Cannot bind {field!r}: MuJoCo Warp's Data has no such field.")
            self._views[field] = wp.to_torch(arr)
        return self._views[field]

    def _run(self, nstep: int) -> None:
        for _ in range(nstep):
            mjw.step(self.m, self.d)

    def _launch(self, key: object, fn: Callable[[], None]) -> None:
        """Run ``fn`` (Warp launches only); with ``cuda_graph`` it is captured on first use and replayed after.

        Replaying a graph costs one launch instead of one per kernel: on an H100 with 4096 humanoid
        worlds, ``forward`` took 5.1 ms eager and 0.5 ms replayed, ``reset_data`` 6.2 and 0.02 ms,
        ``set_const`` 14.6 and 3.5 ms. Inputs that change between calls live in fixed buffers.
        """
        with wp.ScopedDevice(self._wp_device):
            if not self.cfg.cuda_graph:
                fn()
                return
            graph = self._graphs.get(key)
            if graph is None:
                fn()  # the real call; compiles the kernels before capture
                with wp.ScopedCapture() as capture:  # records only: nothing runs here
                    fn()
                self._graphs[key] = capture.graph
            else:
                wp.capture_launch(graph)

    def _set_const(self) -> None:
        if self._const_dirty:
            self._launch("set_const", lambda: mjw.set_const(self.m, self.d))
            self._const_dirty = False

    def step(self, nstep: int = 1) -> torch.Tensor:
        """Advance all worlds (graph-captured after the first call); return diverged world ids."""
        self._set_const()
        self._launch(("step", nstep), lambda: self._run(nstep))
        bad = ~torch.isfinite(self._qpos).all(dim=1) | ~torch.isfinite(self._qvel).all(dim=1)
        bad |= self._qvel.abs().amax(dim=1) > self.cfg.divergence_threshold
        return bad.nonzero().squeeze(1)

    def reset(
        self,
        ids: torch.Tensor,
        qpos: torch.Tensor | None = None,
        qvel: torch.Tensor | None = None,
    ) -> None:
        """Reset worlds ``ids`` (masked ``reset_data``), write the given state, then forward."""
        if ids.numel() == 0:
            return
        idx = ids.to(self.device, torch.int64)
        self._reset_mask.zero_()
        self._reset_mask[idx] = True
        self._launch("reset", lambda: mjw.reset_data(self.m, self.d, reset=self._wp_reset_mask))
        if qpos is not None:
            self._qpos[idx] = qpos.to(self.device, self._qpos.dtype)
        if qvel is not None:
            self._qvel[idx] = qvel.to(self.device, self._qvel.dtype)
        self.forward()

    def forward(self, ids: torch.Tensor | None = None) -> None:
        """``mj_forward`` for all worlds (Warp computes every world in one launch; a pending set_const first)."""
        self._set_const()
        self._launch("forward", lambda: mjw.forward(self.m, self.d))

    def _model_view(self, name: str) -> torch.Tensor:
        arr = getattr(self.m, name, None)
        if arr is None:
            raise KeyError(f"MuJoCo Warp's Model has no field {name!r}.")
        return wp.to_torch(arr)

    def set_model_field(self, name: str, ids: torch.Tensor, values: torch.Tensor) -> None:
        """Per-world values of a field declared in ``sim.per_world_fields``.

        Fields with derived constants (masses, inertias, ...: ``_SETCONST``) get them recomputed by
        ``set_const`` once, before the next ``forward`` or ``step``, however many such writes come first.
        """
        if name not in self._per_world:
            raise KeyError(
                f"Model field {name!r} is shared by all worlds on the warp backend. Add it to "
                f"sim.per_world_fields (now {sorted(self._per_world)}) to randomize it per world."
            )
        view = self._model_view(name)
        view[ids.to(self.device, torch.int64)] = values.to(self.device, view.dtype).reshape(
            (ids.numel(), *view.shape[1:])
        )
        if name in _SETCONST:
            self._const_dirty = True  # once before the next forward or step, however many fields change

    def model_field(self, name: str) -> torch.Tensor:
        """``(nsim, ...)`` values of a model field as each world sees it."""
        view = self._model_view(name)
        return view.expand(self.nsim, *view.shape[1:]).clone()

    def ray(
        self, pnt: torch.Tensor, vec: torch.Tensor, bodyexclude: int = -1, geomgroup: list[int] | None = None
    ) -> torch.Tensor:
        """Batched ray casts ``(nsim, nray)`` with ``mujoco_warp.rays``; -1 for a miss."""
        n, nray = pnt.shape[0], pnt.shape[1]
        group = wp.types.vector(6, wp.float32)(*(geomgroup or [-1] * 6))
        dist = torch.empty(n, nray, device=self.device)
        geomid = torch.empty(n, nray, dtype=torch.int32, device=self.device)
        normal = torch.empty(n, nray, 3, device=self.device)
        exclude = torch.full((nray,), bodyexclude, dtype=torch.int32, device=self.device)
        with wp.ScopedDevice(self._wp_device):
            mjw.rays(
                self.m, self.d,
                wp.from_torch(pnt.to(self.device, torch.float32).contiguous(), dtype=wp.vec3f),
                wp.from_torch(vec.to(self.device, torch.float32).contiguous(), dtype=wp.vec3f),
                group, True, wp.from_torch(exclude),
                wp.from_torch(dist), wp.from_torch(geomid), wp.from_torch(normal, dtype=wp.vec3f),
            )
        return dist

    def render(self, camera: str | int, ids: torch.Tensor, size: tuple[int, int] = (84, 84)) -> np.ndarray:
        """Host copy of ``render_tensor``: ``(k, H, W, 3)`` uint8."""
        return self.render_tensor(camera, ids, size).cpu().numpy()

    def render_tensor(self, camera: str | int, ids: torch.Tensor, size: tuple[int, int] = (84, 84)) -> torch.Tensor:
        """Worlds ``ids`` from a model camera: ``(k, H, W, 3)`` uint8 on ``self.device``, ray traced for all at once.

        MuJoCo Warp's batch renderer (``mujoco_warp.render``: one launch for all ``nsim`` worlds, the
        BVH refit to the current poses first); lean settings as on the CPU: no shadows or textures.
        The free camera (``-1``) has no batched form and goes through the OpenGL renderer, world by world.
        """
        cam = camera if isinstance(camera, int) else mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if isinstance(camera, str) and cam < 0:
            raise KeyError(f"The model has no camera {camera!r}.")
        if cam < 0:  # the base class's OpenGL renderer (its render_tensor would call back into this one)
            return torch.from_numpy(super().render(camera, ids, size)).to(self.device)
        key = (int(cam), (int(size[0]), int(size[1])))
        with wp.ScopedDevice(self._wp_device):
            if self._render_key != key:
                height, width = key[1]
                self._render_ctx = mjw.create_render_context(
                    self.model, self.nsim, cam_res=(width, height), render_rgb=True, render_depth=False,
                    use_textures=False, use_shadows=False, cam_active=[key[0]],
                )
                self._rgb = wp.zeros((self.nsim, height, width), dtype=wp.vec3)
                self._render_key = key
            mjw.refit_bvh(self.m, self.d, self._render_ctx)
            mjw.render(self.m, self.d, self._render_ctx)
            mjw.get_rgb(self._render_ctx, 0, self._rgb)
        rgb = wp.to_torch(self._rgb)[ids.to(self.device, torch.int64)]  # (k, H, W, 3) float in [0, 1]
        return (rgb * 255.0 + 0.5).clamp_(0, 255).to(torch.uint8)

    def get_world(
        self, world: int, model: mujoco.MjModel | None = None, data: mujoco.MjData | None = None
    ) -> tuple[mujoco.MjModel, mujoco.MjData]:
        """Host copy of world ``world`` (per-world model fields copied in) for rendering.

        Writes into ``model`` and ``data`` when they are given (an earlier result).
        """
        model = self.model.__copy__() if model is None else model
        for name in self._per_world:
            value = self._model_view(name)
            row = value[world if value.shape[0] > 1 else 0].detach().cpu().numpy()
            getattr(model, name)[...] = np.asarray(row, dtype=np.float64).reshape(getattr(model, name).shape)
        data = mujoco.MjData(model) if data is None else data
        mjw.get_data_into(data, model, self.d, world_id=world)
        mujoco.mj_forward(model, data)
        return model, data
