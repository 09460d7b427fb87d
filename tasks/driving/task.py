"""Driving: an Ackermann RC car follows a closed procedural track, among obstacles and traffic.

Action ``(N, 2)`` in ``[-1, 1]``: steering (scaled to ``MAX_STEER`` of a centre wheel, split
into Ackermann wheel angles) and throttle (DC-motor input, negative brakes and reverses).

Observation ``policy`` (see ``obs_layout``): forward and lateral speed, yaw rate, lateral
error (in half-widths) and heading error to the route, the road half-width, route points
ahead in the car frame, range readings of ``num_rays`` horizontal rays (MuJoCo ray casting
against obstacles and traffic, normalized by ``ray_range``), steering angle and last action.
With ``camera=True`` an ``image`` ``(N, H, W, 3)`` uint8 is added.

Reward (CaRL): ``route_gain = (new best progress / lap length) * lane * comfort * ttc * speed``,
where the soft factors in ``[0, 1]`` are computed by ``rewards.carl_factors``; a lap is worth
``reward_scales.route_gain``. Hard infractions end the episode and give ``infraction = -1``:
``collision`` (with an obstacle or a traffic vehicle), ``off_road`` (the car's centre leaves
the road), ``wrong_way`` (driving against the route, or falling ``wrong_way_distance`` behind the
best progress) and ``rollover``. A completed lap also ends the episode, as a success.

Collisions are detected geometrically: the car is a capsule of radius ``COLLISION_RADIUS``,
obstacles are the cylinders they are drawn as, traffic vehicles are the capsules they are
drawn as. Obstacle and traffic geoms have no contacts in the physics. Traffic vehicles are
scripted (mocap bodies) and do not avoid obstacles; they drive through the car unless
``traffic_yields`` is set, when they brake for it (``scenario.yield_speed``).

Modules: ``scene`` builds the model, ``scenario`` places obstacles, traffic and kerbs and
checks collisions, ``observation`` casts the rays and samples the route ahead, ``track`` and
``route`` generate and query the tracks, ``rewards`` holds the CaRL factors; this file holds
the task class.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from robotrl.tasks.base import Task
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving import observation as O
from robotrl.tasks.driving import scenario
from robotrl.tasks.driving import scenario_params as sp
from robotrl.tasks.driving.bag_scenario import scenario_from_episode
from robotrl.tasks.driving.car import ackermann_angles
from robotrl.tasks.driving.config import DrivingConfig
from robotrl.tasks.driving.rewards import carl_factors, time_to_collision
from robotrl.tasks.driving.route import TrackBank, progress_delta, wrap_angle
from robotrl.tasks.driving.scene import build_scene, obstacle_radii
from robotrl.tasks.driving.track import TrackParams, track_set

from robotrl.rotations import quat_rotate_inverse_wxyz, sample_range, uniform, yaw_from_quat

INFRACTIONS = ("collision", "off_road", "wrong_way", "rollover")
# what a collision was with: an obstacle, a traffic vehicle, a traffic vehicle that ran into the car from behind
COLLISION_KINDS = ("collision_obstacle", "collision_traffic", "collision_rear_ended")


class DrivingTask(Task):
    """RC car on procedural tracks with CaRL rewards (see module docstring)."""

    name = "driving"
    config_class = DrivingConfig
    eval_camera = "chase"
    cfg: DrivingConfig
    scenario_params = sp.SCENARIO_PARAMS
    scenario_from_episode = staticmethod(scenario_from_episode)  # the route's sharpest turn and width

    # --- model -----------------------------------------------------------------------
    def build_model(self) -> mujoco.MjModel:
        """Floor, car, ``num_obstacles`` cylinder and ``num_traffic`` capsule mocap bodies; Newton solver."""
        return build_scene(self.cfg).compile()

    def obstacle_radii(self) -> list[float]:
        """Radius of each obstacle, m: evenly spread over ``obstacle_radius``."""
        return obstacle_radii(self.cfg)

    @property
    def action_dim(self) -> int:
        """Steering and throttle."""
        return 2

    @property
    def joint_names(self) -> list[str]:
        """The two commands, in action order."""
        return ["steering", "throttle"]

    def obs_layout(self) -> list[tuple[str, int]]:
        """Policy observation slices."""
        c = self.cfg
        return [
            ("speed", 2),
            ("yaw_rate", 1),
            ("lateral_error", 1),
            ("heading_error", 2),
            ("half_width", 1),
            ("route_ahead", 2 * c.route_samples),
            ("rays", c.num_rays),
            ("steer_angle", 1),
            ("last_action", 2),
        ]

    def action_spec(self) -> dict[str, object]:
        """``steer_rad = MAX_STEER * a[0]`` (centre wheel), ``throttle = a[1]`` (motor input in [-1, 1])."""
        return {
            "kind": "ackermann",
            "scale": [C.MAX_STEER, 1.0],
            "offset": [0.0, 0.0],
            "default_pose": [0.0, 0.0],
        }

    # --- lifecycle ------------------------------------------------------------------------
    def setup(self, sim) -> None:  # noqa: ANN001
        """Generate the track set, bind sim views and allocate ``(N, ...)`` buffers."""
        super().setup(sim)
        c, n, dev, model = self.cfg, self.num_envs, self.device, sim.model
        params = TrackParams(
            radius=tuple(c.track_radius),
            half_width=tuple(c.half_width),
            control_points=tuple(c.control_points),
            min_turn_radius=c.min_turn_radius,
        )
        tracks = track_set(c.split, c.num_tracks, params)
        self.num_reset_tracks = len(tracks)  # the tracks a plain reset draws from; mined widths may add more
        self.bank = TrackBank(tracks + sp.scenario_tracks(c, params), dev)
        self.qpos, self.qvel, self.ctrl = sim.bind("qpos"), sim.bind("qvel"), sim.bind("ctrl")
        self.qpos0 = torch.as_tensor(model.qpos0, dtype=self.qpos.dtype, device=dev)
        steer_adr = [model.jnt_qposadr[model.joint(j).id] for j in C.STEER_JOINTS]
        self._steer_adr = torch.as_tensor(steer_adr, device=dev)
        self.dt = c.timestep * c.frame_skip
        mocap = lambda name: int(model.body_mocapid[model.body(name).id])  # noqa: E731
        self._obs_mocap = torch.as_tensor(
            [mocap(f"obstacle_{i}") for i in range(c.num_obstacles)], dtype=torch.long, device=dev
        )
        self._traffic_mocap = torch.as_tensor(
            [mocap(f"traffic_{i}") for i in range(c.num_traffic)], dtype=torch.long, device=dev
        )
        if model.nmocap:
            self.mocap_pos, self.mocap_quat = sim.bind("mocap_pos"), sim.bind("mocap_quat")
        self.obstacle_r = torch.tensor(self.obstacle_radii(), device=dev)
        self.ray_angles = O.ray_angles(c.ray_fov_deg, c.num_rays, dev)
        self._front_rays = O.front_rays(self.ray_angles)
        wheels = [
            model.geom(g).id
            for g in range(model.ngeom)
            if model.geom_bodyid[g] and model.body(model.geom_bodyid[g]).name.startswith(("front_", "rear_"))
        ]
        self._wheel_geoms = torch.as_tensor(wheels, dtype=torch.long, device=dev)
        self._base_friction = torch.as_tensor(model.geom_friction.copy(), device=dev)
        self._base_mass = torch.as_tensor(model.body_mass.copy(), device=dev)
        self._base_gain = torch.as_tensor(model.actuator_gainprm.copy(), device=dev)
        self._base_bias = torch.as_tensor(model.actuator_biasprm.copy(), device=dev)
        self._chassis = model.body(C.CHASSIS_BODY).id
        self._floor_geoms = torch.as_tensor([model.geom("floor").id], dtype=torch.long, device=dev)
        curbs = [model.geom(f"curb_{side}_0").id for side in ("left", "right")] if c.curb_segments else []
        self._curb_start = curbs[0] if curbs else 0
        self._base_geom = {
            f: torch.as_tensor(getattr(model, f).copy(), device=dev) for f in ("geom_pos", "geom_quat", "geom_size")
        }
        zeros = lambda *shape: torch.zeros(n, *shape, device=dev)  # noqa: E731
        self.track_id = torch.zeros(n, dtype=torch.long, device=dev)
        self.idx = torch.zeros(n, dtype=torch.long, device=dev)
        self.s, self.lateral, self.heading_err, self.track_heading = zeros(), zeros(), zeros(), zeros()
        self.progress, self.best_progress, self.gain = zeros(), zeros(), zeros()
        self.v_fwd, self.v_lat, self.yaw_rate, self.speed = zeros(), zeros(), zeros(), zeros()
        self.time, self.lap_time, self.distance, self.ttc = zeros(), zeros(), zeros(), zeros()
        self.lap_done = torch.zeros(n, dtype=torch.bool, device=dev)
        self.flags = torch.zeros(n, len(INFRACTIONS), dtype=torch.bool, device=dev)
        self.hit_kinds = torch.zeros(n, len(COLLISION_KINDS), dtype=torch.bool, device=dev)
        self.rays = torch.full((n, c.num_rays), c.ray_range, device=dev)
        self.action, self.factor_sum, self.steps = zeros(2), zeros(4), zeros()
        self.active = torch.zeros(n, dtype=torch.bool, device=dev)
        self.obstacle_xy = zeros(c.num_obstacles, 2)
        self.traffic_s, self.traffic_off, self.traffic_v = (
            zeros(c.num_traffic),
            zeros(c.num_traffic),
            zeros(c.num_traffic),
        )
        self.traffic_xy, self.traffic_yaw = zeros(c.num_traffic, 2), zeros(c.num_traffic)
        self.factors: dict[str, torch.Tensor] = {}
        self.ended_infraction, self.ended_completion = zeros(), zeros()
        self.start_s = zeros()
        self.dynamics = torch.ones(n, 3, device=dev)  # tyre friction, chassis mass, motor strength multipliers

    def reset(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """A random track of the split, a random start on it, fresh obstacles and traffic; then mined scenarios."""
        self.ended_infraction[ids] = self.flags[ids].any(1).float()
        self.ended_completion[ids] = self.route_completion()[ids]
        tid = torch.randint(0, self.num_reset_tracks, (ids.numel(),), generator=gen, device=self.device)
        self._start(ids, tid, gen)
        chosen, draws = self.scenario_draws(ids, gen)
        if chosen.numel():
            self.apply_scenario(chosen, draws, gen)

    def apply_scenario(self, ids: torch.Tensor, values: dict[str, torch.Tensor], gen: torch.Generator) -> None:
        """Set scenario parameters ``{name: (k,)}`` of worlds ``ids`` (NaN keeps the world's own draw).

        See ``tasks/driving/scenario_params.py``: a track by curvature and width (the start is
        redrawn on it), the number of obstacles on the road, the traffic speed, the road friction.
        """
        sp.apply(self, ids, values, gen)

    def _start(self, ids: torch.Tensor, tid: torch.Tensor, gen: torch.Generator) -> None:
        """Put worlds ``ids`` at a random start on tracks ``tid`` ``(k,)`` with fresh episode state."""
        c, k, dev, bank = self.cfg, ids.numel(), self.device, self.bank
        start = torch.randint(0, bank.num_points, (k,), generator=gen, device=dev)
        hw = bank.half_width[tid]
        off = uniform(-1.0, 1.0, (k,), gen, dev) * torch.minimum(torch.full_like(hw, c.start_lateral_noise), 0.5 * hw)
        centre, normal, heading0 = bank.at_index(tid, start)
        pos = centre + off[:, None] * normal
        yaw = heading0 + uniform(-c.start_heading_noise, c.start_heading_noise, (k,), gen, dev)
        qpos = self.qpos0.expand(k, -1).clone()
        qpos[:, :2] = pos.to(qpos.dtype)
        qpos[:, 3] = torch.cos(0.5 * yaw).to(qpos.dtype)
        qpos[:, 6] = torch.sin(0.5 * yaw).to(qpos.dtype)
        self.sim.reset(ids, qpos, torch.zeros(k, self.qvel.shape[1], dtype=self.qvel.dtype, device=dev))
        self.track_id[ids] = tid
        idx, s, lateral, heading = bank.project(tid, pos)
        self.idx[ids], self.s[ids], self.lateral[ids], self.track_heading[ids] = idx, s, lateral, heading
        self.start_s[ids] = s
        self.heading_err[ids] = wrap_angle(yaw - heading)
        for buf in (
            self.progress,
            self.best_progress,
            self.gain,
            self.v_fwd,
            self.v_lat,
            self.yaw_rate,
            self.speed,
            self.time,
            self.lap_time,
            self.distance,
            self.action,
            self.factor_sum,
            self.steps,
        ):
            buf[ids] = 0.0
        self.ttc[ids] = float("inf")
        self.lap_done[ids] = False
        self.flags[ids] = False
        self.hit_kinds[ids] = False
        self.active[ids] = torch.rand(k, generator=gen, device=dev) < c.scenario_prob
        self._place_scenario(ids, tid, s, gen)
        self._place_curbs(ids, tid)
        self._cast_rays(ids)

    def _place_scenario(self, ids: torch.Tensor, tid: torch.Tensor, s0: torch.Tensor, gen: torch.Generator) -> None:
        """Obstacles spread along the lap ahead of the start; traffic ahead of the car."""
        c, bank = self.cfg, self.bank
        if c.num_obstacles:
            self.obstacle_xy[ids] = scenario.place_obstacles(bank, tid, s0, c.num_obstacles, gen)
        if c.num_traffic:
            self.traffic_s[ids], self.traffic_off[ids], self.traffic_v[ids] = scenario.place_traffic(
                bank, tid, s0, c.num_traffic, c.traffic_speed, gen
            )
        self._write_mocap(ids)

    def _write_mocap(self, ids: torch.Tensor | None, obstacles: bool = True) -> None:
        """Write obstacle and traffic poses of worlds ``ids`` (all if None) into the mocap bodies.

        Inactive worlds park them under the floor. Obstacles are static, so the per-step
        call (``ids=None``) only moves the traffic.
        """
        rows = slice(None) if ids is None else ids
        if self.cfg.num_traffic:
            self.traffic_xy[rows], self.traffic_yaw[rows] = scenario.along_route(
                self.bank, self.track_id[rows][:, None], self.traffic_s[rows], self.traffic_off[rows]
            )
        dtype = self.mocap_pos.dtype if self.sim.model.nmocap else torch.float64
        groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]] = [
            (self._traffic_mocap, self.traffic_xy, self.traffic_yaw)
        ]
        if obstacles:
            groups.append((self._obs_mocap, self.obstacle_xy, None))
        for group, xy, yaw in groups:
            if not len(group):
                continue
            pos, quat = scenario.mocap_pose(xy[rows], None if yaw is None else yaw[rows], self.active[rows], dtype)
            self._set_mocap(ids, group, self.mocap_pos, pos)
            if quat is not None:
                self._set_mocap(ids, group, self.mocap_quat, quat)

    @staticmethod
    def _set_mocap(ids: torch.Tensor | None, group: torch.Tensor, field: torch.Tensor, value: torch.Tensor) -> None:
        """``field[ids, group] = value`` for mocap bodies ``group`` of worlds ``ids`` (all if None)."""
        if ids is None:
            field[:, group] = value
        else:
            field[ids[:, None], group[None, :]] = value

    def _place_curbs(self, ids: torch.Tensor, tid: torch.Tensor) -> None:
        """Per-world kerb boxes along both lane boundaries of the worlds' tracks (for cameras and videos)."""
        if not self.cfg.curb_segments:
            return
        fields = scenario.curb_geoms(self.bank, tid, self.cfg.curb_segments, self._base_geom, self._curb_start)
        for name, value in fields.items():
            self.sim.set_model_field(name, ids, value)

    def randomize(self, ids: torch.Tensor, gen: torch.Generator) -> None:
        """Tyre friction, chassis mass and motor strength per world."""
        c, k, dev = self.cfg, ids.numel(), self.device
        friction = self._base_friction.expand(k, -1, -1).clone()
        scale = sample_range(c.friction_range, (k, 1), gen, dev).double()
        friction[:, self._wheel_geoms, 0] *= scale
        self.sim.set_model_field("geom_friction", ids, friction)
        mass = self._base_mass.expand(k, -1).clone()
        mass_scale = sample_range(c.mass_range, (k,), gen, dev).double()
        mass[:, self._chassis] *= mass_scale
        self.sim.set_model_field("body_mass", ids, mass)
        motor = sample_range(c.motor_range, (k, 1), gen, dev).double()
        self.dynamics[ids] = torch.stack([scale[:, 0], mass_scale, motor[:, 0]], dim=1).float()
        gain, bias = self._base_gain.expand(k, -1, -1).clone(), self._base_bias.expand(k, -1, -1).clone()
        gain[:, 2:, 0] *= motor
        bias[:, 2:, 2] *= motor
        self.sim.set_model_field("actuator_gainprm", ids, gain)
        self.sim.set_model_field("actuator_biasprm", ids, bias)

    def apply_action(self, action: torch.Tensor) -> None:
        """Steering -> Ackermann wheel angles; throttle -> both rear motors."""
        self.action.copy_(action)
        left, right = ackermann_angles(action[:, 0] * C.MAX_STEER)
        self.ctrl[:, 0] = left.to(self.ctrl.dtype)
        self.ctrl[:, 1] = right.to(self.ctrl.dtype)
        self.ctrl[:, 2:4] = action[:, 1:2].to(self.ctrl.dtype)

    # --- per-step measurements ---------------------------------------------------------
    def update(self, gen: torch.Generator) -> None:
        """Route tracking, progress, traffic motion, rays and infraction checks for all worlds."""
        c, bank = self.cfg, self.bank
        self.ended_infraction.zero_()
        self.ended_completion.zero_()
        self.time += self.dt
        pos = self.qpos[:, :2].float()
        quat = self.qpos[:, 3:7].float()
        yaw = yaw_from_quat(quat)
        vel = quat_rotate_inverse_wxyz(quat, self.qvel[:, :3].float())
        self.v_fwd, self.v_lat, self.yaw_rate = vel[:, 0], vel[:, 1], self.qvel[:, 5].float()
        self.speed = vel[:, :2].norm(dim=1)
        self.distance += self.speed * self.dt
        idx, s, self.lateral, self.track_heading = bank.project(self.track_id, pos, self.idx)
        length = bank.length[self.track_id]
        self.progress += progress_delta(s, self.s, length)
        self.idx, self.s = idx, s
        self.heading_err = wrap_angle(yaw - self.track_heading)
        self.gain = (self.progress - self.best_progress).clamp(min=0.0)
        self.best_progress = torch.maximum(self.best_progress, self.progress)
        finished = ~self.lap_done & (self.best_progress >= length)
        self.lap_time = torch.where(finished, self.time, self.lap_time)
        self.lap_done |= finished
        v_traffic = self.traffic_v
        if c.num_traffic:
            if c.traffic_yields:
                v_traffic = scenario.yield_speed(v_traffic, self.traffic_s, self.traffic_off, s, self.lateral, length)
            self.traffic_s += v_traffic * self.dt
            self._write_mocap(None, obstacles=False)
        self._cast_rays(None)
        front = self.rays[:, self._front_rays[0] : self._front_rays[1]].amin(1)
        self.ttc = time_to_collision(front, self.v_fwd, 0.5 * C.CAR_LENGTH)
        up_z = 1.0 - 2.0 * (quat[:, 1].square() + quat[:, 2].square())
        wrong = ((self.heading_err.abs() > c.wrong_way_angle) & (self.v_fwd > 0.3)) | (
            self.progress < self.best_progress - c.wrong_way_distance
        )
        self.flags = torch.stack(
            [
                self._collides(pos, yaw, v_traffic),
                self.lateral.abs() > bank.half_width[self.track_id],
                wrong,
                up_z < 0.5,
            ],
            dim=1,
        )

    def _collides(self, pos: torch.Tensor, yaw: torch.Tensor, v_traffic: torch.Tensor) -> torch.Tensor:
        """``(N,)`` bool: the car's capsule touches an active obstacle or traffic vehicle.

        Also records what it touched in ``hit_kinds`` (``COLLISION_KINDS``); ``v_traffic``
        ``(N, T)`` is the traffic's speed in this step (a vehicle closing on the car from behind
        ran into it).
        """
        obstacles, traffic = scenario.car_contacts(
            pos, yaw, self.obstacle_xy, self.obstacle_r, self.traffic_xy, self.traffic_yaw
        )
        rear = traffic & scenario.rear_ends(pos, yaw, self.v_fwd, self.traffic_xy, self.traffic_yaw, v_traffic)
        kinds = torch.stack([obstacles.any(1), traffic.any(1), rear.any(1)], dim=1) & self.active[:, None]
        self.hit_kinds = kinds
        return kinds[:, :2].any(1)

    def _cast_rays(self, ids: torch.Tensor | None) -> None:
        """Horizontal rays from the car centre against obstacles and traffic; a miss reads ``ray_range``."""
        c = self.cfg
        if not c.num_rays:
            return
        if not self.sim.model.nmocap:
            self.rays.fill_(c.ray_range)
            return
        dist = O.cast_rays(self.sim, self.qpos, self.ray_angles, c.ray_range)
        if ids is None:
            self.rays = dist
        else:
            self.rays[ids] = dist[ids]

    # --- signals -------------------------------------------------------------------------
    def observe(self) -> dict[str, torch.Tensor]:
        """Ego state, route errors, route ahead (car frame), rays, steering, last action."""
        c, bank = self.cfg, self.bank
        hw = bank.half_width[self.track_id]
        local = O.route_ahead(bank, self.track_id, self.s, self.qpos, c.route_spacing, c.route_samples)
        horizon = c.route_spacing * c.route_samples
        steer = self.qpos[:, self._steer_adr].float().mean(1, keepdim=True) / C.MAX_STEER
        policy = torch.cat(
            [
                torch.stack(
                    [
                        self.v_fwd / C.TOP_SPEED,
                        self.v_lat,
                        0.5 * self.yaw_rate,
                        self.lateral / hw,
                        torch.sin(self.heading_err),
                        torch.cos(self.heading_err),
                        hw,
                    ],
                    dim=1,
                ),
                local.flatten(1) / horizon,
                self.rays / c.ray_range,
                steer,
                self.action,
            ],
            dim=1,
        )
        obs = {"policy": policy}
        if c.privileged_critic:
            obs["critic"] = torch.cat([policy, self._critic_extras()], dim=1)
        if c.camera:
            ids = torch.arange(self.num_envs)
            obs["image"] = self.sim.render_tensor(c.camera_name, ids, tuple(c.image_size))
        return obs

    def _critic_extras(self) -> torch.Tensor:
        """The critic's privileged inputs (``observation.critic_extras``)."""
        c, bank, tid = self.cfg, self.bank, self.track_id
        car = {
            "completion": self.route_completion(),
            "time_frac": self.time / c.episode_length_s,
            "dynamics": self.dynamics,
            "s": self.s,
            "lateral": self.lateral,
            "v_fwd": self.v_fwd,
            "yaw": yaw_from_quat(self.qpos[:, 3:7].float()),
            "pos": self.qpos[:, :2].float(),
            "half_width": bank.half_width[tid],
            "length": bank.length[tid],
        }
        others = {"traffic_s": self.traffic_s, "traffic_off": self.traffic_off, "traffic_v": self.traffic_v,
                  "obstacle_xy": self.obstacle_xy}
        scales = {"horizon": c.route_spacing * c.route_samples, "ray_range": c.ray_range}
        return O.critic_extras(car, others, self.active, scales)

    def reward_terms(self, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """``route_gain`` (CaRL: completion gain x soft factors); ``infraction`` (-1 when one ends it)."""
        c = self.cfg
        self.factors = carl_factors(
            self.lateral,
            self.bank.half_width[self.track_id],
            self.v_fwd * self.yaw_rate,
            self.ttc,
            self.v_fwd,
            lane_penalty=c.lane_penalty,
            comfort_lat_acc=c.comfort_lat_acc,
            comfort_penalty=c.comfort_penalty,
            ttc_min=c.ttc_min,
            ttc_penalty=c.ttc_penalty,
            min_speed=c.min_speed,
            min_speed_penalty=c.min_speed_penalty,
        )
        factor = torch.stack(list(self.factors.values()), dim=1)
        self.factor_sum += factor
        self.steps += 1
        gain = self.gain / self.bank.length[self.track_id]
        return {"route_gain": gain * factor.prod(1), "infraction": -self.flags.any(1).float()}

    def terminated(self) -> torch.Tensor:
        """A hard infraction, or a completed lap."""
        return self.flags.any(1) | self.lap_done

    def success(self) -> torch.Tensor:
        """The lap is complete."""
        return self.lap_done.clone()

    def route_completion(self) -> torch.Tensor:
        """``(N,)`` fraction of the lap covered, in ``[0, 1]``."""
        return (self.best_progress / self.bank.length[self.track_id]).clamp(0.0, 1.0)

    def checkpoints_reached(self) -> torch.Tensor:
        """``(N,)`` the track's route checkpoints passed since the start (all of them after a lap).

        Checkpoints sit every ``length / num_checkpoints`` metres from the track's point 0; those
        in ``(start, start + best progress]`` along the route count.
        """
        spacing = self.bank.length[self.track_id] / len(self.bank.tracks[0].checkpoints)
        covered = self.best_progress.clamp(0.0, None).minimum(self.bank.length[self.track_id])
        return torch.floor((self.start_s + covered) / spacing + 1e-4) - torch.floor(self.start_s / spacing + 1e-4)

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Route completion, infractions (and what a collision hit), distance (km), lap time, mean factors.

        ``lap_time_s`` is 0 if the lap was not completed.
        """
        metrics = {
            "route_completion": self.route_completion(),
            "checkpoints": self.checkpoints_reached(),
            "lap_completed": self.lap_done.float(),
            "lap_time_s": torch.where(self.lap_done, self.lap_time, torch.zeros_like(self.lap_time)),
            "distance_km": self.distance / 1000.0,
            "infractions": self.flags.any(1).float(),
            "mean_speed": self.distance / self.time.clamp(min=self.dt),
        }
        for i, name in enumerate(INFRACTIONS):
            metrics[name] = self.flags[:, i].float()
        for i, name in enumerate(COLLISION_KINDS):
            metrics[name] = self.hit_kinds[:, i].float()
        for i, name in enumerate(("lane", "comfort", "ttc", "speed")):
            metrics[f"factor_{name}"] = self.factor_sum[:, i] / self.steps.clamp(min=1)
        return metrics

    def trace(self) -> dict[str, torch.Tensor]:
        """Per-step pose, speed, track, progress, obstacles and traffic of every world.

        ``ended_*`` hold the outcome of an episode that ended (and was reset) during this
        step, since the env records the trace after its autoreset.
        """
        return {
            "xy": self.qpos[:, :2].float().clone(),
            "yaw": yaw_from_quat(self.qpos[:, 3:7].float()),
            "speed": self.speed.clone(),
            "track_id": self.track_id.float(),
            "time": self.time.clone(),
            "route_completion": self.route_completion(),
            "obstacles": self.obstacle_xy.clone(),
            "traffic": self.traffic_xy.clone(),
            "traffic_yaw": self.traffic_yaw.clone(),
            "active": self.active.float(),
            "infraction": self.flags.any(1).float(),
            "ended_infraction": self.ended_infraction.clone(),
            "ended_completion": self.ended_completion.clone(),
        }

    def eval_artifacts(self, trace: dict[str, np.ndarray], out_dir: str) -> list[str]:
        """Track plot PNG of the driven path and a top-down MP4, from world 0's trace."""
        from robotrl.tasks.driving.plots import plot_track, topdown_video

        radii = self.obstacle_radii()
        return [plot_track(self.bank, trace, radii, out_dir), topdown_video(self.bank, trace, radii, out_dir)]


TASK = DrivingTask
