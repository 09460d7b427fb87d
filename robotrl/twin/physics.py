"""Physics parameter sets: the perturbation a "real" robot has, and what calibration fits.

A ``Physics`` is a handful of multipliers on the nominal model (plus an additive friction
loss and an integer control delay). The same object

* perturbs a MuJoCo sim robot (``robotrl-sim-robot physics:=<yaml>``, ``record_episode``),
* sets the candidate physics of twin worlds (``apply_physics`` on a BatchSim, per world),
* compiles into a standalone ``MjModel`` for ``mujoco.sysid`` (``model_with``),
* is what ``robotrl twin calibrate`` writes (``save_physics``; YAML, ``physics:`` key),
* and is what training reads with ``task.dynamics=<file>`` (``task_dynamics``: compiled into the
  task's model before the sim is built, so the task's randomizers scale the calibrated values).

Fields (multipliers unless noted):
    body_mass: every body's mass (and inertia, so the density scales).
    object_mass: on top of ``body_mass``, the mass (and inertia) of every free object the robot
        handles (``object_bodies``: tool_use's tool), whose mass a real cell rarely knows.
    dof_damping: every DoF's passive damping.
    dof_armature: every DoF's armature.
    dof_frictionloss: added to every hinge/slide DoF's friction loss (N m; nominal is usually 0).
    geom_friction: every geom's sliding friction.
    actuator_gain: ``gainprm[0]`` (motor gain, or position kp together with ``biasprm[1]``).
    actuator_bias: ``biasprm[2]`` (the velocity feedback kv of position actuators).
    delay_steps: control steps between a command and the physics seeing it (integer).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

if TYPE_CHECKING:
    import mujoco

    from robotrl.sim.backend import BatchSim

DYNAMICS_MODES = ("center", "nominal")
SCALE_FIELDS = ("body_mass", "object_mass", "dof_damping", "dof_armature", "geom_friction", "actuator_gain",
                "actuator_bias")


@dataclass
class Physics:
    """A physics parameter set (module docstring)."""

    body_mass: float = 1.0
    object_mass: float = 1.0
    dof_damping: float = 1.0
    dof_armature: float = 1.0
    dof_frictionloss: float = 0.0
    geom_friction: float = 1.0
    actuator_gain: float = 1.0
    actuator_bias: float = 1.0
    delay_steps: int = 0

    def is_nominal(self) -> bool:
        """True when nothing is perturbed."""
        return self == Physics()


def load_physics(path: str | Path) -> Physics:
    """Read a physics YAML (top-level keys, or under ``physics:``); unknown keys are errors.

    Raises:
        ValueError: unknown keys (valid ones listed) or a non-positive multiplier.

    """
    data = yaml.safe_load(Path(path).read_text()) or {}
    data = data.get("physics", data)
    valid = [f.name for f in fields(Physics)]
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ValueError(f"{path}: unknown physics key(s) {unknown}; valid: {valid}.")
    # field -> value, the names checked above (Any: one dict holds the float multipliers and the int delay)
    values: dict[str, Any] = {k: (int(v) if k == "delay_steps" else float(v)) for k, v in data.items()}
    physics = Physics(**values)
    bad = [k for k in SCALE_FIELDS if getattr(physics, k) <= 0]
    if bad or physics.delay_steps < 0:
        raise ValueError(f"{path}: multipliers must be > 0 and delay_steps >= 0; bad: {bad or ['delay_steps']}.")
    return physics


def task_dynamics(path: str, mode: str) -> Physics | None:
    """The physics of a task config's ``dynamics`` file (None when ``path`` is empty).

    Raises:
        ValueError: ``mode`` is not one of ``DYNAMICS_MODES``, or the file is invalid.
        FileNotFoundError: ``path`` does not exist.

    """
    if mode not in DYNAMICS_MODES:
        raise ValueError(f"task.dynamics_mode={mode!r}; valid: {list(DYNAMICS_MODES)}.")
    if not path:
        return None
    if not Path(path).is_file():
        raise FileNotFoundError(f"task.dynamics={path!r}: no such file (write one with `robotrl twin calibrate`).")
    return load_physics(path)


def save_physics(physics: Physics, path: str | Path, extra: dict | None = None) -> Path:
    """Write ``physics`` as YAML (``physics:`` plus optional ``extra`` sections such as intervals)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"physics": asdict(physics), **(extra or {})}
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def object_joints(model: mujoco.MjModel) -> np.ndarray:
    """Ids of the free joints of objects: every free joint but a floating robot's root (joint 0 on body 1)."""
    import mujoco

    free = np.flatnonzero(model.jnt_type == int(mujoco.mjtJoint.mjJNT_FREE))
    return free[~((free == 0) & (model.jnt_bodyid[free] == 1))]


def object_bodies(model: mujoco.MjModel) -> np.ndarray:
    """Ids of the bodies ``Physics.object_mass`` scales: those of ``object_joints`` (tool_use: the tool)."""
    return np.asarray(model.jnt_bodyid[object_joints(model)], dtype=np.int64)


def _field_values(model: mujoco.MjModel, physics: Physics) -> dict[str, np.ndarray]:
    """Model field name -> perturbed values (full arrays, from the nominal ``model``)."""
    import mujoco

    mass_scale = np.full(model.nbody, physics.body_mass)
    mass_scale[object_bodies(model)] *= physics.object_mass
    hinge = np.isin(model.jnt_type[model.dof_jntid], [int(mujoco.mjtJoint.mjJNT_HINGE),
                                                      int(mujoco.mjtJoint.mjJNT_SLIDE)])
    gain, bias = model.actuator_gainprm.copy(), model.actuator_biasprm.copy()
    gain[:, 0] *= physics.actuator_gain
    bias[:, 1] *= physics.actuator_gain
    bias[:, 2] *= physics.actuator_bias
    friction = model.geom_friction.copy()
    friction[:, 0] *= physics.geom_friction
    return {
        "body_mass": model.body_mass * mass_scale,
        "body_inertia": model.body_inertia * mass_scale[:, None],
        "dof_damping": model.dof_damping * physics.dof_damping,
        "dof_armature": model.dof_armature * physics.dof_armature,
        "dof_frictionloss": model.dof_frictionloss + physics.dof_frictionloss * hinge,
        "geom_friction": friction,
        "actuator_gainprm": gain,
        "actuator_biasprm": bias,
    }


def model_with(model: mujoco.MjModel, physics: Physics) -> mujoco.MjModel:
    """A copy of the nominal ``model`` with ``physics`` applied (the delay is not a model field)."""
    import mujoco

    out = copy.copy(model)
    for name, values in _field_values(model, physics).items():
        getattr(out, name)[:] = values
    mujoco.mj_setConst(out, mujoco.MjData(out))
    return out


def apply_physics(sim: BatchSim, ids: list[int], physics: list[Physics], nominal: mujoco.MjModel | None = None
                  ) -> None:
    """Give worlds ``ids`` their physics (``physics[i]`` for ``ids[i]``), relative to ``nominal``.

    ``nominal`` defaults to each world's own current model (``sim.get_world``), so per-world
    scene fields (a tool's mass and size) are kept and scaled, not reset to the compiled model's.
    """
    import torch

    bases = [nominal if nominal is not None else sim.get_world(int(w))[0] for w in ids]
    per_world = [_field_values(b, p) for b, p in zip(bases, physics, strict=True)]
    idx = torch.as_tensor(ids, dtype=torch.long)
    for name in per_world[0]:
        values = torch.as_tensor(np.stack([w[name] for w in per_world]))
        sim.set_model_field(name, idx, values)
