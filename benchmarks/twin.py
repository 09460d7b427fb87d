"""Twin benchmark: calibration (humanoid, arm), failure mining (synthetic and on a trained driving policy).

    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py calibration   # sysid fits, divergence before/after
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining        # synthetic miner vs uniform (seconds)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining_narrowed  # synthetic narrowed policy, baselines
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining_validate  # the same, regions re-tested on fresh draws
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py planted train # driving planted weakness, one stage
    # per call (train, mine, heldout, retrain_mined, retrain_control, eval), each < 10 min; state in TWIN_PLANT_DIR
    # mining options after the stage: planted mine baseline=reference min_leaf=16 (written to the section
    # planted_reference_leaf16; use a TWIN_PLANT_DIR of its own, with narrow/ and heldout.npz copied in);
    # validate=0.2 holds back that share of the budget to re-test each region (section ..._validate0.2)
    # planted uniform_plain <options>: beside such a run, uniform draws with no re-test (the plain baseline)
    # budgets after the stage: train_s=900 extra_s=480 (narrow training and each retraining's extra seconds;
    # section ..._train900_extra480; those stages then take longer than 10 min); seed=1: the narrow policy's
    # training seed (section ..._seed1; use a TWIN_PLANT_DIR of its own)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim       # MuJoCo bags replayed in PyBullet (~1 min)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_policy runs/humanoid runs/tool_use
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_passive  # zero actions in both engines (control)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_substeps runs/humanoid 2,8  # PyBullet substeps
    #   MuJoCo-trained checkpoints closed loop in MuJoCo and in PyBullet (robotrl eval engine=...)

Calibration: bags recorded from a robot with perturbed physics (robotrl.twin.record, known
truth); mujoco.sysid fits mass, damping and actuator gain plus the delay over a grid; we
report the relative error of each fitted value and the open-loop divergence time before
and after (eps 0.05 rad for 5 steps).

Mining (synthetic): a cheap policy that fails inside a small planted box (2% of the
volume) plus 3% random failures; the miner and uniform sampling get the same budget and
the same region extraction; coverage of the planted box and false regions, over seeds.

Mining (synthetic, narrowed): a stand-in for the driving policy below, chosen before its
planted mining was re-run: a policy "trained" on friction 1.0-1.2 fails 15% there, and
below 1.0 with a probability rising linearly to 100% at friction 0.45 (the other three
parameters do nothing). Its failures below 1.0 lift the overall failure rate of uniform
draws to about 0.55, so each region is tested against it (``baseline=uniform``), against the
15% of the uniform draws in the trained regime (``reference``), or against the rate outside
the region (``complement``); coverage of the failures below 1.0 (each point weighted by
its failure probability, 20000 labelled scenarios) and false regions (true failure rate <
0.5), miner and uniform draws at the same budget, 5 seeds.

Validation (synthetic, narrowed): the same stand-in, ``baseline=reference``; the miner and
uniform draws each hold back 0, 20% or 30% of the same total budget (``mine(validate=)``) to
re-test every region on fresh draws inside it; 10 seeds. Coverage and false regions as above.

Planted (driving): PPO trained with the effective road friction narrowed to >= 1.0
(``task.friction_range=[1.0,1.2]``; the floor's friction is 1.0 and MuJoCo takes the larger
of two geoms' frictions, so tyre multipliers below 1 never mattered); ``robotrl twin mine``
over friction 0.3..1.2, track curvature, traffic speed and obstacles; then the run is
continued for the same extra time twice: with ``task.scenarios=<mined> task.scenario_mix=0.5``
and, as the control, without. Success is measured in the mined regions and elsewhere on
fresh scenarios. The mined file picks regions by learnability (``weighting:
learnability``, robotrl.twin.scenarios); the evaluation draws from the mined regions in
proportion to their failure rate, as before that weighting existed. The mined regions (miner
and uniform baseline: same budget, same region extraction) are scored on held-out scenarios
drawn uniformly and labelled by the narrow policy: ``*_planted_failure_coverage_pct`` is the
share of the held-out failures inside the planted box (friction < 1.0) that the regions
contain (the planted failure region by volume, each point weighted by its failure
probability); ``*_planted_excess_failure_coverage_pct``
counts only failures above the failure rate of the trained regime (friction >= 1.0);
``*_planted_box_coverage_pct`` is the share of the whole box, failing or not. A region is
false when its held-out failure rate is < 0.5 (``*_false_regions``), or also when less than
half of its friction interval lies in the planted box (``*_false_regions_vs_planted``).

Sim-to-sim: bags recorded in MuJoCo (random excitation, nominal physics) replayed open loop
with the recorded commands from the recorded initial state in MuJoCo (exact by construction)
and in PyBullet (``robotrl.twin.bullet``: the same model rebuilt body by body); per-joint q
RMSE, maximum error, divergence time (eps 0.05 rad for 5 steps) and the teacher-forced
one-step error (reset to the recorded state every step: model error without drift). Then the
other way round: bags recorded in PyBullet (a "real" robot of another engine, no known truth),
the MuJoCo twin calibrated on them with sysid, and its open-loop divergence before and after.

Sim-to-sim, closed loop: policies trained by ``robotrl train`` in MuJoCo, evaluated by
``robotrl eval`` in both engines with one config (32 worlds, 128 episodes, deterministic
actions, seed 1) that differs only in ``engine``; episode statistics and their PyBullet /
MuJoCo ratios, and a sheet of frames from both videos (``sim2sim_policy_frames.png``).

Each section is merged into ``benchmarks/results/twin.json``.
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


NARROWED_PARAMS = [ScenarioParam("friction", 0.3, 1.2), ScenarioParam("max_curvature", 0.0, 1.0),
                   ScenarioParam("traffic_speed", 0.0, 1.0), ScenarioParam("obstacles", 0.0, 3.0)]
TRAINED_REGIME = {"friction": [1.0, 1.2]}  # the narrowed training distribution (NARROW below)


def narrowed_failure_prob(x):
    """15% failures in the trained regime, rising linearly below friction 1.0 to 100% at 0.45."""
    return np.where(x[:, 0] >= 1.0, 0.15, np.clip(0.15 + (1.0 - x[:, 0]) / 0.55 * 0.85, 0.0, 1.0))


def narrowed_rows(budgets=(256, 512, 1024), seeds=range(5), baselines=("uniform", "reference", "complement"),
                  min_leafs=(8, 16)):
    from robotrl.twin.mine import failure_coverage, inside_regions

    rng = np.random.default_rng(99)
    hx = np.column_stack([p.low + rng.random(20000) * (p.high - p.low) for p in NARROWED_PARAMS])
    hf = rng.random(20000) < narrowed_failure_prob(hx)
    planted = hx[:, 0] < 1.0
    rows = []
    for budget in budgets:
        for baseline in baselines:
            for min_leaf in min_leafs:
                for seed in seeds:
                    for name, uniform in (("miner", False), ("uniform", True)):
                        pol_rng = np.random.default_rng(seed)
                        res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x),
                                   NARROWED_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform,
                                   min_leaf=min_leaf, baseline=baseline, reference=TRAINED_REGIME)
                        inside = inside_regions(hx, res.regions, NARROWED_PARAMS)
                        each = [hf[inside_regions(hx, [r], NARROWED_PARAMS)] for r in res.regions]
                        rows.append({"method": name, "baseline": baseline, "min_leaf": min_leaf, "seed": seed,
                                     "budget": budget, "background": round(res.background, 3),
                                     "coverage_pct": round(100 * failure_coverage(inside, hf, planted), 1),
                                     "false_regions": int(sum(f.size == 0 or f.mean() < 0.5 for f in each)),
                                     "regions": len(res.regions),
                                     "precision_pct": round(100 * float(hf[inside].mean()), 1) if inside.any()
                                     else float("nan")})
    summary = {}
    for budget in budgets:
        for baseline in baselines:
            for min_leaf in min_leafs:
                for m in ("miner", "uniform"):
                    rs = [r for r in rows if (r["method"], r["baseline"], r["min_leaf"], r["budget"]) ==
                          (m, baseline, min_leaf, budget)]
                    key = f"{m}_{baseline}_leaf{min_leaf}_budget{budget}"
                    summary[f"{key}_coverage_pct_mean"] = round(float(np.mean([r["coverage_pct"] for r in rs])), 1)
                    summary[f"{key}_false_regions_mean"] = float(np.mean([r["false_regions"] for r in rs]))
                    summary[f"{key}_regions_mean"] = float(np.mean([r["regions"] for r in rs]))
                    summary[f"{key}_precision_pct_mean"] = round(float(np.nanmean([r["precision_pct"] for r in rs])), 1)
    # the budget split of the miner's later rounds: focused share (rest uniform), confirmation share of it
    for baseline, min_leaf in (("uniform", 8), ("reference", 16)):
        for focus, confirm in ((0.5, 0.5), (0.25, 0.5), (0.75, 0.5), (0.5, 0.0), (0.5, 1.0)):
            covs, false = [], []
            for seed in seeds:
                pol_rng = np.random.default_rng(seed)
                res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x), NARROWED_PARAMS, 512,
                           seed=seed, min_leaf=min_leaf, baseline=baseline, reference=TRAINED_REGIME, focus=focus,
                           confirm=confirm)
                covs.append(100 * failure_coverage(inside_regions(hx, res.regions, NARROWED_PARAMS), hf, planted))
                false.append(sum(hf[inside_regions(hx, [r], NARROWED_PARAMS)].mean() < 0.5 for r in res.regions))
            key = f"split_miner_{baseline}_leaf{min_leaf}_budget512_focus{focus}_confirm{confirm}"
            summary[f"{key}_coverage_pct_mean"] = round(float(np.mean(covs)), 1)
            summary[f"{key}_false_regions_mean"] = float(np.mean(false))
    import sys

    return {"trained_regime": TRAINED_REGIME, "failure": "0.15 in the trained regime, linear to 1.0 at friction 0.45",
            "seeds": len(list(seeds)), "command": "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv),
            "loadavg_1m": os.getloadavg()[0], "summary": summary, "runs": rows}


def validate_rows(budgets=(512, 1024), seeds=range(10), min_leafs=(8, 16), shares=(0.0, 0.2, 0.3)):
    """Miner and uniform draws on the narrowed stand-in, with and without the fresh-draw re-test of regions."""
    import sys

    from robotrl.twin.mine import failure_coverage, inside_regions

    rng = np.random.default_rng(99)
    hx = np.column_stack([p.low + rng.random(20000) * (p.high - p.low) for p in NARROWED_PARAMS])
    hf = rng.random(20000) < narrowed_failure_prob(hx)
    planted = hx[:, 0] < 1.0
    summary = {}
    for budget in budgets:
        for min_leaf in min_leafs:
            for share in shares:
                for name, uniform in (("miner", False), ("uniform", True)):
                    covs, false, count = [], [], []
                    for seed in seeds:
                        pol_rng = np.random.default_rng(seed)
                        res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x),
                                   NARROWED_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform,
                                   min_leaf=min_leaf, baseline="reference", reference=TRAINED_REGIME, validate=share)
                        covs.append(100 * failure_coverage(inside_regions(hx, res.regions, NARROWED_PARAMS), hf,
                                                           planted))
                        each = [hf[inside_regions(hx, [r], NARROWED_PARAMS)] for r in res.regions]
                        false.append(sum(f.size == 0 or f.mean() < 0.5 for f in each))
                        count.append(len(res.regions))
                    key = f"{name}_leaf{min_leaf}_budget{budget}_validate{share}"
                    summary[f"{key}_coverage_pct_mean"] = round(float(np.mean(covs)), 1)
                    summary[f"{key}_false_regions_mean"] = float(np.mean(false))
                    summary[f"{key}_regions_mean"] = float(np.mean(count))
    return {"baseline": "reference", "trained_regime": TRAINED_REGIME, "seeds": len(list(seeds)),
            "command": "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv),
            "loadavg_1m": os.getloadavg()[0], "summary": summary}


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
NARROW = ["task=driving", "task.friction_range=[1.0,1.2]", "seed=0", "progress=false", "tensorboard=false",
          "eval_at_end=false"]
MINE_PARAMS = ["friction", "max_curvature", "traffic_speed", "obstacles"]
PLANTED_FRICTION = 1.0  # the planted box: friction below what the narrow run ever saw
PLANT_STAGES = ("train", "mine", "heldout", "retrain_mined", "retrain_control", "eval")
SCENARIO_MIX = {"mined": 0.5}  # retrained policies with the mined scenarios: task.scenario_mix
WEIGHTING = "learnability"  # how the mined file picks regions for training (robotrl.twin.scenarios)
PLANT_BUDGETS = {"train_s": 480, "extra_s": 240}  # narrow training, and the extra time of each retraining
MINE_OPTIONS = {"baseline": "uniform", "min_leaf": 8}  # region test (robotrl.twin.mine); argv key=value overrides
_OLD_MINE_OPTIONS = dict(MINE_OPTIONS)
# what a stage writes (under PLANT_DIR, and its key in state.json), and what it makes stale when it runs again
_PRODUCTS = {"train": ["narrow"], "mine": ["miner.yaml", "uniform.yaml", "miner_samples.npz", "uniform_samples.npz"],
             "heldout": ["heldout.npz"], "retrain_mined": ["mined"], "retrain_control": ["control"], "eval": [],
             "uniform_plain": ["uniform_plain.yaml", "uniform_plain_samples.npz"]}
_STALE_AFTER = {"train": (*PLANT_STAGES[1:], "uniform_plain"), "mine": ("retrain_mined", "eval"), "heldout": (),
                "retrain_mined": (), "retrain_control": (), "eval": (),
                "uniform_plain": ()}  # a retrain drops its own eval keys
# uniform_plain (an extra stage, not in PLANT_STAGES): uniform draws over the whole budget, read off by the same
# tree and region test with no fresh-draw re-test: the plain uniform-random baseline beside a validate=<share> run
EVAL_POLICIES = ("narrow", "mined", "control")
_RUN_STAGE = {"narrow": "train", "mined": "retrain_mined", "control": "retrain_control"}


def _train(run, max_time_s, extra=()):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "robotrl.cli", "train", *NARROW, f"run_dir={run}", f"max_time_s={max_time_s}",
           *extra]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _plant_state():
    path = PLANT_DIR / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save_plant_state(state):
    (PLANT_DIR / "state.json").write_text(json.dumps(state, indent=1, default=float))


def _discard(stage, state):
    """Remove a stage's products and results (it is to be redone, or what it used was replaced)."""
    import shutil

    for name in _PRODUCTS[stage]:
        path = PLANT_DIR / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    state.pop(stage, None)
    state.get("meta", {}).pop(stage, None)
    if stage.startswith("retrain_"):  # the evaluation of that policy
        policy = stage.split("_")[1]
        state["eval"] = {k: v for k, v in state.get("eval", {}).items() if not k.startswith(f"{policy}_")}


