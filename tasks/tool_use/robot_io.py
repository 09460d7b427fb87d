"""Deploy hook of tool_use: the policy observation on a real arm and hand, and the sim robot's topics.

On the robot, ``ToolUseTask._policy_obs`` is rebuilt by ``robotrl.deploy.observation`` from:

* ``sensor_msgs/JointState``: arm and hand joint positions and velocities, and through forward
  kinematics of the exported tree (``kinematics``, evaluated by ``robotrl.deploy.kinematics``
  as ``mj_kinematics`` does) the palm pose and the fingertip positions;
* the object's pose (``geometry_msgs/PoseStamped`` on ``/object_pose``, in the task's world frame,
  from a tracker or ``robotrl-object-pose``) and its box (``/robotrl/object_box``, latched
  ``std_msgs/Float64MultiArray``: center, half-extents, resting height), from which the 8
  keypoints are rebuilt exactly as ``rewards.keypoints_local`` and ``rewards.to_world`` do;
* the goal pose (``/robotrl/goal_pose``, latched PoseStamped);
* the previous position command (the task's targets) and the ``lifted`` latch.

Actions: arm targets are relative to the previous command and hand targets smoothed towards it
(``action_spec.relative`` / ``ema``, applied by the safety chain's step 4).

``robotrl-sim-robot`` calls ``sim_inputs`` to publish what the perception side of a real cell
would (the tool's true pose, its box and the goal) and ``sim_action`` to turn a position command
back into the task's action. Keep ``obs_terms`` in the order and with the scales of ``observe``.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
from robotrl.tasks.tool_use import constants as C

JOINT_TYPES = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE): "slide"}


def _config(cfg: Any) -> Any:
    if cfg is None:
        from robotrl.tasks.tool_use.config import ToolUseConfig

        cfg = ToolUseConfig()
    return cfg


def joint_names(cfg: Any) -> list[str]:
    """Actuated joints in action order (``ToolUseTask.joint_names``)."""
    arm = C.ARM_JOINTS if cfg.arm == "kuka_iiwa" else C.FLOATING_JOINTS
    return [*arm, *C.hand_joint_names()]


def joint_ranges(model: mujoco.MjModel, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` ``(A,)`` control ranges of the position actuators of joints ``names``."""
    by_joint = {int(model.actuator_trnid[a, 0]): a for a in range(model.nu)}
    rows = [model.actuator_ctrlrange[by_joint[model.joint(n).id]] for n in names]
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def obs_terms(model: mujoco.MjModel, cfg: Any = None) -> list[dict[str, Any]]:
    """Observation terms ``[{name, size, source, scale, offset, ...}]`` matching ``ToolUseTask.observe``.

    Args:
        model: the compiled task model (actuator control ranges).
        cfg: the task's ``ToolUseConfig`` (arm, keypoint and lift settings); ``robotrl export`` passes it.

    """
    cfg = _config(cfg)
    names = joint_names(cfg)
    lo, hi = joint_ranges(model, names)
    span = np.maximum(hi - lo, 1e-6)
    norm = {"scale": (2.0 / span).tolist(), "offset": ((hi + lo) / 2).tolist()}
    a, tips = len(names), list(C.FINGERTIP_SITES)
    return [
        {"name": "keypoints_rel_palm", "size": 24, "source": "object_keypoints_rel_link", "link": C.PALM_BODY,
         "min_half": cfg.keypoint_min_half, "scale": 1.0, "offset": 0.0},
        {"name": "keypoints_rel_goal", "size": 24, "source": "object_keypoints_rel_goal",
         "min_half": cfg.keypoint_min_half, "scale": 1.0, "offset": 0.0},
        {"name": "tool_scale", "size": 3, "source": "object_half_extents", "scale": 10.0, "offset": 0.0},
        {"name": "fingertips_rel_tool", "size": 3 * len(tips), "source": "sites_rel_object", "sites": tips,
         "scale": 1.0, "offset": 0.0},
        {"name": "joint_pos", "size": a, "source": "joint_pos", **norm},
        {"name": "joint_vel", "size": a, "source": "joint_vel", "scale": 0.1, "offset": 0.0},
        {"name": "palm_pos", "size": 3, "source": "link_pos", "link": C.PALM_BODY, "scale": 1.0,
         "offset": list(C.PALM_HOME_POS)},
        {"name": "palm_quat", "size": 4, "source": "link_quat", "link": C.PALM_BODY, "scale": 1.0, "offset": 0.0},
        {"name": "prev_targets", "size": a, "source": "last_command", **norm},
        {"name": "lifted", "size": 1, "source": "object_lifted", "sites": tips, "lift_height": cfg.lift_height,
         "hand_dist": cfg.lift_hand_dist, "scale": 1.0, "offset": 0.0},
    ]


