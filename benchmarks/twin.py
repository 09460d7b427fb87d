"""Twin benchmark: calibration (humanoid, arm), failure mining (synthetic and on a trained driving policy).

    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py calibration   # sysid fits, divergence before/after
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining        # synthetic miner vs uniform (seconds)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py planted       # driving planted weakness (~35 min)

Calibration: bags recorded from a robot with perturbed physics (robotrl.twin.record, known
truth); mujoco.sysid fits mass, damping and actuator gain plus the delay over a grid; we
report the relative error of each fitted value and the open-loop divergence time before
and after (eps 0.05 rad for 5 steps).

Mining (synthetic): a cheap policy that fails inside a small planted box (2% of the
volume) plus 3% random failures; the miner and uniform sampling get the same budget and
the same region extraction; coverage of the planted box and false regions, over seeds.

Planted (driving): PPO trained with the effective road friction narrowed to >= 1.0
(``task.friction_range=[1.0,1.2]``; the floor's friction is 1.0 and MuJoCo takes the larger
of two geoms' frictions, so tyre multipliers below 1 never mattered); ``robotrl twin mine``
over friction 0.3..1.2, track curvature, traffic speed and obstacles; then the run is
continued for the same extra time twice: with ``task.scenarios=<mined> task.scenario_mix=0.5``
and, as the control, without. Success is measured in the mined regions and elsewhere on
fresh scenarios. Each section is merged into ``benchmarks/results/twin.json``.
"""

import json
import os
import platform
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from robotrl.twin.calibrate import calibrate
from robotrl.twin.episode import load_episode
from robotrl.twin.metrics import divergence_time
from robotrl.twin.mine import mine, region_coverage
from robotrl.twin.physics import Physics
from robotrl.twin.record import record_episode
from robotrl.twin.replay import Twin
from robotrl.twin.scenarios import ScenarioParam

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
    return row


SYN_PARAMS = [ScenarioParam("thickness", 0.005, 0.05, unit="m"), ScenarioParam("mass", 0.1, 1.0, unit="kg"),
              ScenarioParam("friction", 0.3, 1.2), ScenarioParam("size", 0.05, 0.3, unit="m")]
# 2% of the volume: the thinnest 14% of handles and the heaviest 14% of tools
PLANTED = {"thickness": [0.005, 0.0113], "mass": [0.874, 1.0]}


def synthetic_policy(x, noise=0.03):
    inside = (x[:, 0] <= PLANTED["thickness"][1]) & (x[:, 1] >= PLANTED["mass"][0])
    return ~(inside ^ (np.random.default_rng(len(x) + int(1e6 * x[0, 0])).random(len(x)) < noise))


def mining_rows(budgets=(200, 400, 800), seeds=range(5)):
    rows = []
    for budget in budgets:
        for seed in seeds:
            for name, uniform in (("miner", False), ("uniform", True)):
                res = mine(synthetic_policy, SYN_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform, min_leaf=4)
                cov, false = region_coverage(res.regions, PLANTED, SYN_PARAMS)
                rows.append({"method": name, "seed": seed, "budget": budget, "coverage_pct": round(100 * cov, 1),
                             "false_regions": false, "regions": len(res.regions),
                             "failures_seen": int((~res.success).sum()),
                             "summaries": [r.summary for r in res.regions][:4]})
    summary = {}
    for budget in budgets:
        for m in ("miner", "uniform"):
            rs = [r for r in rows if r["method"] == m and r["budget"] == budget]
            summary[f"{m}_budget{budget}_coverage_pct_mean"] = float(np.mean([r["coverage_pct"] for r in rs]))
            summary[f"{m}_budget{budget}_found80_count"] = int(sum(r["coverage_pct"] >= 80 for r in rs))
            summary[f"{m}_budget{budget}_false_regions_mean"] = float(np.mean([r["false_regions"] for r in rs]))
            summary[f"{m}_budget{budget}_failures_seen_mean"] = float(np.mean([r["failures_seen"] for r in rs]))
    return {"planted_box": PLANTED, "planted_volume_pct": 2.0, "seeds": len(list(seeds)), "summary": summary,
            "runs": rows}


# --- planted weakness on a trained driving policy ---------------------------------------------------
PLANT_DIR = Path(os.environ.get("TWIN_PLANT_DIR", "/tmp/twin_plant"))
NARROW = ["task=driving", "task.friction_range=[1.0,1.2]", "seed=0", "progress=false", "tensorboard=false"]
MINE_PARAMS = ["friction", "max_curvature", "traffic_speed", "obstacles"]


def _train(run, max_time_s, extra=()):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "robotrl.cli", "train", *NARROW, f"run_dir={run}", f"max_time_s={max_time_s}",
           *extra]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _inside(x, regions, names):
    m = np.zeros(len(x), dtype=bool)
    for r in regions:
        inn = np.ones(len(x), dtype=bool)
        for name, (lo, hi) in r.bounds.items():
            col = x[:, names.index(name)]
            inn &= (col >= lo) & (col <= hi)
        m |= inn
    return m


