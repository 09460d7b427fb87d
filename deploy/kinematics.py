"""Forward kinematics and rigid-object geometry on the robot side, in numpy (no mujoco, no torch).

``Kinematics`` evaluates a kinematic tree exported by a task's deploy hook (``kinematics(model,
cfg)`` in ``tasks/<name>/robot_io.py``, written by ``robotrl export`` into the spec's
``kinematics`` key) exactly as MuJoCo's ``mj_kinematics`` does: each body's pose in its parent
frame, then its hinge and slide joints in order (``qpos - qpos0``, rotation about the joint
anchor), then the quaternion normalized. Sites are ``xpos + xmat @ site_pos``.

Spec layout::

    {"bodies": [{"name", "parent" (index into bodies, -1 = world), "pos" [3], "quat" [4] (w, x, y, z),
                 "joints": [{"name", "type": "hinge" | "slide", "axis" [3], "pos" [3], "qpos0"}]}],
     "sites": [{"name", "body" (index into bodies), "pos" [3]}]}

Bodies are listed parents first. Joint values come by *name* from the robot's joint states. An
optional ``"lag_s"`` evaluates the tree at ``q - lag_s * qd``: in the simulator a task's body and
site positions come from the kinematics computed *before* the last physics substep (``mj_step``
evaluates kinematics, then integrates ``q += h * qd``), so a policy trained on them saw the hand
``h`` seconds behind its joint positions; with ``lag_s = h`` the robot side reproduces exactly that.

``box_keypoints`` and ``box_distance`` are the numpy twins of ``tasks/tool_use/rewards.py``'s
``keypoints_local``/``to_world`` and ``box_distance`` for one object.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# the 8 box corners in the order of tasks/tool_use/rewards.py::_CORNERS (x slowest, z fastest)
CORNERS = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions (w, x, y, z), as ``mju_mulQuat``."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    """``(3, 3)`` rotation matrix of unit quaternion ``q`` (w, x, y, z), as ``mju_quat2Mat``."""
    w, x, y, z = q
    return np.array([[w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]])


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vectors ``v`` ``(..., 3)`` rotated by unit quaternion ``q`` (w, x, y, z)."""
    w, xyz = q[0], q[1:]
    t = 2.0 * np.cross(xyz, v)
    return v + w * t + np.cross(xyz, t)


