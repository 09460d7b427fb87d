"""Record episodes of a (possibly perturbed) MuJoCo robot into bags in the deploy layout.

``record_episode`` runs one world of a task in process, the way ``robotrl-sim-robot`` plus
the policy node run it over DDS, and writes what the node records: the profile's
``joint_states`` (effort = the joint torque the actuators applied, ``qfrc_actuator``), ``imu``
and ``odom`` topics for a floating base, the command on the profile's output topic (controller joint order),
``<debug_prefix>/observation|action``, the task's velocity command on ``cmd_vel``, the task's
perception inputs where its deploy hook has ``sim_inputs`` (tool_use: ``object_pose``,
``goal_pose``, ``object_box``), as ``robotrl-sim-robot`` publishes them, and, at the end,
``/sim/episode`` with return, length and success. It writes through
``robotrl.deploy.recorder.EpisodeBag`` (MCAP, message definitions embedded), so the bag is
the same kind of file the deploy path writes. Tests and benchmarks use it to make "real"
robot bags with known physics; the end-to-end DDS path is covered in ``tests/deploy``.

A ``Physics`` perturbation stands in for a real robot whose parameters are unknown; its
``delay_steps`` delays commands (the first command is held until the delay has passed).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robotrl.twin.physics import Physics, apply_physics

log = logging.getLogger(__name__)

# (obs (1, P) float32 tensor, step) -> action (1, A) in [-1, 1]
ActionFn = Callable[[torch.Tensor, int], torch.Tensor]
_T0_NS = 1_700_000_000_000_000_000


def actuator_ids(model: Any, joint_names: list[str]) -> np.ndarray:
    """Index of the actuator driving each named joint ``(J,)``.

    Raises:
        KeyError: a joint has no joint-transmission actuator.

    """
    import mujoco

    out = []
    for name in joint_names:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        hits = np.flatnonzero((model.actuator_trnid[:, 0] == jid)
                              & (model.actuator_trntype == int(mujoco.mjtTrn.mjTRN_JOINT)))
        if jid < 0 or hits.size == 0:
            raise KeyError(f"joint {name!r} has no actuator in the model.")
        out.append(int(hits[0]))
    return np.asarray(out)


def task_profile(env: Any, name: str) -> Any:
    """A ``RobotProfile`` for a task without a shipped one (forward_command output, limits from the model)."""
    import mujoco

    from robotrl.deploy.profile import Joints, Output, RobotProfile, Topics

    model, names = env.sim.model, env.task.joint_names
    floating = int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
    limits = [[float(v) for v in model.jnt_range[model.joint(n).id]] for n in names]
    kind = str(env.task.action_spec()["kind"])
    return RobotProfile(
        name=name, command_kind=kind, joints=Joints(names=list(names), position_limits=limits,
                                                    velocity_limits=[10.0] * len(names),
                                                    effort_limits=[1e3] * len(names),
                                                    kp=[1.0] * len(names), kd=[0.1] * len(names)),
        topics=Topics(imu="/imu/data" if floating else "", odom="/odom" if floating else ""),
        output=Output(adapter="forward_command", topic="/forward_command_controller/commands"),
    ).validate()


def save_profile(profile: Any, path: str | Path) -> Path:
    """Write a ``RobotProfile`` as YAML that ``load_profile`` reads."""
    from dataclasses import asdict

    import yaml

    path = Path(path)
    path.write_text(yaml.safe_dump(asdict(profile), sort_keys=False))
    return path


def _quat_rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    from robotrl.deploy.geometry import quat_rotate_inverse_wxyz

    return quat_rotate_inverse_wxyz(q, v)


class _Writer:
    """Builds the deploy messages of world 0 of ``env`` and writes them into one bag."""

    def __init__(self, env: Any, profile: Any, bag: Any, period: float) -> None:
        import mujoco

        from robotrl.deploy import msgs
        from robotrl.tasks import robot_io

        self.msgs, self.env, self.profile, self.bag, self.period = msgs, env, profile, bag, period
        model = env.sim.model
        self.names = list(profile.joints.names)
        jid = [model.joint(n).id for n in self.names]
        self.qadr = np.asarray([model.jnt_qposadr[j] for j in jid])
        self.vadr = np.asarray([model.jnt_dofadr[j] for j in jid])
        self.act = actuator_ids(model, self.names)
        self.floating = int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
        self.root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, 1) or "base"
        prefix = profile.topics.debug_prefix.rstrip("/")
        self.obs_topic, self.act_topic = f"{prefix}/observation", f"{prefix}/action"
        # the task's perception inputs (tool_use: object and goal poses, object box), as robotrl-sim-robot publishes
        self.sim_inputs = getattr(robot_io(env.task.name), "sim_inputs", None)

    def state(self, k: int) -> int:
        m, t = self.msgs, self.profile.topics
        qpos = self.env.sim.bind("qpos")[0].numpy().astype(np.float64)
        qvel = self.env.sim.bind("qvel")[0].numpy().astype(np.float64)
        torque = self.env.sim.bind("qfrc_actuator")[0].numpy().astype(np.float64)
        log_ns = _T0_NS + round(k * self.period * 1e9)
        header = m.Header(stamp=m.stamp(k * self.period), frame_id="")
        self.bag.write(t.joint_states, m.JointState(header=header, name=self.names, position=qpos[self.qadr].tolist(),
                                                    velocity=qvel[self.vadr].tolist(),
                                                    effort=torque[self.vadr].tolist()), log_ns)
        if self.floating:
            w, x, y, z = qpos[3:7]
            quat, ang = m.Quaternion(x=x, y=y, z=z, w=w), m.Vector3(*qvel[3:6].tolist())
            if t.imu:
                self.bag.write(t.imu, m.Imu(header=m.Header(header.stamp, self.root), orientation=quat,
                                            angular_velocity=ang), log_ns)
            if t.odom:
                odom = m.Odometry(header=m.Header(header.stamp, "odom"), child_frame_id=self.root)
                odom.pose.pose = m.Pose(m.Point(*qpos[0:3].tolist()), quat)
                lin = _quat_rotate_inverse(qpos[3:7], qvel[0:3])
                odom.twist.twist = m.Twist(m.Vector3(*lin.tolist()), ang)
                self.bag.write(t.odom, odom, log_ns)
        task = self.env.task
        if self.sim_inputs is not None:
            for name, msg in self.sim_inputs(task, header, self.profile).items():
                if getattr(t, name, ""):
                    self.bag.write(getattr(t, name), msg, log_ns + 100)
        if t.cmd_vel and hasattr(task, "command"):
            vx, yaw = task.command[0].tolist()[:2]
            self.bag.write(t.cmd_vel, m.Twist(linear=m.Vector3(x=vx), angular=m.Vector3(z=yaw)), log_ns)
        return log_ns

    def command(self, log_ns: int, obs: np.ndarray, action: np.ndarray, cmd: np.ndarray) -> None:
        m = self.msgs
        self.bag.write(self.obs_topic, m.Float64MultiArray(data=[float(v) for v in obs]), log_ns + 500)
        self.bag.write(self.act_topic, m.Float64MultiArray(data=[float(v) for v in action]), log_ns + 600)
        self.bag.write(self.profile.output.topic, m.Float64MultiArray(data=[float(v) for v in cmd]), log_ns + 1000)

    def episode(self, log_ns: int, ret: float, length: int, success: bool) -> None:
        m = self.msgs
        values = [m.KeyValue("return", repr(ret)), m.KeyValue("length", str(length)),
                  m.KeyValue("success", "1.0" if success else "0.0")]
        self.bag.write("/sim/episode", m.DiagnosticArray(status=[m.DiagnosticStatus(
            name="robotrl/sim_episode", message="episode", values=values)]), log_ns + 2000)


def make_task_env(task: str, overrides: dict[str, Any] | None = None, num_envs: int = 1, seed: int = 0,
                  nthread: int = 1) -> Any:
    """A TaskEnv with domain randomization off (twin and recorder worlds)."""
    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig
    from robotrl.tasks import config_class

    values = {**(overrides or {}), "randomize": False}
    return TaskEnv(config_class(task)(**values), SimConfig(num_envs=num_envs, nthread=nthread), seed=seed)


def record_episode(task: str, out_dir: str | Path, policy: ActionFn, steps: int, *, physics: Physics | None = None,
                   seed: int = 0, profile: Any = None, overrides: dict[str, Any] | None = None,
                   name: str = "episode_0001", scenario: dict[str, float] | None = None, engine: str = "mujoco"
                   ) -> Path:
    """Roll out ``policy`` in one world of ``task`` under ``physics`` and write the bag ``out_dir/name``.

    Args:
        task: task name.
        out_dir: where the bag directory goes.
        policy: ``(obs (1, P), step) -> action (1, A)`` in ``[-1, 1]``.
        steps: control steps (the episode stops earlier if the task terminates).
        physics: the "real" robot's physics (None: nominal).
        seed: env seed (initial state, task commands).
        profile: ``RobotProfile`` (None: ``task_profile``).
        overrides: task config fields.
        name: bag directory name.
        scenario: the task's scenario parameters for this episode (``apply_scenario`` on the
            world), written into the bag's metadata as ``scenario.<name>`` so the twin can set
            the same scene up (``Twin`` closed loop, ``robotrl twin triage``).
        engine: ``mujoco``, or ``pybullet``: a "real" robot of another physics engine
            (``robotrl.twin.bullet``, the same model rebuilt in PyBullet), for sim-to-sim calibration.

    Returns:
        The bag directory.

    """
    from robotrl.deploy.recorder import EpisodeBag

    physics = physics or Physics()
    env = make_task_env(task, overrides, seed=seed)
    if scenario:
        values = {k: torch.tensor([float(v)]) for k, v in scenario.items()}
        env.task.apply_scenario(torch.tensor([0]), values, env.gen)
    if not physics.is_nominal():
        apply_physics(env.sim, [0], [physics])
    if engine == "pybullet":
        from robotrl.twin.bullet import use_pybullet

        use_pybullet(env)
    elif engine != "mujoco":
        raise ValueError(f"engine={engine!r}; valid: mujoco, pybullet.")
    profile = profile if profile is not None else task_profile(env, f"{task}_twin")
    meta = {"robot_profile": profile.name, "task": task, "rate_hz": f"{1.0 / env.step_dt:g}", "seed": str(seed),
            "policy_sha256": "", "config_hash": "", "code_version": "robotrl.twin.record", "engine": engine,
            **{f"scenario.{k}": repr(float(v)) for k, v in (scenario or {}).items()}}
    bag = EpisodeBag(Path(out_dir) / name, meta)
    writer = _Writer(env, profile, bag, env.step_dt)
    task_obj, ctrl = env.task, env.sim.bind("ctrl")
    history: collections.deque = collections.deque(maxlen=physics.delay_steps + 1)
    ret, k, success = 0.0, 0, False
    log_ns = writer.state(0)
    with torch.no_grad():
        for k in range(steps):  # noqa: B007 - k is the episode length after the loop
            obs = task_obj.observe()["policy"]
            action = policy(obs, k).clamp(-1.0, 1.0)
            task_obj.apply_action(action)
            cmd = ctrl[0, writer.act].clone()
            writer.command(log_ns, obs[0].numpy(), action[0].numpy(), cmd.numpy())
            history.append(cmd)
            ctrl[0, writer.act] = history[0]  # the command of delay_steps ago (the first one until then)
            env.sim.step(env.cfg.frame_skip)
            task_obj.update(env.gen)
            ret += float(sum(env.cfg.reward_scales[n] * v[0] for n, v in task_obj.reward_terms(action).items()))
            log_ns = writer.state(k + 1)
            success = bool(task_obj.success()[0])
            if bool(task_obj.terminated()[0]):
                break
    writer.episode(log_ns, ret, k + 1, success)
    return bag.close()
