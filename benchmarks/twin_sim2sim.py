"""Twin benchmark, sim-to-sim rows (method in twin.py's docstring, Sim-to-sim).

``python benchmarks/twin.py sim2sim|sim2sim_policy|sim2sim_passive|sim2sim_substeps|sim2sim_sensitivity``:
MuJoCo bags replayed in PyBullet, the MuJoCo twin calibrated on PyBullet bags, MuJoCo-trained policies
closed loop in both engines, and which model changes make a policy fall in MuJoCo as it does in PyBullet.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from robotrl.twin.calibrate import calibrate
from robotrl.twin.episode import load_episode
from robotrl.twin.metrics import divergence_time
from robotrl.twin.physics import Physics
from robotrl.twin.record import record_episode
from robotrl.twin.replay import Twin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twin_calibration import PARAMS, excitation  # noqa: E402


def sim2sim_rows(episodes=2):
    from robotrl.deploy.profile import load_profile

    from robotrl.twin.record import make_task_env, task_profile
    from robotrl.twin.report import episode_metrics

    setups = {"humanoid": (17, 40, 0.5, load_profile("humanoid_sim")),
              "tool_use": (23, 60, 0.6, task_profile(make_task_env("tool_use"), "tool_use_twin"))}
    rows = []
    for task, (dim, steps, amp, profile) in setups.items():
        root = Path(tempfile.mkdtemp(prefix=f"sim2sim_{task}_"))
        eps = [load_episode(record_episode(task, root, excitation(steps, dim, s, amp), steps, seed=s, profile=profile,
                                           name=f"ep{s}"), profile) for s in range(episodes)]
        for engine in ("mujoco", "pybullet"):
            t0 = time.time()
            twin = Twin(task, eps, nthread=1, engine=engine)
            roll = twin.open_loop()
            wall = time.time() - t0
            one = Twin(task, eps, nthread=1, engine=engine).teacher_forced(1)
            mets = [episode_metrics(eps[roll.episode[w]], roll, w) for w in range(len(eps))]
            rmse = np.mean([m["q"]["rmse"] for m in mets], axis=0)
            qmax = np.max([m["q"]["max"] for m in mets], axis=0)
            step_err = [np.abs(one.q[w, 1: eps[w].num_steps] - eps[w].q[1:]).max(axis=0) for w in range(len(eps))]
            row = {"task": task, "engine": engine, "episodes": len(eps),
                   "steps_per_episode": int(np.mean([e.num_steps for e in eps])),
                   "episode_duration_s": float(np.mean([e.num_steps * e.dt for e in eps])),
                   "divergence_time_s": float(np.mean([m["divergence_time_s"] for m in mets])),
                   "q_rmse_mean_rad": float(rmse.mean()), "q_max_err_rad": float(qmax.max()),
                   "one_step_err_max_rad": float(np.max(step_err)), "replay_wall_s": round(wall, 2),
                   "q_rmse_per_joint_rad": dict(zip(eps[0].joint_names, np.round(rmse, 5).tolist(), strict=True))}
            if task == "tool_use":  # 7 arm joints, then 16 hand joints
                row["arm_q_rmse_mean_rad"], row["hand_q_rmse_mean_rad"] = float(rmse[:7].mean()), float(rmse[7:].mean())
                row["arm_q_max_err_rad"], row["hand_q_max_err_rad"] = float(qmax[:7].max()), float(qmax[7:].max())
                arm_div = [divergence_time(roll.q[w, : eps[w].num_steps, :7], eps[w].q[:, :7], eps[w].dt, 0.05, 5)
                           for w in range(len(eps))]
                row["arm_divergence_time_s"] = float(np.mean(arm_div))
            if "base_drift_m" in mets[0]:
                row["base_drift_final_m"] = float(np.mean([m["base_drift_m"]["final"] for m in mets]))
            rows.append(row)
        # a PyBullet "real" robot: calibrate the MuJoCo twin on its bags
        root = Path(tempfile.mkdtemp(prefix=f"sim2sim_real_{task}_"))
        real = [load_episode(record_episode(task, root, excitation(steps, dim, s, amp), steps, seed=s, profile=profile,
                                            name=f"ep{s}", engine="pybullet"), profile) for s in range(episodes)]
        t0 = time.time()
        res = calibrate(task, real, params=PARAMS, delays=(0, 1))
        wall = time.time() - t0
        roll = Twin(task, real, [Physics(), res.physics], nthread=1).open_loop()
        div = {0: [], 1: []}
        for w in range(roll.q.shape[0]):
            ep = real[roll.episode[w]]
            div[int(roll.candidate[w])].append(divergence_time(roll.q[w, : ep.num_steps], ep.q, ep.dt, 0.05, 5))
        rows.append({"task": task, "engine": "pybullet_as_real_mujoco_twin_calibrated", "episodes": len(real),
                     "calibration_wall_s": round(wall, 2), "initial_cost": res.initial_cost,
                     "final_cost": min(res.cost_by_delay.values()), "delay_fit": res.physics.delay_steps,
                     **{f"{p}_fit": round(getattr(res.physics, p), 4) for p in PARAMS},
                     "divergence_before_s": float(np.mean(div[0])), "divergence_after_s": float(np.mean(div[1])),
                     "episode_duration_s": float(np.mean([e.num_steps * e.dt for e in real]))})
    return rows


def sim2sim_policy_rows(checkpoints, num_envs=32, episodes=128, seed=1, name=""):
    """Each MuJoCo-trained checkpoint evaluated closed loop in MuJoCo and in PyBullet (``robotrl eval engine=``).

    One ``EvalConfig`` per checkpoint, built once; the two engines differ only in ``engine`` (same
    seed, worlds, episodes, deterministic policy, task config and curriculum stage of the run).
    """
    from dataclasses import replace

    from robotrl.config import EvalConfig
    from robotrl.runners.evaluate import evaluate

    rows, frames = [], {}
    for ckpt in checkpoints:
        base = EvalConfig(checkpoint=str(ckpt), num_envs=num_envs, episodes=episodes, seed=seed, video=True,
                          video_steps=150, video_size=[240, 320])
        pair = {}
        for engine in ("mujoco", "pybullet"):
            out = Path(tempfile.mkdtemp(prefix=f"sim2sim_policy_{engine}_"))
            t0 = time.time()
            res = evaluate(replace(base, engine=engine, out_dir=str(out)))
            wall = time.time() - t0
            row = {"checkpoint": str(ckpt), "task": res["task"], "engine": engine, "num_envs": num_envs,
                   "env_steps_trained": res["env_steps_trained"], "eval_wall_s": round(wall, 1),
                   **{k: v for k, v in res.items() if isinstance(v, float)}}
            pair[engine] = row
            rows.append(row)
            frames[(f"{res['task']} ({Path(ckpt).name})", engine)] = res.get("video")
        mj, pb = pair["mujoco"], pair["pybullet"]
        ratios = {f"{k}_pybullet_over_mujoco": pb[k] / mj[k] for k in mj
                  if isinstance(mj[k], float) and k in pb and k != "episodes" and abs(mj[k]) > 1e-9}
        rows.append({"checkpoint": str(ckpt), "task": mj["task"], "engine": "ratio", **ratios})
    _frame_sheet(frames, Path(__file__).parent / "results" / f"sim2sim_policy{'_' + name if name else ''}_frames.png")
    return rows


def sim2sim_passive_rows(tasks=("humanoid", "tool_use"), num_envs=32, episodes=32, seed=1):
    """Control for the closed-loop rows: zero actions in both engines (the task's own config, randomization off)."""
    from robotrl.tasks import config_class

    from robotrl.envs.task_env import TaskEnv
    from robotrl.runners.evaluate import run_episodes
    from robotrl.sim.backend import SimConfig
    from robotrl.twin.bullet import use_pybullet

    class Zero:
        def __init__(self, dim):
            self.dim = dim

        def act_inference(self, obs):
            return torch.zeros(obs.shape[0], self.dim)

    rows = []
    for task in tasks:
        for engine in ("mujoco", "pybullet"):
            env = TaskEnv(config_class(task)(randomize=False), SimConfig(num_envs=num_envs, nthread=2), seed=seed)
            if engine == "pybullet":
                use_pybullet(env)
            t0 = time.time()
            out = run_episodes(env, Zero(env.num_actions), episodes)
            rows.append({"task": task, "engine": engine, "policy": "zero action", "num_envs": num_envs,
                         "wall_s": round(time.time() - t0, 1), **out})
    return rows


def sim2sim_substeps_rows(checkpoint, substeps=(2, 8), num_envs=32, episodes=64, seed=1):
    """One checkpoint in PyBullet at several substeps per MuJoCo step: is explicit integration the gap?"""
    from robotrl.tasks import task_config_from_meta

    from robotrl.envs.task_env import TaskEnv
    from robotrl.policies.io import load_policy
    from robotrl.runners.evaluate import run_episodes
    from robotrl.sim.backend import SimConfig
    from robotrl.storage.checkpoint import load_checkpoint, resolve, strip
    from robotrl.twin.bullet import use_pybullet

    weights = resolve(str(checkpoint))
    tensors, meta = load_checkpoint(weights)
    rows = []
    for sub in substeps:
        cfg = task_config_from_meta(meta, split="train", randomize=False)
        env = TaskEnv(cfg, SimConfig(num_envs=num_envs, nthread=2), seed=seed)
        env.task.load_state_dict(strip(tensors, "task"))
        sim = use_pybullet(env, substeps=sub)
        policy, _ = load_policy(weights, device=env.device)
        t0 = time.time()
        out = run_episodes(env, policy, episodes)
        sim.close()
        rows.append({"checkpoint": str(checkpoint), "task": meta["task"]["name"], "engine": "pybullet",
                     "substeps": sub, "wall_s": round(time.time() - t0, 1), **out})
    return rows


def _scaled(field, rows, factor):
    def edit(m):
        getattr(m, field)[rows] *= factor
    return edit


def _option(**values):
    def edit(m):
        for k, v in values.items():
            setattr(m.opt, k, v)
    return edit


# name -> (engine, edit of the compiled model before the sim is built); joint DoFs are 6: (past the free joint)
SENSITIVITY = {
    "nominal": ("mujoco", None),
    "armature_x0": ("mujoco", _scaled("dof_armature", slice(6, None), 0.0)),
    "damping_x0": ("mujoco", _scaled("dof_damping", slice(6, None), 0.0)),
    "damping_x0.25": ("mujoco", _scaled("dof_damping", slice(6, None), 0.25)),
    "damping_x2": ("mujoco", _scaled("dof_damping", slice(6, None), 2.0)),
    "friction_x0.6": ("mujoco", _scaled("geom_friction", slice(None), 0.6)),
    "friction_x1.5": ("mujoco", _scaled("geom_friction", slice(None), 1.5)),
    "elliptic_cone_impratio10": ("mujoco", _option(cone=1, impratio=10.0)),
    "noslip_10_iterations": ("mujoco", _option(noslip_iterations=10)),
    "contact_margin_0": ("mujoco", lambda m: m.geom_margin.__setitem__(slice(None), 0.0)),
    "pybullet": ("pybullet", None),
    "pybullet_damping_x2": ("pybullet", _scaled("dof_damping", slice(6, None), 2.0)),
    "pybullet_armature_x0": ("pybullet", _scaled("dof_armature", slice(6, None), 0.0)),
}


def sim2sim_sensitivity_rows(checkpoint, variants=tuple(SENSITIVITY), num_envs=32, episodes=64, seed=1):
    """One humanoid checkpoint, randomization off, under each model change of ``SENSITIVITY``, in its engine.

    Which change makes the MuJoCo-trained policy fall in MuJoCo as soon as it does in PyBullet: a model
    difference the PyBullet rebuild may carry. Every row gets the same config, seed, worlds and episodes.
    """
    from robotrl.tasks import task_class, task_config_from_meta

    from robotrl.envs.task_env import TaskEnv
    from robotrl.policies.io import load_policy
    from robotrl.runners.evaluate import run_episodes
    from robotrl.sim.backend import SimConfig
    from robotrl.storage.checkpoint import load_checkpoint, resolve, strip
    from robotrl.twin.bullet import use_pybullet

    weights = resolve(str(checkpoint))
    tensors, meta = load_checkpoint(weights)
    cls = task_class(meta["task"]["name"])
    build = cls.build_model
    rows = []
    for name in variants:
        engine, edit = SENSITIVITY[name]

        def edited(self, edit=edit):
            model = build(self)
            if edit is not None:
                edit(model)
            return model

        cls.build_model = edited
        try:
            cfg = task_config_from_meta(meta, split="train", randomize=False)
            env = TaskEnv(cfg, SimConfig(num_envs=num_envs, nthread=2), seed=seed)
        finally:
            cls.build_model = build
        env.task.load_state_dict(strip(tensors, "task"))
        sim = use_pybullet(env) if engine == "pybullet" else None
        policy, _ = load_policy(weights, device=env.device)
        t0 = time.time()
        out = run_episodes(env, policy, episodes)
        if sim is not None:
            sim.close()
        rows.append({"checkpoint": str(checkpoint), "task": meta["task"]["name"], "variant": name, "engine": engine,
                     "num_envs": num_envs, "wall_s": round(time.time() - t0, 1), **out})
        print(name, {k: round(v, 3) for k, v in out.items() if k in ("return", "length", "success")}, flush=True)
    return rows


def _frame_sheet(videos, path, times=(0.25, 0.5, 0.75, 1.0)):
    """Frames of each (task, engine) eval video at the given fractions of its length, one row each."""
    import imageio.v3 as iio
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k, v in videos.items() if v]
    if not keys:
        return
    fig, axes = plt.subplots(len(keys), len(times), figsize=(3.2 * len(times), 2.5 * len(keys)), squeeze=False)
    for r, key in enumerate(keys):
        clip = iio.imread(videos[key])
        for c, t in enumerate(times):
            i = min(len(clip) - 1, int(t * (len(clip) - 1)))
            axes[r, c].imshow(clip[i])
            axes[r, c].set_axis_off()
            axes[r, c].set_title(f"{key[0]} in {key[1]}, step {i}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print("wrote", path)
