r"""``robotrl-deploy``: the policy node. Robot inputs in, safety chain, commands out, on absolute deadlines.

Usage (what a launch ``<node>`` runs)::

    robotrl-deploy policy:=export/policy.json robot:=humanoid_sim \\
        --ros-args -r __node:=robotrl_deploy --params-file params.yaml

Parameters (``/**: ros__parameters:`` YAML, ``-p name:=value`` or ``name:=value``):
``policy`` (spec JSON), ``robot`` (profile name or YAML), ``transport`` (auto | cyclonedds |
rclpy), ``domain_id`` (default ``$ROS_DOMAIN_ID`` or 0), ``localhost_only``, ``record_dir``
("" = no bags), ``bag_version`` (9 Jazzy, 8 Humble), ``auto_arm`` (null = profile),
``rate_hz`` (null = profile, then policy), ``duration_s`` (0 = until SIGINT),
``shutdown_s`` (how long the safe command is sent after SIGINT/SIGTERM), ``log_level``,
``rt_priority`` (SCHED_FIFO priority 1-99 for the control loop; 0 = normal scheduling),
``sync_inputs`` (rehearsals with ``robotrl-sim-robot lockstep:=true`` only: each period waits, up
to ``sync_wait_periods`` periods, for inputs whose ``header.stamp`` is newer than the last used and
equal across inputs, so every command answers the state of the step before; never on hardware),
``sync_wait_periods`` (default 0.8: the tick keeps its deadline; a rehearsal on a loaded machine may
wait longer, e.g. 4, and then counts the periods its ticks overran as ``missed_periods``; a wait that
still times out uses the older state and counts ``sync_timeouts``),
``use_sim_time`` (rclpy: the node's ROS clock follows ``/clock``; deadlines and input ages stay
on the monotonic clock), ``scenario`` (the task's scenario parameters of the episodes this run
records, a mapping ``scenario:="{tool_family: 2, friction: 0.6}"`` or a YAML file of one; each bag's
metadata gets ``scenario.<name>``, so ``robotrl twin`` rebuilds the scene from it and ``robotrl twin
triage`` writes a reproduced failure's scenario file; empty: none recorded).

On rclpy (``transport:=auto`` picks it when ``import rclpy`` works) the node is a real ROS 2
node named by ``-r __node:=`` (default ``robotrl_deploy``) in ``-r __ns:=``, listed by ``ros2
node list``, with these parameters declared on it (``ros2 param get``).

The node talks to a ``robotrl.deploy.robot.Robot`` (``get_observation``, ``send_action``),
by default a ``TopicRobot`` on ROS 2 topics; tests drive it through ``FakeRobot`` in process.
Each period the loop wakes at ``t0 + k * period`` (monotonic clock), drains the robot's inputs,
runs ``SafetyChain.step``, sends the command through the robot and publishes the debug topics
(``<debug_prefix>/observation|action|command|timing``) and, at 10 Hz or on an event,
``/robotrl/status``. A wake-up later than one period counts as a missed period and the
schedule skips ahead, never bunching ticks. SIGINT or SIGTERM stops the loop, publishes
the DAMP command for ``shutdown_s`` and exits 0.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from robotrl.deploy import msgs
from robotrl.deploy.cli import StopSignals, console_front
from robotrl.deploy.observation import required_inputs, static_inputs
from robotrl.deploy.params import scenario_param
from robotrl.deploy.profile import RobotProfile, load_profile
from robotrl.deploy.robot import Robot, Telemetry
from robotrl.deploy.runtime import OnnxPolicy
from robotrl.deploy.safety import Mode, SafetyChain
from robotrl.deploy.transport import Transport

log = logging.getLogger("robotrl.deploy")

DEFAULTS: dict[str, Any] = {
    "policy": "", "robot": "", "transport": "auto", "domain_id": None, "localhost_only": False,
    "record_dir": "", "bag_version": 9, "auto_arm": None, "rate_hz": None, "duration_s": 0.0,
    "shutdown_s": 0.1, "log_level": "INFO", "rt_priority": 0, "sync_inputs": False, "use_sim_time": False,
    "scenario": "", "sync_wait_periods": 0.8,
}
LEVEL = {Mode.PASSIVE: 0, Mode.SOFT_START: 0, Mode.POLICY: 0, Mode.HOLD: 1, Mode.DAMP: 2}


def _vector(values: np.ndarray | list[float]) -> msgs.Float64MultiArray:
    return msgs.Float64MultiArray(data=[float(v) for v in values])


class PolicyNode:
    """Drives a ``Robot`` with the safety chain on absolute deadlines (module docstring).

    Args:
        params: the node parameters (``DEFAULTS`` keys, plus ``remap`` for topic remaps).
        robot: the robot to drive; default a ``TopicRobot`` on a transport built from ``params``.
        telemetry: where status and debug vectors go; default ``TopicTelemetry`` on that transport
            (required with a ``robot`` of your own).
        clock: the monotonic clock (``time.monotonic``; tests pass a manual one).

    Attributes:
        ticks: control periods run so far (the node's period counter).
        input_tick: input name -> the tick (0-based) at which its last accepted message was taken.

    """

    def __init__(self, params: dict[str, Any], robot: Robot | None = None, telemetry: Telemetry | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not params["policy"] or not params["robot"]:
            raise ValueError("robotrl-deploy needs policy:=<policy.json from robotrl export> and "
                             "robot:=<profile name or YAML>.")
        if (robot is None) != (telemetry is None):
            raise ValueError("PolicyNode: pass both robot= and telemetry= (e.g. FakeRobot and MemoryTelemetry), "
                             "or neither for ROS 2 topics.")
        self.params = params
        self.clock = clock
        self.lifecycle = "unconfigured"
        self.policy = OnnxPolicy(params["policy"])
        self.spec = self.policy.spec
        if not self.spec.get("obs_terms"):
            raise ValueError(f"{params['policy']} has no obs_terms: its task has no deploy hook "
                             "(tasks/<name>/deploy.py::obs_terms); add one and re-export.")
        self.profile: RobotProfile = robot.profile if robot is not None else load_profile(params["robot"])
        rate = params["rate_hz"] or self.profile.rate_hz or self.spec["rate_hz"]
        self.period = 1.0 / float(rate)
        if abs(self.period - self.spec["step_dt"]) > 1e-6:
            log.warning("running at %.1f Hz; the policy was trained at %.1f Hz", rate, 1.0 / self.spec["step_dt"])
        self.sync_wait = float(params.get("sync_wait_periods", DEFAULTS["sync_wait_periods"]))
        if not math.isfinite(self.sync_wait) or self.sync_wait <= 0:
            raise ValueError(f"sync_wait_periods={params.get('sync_wait_periods')!r}: give a positive number of "
                             "control periods (0.8 keeps every tick on its deadline).")
        self.auto_arm = self.profile.auto_arm if params["auto_arm"] is None else bool(params["auto_arm"])
        self.chain = SafetyChain(self.spec, self.profile, self.period)
        self.required = required_inputs(self.spec["obs_terms"])
        self.static = static_inputs(self.spec["obs_terms"])  # latched (the route): needed to arm, never stale
        self.scenario = scenario_param(params["scenario"], "robotrl-deploy")
        self.recorder = None
        if params["record_dir"]:
            from robotrl.deploy.recorder import Recorder

            self.recorder = Recorder(params["record_dir"], self._bag_metadata(), int(params["bag_version"]))
        self.transport: Transport | None = None
        if robot is None:
            robot, telemetry = self._topic_robot(params)
        if robot.joint_names != list(self.spec["joint_names"]):
            raise ValueError(f"robot {robot.name!r} takes joints {robot.joint_names}; the policy commands "
                             f"{self.spec['joint_names']}: build the robot with the spec's joint_names.")
        self.robot: Robot = robot
        self.telemetry: Telemetry = telemetry
        self.state = robot.state
        self.missed_periods = 0
        self.ticks = 0
        self.input_tick: dict[str, int] = {}
        self._estop_seen: float | None = None
        self._estop_pressed = False
        self._stop = False
        self._last_status = -math.inf
        self._last_synced: float | None = None
        self._latest: dict[str, tuple[str, Any, int]] = {}
        self.robot.connect()
        self.lifecycle = "inactive"

    # --- setup ----------------------------------------------------------------------
    def _topic_robot(self, params: dict[str, Any]) -> tuple[Robot, Telemetry]:
        from robotrl.deploy.ros_robot import TopicRobot, TopicTelemetry
        from robotrl.deploy.transport import make_transport

        domain = params["domain_id"] if params["domain_id"] is not None else int(os.environ.get("ROS_DOMAIN_ID", 0))
        declared = {k: params[k] for k in DEFAULTS if k in params}
        self.transport = make_transport(params["transport"], int(domain), bool(params["localhost_only"]),
                                        params.get("node_name", "robotrl_deploy"), params.get("namespace", "/"),
                                        declared)
        remap = params.get("remap", lambda t: t)
        robot = TopicRobot(self.profile, self.spec["joint_names"], self.required + self.static, self.transport,
                           self.period, remap)
        return robot, TopicTelemetry(self.profile, self.transport, remap)

    def _bag_metadata(self) -> dict[str, str]:
        from robotrl.deploy.spec import sha256_file

        return {
            "policy_sha256": self.spec["onnx_sha256"], "policy_spec_sha256": sha256_file(self.params["policy"]),
            "config_hash": self.spec.get("config_hash", ""), "config_yaml": self.spec.get("config_yaml", ""),
            "code_version": self.spec.get("code_version", ""), "robot_profile": self.profile.name,
            "task": self.spec.get("task", {}).get("name", ""), "rate_hz": f"{1.0 / self.period:g}",
            **{f"scenario.{k}": repr(v) for k, v in self.scenario.items()},
        }

    # --- per period -------------------------------------------------------------------
    def _drain_inputs(self, now: float, wall_ns: int) -> None:
        for rx in self.robot.get_observation().received:
            stamp_ns = wall_ns - int((now - rx.arrival) * 1e9)
            self._latest[rx.name] = (rx.topic, rx.msg, stamp_ns)
            if self.recorder:
                self.recorder.write(rx.topic, rx.msg, stamp_ns)
            if rx.accepted or rx.name == "estop":
                self.input_tick[rx.name] = self.ticks
            if rx.name == "estop":
                self._estop_seen = rx.arrival
                if rx.msg.data:
                    self._estop_pressed = True
                elif self._estop_pressed and self.chain.mode in (Mode.PASSIVE, Mode.DAMP, Mode.HOLD):
                    self._estop_pressed = False  # released; the latched fault still needs a re-arm
            elif rx.name == "arm" and rx.msg.data:
                self._arm(now)

    def _estop_ok(self, now: float) -> bool:
        s = self.profile.safety
        if not s.estop_required:
            return not self._estop_pressed
        fresh = self._estop_seen is not None and now - self._estop_seen <= s.estop_timeout_s
        return fresh and not self._estop_pressed

    def _arm_conditions(self, now: float) -> dict[str, bool]:
        limit = self.profile.safety.stale_hold_periods * self.period
        conditions = {f"fresh:{src}": self.state.age(src, now) <= limit for src in self.required}
        conditions.update({f"have:{src}": src in self.state.stamp for src in self.static})
        conditions["estop"] = self._estop_ok(now)
        return conditions

    def _arm(self, now: float) -> bool:
        if not self.chain.arm(self.state, now, self._arm_conditions(now)):
            return False
        if self.recorder:
            self.recorder.start_episode()
            for topic, msg, stamp_ns in self._latest.values():  # the inputs the first command answers
                self.recorder.write(topic, msg, stamp_ns)
        return True

    def tick(self, deadline: float) -> None:
        """One control period: inputs, chain, the command to the robot, debug, record."""
        now = self.clock()
        wall_ns = time.time_ns()
        self._drain_inputs(now, wall_ns)
        if self.params["sync_inputs"] and self.chain.mode in (Mode.SOFT_START, Mode.POLICY):
            now = self._wait_for_sync(deadline + self.sync_wait * self.period, wall_ns)
        if (self.auto_arm and self.chain.mode == Mode.PASSIVE and not self.chain.faults
                and all(self._arm_conditions(now).values())):
            self._arm(now)
        result = self.chain.step(self.state, now, self.required, self._estop_ok(now), self.policy)
        self._last_synced = self.state.header_time.get("joint_states")
        published = None
        if result.command is not None:
            sent = self.robot.send_action(result.command)
            published = self.clock()
            if not np.array_equal(sent, result.command):
                self.chain.counters["robot_clipped"] += 1
            self.chain.last_command = sent  # the delta cap of the next period starts from what was sent
            self._report_vectors(result, sent, wall_ns)
        self.ticks += 1
        ages = [self.state.age(s, now) for s in self.required]
        timing = [float(self.ticks), deadline, now, published or math.nan,
                  (published or self.clock()) - now, max(ages) if ages else 0.0, float(self.missed_periods)]
        self._report("timing", _vector(timing), wall_ns)
        if result.events or now - self._last_status >= 0.1:
            self._publish_status(result.events, now, wall_ns)

    def _wait_for_sync(self, until: float, wall_ns: int) -> float:
        """Wait until ``until`` for equal, new input stamps; returns the time the wait ended.

        A stop request ends the wait without counting a time-out: a rehearsal's sim that has run its
        episodes sends no more states, and SIGINT must not wait out ``sync_wait_periods``.
        """
        times = self.state.header_time
        while True:
            stamps = {times.get(s) for s in self.required}
            if (len(stamps) == 1 and None not in stamps and stamps.pop() != self._last_synced) or self._stop:
                break
            if self.clock() >= until:
                self.chain.counters["sync_timeouts"] += 1
                break
            time.sleep(0.0002)
            self._drain_inputs(self.clock(), wall_ns)
        return self.clock()

    def _report(self, key: str, msg: Any, wall_ns: int | None) -> None:
        self.telemetry.publish(key, msg)
        if self.recorder:
            self.recorder.write(self.telemetry.topic(key), msg, wall_ns)

    def _report_vectors(self, result: Any, sent: np.ndarray, wall_ns: int) -> None:
        if self.recorder:
            self.recorder.write(self.robot.command_topic, self.robot.last_message, wall_ns)
        self._report("command", _vector(sent), wall_ns)
        if result.obs is not None:
            self._report("observation", _vector(result.obs), wall_ns)
        if result.raw_action is not None:
            self._report("action", _vector(result.raw_action), wall_ns)

    def status(self, events: list[str]) -> msgs.DiagnosticArray:
        """The ``/robotrl/status`` message: mode, lifecycle, faults, counters, events.

        ``ticks`` counts the periods run, including the current one; ``tick/<input>`` is the
        0-based period in which the last accepted message of that input was taken, so
        ``ticks - 1 - tick/<input>`` is its age in control periods.
        """
        values = {"mode": self.chain.mode.value, "lifecycle": self.lifecycle if self.lifecycle in
                  ("unconfigured", "finalized") else self.chain.lifecycle,
                  "faults": ",".join(sorted(self.chain.faults)), "missed_periods": str(self.missed_periods),
                  "ticks": str(self.ticks), "events": ";".join(events)}
        values.update({f"rejected/{k}": str(v) for k, v in sorted(self.state.rejected.items())})
        values.update({f"accepted/{k}": str(v) for k, v in sorted(self.state.accepted.items())})
        values.update({f"tick/{k}": str(v) for k, v in sorted(self.input_tick.items())})
        values.update({k: str(v) for k, v in sorted(self.chain.counters.items())})
        status = msgs.DiagnosticStatus(level=LEVEL[self.chain.mode], name="robotrl/policy_node",
                                       message=self.chain.mode.value, hardware_id=self.profile.name,
                                       values=[msgs.KeyValue(k, v) for k, v in values.items()])
        return msgs.DiagnosticArray(header=msgs.Header(stamp=msgs.stamp(time.time())), status=[status])

    def _publish_status(self, events: list[str], now: float, wall_ns: int) -> None:
        self._report("status", self.status(events), wall_ns)
        self._last_status = now
        for event in events:
            log.info("event %s", event)

    # --- loop ----------------------------------------------------------------------
    def request_stop(self, signum: int = 0, _frame: Any = None) -> None:
        """Signal handler: end the loop at the next wake-up."""
        self._stop = True

    def run(self, duration_s: float = 0.0) -> int:
        """Run until stopped (or ``duration_s``); then send the safe command and finalize."""
        priority = int(self.params["rt_priority"])
        if priority > 0:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
                for thread in self.transport.receive_threads() if self.transport is not None else []:
                    if thread.native_id is not None:
                        os.sched_setscheduler(thread.native_id, os.SCHED_FIFO, os.sched_param(priority))
            except (OSError, AttributeError) as exc:
                raise RuntimeError(f"rt_priority={priority}: cannot switch to SCHED_FIFO ({exc}); grant "
                                   "CAP_SYS_NICE / an rtprio limit, or set rt_priority:=0.") from exc
        gc.collect()
        gc.freeze()  # setup objects leave the collector's generations: shorter pauses in the loop
        sys.setswitchinterval(0.0005)  # the DDS receive thread deserializes in Python: get the GIL back quickly
        self.lifecycle = "active"
        start = self.clock()
        deadline = start + self.period
        while not self._stop and (duration_s <= 0 or self.clock() - start < duration_s):
            remaining = deadline - self.clock()
            if remaining > 0:
                time.sleep(remaining)
            if self._stop:
                break
            late = self.clock() - deadline
            if late >= self.period:
                skipped = int(late // self.period)
                self.missed_periods += skipped
                log.warning("overrun: woke %.1f ms late, %d period(s) missed", late * 1e3, skipped)
                deadline += skipped * self.period
            self.tick(deadline)
            deadline += self.period
        self.shutdown()
        return 0

    def shutdown(self) -> None:
        """Send the DAMP (safe) command for ``shutdown_s`` if anything was commanded, then finalize."""
        if self.chain.last_command is not None:
            end = self.clock() + float(self.params["shutdown_s"])
            while True:
                self.robot.get_observation()  # the measured joint state the DAMP command answers
                safe = self.chain.enforce(self.chain.safe_command(self.state, Mode.DAMP), self.state.joint_pos)
                self.chain.last_command = self.robot.send_action(safe)
                if self.recorder:
                    self.recorder.write(self.robot.command_topic, self.robot.last_message)
                self._report("command", _vector(self.chain.last_command), None)
                if self.clock() >= end:
                    break
                time.sleep(min(self.period, max(0.0, end - self.clock())))
            log.info("shutdown: safe (DAMP) command sent")
        self.robot.disconnect()
        self.lifecycle = "finalized"
        self._report("status", self.status(["shutdown"]), None)
        if not self.telemetry.flush(1.0):  # closing the transport at once could drop the final status
            log.warning("shutdown: the final status was not acknowledged by every reader within 1 s")
        if self.recorder:
            self.recorder.stop_episode()
        if self.transport is not None:
            self.transport.close()


def main(argv: list[str] | None = None) -> int:
    """Console script ``robotrl-deploy``; see the module docstring."""
    front = console_front(sys.argv[1:] if argv is None else argv, __doc__ or "", "robotrl_deploy", DEFAULTS,
                          "robotrl-deploy", required={"policy": "policy.json from robotrl export",
                                                      "robot": "profile name or YAML"})
    if isinstance(front, int):
        return front
    args, params = front
    params.update(remap=args.remap, node_name=args.node_name, namespace=args.namespace)
    signals = StopSignals()  # a Ctrl-C during set-up stops the node cleanly once it exists
    node = PolicyNode(params)
    signals.attach(node.request_stop)
    return node.run(float(params["duration_s"]))


if __name__ == "__main__":
    sys.exit(main())
