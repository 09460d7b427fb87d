"""Typed config of the tool-use task (registered with Hydra as ``task/tool_use_schema``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from robotrl.tasks.base import TaskConfig


def _default_scales() -> dict[str, float]:
    """DexPBT-style weights (METHODS.md, SimToolReal); robotrl's shaping (grasp, held_lift, held_goal) is 0 here."""
    return {
        "fingertip_approach": 50.0,
        "grasp": 0.0,
        "held_lift": 0.0,
        "held_goal": 0.0,
        "lift": 20.0,
        "lift_bonus": 300.0,
        "keypoint_progress": 200.0,
        "goal_bonus": 1000.0,
        "joint_vel": 0.0001,
    }


@dataclass
class ToolUseConfig(TaskConfig):
    """Universal goal-pose tool manipulation (see ``tasks/tool_use/task.py`` for terms and stages).

    Attributes:
        arm: ``kuka_iiwa`` (KUKA iiwa URDF from ``pybullet_data``, the default) or ``floating``
            (6-DoF actuated wrist, the simpler variant).
        tool_seed: seed of the procedural tool pool: it defines which tools make up each split
            (a task definition, not a random stream; which tool a world gets at reset is drawn
            from the env's generator).
        tools_per_family: tool instances per family in the pool of the current ``split``
            (``train``, ``heldout`` = new instances of training families, ``heldout_family``).
        tool_size_scale: range of a size multiplier per pool tool (handle and head; densities kept, so
            mass goes with its cube). ``[1, 1]`` is the pool as generated; a stress test of
            bigger or smaller tools than training saw: ``task.tool_size_scale=[1.2,1.3]``.
        arm_action_scale: rad (or m for the floating wrist's slides) of arm-target change per
            control step at action 1 (arm targets are relative).
        hand_action_ema: smoothing of the absolute hand targets (1 = no smoothing).
        lift_height: m above the resting height that counts as lifted (one-off lift bonus).
        held_goal_sigma: length scale (m) of the ``held_goal`` term's ``exp(-d / sigma)`` of the max
            keypoint distance ``d`` to the goal.
        lift_hand_dist: mean fingertip distance (m) to the tool box under which a tool above
            ``lift_height`` counts as lifted (held, not knocked into the air).
        drop_height: m above rest below which a lifted tool counts as dropped (episode ends).
        success_steps: consecutive steps within tolerance that reach a goal.
        goal_pos_tol: position tolerance in m of the tool frame to its goal.
        goal_rot_tol: orientation tolerance in rad.
        goal_pos_tol_start / goal_rot_tol_start: the tolerances at goal scale 0 (see ``goal_scale_init``);
            they tighten linearly with the curriculum's goal scale to ``goal_pos_tol`` / ``goal_rot_tol``
            at scale 1 (the full task, and every held-out split).
        max_goals: goals per episode after which the episode ends.
        goal_region_low / goal_region_high: world box for random goal positions (m).
        goal_rot_range: max rotation angle (rad) of a random goal away from the spawn orientation.
        spawn_range: half-width of the uniform tool spawn square around ``SPAWN_CENTER`` (m).
        keypoint_min_half: minimum half-extent of the keypoint box, so thin tools still expose
            their orientation (m).
        curriculum: staged curriculum (reach -> lift -> goal) on ``split=train``; False, or a
            held-out split, starts in the goal stage.
        curriculum_thresholds: success rates (reach rate, lift rate) that advance the stage.
        curriculum_ema: smoothing of the per-episode rates the curriculum watches.
        curriculum_min_episodes: finished episodes a stage (and a goal scale) lasts at least.
        goal_scale_init: in the goal stage of the curriculum, goals start this share of the way from
            the lift goal to a random goal (position and rotation range; 1 = the full task at once).
        goal_scale_step: the goal scale's increase each time the goal rate passes the threshold.
        goal_scale_threshold: smoothed share of goal-stage episodes reaching a goal that widens the goals.
        lift_goal_height: m above spawn of the goal used in the reach and lift stages.
        reach_dist: distance (m) within which *every* fingertip must be of the tool box to count as reached.
        dr_dynamics: randomize tool mass, friction, actuator gains and joint damping.
        dynamics_range: multiplier range of the dynamics randomization.
        dr_kicks: random force and torque kicks on the tool.
        kick_prob: probability per control step of a new kick.
        kick_accel: force kick size per kg of tool (m/s^2); torque kicks use ``kick_accel * 0.1`` m.
        dr_object_pose: noise and delay on the tool pose the policy sees.
        object_pos_noise: std of the position noise (m).
        object_rot_noise: std of the orientation noise (rad).
        object_delay_max: per-world delay of the observed tool pose, 0..max control steps.
        obs_delay_max: per-world delay of the whole policy observation, 0..max control steps.
        timestep: physics step (s), at most 0.01; a control step is ``timestep * frame_skip``. The
            CPU recipe (``configs/tuning/tool_use_ppo.yaml``) uses 0.01 with ``frame_skip=2``: 50 Hz
            control at half the physics cost (MuJoCo Playground's LEAP-hand cube reorientation
            also steps its physics at 0.01 s).
        solver_iterations: Newton iterations.
        integrator: ``implicitfast`` (the CPU recipe) or ``euler`` (implicit joint damping only). On
            MuJoCo Warp's float32 kernels implicitfast blew up 0.3-0.5% of world-steps, euler none
            (``benchmarks/warp_divergence.py``); the GPU recipe uses euler.

    """

    name: str = "tool_use"
    frame_skip: int = 4
    episode_length_s: float = 12.0
    reward_scales: dict[str, float] = field(default_factory=_default_scales)
    action_delay_max: int = 3
    arm: str = "kuka_iiwa"
    tool_seed: int = 0
    tools_per_family: int = 16
    tool_size_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])
    arm_action_scale: float = 0.04
    hand_action_ema: float = 0.5
    lift_height: float = 0.15
    lift_hand_dist: float = 0.05
    held_goal_sigma: float = 0.3
    drop_height: float = 0.03
    success_steps: int = 10
    goal_pos_tol: float = 0.04
    goal_rot_tol: float = 0.4
    goal_pos_tol_start: float = 0.1
    goal_rot_tol_start: float = 3.1416
    max_goals: int = 50
    goal_region_low: list[float] = field(default_factory=lambda: [0.45, -0.2, 0.15])
    goal_region_high: list[float] = field(default_factory=lambda: [0.70, 0.2, 0.40])
    goal_rot_range: float = 3.1416
    spawn_range: float = 0.05
    keypoint_min_half: float = 0.03
    curriculum: bool = True
    curriculum_thresholds: list[float] = field(default_factory=lambda: [0.5, 0.3])
    curriculum_ema: float = 0.02
    curriculum_min_episodes: int = 64
    goal_scale_init: float = 0.1
    goal_scale_step: float = 0.05
    goal_scale_threshold: float = 0.2
    lift_goal_height: float = 0.2
    reach_dist: float = 0.02
    dr_dynamics: bool = True
    dynamics_range: list[float] = field(default_factory=lambda: [0.7, 1.3])
    dr_kicks: bool = True
    kick_prob: float = 0.02
    kick_accel: float = 2.0
    dr_object_pose: bool = True
    object_pos_noise: float = 0.01
    object_rot_noise: float = 0.0873
    object_delay_max: int = 3
    obs_delay_max: int = 3
    timestep: float = 0.005
    solver_iterations: int = 10
    integrator: str = "implicitfast"


CONFIG = ToolUseConfig
