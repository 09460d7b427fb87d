"""Twin-versus-real metrics (SIMPLER-style replay metrics; METHODS.md, "Digital twin").

Pure numpy functions on ``(T, J)`` traces of one episode:

* ``joint_errors``: per-joint RMSE and maximum absolute error.
* ``divergence_step``: the first step ``t`` from which ``max_j |sim - real|`` stays above
  ``eps`` for ``m`` consecutive steps (None if it never does).
* ``base_drift``: horizontal distance between the sim and real base at the end, and its maximum.
* ``success_mismatch``: the fraction of episodes whose success differs between twin and robot.
"""

from __future__ import annotations

import numpy as np


def joint_errors(sim: np.ndarray, real: np.ndarray) -> dict[str, list[float]]:
    """Per-joint ``rmse`` and ``max`` of ``|sim - real|`` over time; both ``(T, J)``, NaN-free columns only."""
    if sim.shape != real.shape:
        raise ValueError(f"shapes differ: sim {sim.shape}, real {real.shape}.")
    err = sim - real
    return {"rmse": np.sqrt(np.nanmean(err**2, axis=0)).tolist(), "max": np.nanmax(np.abs(err), axis=0).tolist()}


def divergence_step(sim: np.ndarray, real: np.ndarray, eps: float, m: int) -> int | None:
    """First step ``t`` such that ``max_j |sim - real| > eps`` at every step of ``t .. t + m - 1``.

    Args:
        sim: ``(T, J)`` or ``(T,)`` twin trace.
        real: same shape, the recorded trace.
        eps: error threshold (rad for joint positions).
        m: consecutive steps the error must stay above ``eps`` (>= 1).

    Returns:
        The step index, or None when the traces never diverge for ``m`` steps.

    """
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}.")
    err = np.abs(np.asarray(sim) - np.asarray(real))
    above = (err.reshape(err.shape[0], -1).max(axis=1) > eps).astype(np.int64)
    if above.shape[0] < m:
        return None
    run = np.convolve(above, np.ones(m, dtype=np.int64), mode="valid")  # run[t] = sum above[t:t+m]
    hits = np.flatnonzero(run == m)
    return int(hits[0]) if hits.size else None


def divergence_time(sim: np.ndarray, real: np.ndarray, dt: float, eps: float, m: int) -> float:
    """``divergence_step * dt``, or the whole trace's duration ``T * dt`` when it never diverges."""
    step = divergence_step(sim, real, eps, m)
    return (np.asarray(real).shape[0] if step is None else step) * dt


def base_drift(sim_pos: np.ndarray, real_pos: np.ndarray) -> dict[str, float]:
    """Horizontal drift of the base ``(T, 3)``: ``final`` and ``max`` xy distance in metres."""
    d = np.linalg.norm(sim_pos[:, :2] - real_pos[:, :2], axis=1)
    return {"final": float(d[-1]), "max": float(d.max())}


def success_mismatch(sim: np.ndarray, real: np.ndarray) -> float:
    """Fraction of episodes whose success flag differs (both ``(E,)`` bool)."""
    sim, real = np.asarray(sim, dtype=bool), np.asarray(real, dtype=bool)
    return float(np.mean(sim != real)) if sim.size else 0.0
