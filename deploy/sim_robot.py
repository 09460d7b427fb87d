"""``robotrl-sim-robot``: a BatchSim world of one task standing in for the robot over ROS 2 topics.

Publishes (RELIABLE, KEEP_LAST 1, so default-QoS ROS subscribers receive it; stamped with wall
time, or with simulation time from 0 and a ``/clock`` topic under ``use_sim_time:=true``)
``/joint_states`` (by joint name; effort = the joint torque or force the actuators applied in the
last physics step, MuJoCo's ``qfrc_actuator``), and for a floating
base ``/imu/data`` (orientation, body-frame angular velocity) and ``/odom`` (pose; twist in
the body frame, ``child_frame_id`` = root body), plus the task's velocity command on
``/cmd_vel`` (``publish_command``) and, when an episode ends, its return, length and
success on ``/sim/episode`` (DiagnosticArray). A task whose deploy hook
(``tasks/<name>/robot_io.py``) defines ``sim_joint_state`` publishes that joint state instead of
MJCF joints (driving: ``steering`` and ``throttle``); ``sim_scan`` adds ``/scan``
(sensor_msgs/LaserScan) and ``sim_route`` the current route on ``/robotrl/route`` (nav_msgs/Path,
latched, republished when the episode's track changes); ``sim_inputs`` adds the task's perception inputs
on their profile topics (tool_use: ``object_pose``, and latched ``goal_pose`` and ``object_box``) and
``sim_action`` maps a command to the task's action (tool_use: relative arm targets). It applies the
commands the robot profile's output adapter sends (``forward_command`` or ``joint_trajectory``), mapped
by joint name: ``action = (command - offset) / scale`` of the task's action spec.

``physics:=<yaml>`` perturbs the robot's physics (mass, damping, armature, friction loss, friction,
actuator gain and bias multipliers, control delay: ``robotrl.twin.physics``), the same file
``robotrl twin calibrate`` writes, so a sim robot can stand in for a real one whose parameters are
unknown, or replay the calibrated twin. It is compiled into the model as ``task.dynamics`` with
``dynamics_mode=nominal``; a policy spec's own ``dynamics`` is not used (the robot is nominal
unless ``physics:=`` says otherwise).

``scenario:=`` fixes the task's scenario parameters for every episode (``scenario:="{cmd_vx: 1.2,
friction: 0.6}"`` or a YAML file of one; names and ranges are the task's ``scenario_params``), as a
one-point scenario file drawn by every reset (``task.scenarios``, ``scenario_mix`` 1): a stand-in
for a robot on a known surface, tool or command. ``robotrl-deploy scenario:=`` records the same
values into each bag's metadata.

``engine:=pybullet`` runs the same robot in PyBullet behind the same topics: the task's MuJoCo
model rebuilt body by body (``robotrl.twin.bullet``; ``humanoid`` and ``tool_use``), PyBullet
stepping the physics and the MuJoCo world mirroring its state for the task's observations,
rewards and episode ends. ``physics:=`` applies there too.

``lockstep:=true`` (default) steps the world once per command received and republishes
the state every period while no command comes, so a policy node's rollout is step-for-step
the in-process one. ``lockstep:=false`` steps on absolute deadlines at ``rate_factor``
times real time with the latest command. This module imports torch and mujoco through
robotrl's sim; the policy node does not.

Parameters: ``task``, ``policy`` (spec JSON; its task config is used), ``robot`` (profile
name or YAML), ``domain_id``, ``localhost_only``, ``transport``, ``lockstep``,
``rate_factor``, ``randomize``, ``seed``, ``episode_length_s``, ``episodes`` (stop after
this many; 0 = never), ``duration_s``, ``publish_command``, ``log_level``, ``use_sim_time``,
``physics`` (YAML; empty: nominal), ``engine`` (``mujoco`` or ``pybullet``), ``scenario`` (mapping or
YAML; empty: the task's own draws).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.cli import StopSignals, console_front
from robotrl.deploy.geometry import quat_rotate_inverse_wxyz
from robotrl.deploy.observation import STATIC
from robotrl.deploy.params import scenario_param
from robotrl.deploy.profile import load_profile
from robotrl.deploy.ros_robot import ROUTE_QOS
from robotrl.deploy.transport import RELIABLE_QOS, Qos, make_transport

log = logging.getLogger("robotrl.sim_robot")

DEFAULTS: dict[str, Any] = {
    "task": "humanoid", "policy": "", "robot": "humanoid_sim", "domain_id": None, "localhost_only": False,
    "transport": "auto", "lockstep": True, "rate_factor": 1.0, "randomize": False, "seed": 0,
    "episode_length_s": None, "episodes": 0, "duration_s": 0.0, "publish_command": True, "log_level": "INFO",
    "use_sim_time": False, "physics": "", "engine": "mujoco", "scenario": "",
}
# Robot state as a driver publishes it: RELIABLE (so default-QoS ROS subscribers, which are RELIABLE,
# receive it; BEST_EFFORT readers match it too), KEEP_LAST 1.
STATE_QOS = Qos(reliable=True, depth=1)


class SimRobot:
    """One world of a task, exposed as a ROS 2 robot (module docstring)."""

    def __init__(self, params: dict[str, Any]) -> None:
        import mujoco
        import torch
        from robotrl.tasks import config_class, robot_io

        from robotrl.envs.task_env import TaskEnv
        from robotrl.sim.backend import SimConfig

        self.params = params
        values: dict[str, Any] = {}
        name = params["task"]
        if params["policy"]:
            with open(params["policy"]) as f:
                task = json.load(f)["task"]
            name, values = task["name"], dict(task["config"])
        values["randomize"] = bool(params["randomize"])
        values["dynamics"], values["dynamics_mode"] = str(params["physics"] or ""), "nominal"
        if params["episode_length_s"]:
            values["episode_length_s"] = float(params["episode_length_s"])
        scenario = scenario_param(params["scenario"], "robotrl-sim-robot")
        self._scenario_dir = None
        if scenario:
            from robotrl.tasks import task_class

            from robotrl.twin.scenarios import point_scenario

            self._scenario_dir = tempfile.TemporaryDirectory(prefix="robotrl_sim_scenario_")
            point = point_scenario(name, getattr(task_class(name), "scenario_params", []), scenario,
                                   "robotrl-sim-robot scenario:=")
            values["scenarios"] = str(point.save(Path(self._scenario_dir.name) / "scenario.yaml"))
            values["scenario_mix"] = 1.0
            log.info("sim robot: every episode in scenario %s", scenario)
        self.env = TaskEnv(config_class(name)(**values), SimConfig(num_envs=1), seed=int(params["seed"]))
        if params["engine"] == "pybullet":
            from robotrl.twin.bullet import use_pybullet

            use_pybullet(self.env)
        elif params["engine"] != "mujoco":
            raise ValueError(f"engine:={params['engine']!r}; valid: mujoco, pybullet.")
        self.env.reset()  # as an in-process rollout does: same seed, same first episode
        log.info("sim robot: task %s, engine %s, physics %s", name, params["engine"], self.env.physics or "nominal")
        self.task, self.torch = self.env.task, torch
        model = self.env.sim.model
        self.joints = self.task.joint_names
        self.hook = robot_io(name)
        if not self._has_hook("sim_joint_state"):
            jid = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.joints]
            missing = [j for j, i in zip(self.joints, jid, strict=True) if i < 0]
            if missing:
                raise ValueError(f"task {name!r}: joints {missing} are not MJCF joints; give its deploy hook "
                                 "(robot_io.py in the task's folder) a sim_joint_state(task).")
            self.qadr = np.asarray([model.jnt_qposadr[j] for j in jid])
            self.vadr = np.asarray([model.jnt_dofadr[j] for j in jid])
        self.floating = int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
        self.root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, 1) or "base"
        spec = self.task.action_spec()
        self.scale, self.offset = np.asarray(spec["scale"]), np.asarray(spec["offset"])
        self.profile = load_profile(params["robot"])
        index = {n: i for i, n in enumerate(self.profile.joints.names)}
        missing = [j for j in self.joints if j not in index]
        if missing:
            raise ValueError(f"robot profile {self.profile.name!r} lacks the task's joints {missing}.")
        self.cmd_slots = np.asarray([index[j] for j in self.joints])
        self.period = self.env.step_dt
        domain = params["domain_id"] if params["domain_id"] is not None else int(os.environ.get("ROS_DOMAIN_ID", 0))
        declared = {k: params[k] for k in DEFAULTS if k in params}
        tr = make_transport(params["transport"], int(domain), bool(params["localhost_only"]),
                            params.get("node_name", "robotrl_sim_robot"), params.get("namespace", "/"), declared)
        self.transport, t = tr, self.profile.topics
        self.pub_js = tr.publisher(t.joint_states, msgs.JointState, STATE_QOS)
        self.pub_imu = tr.publisher(t.imu, msgs.Imu, STATE_QOS) if self.floating and t.imu else None
        self.pub_odom = tr.publisher(t.odom, msgs.Odometry, STATE_QOS) if self.floating and t.odom else None
        self.pub_cmd = (tr.publisher(t.cmd_vel, msgs.Twist, STATE_QOS)
                        if params["publish_command"] and t.cmd_vel and hasattr(self.task, "command") else None)
        scan, route = self._has_hook("sim_scan") and t.scan, self._has_hook("sim_route") and t.route
        self.pub_scan = tr.publisher(t.scan, msgs.LaserScan, STATE_QOS) if scan else None
        self.pub_route = tr.publisher(t.route, msgs.Path, ROUTE_QOS) if route else None
        self._route_key: Any = None
        self.pub_inputs: dict[str, Any] = {}
        self.sim_time = bool(params["use_sim_time"])
        self.pub_clock = tr.publisher("/clock", msgs.Clock, STATE_QOS) if self.sim_time else None
        self.pub_episode = tr.publisher("/sim/episode", msgs.DiagnosticArray, RELIABLE_QOS)
        adapter = self.profile.output.adapter
        if adapter not in ("forward_command", "joint_trajectory"):
            raise ValueError(f"robotrl-sim-robot takes joint commands; profile output.adapter is {adapter!r}.")
        cmd_type = msgs.Float64MultiArray if adapter == "forward_command" else msgs.JointTrajectory
        self.sub_cmd = tr.subscription(self.profile.output.topic, cmd_type, RELIABLE_QOS)
        self.steps, self.episodes = 0, 0
        self._stamp = self._now_stamp()
        self.last_action = np.zeros(len(self.joints))
        self._stop = False

    def _has_hook(self, fn: str) -> bool:
        return self.hook is not None and hasattr(self.hook, fn)

    # --- I/O -------------------------------------------------------------------------
    def _action(self, msg: Any) -> np.ndarray | None:
        if isinstance(msg, msgs.JointTrajectory):
            if not msg.points:
                return None
            names, p = list(msg.joint_names), msg.points[0]
            values = {"position": p.positions, "torque": p.effort, "velocity": p.velocities}[self.profile.command_kind]
            full = dict(zip(names, values, strict=False))
            cmd = np.asarray([full.get(j, 0.0) for j in self.joints])
        else:
            if len(msg.data) != len(self.profile.joints.names):
                log.error("command has %d entries, the controller has %d joints; ignored",
                          len(msg.data), len(self.profile.joints.names))
                return None
            cmd = np.asarray(msg.data)[self.cmd_slots]
        if self._has_hook("sim_action"):
            assert self.hook is not None  # _has_hook held
            return self.hook.sim_action(self.task, cmd)
        return np.clip((cmd - self.offset) / self.scale, -1.0, 1.0)

    def publish_state(self) -> None:
        """Publish joint states, IMU, odometry and the task command of world 0."""
        qpos = self.env.sim.bind("qpos")[0].cpu().numpy().astype(np.float64)
        qvel = self.env.sim.bind("qvel")[0].cpu().numpy().astype(np.float64)
        torque = self.env.sim.bind("qfrc_actuator")[0].cpu().numpy().astype(np.float64)
        # stamped when the state was reached (sim time with use_sim_time, else wall time): a republished
        # state keeps its stamp
        header = msgs.Header(stamp=self._stamp, frame_id="")
        if self.pub_clock is not None:
            self.pub_clock.publish(msgs.Clock(clock=self._stamp))
        if self.pub_route is not None:
            self.publish_route()
        if self._has_hook("sim_joint_state"):
            assert self.hook is not None  # _has_hook held
            names, pos, vel, eff = self.hook.sim_joint_state(self.task)
            self.pub_js.publish(msgs.JointState(header=header, name=names, position=pos, velocity=vel, effort=eff))
        else:
            self.pub_js.publish(msgs.JointState(header=header, name=list(self.joints),
                                                position=qpos[self.qadr].tolist(), velocity=qvel[self.vadr].tolist(),
                                                effort=torque[self.vadr].tolist()))
        if self.pub_scan is not None:
            assert self.hook is not None  # pub_scan exists only with a sim_scan hook (__init__)
            scan = self.hook.sim_scan(self.task)
            if scan is not None:
                self.pub_scan.publish(msgs.LaserScan(header=msgs.Header(header.stamp, "laser"), **scan))
        if self._has_hook("sim_inputs"):
            assert self.hook is not None  # _has_hook held
            for name, msg in self.hook.sim_inputs(self.task, header, self.profile).items():
                self._input_publisher(name, msg).publish(msg)
        if self.floating:
            w, x, y, z = qpos[3:7]
            quat = msgs.Quaternion(x=x, y=y, z=z, w=w)
            ang = msgs.Vector3(*qvel[3:6].tolist())
            if self.pub_imu:
                cov = [0.0] * 9
                self.pub_imu.publish(msgs.Imu(header=msgs.Header(header.stamp, self.root), orientation=quat,
                                              angular_velocity=ang,
                                              linear_acceleration_covariance=[-1.0] + cov[1:]))
            if self.pub_odom:
                lin = quat_rotate_inverse_wxyz(qpos[3:7], qvel[0:3])
                odom = msgs.Odometry(header=msgs.Header(header.stamp, "odom"), child_frame_id=self.root)
                odom.pose.pose = msgs.Pose(msgs.Point(*qpos[0:3].tolist()), quat)
                odom.twist.twist = msgs.Twist(msgs.Vector3(*lin.tolist()), ang)
                self.pub_odom.publish(odom)
        if self.pub_cmd is not None and hasattr(self.task, "command"):
            vx, yaw = self.task.command[0].tolist()[:2]
            self.pub_cmd.publish(msgs.Twist(linear=msgs.Vector3(x=vx), angular=msgs.Vector3(z=yaw)))

    def _input_publisher(self, name: str, msg: Any) -> Any:
        """The publisher of robot input ``name`` on its profile topic (latched for static inputs)."""
        if name not in self.pub_inputs:
            qos = ROUTE_QOS if name in STATIC else STATE_QOS
            self.pub_inputs[name] = self.transport.publisher(getattr(self.profile.topics, name), type(msg), qos)
        return self.pub_inputs[name]

    def publish_route(self) -> None:
        """Publish the current route (latched) when it changed: centre x, y, yaw = heading, z = half-width."""
        # publish_state calls this only when pub_route exists, which needs a sim_route hook (__init__)
        assert self.hook is not None and self.pub_route is not None
        track, center, heading, half_width = self.hook.sim_route(self.task)
        key = (self.episodes, track)  # every episode: its start is a new place on the route
        if key == self._route_key:
            return
        self._route_key = key
        self.pub_route.publish(msgs.route_path(msgs.Header(stamp=self._stamp, frame_id="odom"), center, heading,
                                               half_width))
        log.info("route %s published (%d points)", key, len(center))

    def _now_stamp(self) -> msgs.Time:
        """Simulation time (``use_sim_time``, from 0, also on ``/clock``) or wall-clock time."""
        return msgs.stamp(self.steps * self.period if self.sim_time else time.time())

    def step(self, action: np.ndarray) -> None:
        """One control step with ``action`` in ``[-1, 1]``; publish episode stats when one ends."""
        act = self.torch.as_tensor(action, dtype=self.torch.float32).unsqueeze(0)
        _, _, _, _, info = self.env.step(act)
        self.steps += 1
        self._stamp = self._now_stamp()
        self.last_action = action
        if "episode" in info:
            self.episodes += 1
            stats = {k: float(v[0]) for k, v in info["episode"].items()}
            shown = ("success", "lap_completed", "route_completion", "lap_time_s")
            extra = "".join(f" {k} {stats[k]:.3g}" for k in shown if k in stats)
            log.info("episode %d: return %.2f length %d%s", self.episodes, stats["return"], stats["length"], extra)
            values = [msgs.KeyValue(k, repr(v)) for k, v in stats.items()]
            values.append(msgs.KeyValue("episode", str(self.episodes)))
            self.pub_episode.publish(msgs.DiagnosticArray(status=[msgs.DiagnosticStatus(
                name="robotrl/sim_episode", message="episode", values=values)]))

    # --- loop ---------------------------------------------------------------------------
    def request_stop(self, signum: int = 0, _frame: Any = None) -> None:
        """Signal handler: stop at the next iteration."""
        self._stop = True

    def done(self, start: float) -> bool:
        """Stop requested, enough episodes, or ``duration_s`` elapsed."""
        p = self.params
        return (self._stop or (p["episodes"] and self.episodes >= int(p["episodes"]))
                or (p["duration_s"] and time.monotonic() - start >= float(p["duration_s"])))

    def _await_episode_reader(self, timeout: float = 10.0) -> None:
        """With ``episodes:=N``, give whoever collects the results time to discover ``/sim/episode``.

        The stats are VOLATILE: a reader that matches after the last episode was published (a short
        episode on a loaded machine, slow Fast DDS discovery) would never get them.
        """
        end = time.monotonic() + timeout
        while self.pub_episode.matched() == 0 and time.monotonic() < end:
            time.sleep(0.05)
        if self.pub_episode.matched() == 0:
            log.warning("no reader of /sim/episode after %.0f s; episode stats may go unread", timeout)

    def run(self) -> int:
        """Lockstep or real-time loop (module docstring)."""
        if self.params["episodes"]:
            self._await_episode_reader()
        start = time.monotonic()
        self.publish_state()
        last_pub = time.monotonic()
        deadline = start + self.period / max(float(self.params["rate_factor"]), 1e-6)
        while not self.done(start):
            actions = [a for a in (self._action(m) for _, m in self.sub_cmd.take()) if a is not None]
            now = time.monotonic()
            if self.params["lockstep"]:
                for action in actions:
                    self.step(action)
                if actions or now - last_pub >= self.period:
                    self.publish_state()
                    last_pub = now
                time.sleep(0.0005)
                continue
            if actions:
                self.last_action = actions[-1]
            if now >= deadline:
                self.step(self.last_action)
                self.publish_state()
                deadline += self.period / max(float(self.params["rate_factor"]), 1e-6)
            time.sleep(max(0.0, min(0.001, deadline - time.monotonic())))
        log.info("sim robot stopping after %d steps, %d episodes", self.steps, self.episodes)
        if not self.pub_episode.flush(2.0):  # the last episode's stats reach their readers before we go
            log.warning("episode stats not acknowledged by every reader within 2 s")
        self.transport.close()
        return 0


def main(argv: list[str] | None = None) -> int:
    """Console script ``robotrl-sim-robot``; see the module docstring."""
    front = console_front(sys.argv[1:] if argv is None else argv, __doc__ or "", "robotrl_sim_robot", DEFAULTS,
                          "robotrl-sim-robot")
    if isinstance(front, int):
        return front
    args, params = front
    params.update(node_name=args.node_name, namespace=args.namespace)
    signals = StopSignals()  # a Ctrl-C during set-up stops the node cleanly once it exists
    robot = SimRobot(params)
    signals.attach(robot.request_stop)
    return robot.run()


if __name__ == "__main__":
    sys.exit(main())
