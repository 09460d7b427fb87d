"""The exported policy's JSON spec: what ``robotrl export`` writes and the runtime reads.

Keys (``SPEC_VERSION`` 1)::

    format           "robotrl-policy"      version  1
    onnx             file name of the ONNX model next to the spec
    onnx_sha256      hash of that file (the "policy hash"; checked on load)
    input / output   ONNX tensor names ("obs" (B, P) float32 -> "action" (B, A) in [-1, 1])
    obs_dim, action_dim
    obs_layout       [[name, size], ...] in observation order
    obs_terms        [{name, size, source, scale, offset}] how to rebuild each slice on the robot
                     (null when the task has no deploy hook)
    kinematics       the kinematic tree for forward kinematics on the robot (robotrl.deploy.kinematics),
                     from the hook's kinematics(model, cfg); null when the task needs none
    obs_norm         {"mean": [P], "std": [P], "clip": c} the policy's input normalizer
    joint_names      actuated joints in action order
    joint_range      [[lo, hi], ...] per joint from the training model (rad), or null
    action_spec      {kind: position|torque|velocity, scale: [A], offset: [A], default_pose: [A]}
    step_dt, rate_hz control period and rate
    task             {name, config}
    config_hash, config_yaml, iteration, env_steps, code_version

Only JSON and ONNX are ever loaded: no pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

FORMAT = "robotrl-policy"
SPEC_VERSION = 1
REQUIRED = ("onnx", "onnx_sha256", "obs_dim", "action_dim", "obs_layout", "joint_names", "action_spec", "step_dt")


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def load_spec(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a policy spec; ``spec["onnx_path"]`` is set to the model's absolute path.

    Raises:
        ValueError: naming the missing key, a wrong format, or a hash mismatch.
        FileNotFoundError: the spec or its ONNX file is missing.

    """
    path = Path(path)
    if path.suffix != ".json":
        raise ValueError(f"Policy spec {path} must be the .json written by `robotrl export` (only JSON is read).")
    with open(path) as f:
        spec = json.load(f)
    if spec.get("format") != FORMAT or spec.get("version") != SPEC_VERSION:
        raise ValueError(
            f"{path} is not a robotrl policy spec v{SPEC_VERSION} (format={spec.get('format')!r}, "
            f"version={spec.get('version')!r}); re-export it with `robotrl export checkpoint=...`."
        )
    missing = [k for k in REQUIRED if k not in spec]
    if missing:
        raise ValueError(f"Policy spec {path} lacks {missing}; re-export it with `robotrl export`.")
    onnx_path = (path.parent / spec["onnx"]).resolve()
    if onnx_path.suffix != ".onnx":
        raise ValueError(f"Policy spec {path} names {spec['onnx']!r}; only .onnx models are loaded.")
    if not onnx_path.is_file():
        raise FileNotFoundError(f"Policy spec {path} names {onnx_path}, which does not exist.")
    actual = sha256_file(onnx_path)
    if actual != spec["onnx_sha256"]:
        raise ValueError(
            f"{onnx_path} has sha256 {actual[:12]}..., the spec expects {spec['onnx_sha256'][:12]}...: "
            "the model and spec do not belong together; re-export both."
        )
    spec["onnx_path"] = str(onnx_path)
    return spec
