"""The tool_use scenario parameters read off a recorded episode (``robotrl twin triage``).

A tool_use cell publishes what its perception sees (``robot_io``): the tool's pose on
``/object_pose``, its box on ``/robotrl/object_box`` and the goal on ``/robotrl/goal_pose``. A
bag of a real cell without ``scenario.*`` metadata therefore still records most of the scene
(``ToolUseTask.scenario_params``):

* ``spawn_x``, ``spawn_y`` (m, from ``constants.SPAWN_CENTER``) and ``spawn_yaw`` (rad): the
  tool's pose at the episode's first state (before the hand touches it).
* ``tool_size`` (m): the box's longest extent, twice its largest half-extent (the measure the
  scenario uses to pick the nearest tool of the pool).
* ``goal_x``, ``goal_y``, ``goal_z`` (m, world frame) and ``goal_yaw`` (rad): the first goal
  of the episode, its orientation as a turn about the world z axis from the tool's starting
  orientation (the yaw of ``goal_quat * conj(spawn_quat)``).

The tool's family, mass and friction are not read: a box does not tell a hammer from a
spatula of the same size, and mass and friction are calibration's to fit
(``robotrl twin calibrate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from robotrl.tasks.tool_use import constants as C

from robotrl.rotations import quat_conjugate, quat_mul, yaw_from_quat

if TYPE_CHECKING:
    from robotrl.twin.episode import Episode


def _first_seen(poses: np.ndarray | None) -> np.ndarray | None:
    """The first recorded row of a ``(T, 7)`` pose array (NaN rows precede the first message), or None."""
    if poses is None:
        return None
    seen = np.flatnonzero(~np.isnan(poses).any(axis=1))
    return poses[seen[0]] if seen.size else None


def _yaw(q: np.ndarray) -> float:
    return float(yaw_from_quat(torch.as_tensor(q, dtype=torch.float64)[None])[0])


def scenario_from_episode(episode: Episode) -> dict[str, float]:
    """``{name: value}`` of the scenario parameters ``episode`` measures (module docstring); may be empty."""
    values: dict[str, float] = {}
    spawn = _first_seen(episode.object_pose)
    if spawn is not None:
        values.update(spawn_x=float(spawn[0] - C.SPAWN_CENTER[0]), spawn_y=float(spawn[1] - C.SPAWN_CENTER[1]),
                      spawn_yaw=_yaw(spawn[3:]))
    if episode.object_box is not None and len(episode.object_box) >= 6:
        values["tool_size"] = float(2.0 * np.max(episode.object_box[3:6]))
    goal = _first_seen(episode.goal_pose)
    if goal is not None:
        values.update(goal_x=float(goal[0]), goal_y=float(goal[1]), goal_z=float(goal[2]))
        if spawn is not None:
            turn = quat_mul(torch.as_tensor(goal[3:], dtype=torch.float64)[None],
                            quat_conjugate(torch.as_tensor(spawn[3:], dtype=torch.float64)[None]))
            values["goal_yaw"] = _yaw(turn[0].numpy())
    return values
