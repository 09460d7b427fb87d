"""The tool_use scene: table, robot, one tool and the goal marker.

``look_at`` places cameras; the language task's scene uses it too.
"""

from __future__ import annotations

import mujoco
import numpy as np
from robotrl.tasks.tool_use import constants as C
from robotrl.tasks.tool_use import hand, tools
from robotrl.tasks.tool_use.config import ToolUseConfig


def look_at(pos: list[float], target: list[float]) -> list[float]:
    """MuJoCo camera ``xyaxes`` for a camera at ``pos`` looking at ``target`` with world z up."""
    forward = np.asarray(target, float) - np.asarray(pos, float)
    x = np.cross(forward, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(x, forward)
    return [*x.tolist(), *(y / np.linalg.norm(y)).tolist()]


def build_scene(cfg: ToolUseConfig, tool: tools.ToolSpec) -> mujoco.MjSpec:
    """Table plane, robot, ``tool`` and a visual-only goal marker (mocap), with a ``home`` keyframe."""
    spec = mujoco.MjSpec()
    spec.modelname = "tool_use"
    spec.compiler.degree = False  # every angle in this package is in radians
    opt = spec.option
    opt.timestep = C.timestep(cfg.timestep)
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.integrator = C.integrator(cfg.integrator)
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.iterations = cfg.solver_iterations
    opt.ls_iterations = 10
    world = spec.worldbody
    world.add_light(pos=[0.5, 0, 1.5], dir=[0, 0, -1], diffuse=[0.8, 0.8, 0.8])
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1.5, 1.5, 0.05],
                   rgba=[0.8, 0.8, 0.75, 1], contype=C.TABLE_CONTYPE, conaffinity=C.TABLE_CONAFFINITY)
    cam = [1.05, -0.55, 0.5]
    world.add_camera(name="overview", pos=cam, xyaxes=look_at(cam, [0.6, 0.0, 0.12]))
    hand.add_robot(spec, cfg.arm)
    tools.add_tool(world, tool, pos=(*C.SPAWN_CENTER, tools.rest_height(tool)))
    goal = world.add_body(name="goal", mocap=True, pos=[0.6, 0, 0.3])
    for axis, rgba in zip(np.eye(3), ([1, 0, 0, 0.6], [0, 1, 0, 0.6], [0, 0, 1, 0.6]), strict=True):
        goal.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.004, 0, 0],
                      fromto=[0, 0, 0, *(0.06 * axis)], contype=0, conaffinity=0, rgba=rgba, group=2)
    model = spec.compile()
    joints = list(C.ARM_JOINTS if cfg.arm == "kuka_iiwa" else C.FLOATING_JOINTS)
    home = hand.solve_home(model, joints).tolist()
    spec.add_key(name="home", qpos=home, mpos=[0.6, 0, 0.3], mquat=[1, 0, 0, 0])
    return spec