def planted_rows(train_s=540, extra_s=240, budget=512, n_eval=384):
    import shutil

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import _from_unit
    from robotrl.twin.scenarios import ScenarioFile

    narrow = PLANT_DIR / "narrow"
    if not (narrow / "checkpoints" / "latest.json").is_file():
        _train(narrow, train_s)
    out = {"train_narrow_s": train_s, "retrain_extra_s": extra_s, "mine_budget": budget,
           "mine_params": MINE_PARAMS, "narrowed": "task.friction_range=[1.0,1.2] (effective road friction >= 1.0)"}
    ev = ScenarioEvaluator(narrow, MINE_PARAMS, worlds=128, seed=1)
    t0 = time.time()
    mined = {}
    for name, uniform in (("miner", False), ("uniform", True)):
        mined[name] = mine(ev, ev.params, budget, rounds=4, seed=0, uniform_only=uniform)
        out[f"{name}_failure_rate_in_samples"] = float(1 - mined[name].success.mean())
        out[f"{name}_regions"] = [r.summary for r in mined[name].regions]
    out["mine_wall_s"] = round(time.time() - t0, 1)
    scen = PLANT_DIR / "mined.yaml"
    ScenarioFile("driving", ev.params, mined["miner"].regions).save(scen)
    # held-out scenarios: uniform over the space, labelled by the narrow policy -> the empirical failure region
    rng = np.random.default_rng(123)
    x_eval = _from_unit(rng.random((n_eval, len(MINE_PARAMS))), ev.params)
    planted = x_eval[:, 0] < 1.0
    fail = ~ev(x_eval)
    for name in ("miner", "uniform"):
        regions = mined[name].regions
        inside = _inside(x_eval, regions, MINE_PARAMS)
        recall = float((inside & fail).sum() / max(fail.sum(), 1))
        out[f"{name}_recall_of_heldout_failures_pct"] = round(100 * recall, 1)
        out[f"{name}_precision_failure_rate_inside_pct"] = round(100 * float(fail[inside].mean()) if inside.any()
                                                                 else float("nan"), 1)
        out[f"{name}_false_regions"] = int(sum(
            1 for r in regions if fail[_inside(x_eval, [r], MINE_PARAMS)].mean() < 0.5
            if _inside(x_eval, [r], MINE_PARAMS).any()))
        out[f"{name}_planted_box_coverage_pct"] = round(100 * float((inside & planted).sum() / planted.sum()), 1)
    out["narrow_heldout_failure_rate_planted_pct"] = round(100 * float(fail[planted].mean()), 1)
    out["narrow_heldout_failure_rate_trained_pct"] = round(100 * float(fail[~planted].mean()), 1)
    # retrain: continue the narrow run for extra_s with the mined scenarios mixed in, and without (control)
    runs = {"mined": ["task.scenarios=" + str(scen), "task.scenario_mix=0.5"], "control": []}
    for name, extra in runs.items():
        run = PLANT_DIR / name
        if not (run / "done").is_file():
            shutil.rmtree(run, ignore_errors=True)
            shutil.copytree(narrow, run)
            meta = json.loads((narrow / "checkpoints" / "latest.json").read_text())
            _train(run, train_s + extra_s, ["resume=true", *extra])
            (run / "done").write_text(json.dumps(meta))
    regions = mined["miner"].regions
    in_region = ScenarioFile("driving", ev.params, regions).sample(n_eval, torch.Generator().manual_seed(7))
    x_in = np.stack([in_region[n].numpy() for n in MINE_PARAMS], 1)
    pool = _from_unit(np.random.default_rng(8).random((4 * n_eval, len(MINE_PARAMS))), ev.params)
    x_out = pool[~_inside(pool, regions, MINE_PARAMS)][:n_eval]
    for name in ("narrow", "mined", "control"):
        e = ScenarioEvaluator(PLANT_DIR / name, MINE_PARAMS, worlds=128, seed=2)
        out[f"{name}_success_in_mined_regions_pct"] = round(100 * float(e(x_in).mean()), 1)
        out[f"{name}_success_elsewhere_pct"] = round(100 * float(e(x_out).mean()), 1)
    out["eval_scenarios_per_set"] = n_eval
    return out


def _merge(section, value):
    path = Path(__file__).parent / "results" / "twin.json"
    body = json.loads(path.read_text()) if path.exists() else {}
    body[section] = value
    body.update({"date": datetime.now().isoformat(timespec="seconds"), "machine": platform.node(),
                 "cpu_count": os.cpu_count(), "loadavg_1m": os.getloadavg()[0]})
    path.write_text(json.dumps(body, indent=1, default=float))
    print("wrote", path, "section", section)


def main():
    import sys

    from robotrl.deploy.profile import load_profile

    mode = sys.argv[1] if len(sys.argv) > 1 else "all"
    if mode in ("calibration", "all"):
        humanoid = calib_row("humanoid", 17,
                             Physics(body_mass=1.15, dof_damping=1.3, actuator_gain=0.85, delay_steps=1), 40, 0.5,
                             load_profile("humanoid_sim"))
        try:
            arm = calib_row("tool_use", 23,
                            Physics(body_mass=1.2, dof_damping=0.75, actuator_gain=1.15, delay_steps=1), 60, 0.6)
        except Exception as exc:  # reported, not hidden: the arm row records why it failed
            arm = {"task": "tool_use", "error": f"{type(exc).__name__}: {exc}"}
        for row in (humanoid, arm):
            print({k: v for k, v in row.items() if "ci95" not in k})
        _merge("calibration", [humanoid, arm])
    if mode in ("mining", "all"):
        mining = mining_rows()
        for k, v in mining["summary"].items():
            print(f"{k:45s} {v}")
        _merge("mining", mining)
    if mode in ("planted", "all"):
        planted = planted_rows()
        for k, v in planted.items():
            print(f"{k:45s} {v}")
        _merge("planted", planted)


if __name__ == "__main__":
    main()
