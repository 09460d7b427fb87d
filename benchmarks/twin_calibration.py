"""Twin benchmark, calibration rows (``python benchmarks/twin.py calibration``; method in twin.py's docstring).

Bags recorded with known perturbed physics, the twin calibrated on them with sysid; ``excitation`` and
``PARAMS`` also serve the sim-to-sim rows (twin_sim2sim.py).
"""

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from robotrl.twin.calibrate import calibrate
from robotrl.twin.episode import load_episode
from robotrl.twin.metrics import divergence_time, joint_errors
from robotrl.twin.physics import Physics
from robotrl.twin.record import record_episode
from robotrl.twin.replay import Twin

PARAMS = ("body_mass", "dof_damping", "actuator_gain")


def excitation(steps, dim, seed, amp):
    g = torch.Generator().manual_seed(seed)
    acts = (torch.rand(steps, dim, generator=g) * 2 - 1) * amp
    return lambda obs, k: acts[k: k + 1]


def calib_row(task, dim, truth, steps, amp, profile=None):
    root = Path(tempfile.mkdtemp(prefix=f"twin_{task}_"))
    if profile is None:
        from robotrl.twin.record import make_task_env, task_profile

        profile = task_profile(make_task_env(task), f"{task}_twin")
    eps = [load_episode(record_episode(task, root, excitation(steps, dim, s, amp), steps, physics=truth, seed=s,
                                       profile=profile, name=f"ep{s}"), profile) for s in range(2)]
    t0 = time.time()
    res = calibrate(task, eps, params=PARAMS, delays=(0, 1, 2))
    wall = time.time() - t0
    twin = Twin(task, eps, [Physics(), res.physics], nthread=2)
    roll = twin.open_loop()
    div = {0: [], 1: []}
    for w in range(roll.q.shape[0]):
        ep = eps[roll.episode[w]]
        div[int(roll.candidate[w])].append(divergence_time(roll.q[w, : ep.num_steps], ep.q, ep.dt, 0.05, 5))
    row = {"task": task, "steps_per_episode": int(np.mean([e.num_steps for e in eps])), "episodes": len(eps),
           "calibration_wall_s": round(wall, 2), "delay_true": truth.delay_steps,
           "delay_fit": res.physics.delay_steps,
           "divergence_before_s": float(np.mean(div[0])), "divergence_after_s": float(np.mean(div[1])),
           "episode_duration_s": float(np.mean([e.num_steps * e.dt for e in eps]))}
    for p in PARAMS:
        row[f"{p}_true"], row[f"{p}_fit"] = getattr(truth, p), round(getattr(res.physics, p), 4)
        row[f"{p}_rel_err_pct"] = round(100 * abs(getattr(res.physics, p) / getattr(truth, p) - 1), 3)
        row[f"{p}_ci95"] = res.intervals[p]
    row["divergence_improvement_x"] = row["divergence_after_s"] / max(row["divergence_before_s"], 1e-9)
    # joint torques (the bags' effort, qfrc_actuator): open loop, and teacher forced every step, where q stays on
    # the record and the torque error is the model's own (a gain gap shows there, drift does not)
    for mode, rollout in (("open", roll), ("forced1", twin.teacher_forced(1))):
        for c, when in ((0, "before"), (1, "after")):
            rmse = [np.mean(joint_errors(rollout.tau[w, 1:ep.num_steps], ep.tau[1:])["rmse"])
                    for w in range(rollout.tau.shape[0]) if int(rollout.candidate[w]) == c
                    for ep in [eps[rollout.episode[w]]]]
            row[f"tau_rmse_{mode}_{when}"] = float(np.mean(rmse))
        after = row[f"tau_rmse_{mode}_after"]  # 0 up to round-off after an exact fit: no ratio then
        row[f"tau_rmse_{mode}_improvement_x"] = (round(row[f"tau_rmse_{mode}_before"] / after, 1)
                                                 if after > 1e-6 else None)
    return row


