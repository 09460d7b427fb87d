"""Typed config of the driving task (registered with Hydra as ``task/driving_schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robotrl.tasks.base import TaskConfig


def _default_scales() -> dict[str, float]:
    return {"route_gain": 100.0, "infraction": 10.0}


@dataclass
class DrivingConfig(TaskConfig):
    """Driving task settings (the reward is described in ``tasks/driving/task.py``).

    Attributes:
        timestep: physics step, s (control period = ``timestep * frame_skip``).
        solver_iterations: Newton solver iterations.
        num_tracks: tracks in the set drawn from (``split`` picks train or held-out seeds).
        scenario_tracks: tracks added for mined scenarios when the regions of ``scenarios`` ask for
            road half-widths outside ``half_width``: their half-widths span those regions, and only
            the resets that draw such a region reach them, so the other resets keep the
            ``num_tracks`` tracks of ``half_width`` (``scenario_params.scenario_tracks``). 0: none
            (a mined width then takes the nearest track of the ``num_tracks``).
        track_radius: range of spline control-point radii, m (sets the lap length).
        half_width: range of road half-widths, m.
        control_points: range of spline control points per track (more: twistier).
        min_turn_radius: smallest centreline turn radius a track may have, m.
        num_obstacles: static obstacles (cylinders) on the road, per world.
        obstacle_radius: range of obstacle radii, m.
        num_traffic: scripted vehicles driving along the road ahead of the car, per world.
        traffic_speed: range of their speeds, m/s.
        traffic_yields: traffic vehicles brake for the car when it is ahead of them in their lane
            (``scenario.yield_speed``: they stop about 0.15 m behind it) instead of running into it.
            Off by default: the published driving figures were measured without it.
        scenario_prob: probability that an episode has its obstacles and traffic on the road
            (otherwise they are parked far away, and the road is clear).
        num_rays: horizontal range-sensor rays, spread over ``ray_fov_deg`` ahead.
        ray_fov_deg: angular spread of the rays, degrees.
        ray_range: range of the rays, m (a miss reads as this range).
        route_samples: route points ahead in the observation.
        route_spacing: arc length between them, m.
        lane_penalty: lane-keeping factor at the road edge (1 at the centreline, linear).
        comfort_lat_acc: lateral acceleration above which the comfort factor drops, m/s^2.
        comfort_penalty: comfort factor at twice ``comfort_lat_acc`` and beyond.
        ttc_min: time to collision below which the TTC factor applies, s.
        ttc_penalty: the TTC factor.
        min_speed: speed below which the minimum-speed factor ramps down, m/s.
        min_speed_penalty: the minimum-speed factor at standstill.
        wrong_way_angle: heading error beyond which driving forward is wrong-way, rad.
        wrong_way_distance: driving this far back behind the best progress is wrong-way, m.
        start_lateral_noise: half-width of the uniform initial lateral offset, m.
        start_heading_noise: half-width of the uniform initial heading error, rad.
        friction_range: tyre friction multiplier range (randomization).
        mass_range: chassis mass multiplier range (randomization).
        motor_range: motor strength multiplier range (randomization).
        curb_segments: visual-only kerb boxes per lane boundary, placed on each world's track
            at reset so cameras and eval videos show the road (0: none, slightly faster resets).
        privileged_critic: give PPO's critic a ``critic`` observation: the policy's plus the lap and
            episode fractions, the randomized dynamics and the exact traffic and obstacle state
            (``observation.critic_extras``). The policy never sees them. Off by default: in a
            600-s run against SB3 (README, session 52) it did not raise the plateau.
        camera: add an ``image`` observation rendered from ``camera_name``.
        camera_name: camera on the car: ``chase`` or ``hood``.
        image_size: ``[height, width]`` of the image observation.

    """

    name: str = "driving"
    frame_skip: int = 5
    episode_length_s: float = 40.0
    reward_scales: dict[str, float] = field(default_factory=_default_scales)
    timestep: float = 0.01
    solver_iterations: int = 4
    num_tracks: int = 64
    scenario_tracks: int = 64
    track_radius: list[float] = field(default_factory=lambda: [5.0, 9.0])
    half_width: list[float] = field(default_factory=lambda: [0.8, 1.0])
    control_points: list[int] = field(default_factory=lambda: [8, 12])
    min_turn_radius: float = 1.5
    num_obstacles: int = 3
    obstacle_radius: list[float] = field(default_factory=lambda: [0.12, 0.2])
    num_traffic: int = 2
    traffic_speed: list[float] = field(default_factory=lambda: [0.6, 1.2])
    traffic_yields: bool = False
    scenario_prob: float = 0.8
    num_rays: int = 15
    ray_fov_deg: float = 180.0
    ray_range: float = 6.0
    route_samples: int = 10
    route_spacing: float = 0.8
    lane_penalty: float = 0.5
    comfort_lat_acc: float = 6.0
    comfort_penalty: float = 0.5
    ttc_min: float = 1.0
    ttc_penalty: float = 0.5
    min_speed: float = 1.0
    min_speed_penalty: float = 0.5
    wrong_way_angle: float = 2.0
    wrong_way_distance: float = 2.0
    start_lateral_noise: float = 0.3
    start_heading_noise: float = 0.3
    friction_range: list[float] = field(default_factory=lambda: [0.8, 1.2])
    mass_range: list[float] = field(default_factory=lambda: [0.85, 1.15])
    motor_range: list[float] = field(default_factory=lambda: [0.85, 1.15])
    curb_segments: int = 40
    privileged_critic: bool = False
    camera: bool = False
    camera_name: str = "chase"
    image_size: list[int] = field(default_factory=lambda: [64, 64])


CONFIG = DrivingConfig
