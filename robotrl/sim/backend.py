"""BatchSim: the contract between robotrl and a batched MuJoCo backend.

One compiled model, ``nsim`` worlds. Every array crossing this boundary is a torch
tensor whose first dimension is the world index, on the backend's device:

* ``bind(field)`` -> live ``(nsim, ...)`` view of an MjData field (``qpos``: ``(nsim, nq)``,
  ``xpos``: ``(nsim, nbody, 3)``, ...). State fields (``qpos``, ``qvel``, ``ctrl``,
  ``act``, ``mocap_pos``, ``xfrc_applied``, ...) are writable and zero-copy; derived
  fields (``xpos``, ``sensordata``, ...) are refreshed after every ``step``/``reset``/``forward``.
* ``step(nstep)`` advances every world ``nstep`` physics substeps, and returns the ids of
  worlds that became invalid (raised, went NaN/Inf, or were reset by MuJoCo's own
  instability check). Callers reset those worlds; they never crash the run.
* ``reset(ids, qpos, qvel)`` puts worlds ``ids`` (``(k,)`` int64) back to the model's default
  state, optionally with given ``(k, nq)`` / ``(k, nv)`` positions and velocities, and
  recomputes derived quantities.
* ``set_model_field(name, ids, values)`` gives a model field per-world values
  (``values``: ``(k, *field_shape)``), the basis of domain randomization.
* ``render(camera, ids, size)`` -> ``(k, H, W, 3)`` uint8.

Device and backend decisions live in ``robotrl.sim`` and nowhere else: tasks and
algorithms read ``sim.device`` and never test for CUDA themselves.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import mujoco
    import numpy as np

    from robotrl.sim.render import BatchRenderer

log = logging.getLogger(__name__)

BACKENDS = ("cpu", "warp")


@dataclass
class SimConfig:
    """Which backend steps the worlds, and how.

    Attributes:
        backend: ``cpu`` (``mujoco.batch`` on a thread pool, the default) or ``warp``
            (MuJoCo Warp on CUDA).
        num_envs: number of parallel worlds.
        nthread: CPU worker threads for ``mujoco.batch``; 0 uses every core.
        device: torch device for ``warp`` (``cuda``, ``cuda:N``, or ``cpu``: Warp's CPU device, slow);
            ignored on ``cpu``.
        cuda_graph: capture the Warp step in a CUDA graph.
        nconmax: Warp contact buffer size per world (0: backend default).
        njmax: Warp constraint rows per world (0: backend default).
        divergence_threshold: a world with ``|qvel|`` above this is treated as diverged.
        per_world_fields: model fields given a per-world copy on ``warp`` (MuJoCo Warp sizes
            them in ``put_model``); the ``cpu`` backend expands any field on first write.

    """

    backend: str = "cpu"
    num_envs: int = 64
    nthread: int = 0
    device: str = "cuda"
    cuda_graph: bool = True
    nconmax: int = 0
    njmax: int = 0
    divergence_threshold: float = 1.0e4
    per_world_fields: list[str] = field(
        default_factory=lambda: ["geom_friction", "body_mass", "geom_size", "dof_damping", "actuator_gainprm",
                                 "actuator_biasprm"]
    )


class BatchSim(abc.ABC):
    """``nsim`` worlds of one compiled model, stepped together (see module docstring)."""

    model: mujoco.MjModel
    nsim: int
    device: torch.device
    _renderer: BatchRenderer

    @abc.abstractmethod
    def bind(self, field: str) -> torch.Tensor:
        """Live ``(nsim, ...)`` float64 (CPU) or float32 (Warp) view of an MjData field."""

    @abc.abstractmethod
    def step(self, nstep: int = 1) -> torch.Tensor:
        """Advance all worlds ``nstep`` substeps; return the ``(k,)`` ids of invalid worlds."""

    @abc.abstractmethod
    def reset(
        self,
        ids: torch.Tensor,
        qpos: torch.Tensor | None = None,
        qvel: torch.Tensor | None = None,
    ) -> None:
        """Reset worlds ``ids`` ``(k,)`` to defaults, or to ``qpos`` ``(k, nq)`` / ``qvel`` ``(k, nv)``."""

    @abc.abstractmethod
    def forward(self, ids: torch.Tensor | None = None) -> None:
        """Recompute derived quantities (``mj_forward``) for worlds ``ids`` (all if None)."""

    @abc.abstractmethod
    def set_model_field(self, name: str, ids: torch.Tensor, values: torch.Tensor) -> None:
        """Set per-world model field ``name`` for worlds ``ids`` ``(k,)`` to ``values`` ``(k, ...)``."""

    @abc.abstractmethod
    def model_field(self, name: str) -> torch.Tensor:
        """Per-world values of a model field, ``(nsim, ...)``, as the worlds currently see them."""

    @abc.abstractmethod
    def ray(
        self, pnt: torch.Tensor, vec: torch.Tensor, bodyexclude: int = -1, geomgroup: list[int] | None = None
    ) -> torch.Tensor:
        """Ray distances ``(nsim, nray)`` from origins/directions ``(nsim, nray, 3)``; -1 for a miss."""

    @abc.abstractmethod
    def get_world(
        self, world: int, model: mujoco.MjModel | None = None, data: mujoco.MjData | None = None
    ) -> tuple[mujoco.MjModel, mujoco.MjData]:
        """A standalone ``(MjModel, MjData)`` copy of one world, for rendering or inspection.

        ``model`` and ``data`` (an earlier result of ``get_world`` on this sim) are written into
        instead of allocating new ones: the world's model fields and state, then ``mj_forward``.
        Fields that ``mj_forward`` does not derive from the state (warm starts, applied forces)
        may keep another world's values, so reuse them for rendering and kinematics only.
        """

    def render(self, camera: str | int, ids: torch.Tensor, size: tuple[int, int] = (84, 84)) -> np.ndarray:
        """Render worlds ``ids`` from ``camera``: ``(k, H, W, 3)`` uint8 (lean settings)."""
        from robotrl.sim.render import BatchRenderer

        if not hasattr(self, "_renderer") or self._renderer.size != size:
            self._renderer = BatchRenderer(self.model, size=size, lean=True)
        return self._renderer.render_worlds(self, camera, ids)

    def render_tensor(self, camera: str | int, ids: torch.Tensor, size: tuple[int, int] = (84, 84)) -> torch.Tensor:
        """``render`` as a ``(k, H, W, 3)`` uint8 tensor on ``self.device`` (a GPU backend keeps it there)."""
        return torch.from_numpy(self.render(camera, ids, size)).to(self.device)


def make_sim(model: mujoco.MjModel, cfg: SimConfig) -> BatchSim:
    """Build the backend named by ``cfg.backend`` for ``model``.

    Raises:
        ValueError: unknown backend name.
        RuntimeError: ``warp`` on a CUDA device asked for without CUDA.
        ImportError: ``warp`` asked for without the ``gpu`` extra installed.

    """
    if cfg.backend == "cpu":
        from robotrl.sim.mujoco_cpu import CpuBatchSim

        return CpuBatchSim(model, cfg)
    if cfg.backend == "warp":
        # sim.device=cpu runs MuJoCo Warp's kernels on Warp's CPU device: slow, but the same float32
        # physics as on a GPU (benchmarks/warp_divergence.py checks failed-world rates with it)
        if not str(cfg.device).startswith("cpu") and not torch.cuda.is_available():
            raise RuntimeError(
                f"sim.backend=warp on sim.device={cfg.device} needs a CUDA GPU, and torch sees none. Use sim=cpu "
                "(the default) on this machine, or sim.device=cpu to run MuJoCo Warp on its CPU device (slow)."
            )
        from robotrl.sim.mujoco_warp import WarpBatchSim

        return WarpBatchSim(model, cfg)
    raise ValueError(f"Unknown sim.backend={cfg.backend!r}; valid choices: {', '.join(BACKENDS)}.")


def default_device(cfg: SimConfig) -> torch.device:
    """Torch device that tensors of a sim built from ``cfg`` live on."""
    return torch.device(cfg.device) if cfg.backend == "warp" else torch.device("cpu")


CUDA_MATMUL = {"tf32": "high", "fp32": "highest"}


def set_cuda_matmul(device: torch.device, precision: str) -> None:
    """On a CUDA ``device``, set torch's float32 matmul precision (``tf32`` or ``fp32``); a no-op on the CPU.

    TF32 runs the policy's large MLPs (tool_use_gpu's 1024-1024-512-512 on 393k-sample PPO batches) on
    tensor cores with a 10-bit mantissa, which PPO tolerates. The CPU is left alone so that CPU runs
    keep their exact float32 arithmetic.

    Raises:
        ValueError: ``precision`` is neither ``tf32`` nor ``fp32``.

    """
    if precision not in CUDA_MATMUL:
        raise ValueError(f"cuda_matmul={precision!r}; valid choices: {', '.join(CUDA_MATMUL)}.")
    if device.type == "cuda":
        torch.set_float32_matmul_precision(CUDA_MATMUL[precision])
