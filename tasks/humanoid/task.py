"""Humanoid velocity tracking: follow a commanded forward speed and yaw rate without falling.

Reward terms (named, scaled by ``reward_scales``):
``track_lin_vel`` exp(-|v_xy - cmd|^2 / sigma), ``track_yaw`` exp(-(w_z - cmd)^2 / sigma),
``alive`` 1 per step, ``upright`` -(1 - g_z) tilt, ``ctrl`` -|a|^2, ``action_rate`` -|a - a_prev|^2,
``vertical_vel`` -v_z^2. A torso height outside ``cfg.healthy_z`` is a fall and ends the episode.
"""

from __future__ import annotations

from typing import ClassVar

import mujoco
import torch
from robotrl.tasks.base import Task
from robotrl.tasks.humanoid import constants as C
from robotrl.tasks.humanoid.bag_scenario import scenario_from_episode
from robotrl.tasks.humanoid.config import HumanoidConfig

from robotrl.rotations import quat_rotate_parts_wxyz, sample_range, uniform
from robotrl.twin.scenarios import ScenarioParam


class HumanoidTask(Task):
    """Gymnasium's humanoid (17 motors) tracking velocity commands."""

    name = "humanoid"
    config_class = HumanoidConfig
    eval_camera = "track"
    cfg: HumanoidConfig
    # Scenario parameters (robotrl.twin mining and task.scenarios): the first command, friction and mass
    # scales, and the pushes (every push_interval_s, this horizontal velocity kick in this world direction).
    scenario_params: ClassVar[list[ScenarioParam]] = [
        ScenarioParam("cmd_vx", 0.0, 1.5, unit="m/s"), ScenarioParam("cmd_yaw", -0.5, 0.5, unit="rad/s"),
        ScenarioParam("friction", 0.4, 1.4), ScenarioParam("mass", 0.7, 1.3),
        ScenarioParam("push_vel", 0.0, 1.5, unit="m/s"), ScenarioParam("push_dir", -3.1416, 3.1416, unit="rad"),
    ]
    # what a bag measures of them: the failing command and the largest push (tasks/humanoid/bag_scenario.py)
    scenario_from_episode = staticmethod(scenario_from_episode)

    def build_model(self) -> mujoco.MjModel:
        """Gymnasium's humanoid with Newton solver and implicit-fast integration (both backends)."""
        return self.build_spec().compile()

    def build_spec(self) -> mujoco.MjSpec:
        """The uncompiled model (``build_model`` compiles it; ``robotrl.twin`` calibrates it with mujoco.sysid)."""
        spec = mujoco.MjSpec.from_file(C.model_path())
        if not self.cfg.gym_model:
            spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
            spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
            spec.option.iterations = self.cfg.solver_iterations
            spec.option.ls_iterations = 20
        if self.cfg.gym_obs:
            # An accelerometer makes mj_step run mj_rnePostConstraint, which fills cfrc_ext.
            spec.body(C.ROOT_BODY).add_site(name="imu")
            spec.add_sensor(type=mujoco.mjtSensor.mjSENS_ACCELEROMETER, objtype=mujoco.mjtObj.mjOBJ_SITE,
                            objname="imu")
        return spec

    @property
    def action_dim(self) -> int:
        """17 motors."""
        return len(C.JOINTS)

    @property
    def joint_names(self) -> list[str]:
        """Actuated joints in action order."""
        return list(C.JOINTS)

    def obs_layout(self) -> list[tuple[str, int]]:
        """Policy observation slices."""
        a = self.action_dim
        return [
            ("torso_height", 1), ("projected_gravity", 3), ("base_lin_vel", 3), ("base_ang_vel", 3),
            ("joint_pos", a), ("joint_vel", a), ("last_action", a), ("command", 2),
        ]

    def action_spec(self) -> dict[str, object]:
        """Motor inputs: ``ctrl = ctrl_limit * action`` (strength randomization is sim-only)."""
        high = self.sim.model.actuator_ctrlrange[:, 1].tolist() if self.sim else [0.4] * self.action_dim
        return {"kind": "torque", "scale": high, "offset": [0.0] * self.action_dim,
                "default_pose": [0.0] * self.action_dim}

    def setup(self, sim) -> None:  # noqa: ANN001
        """Bind qpos/qvel/ctrl and allocate command, strength and action buffers."""
        super().setup(sim)
        n, dev = self.num_envs, self.device
        self.qpos, self.qvel, self.ctrl = sim.bind("qpos"), sim.bind("qvel"), sim.bind("ctrl")
        model = sim.model
        self.qpos0 = torch.as_tensor(model.qpos0, dtype=self.qpos.dtype, device=dev)
        self.ctrl_high = torch.as_tensor(model.actuator_ctrlrange[:, 1], dtype=torch.float32, device=dev)
        self.command = torch.zeros(n, 2, device=dev)
        self.strength = torch.ones(n, self.action_dim, device=dev)
        self._gain = self.ctrl_high.expand(n, -1).clone()  # ctrl_high * strength, refreshed by randomize
        self.last_action = torch.zeros(n, self.action_dim, device=dev)
        # this and the previous step's actions: two rows of one buffer that swap roles each step
        self._action_pair = torch.zeros(2, n, self.action_dim, device=dev)
        self.action, self.prev_action = self._action_pair.unbind(0)
        self.steps = torch.zeros(n, dtype=torch.long, device=dev)
        self._fwd_sum = torch.zeros(n, device=dev)
        # the critic's privileged inputs (friction scale, mass scale, mean motor strength), kept up to date
        # by ``randomize`` and ``apply_scenario``; its first two columns are ``friction_scale`` and ``mass_scale``
        self._privileged = torch.ones(n, 3, device=dev)
        self.friction_scale, self.mass_scale = self._privileged[:, 0], self._privileged[:, 1]
        self.push = torch.full((n, 2), float("nan"), device=dev)  # scenario push (vx, vy) per world; NaN: random
        self._base_friction = torch.as_tensor(model.geom_friction.copy(), device=dev)
        self._base_mass = torch.as_tensor(model.body_mass.copy(), device=dev)
        self._base_solref = torch.as_tensor(model.geom_solref.copy(), device=dev)
        tc = self.cfg.contact_timeconst_range
        if tc and (len(tc) != 2 or not 2 * model.opt.timestep <= tc[0] <= tc[1]):
            raise ValueError(f"task.contact_timeconst_range={list(tc)}: give [low, high] with "
                             f"{2 * model.opt.timestep:g} <= low <= high (seconds; twice the timestep at least).")
        self._bind_signal_views(model)
        self.step_dt = model.opt.timestep * self.cfg.frame_skip
        self._resample_every = max(1, round(self.cfg.command_resample_s / self.step_dt))
        self._push_every = round(self.cfg.push_interval_s / self.step_dt) if self.cfg.push_interval_s > 0 else 0
        # periods in control steps of the clocked events (command resample, then pushes if enabled): (E, 1)
        periods = [self._resample_every] + ([self._push_every] if self._push_every else [])
        self._event_periods = torch.tensor(periods, device=dev).unsqueeze(1)
        # Control steps until the first world can have an event due: a lower bound kept on the host,
        # so a step with nothing due pays no tensor check (and no host sync on a GPU). A reset (its
        # world's clock to 0) never makes it too late: no world is more than min(periods) from its next.
        self._until_due = min(periods)
        ranges = {"cmd_vx": self.cfg.cmd_vx, "cmd_yaw": self.cfg.cmd_yaw}
        for name, r in ranges.items():
            if len(r) != 2 or r[0] > r[1]:
                raise ValueError(f"task.{name} must be [low, high] with low <= high, got {list(r)}.")
        # command draws as sample_range makes them: low + (high - low) * u, rows (vx, yaw)
        self._cmd_low = torch.tensor([float(r[0]) for r in ranges.values()], device=dev).unsqueeze(1)
        self._cmd_span = torch.tensor([float(r[1]) - float(r[0]) for r in ranges.values()], device=dev).unsqueeze(1)

    def _bind_signal_views(self, model: mujoco.MjModel) -> None:
        """Views of the bound state that the per-step signals read, and their scratch buffers.

        Slices of bound fields are live views, so they are taken once here instead of every step
        (each slice, ``.float()`` or ``cat`` is an eager op: the step's overhead is their count).
        """
        n, dev, q, v = self.num_envs, self.device, self.qpos, self.qvel
        self._torso_z, self._torso_z_col, self._joint_pos = q[:, 2], q[:, 2:3], q[:, 7:]
        healthy = [float(h) for h in self.cfg.healthy_z]
        if len(healthy) != 2 or not healthy[0] < healthy[1]:
            raise ValueError(f"task.healthy_z must be [low, high] torso heights in m with low < high, got "
                             f"{list(self.cfg.healthy_z)}.")
        self._healthy_z = (healthy[0], healthy[1])
        self._qpos0_root, self._qpos0_joints = self.qpos0[:7], self.qpos0[7:]
        self._ang_vel, self._joint_vel = v[:, 3:6], v[:, 6:]
        self._cmd_vx, self._cmd_yaw = self.command[:, 0], self.command[:, 1]
        self._push_x = self.push[:, 0]
        self._alive = torch.ones(n, device=dev)
        # Body-frame vectors in one batched rotation: row 0 world linear velocity, row 1 gravity.
        self._quat = q[:, None, 3:7]
        self._conj = torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=q.dtype, device=dev)
        self._quat_conj = torch.zeros(n, 1, 4, device=dev)
        self._vectors = torch.zeros(n, 2, 3, device=dev)
        self._vectors[:, 1, 2] = -1.0
        self._world_lin_vel, self._world_lin_vel_in = v[:, :3], self._vectors[:, 0]
        self._conj_w, self._conj_xyz = self._quat_conj[..., :1], self._quat_conj[..., 1:]
        # The signals are written into these buffers (rotated vectors, float32 angular velocity), so the
        # components the reward and the episode statistics read are views taken once, not sliced per step.
        self._body_vectors = torch.zeros(n, 2, 3, device=dev)
        self._ang_vel32 = torch.zeros(n, 3, device=dev)
        self._lin_vel_body, self._gravity_body = self._body_vectors.unbind(1)
        self._vx, self._vy, self._vz = self._lin_vel_body.unbind(1)
        self._wz, self._gz = self._ang_vel32[:, 2], self._gravity_body[:, 2]
        self._track_err = torch.zeros(2, n, device=dev)  # squared tracking errors: linear, yaw
        self._lin_err, self._yaw_err = self._track_err.unbind(0)
        self._state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        if self.cfg.gym_obs:
            cinert, cvel, qfrc_act, cfrc_ext = (self.sim.bind(f) for f in ("cinert", "cvel", "qfrc_actuator",
                                                                               "cfrc_ext"))
            self._gym_parts = [q[:, 2:], v, cinert[:, 1:].reshape(n, -1), cvel[:, 1:].reshape(n, -1),
                               qfrc_act[:, 6:], cfrc_ext[:, 1:].reshape(n, -1)]

    # --- lifecycle -------------------------------------------------------------------
    def reset(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Standing pose plus small noise; a fresh velocity command."""
        ids = ids.long()  # index_fill_/index_copy_ take int64 ids (a no-op for the env's own)
        k, noise = ids.numel(), self.cfg.init_noise
        joint_noise = uniform(-noise, noise, (k, self._qpos0_joints.numel()), gen, self.device)
        qpos = torch.cat([self._qpos0_root.expand(k, -1), self._qpos0_joints + joint_noise], dim=1)
        qvel = uniform(-noise, noise, (k, self.qvel.shape[1]), gen, self.device)
        self.sim.reset(ids, qpos, qvel)
        self.steps.index_fill_(0, ids, 0)
        self._action_pair.index_fill_(1, ids, 0.0)
        self._fwd_sum.index_fill_(0, ids, 0.0)
        self.push.index_fill_(0, ids, float("nan"))
        self._resample(ids, gen)
        self._apply_scenarios(ids, gen)
        self._state = None  # the body-frame signals of the new state, computed when first read

    def _apply_scenarios(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Worlds drawn from ``cfg.scenarios`` get the drawn command, friction and mass scales."""
        chosen, draws = self.scenario_draws(ids, gen)
        if not chosen.numel():
            return
        self.apply_scenario(chosen, draws, gen)

    def apply_scenario(self, ids: torch.Tensor, values: dict[str, torch.Tensor],
                       gen: torch.Generator | None = None) -> None:
        """Set scenario parameters ``{name: (k,)}`` of worlds ``ids`` (NaN entries keep the current value).

        ``push_vel`` and ``push_dir`` fix the world's pushes (a missing direction defaults to +x;
        a missing strength to ``cfg.push_vel``); they apply even with ``randomize`` off.
        """
        def pick(name: str, current: torch.Tensor) -> torch.Tensor:
            v = values.get(name)
            return current if v is None else torch.where(torch.isnan(v), current, v.to(current.dtype))

        self.command[ids, 0] = pick("cmd_vx", self.command[ids, 0])
        self.command[ids, 1] = pick("cmd_yaw", self.command[ids, 1])
        strength, direction = values.get("push_vel"), values.get("push_dir")
        if strength is not None or direction is not None:
            k = ids.numel()
            strength = torch.full((k,), float("nan"), device=self.device) if strength is None else strength
            direction = torch.full((k,), float("nan"), device=self.device) if direction is None else direction
            set_ = ~(torch.isnan(strength) & torch.isnan(direction))
            mag = torch.nan_to_num(strength.float(), nan=self.cfg.push_vel)
            ang = torch.nan_to_num(direction.float(), nan=0.0)
            kick = torch.stack([mag * torch.cos(ang), mag * torch.sin(ang)], dim=1)
            self.push[ids[set_]] = kick[set_]
        if "friction" in values or "mass" in values:
            self.friction_scale[ids] = pick("friction", self.friction_scale[ids])
            self.mass_scale[ids] = pick("mass", self.mass_scale[ids])
            friction = self._base_friction.expand(ids.numel(), -1, -1).clone()
            friction[..., 0] *= self.friction_scale[ids, None].to(friction.dtype)
            self.sim.set_model_field("geom_friction", ids, friction)
            mass = self._base_mass * self.mass_scale[ids, None].to(self._base_mass.dtype)
            self.sim.set_model_field("body_mass", ids, mass)

    def randomize(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Friction, link masses, motor strength and (if configured) contact stiffness per world."""
        k, c = ids.numel(), self.cfg
        self.friction_scale[ids] = sample_range(c.friction_range, (k,), gen, self.device)
        self.mass_scale[ids] = sample_range(c.mass_range, (k,), gen, self.device)
        self.strength[ids] = sample_range(c.strength_range, (k, self.action_dim), gen, self.device)
        self._privileged[ids, 2] = self.strength[ids].mean(1)
        self._gain[ids] = self.ctrl_high * self.strength[ids]
        friction = self._base_friction.expand(k, -1, -1).clone()
        friction[..., 0] *= self.friction_scale[ids, None].to(friction.dtype)
        self.sim.set_model_field("geom_friction", ids, friction)
        per_body = sample_range(c.mass_range, (k, self._base_mass.shape[0]), gen, self.device)
        self.sim.set_model_field("body_mass", ids, self._base_mass * per_body.to(self._base_mass.dtype))
        if c.contact_timeconst_range:
            solref = self._base_solref.expand(k, -1, -1).clone()
            solref[..., 0] = sample_range(c.contact_timeconst_range, (k, 1), gen, self.device).to(solref.dtype)
            self.sim.set_model_field("geom_solref", ids, solref)

    def apply_action(self, action: torch.Tensor) -> None:
        """Motor controls = action * ctrl limit * per-world strength."""
        self.action, self.prev_action = self.prev_action, self.action
        self.action.copy_(action)
        torch.mul(action, self._gain, out=self.ctrl)

    def update(self, gen: torch.Generator) -> None:
        """Advance clocks; resample due commands and apply due pushes, drawing from ``gen``."""
        self.steps += 1
        self._until_due -= 1
        if self._until_due <= 0:  # some world may be due: check them all, once per event period at most
            phase = self.steps % self._event_periods  # (E, N): one check for every clocked event
            due = phase == 0
            if due[0].any():
                self._resample(due[0].nonzero().squeeze(1), gen)
            if self._push_every:
                self._push(due[1], gen)
            self._until_due = int((self._event_periods - phase).min())
        self._state = self._base_state()
        self._fwd_sum += self._vx

    def _push(self, due: torch.Tensor, gen: torch.Generator) -> None:
        """Velocity kicks for the ``due`` ``(N,)`` worlds: random, or the world's scenario push."""
        if not self.cfg.randomize:
            due = due & (self._push_x == self._push_x)  # only scenario pushes (not NaN) apply without randomization
        if due.any():
            pushed = due.nonzero().squeeze(1)
            kick = uniform(-self.cfg.push_vel, self.cfg.push_vel, (pushed.numel(), 2), gen, self.device)
            fixed = self.push[pushed]
            kick = torch.where(torch.isnan(fixed), kick, fixed)
            self.qvel[pushed, :2] += kick.to(self.qvel.dtype)

    def _signals(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``_base_state()`` of the current state (cached until the next physics step or reset)."""
        if self._state is None:
            self._state = self._base_state()
        return self._state

    def _resample(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Commands of worlds ``ids``: ``(vx, yaw)`` uniform in their ranges, or 0 (stand) w.p. ``standing_prob``."""
        u = torch.rand(3, ids.numel(), generator=gen, device=self.device)  # rows: vx, yaw, stand draw
        command = torch.addcmul(self._cmd_low, self._cmd_span, u[:2])
        if self.cfg.standing_prob > 0:
            command.mul_(u[2] >= self.cfg.standing_prob)
        self.command.index_copy_(0, ids, command.T)

    # --- signals ---------------------------------------------------------------------
    def _base_state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Body-frame linear velocity, angular velocity and gravity, each ``(N, 3)``.

        Computed once after physics (``update``), and after a reset when first read (``_signals``).
        Both vectors go through one ``quat_rotate_wxyz`` by the conjugate base orientation
        (the same arithmetic as ``quat_rotate_inverse_wxyz`` of each, in float32). The returned
        tensors are the task's signal buffers, overwritten by the next call.
        """
        torch.mul(self._quat, self._conj, out=self._quat_conj)
        self._world_lin_vel_in.copy_(self._world_lin_vel)
        quat_rotate_parts_wxyz(self._conj_w, self._conj_xyz, self._vectors, out=self._body_vectors)
        self._ang_vel32.copy_(self._ang_vel)
        return self._lin_vel_body, self._ang_vel32, self._gravity_body

    def observe(self) -> dict[str, torch.Tensor]:
        """Proprioception + command; the critic also sees friction, mass and strength."""
        if self.cfg.gym_obs:
            policy = self._gym_observation()
        else:
            lin_vel, ang_vel, gravity = self._signals()
            policy = torch.cat(  # float64 and float32 pieces, each cast to float32 once
                [
                    self._torso_z_col,
                    gravity,
                    lin_vel,
                    ang_vel * 0.25,
                    self._joint_pos - self._qpos0_joints,
                    self._joint_vel.float() * 0.1,
                    self.action,
                    self.command,
                ],
                dim=1,
            ).float()
        return {"policy": policy, "critic": torch.cat([policy, self._privileged], dim=1)}

    def _gym_observation(self) -> torch.Tensor:
        """Gymnasium Humanoid-v5's 348-d observation (world body excluded)."""
        return torch.cat(self._gym_parts, dim=1).float()

    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named reward terms (see module docstring)."""
        self._signals()  # fills the views read below (_vx, _vy, _vz, _wz, _gz)
        torch.sub(self._vx, self._cmd_vx, out=self._lin_err).square_().addcmul_(self._vy, self._vy)
        torch.sub(self._wz, self._cmd_yaw, out=self._yaw_err).square_()
        track_lin_vel, track_yaw = torch.exp(self._track_err / -self.cfg.tracking_sigma).unbind(0)
        ctrl, action_rate = (-torch.stack([action, self.action - self.prev_action]).square().sum(2)).unbind(0)
        return {
            "track_lin_vel": track_lin_vel,
            "track_yaw": track_yaw,
            "alive": self._alive,
            "upright": -1.0 - self._gz,  # -(1 + g_z)
            "ctrl": ctrl,
            "action_rate": action_rate,
            "vertical_vel": -self._vz.square(),
        }

    def terminated(self) -> torch.Tensor:
        """Fall: torso height outside the healthy range."""
        z = self._torso_z
        return (z < self._healthy_z[0]) | (z > self._healthy_z[1])

    def success(self) -> torch.Tensor:
        """Still standing and tracking forward speed within 0.3 m/s."""
        self._signals()
        return ~self.terminated() & ((self._vx - self._cmd_vx).abs() < 0.3)

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Mean forward speed (body frame, m/s) over the episode."""
        return {"forward_vel": self._fwd_sum / self.steps.clamp(min=1)}


TASK = HumanoidTask
