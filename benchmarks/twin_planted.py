"""Twin benchmark, planted weakness on a trained driving policy (``python benchmarks/twin.py planted <stage>``).

Staged (each stage one call of < 10 min by default), state cached in ``TWIN_PLANT_DIR``; the method
and what the coverage and false-region keys mean are in twin.py's docstring (Planted).
"""

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from robotrl.twin.mine import mine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twin_mining import TRAINED_REGIME  # noqa: E402

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


def _train(run, max_time_s, extra=(), base=None):
    """``robotrl train`` into ``run`` for ``max_time_s``: the narrow run's overrides (``base``: others) + ``extra``."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "robotrl.cli", "train", *(NARROW if base is None else base), f"run_dir={run}",
           f"max_time_s={max_time_s}", *extra]
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


def _planted_share(region, params, box=("friction", PLANTED_FRICTION)):
    """Fraction of a region's interval of ``box[0]`` below ``box[1]`` (the planted box is such a band)."""
    p = next(q for q in params if q.name == box[0])
    lo, hi = region.bounds.get(box[0], [p.low, p.high])
    return max(0.0, min(hi, box[1]) - lo) / max(hi - lo, 1e-12)


def heldout_metrics(x, fail, regions, params, box=("friction", PLANTED_FRICTION)):
    """Mined regions against held-out scenarios (uniform, labelled by the narrow policy); see the README.

    ``box``: the planted box, ``(parameter, upper bound)``: the scenarios with that column of ``x`` below it.
    """
    from robotrl.twin.paste import reach_regions
    from robotrl.twin.regions import failure_coverage, inside_regions

    planted = x[:, [p.name for p in params].index(box[0])] < box[1]
    background = float(fail[~planted].mean())
    out = {}
    for name, regs in regions.items():
        regs = reach_regions(regs)  # as far as each region reaches (pasting), nested ones dropped: the report's
        inside = inside_regions(x, regs, params)
        each = [inside_regions(x, [r], params) for r in regs]
        false = [bool(m.any() and fail[m].mean() < 0.5) for m in each]
        out[f"{name}_regions_count"] = len(regs)
        out[f"{name}_regions_volume_pct"] = round(100 * float(inside.mean()), 1)
        out[f"{name}_recall_of_heldout_failures_pct"] = round(100 * failure_coverage(inside, fail), 1)
        out[f"{name}_precision_failure_rate_inside_pct"] = (round(100 * float(fail[inside].mean()), 1)
                                                            if inside.any() else float("nan"))
        out[f"{name}_false_regions"] = int(sum(false))
        out[f"{name}_false_regions_vs_planted"] = int(sum(f or _planted_share(r, params, box) < 0.5
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
    return mining_figures(name, res)


def mining_figures(name, res):
    """One mining arm's figures: the failure rate of its samples, its background, its regions as sentences."""
    return {f"{name}_failure_rate_in_samples": float(1 - res.success.mean()),
            f"{name}_background_failure_rate": res.background,
            f"{name}_regions": [f"{r.summary} ({round(r.failure_rate * r.samples)}/{r.samples} failed)"
                                for r in res.regions]}


def _run_stage(stage, state, train_s, extra_s, budget, n_heldout, n_eval):
    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.regions import from_unit, inside_regions
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
        x = from_unit(np.random.default_rng(123).random((n_heldout, len(MINE_PARAMS))), ev.params)
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
        pool = from_unit(np.random.default_rng(8).random((4 * n_eval, len(MINE_PARAMS))), mined.params)
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
