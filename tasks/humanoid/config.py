"""Typed config of the humanoid task (registered with Hydra as ``task/humanoid_schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robotrl.tasks.base import TaskConfig
from robotrl.tasks.humanoid.constants import HEALTHY_Z


def _default_scales() -> dict[str, float]:
    return {
        "track_lin_vel": 2.0,
        "track_yaw": 0.5,
        "alive": 1.0,
        "upright": 1.0,
        "ctrl": 0.01,
        "action_rate": 0.01,
        "vertical_vel": 0.05,
    }


@dataclass
class HumanoidConfig(TaskConfig):
    """Humanoid task settings (see module docstring for the reward terms).

    Attributes:
        cmd_vx: forward-speed command range in m/s.
        cmd_yaw: yaw-rate command range in rad/s (symmetric about 0 when given as [-a, a]).
        standing_prob: probability that a resampled command is zero (stand still).
        command_resample_s: seconds between command resamples within an episode.
        tracking_sigma: width of the exponential tracking kernels.
        solver_iterations: Newton iterations (the model's PGS is replaced by Newton).
        friction_range: multiplier range for every geom's sliding friction.
        mass_range: multiplier range for every link mass.
        contact_timeconst_range: ``[low, high]`` seconds of every geom's contact time constant
            (``geom_solref[:, 0]``; MuJoCo's default 0.02, the soft contact; smaller is stiffer,
            at least twice the 3 ms timestep), drawn per world at reset. Empty (the default):
            the model's own, never written. Stiffer contacts stand in for engines with hard
            contacts (PyBullet) or a hard floor (``robotrl eval engine=pybullet``).
        strength_range: multiplier range for each motor's strength.
        push_interval_s: seconds between random pushes (0 disables).
        push_vel: max horizontal velocity kick of a push, m/s.
        init_noise: half-width of the uniform noise on initial joint positions and velocities.
        healthy_z: ``[low, high]`` torso heights in m; outside is a fall that ends the episode.
            Gymnasium's Humanoid-v5 uses ``[1.0, 2.0]`` (the benchmarks' gym-matched setting).
        gym_model: keep gymnasium's own solver options (PGS, RK4) instead of Newton +
            implicit-fast. For like-for-like benchmarks against gymnasium/EnvPool; CPU only
            (MuJoCo Warp has no PGS).
        gym_obs: use gymnasium Humanoid-v5's 348-d observation (positions, velocities,
            cinert, cvel, actuator forces, cfrc_ext) for the policy, same work as gymnasium.

    """

    name: str = "humanoid"
    frame_skip: int = 5
    episode_length_s: float = 15.0
    reward_scales: dict[str, float] = field(default_factory=_default_scales)
    cmd_vx: list[float] = field(default_factory=lambda: [0.0, 1.5])
    cmd_yaw: list[float] = field(default_factory=lambda: [-0.5, 0.5])
    standing_prob: float = 0.1
    command_resample_s: float = 5.0
    tracking_sigma: float = 0.25
    solver_iterations: int = 10
    friction_range: list[float] = field(default_factory=lambda: [0.6, 1.25])
    mass_range: list[float] = field(default_factory=lambda: [0.85, 1.15])
    contact_timeconst_range: list[float] = field(default_factory=list)
    strength_range: list[float] = field(default_factory=lambda: [0.85, 1.15])
    push_interval_s: float = 4.0
    push_vel: float = 0.5
    init_noise: float = 0.01
    healthy_z: list[float] = field(default_factory=lambda: list(HEALTHY_Z))
    gym_model: bool = False
    gym_obs: bool = False


CONFIG = HumanoidConfig