OBJECT_PARAMS = ("object_mass", "geom_friction")


def checkpoint_action_fn(checkpoint):
    """An ``ActionFn`` for ``record_episode``: the checkpoint's deterministic actions."""
    from robotrl.twin.triage import policy_fn

    act = policy_fn(checkpoint)
    return lambda obs, k: torch.as_tensor(act(obs.numpy()))


def object_calib_row(checkpoint, truth, steps=60, episodes=2, params=OBJECT_PARAMS, m=5, segment=0, starts=1):
    """tool_use: bags of a trained policy handling the tool under ``truth``; sysid fits the tool's mass and friction.

    The policy runs closed loop on the "real" robot (its tool heavier or lighter, its friction
    different) and the bags record what it did, the tool's pose among it. Calibration observes the
    joints and the tool's pose (``robotrl.twin.calibrate``); the row reports each fitted value
    against the truth and the open-loop divergence of the joints (0.05 rad) and of the tool's
    position (``robotrl.twin.report.OBJECT_EPS_M``), for ``m`` steps, before and after, as
    ``robotrl twin report`` computes them (``episode_metrics``).
    """
    from robotrl.twin.record import make_task_env, task_profile
    from robotrl.twin.report import OBJECT_EPS_M, episode_metrics

    root = Path(tempfile.mkdtemp(prefix="twin_object_"))
    action = checkpoint_action_fn(checkpoint)
    profile = task_profile(make_task_env("tool_use"), "tool_use_twin")
    eps = [load_episode(record_episode("tool_use", root, action, steps, physics=truth, seed=s, profile=profile,
                                       name=f"ep{s}"), profile) for s in range(episodes)]
    moved = [float(np.max(np.linalg.norm(e.object_pose[:, :3] - e.object_pose[0, :3], axis=1))) for e in eps]
    t0 = time.time()
    res = calibrate("tool_use", eps, params=params, delays=(truth.delay_steps,), segment=segment,
                    starts=starts)
    wall = time.time() - t0
    twin = Twin("tool_use", eps, [Physics(), res.physics], nthread=2)
    roll = twin.open_loop()
    joints, tool = {0: [], 1: []}, {0: [], 1: []}
    for w in range(roll.q.shape[0]):
        metrics = episode_metrics(eps[roll.episode[w]], roll, w, eps=0.05, m=m)
        joints[int(roll.candidate[w])].append(metrics["divergence_time_s"])
        tool[int(roll.candidate[w])].append(metrics["object_divergence_time_s"])
    row = {"task": "tool_use", "checkpoint": str(checkpoint),
           "steps_per_episode": int(np.mean([e.num_steps for e in eps])), "episodes": len(eps),
           "tool_moved_max_m": [round(v, 3) for v in moved],
           "real_success": [bool(e.success) for e in eps],
           "calibration_wall_s": round(wall, 2), "fitted": list(params), "segment_steps": segment,
           "starts": starts,
           "joint_divergence_before_s": float(np.mean(joints[0])),
           "joint_divergence_after_s": float(np.mean(joints[1])),
           "tool_divergence_before_s": float(np.mean(tool[0])), "tool_divergence_after_s": float(np.mean(tool[1])),
           "episode_duration_s": float(np.mean([e.num_steps * e.dt for e in eps])), "tool_eps_m": OBJECT_EPS_M}
    for p in params:
        row[f"{p}_true"], row[f"{p}_fit"] = getattr(truth, p), round(getattr(res.physics, p), 4)
        row[f"{p}_rel_err_pct"] = round(100 * abs(getattr(res.physics, p) / getattr(truth, p) - 1), 3)
        row[f"{p}_ci95"] = res.intervals[p]
    row["tool_divergence_improvement_x"] = row["tool_divergence_after_s"] / max(row["tool_divergence_before_s"], 1e-9)
    return row
