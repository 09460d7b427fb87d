"""Twin report: per-episode metrics as JSON and real-versus-sim joint overlays as PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robotrl.twin.episode import Episode
from robotrl.twin.metrics import base_drift, divergence_time, joint_errors
from robotrl.twin.replay import Rollout

OBJECT_EPS_M = 0.01
"""An object has diverged when its position is off by more than this (m) for ``m`` steps."""


def _object_path(ep: Episode, roll: Rollout, world: int, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(sim (n, 3), real (n, 3))`` positions of the scene's object, or None without a recorded or replayed one."""
    if roll.object_pos is None or ep.object_pose is None or not np.all(np.isfinite(ep.object_pose[:n, :3])):
        return None
    return roll.object_pos[world, :n], ep.object_pose[:n, :3]


def episode_metrics(ep: Episode, roll: Rollout, world: int, eps: float = 0.05, m: int = 5) -> dict[str, Any]:
    """Metrics of one twin world against its episode (q, dq, tau errors; divergence time; base drift).

    With an object in the bag and the twin (tool_use's tool): ``object_pos_rmse_m``, ``object_pos_max_m``
    (position error norms) and ``object_divergence_time_s`` (``OBJECT_EPS_M`` per axis for ``m`` steps).
    """
    n = min(int(roll.length[world]), ep.num_steps)
    out: dict[str, Any] = {"episode": ep.path.name, "steps": n}
    for key in ("q", "dq", "tau"):
        real = getattr(ep, key)[:n]
        sim = getattr(roll, key)[world, :n]
        start = 1 if key == "tau" else 0  # the effort of state 0 predates the episode's first command
        out[key] = joint_errors(sim[start:], real[start:])
    out["divergence_time_s"] = divergence_time(roll.q[world, :n], ep.q[:n], ep.dt, eps, m)
    if roll.base_pos is not None and ep.base_pos is not None:
        out["base_drift_m"] = base_drift(roll.base_pos[world, :n], ep.base_pos[:n])
    path = _object_path(ep, roll, world, n)
    if path is not None:
        err = np.linalg.norm(path[0] - path[1], axis=1)
        out["object_pos_rmse_m"] = float(np.sqrt(np.mean(err**2)))
        out["object_pos_max_m"] = float(err.max())
        out["object_divergence_time_s"] = divergence_time(path[0], path[1], ep.dt, OBJECT_EPS_M, m)
    return out


def summarize_rollouts(rollouts: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per rollout name, the means over its episodes of ``episode_metrics`` rows.

    Keys: ``q_rmse`` (rad), ``dq_rmse`` (rad/s) and ``tau_rmse`` (N m), each the joint-mean RMSE;
    ``divergence_time_s`` (an episode that never diverges counts its length); ``base_drift_final_m``
    when the episodes record a base; ``object_pos_rmse_m`` and ``object_divergence_time_s`` when they
    record an object.
    """
    out: dict[str, dict[str, float]] = {}
    for name, rows in rollouts.items():
        summary = {f"{key}_rmse": float(np.mean([np.mean(r[key]["rmse"]) for r in rows])) for key in ("q", "dq", "tau")}
        summary["divergence_time_s"] = float(np.mean([r["divergence_time_s"] for r in rows]))
        drift = [r["base_drift_m"]["final"] for r in rows if isinstance(r.get("base_drift_m"), dict)]
        if drift:
            summary["base_drift_final_m"] = float(np.mean(drift))
        for key in ("object_pos_rmse_m", "object_divergence_time_s"):
            values = [r[key] for r in rows if key in r]
            if values:
                summary[key] = float(np.mean(values))
        out[name] = summary
    return out


def write_report(out_dir: str | Path, episodes: list[Episode], rolls: dict[str, Rollout],
                 extra: dict[str, Any] | None = None) -> tuple[Path, list[Path]]:
    """``report.json`` plus one overlay PNG per episode.

    Each PNG has the joint positions and torques of the first 6 joints, real against each named rollout
    (e.g. before/after calibration), and, for a bag with an object, a last row with the object's position
    (x, y, z) and each rollout's position error.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    body: dict[str, Any] = {"rollouts": {}, **(extra or {})}
    pngs = []
    for name, roll in rolls.items():
        body["rollouts"][name] = [episode_metrics(episodes[roll.episode[w]], roll, w) for w in range(len(roll.length))]
    body["summary"] = summarize_rollouts(body["rollouts"])
    for e, ep in enumerate(episodes):
        J = min(6, len(ep.joint_names))
        first = {name: int(np.flatnonzero(roll.episode == e)[0]) for name, roll in rolls.items()}
        paths = {name: _object_path(ep, roll, first[name], ep.num_steps) for name, roll in rolls.items()}
        rows = J + int(any(p is not None for p in paths.values()))
        fig, axes = plt.subplots(rows, 2, figsize=(12, 1.6 * rows), sharex=True, squeeze=False)
        for j in range(J):
            for col, (key, unit) in enumerate((("q", "rad"), ("tau", "N m"))):
                ax = axes[j, col]
                ax.plot(ep.t, getattr(ep, key)[:, j], "k", lw=2, label="real")
                for name, roll in rolls.items():
                    ax.plot(ep.t, getattr(roll, key)[first[name], : ep.num_steps, j], lw=1, label=name)
                ax.set_ylabel(f"{ep.joint_names[j]}\n{key} ({unit})", fontsize=7)
        if rows > J:
            assert ep.object_pose is not None  # _object_path found one
            for i, style in enumerate(("-", "--", ":")):
                axes[J, 0].plot(ep.t, ep.object_pose[:, i], "k" + style, lw=2, label=f"real {'xyz'[i]}")
            for name, obj in paths.items():
                if obj is not None:
                    for i, style in enumerate(("-", "--", ":")):
                        axes[J, 0].plot(ep.t, obj[0][:, i], style, lw=1, label=f"{name} {'xyz'[i]}")
                    axes[J, 1].plot(ep.t, np.linalg.norm(obj[0] - obj[1], axis=1), lw=1, label=name)
            axes[J, 0].set_ylabel("object\nposition (m)", fontsize=7)
            axes[J, 1].set_ylabel("object\nerror (m)", fontsize=7)
            axes[J, 0].legend(fontsize=6, ncol=3)
        axes[0, 0].set_title("joint position", fontsize=8)
        axes[0, 1].set_title("joint torque (effort)", fontsize=8)
        axes[0, 0].legend(fontsize=7)
        for ax in axes[-1]:
            ax.set_xlabel("t (s)", fontsize=7)
        fig.tight_layout()
        path = out / f"{ep.path.name}_overlay.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        pngs.append(path)
    report = out / "report.json"
    report.write_text(json.dumps(body, indent=1))
    return report, pngs
