"""Tool-use scenario parameters (``robotrl twin mine``, ``task.scenarios``) and how a world takes them.

``tool_family`` (an index into ``tools.FAMILIES``: 0 hammer, 1 screwdriver, 2 marker,
3 spatula, 4 eraser, 5 brush) and ``tool_size`` (the tool's longest extent, m) pick the tool
of the world's pool nearest to the request: a family the split's pool lacks (the brush
outside ``heldout_family``) falls back to the nearest size in any family. ``tool_mass`` and
``friction`` are multipliers (they replace the world's dynamics-randomization draw).
``spawn_x``/``spawn_y`` (m, offsets from ``SPAWN_CENTER``) and ``spawn_yaw`` (rad) place the
tool on the table; ``goal_x``/``goal_y``/``goal_z`` (m, world frame) and ``goal_yaw`` (rad,
about the world z axis, from the spawn orientation) set the episode's first goal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from robotrl.tasks.tool_use import constants as C
from robotrl.tasks.tool_use import tools

from robotrl.rotations import quat_from_axis_angle, quat_mul
from robotrl.twin.scenarios import ScenarioParam

if TYPE_CHECKING:
    from robotrl.tasks.tool_use.task import ToolUseTask

SCENARIO_PARAMS = [
    ScenarioParam("tool_family", 0, len(tools.FAMILIES) - 1, kind="choice"),
    ScenarioParam("tool_size", 0.05, 0.33, unit="m"),
    ScenarioParam("tool_mass", 0.5, 2.0),
    ScenarioParam("friction", 0.3, 1.5),
    ScenarioParam("spawn_x", -0.08, 0.08, unit="m"),
    ScenarioParam("spawn_y", -0.08, 0.08, unit="m"),
    ScenarioParam("spawn_yaw", -3.1416, 3.1416, unit="rad"),
    ScenarioParam("goal_x", 0.45, 0.70, unit="m"),
    ScenarioParam("goal_y", -0.2, 0.2, unit="m"),
    ScenarioParam("goal_z", 0.15, 0.40, unit="m"),
    ScenarioParam("goal_yaw", -3.1416, 3.1416, unit="rad"),
]
_SIZE_RANGE = 0.33 - 0.05


def pool_sizes(task: ToolUseTask) -> torch.Tensor:
    """``(P,)`` longest extent (m) of every tool of the task's pool."""
    return 2.0 * task.pool_fields["bbox_half"].float().max(-1).values


def pick_tools(task: ToolUseTask, family: torch.Tensor, size: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``(k,)`` pool index nearest to the requested family and size (NaN: any); ties broken at random."""
    pool_family = task.pool_fields["family"].float()
    cost = torch.nan_to_num((pool_family[None, :] != family[:, None]).float() * 1e3
                            * (~torch.isnan(family))[:, None], nan=0.0)
    cost += torch.nan_to_num((size[:, None] - pool_sizes(task)[None, :]).abs() / _SIZE_RANGE, nan=0.0)
    cost += 1e-4 * torch.rand(cost.shape, generator=gen, device=cost.device)
    return cost.argmin(1)


def apply(task: ToolUseTask, ids: torch.Tensor, values: dict[str, torch.Tensor], gen: torch.Generator) -> None:
    """Give worlds ``ids`` ``(k,)`` the scenario ``values`` ``{name: (k,)}`` (module docstring); NaN keeps a draw."""
    k, dev = ids.numel(), task.device
    if not k:
        return
    nan = torch.full((k,), float("nan"), device=dev)
    v = {p.name: values.get(p.name, nan).to(dev, torch.float32) for p in SCENARIO_PARAMS}

    def pick(name: str, current: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.isnan(v[name]), current, v[name].to(current.dtype))

    tool = ~(torch.isnan(v["tool_family"]) & torch.isnan(v["tool_size"]))
    if tool.any():
        task.tool_id[ids[tool]] = pick_tools(task, v["tool_family"][tool], v["tool_size"][tool], gen)
    task.mass_scale[ids] = pick("tool_mass", task.mass_scale[ids])
    task.friction_scale[ids] = pick("friction", task.friction_scale[ids])
    task._write_tool(ids)
    # tool pose on the table (the spawn height follows the possibly new tool)
    offset = task.spawn_pos[ids, :2] - torch.tensor(C.SPAWN_CENTER, device=dev)
    offset = torch.stack([pick("spawn_x", offset[:, 0]), pick("spawn_y", offset[:, 1])], dim=1)
    task.spawn_pos[ids] = torch.cat([torch.tensor(C.SPAWN_CENTER, device=dev) + offset,
                                     (task._spawn_z[ids] + 0.002)[:, None]], dim=1)
    z_axis = torch.tensor([0.0, 0.0, 1.0], device=dev).expand(k, 3)
    yaw_given = ~torch.isnan(v["spawn_yaw"])
    if yaw_given.any():
        task.spawn_quat[ids[yaw_given]] = quat_from_axis_angle(z_axis[yaw_given], v["spawn_yaw"][yaw_given])
    qpos, qvel = task.qpos[ids].clone(), torch.zeros_like(task.qvel[ids])
    qpos[:, task._tq:task._tq + 3] = task.spawn_pos[ids].to(qpos.dtype)
    qpos[:, task._tq + 3:task._tq + 7] = task.spawn_quat[ids].to(qpos.dtype)
    qvel[:, task._dadr] = task.qvel[ids][:, task._dadr]
    task.sim.reset(ids, qpos, qvel)
    # the first goal: the task's own draw from the new spawn, then the given coordinates
    task._new_goal(ids, gen)
    goal = task.goal_pos[ids].clone()
    for i, name in enumerate(("goal_x", "goal_y", "goal_z")):
        goal[:, i] = pick(name, goal[:, i])
    task.goal_pos[ids] = goal
    goal_yaw = ~torch.isnan(v["goal_yaw"])
    if goal_yaw.any():
        rows = ids[goal_yaw]
        rot = quat_from_axis_angle(z_axis[goal_yaw], v["goal_yaw"][goal_yaw])
        task.goal_quat[rows] = quat_mul(rot, task.spawn_quat[rows])
    task.mocap_pos[ids, 0] = task.goal_pos[ids].to(task.mocap_pos.dtype)
    task.mocap_quat[ids, 0] = task.goal_quat[ids].to(task.mocap_quat.dtype)
    task.best_tip[ids] = task._tip_distance()[ids]
    task.best_kp[ids] = task._kp_goal_distance()[ids]
    task._pose_hist[:, ids] = task._tool_pose()[ids].float()
    task._fresh[ids] = True


def family_name(index: float) -> str:
    """The family name of a ``tool_family`` value (for summaries)."""
    return tools.FAMILIES[int(np.clip(round(index), 0, len(tools.FAMILIES) - 1))]