def _trained_s(run):
    """Training seconds the run's latest checkpoint records (0 without one): a run killed early is not done."""
    latest = run / "checkpoints" / "latest.json"
    if not latest.is_file():
        return 0.0
    name = json.loads(latest.read_text())["name"]
    return float(json.loads((run / "checkpoints" / f"{name}.json").read_text()).get("elapsed_s", 0.0))


def _stage_done(stage, state, train_s=480, extra_s=240):
    if stage == "train":
        return _trained_s(PLANT_DIR / "narrow") >= train_s
    if stage.startswith("retrain_"):
        return _trained_s(PLANT_DIR / stage.split("_")[1]) >= train_s + extra_s
    if stage == "eval":
        return all(f"{n}_success_elsewhere_pct" in state.get("eval", {}) for n in EVAL_POLICIES)
    if stage == "mine" and state.get("mine", {}).get("mine_options", _OLD_MINE_OPTIONS) != MINE_OPTIONS:
        return False  # mined with other options (a state without the key: the options before it existed)
    return stage in state and all((PLANT_DIR / f).exists() for f in _PRODUCTS[stage])


def _planted_share(region, params):
    """Fraction of a region's friction interval below PLANTED_FRICTION (the planted box is a friction band)."""
    p = next(q for q in params if q.name == "friction")
    lo, hi = region.bounds.get("friction", [p.low, p.high])
    return max(0.0, min(hi, PLANTED_FRICTION) - lo) / max(hi - lo, 1e-12)


