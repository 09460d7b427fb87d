"""Deploy hook of the humanoid: how the policy observation is rebuilt from robot topics.

``robotrl export`` writes these terms into the policy's JSON spec; the robot-side runtime
(``robotrl.deploy.observation``) evaluates each as ``(source - offset) * scale`` from the
named source signal, so ``task.py::observe`` and the robot agree without the robot
importing torch or mujoco. Keep this list in the order and with the scales of
``HumanoidTask.observe``.
"""

from __future__ import annotations

from typing import Any

import mujoco


def obs_terms(model: mujoco.MjModel) -> list[dict[str, Any]]:
    """Observation terms ``[{name, size, source, scale, offset, joints?}]`` matching ``observe``.

    ``observe`` slices ``qpos[7:]`` / ``qvel[6:]``, i.e. the MJCF's joint order (``abdomen_z``
    before ``abdomen_y``), which differs from the actuator order of ``joint_names``; the
    ``joints`` key tells the runtime which order to use for those slices.
    """
    joint_pos0 = [float(v) for v in model.qpos0[7:]]
    qpos_order = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(1, model.njnt)]
    return [
        {"name": "torso_height", "size": 1, "source": "base_height", "scale": 1.0, "offset": 0.0},
        {"name": "projected_gravity", "size": 3, "source": "projected_gravity", "scale": 1.0, "offset": 0.0},
        {"name": "base_lin_vel", "size": 3, "source": "base_lin_vel", "scale": 1.0, "offset": 0.0},
        {"name": "base_ang_vel", "size": 3, "source": "base_ang_vel", "scale": 0.25, "offset": 0.0},
        {"name": "joint_pos", "size": len(joint_pos0), "source": "joint_pos", "scale": 1.0, "offset": joint_pos0,
         "joints": qpos_order},
        {"name": "joint_vel", "size": len(joint_pos0), "source": "joint_vel", "scale": 0.1, "offset": 0.0,
         "joints": qpos_order},
        {"name": "last_action", "size": len(joint_pos0), "source": "last_action", "scale": 1.0, "offset": 0.0},
        {"name": "command", "size": 2, "source": "command_vx_yaw", "scale": 1.0, "offset": 0.0},
    ]
