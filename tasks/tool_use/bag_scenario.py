"""The tool_use scenario parameters read off a recorded episode (``robotrl twin triage``).

A tool_use cell publishes what its perception sees (``robot_io``): the tool's pose on
``/object_pose``, its box on ``/robotrl/object_box`` and the goal on ``/robotrl/goal_pose``. A
bag of a real cell without ``scenario.*`` metadata therefore still records most of the scene
(``ToolUseTask.scenario_params``):

* ``spawn_x``, ``spawn_y`` (m, from ``constants.SPAWN_CENTER``) and ``spawn_yaw`` (rad): the
  tool's pose at the episode's first state (before the hand touches it).
* ``tool_size`` (m): the box's longest extent, twice its largest half-extent (the measure the
  scenario uses to pick the nearest tool of the pool).
* ``tool_family`` (an index into ``tools.FAMILIES``): the family whose generated tools have the
  boxes nearest this one (``family_from_box``: a vote of the 7 nearest of 64 tools per family, in
  log half-extents sorted longest first, so the box's axis order does not matter). On the
  generator's own tools it is right for 96% of the training pool, 100% of held-out instances, 95%
  of the pool at sizes x0.85-1.15 and 88% of the held-out brushes (``python benchmarks/twin.py
  tool_family``); a real tool outside the generator's families gets the nearest one.
* ``goal_x``, ``goal_y``, ``goal_z`` (m, world frame) and ``goal_yaw`` (rad): the first goal
  of the episode, its orientation as a turn about the world z axis from the tool's starting
  orientation (the yaw of ``goal_quat * conj(spawn_quat)``).

The tool's mass and friction are not read off one bag: calibration fits them from how the tool
moved under the hand (``robotrl twin calibrate params=object_mass,geom_friction``, which observes
``/object_pose``), and ``robotrl twin triage physics=<calibrated>`` replays with them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import torch
from robotrl.tasks.tool_use import constants as C
from robotrl.tasks.tool_use import tools

from robotrl.rotations import quat_conjugate, quat_mul, yaw_from_quat

if TYPE_CHECKING:
    from robotrl.twin.episode import Episode


FAMILY_REFERENCE = 64
"""Generated tools per family that ``family_from_box`` compares a box with."""
_REFERENCE_INDEX = 3_000_000  # instance indices of no split's pool (train: 0.., heldout: 1,000,000..)
_NEIGHBOURS = 7


def _box_features(half_extents: np.ndarray) -> np.ndarray:
    """``(..., 3)`` log half-extents, sorted longest first."""
    return np.log(np.maximum(-np.sort(-np.asarray(half_extents, dtype=np.float64), axis=-1), 1e-4))


@functools.cache
def _family_reference() -> tuple[np.ndarray, np.ndarray]:
    """``(F * FAMILY_REFERENCE, 3)`` box features of generated tools of every family, and their family indices."""
    specs = [tools.sample_tool(f, _REFERENCE_INDEX + i) for f in tools.FAMILIES for i in range(FAMILY_REFERENCE)]
    labels = np.repeat(np.arange(len(tools.FAMILIES)), FAMILY_REFERENCE)
    return _box_features(np.stack([t.bbox()[1] for t in specs])), labels


def family_from_box(half_extents: np.ndarray) -> int:
    """Index into ``tools.FAMILIES`` of the tool family a box of ``half_extents`` ``(3,)`` (m) most likely holds.

    The majority of the ``_NEIGHBOURS`` generated tools nearest in log half-extents (ties: the
    nearest of the tied families' neighbours).

    Raises:
        ValueError: ``half_extents`` is not three positive finite lengths.

    """
    h = np.asarray(half_extents, dtype=np.float64)
    if h.shape != (3,) or not np.all(np.isfinite(h)) or not np.all(h > 0):
        raise ValueError(f"a tool box needs three positive half-extents in m, got {h.tolist()}.")
    ref, labels = _family_reference()
    nearest = np.argsort(np.linalg.norm(ref - _box_features(h), axis=1))[:_NEIGHBOURS]
    votes = np.bincount(labels[nearest], minlength=len(tools.FAMILIES))
    tied = np.flatnonzero(votes == votes.max())
    return int(next(labels[i] for i in nearest if labels[i] in tied))


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
        values["tool_family"] = float(family_from_box(episode.object_box[3:6]))
    goal = _first_seen(episode.goal_pose)
    if goal is not None:
        values.update(goal_x=float(goal[0]), goal_y=float(goal[1]), goal_z=float(goal[2]))
        if spawn is not None:
            turn = quat_mul(torch.as_tensor(goal[3:], dtype=torch.float64)[None],
                            quat_conjugate(torch.as_tensor(spawn[3:], dtype=torch.float64)[None]))
            values["goal_yaw"] = _yaw(turn[0].numpy())
    return values