def heldout_metrics(x, fail, regions, params):
    """Mined regions against held-out scenarios (uniform, labelled by the narrow policy); see the README."""
    from robotrl.twin.mine import failure_coverage, inside_regions

    planted = x[:, MINE_PARAMS.index("friction")] < PLANTED_FRICTION
    background = float(fail[~planted].mean())
    out = {}
    for name, regs in regions.items():
        inside = inside_regions(x, regs, params)
        each = [inside_regions(x, [r], params) for r in regs]
        false = [bool(m.any() and fail[m].mean() < 0.5) for m in each]
        out[f"{name}_regions_count"] = len(regs)
        out[f"{name}_regions_volume_pct"] = round(100 * float(inside.mean()), 1)
        out[f"{name}_recall_of_heldout_failures_pct"] = round(100 * failure_coverage(inside, fail), 1)
        out[f"{name}_precision_failure_rate_inside_pct"] = (round(100 * float(fail[inside].mean()), 1)
                                                            if inside.any() else float("nan"))
        out[f"{name}_false_regions"] = int(sum(false))
        out[f"{name}_false_regions_vs_planted"] = int(sum(f or _planted_share(r, params) < 0.5
                                                          for f, r in zip(false, regs, strict=True)))
        out[f"{name}_regions_without_heldout_points"] = int(sum(not m.any() for m in each))
        out[f"{name}_planted_box_coverage_pct"] = round(100 * float((inside & planted).sum() / planted.sum()), 1)
        out[f"{name}_planted_failure_coverage_pct"] = round(100 * failure_coverage(inside, fail, planted), 1)
        out[f"{name}_planted_excess_failure_coverage_pct"] = round(
            100 * failure_coverage(inside, fail, planted, background), 1)
    return out