def kinematics(model: mujoco.MjModel, cfg: Any = None) -> dict[str, Any]:
    """The kinematic tree from the world to the palm and the fingertip sites (``robotrl.deploy.kinematics``).

    Bodies in MuJoCo's order (parents first) with their pose in the parent frame and their hinge
    and slide joints; the fingertip sites with their position on their body. ``lag_s`` is one
    physics substep: ``observe`` reads ``xpos``/``xquat``/``site_xpos`` as ``mj_step`` left them,
    computed before its last integration, i.e. at ``q - h * qd`` (checked to 1e-16 in
    ``tests/deploy/test_tool_use_io.py``), and the robot side must feed the policy the same.

    Raises:
        ValueError: a body on the way has a joint other than hinge or slide.

    """
    sites = [model.site(s).id for s in C.FINGERTIP_SITES]
    wanted: set[int] = set()
    for body in [model.body(C.PALM_BODY).id, *(int(model.site_bodyid[s]) for s in sites)]:
        while body > 0:
            wanted.add(body)
            body = int(model.body_parentid[body])
    order = sorted(wanted)
    index = {b: i for i, b in enumerate(order)}
    bodies = []
    for b in order:
        joints = []
        for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]):
            kind = JOINT_TYPES.get(int(model.jnt_type[j]))
            if kind is None:
                raise ValueError(f"tool_use kinematics: joint {model.joint(j).name!r} is neither hinge nor slide.")
            joints.append({"name": model.joint(j).name, "type": kind, "axis": model.jnt_axis[j].tolist(),
                           "pos": model.jnt_pos[j].tolist(), "qpos0": float(model.qpos0[model.jnt_qposadr[j]])})
        parent = int(model.body_parentid[b])
        bodies.append({"name": model.body(b).name, "parent": index.get(parent, -1),
                       "pos": model.body_pos[b].tolist(), "quat": model.body_quat[b].tolist(), "joints": joints})
    tips = [{"name": model.site(s).name, "body": index[int(model.site_bodyid[s])], "pos": model.site_pos[s].tolist()}
            for s in sites]
    return {"lag_s": float(model.opt.timestep), "bodies": bodies, "sites": tips}


# --- robotrl-sim-robot: what a real cell's perception publishes, from world 0 of the task -------------
def _pose_stamped(header: Any, pos: np.ndarray, quat_wxyz: np.ndarray) -> Any:
    from robotrl.deploy import msgs

    w, x, y, z = (float(v) for v in quat_wxyz)
    return msgs.PoseStamped(header=header, pose=msgs.Pose(msgs.Point(*(float(v) for v in pos)),
                                                          msgs.Quaternion(x=x, y=y, z=z, w=w)))


def sim_inputs(task: Any, header: Any, profile: Any = None) -> dict[str, Any]:
    """World 0's perception messages by input name: ``object_pose``, ``goal_pose``, ``object_box``.

    ``object_pose`` is the tool's true pose; ``object_box`` is ``[bbox center (3), bbox half-extents
    (3), resting height]`` of the current tool.

    Args:
        task: the ``ToolUseTask``.
        header: ``std_msgs/Header`` of the state (its stamp is used).
        profile: the robot profile; the poses carry its ``topics.object_frame`` (``world`` without one).

    """
    from robotrl.deploy import msgs

    head = msgs.Header(stamp=header.stamp, frame_id=profile.topics.object_frame if profile is not None else "world")
    pose = task.qpos[0, task._tq:task._tq + 7].double().cpu().numpy()
    box = [*task.bbox_center[0].tolist(), *task.bbox_half[0].tolist(), float(task.rest_z[0])]
    return {"object_pose": _pose_stamped(head, pose[:3], pose[3:]),
            "goal_pose": _pose_stamped(head, task.goal_pos[0].double().cpu().numpy(),
                                       task.goal_quat[0].double().cpu().numpy()),
            "object_box": msgs.Float64MultiArray(data=[float(v) for v in box])}


def sim_action(task: Any, command: np.ndarray) -> np.ndarray:
    """The action ``(A,)`` in ``[-1, 1]`` that makes world 0's targets equal ``command`` (position targets).

    Inverts ``ToolUseTask.apply_action``: arm ``(command - target) / arm_action_scale``; hand the
    absolute target ``(command - (1 - ema) * target) / ema`` mapped onto the joint range. Commands
    out of one step's reach (a DAMP command far from the target) are clipped to ``[-1, 1]``.
    """
    cfg, na = task.cfg, task._na
    targets = task.targets[0].double().cpu().numpy()
    lo, hi = task.lo.double().cpu().numpy(), task.hi.double().cpu().numpy()
    cmd = np.asarray(command, dtype=np.float64)
    arm = (cmd[:na] - targets[:na]) / cfg.arm_action_scale
    ema = cfg.hand_action_ema
    hand_abs = (cmd[na:] - (1.0 - ema) * targets[na:]) / ema
    hand = 2.0 * (hand_abs - lo[na:]) / np.maximum(hi[na:] - lo[na:], 1e-12) - 1.0
    return np.clip(np.concatenate([arm, hand]), -1.0, 1.0)
