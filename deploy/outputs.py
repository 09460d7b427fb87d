"""Output adapters: the command vector (policy joint order) -> the message a controller takes.

* ``forward_command``: ``std_msgs/Float64MultiArray`` in the profile's joint order, the
  order of ``forward_command_controller``'s ``joints`` parameter (a size mismatch is an
  error there, so the vector always has every profile joint; joints the policy does not
  drive keep their HOLD value, the first measured position, or 0).
* ``joint_trajectory``: ``trajectory_msgs/JointTrajectory`` with one point whose
  ``time_from_start`` is ``trajectory_periods`` control periods (positions for position
  commands, velocities or efforts otherwise).
* ``cmd_vel``: ``geometry_msgs/Twist`` with each command entry in the field named by
  ``twist_fields`` (``linear.x``, ``angular.z``, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.profile import RobotProfile


class OutputAdapter:
    """Builds the controller message for a command; ``msg_type`` is its struct class."""

    def __init__(self, profile: RobotProfile, policy_joints: list[str], period: float) -> None:
        self.profile, self.kind = profile, profile.command_kind
        self.adapter = profile.output.adapter
        self.names = list(profile.joints.names)
        index = {n: i for i, n in enumerate(self.names)}
        self.slots = np.asarray([index[n] for n in policy_joints])
        self.full = np.zeros(len(self.names))
        self.period = period
        fields = profile.output.twist_fields
        if self.adapter == "cmd_vel" and len(fields) != len(policy_joints):
            raise ValueError(f"output.twist_fields has {len(fields)} entries for {len(policy_joints)} commands.")
        bad = [f for f in fields if f.split(".")[0] not in ("linear", "angular") or f[-1] not in "xyz"]
        if self.adapter == "cmd_vel" and bad:
            raise ValueError(f"output.twist_fields {bad} are not of the form linear.x / angular.z.")
        self.msg_type = {"forward_command": msgs.Float64MultiArray, "joint_trajectory": msgs.JointTrajectory,
                         "cmd_vel": msgs.Twist}[self.adapter]

    def message(self, command: np.ndarray, wall_time: float) -> Any:
        """The message carrying ``command`` ``(A,)``."""
        self.full[self.slots] = command
        if self.adapter == "forward_command":
            return msgs.Float64MultiArray(data=self.full.tolist())
        if self.adapter == "joint_trajectory":
            values = self.full.tolist()
            point = msgs.JointTrajectoryPoint(
                positions=values if self.kind == "position" else [],
                velocities=values if self.kind == "velocity" else [],
                effort=values if self.kind == "torque" else [],
                time_from_start=msgs.duration(self.profile.output.trajectory_periods * self.period),
            )
            # header.stamp zero = start the trajectory now (ROS convention)
            return msgs.JointTrajectory(joint_names=list(self.names), points=[point])
        twist = msgs.Twist()
        for name, value in zip(self.profile.output.twist_fields, command, strict=True):
            group, axis = name.split(".")
            setattr(getattr(twist, group), axis, float(value))
        return twist
