"""Language-conditioned tool use: pick up and lift the tool the instruction names.

Every world has ``len(cfg.tools)`` procedural tools (one per family) lying in table slots
whose assignment is permuted at each reset, a three-slide-joint gripper with a suction grasp
(a per-world weld equality that a grip command activates near a tool's top) and an
instruction index into ``instructions``. The instruction names one tool; attaching any other
tool ends the episode as a failure. Success: the named tool held ``lift_height`` above its
resting height, which ends the episode.

The policy observation is proprioception only (gripper tip position, its target, whether
something is held): *where* the named tool lies must come from the camera image
(``obs["image"]`` through the VecEnv) and *which* tool from the instruction. The critic
observation adds the privileged tool positions and the one-hot target, for teachers and
asymmetric critics. ``scripted_action()`` is a privileged controller (hover, descend, grip,
lift) used as the demonstration teacher.

Reward terms (unscaled): ``success`` 1 on the success step; ``wrong_tool`` -1 on attaching
another tool; ``approach`` decrease of the tip's distance to the named tool's grasp point (m).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from robotrl.tasks.base import Task
from robotrl.tasks.tool_use import constants as C
from robotrl.tasks.tool_use import tools
from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig
from robotrl.tasks.tool_use.language.instructions import instruction_list
from robotrl.tasks.tool_use.scene import look_at

from robotrl.rotations import uniform

# Handle colours per family (RGBA): the words must still be grounded in what is seen.
FAMILY_RGBA = {"hammer": [0.8, 0.2, 0.15, 1], "screwdriver": [0.95, 0.75, 0.1, 1], "spatula": [0.2, 0.45, 0.9, 1],
               "eraser": [0.3, 0.75, 0.3, 1], "marker": [0.6, 0.3, 0.8, 1], "brush": [0.9, 0.5, 0.7, 1]}
TIP_OFFSET = -0.04  # m, tip site below the gripper body origin
CAMERA = "front"
TIMESTEP = 0.01  # s; no hand contacts here, so twice the hand task's step
# model fields written per world (MuJoCo Warp needs them in sim.per_world_fields:
# configs/tuning/tool_use_language_warp.yaml)
PER_WORLD_FIELDS = ("qpos0",)


def build_scene(cfg: ToolUseLanguageConfig, specs: list[tools.ToolSpec]) -> mujoco.MjSpec:
    """Table, ``specs`` tools (bodies ``tool0..``), the slide-joint gripper, its welds and the camera."""
    spec = mujoco.MjSpec()
    spec.modelname = "tool_use_language"
    spec.compiler.degree = False
    spec.option.timestep = TIMESTEP
    spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    world = spec.worldbody
    world.add_light(pos=[0.5, 0, 1.5], dir=[0, 0, -1], diffuse=[0.8, 0.8, 0.8])
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1.0, 1.0, 0.05],
                   rgba=[0.85, 0.85, 0.8, 1], contype=C.TABLE_CONTYPE, conaffinity=C.TABLE_CONAFFINITY)
    cam = [cfg.slot_x - 0.32, 0.0, 0.45]
    world.add_camera(name=CAMERA, pos=cam, xyaxes=look_at(cam, [cfg.slot_x + 0.02, 0.0, 0.0]), fovy=60)
    for k, tool in enumerate(specs):
        body = tools.add_tool(world, tool, name=f"tool{k}", pos=(cfg.slot_x, cfg.slot_y[k], tools.rest_height(tool)))
        for geom in body.geoms:
            if geom.name.endswith("handle_box") or geom.name.endswith("handle_cyl"):
                if geom.rgba[3] > 0:
                    geom.rgba = FAMILY_RGBA.get(tool.family, [0.5, 0.5, 0.5, 1])
    grip = world.add_body(name="gripper", pos=[cfg.slot_x, 0.0, cfg.start_height - TIP_OFFSET], gravcomp=1.0)
    for axis, name in zip(np.eye(3), ("grip_x", "grip_y", "grip_z"), strict=True):
        grip.add_joint(name=name, type=mujoco.mjtJoint.mjJNT_SLIDE, axis=axis.tolist(), damping=60.0,
                       range=[-0.5, 0.5], limited=True)
        act = spec.add_actuator(name=f"act_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=1500.0)
        act.ctrlrange = [-0.5, 0.5]
    nogo = {"contype": 0, "conaffinity": 0}
    grip.add_geom(name="rod", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.008, 0.05, 0], pos=[0, 0, 0.03],
                  rgba=[0.3, 0.3, 0.3, 1], mass=0.3, **nogo)
    grip.add_geom(name="cup", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.02, 0.02, 0], pos=[0, 0, TIP_OFFSET + 0.02],
                  rgba=[0.1, 0.1, 0.1, 1], mass=0.1, **nogo)
    grip.add_site(name="tip", pos=[0, 0, TIP_OFFSET], size=[0.005, 0, 0])
    for k in range(len(specs)):
        weld = spec.add_equality(name=f"suction{k}", type=mujoco.mjtEq.mjEQ_WELD, objtype=mujoco.mjtObj.mjOBJ_BODY,
                                 name1="gripper", name2=f"tool{k}", active=False)
        weld.data[:3] = 0.0  # anchor at the tool frame origin; the relative pose comes from qpos0 at grasp time
    return spec


class ToolUseLanguageTask(Task):
    """Pick up and lift the tool named by the instruction (see module docstring)."""

    name = "tool_use_language"
    config_class = ToolUseLanguageConfig
    eval_camera = CAMERA
    image_camera = CAMERA
    cfg: ToolUseLanguageConfig

    def __init__(self, cfg: ToolUseLanguageConfig, num_envs: int, device: torch.device) -> None:
        super().__init__(cfg, num_envs, device)
        if len(cfg.slot_y) < len(cfg.tools):
            raise ValueError(f"{len(cfg.tools)} tools need as many slots, got slot_y={cfg.slot_y}.")
        self.specs = [tools.sample_tool(f, 0, cfg.tool_seed) for f in cfg.tools]
        texts, target = instruction_list(tuple(cfg.tools), cfg.instruction_split)
        self.instructions: list[str] = texts
        self._instr_target = torch.tensor(target, dtype=torch.long, device=device)

    def build_model(self) -> mujoco.MjModel:
        """Compile the scene."""
        return build_scene(self.cfg, self.specs).compile()

    @property
    def action_dim(self) -> int:
        """Gripper ``dx, dy, dz`` (relative target, ``action_scale`` m at 1) and grip (``> 0`` sucks)."""
        return 4

    @property
    def joint_names(self) -> list[str]:
        """The slide joints in action order."""
        return ["grip_x", "grip_y", "grip_z"]

    def obs_layout(self) -> list[tuple[str, int]]:
        """Policy observation slices (proprioception only)."""
        return [("tip_pos", 3), ("tip_target", 3), ("holding", 1)]

    # --- setup -----------------------------------------------------------------------
    def setup(self, sim) -> None:  # noqa: ANN001
        """Bind views, find ids, allocate per-world buffers."""
        super().setup(sim)
        m, n, dev, k = sim.model, self.num_envs, self.device, len(self.specs)
        self.qpos, self.qvel, self.ctrl = sim.bind("qpos"), sim.bind("qvel"), sim.bind("ctrl")
        self.site_xpos = sim.bind("site_xpos")
        self.eq_active = sim.bind("eq_active")
        self._tip = m.site("tip").id
        self._gq = torch.tensor([m.jnt_qposadr[m.joint(j).id] for j in self.joint_names], device=dev)
        self._tq = torch.tensor([m.jnt_qposadr[m.joint(f"tool{i}_joint").id] for i in range(k)], device=dev)
        self._eq = torch.tensor([m.equality(f"suction{i}").id for i in range(k)], device=dev)
        self._qpos0 = torch.as_tensor(m.qpos0.copy(), device=dev)
        self._rest_z = torch.tensor([tools.rest_height(t) for t in self.specs], device=dev)
        self._top = torch.tensor([t.handle_half[2] for t in self.specs], device=dev)
        self._grip0 = torch.tensor([self.cfg.slot_x, 0.0, self.cfg.start_height - TIP_OFFSET], device=dev)
        z = lambda *s, dt=torch.float32: torch.zeros(n, *s, dtype=dt, device=dev)  # noqa: E731
        self.instruction = z(dt=torch.long)
        self.target_tool = z(dt=torch.long)
        self.held = z(dt=torch.long) - 1
        self.targets = z(3)
        self.best_dist = z()
        self.succeeded, self.wrong = z(dt=torch.bool), z(dt=torch.bool)
        self._gain = z()
        self._arange = torch.arange(n, device=dev)

    # --- lifecycle -------------------------------------------------------------------
    def reset(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Permute tools over slots with jitter, gripper home, release, draw an instruction."""
        k, nt, c, dev = ids.numel(), len(self.specs), self.cfg, self.device
        qpos = torch.as_tensor(self.sim.model.qpos0, device=dev).expand(k, -1).clone()
        slots = torch.argsort(torch.rand(k, nt, generator=gen, device=dev), dim=1)  # tool i -> slot slots[:, i]
        slot_y = torch.tensor(c.slot_y, device=dev)[slots]
        jitter = c.randomize
        jx = uniform(-c.slot_jitter[0], c.slot_jitter[0], (k, nt), gen, dev) if jitter else torch.zeros(k, nt)
        jy = uniform(-c.slot_jitter[1], c.slot_jitter[1], (k, nt), gen, dev) if jitter else torch.zeros(k, nt)
        yaw = uniform(-c.yaw_jitter, c.yaw_jitter, (k, nt), gen, dev) if jitter else torch.zeros(k, nt)
        for i in range(nt):
            a = int(self._tq[i])
            qpos[:, a] = c.slot_x + jx[:, i]
            qpos[:, a + 1] = slot_y[:, i] + jy[:, i]
            qpos[:, a + 2] = self._rest_z[i] + 0.002
            qpos[:, a + 3] = torch.cos(yaw[:, i] / 2)
            qpos[:, a + 4:a + 6] = 0.0
            qpos[:, a + 6] = torch.sin(yaw[:, i] / 2)
        qpos[:, self._gq] = 0.0
        self.sim.reset(ids, qpos.to(self.qpos.dtype), torch.zeros(k, self.qvel.shape[1], device=dev))
        self.eq_active[ids] = 0
        self.targets[ids] = 0.0
        self.ctrl[ids] = 0.0
        self.held[ids] = -1
        self.succeeded[ids] = False
        self.wrong[ids] = False
        self.instruction[ids] = torch.randint(0, len(self.instructions), (k,), generator=gen, device=dev)
        self.target_tool[ids] = self._instr_target[self.instruction[ids]]
        self.best_dist[ids] = self._target_dist()[ids]

    def copy_worlds(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Make worlds ``dst`` ``(k,)`` exact copies of worlds ``src`` ``(k,)`` (sim state and task state).

        Used right after a reset for GRPO groups: every rollout of a group starts from one state.
        The per-world grasp pose (``qpos0``) is not copied: every attach writes it afresh.
        """
        self.sim.reset(dst, self.qpos[src].clone(), self.qvel[src].clone())
        self.eq_active[dst] = self.eq_active[src]
        self.ctrl[dst] = self.ctrl[src]
        for buf in (self.instruction, self.target_tool, self.held, self.targets, self.best_dist, self.succeeded,
                    self.wrong, self._gain):
            buf[dst] = buf[src]

    def apply_action(self, action: torch.Tensor) -> None:
        """Move the gripper target by ``action_scale * a[:3]``; ``a[3] > 0`` grips, ``<= 0`` releases."""
        self.targets.copy_((self.targets + self.cfg.action_scale * action[:, :3]).clamp(-0.45, 0.45))
        self.ctrl.copy_(self.targets.to(self.ctrl.dtype))
        grip = action[:, 3] > 0
        release = ~grip & (self.held >= 0)
        if bool(release.any()):
            self.eq_active[release] = 0
            self.held[release] = -1
        free = grip & (self.held < 0)
        if bool(free.any()):
            self._attach(free.nonzero().squeeze(1))

    def _tool_pos(self) -> torch.Tensor:
        """``(N, K, 3)`` tool frame positions."""
        idx = self._tq[:, None] + torch.arange(3, device=self.device)
        return self.qpos[:, idx].float()

    def _tip_pos(self) -> torch.Tensor:
        return self.site_xpos[:, self._tip].float()

    def _target_dist(self) -> torch.Tensor:
        tool = self._tool_pos()[self._arange, self.target_tool]
        grasp = tool + torch.stack([torch.zeros_like(tool[:, 0])] * 2 + [self._top[self.target_tool]], dim=1)
        return (self._tip_pos() - grasp).norm(dim=1)

    def _attach(self, ids: torch.Tensor) -> None:
        """Weld the nearest tool within reach of the tip (if any) to the gripper in worlds ``ids``."""
        tool = self._tool_pos()[ids]  # (k, K, 3)
        tip = self._tip_pos()[ids, None]
        dxy = (tool[..., :2] - tip[..., :2]).norm(dim=-1)
        dz = tip[..., 2] - (tool[..., 2] + self._top)
        ok = (dxy < self.cfg.grasp_radius) & (dz < self.cfg.grasp_height) & (dz > -0.02)
        dist = torch.where(ok, dxy, torch.full_like(dxy, float("inf")))
        best = dist.argmin(dim=1)
        hit = ok.any(dim=1)
        if not bool(hit.any()):
            return
        ids, best = ids[hit], best[hit]
        # MuJoCo's mj_setConst derives a weld's relative pose from qpos0 (with the gripper's slides
        # at 0), so the grasp pose goes in through a per-world qpos0 of the held tool: its pose now,
        # shifted back by the gripper's slide offset (the gripper never rotates).
        qpos0 = self._qpos0.expand(ids.numel(), -1).clone()
        qa = self._tq[best][:, None] + torch.arange(7, device=self.device)
        pose = self.qpos[ids[:, None], qa].to(qpos0.dtype)
        pose[:, :3] -= self.qpos[ids[:, None], self._gq].to(qpos0.dtype)
        qpos0.scatter_(1, qa, pose)
        self.sim.set_model_field("qpos0", ids, qpos0)
        eq = self._eq[best]
        self.eq_active[ids, eq] = 1
        self.held[ids] = best

    def update(self, gen: torch.Generator) -> None:
        """Success and wrong-tool flags, approach progress."""
        held = self.held >= 0
        self.wrong = held & (self.held != self.target_tool)
        lift = self._tool_pos()[self._arange, self.target_tool, 2] - self._rest_z[self.target_tool]
        self.succeeded = (self.held == self.target_tool) & (lift >= self.cfg.lift_height)
        dist = self._target_dist()
        self._gain = (self.best_dist - dist).clamp(min=0.0)
        self.best_dist = torch.minimum(self.best_dist, dist)

    # --- signals ---------------------------------------------------------------------
    def observe(self) -> dict[str, torch.Tensor]:
        """Policy: tip position, its target, holding flag; critic adds tool positions and the target."""
        home = self._grip0 + torch.tensor([0.0, 0.0, TIP_OFFSET], device=self.device)
        tip = self._tip_pos() - home
        policy = torch.cat([tip * 5.0, self.targets * 5.0, (self.held >= 0).float()[:, None]], dim=1)
        tools_rel = (self._tool_pos() - self._tip_pos()[:, None]).flatten(1) * 5.0
        onehot = torch.nn.functional.one_hot(self.target_tool, len(self.specs)).float()
        return {"policy": policy, "critic": torch.cat([policy, tools_rel, onehot], dim=1)}

    def instruction_ids(self) -> torch.Tensor:
        """``(N,)`` int64 index of each world's instruction in ``instructions``."""
        return self.instruction

    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """``success``, ``wrong_tool`` and ``approach`` (see module docstring)."""
        return {"success": self.succeeded.float(), "wrong_tool": -self.wrong.float(), "approach": self._gain}

    def terminated(self) -> torch.Tensor:
        """Success, or the wrong tool attached."""
        return self.succeeded | self.wrong

    def success(self) -> torch.Tensor:
        """The named tool is held ``lift_height`` above rest."""
        return self.succeeded

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Wrong-tool flag and the named tool index."""
        return {"wrong_tool": self.wrong.float(), "target_tool": self.target_tool.float()}

    def scripted_action(self, target_tool: torch.Tensor | None = None) -> torch.Tensor:
        """Privileged controller: hover above the tool, descend, grip, lift; ``(N, 4)`` in ``[-1, 1]``.

        Args:
            target_tool: ``(N,)`` tool index to fetch; default the named one (a different index
                gives a controller that follows another instruction).

        """
        tool_idx = self.target_tool if target_tool is None else target_tool
        tip = self._tip_pos()
        tool = self._tool_pos()[self._arange, tool_idx]
        top = tool[:, 2] + self._top[tool_idx]
        held = self.held == tool_idx
        dxy = tool[:, :2] - tip[:, :2]
        above = dxy.norm(dim=1) < 0.01
        goal_z = torch.where(above, top + 0.005, top + 0.06)
        goal_z = torch.where(held, self._rest_z[tool_idx] + self._top[tool_idx] + self.cfg.lift_height + 0.05, goal_z)
        move = torch.cat([torch.where(held[:, None], torch.zeros_like(dxy), dxy), (goal_z - tip[:, 2])[:, None]], 1)
        near = (dxy.norm(dim=1) < self.cfg.grasp_radius * 0.6) & ((tip[:, 2] - top) < self.cfg.grasp_height * 0.6)
        grip = torch.where(held | near, 1.0, -1.0)
        return torch.cat([(move / self.cfg.action_scale).clamp(-1.0, 1.0), grip[:, None]], dim=1)


TASK = ToolUseLanguageTask
