"""The same robot in PyBullet: a second physics engine for sim-to-sim checks.

``BulletWorld(model)`` rebuilds a compiled MuJoCo model, body by body, in its own PyBullet
DIRECT client: the same masses, centres of mass, principal inertias, joint anchors and axes,
joint limits and collision primitives (plane, sphere, capsule, cylinder, box). Joints map
one to one (hinge -> revolute, slide -> prismatic, a free root -> a floating base), so a
MuJoCo ``qpos``/``qvel`` converts exactly both ways. What PyBullet has no notion of is applied
from the MuJoCo model at every PyBullet substep: the actuators (``gain * ctrl + bias`` of
joint-transmission actuators with no activation dynamics; ctrl and force ranges), the
passive joint stiffness, damping and friction loss, joint limits as soft spring-dampers from the
joint's ``solref``/``solimp`` (Bullet's hard limits would kick a start pose that violates them),
and gravity compensation (``gravcomp``).
Joint armature is emulated by a rotor: each joint moves a massless link whose inertia about the
joint axis is the armature, which also couples it to the parent's rotation (MuJoCo adds it to
the joint's own diagonal only). Contacts are Bullet's (hard contacts, friction combined by product
where MuJoCo takes the maximum; MuJoCo's soft-contact parameters and margins are not carried over).

Why not PyBullet's own MJCF loader: on gymnasium's humanoid it keeps the masses and joints but
puts each link's centre of mass at its last geom and approximates the inertia (checked: the
torso's COM 15 cm off, box inertias), and it rejects the tool_use scene (MjSpec defaults, meshes).
The KUKA iiwa arm of tool_use comes from pybullet_data's URDF in both engines anyway.

Which robots run: ``humanoid`` (floating base, 17 hinges) and ``tool_use`` (the iiwa arm or the
floating wrist, the 16-joint hand, the tool and the table). Not ``driving`` (its sensors and
tyre contacts are not rebuilt). Used by ``Twin(..., engine="pybullet")`` and
``robotrl-sim-robot engine:=pybullet`` through ``BulletSim``, which stands in for the BatchSim:
PyBullet steps the physics, and the MuJoCo worlds mirror its state (``mj_forward``) so that
tasks compute observations, rewards and success unchanged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)

ENGINES = ("mujoco", "pybullet")
BULLET_TASKS = ("humanoid", "tool_use")
_EPS_MASS = 1e-6
_EPS_INERTIA = 1e-8


def _xyzw(q: np.ndarray) -> list[float]:
    return [float(q[1]), float(q[2]), float(q[3]), float(q[0])]


def _wxyz(q: Any) -> np.ndarray:
    return np.array([q[3], q[0], q[1], q[2]])


def _quat_z_to(axis: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) rotating +z onto ``axis``."""
    a = axis / np.linalg.norm(axis)
    c = float(a[2])
    if c < -1 + 1e-9:
        return np.array([0.0, 1.0, 0.0, 0.0])
    v = np.cross([0.0, 0.0, 1.0], a)
    q = np.array([1.0 + c, *v])
    return q / np.linalg.norm(q)


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    w, u = q[0], q[1:]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


@dataclass
class _Link:
    """One PyBullet link being assembled (frames relative to its parent link's frame)."""

    parent: int  # PyBullet index of the parent link (-1: base)
    pos: np.ndarray
    quat: np.ndarray  # (w, x, y, z)
    joint_type: int
    axis: np.ndarray
    mass: float = _EPS_MASS
    ipos: np.ndarray = field(kw_only=True)  # inertial frame position
    iquat: np.ndarray = field(kw_only=True)  # inertial frame orientation (w, x, y, z)
    inertia: np.ndarray = field(kw_only=True)  # principal moments
    body: int = -1  # MuJoCo body whose mass/geoms this link carries (-1: a rotor)