def _mine_arm(ev, name, budget, uniform_only, validate):
    """One mining arm on the narrow policy: writes ``<name>.yaml`` and ``<name>_samples.npz``, returns its figures."""
    from robotrl.twin.scenarios import ScenarioFile

    res = mine(ev, ev.params, budget, rounds=4, seed=0, uniform_only=uniform_only, min_leaf=MINE_OPTIONS["min_leaf"],
               baseline=MINE_OPTIONS["baseline"], reference=TRAINED_REGIME, validate=validate)
    ScenarioFile("driving", ev.params, res.regions, weighting=WEIGHTING).save(PLANT_DIR / f"{name}.yaml")
    np.savez(PLANT_DIR / f"{name}_samples.npz", x=res.samples, success=res.success)
    return {f"{name}_failure_rate_in_samples": float(1 - res.success.mean()),
            f"{name}_background_failure_rate": res.background,
            f"{name}_regions": [f"{r.summary} ({round(r.failure_rate * r.samples)}/{r.samples} failed)"
                                for r in res.regions]}


def _run_stage(stage, state, train_s, extra_s, budget, n_heldout, n_eval):
    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import _from_unit, inside_regions
    from robotrl.twin.scenarios import ScenarioFile

    narrow = PLANT_DIR / "narrow"
    files = {name: PLANT_DIR / f"{name}.yaml" for name in ("miner", "uniform")}
    if stage == "train":
        _train(narrow, train_s)
    elif stage == "mine":
        ev = ScenarioEvaluator(narrow, MINE_PARAMS, worlds=128, seed=1)
        validate = MINE_OPTIONS.get("validate", 0.0)
        res_state = {**_mine_arm(ev, "miner", budget, False, validate),
                     **_mine_arm(ev, "uniform", budget, True, validate)}
        res_state["mine_options"] = dict(MINE_OPTIONS)
        state["mine"] = res_state
    elif stage == "uniform_plain":
        state["uniform_plain"] = _mine_arm(ScenarioEvaluator(narrow, MINE_PARAMS, worlds=128, seed=1), "uniform_plain",
                                           budget, True, 0.0)
    elif stage == "heldout":
        # uniform over the space, labelled by the narrow policy: the empirical failure region
        ev = ScenarioEvaluator(narrow, MINE_PARAMS, worlds=128, seed=3)
        x = _from_unit(np.random.default_rng(123).random((n_heldout, len(MINE_PARAMS))), ev.params)
        fail = ~ev(x)
        np.savez(PLANT_DIR / "heldout.npz", x=x, fail=fail)
        planted = x[:, 0] < PLANTED_FRICTION
        state["heldout"] = {"heldout_scenarios": n_heldout,
                            "narrow_heldout_failure_rate_planted_pct": round(100 * float(fail[planted].mean()), 1),
                            "narrow_heldout_failure_rate_trained_pct": round(100 * float(fail[~planted].mean()), 1)}
    elif stage.startswith("retrain_"):
        # continue the narrow run for extra_s, with the mined scenarios mixed in or without (control)
        import shutil

        policy = stage.split("_")[1]
        run = PLANT_DIR / policy
        extra = ([f"task.scenarios={files['miner']}", f"task.scenario_mix={SCENARIO_MIX[policy]}"]
                 if policy in SCENARIO_MIX else [])
        shutil.copytree(narrow, run)
        _train(run, train_s + extra_s, ["resume=true", *extra])
    elif stage == "eval":
        # resumable: one policy at a time, a new one only if it should end within the call's 10 minutes
        mined = ScenarioFile.load(files["miner"])
        draws = mined.sample(n_eval, torch.Generator().manual_seed(7), weighting="failure_rate")
        x_in = np.stack([draws[n].numpy() for n in MINE_PARAMS], 1)
        pool = _from_unit(np.random.default_rng(8).random((4 * n_eval, len(MINE_PARAMS))), mined.params)
        x_out = pool[~inside_regions(pool, mined.regions, mined.params)][:n_eval]
        res_state = state.setdefault("eval", {})
        res_state.update({"eval_scenarios_in_mined": len(x_in), "eval_scenarios_elsewhere": len(x_out)})
        t0, longest = time.time(), 0.0
        for name in EVAL_POLICIES:
            trained = _stage_done(_RUN_STAGE[name], state, train_s, extra_s)
            if f"{name}_success_elsewhere_pct" in res_state or not trained:
                continue
            if time.time() - t0 + 1.3 * longest > 480:
                print(f"eval: {name} left for the next call (time)", flush=True)
                break
            t1 = time.time()
            e = ScenarioEvaluator(PLANT_DIR / name, MINE_PARAMS, worlds=128, seed=2)
            res_state[f"{name}_success_in_mined_regions_pct"] = round(100 * float(e(x_in).mean()), 1)
            res_state[f"{name}_success_elsewhere_pct"] = round(100 * float(e(x_out).mean()), 1)
            longest = max(longest, time.time() - t1)
            _save_plant_state(state)


