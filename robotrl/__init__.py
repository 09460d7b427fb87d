"""robotrl: sim-to-real robot RL on batched MuJoCo (CPU ``mujoco.batch`` and MuJoCo Warp)."""

import os as _os

# Headless GL must be chosen before mujoco is first imported (see robotrl.sim.render).
_os.environ.setdefault("MUJOCO_GL", "egl")
if _os.environ["MUJOCO_GL"] == "egl":
    _os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

__version__ = "0.1.0"