class BulletWorld:
    """One MuJoCo world rebuilt in a PyBullet DIRECT client (module docstring).

    Args:
        model: the compiled MuJoCo model of this world (its per-world fields included).
        substeps: PyBullet steps per MuJoCo timestep (actuator and passive forces are
            re-evaluated at every one).

    Raises:
        NotImplementedError: a ball joint, a free joint below the root, a mesh or ellipsoid geom that
            collides, or an actuator other than a joint-transmission one without activation dynamics.

    """

    def __init__(self, model: Any, substeps: int = 2) -> None:
        import pybullet

        self.pb = pybullet
        self.client = pybullet.connect(pybullet.DIRECT)
        self.substeps = substeps
        self.model = model
        try:
            self._build(model)
        except Exception:
            pybullet.disconnect(self.client)
            raise

    # --- construction ----------------------------------------------------------------
    def _build(self, m: Any) -> None:
        import mujoco

        pb, c = self.pb, self.client
        pb.setGravity(*m.opt.gravity.tolist(), physicsClientId=c)
        pb.setPhysicsEngineParameter(fixedTimeStep=m.opt.timestep / self.substeps, numSubSteps=0,
                                     numSolverIterations=50, deterministicOverlappingPairs=1, physicsClientId=c)
        self._check(m)
        self._collision_classes(m)
        free, hinge = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_HINGE)
        self.bodies: list[int] = []  # PyBullet body ids
        self.joints: list[tuple[int, int, int, int]] = []  # (bullet body, link, qpos adr, dof adr)
        self.free: list[tuple[int, int, int, int]] = []  # (bullet body, mujoco body, qpos adr, dof adr)
        self.link_of: dict[int, tuple[int, int]] = {}  # mujoco body -> (bullet body, link)
        self._static_geoms(m)
        for root in np.flatnonzero((m.body_parentid == 0) & (np.arange(m.nbody) > 0)):
            if m.body_mocapid[root] >= 0:
                continue
            self._multibody(m, int(root), free, hinge)
        self._links = [(b, [lk for bb, lk, _, _ in self.joints if bb == b]) for b in self.bodies]
        self._links = [(b, lks) for b, lks in self._links if lks]
        self.jq = np.asarray([j[2] for j in self.joints], dtype=np.int64)
        self.jv = np.asarray([j[3] for j in self.joints], dtype=np.int64)
        dof_jnt = m.dof_jntid[self.jv] if self.jv.size else np.zeros(0, dtype=np.int64)
        self.qpos0 = m.qpos0[self.jq]
        self.spring = m.qpos_spring[self.jq]
        self.stiffness = m.jnt_stiffness[dof_jnt]
        self.damping = m.dof_damping[self.jv]
        self.frictionloss = m.dof_frictionloss[self.jv]
        # joint limits as MuJoCo's soft constraints (Bullet's hard limits kick a violated start pose, such as
        # the humanoid's knees at 0 outside [-160, -2] deg, with a velocity of (violation / dt))
        self.limited = m.jnt_limited[dof_jnt].astype(bool)
        self.range = m.jnt_range[dof_jnt]
        timeconst, dampratio = m.jnt_solref[dof_jnt, 0], m.jnt_solref[dof_jnt, 1]
        dmax = m.jnt_solimp[dof_jnt, 1]
        self.limit_k = 1.0 / (dmax * timeconst**2 * dampratio**2)
        self.limit_b = 2.0 / (dmax * timeconst)
        self.invweight = np.maximum(m.dof_invweight0[self.jv], 1e-12)
        self._actuators(m)
        self._gravcomp = [(self.link_of[b], float(m.body_gravcomp[b] * m.body_mass[b]))
                          for b in range(1, m.nbody) if m.body_gravcomp[b] > 0 and b in self.link_of]
        for body in self.bodies:
            links = list(range(-1, pb.getNumJoints(body, physicsClientId=c)))
            pb.setJointMotorControlArray(body, links[1:], pb.VELOCITY_CONTROL, forces=[0.0] * (len(links) - 1),
                                         physicsClientId=c)
            for link in links:
                pb.changeDynamics(body, link, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0,
                                  physicsClientId=c)

    def _check(self, m: Any) -> None:
        import mujoco

        ball = int(mujoco.mjtJoint.mjJNT_BALL)
        if (m.jnt_type == ball).any():
            raise NotImplementedError("PyBullet twin: ball joints are not supported.")
        free = np.flatnonzero(m.jnt_type == int(mujoco.mjtJoint.mjJNT_FREE))
        if (m.body_parentid[m.jnt_bodyid[free]] != 0).any():
            raise NotImplementedError("PyBullet twin: a free joint must belong to a child of the world body.")
        colliding = (m.geom_contype | m.geom_conaffinity) > 0
        bad = colliding & np.isin(m.geom_type, [int(mujoco.mjtGeom.mjGEOM_MESH), int(mujoco.mjtGeom.mjGEOM_ELLIPSOID),
                                                int(mujoco.mjtGeom.mjGEOM_HFIELD), int(mujoco.mjtGeom.mjGEOM_SDF)])
        if bad.any():
            names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(g)) or str(g) for g in np.flatnonzero(bad)]
            raise NotImplementedError(f"PyBullet twin: colliding mesh/ellipsoid/hfield geoms {names[:5]} are not "
                                      "rebuilt; make them non-colliding or primitives.")

    def _shape(self, m: Any, body: int) -> tuple[int, float]:
        """One collision shape of the colliding geoms of ``body`` in its body frame, and their friction."""
        import mujoco

        pb, g = self.pb, mujoco.mjtGeom
        geoms = [i for i in np.flatnonzero(m.geom_bodyid == body)
                 if (m.geom_contype[i] | m.geom_conaffinity[i]) and m.geom_type[i] != int(g.mjGEOM_PLANE)]
        if not geoms:
            return -1, 1.0
        kinds = {int(g.mjGEOM_SPHERE): pb.GEOM_SPHERE, int(g.mjGEOM_CAPSULE): pb.GEOM_CAPSULE,
                 int(g.mjGEOM_CYLINDER): pb.GEOM_CYLINDER, int(g.mjGEOM_BOX): pb.GEOM_BOX}
        size = m.geom_size[geoms]
        shape = pb.createCollisionShapeArray(
            shapeTypes=[kinds[int(m.geom_type[i])] for i in geoms], radii=size[:, 0].tolist(),
            halfExtents=size.tolist(), lengths=(2 * size[:, 1]).tolist(),
            collisionFramePositions=m.geom_pos[geoms].tolist(),
            collisionFrameOrientations=[_xyzw(q) for q in m.geom_quat[geoms]], physicsClientId=self.client)
        return shape, float(m.geom_friction[geoms, 0].max())

    def _static_geoms(self, m: Any) -> None:
        """World-body geoms: planes and primitives as static bodies."""
        import mujoco

        pb, c = self.pb, self.client
        for i in np.flatnonzero(m.geom_bodyid == 0):
            if not (m.geom_contype[i] | m.geom_conaffinity[i]):
                continue
            if m.geom_type[i] == int(mujoco.mjtGeom.mjGEOM_PLANE):
                shape = pb.createCollisionShape(pb.GEOM_PLANE, physicsClientId=c)
                body = pb.createMultiBody(0.0, shape, -1, m.geom_pos[i].tolist(), _xyzw(m.geom_quat[i]),
                                          physicsClientId=c)
                pb.changeDynamics(body, -1, lateralFriction=float(m.geom_friction[i, 0]), physicsClientId=c)
                cls = (int(m.geom_contype[i]), int(m.geom_conaffinity[i]))
                pb.setCollisionFilterGroupMask(body, -1, self._group[cls], self._mask[cls], physicsClientId=c)
                self.bodies.append(body)
        # world boxes/capsules would go here; no task of ours has colliding non-plane world geoms
        rest = [i for i in np.flatnonzero(m.geom_bodyid == 0) if (m.geom_contype[i] | m.geom_conaffinity[i])
                and m.geom_type[i] != int(mujoco.mjtGeom.mjGEOM_PLANE)]
        if rest:
            raise NotImplementedError(f"PyBullet twin: colliding non-plane world geoms {rest[:5]} are not rebuilt.")

    def _multibody(self, m: Any, root: int, free: int, hinge: int) -> None:
        """The subtree of ``root`` as one PyBullet multibody: rotor links for joints, a fixed link per body."""
        pb, c = self.pb, self.client
        subtree = [int(b) for b in np.flatnonzero(m.body_rootid == root)]
        links: list[_Link] = []
        frame: dict[int, int] = {}  # mujoco body -> bullet link index carrying it (-1: base)
        joints: list[tuple[int, int, int]] = []  # (link, qpos adr, dof adr)
        root_joints = [j for j in range(m.body_jntadr[root], m.body_jntadr[root] + m.body_jntnum[root])]
        floating = bool(root_joints) and int(m.jnt_type[root_joints[0]]) == free
        if floating:
            frame[root] = -1  # the root is the floating base; set_state places it
        base_pos, base_quat = np.zeros(3), np.array([1.0, 0, 0, 0])
        for b in subtree:
            if b == root and floating:
                continue
            parent = -1 if b == root else frame[int(m.body_parentid[b])]
            pos, quat = m.body_pos[b].copy(), m.body_quat[b].copy()
            jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
            anchor = np.zeros(3)
            for k, j in enumerate(jids):
                p = m.jnt_pos[j]
                lpos = pos + _rotate(quat, p) if k == 0 else p - anchor
                lquat = quat if k == 0 else np.array([1.0, 0, 0, 0])
                jtype = pb.JOINT_REVOLUTE if int(m.jnt_type[j]) == hinge else pb.JOINT_PRISMATIC
                axis = m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j])
                arm = float(m.dof_armature[m.jnt_dofadr[j]])
                links.append(_Link(parent, lpos, lquat, jtype, axis, ipos=np.zeros(3), iquat=_quat_z_to(axis),
                                   inertia=np.array([_EPS_INERTIA, _EPS_INERTIA, max(arm, _EPS_INERTIA)])))
                joints.append((len(links) - 1, int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])))
                parent, anchor = len(links) - 1, p.copy()
            if jids:
                pos, quat = -anchor, np.array([1.0, 0, 0, 0])
            links.append(_Link(parent, pos, quat, pb.JOINT_FIXED, np.zeros(3), mass=max(float(m.body_mass[b]),
                                                                                         _EPS_MASS),
                               ipos=m.body_ipos[b], iquat=m.body_iquat[b],
                               inertia=np.maximum(m.body_inertia[b], _EPS_INERTIA), body=b))
            frame[b] = len(links) - 1
        base_shape, base_friction = self._shape(m, root) if floating else (-1, 1.0)
        shapes = [self._shape(m, lk.body) if lk.body >= 0 else (-1, 1.0) for lk in links]
        body = pb.createMultiBody(
            baseMass=float(m.body_mass[root]) if floating else 0.0, baseCollisionShapeIndex=base_shape,
            basePosition=base_pos.tolist(), baseOrientation=_xyzw(base_quat),
            baseInertialFramePosition=(m.body_ipos[root] if floating else np.zeros(3)).tolist(),
            baseInertialFrameOrientation=_xyzw(m.body_iquat[root] if floating else np.array([1.0, 0, 0, 0])),
            linkMasses=[lk.mass for lk in links], linkCollisionShapeIndices=[s for s, _ in shapes],
            linkVisualShapeIndices=[-1] * len(links), linkPositions=[lk.pos.tolist() for lk in links],
            linkOrientations=[_xyzw(lk.quat) for lk in links],
            linkInertialFramePositions=[lk.ipos.tolist() for lk in links],
            linkInertialFrameOrientations=[_xyzw(lk.iquat) for lk in links],
            linkParentIndices=[lk.parent + 1 for lk in links], linkJointTypes=[lk.joint_type for lk in links],
            linkJointAxis=[lk.axis.tolist() for lk in links], flags=pb.URDF_USE_SELF_COLLISION,
            physicsClientId=c)
        if floating:
            pb.changeDynamics(body, -1, localInertiaDiagonal=m.body_inertia[root].tolist(),
                              lateralFriction=base_friction, physicsClientId=c)
            self.free.append((body, root, int(m.jnt_qposadr[root_joints[0]]), int(m.jnt_dofadr[root_joints[0]])))
        for i, (lk, (_, friction)) in enumerate(zip(links, shapes, strict=True)):
            pb.changeDynamics(body, i, localInertiaDiagonal=lk.inertia.tolist(), lateralFriction=friction,
                              physicsClientId=c)
        for link, qadr, dadr in joints:
            self.joints.append((body, link, qadr, dadr))
        for b, link in frame.items():
            self.link_of[b] = (body, link)
        self._collision_filters(m, body, frame)
        self.bodies.append(body)

    def _collision_classes(self, m: Any) -> None:
        """One Bullet group bit per MuJoCo (contype, conaffinity) class; masks from MuJoCo's rule.

        MuJoCo: geoms collide if ``(ct1 & ca2) or (ct2 & ca1)``; Bullet: if ``(group1 & mask2) and
        (group2 & mask1)``. A bit per class and a mask of the classes each collides with is exact.
        """
        colliding = np.flatnonzero((m.geom_contype | m.geom_conaffinity) > 0)
        classes = sorted({(int(m.geom_contype[g]), int(m.geom_conaffinity[g])) for g in colliding})
        if len(classes) > 16:
            raise NotImplementedError(f"PyBullet twin: {len(classes)} contype/conaffinity classes (16 at most).")
        self._group = {cls: 1 << i for i, cls in enumerate(classes)}
        self._mask = {a: sum(1 << j for j, b in enumerate(classes) if (a[0] & b[1]) or (b[0] & a[1])) for a in classes}

    def _filter(self, m: Any, body: int, link: int, mj_body: int) -> None:
        geoms = [g for g in np.flatnonzero(m.geom_bodyid == mj_body) if m.geom_contype[g] | m.geom_conaffinity[g]]
        if geoms:
            cls = (int(m.geom_contype[geoms[0]]), int(m.geom_conaffinity[geoms[0]]))
            self.pb.setCollisionFilterGroupMask(body, link, self._group[cls], self._mask[cls],
                                                physicsClientId=self.client)

    def _collision_filters(self, m: Any, body: int, frame: dict[int, int]) -> None:
        """MuJoCo's exclusions inside one multibody: welded bodies, parent/child (``filterparent``), ``<exclude>``."""
        pb, c = self.pb, self.client
        weld = m.body_weldid
        excluded = {(int(a), int(b)) for a, b in zip(*np.divmod(m.exclude_signature, 1 << 16), strict=True)}
        bodies = [b for b in frame if any(m.geom_contype[g] | m.geom_conaffinity[g]
                                          for g in np.flatnonzero(m.geom_bodyid == b))]
        for b in bodies:
            self._filter(m, body, frame[b], b)
        filterparent = not (m.opt.disableflags & 512)  # mjDSBL_FILTERPARENT
        for i, b1 in enumerate(bodies):
            for b2 in bodies[i + 1:]:
                w1, w2 = int(weld[b1]), int(weld[b2])
                parent1, parent2 = int(weld[m.body_parentid[w1]]), int(weld[m.body_parentid[w2]])
                if (w1 == w2 or (filterparent and w1 and w2 and (w1 == parent2 or w2 == parent1))
                        or (b1, b2) in excluded or (b2, b1) in excluded):
                    pb.setCollisionFilterPair(body, body, frame[b1], frame[b2], 0, physicsClientId=c)

    def _actuators(self, m: Any) -> None:
        import mujoco

        ok = ((m.actuator_trntype == int(mujoco.mjtTrn.mjTRN_JOINT)) & (m.actuator_dyntype == 0)
              & (m.actuator_gaintype == 0) & np.isin(m.actuator_biastype, [0, 1]))
        if not ok.all():
            bad = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, int(a)) for a in np.flatnonzero(~ok)]
            raise NotImplementedError(f"PyBullet twin: actuators {bad[:5]} are not joint-transmission actuators "
                                      "with fixed gain, affine bias and no activation dynamics.")
        row = {int(d): i for i, d in enumerate(self.jv)}
        dof = m.jnt_dofadr[m.actuator_trnid[:, 0]]
        missing = [int(d) for d in dof if int(d) not in row]
        if missing:
            raise NotImplementedError(f"PyBullet twin: actuated dofs {missing} are not rebuilt joints.")
        self.act_row = np.asarray([row[int(d)] for d in dof], dtype=np.int64)
        self.gear = m.actuator_gear[:, 0].copy()
        self.gain = m.actuator_gainprm[:, 0].copy()
        self.bias = m.actuator_biasprm[:, :3].copy()
        self.ctrlrange = np.where(m.actuator_ctrllimited[:, None] > 0, m.actuator_ctrlrange, [-np.inf, np.inf])
        self.forcerange = np.where(m.actuator_forcelimited[:, None] > 0, m.actuator_forcerange, [-np.inf, np.inf])

    # --- state -------------------------------------------------------------------------
    def set_state(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Put the PyBullet world at MuJoCo's ``qpos`` ``(nq,)`` / ``qvel`` ``(nv,)``."""
        pb, c, m = self.pb, self.client, self.model
        for body, mb, qa, da in self.free:
            pos, quat = qpos[qa:qa + 3], qpos[qa + 3:qa + 7] / np.linalg.norm(qpos[qa + 3:qa + 7])
            com = pos + _rotate(quat, m.body_ipos[mb])
            pb.resetBasePositionAndOrientation(body, com.tolist(), _xyzw(_quat_mul(quat, m.body_iquat[mb])),
                                               physicsClientId=c)
            w_world = _rotate(quat, qvel[da + 3:da + 6])
            v_com = qvel[da:da + 3] + np.cross(w_world, com - pos)
            pb.resetBaseVelocity(body, v_com.tolist(), w_world.tolist(), physicsClientId=c)
        for (body, link, qa, da), q0 in zip(self.joints, self.qpos0, strict=True):
            pb.resetJointState(body, link, float(qpos[qa] - q0), float(qvel[da]), physicsClientId=c)

    def get_state(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Write the PyBullet state into MuJoCo's ``qpos``/``qvel`` (in place; unrebuilt entries untouched)."""
        pb, c, m = self.pb, self.client, self.model
        for body, mb, qa, da in self.free:
            com, iquat_w = pb.getBasePositionAndOrientation(body, physicsClientId=c)
            quat = _quat_mul(_wxyz(iquat_w), _quat_conj(m.body_iquat[mb]))
            quat /= np.linalg.norm(quat)
            quat *= np.sign(quat @ qpos[qa + 3:qa + 7]) or 1.0  # q and -q: keep the sign MuJoCo had
            pos = np.asarray(com) - _rotate(quat, m.body_ipos[mb])
            v_com, w_world = (np.asarray(v) for v in pb.getBaseVelocity(body, physicsClientId=c))
            qpos[qa:qa + 3], qpos[qa + 3:qa + 7] = pos, quat
            qvel[da:da + 3] = v_com - np.cross(w_world, np.asarray(com) - pos)
            qvel[da + 3:da + 6] = _rotate(_quat_conj(quat), w_world)
        q, dq = self._joint_states()
        qpos[self.jq], qvel[self.jv] = q + self.qpos0, dq

    def _joint_states(self) -> tuple[np.ndarray, np.ndarray]:
        pb, c = self.pb, self.client
        q, dq = np.zeros(len(self.joints)), np.zeros(len(self.joints))
        i = 0
        for body, links in self._links:
            states = pb.getJointStates(body, links, physicsClientId=c)
            q[i:i + len(links)] = [s[0] for s in states]
            dq[i:i + len(links)] = [s[1] for s in states]
            i += len(links)
        return q, dq

    def joint_forces(self, ctrl: np.ndarray, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Generalized force on each rebuilt joint: actuators plus passive spring, damper and friction loss."""
        qm = q + self.qpos0
        tau = -self.stiffness * (qm - self.spring) - self.damping * dq - self.frictionloss * np.tanh(dq / 1e-2)
        lower, upper = qm - self.range[:, 0], self.range[:, 1] - qm  # < 0: violated
        push_up = np.maximum(0.0, -(self.limit_k * lower + self.limit_b * dq)) * (lower < 0)
        push_down = np.maximum(0.0, -(self.limit_k * upper - self.limit_b * dq)) * (upper < 0)
        tau += self.limited * (push_up - push_down) / self.invweight
        u = np.clip(ctrl, self.ctrlrange[:, 0], self.ctrlrange[:, 1])
        length, velocity = self.gear * qm[self.act_row], self.gear * dq[self.act_row]
        force = self.gain * u + self.bias[:, 0] + self.bias[:, 1] * length + self.bias[:, 2] * velocity
        force = np.clip(force, self.forcerange[:, 0], self.forcerange[:, 1])
        np.add.at(tau, self.act_row, self.gear * force)
        return tau

    def step(self, ctrl: np.ndarray, nstep: int) -> None:
        """``nstep`` MuJoCo timesteps with ``ctrl`` ``(nu,)`` held (``substeps`` PyBullet steps each)."""
        pb, c = self.pb, self.client
        for _ in range(nstep * self.substeps):
            q, dq = self._joint_states()
            tau = self.joint_forces(ctrl, q, dq)
            i = 0
            for body, links in self._links:
                pb.setJointMotorControlArray(body, links, pb.TORQUE_CONTROL, forces=tau[i:i + len(links)].tolist(),
                                             physicsClientId=c)
                i += len(links)
            self._compensate_gravity()
            pb.stepSimulation(physicsClientId=c)

    def _compensate_gravity(self) -> None:
        pb, c = self.pb, self.client
        g = np.asarray(self.model.opt.gravity)
        for (body, link), mass in self._gravcomp:
            com = (pb.getBasePositionAndOrientation(body, physicsClientId=c)[0] if link < 0 else
                   pb.getLinkState(body, link, computeForwardKinematics=1, physicsClientId=c)[0])
            pb.applyExternalForce(body, link, (-mass * g).tolist(), com, pb.WORLD_FRAME, physicsClientId=c)

    def close(self) -> None:
        """Disconnect the PyBullet client."""
        if self.client is not None:
            self.pb.disconnect(self.client)
            self.client = None


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _quat_conj(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


class BulletSim:
    """A BatchSim whose physics is PyBullet: one ``BulletWorld`` per world (module docstring).

    Everything but ``step`` and ``reset`` is the wrapped MuJoCo BatchSim's. ``reset`` rebuilds the
    reset worlds from their current per-world MuJoCo models (so domain randomization, a task's
    per-world tool and calibrated physics carry over) and puts them at the reset state; ``step``
    steps PyBullet with the worlds' ``ctrl`` and writes the state back into MuJoCo (``forward``).
    A task that writes ``qpos``/``qvel`` between steps (a push) is seen at the next ``step``.
    """

    def __init__(self, sim: Any, substeps: int = 2) -> None:
        self._sim = sim
        self.substeps = substeps
        self.worlds: list[BulletWorld | None] = [None] * sim.nsim
        self._qpos, self._qvel = sim.bind("qpos"), sim.bind("qvel")
        self._ctrl = sim.bind("ctrl")
        self._written: list[tuple[np.ndarray, np.ndarray] | None] = [None] * sim.nsim
        self.reset(torch.arange(sim.nsim), self._qpos.clone(), self._qvel.clone())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sim, name)

    def reset(self, ids: torch.Tensor, qpos: torch.Tensor | None = None, qvel: torch.Tensor | None = None) -> None:
        """Reset worlds ``ids`` in MuJoCo, rebuild them in PyBullet and put them at the reset state."""
        self._sim.reset(ids, qpos, qvel)
        for w in ids.tolist():
            if self.worlds[w] is not None:
                self.worlds[w].close()
            self.worlds[w] = BulletWorld(self._sim.get_world(int(w))[0], self.substeps)
            self._push(int(w))

    def _push(self, w: int) -> None:
        qpos, qvel = self._qpos[w].numpy().astype(np.float64), self._qvel[w].numpy().astype(np.float64)
        world = self.worlds[w]
        assert world is not None  # reset builds world w before pushing to it
        world.set_state(qpos, qvel)
        self._written[w] = (qpos.copy(), qvel.copy())

    def step(self, nstep: int = 1) -> torch.Tensor:
        """PyBullet steps every world; MuJoCo mirrors the result. Returns the ids of non-finite worlds."""
        bad = []
        for w, world in enumerate(self.worlds):
            assert world is not None  # __init__ resets (builds) every world
            last = self._written[w]
            qpos, qvel = self._qpos[w].numpy(), self._qvel[w].numpy()
            if last is None or not (np.array_equal(last[0], qpos) and np.array_equal(last[1], qvel)):
                self._push(w)  # the task wrote the state (a push, a teleport) since our last write
            world.step(self._ctrl[w].numpy().astype(np.float64), nstep)
            world.get_state(qpos, qvel)
            if not (np.isfinite(qpos).all() and np.isfinite(qvel).all()):
                bad.append(w)
            self._written[w] = (qpos.copy(), qvel.copy())
        self._sim.forward()
        return torch.as_tensor(bad, dtype=torch.long)

    def close(self) -> None:
        """Disconnect every PyBullet client."""
        for world in self.worlds:
            if world is not None:
                world.close()


def use_pybullet(env: Any, substeps: int = 2) -> BulletSim:
    """Make a TaskEnv's physics PyBullet (``env.sim`` and ``env.task.sim`` become a ``BulletSim``).

    Raises:
        NotImplementedError: the task's robot cannot be rebuilt in PyBullet (see ``BULLET_TASKS``).

    """
    if env.cfg.name not in BULLET_TASKS:
        raise NotImplementedError(f"task {env.cfg.name!r} does not run in PyBullet; tasks that do: {BULLET_TASKS}.")
    sim = BulletSim(env.sim, substeps)
    env.sim = env.task.sim = sim
    return sim
