"""Export a checkpoint's deterministic policy to ONNX plus the JSON spec the robot reads.

The ONNX graph is ``ActorCritic.forward``: observation normalizer, actor MLP and the
``[-1, 1]`` clamp, ``obs (B, P) float32 -> action (B, A) float32``. After writing, the
model is run in onnxruntime on random observations (spread wide enough to hit the
normalizer's clip) and compared with torch; an export that differs by more than
``tol`` is an error, not a warning. See ``robotrl.deploy.spec`` for the spec keys.
"""

from __future__ import annotations

import inspect
import json
import logging
import subprocess
import warnings
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from robotrl.deploy.spec import FORMAT, SPEC_VERSION, sha256_file
from robotrl.policies.io import load_policy
from robotrl.policies.normalizer import RunningNorm
from robotrl.storage.checkpoint import resolve

log = logging.getLogger(__name__)

PARITY_TOL = 1e-5


def code_version() -> str:
    """``git describe`` of the source tree, or the package version when not in a checkout."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=5, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import version

        return f"robotrl {version('robotrl')}"


def _task_model_info(meta: dict[str, Any]) -> tuple[list | None, list | None, dict | None]:
    """Observation terms and kinematic tree from the task's deploy hook, and the actuated joints' ranges."""
    from robotrl.tasks import robot_io, task_class, task_config_from_meta

    name = meta["task"]["name"]
    task = task_class(name)(task_config_from_meta(meta), 1, torch.device("cpu"))
    model = task.build_model()
    terms = kinematics = None
    module = robot_io(name)
    if module is not None:
        obs_terms = module.obs_terms
        # hooks whose terms depend on task settings the model does not carry take the config too
        terms = obs_terms(model, task.cfg) if len(inspect.signature(obs_terms).parameters) > 1 else obs_terms(model)
        if hasattr(module, "kinematics"):  # forward kinematics the robot side needs (robotrl.deploy.kinematics)
            kinematics = module.kinematics(model, task.cfg)
    else:
        log.warning("task %r has no deploy hook (robot_io.py with obs_terms in the task's folder); the spec carries "
                    "no obs_terms, so robotrl-deploy cannot rebuild its observation from topics", name)
    ranges = []
    import mujoco

    for joint in meta["joint_names"]:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if jid < 0:
            return terms, None, kinematics
        ranges.append([float(v) for v in model.jnt_range[jid]])
    return terms, ranges, kinematics


def _obs_dim(policy: torch.nn.Module) -> int:
    """The policy's ``obs_dim`` (a plain int attribute; ``nn.Module`` types attribute lookups as Tensor | Module)."""
    return cast(int, policy.obs_dim)


def parity_error(policy: torch.nn.Module, onnx_path: Path, samples: int = 256, seed: int = 0) -> float:
    """Max |onnxruntime - torch| over random observations (scaled to exercise the clip).

    ``policy`` is the exported module (``ActorCritic``, or any ``load_policy`` module with an int
    ``obs_dim`` and ``forward(obs (B, P)) -> action (B, A)``).
    """
    import onnxruntime as ort

    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn(samples, _obs_dim(policy), generator=gen)
    obs *= torch.logspace(-2, 2, samples).unsqueeze(1)
    with torch.no_grad():
        expected = policy(obs).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = np.concatenate([session.run(None, {"obs": obs[i:i + 1].numpy()})[0] for i in range(samples)])
    return float(np.abs(got - expected).max())


def export_policy(checkpoint: str, out_dir: str | None = None, tol: float = PARITY_TOL) -> tuple[Path, Path]:
    """Write ``policy.onnx`` and ``policy.json`` for ``checkpoint``; return both paths.

    ``out_dir`` defaults to ``<run dir>/export``. Raises ``RuntimeError`` when the ONNX
    model's outputs differ from torch by more than ``tol``.
    """
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise ImportError("robotrl export checks the model in onnxruntime: pip install robotrl[deploy]") from exc
    weights = resolve(checkpoint)
    policy, meta = load_policy(weights)
    out = Path(out_dir) if out_dir else weights.parent.parent / "export"
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "policy.onnx"
    example = torch.zeros(1, _obs_dim(policy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(policy, (example,), str(onnx_path), input_names=["obs"], output_names=["action"],
                          dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}}, opset_version=17,
                          dynamo=False)
    err = parity_error(policy, onnx_path)
    if not err <= tol:
        raise RuntimeError(f"ONNX export of {weights} differs from torch by {err:.3g} > {tol:g}; not exported.")
    terms, ranges, kinematics = _task_model_info(meta)
    norm = policy.obs_norm
    obs_norm = None
    if isinstance(norm, RunningNorm):
        obs_norm = {"mean": norm.mean.tolist(), "std": torch.sqrt(norm.var + norm.eps).tolist(), "clip": norm.clip}
    spec = {
        "format": FORMAT, "version": SPEC_VERSION,
        "onnx": onnx_path.name, "onnx_sha256": sha256_file(onnx_path), "input": "obs", "output": "action",
        "obs_dim": policy.obs_dim, "action_dim": policy.action_dim,
        "obs_layout": meta["obs_layout"], "obs_terms": terms, "kinematics": kinematics, "obs_norm": obs_norm,
        "joint_names": meta["joint_names"], "joint_range": ranges, "action_spec": meta["action_spec"],
        "step_dt": meta["step_dt"], "rate_hz": 1.0 / meta["step_dt"],
        "task": meta["task"], "config_hash": meta.get("config_hash", ""), "config_yaml": meta.get("config_yaml", ""),
        "iteration": meta.get("iteration"), "env_steps": meta.get("env_steps"),
        "checkpoint": str(weights), "code_version": code_version(), "parity_max_abs_err": err,
    }
    spec_path = out / "policy.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    log.info("exported %s -> %s (parity %.2g)", weights, onnx_path, err)
    return onnx_path, spec_path
