"""CPU backend: ``mujoco.batch.Batch`` stepping worlds on a C++ thread pool (GIL released).

Bound fields are torch views over the batch's numpy rows (``torch.from_numpy``), so a
write to ``sim.bind("ctrl")`` lands in the simulation with no copy, and there is no
Python loop over worlds anywhere in the hot path.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import overload

import mujoco
import mujoco.batch as mjb
import numpy as np
import torch

from robotrl.sim.backend import BatchSim, SimConfig

log = logging.getLogger(__name__)

# Model fields mj_resetData reads into the state row (qpos0, eq_active0, and mocap bodies' poses).
_RESET_INPUTS = frozenset({"qpos0", "eq_active0", "body_pos", "body_quat"})
# State components whose reset values come from elsewhere (plugins, history, plasticity): C reset only.
_OPAQUE_STATE = (mujoco.mjtState.mjSTATE_HISTORY | mujoco.mjtState.mjSTATE_PLUGIN
                 | mujoco.mjtState.mjSTATE_PLASTIC)


def _as_tensor(arr: np.ndarray) -> torch.Tensor:
    """Zero-copy torch view of a numpy array; read-only arrays stay read-only in spirit."""
    if arr.flags.writeable:
        return torch.from_numpy(arr)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(arr)


def _np(t: torch.Tensor) -> np.ndarray:
    """Numpy array of a tensor (a view on CPU), detached only when it requires grad (``detach`` is an op)."""
    return (t.detach() if t.requires_grad else t).cpu().numpy()


@overload
def _ids_np(ids: torch.Tensor) -> np.ndarray: ...


@overload
def _ids_np(ids: None) -> None: ...


@overload
def _ids_np(ids: torch.Tensor | None) -> np.ndarray | None: ...


def _ids_np(ids: torch.Tensor | None) -> np.ndarray | None:
    if ids is None:
        return None
    return _np(ids).astype(np.int32)


class CpuBatchSim(BatchSim):
    """``nsim`` worlds on ``mujoco.batch`` (see ``robotrl.sim.backend``)."""

    def __init__(self, model: mujoco.MjModel, cfg: SimConfig) -> None:
        if cfg.num_envs < 1:
            raise ValueError(f"sim.num_envs must be >= 1, got {cfg.num_envs}.")
        nthread = cfg.nthread if cfg.nthread > 0 else (os.cpu_count() or 1)
        self.model = model
        self.nsim = cfg.num_envs
        self.device = torch.device("cpu")
        self.cfg = cfg
        self._batch = mjb.Batch(model, cfg.num_envs, min(nthread, cfg.num_envs))
        self._views: dict[str, torch.Tensor] = {}
        self._time_np = self._batch.bind("time")
        self._qpos_np, self._qvel_np = self._batch.bind("qpos"), self._batch.bind("qvel")
        self._qpos = self.bind("qpos")
        self._qvel = self.bind("qvel")
        self._none = torch.zeros(0, dtype=torch.int64)
        self._batch.reset()
        # Each world *is* its state row (a non-persistent batch): a reset followed by new qpos/qvel
        # writes the row mj_resetData gives (one numpy copy) instead of a reset call on the thread
        # pool, then runs one forward. Rows of worlds whose reset inputs were randomized since are
        # refreshed by a real reset when they are next reset.
        self._rows = self._batch.state
        self._reset_rows = None if mujoco.mj_stateSize(model, int(_OPAQUE_STATE)) else self._rows.copy()
        self._reset_rows_stale = np.zeros(self.nsim, dtype=bool)
        log.debug("mujoco.batch: %d worlds on %d threads", self.nsim, self._batch.nthread)

    def bind(self, field: str) -> torch.Tensor:
        """Live ``(nsim, ...)`` float64 view of MjData field ``field``."""
        if field not in self._views:
            if field not in mjb.DATA_FIELDS:
                raise KeyError(f"Cannot bind {field!r}: not an MjData field that mujoco.batch exposes.")
            self._views[field] = _as_tensor(self._batch.bind(field))
            if field not in mjb._STATE_FIELDS:
                # Derived fields are copied out after each call; fill a new one now.
                self._batch.forward()
        return self._views[field]

    def step(self, nstep: int = 1) -> torch.Tensor:
        """Advance all worlds; return ids of worlds that raised, went non-finite or diverged."""
        # The checks run in numpy on the batch rows (no torch op), first on whole arrays: only
        # when one fails are they redone per world.
        qpos, qvel = self._qpos_np, self._qvel_np
        dt = self.model.opt.timestep
        expected = self._time_np + nstep * dt
        # State written non-finite since the last step (MuJoCo would silently reset it).
        bad = None if np.isfinite(qpos.sum() + qvel.sum()) else ~np.isfinite(qpos.sum(axis=1) + qvel.sum(axis=1))
        try:
            self._batch.step(nstep=nstep)
        except mjb.SimulationError as err:
            bad = np.zeros(self.nsim, dtype=bool) if bad is None else bad
            bad[np.asarray(err.ids, dtype=np.int64)] = True
            log.debug("mujoco.batch raised in worlds %s: %s", err.ids, err)
        # MuJoCo resets a world internally on NaN/huge qacc and rewinds its clock: catch that too.
        rewound = self._time_np < expected - 0.5 * dt
        speed = np.abs(qvel).max(initial=0.0)  # NaN if any entry is NaN
        if bad is None and not rewound.any() and np.isfinite(qpos.sum()) and speed <= self.cfg.divergence_threshold:
            return self._none
        bad = rewound if bad is None else bad | rewound
        bad |= ~np.isfinite(qpos.sum(axis=1) + qvel.sum(axis=1))
        bad |= np.abs(qvel).max(axis=1) > self.cfg.divergence_threshold
        return torch.from_numpy(np.flatnonzero(bad))

    def reset(
        self,
        ids: torch.Tensor,
        qpos: torch.Tensor | None = None,
        qvel: torch.Tensor | None = None,
    ) -> None:
        """Reset worlds ``ids`` to model defaults, then optionally set ``qpos``/``qvel`` and forward."""
        if ids.numel() == 0:
            return
        ids_np = _ids_np(ids)
        if qpos is None and qvel is None:
            self._batch.reset(ids=ids_np)
            return
        self._reset_state_rows(ids_np)
        # numpy row writes (cast to float64 on assignment): no torch index_put per field
        if qpos is not None:
            self._qpos_np[ids_np] = _np(qpos)
        if qvel is not None:
            self._qvel_np[ids_np] = _np(qvel)
        self._batch.forward(ids=ids_np)

    def _reset_state_rows(self, ids: np.ndarray) -> None:
        """The state rows of worlds ``ids`` (sorted int32) become those mj_resetData gives, derived fields untouched."""
        if self._reset_rows is None:
            self._batch.reset(ids=ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
            return
        stale = ids[self._reset_rows_stale[ids]]
        if stale.size:
            self._batch.reset(ids=stale, stage=mujoco.mjtStage.mjSTAGE_NONE)
            self._reset_rows[stale] = self._rows[stale]
            self._reset_rows_stale[stale] = False
        self._rows[ids] = self._reset_rows[ids]

    def forward(self, ids: torch.Tensor | None = None) -> None:
        """Run ``mj_forward`` for worlds ``ids`` (all if None)."""
        self._batch.forward(ids=_ids_np(ids))

    def set_model_field(self, name: str, ids: torch.Tensor, values: torch.Tensor) -> None:
        """Per-world model values; recomputes derived constants when MuJoCo needs it."""
        field = self._batch.expand(name)
        field[_ids_np(ids)] = values.detach().cpu().numpy().reshape((len(ids), *field.shape[1:]))
        base = name.split(".", 1)[-1]
        if base in _RESET_INPUTS:
            self._reset_rows_stale[_ids_np(ids)] = True
        if name.startswith("opt.") or base in mujoco.MjModel._setconst_inputs:
            self._batch.set_const(ids=_ids_np(ids))

    def model_field(self, name: str) -> torch.Tensor:
        """``(nsim, ...)`` copy of the field as each world sees it (shared values broadcast)."""
        per_world = self._batch.expanded(name)
        if per_world is not None:
            return torch.from_numpy(np.array(per_world))
        base = np.asarray(getattr(self.model, name))
        return torch.from_numpy(np.broadcast_to(base, (self.nsim, *base.shape)).copy())

    def ray(
        self, pnt: torch.Tensor, vec: torch.Tensor, bodyexclude: int = -1, geomgroup: list[int] | None = None
    ) -> torch.Tensor:
        """Batched ``mj_ray`` in every world: ``(nsim, nray)`` distances, -1 for a miss."""
        group = None if geomgroup is None else np.asarray(geomgroup, dtype=np.uint8)
        dist, _ = self._batch.ray(
            pnt.detach().cpu().numpy(), vec.detach().cpu().numpy(), geomgroup=group, bodyexclude=bodyexclude
        )
        return torch.from_numpy(np.asarray(dist))

    def get_world(
        self, world: int, model: mujoco.MjModel | None = None, data: mujoco.MjData | None = None
    ) -> tuple[mujoco.MjModel, mujoco.MjData]:
        """Standalone model and data of world ``world`` (its randomized parameters included).

        Given ``model`` and ``data`` (from an earlier call), ``mujoco.batch`` writes into them; a
        fresh pair costs an MjModel copy and an MjData allocation (about 0.5 ms per world).
        """
        model = self._batch.get_model(world, model)
        data = self._batch.get_data(world, data)
        mujoco.mj_forward(model, data)
        return model, data
