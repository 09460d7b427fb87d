"""The humanoid's scenario parameters read off a recorded episode (``robotrl twin triage``).

A bag without ``scenario.*`` metadata (a real robot's, where nobody wrote the scene down)
still records two of the task's scenario parameters (``HumanoidTask.scenario_params``):

* ``cmd_vx``, ``cmd_yaw``: the velocity command in force at the episode's last state, the one
  the robot failed under (the recorded ``/cmd_vel``).
* ``push_vel``, ``push_dir``: the largest horizontal jump of the base's velocity between two
  consecutive states, in the world frame (the odometry twist rotated by the odometry
  orientation), less the mean of the two jumps beside it (the gait's own change over that
  step), as a strength (m/s) and a direction (rad, world frame). A push is a horizontal
  velocity kick within one control step: jumps whose vertical part exceeds half their
  horizontal part are contacts (a foot or the torso striking the ground jolts the base up by
  0.8-2.1 m/s), not pushes, and are passed over. The gait itself changes the base velocity far
  less per step (at most 0.07 m/s horizontally in bags of the twin tests' policy). Pushes of
  0.4-1.4 m/s of the sim robot come back within 0.027 m/s and 0.032 rad (0.007 and 0.007 on
  average; 36 bags: 4 pushes x 3 commands x 3 seeds), and 9 bags without pushes report none
  (``python benchmarks/twin.py bag_scenario``, twin.json ``bag_scenario``).
  A jump below
  ``push_threshold`` is reported as no key at all: a push that small is not told apart from
  the gait, so it stays unknown.

Friction and mass are not read off a bag. Calibration (``robotrl twin calibrate``) fits them
into the twin's physics, which is where triage replays the episode.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from robotrl.rotations import quat_rotate_wxyz

if TYPE_CHECKING:
    from robotrl.twin.episode import Episode

PUSH_THRESHOLD = 0.25  # m/s: the smallest horizontal base-velocity jump in one step read as a push
VERTICAL_RATIO = 0.5  # a jump with |dv_z| above this share of |dv_xy| is a contact, not a push


def scenario_from_episode(episode: Episode, push_threshold: float = PUSH_THRESHOLD) -> dict[str, float]:
    """``{name: value}`` of the scenario parameters ``episode`` measures (module docstring); may be empty."""
    values: dict[str, float] = {}
    if episode.cmd_vel is not None and len(episode.cmd_vel):
        vx, yaw = (float(v) for v in episode.cmd_vel[-1, :2])
        values.update(cmd_vx=vx, cmd_yaw=yaw)
    if episode.base_lin_vel is not None and episode.base_quat is not None and episode.num_steps > 1:
        world = quat_rotate_wxyz(torch.as_tensor(episode.base_quat, dtype=torch.float64),
                                 torch.as_tensor(episode.base_lin_vel, dtype=torch.float64)).numpy()
        jumps = np.diff(world, axis=0)  # (T - 1, 3)
        horizontal = np.linalg.norm(jumps[:, :2], axis=1)
        candidates = np.flatnonzero(np.abs(jumps[:, 2]) <= VERTICAL_RATIO * horizontal)
        if candidates.size:
            k = int(candidates[horizontal[candidates].argmax()])
            beside = [jumps[j, :2] for j in (k - 1, k + 1) if 0 <= j < len(jumps)]
            kick = jumps[k, :2] - np.mean(beside, axis=0) if beside else jumps[k, :2]
            strength = float(np.linalg.norm(kick))
            if strength >= push_threshold:
                values.update(push_vel=strength, push_dir=math.atan2(float(kick[1]), float(kick[0])))
    return values
