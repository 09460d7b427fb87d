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
