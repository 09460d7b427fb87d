"""Export: ONNX + JSON spec, parity with torch within 1e-5, JSON/ONNX-only loading."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from robotrl.deploy.runtime import OnnxPolicy

from robotrl.export.cli import main as export_main
from robotrl.policies.io import load_policy


def test_runtime_matches_torch_within_1e5(humanoid_export):
    run, _, spec_path = humanoid_export
    policy, _ = load_policy(run)
    runtime = OnnxPolicy(spec_path)
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(512, policy.obs_dim, generator=gen) * torch.logspace(-2, 2, 512).unsqueeze(1)
    with torch.no_grad():
        expected = policy(obs).numpy()
    single = np.stack([runtime(o) for o in obs.numpy()])
    assert np.abs(single - expected).max() <= 1e-5
    assert np.abs(runtime(obs.numpy()) - expected).max() <= 1e-5
    # not vacuous: the outputs vary, stay within the [-1, 1] clamp, and some saturate at it
    assert expected.std() > 1e-3
    assert np.abs(single).max() <= 1.0 and np.abs(expected).max() <= 1.0
    saturated = np.abs(single) == 1.0
    assert saturated.any() and not saturated.all(), saturated.mean()


def test_spec_contents(humanoid_export):
    run, onnx_path, spec_path = humanoid_export
    spec = json.loads(spec_path.read_text())
    _, meta = load_policy(run)
    assert spec["joint_names"] == meta["joint_names"] and len(spec["joint_names"]) == 17
    assert spec["obs_layout"] == meta["obs_layout"]
    assert sum(t["size"] for t in spec["obs_terms"]) == spec["obs_dim"] == 63
    assert [t["name"] for t in spec["obs_terms"]] == [n for n, _ in meta["obs_layout"]]
    assert spec["action_spec"] == meta["action_spec"] and spec["config_hash"] == "test0000"
    assert spec["rate_hz"] == pytest.approx(1 / meta["step_dt"])
    assert spec["parity_max_abs_err"] <= 1e-5 and len(spec["joint_range"]) == 17


def test_loader_rejects_tampered_model_and_non_json(humanoid_export, tmp_path):
    _, onnx_path, spec_path = humanoid_export
    bad = tmp_path / "policy.json"
    bad.write_text(spec_path.read_text())
    (tmp_path / "policy.onnx").write_bytes(onnx_path.read_bytes() + b"\0")
    with pytest.raises(ValueError, match="do not belong together"):
        OnnxPolicy(bad)
    with pytest.raises(ValueError, match="only JSON"):
        OnnxPolicy(tmp_path / "policy.pkl")
    spec = json.loads(spec_path.read_text())
    spec["onnx"] = "weights.pt"
    bad.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="only .onnx"):
        OnnxPolicy(bad)


def test_runtime_imports_without_torch_or_mujoco(humanoid_export):
    _, _, spec_path = humanoid_export
    code = (
        "import sys\n"
        "for m in ('torch', 'mujoco'): sys.modules[m] = None\n"  # any import of them now fails
        "import numpy as np\n"
        "import robotrl.deploy.node, robotrl.deploy.recorder, robotrl.deploy.dds, robotrl.deploy.ros_robot\n"
        "import robotrl.deploy.fake_robot\n"
        "from robotrl.deploy.runtime import OnnxPolicy\n"
        f"p = OnnxPolicy({str(spec_path)!r})\n"
        "print(p(np.zeros(p.spec['obs_dim'], np.float32)).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(17,)"


def test_cli(humanoid_export, tmp_path, capsys):
    run, _, _ = humanoid_export
    assert export_main([f"checkpoint={run}", f"out={tmp_path}"]) == 0
    assert (tmp_path / "policy.onnx").is_file() and (tmp_path / "policy.json").is_file()
    assert export_main(["checkpoint"]) == 2
    assert "usage" in capsys.readouterr().out
