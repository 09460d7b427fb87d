"""Shared test helpers: humanoid, driving and tool_use checkpoints as the training runner writes them, processes,
DDS peers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def _untrained_checkpoint(root: Path, cfg, seed: int, steps: int, gain: float, throttle_bias: float | None = None
                          ) -> Path:
    """An untrained ActorCritic for ``cfg``'s task with a filled obs normalizer, saved with runner-style meta.

    ``gain`` is the actor's last-layer orthogonal gain (the default 0.01 gives near-zero actions;
    a rollout test needs actions that matter); ``throttle_bias`` sets action 1's bias (driving).
    """
    from robotrl.envs.task_env import TaskEnv
    from robotrl.policies.mlp import ActorCritic, PolicyConfig
    from robotrl.sim.backend import SimConfig
    from robotrl.storage.checkpoint import prefixed, save_checkpoint

    torch.manual_seed(seed)
    env = TaskEnv(cfg, SimConfig(num_envs=4), seed=seed)
    dims = env.obs_dims
    critic_dim = dims.get("critic", dims["policy"])  # driving: the critic sees the policy observation
    policy = ActorCritic(dims["policy"], critic_dim, env.num_actions, PolicyConfig(init_std=0.5))
    torch.nn.init.orthogonal_(policy.actor[-1].weight, gain=gain)
    if throttle_bias is not None:
        with torch.no_grad():
            policy.actor[-1].bias[1] = throttle_bias
    obs = env.reset()
    for _ in range(steps):
        policy.update_normalizers(obs["policy"], obs.get("critic", obs["policy"]))
        obs, *_ = env.step(torch.rand(4, env.num_actions) * 2 - 1)
    task = env.task
    meta = {
        "task": {"name": cfg.name, "config": asdict(cfg)},
        "policy": {"obs_dim": policy.obs_dim, "critic_dim": policy.critic_dim, "action_dim": policy.action_dim,
                   "config": asdict(policy.cfg)},
        "obs_layout": [list(x) for x in task.obs_layout()], "joint_names": task.joint_names,
        "action_spec": task.action_spec(), "step_dt": env.step_dt, "config_yaml": f"task: {cfg.name}\n",
        "config_hash": "test0000", "env_steps": 0,
    }
    save_checkpoint(root / "checkpoints", 0, prefixed(policy.state_dict(), "policy"), meta)
    return root


def make_humanoid_checkpoint(root: Path, seed: int = 0, steps: int = 40) -> Path:
    """An untrained humanoid ActorCritic with a filled obs normalizer, saved with runner-style meta."""
    from robotrl.tasks.humanoid.config import HumanoidConfig

    return _untrained_checkpoint(root, HumanoidConfig(randomize=False), seed, steps, gain=1.0)


def make_driving_checkpoint(root: Path, seed: int = 0, steps: int = 40, gain: float = 0.5) -> Path:
    """An untrained driving ActorCritic (Gaussian head) with a filled obs normalizer, runner-style meta.

    The last layer's gain is raised from 0.01 so that steering and throttle vary with the
    observation; ``gain`` 0.5 keeps the car on the road for tens of steps with seed 0; the throttle
    bias of 0.6 drives forwards.
    """
    from robotrl.tasks.driving.config import DrivingConfig

    return _untrained_checkpoint(root, DrivingConfig(randomize=False), seed, steps, gain, throttle_bias=0.6)


def make_tool_use_checkpoint(root: Path, seed: int = 0, steps: int = 40, gain: float = 1.0, arm: str = "kuka_iiwa"
                             ) -> Path:
    """An untrained tool_use ActorCritic with a filled obs normalizer, runner-style meta.

    The last layer's gain is raised from 0.01 so that the arm and the fingers move (relative arm
    targets, smoothed hand targets), which exercises forward kinematics over ROS 2.
    """
    from robotrl.tasks.tool_use.config import ToolUseConfig

    return _untrained_checkpoint(root, ToolUseConfig(randomize=False, arm=arm), seed, steps, gain)


def free_domain() -> int:
    """A ROS domain id unlikely to collide with other tests or engineers (10..229)."""
    return 10 + (os.getpid() * 7 + time.monotonic_ns() // 1000) % 220


def spawn(args: list[str], domain: int, log_path: Path) -> subprocess.Popen:
    """Start a console-script module as a real process on ``domain``, localhost only."""
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", *args, "localhost_only:=true"], stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=REPO)


def stop(proc: subprocess.Popen, timeout: float = 5.0) -> int:
    """SIGINT then wait (SIGKILL if it hangs); returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(2)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class DdsRobotPeer:
    """The robot side of a real DDS link: publishes robot topics from a thread, collects what comes back.

    ``transport`` picks the robot side's middleware: Cyclone DDS, or real rclpy on Fast DDS.

    ``inject`` publishes extra (bad) JointState messages; ``statuses`` and ``commands`` collect
    what the policy node sends. (The in-process stand-in is ``robotrl.deploy.fake_robot.FakeRobot``.)
    """

    def __init__(self, domain: int, joints: list[str], rate_hz: float = 66.7, cmd_topic: str =
                 "/effort_controller/commands", cmd_type: object = None, transport: str = "cyclonedds") -> None:
        import threading

        from robotrl.deploy import msgs
        from robotrl.deploy.transport import RELIABLE_QOS, SENSOR_QOS, make_transport

        self.msgs = msgs
        # "rclpy": the robot side is a real ROS 2 node (Fast DDS), as on a robot with a stock ROS 2
        self.tr = make_transport(transport, domain_id=domain, localhost_only=True, node_name="robot_peer")
        self.joints = list(joints)
        self.period = 1.0 / rate_hz
        self.pub_js = self.tr.publisher("/joint_states", msgs.JointState, SENSOR_QOS)
        self.pub_imu = self.tr.publisher("/imu/data", msgs.Imu, SENSOR_QOS)
        self.pub_odom = self.tr.publisher("/odom", msgs.Odometry, SENSOR_QOS)
        self.pub_estop = self.tr.publisher("/robotrl/estop", msgs.Bool, RELIABLE_QOS)
        self.pub_arm = self.tr.publisher("/robotrl/arm", msgs.Bool, RELIABLE_QOS)
        self.pub_pose = self.tr.publisher("/object_pose", msgs.PoseStamped, SENSOR_QOS)
        self.latched: list = []
        self.sub_status = self.tr.subscription("/robotrl/status", msgs.DiagnosticArray, RELIABLE_QOS)
        self.sub_cmd = self.tr.subscription(cmd_topic, cmd_type or msgs.Float64MultiArray, RELIABLE_QOS)
        self.position = [0.0] * len(joints)
        self.velocity = [0.0] * len(joints)
        self.send_js = True
        self.pose = None  # a PoseStamped published on /object_pose every period while set (tool_use)
        self.heartbeat = False
        self.injections: list = []
        self.last_js_sent = 0.0
        self.statuses: list[tuple[float, dict]] = []
        self.commands: list[tuple[float, list[float]]] = []
        self._run = True
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        m = self.msgs
        next_t = time.monotonic()
        while self._run:
            now = time.monotonic()
            if now >= next_t:
                next_t += self.period
                if self.send_js:
                    self.pub_js.publish(m.JointState(name=self.joints, position=list(self.position),
                                                     velocity=list(self.velocity), effort=[]))
                    self.last_js_sent = now
                with self._lock:
                    injections, self.injections = self.injections, []
                for msg in injections:
                    self.pub_js.publish(msg)
                if self.pose is not None:
                    self.pub_pose.publish(self.pose)
                self.pub_imu.publish(m.Imu(orientation=m.Quaternion(w=1.0)))
                odom = m.Odometry()
                odom.pose.pose.position.z = 1.3
                self.pub_odom.publish(odom)
                if self.heartbeat:
                    self.pub_estop.publish(m.Bool(data=False))
            for t, s in self.sub_status.take():
                self.statuses.append((t, self.msgs.status_values(s)))
            for t, c in self.sub_cmd.take():
                self.commands.append((t, list(getattr(c, "data", None) or c.points[0].positions)))
            time.sleep(0.001)

    @contextlib.contextmanager
    def stalled(self):
        """Stall the robot side while the block runs, as a loaded machine does: the publishing thread
        stops after its next joint-state message, before that period's IMU and odometry."""
        with self._lock:
            yield

    def inject(self, msg: object) -> None:
        """Publish ``msg`` on /joint_states at the next period."""
        with self._lock:
            self.injections.append(msg)

    def latch(self, topic: str, msg: object) -> None:
        """Publish ``msg`` once on ``topic``, latched (RELIABLE, TRANSIENT_LOCAL; goal pose, object box)."""
        from robotrl.deploy.transport import Qos

        pub = self.tr.publisher(topic, type(msg), Qos(reliable=True, depth=1, transient_local=True))
        pub.publish(msg)
        self.latched.append(pub)

    def arm(self, timeout: float = 30.0) -> None:
        """Send one arm request, once the node's arm subscription has matched.

        A one-shot RELIABLE, VOLATILE message published before discovery has matched its reader is
        lost (``ros2 topic pub --once`` waits for a match for the same reason); on a loaded machine the
        /robotrl/arm endpoints can match later than the sensor topics that already flow.
        """
        end = time.monotonic() + timeout
        while self.pub_arm.matched() == 0:
            if time.monotonic() > end:
                raise AssertionError(f"/robotrl/arm matched no subscriber within {timeout}s: is the node up?")
            time.sleep(0.01)
        self.pub_arm.publish(self.msgs.Bool(data=True))

    def latest(self) -> dict:
        """The newest status values (empty before the first)."""
        return self.statuses[-1][1] if self.statuses else {}

    def wait_for(self, predicate, timeout: float = 60.0, after: dict | None = None) -> dict:
        """The first status (after status ``after``, if given) with ``predicate(values)``.

        Polls until one arrives; raises AssertionError after ``timeout`` seconds (generous: a
        time-out means "never", not "late"; timing is asserted in node periods, not here).
        """
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            statuses = [v for _, v in list(self.statuses)]
            start = next((i + 1 for i, v in enumerate(statuses) if v is after), 0) if after is not None else 0
            for values in statuses[start:]:
                if predicate(values):
                    return values
            time.sleep(0.01)
        raise AssertionError(f"condition not met within {timeout}s; last status: {self.latest()}")

    def statuses_between(self, first: dict, last: dict) -> list[dict]:
        """The statuses from ``first`` to ``last`` inclusive (objects returned by ``wait_for``)."""
        values = [v for _, v in list(self.statuses)]
        i = next(k for k, v in enumerate(values) if v is first)
        j = next(k for k, v in enumerate(values) if v is last)
        return values[i:j + 1]

    def wait_for_commands(self, predicate, timeout: float = 60.0) -> list[tuple[float, list[float]]]:
        """Poll received commands until ``predicate(commands)``; returns them."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            commands = list(self.commands)
            if predicate(commands):
                return commands
            time.sleep(0.01)
        raise AssertionError(f"command condition not met within {timeout}s; {len(self.commands)} received")

    def close(self) -> None:
        """Stop the thread and the participant."""
        self._run = False
        self._thread.join(2)
        self.tr.close()


def affine_policy(root: Path, joints: list[str], period: float, bias: float, kind: str = "position",
                  scale: float = 1.0) -> Path:
    """Write ``policy.onnx`` + ``policy.json`` of ``action = bias`` (constant) for ``joints``; returns the JSON.

    Observations are ``joint_pos``, ``joint_vel`` and ``last_action`` (``3 * len(joints)``);
    the model multiplies them by zero, so the action never depends on them. Needs ``onnx``.
    """
    import json

    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from robotrl.deploy.spec import FORMAT, SPEC_VERSION, sha256_file

    n = len(joints)
    w = numpy_helper.from_array(np.zeros((3 * n, n), np.float32), "W")
    b = numpy_helper.from_array(np.full(n, bias, np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["action"])],
        "affine", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 3 * n])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", n])], [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              root / "policy.onnx")
    terms = [{"name": k, "size": n, "source": k, "scale": 1.0, "offset": 0.0}
             for k in ("joint_pos", "joint_vel", "last_action")]
    spec = {"format": FORMAT, "version": SPEC_VERSION, "onnx": "policy.onnx",
            "onnx_sha256": sha256_file(root / "policy.onnx"), "input": "obs", "output": "action",
            "obs_dim": 3 * n, "action_dim": n, "obs_layout": [[t["name"], n] for t in terms], "obs_terms": terms,
            "obs_norm": None, "joint_names": list(joints), "joint_range": None, "step_dt": period,
            "rate_hz": 1 / period, "task": {"name": "affine", "config": {}}, "config_hash": "affine",
            "action_spec": {"kind": kind, "scale": [scale] * n, "offset": [0.0] * n, "default_pose": [0.0] * n}}
    (root / "policy.json").write_text(json.dumps(spec))
    return root / "policy.json"


# --- status predicates and the re-arm a loaded machine may need --------------------------
def in_policy(values):
    return values.get("mode") == "POLICY"


def periods_since(values: dict, source: str) -> int:
    """Control periods between the node taking the last accepted ``source`` message and this status."""
    return int(values["ticks"]) - 1 - int(values[f"tick/{source}"])


def running_for(periods: int, since: dict):
    """Predicate: a status at least ``periods`` node periods after status ``since``."""
    return lambda v: int(v["ticks"]) >= int(since["ticks"]) + periods


def faults_of(values: dict) -> set[str]:
    return {f for f in values.get("faults", "").split(",") if f}


def rearmed(values):
    return values.get("mode") == "POLICY" and "rearm" in values.get("events", "")


def rearm(robot, after: dict) -> dict:
    """Send arm requests until the node reports a re-arm after status ``after``; that status."""
    for _ in range(10):
        robot.arm()
        try:
            return robot.wait_for(rearmed, timeout=6.0, after=after)
        except AssertionError:  # refused (an input not fresh yet) or the request was lost: ask again
            continue
    raise AssertionError(f"no re-arm after 10 requests; last status: {robot.latest()}")


def settle_in_policy(robot, periods: int = 10, tries: int = 3, after: dict | None = None) -> dict:
    """The first status ``periods`` node periods into a fault-free stretch of POLICY (after ``after``).

    A stall of more than 3 periods in the robot peer (a thread of this test process) or in the
    node's receive thread, which a loaded 2-core machine produces, most often while both sides
    start, makes every input stale at once. The node latches ``stale:`` faults and HOLDs until it
    is re-armed, which is correct behaviour and not what the tests using this are about, so such
    faults (and only those) are answered with a re-arm, up to ``tries`` times.
    """
    status = robot.wait_for(lambda v: in_policy(v) or bool(faults_of(v)), after=after)
    for _ in range(tries):
        if in_policy(status) and not faults_of(status):
            status = robot.wait_for(running_for(periods, status), after=status)
            if in_policy(status) and not faults_of(status):
                return status
        assert faults_of(status) and all(f.startswith("stale:") for f in faults_of(status)), status
        status = rearm(robot, status)
    raise AssertionError(f"no {periods} fault-free periods in POLICY after {tries} re-arms; last: {status}")