def planted_rows(stages=PLANT_STAGES, train_s=480, extra_s=240, budget=512, n_heldout=768, n_eval=384):
    """The planted-weakness experiment in stages of < 10 minutes each (state cached in PLANT_DIR).

    A stage that is done is skipped; one that runs first discards what it makes stale
    (``_STALE_AFTER``: a new narrow policy invalidates everything, new mined regions the mined
    retraining and the evaluation). Held-out metrics are recomputed from the cached labels and
    the current region files on every call.
    """
    import sys

    from robotrl.twin.scenarios import ScenarioFile

    PLANT_DIR.mkdir(parents=True, exist_ok=True)
    state = _plant_state()
    for stage in stages:
        if _stage_done(stage, state, train_s, extra_s):
            print(f"stage {stage}: done (cached in {PLANT_DIR})", flush=True)
            continue
        need = {"mine": ["train"], "heldout": ["train"], "retrain_mined": ["train", "mine"], "uniform_plain": ["train"],
                "retrain_control": ["train"], "eval": ["mine"]}.get(stage, [])  # eval: the policies trained
        missing = [s for s in need if not _stage_done(s, state, train_s, extra_s)]
        if missing:
            raise SystemExit(f"stage {stage} needs stages {missing} first")
        for stale in _STALE_AFTER[stage]:
            _discard(stale, state)
        if stage != "eval":
            _discard(stage, state)
        t0 = time.time()
        _run_stage(stage, state, train_s, extra_s, budget, n_heldout, n_eval)
        state.setdefault("meta", {})[stage] = {
            "command": "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv),
            "wall_s": round(time.time() - t0, 1) + state.get("meta", {}).get(stage, {}).get("wall_s", 0.0),
            "loadavg_1m": os.getloadavg()[0], "date": datetime.now().isoformat(timespec="seconds")}
        _save_plant_state(state)
    out = {"train_narrow_s": train_s, "retrain_extra_s": extra_s, "mine_budget": budget, "mine_params": MINE_PARAMS,
           "narrowed": "task.friction_range=[1.0,1.2] (effective road friction >= 1.0)",
           "planted_box": f"friction < {PLANTED_FRICTION}", "scenario_mix": SCENARIO_MIX,
           "scenario_weighting_train": WEIGHTING, "scenario_weighting_eval": "failure_rate"}
    for stage in ("mine", "heldout", "eval", "uniform_plain"):
        out.update(state.get(stage, {}))
    files = {name: PLANT_DIR / f"{name}.yaml" for name in ("miner", "uniform")}
    if _stage_done("uniform_plain", state, train_s, extra_s):
        files["uniform_plain"] = PLANT_DIR / "uniform_plain.yaml"
    if _stage_done("heldout", state, train_s, extra_s) and _stage_done("mine", state, train_s, extra_s):
        data = np.load(PLANT_DIR / "heldout.npz")
        regions = {name: ScenarioFile.load(f).regions for name, f in files.items()}
        out.update(heldout_metrics(data["x"], data["fail"], regions, ScenarioFile.load(files["miner"]).params))
    for stage, meta in state.get("meta", {}).items():
        out.update({f"{stage}_{k}": v for k, v in meta.items()})
    out["stages_done"] = [st for st in PLANT_STAGES if _stage_done(st, state, train_s, extra_s)]
    return out


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
    if mode == "mining_narrowed":
        narrowed = narrowed_rows()
        for k, v in narrowed["summary"].items():
            print(f"{k:55s} {v}")
        _merge("mining_narrowed", narrowed)
    if mode == "mining_validate":
        validated = validate_rows()
        for k, v in validated["summary"].items():
            print(f"{k:55s} {v}")
        _merge("mining_validate", validated)
    if mode in ("sim2sim", "all"):
        rows = sim2sim_rows()
        for row in rows:
            print({k: v for k, v in row.items() if k != "q_rmse_per_joint_rad"})
        _merge("sim_to_sim", rows)
    if mode == "sim2sim_policy":  # checkpoints after the mode: runs of robotrl train task=humanoid / tool_use
        opts = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)  # num_envs=32 episodes=128 seed=1 name=x
        name = opts.pop("name", "")  # section sim_to_sim_policy_<name>, frames sim2sim_policy_<name>_frames.png
        rows = sim2sim_policy_rows([a for a in sys.argv[2:] if "=" not in a], name=name,
                                   **{k: int(v) for k, v in opts.items()})
        for row in rows:
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "checkpoint"})
        _merge("sim_to_sim_policy" + (f"_{name}" if name else ""), rows)
    if mode == "sim2sim_passive":  # zero actions in both engines: the control for sim2sim_policy
        rows = sim2sim_passive_rows()
        for row in rows:
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
        _merge("sim_to_sim_passive", rows)
    if mode == "sim2sim_substeps":  # sim2sim_substeps <run> [2,8]: PyBullet substeps per MuJoCo step
        rows = sim2sim_substeps_rows(sys.argv[2], tuple(int(v) for v in (sys.argv[3] if len(sys.argv) > 3
                                                                             else "2,8").split(",")))
        for row in rows:
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "checkpoint"})
        _merge("sim_to_sim_substeps", rows)
    if mode in ("planted", "all"):
        stages = sys.argv[2].split(",") if len(sys.argv) > 2 else PLANT_STAGES  # one stage per call: < 10 min
        budgets = dict(PLANT_BUDGETS)
        seed = 0
        for arg in sys.argv[3:]:  # mining options: baseline=reference min_leaf=16; budgets: train_s=900 extra_s=480
            key, value = arg.split("=", 1)
            if key == "seed":  # the narrow policy's (and so its retrainings') training seed
                seed = int(value)
                NARROW[NARROW.index("seed=0")] = f"seed={seed}"
                continue
            if key in budgets:
                budgets[key] = int(value)
                continue
            if key not in ("baseline", "min_leaf", "validate"):
                raise SystemExit(f"planted: unknown option {key!r}; valid: baseline, min_leaf, validate, seed, "
                                 f"{', '.join(PLANT_BUDGETS)}")
            MINE_OPTIONS[key] = {"min_leaf": int, "validate": float}.get(key, str)(value)
        planted = planted_rows(stages, **budgets)
        for k, v in planted.items():
            print(f"{k:45s} {v}")
        default = MINE_OPTIONS == _OLD_MINE_OPTIONS and budgets == PLANT_BUDGETS and seed == 0
        section = f"planted_{MINE_OPTIONS['baseline']}_leaf{MINE_OPTIONS['min_leaf']}"
        if MINE_OPTIONS.get("validate"):
            section += f"_validate{MINE_OPTIONS['validate']:g}"
        if budgets != PLANT_BUDGETS:
            section += f"_train{budgets['train_s']}_extra{budgets['extra_s']}"
        if seed:
            section += f"_seed{seed}"
        _merge("planted" if default else section, planted)


if __name__ == "__main__":
    main()