class Kinematics:
    """Forward kinematics of an exported kinematic tree (module docstring).

    Args:
        spec: the ``kinematics`` dict of a policy spec.

    Attributes:
        body_names, site_names: in spec order. joint_names: every joint of the tree, in order.

    Raises:
        ValueError: for a joint type other than hinge/slide, a parent listed after its child, or
            a site on an unknown body.

    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.bodies = list(spec["bodies"])
        self.sites = list(spec.get("sites", []))
        self.body_names = [b["name"] for b in self.bodies]
        self.site_names = [s["name"] for s in self.sites]
        self._body_index = {n: i for i, n in enumerate(self.body_names)}
        self._site_index = {n: i for i, n in enumerate(self.site_names)}
        self.lag_s = float(spec.get("lag_s", 0.0))
        self.joint_names: list[str] = []
        for i, body in enumerate(self.bodies):
            if not -1 <= int(body["parent"]) < i:
                raise ValueError(f"kinematics: body {body['name']!r} (#{i}) has parent {body['parent']}; parents "
                                 "must be listed before their children (re-export the policy).")
            for joint in body.get("joints", []):
                if joint["type"] not in ("hinge", "slide"):
                    raise ValueError(f"kinematics: joint {joint['name']!r} is a {joint['type']} joint; the robot "
                                     "side evaluates hinge and slide joints only.")
                self.joint_names.append(joint["name"])
        for site in self.sites:
            if not 0 <= int(site["body"]) < len(self.bodies):
                raise ValueError(f"kinematics: site {site['name']!r} is on body #{site['body']}, which is not listed.")

    def body_index(self, name: str) -> int:
        """Index of body ``name``. Raises ``ValueError`` naming the bodies when unknown."""
        if name not in self._body_index:
            raise ValueError(f"kinematics has no body {name!r}; bodies: {self.body_names}.")
        return self._body_index[name]

    def site_index(self, name: str) -> int:
        """Index of site ``name``. Raises ``ValueError`` naming the sites when unknown."""
        if name not in self._site_index:
            raise ValueError(f"kinematics has no site {name!r}; sites: {self.site_names}.")
        return self._site_index[name]

    def forward(self, qpos: Mapping[str, float], qvel: Mapping[str, float] | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World poses for joint values ``qpos`` (joint name -> value; every joint of the tree).

        With ``lag_s`` > 0 the tree is evaluated at ``qpos - lag_s * qvel`` (``qvel`` by name, required then).

        Returns:
            ``xpos (B, 3)``, ``xquat (B, 4)`` (w, x, y, z) of the bodies and ``site_xpos (S, 3)``.

        """
        n = len(self.bodies)
        xpos, xquat, xmat = np.zeros((n, 3)), np.zeros((n, 4)), np.zeros((n, 3, 3))
        for i, body in enumerate(self.bodies):
            pid = int(body["parent"])
            pos, quat = np.asarray(body["pos"], dtype=np.float64), np.asarray(body["quat"], dtype=np.float64)
            if pid >= 0:
                p, q = xpos[pid] + xmat[pid] @ pos, quat_mul(xquat[pid], quat)
            else:
                p, q = pos.copy(), quat.copy()
            for joint in body.get("joints", ()):
                axis = np.asarray(joint["axis"], dtype=np.float64)
                jpos = np.asarray(joint["pos"], dtype=np.float64)
                value = float(qpos[joint["name"]]) - float(joint["qpos0"])
                if self.lag_s:
                    if qvel is None:
                        raise ValueError(f"kinematics with lag_s={self.lag_s} needs joint velocities (qvel=).")
                    value -= self.lag_s * float(qvel[joint["name"]])
                if joint["type"] == "slide":
                    p = p + rotate(q, axis) * value
                    continue
                anchor = rotate(q, jpos) + p
                half = 0.5 * value
                q = quat_mul(q, np.array([math.cos(half), *(axis * math.sin(half))]) if value else np.eye(4)[0])
                p = anchor - rotate(q, jpos)
            q = q / np.linalg.norm(q)
            xpos[i], xquat[i], xmat[i] = p, q, quat_to_mat(q)
        site_xpos = np.array([xpos[int(s["body"])] + xmat[int(s["body"])] @ np.asarray(s["pos"], dtype=np.float64)
                              for s in self.sites]).reshape(-1, 3)
        return xpos, xquat, site_xpos


def box_keypoints(pos: np.ndarray, quat: np.ndarray, center: np.ndarray, half: np.ndarray,
                  min_half: float) -> np.ndarray:
    """The 8 keypoints ``(8, 3)`` of a box object at pose ``(pos, quat (w, x, y, z))``, world frame.

    The corners of the box ``center +- half`` (object frame), each half-extent raised to at least
    ``min_half``; as ``rewards.to_world(pos, quat, rewards.keypoints_local(center, half, min_half))``.
    """
    local = np.asarray(center, dtype=np.float64) + CORNERS * np.maximum(np.asarray(half, dtype=np.float64), min_half)
    return np.asarray(pos, dtype=np.float64) + rotate(np.asarray(quat, dtype=np.float64), local)


def box_distance(points: np.ndarray, pos: np.ndarray, quat: np.ndarray, center: np.ndarray,
                 half: np.ndarray) -> np.ndarray:
    """Distance ``(K,)`` of world points ``(K, 3)`` to the oriented box ``center +- half`` (0 inside)."""
    q = np.asarray(quat, dtype=np.float64)
    local = rotate(np.array([q[0], -q[1], -q[2], -q[3]]), np.asarray(points, dtype=np.float64) - pos)
    outside = np.maximum(np.abs(local - center) - half, 0.0)
    return np.linalg.norm(outside, axis=-1)
