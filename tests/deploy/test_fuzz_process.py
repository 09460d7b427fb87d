"""Process-level fuzz: a wild ONNX policy (outputs up to +-1000, sign flipping every step) drives a
position-controlled arm profile over real DDS; every command received stays within the joint
limits and the per-step delta cap. The hypothesis fuzz of the same chain is in test_safety.py."""

import json
import time

import numpy as np
import pytest
import yaml
from robotrl.deploy.spec import FORMAT, SPEC_VERSION, sha256_file

from tests.deploy.helpers import DdsRobotPeer, free_domain, spawn, stop

onnx = pytest.importorskip("onnx")
pytest.importorskip("cyclonedds")


def wild_policy(tmp_path, joints: list[str], period: float):
    from onnx import TensorProto, helper, numpy_helper

    n = len(joints)
    obs_dim = 3 * n
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.normal(size=(obs_dim, n)) * 50).astype(np.float32), "W")
    scale = numpy_helper.from_array(np.array([1000.0], np.float32), "S")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["h"]), helper.make_node("Sin", ["h"], ["s"]),
         helper.make_node("Mul", ["s", "S"], ["action"])],
        "wild", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", n])], [w, scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, tmp_path / "wild.onnx")
    terms = [{"name": k, "size": n, "source": k, "scale": 1.0, "offset": 0.0}
             for k in ("joint_pos", "joint_vel", "last_action")]
    spec = {"format": FORMAT, "version": SPEC_VERSION, "onnx": "wild.onnx",
            "onnx_sha256": sha256_file(tmp_path / "wild.onnx"), "input": "obs", "output": "action",
            "obs_dim": obs_dim, "action_dim": n, "obs_layout": [[t["name"], n] for t in terms], "obs_terms": terms,
            "obs_norm": None, "joint_names": joints, "joint_range": None, "step_dt": period, "rate_hz": 1 / period,
            "action_spec": {"kind": "position", "scale": [3.0] * n, "offset": [0.0] * n, "default_pose": [0.0] * n},
            "task": {"name": "fuzz", "config": {}}, "config_hash": "fuzz"}
    (tmp_path / "wild.json").write_text(json.dumps(spec))
    return tmp_path / "wild.json"


def test_wild_policy_commands_stay_within_limits_and_delta_cap(tmp_path):
    from robotrl.deploy.profile import load_profile, profile_path

    data = yaml.safe_load(profile_path("example_arm").read_text())
    data.update(auto_arm=True)
    data["safety"].update(estop_required=False, soft_start_s=0.2)
    (tmp_path / "arm.yaml").write_text(yaml.safe_dump(data))
    profile = load_profile(str(tmp_path / "arm.yaml"))
    joints, period = profile.joints.names, 1 / profile.rate_hz
    lo, hi = profile.limits()
    cap = np.minimum(profile.safety.delta_cap, np.asarray(profile.joints.velocity_limits) * period)
    spec = wild_policy(tmp_path, joints, period)
    domain = free_domain()
    from robotrl.deploy import msgs

    robot = DdsRobotPeer(domain, joints, rate_hz=100, cmd_topic=profile.output.topic, cmd_type=msgs.JointTrajectory)
    node = spawn(["robotrl.deploy.node", f"policy:={spec}", f"robot:={tmp_path / 'arm.yaml'}",
                  "transport:=cyclonedds", "log_level:=WARNING"], domain, tmp_path / "node.log")
    rng = np.random.default_rng(1)
    try:
        end = time.monotonic() + 120  # generous: on a loaded machine the loop only waits longer
        while len(robot.commands) < 150 and time.monotonic() < end:
            robot.position = rng.uniform(lo, hi).tolist()  # the measured pose jumps around too
            robot.velocity = rng.uniform(-1, 1, len(joints)).tolist()
            time.sleep(0.01)
    finally:
        assert stop(node) == 0, (tmp_path / "node.log").read_text()[-2000:]
        robot.close()
    cmds = np.asarray([c for _, c in robot.commands])
    assert len(cmds) >= 150
    assert np.all(cmds >= lo - 1e-12) and np.all(cmds <= hi + 1e-12)
    steps = np.abs(np.diff(cmds, axis=0))
    assert np.all(steps <= cap + 1e-9), steps.max(0)
    assert np.any(steps > 0.5 * cap)  # the cap is actually exercised, the commands do move
