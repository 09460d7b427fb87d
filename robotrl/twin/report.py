"""Twin report: per-episode metrics as JSON and real-versus-sim joint overlays as PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robotrl.twin.episode import Episode
from robotrl.twin.metrics import base_drift, divergence_time, joint_errors
from robotrl.twin.replay import Rollout


def episode_metrics(ep: Episode, roll: Rollout, world: int, eps: float = 0.05, m: int = 5) -> dict[str, Any]:
    """Metrics of one twin world against its episode (q, dq, tau errors; divergence time; base drift)."""
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
    return out


def summarize_rollouts(rollouts: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per rollout name, the means over its episodes of ``episode_metrics`` rows.

    Keys: ``q_rmse`` (rad), ``dq_rmse`` (rad/s) and ``tau_rmse`` (N m), each the joint-mean RMSE;
    ``divergence_time_s`` (an episode that never diverges counts its length); ``base_drift_final_m``
    when the episodes record a base.
    """
    out: dict[str, dict[str, float]] = {}
    for name, rows in rollouts.items():
        summary = {f"{key}_rmse": float(np.mean([np.mean(r[key]["rmse"]) for r in rows])) for key in ("q", "dq", "tau")}
        summary["divergence_time_s"] = float(np.mean([r["divergence_time_s"] for r in rows]))
        drift = [r["base_drift_m"]["final"] for r in rows if isinstance(r.get("base_drift_m"), dict)]
        if drift:
            summary["base_drift_final_m"] = float(np.mean(drift))
        out[name] = summary
    return out


def write_report(out_dir: str | Path, episodes: list[Episode], rolls: dict[str, Rollout],
                 extra: dict[str, Any] | None = None) -> tuple[Path, list[Path]]:
    """``report.json`` plus one overlay PNG per episode.

    Each PNG has the joint positions and torques of the first 6 joints, real against each named rollout
    (e.g. before/after calibration).
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
        fig, axes = plt.subplots(J, 2, figsize=(12, 1.6 * J), sharex=True, squeeze=False)
        for j in range(J):
            for col, (key, unit) in enumerate((("q", "rad"), ("tau", "N m"))):
                ax = axes[j, col]
                ax.plot(ep.t, getattr(ep, key)[:, j], "k", lw=2, label="real")
                for name, roll in rolls.items():
                    w = int(np.flatnonzero(roll.episode == e)[0])
                    ax.plot(ep.t, getattr(roll, key)[w, : ep.num_steps, j], lw=1, label=name)
                ax.set_ylabel(f"{ep.joint_names[j]}\n{key} ({unit})", fontsize=7)
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
