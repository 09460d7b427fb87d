"""Tool use (SimToolReal): move any procedurally generated tool to random 6-DoF goal poses.

Each world holds one tool from the pool of ``cfg.split`` (per-world model fields), a
16-joint hand on a KUKA iiwa (or a floating wrist) and a goal pose. Reaching a goal means
``success_steps`` consecutive steps within ``goal_pos_tol`` / ``goal_rot_tol`` (looser on the
training split while the curriculum's ``goal_scale`` is below 1); then a new
goal is drawn, up to ``max_goals`` per episode.

Reward terms (unscaled; weights in ``reward_scales``, DexPBT-style):
``fingertip_approach`` improvement of each fingertip's closest distance to the tool box,
until lifted; ``grasp`` 1 per step while the thumb opposes a finger across the tool, until lifted;
``lift`` tool height above rest (clipped at ``lift_height``), until lifted; ``held_lift`` the same
clipped height paid while the fingertips hold the tool (mean distance < ``lift_hand_dist``), before and
after the lift, so tilting or knocking a tool up earns nothing and holding it just below ``lift_height``
earns no more than lifting it;
``lift_bonus`` 1 on the step the tool first rises ``lift_height`` with the hand around it;
``keypoint_progress`` improvement of the best-so-far max keypoint distance to the goal, after the lift;
``held_goal`` ``exp(-d / held_goal_sigma)`` of that distance ``d`` per step while a lifted tool is held
(robotrl's shaping, like ``grasp`` and ``held_lift``: a held tool pays more the nearer its goal);
``goal_bonus`` 1 on each goal reached; ``joint_vel`` ``-sum(qvel^2)`` of the robot.

Data flow within a control step: ``update(gen)`` measures the step once into
``StepMeasures`` (``self.step_measures``: fingertip and keypoint improvements, tool height,
the lift and goal events) and advances the episode state (best-so-far distances, the
``lifted``/``reached``/``dropped``/``fell`` flags, goals reached, new goals, kicks).
``reward_terms`` builds the named terms from those measures and the sim state;
``terminated`` reads the episode flags. Every random draw uses the env's ``gen``.

Curriculum (``cfg.curriculum``, see ``curriculum.py``), stage logged as the episode metric
``curriculum_stage``: 0 ``reach`` (small spawn area, lift goals), 1 ``lift`` (full spawn area,
lift goals straight above the spawn point), 2 ``goal`` (random 6-DoF goals, first near the lift goal and
widened by the curriculum's ``goal_scale``, logged as ``goal_scale``). A stage advances
when the smoothed rate of its skill (fingertips reached the tool; tool lifted) passes its
threshold. Only ``split=train`` uses the curriculum; ``heldout`` and ``heldout_family`` start in
the goal stage. The stage goes through ``state_dict``/``load_state_dict``; a loaded stage
redraws the goals in flight at the next ``update`` and sets the spawn area from each world's
next reset.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from robotrl.tasks.base import Task
from robotrl.tasks.tool_use import constants as C
from robotrl.tasks.tool_use import hand, tools
from robotrl.tasks.tool_use import rewards as R
from robotrl.tasks.tool_use import scenario_params as sp
from robotrl.tasks.tool_use.bag_scenario import scenario_from_episode
from robotrl.tasks.tool_use.config import ToolUseConfig
from robotrl.tasks.tool_use.curriculum import GOAL_STAGE, Curriculum
from robotrl.tasks.tool_use.scene import build_scene

from robotrl.rotations import quat_angle_between, quat_from_axis_angle, quat_mul, random_quat, uniform

log = logging.getLogger(__name__)

TOOL_FIELDS = ("geom_size", "geom_pos", "geom_quat", "geom_rbound", "geom_aabb", "geom_rgba", "body_mass",
               "body_inertia", "body_ipos", "body_iquat")
# Every model field the task gives per-world values (the warp backend needs them declared).
PER_WORLD_FIELDS = (*TOOL_FIELDS, "geom_friction", "dof_damping", "actuator_gainprm", "actuator_biasprm")


@dataclass
class StepMeasures:
    """What ``update`` measured in one control step, before any goal switch; ``reward_terms`` reads it.

    Attributes:
        grasp: ``(N,)`` 1 where the thumb opposes a finger across the tool (``rewards.grasp``), 0 once lifted.
        tip_gain: ``(N,)`` summed improvement of each fingertip's closest distance to the tool box
            (m); 0 once the tool is lifted.
        held: ``(N,)`` bool, mean fingertip distance to the tool box below ``lift_hand_dist``.
        height: ``(N,)`` tool height above its resting height (m).
        newly_lifted: ``(N,)`` bool, the tool first counted as lifted in this step.
        keypoint_gain: ``(N,)`` improvement of the best-so-far max keypoint distance to the goal (m);
            0 before the lift.
        goal_dist: ``(N,)`` max keypoint distance to the goal (m) in this step, before any goal switch.
        goal_reached: ``(N,)`` bool, a goal was reached in this step (and a new one drawn).

    """

    tip_gain: torch.Tensor
    grasp: torch.Tensor
    held: torch.Tensor
    height: torch.Tensor
    newly_lifted: torch.Tensor
    keypoint_gain: torch.Tensor
    goal_dist: torch.Tensor
    goal_reached: torch.Tensor

    @classmethod
    def zeros(cls, n: int, device: torch.device) -> StepMeasures:
        """Measures of a step in which nothing happened (before the first ``update``)."""
        f, b = torch.zeros(n, device=device), torch.zeros(n, dtype=torch.bool, device=device)
        return cls(tip_gain=f, grasp=f.clone(), held=b.clone(), height=f.clone(), newly_lifted=b,
                   keypoint_gain=f.clone(), goal_dist=f.clone(), goal_reached=b.clone())


class ToolUseTask(Task):
    """Dexterous hand on an arm moving procedurally generated tools to 6-DoF goals."""

    name = "tool_use"
    config_class = ToolUseConfig
    eval_camera = "overview"
    cfg: ToolUseConfig
    scenario_params = sp.SCENARIO_PARAMS
    scenario_from_episode = staticmethod(scenario_from_episode)  # the start pose, size, first goal

    def __init__(self, cfg: ToolUseConfig, num_envs: int, device: torch.device) -> None:
        super().__init__(cfg, num_envs, device)
        if cfg.arm not in hand.ARMS:
            raise ValueError(f"Unknown tool_use arm {cfg.arm!r}; valid arms: {', '.join(hand.ARMS)}.")
        self.pool = tools.tool_pool(cfg.split, cfg.tools_per_family, cfg.tool_seed, tuple(cfg.tool_size_scale))
        self.arm_joints = list(C.ARM_JOINTS if cfg.arm == "kuka_iiwa" else C.FLOATING_JOINTS)

    # --- model -----------------------------------------------------------------------
    def build_model(self) -> mujoco.MjModel:
        """Compile the scene (Newton solver, implicit-fast) with the pool's first tool as default."""
        return self.build_spec().compile()

    def build_spec(self) -> mujoco.MjSpec:
        """The uncompiled scene (``robotrl.twin`` calibrates it with mujoco.sysid)."""
        return build_scene(self.cfg, self.pool[0])

    @property
    def action_dim(self) -> int:
        """Arm (7, or 6 for the floating wrist) plus 16 hand joints."""
        return len(self.arm_joints) + len(C.hand_joint_names())

    @property
    def joint_names(self) -> list[str]:
        """Actuated joints in action order."""
        return self.arm_joints + list(C.hand_joint_names())

    def obs_layout(self) -> list[tuple[str, int]]:
        """Policy observation slices."""
        a = self.action_dim
        return [("keypoints_rel_palm", 24), ("keypoints_rel_goal", 24), ("tool_scale", 3), ("fingertips_rel_tool", 12),
                ("joint_pos", a), ("joint_vel", a), ("palm_pos", 3), ("palm_quat", 4), ("prev_targets", a),
                ("lifted", 1)]

    def action_spec(self) -> dict[str, object]:
        """Arm targets are relative (``target += scale * a``), hand targets absolute with smoothing."""
        lo, hi = self._ranges() if self.sim else (np.zeros(self.action_dim), np.ones(self.action_dim))
        na = len(self.arm_joints)
        scale = [self.cfg.arm_action_scale] * na + ((hi - lo) / 2)[na:].tolist()
        offset = [0.0] * na + ((hi + lo) / 2)[na:].tolist()
        home = self._home[self._qadr].tolist() if self.sim else [0.0] * self.action_dim
        return {"kind": "position", "scale": scale, "offset": offset, "default_pose": home,
                "relative": [True] * na + [False] * (self.action_dim - na), "ema": self.cfg.hand_action_ema}

    def _ranges(self) -> tuple[np.ndarray, np.ndarray]:
        rng = self.sim.model.actuator_ctrlrange
        return rng[:, 0].copy(), rng[:, 1].copy()

    # --- setup -----------------------------------------------------------------------
    def setup(self, sim) -> None:  # noqa: ANN001
        """Bind views, find ids, load the tool pool's fields, allocate per-world buffers."""
        super().setup(sim)
        m, n, dev, cfg = sim.model, self.num_envs, self.device, self.cfg
        self.qpos, self.qvel, self.ctrl = sim.bind("qpos"), sim.bind("qvel"), sim.bind("ctrl")
        self.xpos, self.xquat, self.site_xpos = sim.bind("xpos"), sim.bind("xquat"), sim.bind("site_xpos")
        self.mocap_pos, self.mocap_quat = sim.bind("mocap_pos"), sim.bind("mocap_quat")
        self.xfrc = sim.bind("xfrc_applied")
        ids = {name: m.joint(name).id for name in self.joint_names}
        self._qadr = torch.tensor([m.jnt_qposadr[i] for i in ids.values()], device=dev)
        self._dadr = torch.tensor([m.jnt_dofadr[i] for i in ids.values()], device=dev)
        tool_joint = m.joint("tool_joint").id
        self._tq, self._tv = int(m.jnt_qposadr[tool_joint]), int(m.jnt_dofadr[tool_joint])
        self._tool_body = m.body("tool").id
        self._tool_geoms = torch.tensor([m.geom(f"tool_{g}").id for g in tools.GEOMS], device=dev)
        self._palm = m.body(C.PALM_BODY).id
        self._tips = torch.tensor([m.site(s).id for s in C.FINGERTIP_SITES], device=dev)
        self._home = torch.as_tensor(m.key("home").qpos.copy(), device=dev)
        lo, hi = self._ranges()
        self.lo = torch.as_tensor(lo, dtype=torch.float32, device=dev)
        self.hi = torch.as_tensor(hi, dtype=torch.float32, device=dev)
        self._na = len(self.arm_joints)
        self.step_dt = m.opt.timestep * cfg.frame_skip
        fields = tools.tool_fields(self.pool)
        names = (*TOOL_FIELDS, "bbox_center", "bbox_half", "rest_z", "family")
        self.pool_fields = {k: torch.as_tensor(getattr(fields, k), device=dev) for k in names}
        # a calibrated model (task.dynamics: body_mass x object_mass) built pool[0] heavier or lighter: every tool is
        ratio = float(m.body_mass[self._tool_body]) / float(self.pool_fields["body_mass"][0])
        self.tool_mass_calibration = ratio if abs(ratio - 1.0) > 1e-6 else 1.0
        self._fields = {k: torch.as_tensor(np.broadcast_to(getattr(m, k), (n, *getattr(m, k).shape)).copy(),
                                           device=dev) for k in (*TOOL_FIELDS, "geom_friction")}
        self._base_friction = torch.as_tensor(m.geom_friction.copy(), device=dev)
        self._base_gain = torch.as_tensor(m.actuator_gainprm.copy(), device=dev)
        self._base_bias = torch.as_tensor(m.actuator_biasprm.copy(), device=dev)
        self._base_damping = torch.as_tensor(m.dof_damping.copy(), device=dev)
        z = lambda *s, dt=torch.float32: torch.zeros(n, *s, dtype=dt, device=dev)  # noqa: E731
        self.tool_id = z(dt=torch.long)
        self.bbox_center, self.bbox_half, self.rest_z, self._spawn_z = z(3), z(3), z(), z()
        self.kp_local = z(8, 3)
        self._palm_home = torch.tensor(C.PALM_HOME_POS, device=dev)
        self.spawn_pos, self.spawn_quat = z(3), z(4)
        self.goal_pos, self.goal_quat = z(3), z(4)
        self.targets, self.prev_targets = z(self.action_dim), z(self.action_dim)
        self.best_tip, self.best_kp = z(len(C.FINGERTIP_SITES)), z()
        self.lifted, self.reached = z(dt=torch.bool), z(dt=torch.bool)
        self.dropped, self.fell = z(dt=torch.bool), z(dt=torch.bool)
        self.near_steps, self.goals_reached, self.steps = z(dt=torch.long), z(dt=torch.long), z(dt=torch.long)
        self.mass_scale, self.friction_scale, self.damping_scale = z() + 1, z() + 1, z() + 1
        self.gain_scale = z(self.action_dim) + 1
        self.step_measures = StepMeasures.zeros(n, dev)
        self._obs_delay, self._pose_delay = z(dt=torch.long), z(dt=torch.long)
        self._pose_hist = torch.zeros(cfg.object_delay_max + 1, n, 7, device=dev)
        self._obs_hist: torch.Tensor | None = None
        self._fresh = torch.ones(n, dtype=torch.bool, device=dev)
        self._advance_obs = False
        self._arange = torch.arange(n, device=dev)
        self.curriculum = Curriculum(cfg, dev)
        self._goal_stale = False

    @property
    def stage(self) -> int:
        """Curriculum stage, an index into ``STAGES`` (``GOAL_STAGE`` without the curriculum)."""
        return self.curriculum.stage

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The curriculum: ``stage``, ``stage_episodes`` (0-d int64) and ``rates`` ``(2,)``."""
        return self.curriculum.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore the curriculum; a changed stage or goal scale redraws every goal in flight at the next ``update``."""
        before = (self.curriculum.stage, self.curriculum.goal_scale)
        self.curriculum.load_state_dict(state)
        self._goal_stale |= (self.curriculum.stage, self.curriculum.goal_scale) != before

    # --- lifecycle -------------------------------------------------------------------
    def randomize(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Dynamics x``dynamics_range``: tool mass, friction, actuator gains, joint damping (per world)."""
        c, k = self.cfg, ids.numel()
        if not c.dr_dynamics:
            return
        lo, hi = c.dynamics_range
        self.mass_scale[ids] = uniform(lo, hi, (k,), gen, self.device)
        self.friction_scale[ids] = uniform(lo, hi, (k,), gen, self.device)
        self.damping_scale[ids] = uniform(lo, hi, (k,), gen, self.device)
        self.gain_scale[ids] = uniform(lo, hi, (k, self.action_dim), gen, self.device)
        gs = self.gain_scale[ids].to(self._base_gain.dtype)
        gain = self._base_gain.expand(k, -1, -1).clone()
        bias = self._base_bias.expand(k, -1, -1).clone()
        gain[..., 0] *= gs
        bias[..., 1] *= gs
        self.sim.set_model_field("actuator_gainprm", ids, gain)
        self.sim.set_model_field("actuator_biasprm", ids, bias)
        damping = self._base_damping * self.damping_scale[ids, None].to(self._base_damping.dtype)
        self.sim.set_model_field("dof_damping", ids, damping)

    def reset(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """New tool, tool pose on the table, robot at home, new goal; advance the curriculum."""
        done = ids[self.steps[ids] > 0]
        self.curriculum.record(self.reached[done], self.lifted[done], self.goals_reached[done] > 0)
        k, c, dev = ids.numel(), self.cfg, self.device
        self.tool_id[ids] = torch.randint(0, len(self.pool), (k,), generator=gen, device=dev)
        self._write_tool(ids)
        spread = c.spawn_range * (0.4 if self.stage == 0 else 1.0)
        xy = torch.tensor(C.SPAWN_CENTER, device=dev) + uniform(-spread, spread, (k, 2), gen, dev)
        self.spawn_pos[ids] = torch.cat([xy, (self._spawn_z[ids] + 0.002)[:, None]], dim=1)
        yaw = uniform(-np.pi, np.pi, (k,), gen, dev)
        self.spawn_quat[ids] = quat_from_axis_angle(torch.tensor([0.0, 0, 1], device=dev).expand(k, 3), yaw)
        qpos = self._home.expand(k, -1).clone()
        hand_q = self._qadr[self._na:]
        noise = uniform(-0.05, 0.05, (k, hand_q.numel()), gen, dev)
        qpos[:, hand_q] = (qpos[:, hand_q].float() + noise).clamp(self.lo[self._na:], self.hi[self._na:]).to(qpos.dtype)
        qpos[:, self._tq:self._tq + 3] = self.spawn_pos[ids].to(qpos.dtype)
        qpos[:, self._tq + 3:self._tq + 7] = self.spawn_quat[ids].to(qpos.dtype)
        self.sim.reset(ids, qpos, torch.zeros(k, self.qvel.shape[1], device=dev))
        self.targets[ids] = qpos[:, self._qadr].float().clamp(self.lo, self.hi)
        self.prev_targets[ids] = self.targets[ids]
        self.ctrl[ids] = self.targets[ids].to(self.ctrl.dtype)
        for buf in (self.lifted, self.reached, self.dropped, self.fell):
            buf[ids] = False
        for buf in (self.near_steps, self.goals_reached, self.steps):
            buf[ids] = 0
        self.xfrc[ids, self._tool_body] = 0.0
        self._new_goal(ids, gen)
        self.best_tip[ids] = self._tip_distance()[ids]
        self.best_kp[ids] = self._kp_goal_distance()[ids]
        self._obs_delay[ids] = self._delays(k, c.obs_delay_max, gen)
        self._pose_delay[ids] = self._delays(k, c.object_delay_max if c.dr_object_pose else 0, gen)
        self._pose_hist[:, ids] = self._tool_pose()[ids].float()
        self._fresh[ids] = True
        chosen, draws = self.scenario_draws(ids, gen)
        if chosen.numel():
            self.apply_scenario(chosen, draws, gen)

    def apply_scenario(self, ids: torch.Tensor, values: dict[str, torch.Tensor], gen: torch.Generator) -> None:
        """Set scenario parameters ``{name: (k,)}`` of worlds ``ids`` (see ``scenario_params.py``; NaN keeps a draw)."""
        sp.apply(self, ids, values, gen)

    def _delays(self, k: int, high: int, gen: torch.Generator) -> torch.Tensor:
        if high <= 0 or not self.cfg.randomize:
            return torch.zeros(k, dtype=torch.long, device=self.device)
        return torch.randint(0, high + 1, (k,), generator=gen, device=self.device)

    def _write_tool(self, ids: torch.Tensor) -> None:
        """Per-world tool geometry, mass and inertia (mass and friction scaled by the DR factors).

        The mass is also scaled by ``tool_mass_calibration``, the calibrated model's (``task.dynamics``) tool mass
        over the generated tool's, so a fitted ``body_mass`` and ``object_mass`` reach every tool of the pool.
        """
        tid, geoms, body = self.tool_id[ids], self._tool_geoms, self._tool_body
        for name in TOOL_FIELDS:
            buf, src = self._fields[name], self.pool_fields[name][tid]
            if name == "body_mass":
                buf[ids, body] = src * (self.mass_scale[ids] * self.tool_mass_calibration).to(src.dtype)
            elif name == "body_inertia":
                buf[ids, body] = src * (self.mass_scale[ids, None] * self.tool_mass_calibration).to(src.dtype)
            elif name.startswith("body_"):
                buf[ids, body] = src
            else:
                buf[ids[:, None], geoms[None, :]] = src.to(buf.dtype)
            self.sim.set_model_field(name, ids, buf[ids])
        friction = self._base_friction * self.friction_scale[ids, None, None].to(self._base_friction.dtype)
        self.sim.set_model_field("geom_friction", ids, friction)
        self.bbox_center[ids] = self.pool_fields["bbox_center"][tid].float()
        self.bbox_half[ids] = self.pool_fields["bbox_half"][tid].float()
        self.rest_z[ids] = self.pool_fields["rest_z"][tid].float()
        self._spawn_z[ids] = self.bbox_half[ids, 2]
        self.kp_local[ids] = R.keypoints_local(self.bbox_center[ids], self.bbox_half[ids],
                                               self.cfg.keypoint_min_half)

    def _new_goal(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Goals: above the spawn point (reach/lift stages) or random 6-DoF poses (goal stage, ``goal_scale``)."""
        k, c, dev = ids.numel(), self.cfg, self.device
        if self.stage < GOAL_STAGE:
            h = c.lift_goal_height
            offset = torch.cat([uniform(-0.03, 0.03, (k, 2), gen, dev),
                                uniform(h - 0.05, h + 0.05, (k, 1), gen, dev)], dim=1)
            self.goal_pos[ids] = self.spawn_pos[ids] + offset
            self.goal_quat[ids] = self.spawn_quat[ids]
        else:
            low = torch.tensor(c.goal_region_low, device=dev)
            high = torch.tensor(c.goal_region_high, device=dev)
            pos = low + (high - low) * torch.rand(k, 3, generator=gen, device=dev)
            scale = self.curriculum.goal_scale
            if scale < 1.0:  # part of the way from the lift goal (straight above the spawn point)
                anchor = self.spawn_pos[ids] + torch.tensor([0.0, 0.0, c.lift_goal_height], device=dev)
                pos = anchor + scale * (pos - anchor)
            self.goal_pos[ids] = pos
            axis = random_quat(k, gen, dev)[:, 1:]
            axis = axis / axis.norm(dim=1, keepdim=True).clamp(min=1e-6)
            angle = uniform(0.0, scale * c.goal_rot_range, (k,), gen, dev)
            self.goal_quat[ids] = quat_mul(quat_from_axis_angle(axis, angle), self.spawn_quat[ids])
        self.mocap_pos[ids, 0] = self.goal_pos[ids].to(self.mocap_pos.dtype)
        self.mocap_quat[ids, 0] = self.goal_quat[ids].to(self.mocap_quat.dtype)
        self.near_steps[ids] = 0

    def apply_action(self, action: torch.Tensor) -> None:
        """Arm targets move by ``arm_action_scale * a``; hand targets track ``a`` mapped onto joint ranges."""
        na, c = self._na, self.cfg
        self.prev_targets.copy_(self.targets)
        arm = self.targets[:, :na] + c.arm_action_scale * action[:, :na]
        hand_abs = self.lo[na:] + (action[:, na:] + 1) * 0.5 * (self.hi[na:] - self.lo[na:])
        hand_t = c.hand_action_ema * hand_abs + (1 - c.hand_action_ema) * self.targets[:, na:]
        self.targets.copy_(torch.cat([arm, hand_t], dim=1).clamp(self.lo, self.hi))
        self.ctrl.copy_(self.targets.to(self.ctrl.dtype))

    # --- per-step state --------------------------------------------------------------
    def _tool_pose(self) -> torch.Tensor:
        return self.qpos[:, self._tq:self._tq + 7].float()

    # ``pose`` / ``tips`` below: this state's ``_tool_pose()`` / fingertip positions, where the caller has them
    def _tip_distance(self, pose: torch.Tensor | None = None, tips: torch.Tensor | None = None) -> torch.Tensor:
        pose = self._tool_pose() if pose is None else pose
        tips = self.site_xpos[:, self._tips].float() if tips is None else tips
        return R.box_distance(tips, pose[:, :3], pose[:, 3:], self.bbox_center, self.bbox_half)

    def _kp_goal_distance(self, pose: torch.Tensor | None = None) -> torch.Tensor:
        pose = self._tool_pose() if pose is None else pose
        kp = R.to_world(pose[:, :3], pose[:, 3:], self.kp_local)
        return R.max_keypoint_distance(kp, R.to_world(self.goal_pos, self.goal_quat, self.kp_local))

    def goal_errors(self, pose: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Position (m) and orientation (rad) error ``(N,)`` of the tool frame to its goal."""
        pose = self._tool_pose() if pose is None else pose
        return (pose[:, :3] - self.goal_pos).norm(dim=1), quat_angle_between(pose[:, 3:], self.goal_quat)

    def update(self, gen: torch.Generator) -> None:
        """Measure the step (``step_measures``), advance flags and best-so-far distances, switch goals, kick."""
        c = self.cfg
        if self._goal_stale:
            self._redraw_goals(gen)
        self.steps += 1
        pose, tips = self._tool_pose(), self.site_xpos[:, self._tips].float()  # nothing below moves tool or hand
        height = pose[:, 2] - self.rest_z
        tip = self._tip_distance(pose, tips)
        self.reached |= tip.amax(dim=1) < c.reach_dist
        tip_gain, self.best_tip = R.fingertip_approach(self.best_tip, tip, ~self.lifted)
        grasp = R.grasp(tips, tip, pose[:, :3], pose[:, 3:], self.bbox_center, self.bbox_half, c.reach_dist,
                        ~self.lifted)
        held = tip.mean(dim=1) < c.lift_hand_dist  # a tool knocked into the air is not lifted
        newly_lifted = ~self.lifted & (height >= c.lift_height) & held
        self.lifted |= newly_lifted
        kp_dist = self._kp_goal_distance(pose)
        self.best_kp = torch.where(newly_lifted, kp_dist, self.best_kp)
        keypoint_gain, self.best_kp = R.keypoint_progress(self.best_kp, kp_dist, self.lifted)
        pos_err, rot_err = self.goal_errors(pose)
        pos_tol, rot_tol = self.curriculum.goal_tolerances()
        near = (pos_err < pos_tol) & (rot_err < rot_tol)
        self.near_steps = torch.where(near, self.near_steps + 1, torch.zeros_like(self.near_steps))
        goal_reached = self.near_steps >= c.success_steps
        self.goals_reached += goal_reached.long()
        hit = goal_reached.nonzero().squeeze(1)
        if hit.numel():
            self._new_goal(hit, gen)
            self.best_kp[hit] = self._kp_goal_distance(pose)[hit]
        self.dropped = self.lifted & (height < c.drop_height)
        pos = pose[:, :3]
        self.fell = (pos[:, 2] < -0.05) | ((pos[:, :2] - self.spawn_pos[:, :2]).norm(dim=1) > 0.6)
        self.step_measures = StepMeasures(tip_gain=tip_gain, grasp=grasp, held=held, height=height,
                                          newly_lifted=newly_lifted, keypoint_gain=keypoint_gain, goal_dist=kp_dist,
                                          goal_reached=goal_reached)
        self._kick(gen)
        self._push_pose(gen)
        self._advance_obs = True

    def _redraw_goals(self, gen: torch.Generator) -> None:
        """New goals in every world under the current stage (after ``load_state_dict`` changed it)."""
        self._new_goal(self._arange, gen)
        self.best_kp = self._kp_goal_distance()
        self._goal_stale = False

    def _kick(self, gen: torch.Generator) -> None:
        c = self.cfg
        if not (c.randomize and c.dr_kicks):
            return
        self.xfrc[:, self._tool_body] = 0.0
        draw = torch.rand(self.num_envs, generator=gen, device=self.device)
        hit = (draw < c.kick_prob).nonzero().squeeze(1)
        if hit.numel() == 0:
            return
        mass = self._fields["body_mass"][hit, self._tool_body].float()
        direction = torch.randn(hit.numel(), 6, generator=gen, device=self.device)
        direction[:, :3] /= direction[:, :3].norm(dim=1, keepdim=True).clamp(min=1e-6)
        direction[:, 3:] /= direction[:, 3:].norm(dim=1, keepdim=True).clamp(min=1e-6)
        wrench = direction * c.kick_accel * mass[:, None]
        wrench[:, 3:] *= 0.1
        self.xfrc[hit, self._tool_body] = wrench.to(self.xfrc.dtype)

    # --- signals ---------------------------------------------------------------------
    def _push_pose(self, gen: torch.Generator) -> None:
        """Once per control step: add a noisy sample of the tool pose to the per-world delay line."""
        c = self.cfg
        if not (c.randomize and c.dr_object_pose):
            return
        pose, n, dev = self._tool_pose(), self.num_envs, self.device
        noisy_pos = pose[:, :3] + c.object_pos_noise * torch.randn(n, 3, generator=gen, device=dev)
        axis = torch.randn(n, 3, generator=gen, device=dev)
        axis = axis / axis.norm(dim=1, keepdim=True).clamp(min=1e-6)
        angle = c.object_rot_noise * torch.randn(n, generator=gen, device=dev)
        noisy_quat = quat_mul(quat_from_axis_angle(axis, angle), pose[:, 3:])
        self._pose_hist = torch.roll(self._pose_hist, 1, dims=0)
        self._pose_hist[0] = torch.cat([noisy_pos, noisy_quat], dim=1)

    def _obs_parts(self) -> list[torch.Tensor]:
        """What ``_policy_obs`` needs that is not the tool pose: goal keypoints, palm, fingertips, then the rest."""
        palm_pos = self.xpos[:, self._palm].float()
        span = (self.hi - self.lo).clamp(min=1e-6)
        return [
            R.to_world(self.goal_pos, self.goal_quat, self.kp_local), palm_pos, self.site_xpos[:, self._tips].float(),
            2 * (self.qpos[:, self._qadr].float() - self.lo) / span - 1,
            self.qvel[:, self._dadr].float() * 0.1,
            palm_pos - self._palm_home,
            self.xquat[:, self._palm].float(),
            2 * (self.targets - self.lo) / span - 1,
            self.lifted.float()[:, None],
        ]

    def _policy_obs(self, pose: torch.Tensor, parts: list[torch.Tensor]) -> torch.Tensor:
        """The policy observation for tool pose ``pose`` ``(N, 7)``; ``parts``: this state's ``_obs_parts()``."""
        goal_kp, palm_pos, tips, *rest = parts
        kp = R.to_world(pose[:, :3], pose[:, 3:], self.kp_local)
        return torch.cat([
            (kp - palm_pos[:, None]).flatten(1),
            (kp - goal_kp).flatten(1),
            self.bbox_half * 10.0,
            (tips - pose[:, None, :3]).flatten(1),
            *rest,
        ], dim=1)

    def observe(self) -> dict[str, torch.Tensor]:
        """Policy: keypoints, scale, joints, palm pose, targets (noisy, delayed); critic: true + extras."""
        pose, parts = self._tool_pose(), self._obs_parts()
        tips = parts[2]  # _obs_parts(): goal keypoints, palm, fingertips, ...
        true_obs = self._policy_obs(pose, parts)
        policy = true_obs  # the policy sees the true pose, or with object-pose DR a noisy one _pose_delay steps old
        if self.cfg.randomize and self.cfg.dr_object_pose:
            policy = self._policy_obs(self._pose_hist[self._pose_delay, self._arange], parts)
        if self.cfg.randomize and self.cfg.obs_delay_max > 0:
            if self._obs_hist is None:
                self._obs_hist = policy.expand(self.cfg.obs_delay_max + 1, -1, -1).clone()
            if self._advance_obs:  # observe may run twice in a step (before and after autoreset)
                self._obs_hist = torch.roll(self._obs_hist, 1, dims=0)
            self._advance_obs = False
            if bool(self._fresh.any()):
                fresh = self._fresh.nonzero().squeeze(1)
                self._obs_hist[:, fresh] = policy[fresh]
            self._obs_hist[0] = policy
            policy = self._obs_hist[self._obs_delay, self._arange]
        self._fresh[:] = False
        pos_err, rot_err = self.goal_errors(pose)
        privileged = torch.cat([
            self.qvel[:, self._tv:self._tv + 6].float(),
            self._fields["body_mass"][:, self._tool_body, None].float(),
            self.friction_scale[:, None], self.damping_scale[:, None], self.gain_scale.mean(1, keepdim=True),
            self._tip_distance(pose, tips), pos_err[:, None], rot_err[:, None],
            torch.full((self.num_envs, 1), self.stage / 2.0, device=self.device),
        ], dim=1)
        return {"policy": policy, "critic": torch.cat([true_obs, privileged], dim=1)}

    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named terms (see module docstring) from this step's ``step_measures`` and the robot's joint velocities.

        ``lift`` pays until the step the tool is lifted, inclusive.
        """
        c, m = self.cfg, self.step_measures
        return {
            "fingertip_approach": m.tip_gain,
            "grasp": m.grasp,
            "lift": R.lift(m.height, self.lifted & ~m.newly_lifted, c.lift_height),
            "held_lift": R.held_lift(m.height, m.held, c.lift_height),
            "lift_bonus": m.newly_lifted.float(),
            "keypoint_progress": m.keypoint_gain,
            "held_goal": R.held_goal(m.goal_dist, self.lifted & m.held, c.held_goal_sigma),
            "goal_bonus": m.goal_reached.float(),
            "joint_vel": R.joint_velocity_penalty(self.qvel[:, self._dadr].float()),
        }

    def terminated(self) -> torch.Tensor:
        """Dropped after lifting, fell off the workspace, or ``max_goals`` reached."""
        return self.dropped | self.fell | (self.goals_reached >= self.cfg.max_goals)

    def success(self) -> torch.Tensor:
        """At least one goal reached this episode."""
        return self.goals_reached > 0

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Goals reached, drop, lift and reach flags, the curriculum stage and goal scale, goal errors."""
        pos_err, rot_err = self.goal_errors()
        return {"goals_reached": self.goals_reached.float(), "dropped": self.dropped.float(),
                "lifted": self.lifted.float(), "reached": self.reached.float(),
                "curriculum_stage": torch.full((self.num_envs,), float(self.stage), device=self.device),
                "goal_scale": torch.full((self.num_envs,), self.curriculum.goal_scale, device=self.device),
                "goal_pos_err": pos_err, "goal_rot_err": rot_err}

    def trace(self) -> dict[str, torch.Tensor]:
        """Per-step goal errors, tool height and flags for ``robotrl eval`` plots."""
        pos_err, rot_err = self.goal_errors()
        return {"goal_pos_err": pos_err, "goal_rot_err": rot_err, "tool_height": self._tool_pose()[:, 2],
                "goals_reached": self.goals_reached.float(), "lifted": self.lifted.float()}

    def eval_artifacts(self, trace: dict[str, np.ndarray], out_dir: str) -> list[str]:
        """Plot world 0's goal errors, tool height and goals reached over time (``tool_use_trace.png``)."""
        from robotrl.tasks.tool_use.preview import plot_trace

        return [plot_trace(trace, out_dir, self.step_dt if self.sim else 0.02)]


TASK = ToolUseTask
