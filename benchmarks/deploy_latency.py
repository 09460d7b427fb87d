"""Deploy latency: observation -> command over ROS 2 on loopback (Cyclone DDS or rclpy), policy node at 50 Hz.

    flock /tmp/robotrl-cpu.lock python benchmarks/deploy_latency.py --transport rclpy [--rt-priority 10]
        [--seconds 60] [--sensor-hz 200] [--policy export/policy.json]

    flock /tmp/robotrl-cpu.lock python benchmarks/deploy_latency.py --transport both --rt-priority 10 \\
        --repeats 3 --seconds 30    # the four configurations, interleaved, 3 runs each

``--transport`` is used by both the node and this robot-side process (``rclpy``: real rclpy on
Fast DDS, ``robotrl[ros2]``). Keys are saved under the tag ``<transport>_<rt|no_rt>`` unless
``--tag`` says otherwise, merged into the JSON, so the four configurations sit side by side.
Missed periods on a shared VM vary from run to run (0-12 in single 30 s runs of the same
configuration here), so compare them over interleaved repeats: ``missed_periods`` is the sum over
the runs, ``missed_periods_per_run`` lists them, and the percentiles pool every run's periods.

A real ``robotrl-deploy`` process (humanoid-sized MLP in onnxruntime, full safety chain,
forward_command output, status/debug topics, no recording) runs against this process, which
plays the robot: it publishes JointState, Imu and Odometry at ``--sensor-hz`` and stamps each
command on arrival (receive thread, monotonic clock; both processes share the host clock).

* ``latency``: command arrival at the robot minus the node's wake-up for that period, i.e. the
  latency the deploy stack adds between reading the newest observation and the command
  reaching the controller (wake-up, input drain, observation, ONNX, safety chain, serialization,
  DDS loopback transit). Sensor age at wake-up is reported apart (``obs_age``, set by the
  sensor rate, not by the stack).
* ``jitter``: wake-up minus the absolute deadline. ``missed_periods``: periods the node skipped
  because it woke a full period late.

Without ``--policy`` an untrained humanoid policy (same network size as training's default) is
exported to a temporary directory. Results: ``benchmarks/results/deploy_latency.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import save, table  # noqa: E402


def make_policy(tmp: Path) -> Path:
    import torch
    from robotrl.tasks.humanoid.config import HumanoidConfig

    from robotrl.envs.task_env import TaskEnv
    from robotrl.export.onnx import export_policy
    from robotrl.policies.mlp import ActorCritic, PolicyConfig
    from robotrl.sim.backend import SimConfig
    from robotrl.storage.checkpoint import prefixed, save_checkpoint

    cfg = HumanoidConfig()
    env = TaskEnv(cfg, SimConfig(num_envs=1))
    d = env.obs_dims
    policy = ActorCritic(d["policy"], d["critic"], env.num_actions, PolicyConfig())
    task = env.task
    meta = {"task": {"name": "humanoid", "config": asdict(cfg)},
            "policy": {"obs_dim": policy.obs_dim, "critic_dim": policy.critic_dim, "action_dim": policy.action_dim,
                       "config": asdict(policy.cfg)},
            "obs_layout": [list(x) for x in task.obs_layout()], "joint_names": task.joint_names,
            "action_spec": task.action_spec(), "step_dt": env.step_dt, "config_yaml": "", "config_hash": "bench",
            "env_steps": 0}
    save_checkpoint(tmp / "run" / "checkpoints", 0, prefixed(policy.state_dict(), "policy"), meta)
    torch.set_num_threads(1)
    return export_policy(str(tmp / "run"), str(tmp / "export"))[1]


def measure(args: argparse.Namespace, transport: str, rt_priority: int, spec: Path, tmp: Path) -> dict:
    """One run: a fresh ``robotrl-deploy`` process on ``transport`` against this robot side.

    Returns the raw per-period arrays (ms) and the node's missed-period count.
    """
    from robotrl.deploy import msgs
    from robotrl.deploy.transport import RELIABLE_QOS, SENSOR_QOS, make_transport

    prof = yaml.safe_load((tmp / "robot.yaml").read_text())
    joints = prof["joints"]["names"]
    # the robot side runs real-time too (a ros2_control loop does); its transport threads inherit it
    policy = (os.SCHED_FIFO, rt_priority) if rt_priority > 0 else (os.SCHED_OTHER, 0)
    os.sched_setscheduler(0, policy[0], os.sched_param(policy[1]))
    tr = make_transport(transport, domain_id=args.domain, localhost_only=True, node_name="bench_robot")
    pubs = {"js": tr.publisher("/joint_states", msgs.JointState, SENSOR_QOS),
            "imu": tr.publisher("/imu/data", msgs.Imu, SENSOR_QOS),
            "odom": tr.publisher("/odom", msgs.Odometry, SENSOR_QOS)}
    cmd_sub = tr.subscription(prof["output"]["topic"], msgs.Float64MultiArray, RELIABLE_QOS)
    timing_sub = tr.subscription("/robotrl/timing", msgs.Float64MultiArray, RELIABLE_QOS)
    env = {**os.environ, "ROS_DOMAIN_ID": str(args.domain)}
    node = subprocess.Popen([sys.executable, "-m", "robotrl.deploy.node", f"policy:={spec}",
                             f"robot:={tmp / 'robot.yaml'}", f"transport:={transport}", "localhost_only:=true",
                             "log_level:=ERROR", f"rt_priority:={rt_priority}"], env=env)
    commands, timings = [], []
    period = 1.0 / args.sensor_hz
    rng = np.random.default_rng(0)
    odom = msgs.Odometry()
    odom.pose.pose.position.z = 1.3
    start = None
    next_t = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now >= next_t:
                next_t += period
                pubs["js"].publish(msgs.JointState(name=joints, position=(rng.normal(size=17) * 0.05).tolist(),
                                                   velocity=(rng.normal(size=17) * 0.5).tolist()))
                pubs["imu"].publish(msgs.Imu(orientation=msgs.Quaternion(w=1.0)))
                pubs["odom"].publish(odom)
            commands += [t for t, _ in cmd_sub.take()]
            timings += [m.data for _, m in timing_sub.take()]
            if start is None and commands:
                start = commands[0]  # measure from the first command on (node armed)
            if start is not None and time.monotonic() - start >= args.seconds:
                break
            if node.poll() is not None:
                raise RuntimeError(f"robotrl-deploy exited with {node.returncode}")
            time.sleep(max(0.0, min(0.0005, next_t - time.monotonic())))
    finally:
        stop_at = time.monotonic()
        node.send_signal(2)
        node.wait(10)
    time.sleep(0.1)
    timings += [m.data for _, m in timing_sub.take()]  # commands after SIGINT are the shutdown's DAMP: not counted
    tr.close()
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    t = np.asarray([row for row in timings if np.isfinite(row[3])])  # periods that published a command
    t = t[np.argsort(t[:, 2])]
    wakes = t[:, 2]
    arrivals = np.asarray([c for c in commands if c < stop_at])
    # the tick that sent each command: the last wake-up before its arrival (a command can arrive
    # before the node's write() returns, so the publish stamp cannot be used to match)
    idx = np.searchsorted(wakes, arrivals, side="right") - 1
    ok = idx >= 0
    return {"latency": (arrivals[ok] - t[idx[ok], 2]) * 1e3, "jitter": (t[:, 2] - t[:, 1]) * 1e3,
            "compute": t[:, 4] * 1e3, "age": t[:, 5] * 1e3, "missed": int(max(row[6] for row in timings)),
            "commands": int(ok.sum())}


def measure_isolated(args: argparse.Namespace, transport: str, rt_priority: int, spec: Path, tmp: Path) -> dict:
    """``measure`` in a fresh robot-side process: no middleware threads or scheduling policy carried
    over from an earlier configuration (Fast DDS and Cyclone keep process-wide threads alive)."""
    raw = tmp / f"raw_{transport}_{rt_priority}.npz"
    cmd = [sys.executable, __file__, "--_measure", str(raw), "--transport", transport,
           "--rt-priority", str(rt_priority),
           "--seconds", str(args.seconds), "--sensor-hz", str(args.sensor_hz), "--rate-hz", str(args.rate_hz),
           "--domain", str(args.domain), "--policy", str(spec)]
    subprocess.run(cmd, check=True)
    with np.load(raw) as z:
        return {k: (z[k] if z[k].ndim else int(z[k])) for k in z.files}


def figures_of(runs: list[dict], args: argparse.Namespace, transport: str, rt_priority: int) -> dict:
    """Percentiles pooled over the runs' periods; missed periods summed, and listed per run."""
    pool = {k: np.concatenate([r[k] for r in runs]) for k in ("latency", "jitter", "compute", "age")}
    pct = lambda x, q: float(np.percentile(x, q))  # noqa: E731
    missed = [r["missed"] for r in runs]
    return {
        "latency_p50_ms": pct(pool["latency"], 50), "latency_p99_ms": pct(pool["latency"], 99),
        "latency_max_ms": float(pool["latency"].max()),
        "jitter_p50_ms": pct(pool["jitter"], 50), "jitter_p99_ms": pct(pool["jitter"], 99),
        "jitter_max_ms": float(pool["jitter"].max()),
        "node_compute_p50_ms": pct(pool["compute"], 50), "node_compute_p99_ms": pct(pool["compute"], 99),
        "obs_age_p50_ms": pct(pool["age"], 50), "obs_age_p99_ms": pct(pool["age"], 99),
        "missed_periods": int(sum(missed)), "missed_periods_per_run": ",".join(map(str, missed)),
        "missed_period_rate": float(sum(missed) / (sum(missed) + sum(r["commands"] for r in runs))),
        "runs": len(runs), "commands": int(sum(r["commands"] for r in runs)), "seconds": args.seconds,
        "rate_hz": args.rate_hz, "sensor_hz": args.sensor_hz, "load_avg_1min_at_end": os.getloadavg()[0],
        "transport": f"{transport} loopback (localhost_only)", "rt_priority": rt_priority,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="per run")
    ap.add_argument("--sensor-hz", type=float, default=200.0)
    ap.add_argument("--rate-hz", type=float, default=50.0)
    ap.add_argument("--policy", default="")
    ap.add_argument("--domain", type=int, default=231)
    ap.add_argument("--tag", default=None, help="prefix of the saved keys (default <transport>_<rt|no_rt>)")
    ap.add_argument("--transport", default="cyclonedds", choices=["cyclonedds", "rclpy", "both"],
                    help="both: cyclonedds and rclpy, each with and without --rt-priority, interleaved")
    ap.add_argument("--rt-priority", type=int, default=0,
                    help="SCHED_FIFO priority of the node and of this robot-side process (0: off)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per configuration (interleaved with --transport both)")
    ap.add_argument("--_measure", default="", help=argparse.SUPPRESS)  # one run in this process, raw arrays to a file
    args = ap.parse_args()
    if args.seconds > 60:
        ap.error("--seconds is capped at 60 on this shared machine")
    if args.transport == "both" and args.rt_priority <= 0:
        ap.error("--transport both compares with and without real-time priority: give --rt-priority N > 0")

    from robotrl.deploy.profile import profile_path

    if args._measure:
        raw = Path(args._measure)
        np.savez(raw, **measure(args, args.transport, args.rt_priority, Path(args.policy), raw.parent))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="deploy_latency_"))
    spec = Path(args.policy) if args.policy else make_policy(tmp)
    prof = yaml.safe_load(profile_path("humanoid_sim").read_text())
    prof["rate_hz"] = args.rate_hz
    (tmp / "robot.yaml").write_text(yaml.safe_dump(prof))

    if args.transport == "both":
        configs = [(t, p) for t in ("cyclonedds", "rclpy") for p in (0, args.rt_priority)]
    else:
        configs = [(args.transport, args.rt_priority)]
    runs: dict[tuple[str, int], list[dict]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for transport, rt_priority in configs:
            runs[transport, rt_priority].append(measure_isolated(args, transport, rt_priority, spec, tmp))
    out: dict = {}
    for (transport, rt_priority), done in runs.items():
        figures = figures_of(done, args, transport, rt_priority)
        rows = [(k, f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in figures.items()]
        print(table(rows, f"deploy latency, {transport}, rt_priority {rt_priority}, {args.rate_hz:g} Hz policy, "
                          f"{len(done)} x {args.seconds:g} s"))
        tag = args.tag if args.tag is not None and len(configs) == 1 else \
            f"{transport}_{'rt' if rt_priority > 0 else 'no_rt'}"
        out |= {f"{tag}_{k}" if tag else k: v for k, v in figures.items()}
    if len(configs) > 1:
        out["command"] = " ".join(["python", "benchmarks/deploy_latency.py", *sys.argv[1:]])
    print(f"saved {save('deploy_latency', out, merge=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
