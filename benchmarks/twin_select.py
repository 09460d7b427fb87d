"""Twin benchmark: the width-plant retraining with its checkpoint chosen on validation draws.

``python benchmarks/twin.py planted_width_select runs/drv55_seed4 seed=4 [mix=0.25]``, after
``planted_width_retrain`` mined that run (``<run>_retrain/mined.yaml``).

1. the mined arm's retraining again (``<run>_retrain/select_mix<mix>``: a copy of the narrow run,
   ``resume=true task.scenarios=mined.yaml task.scenario_mix=<mix>``, as long as ``planted_width_retrain``'s),
   now with ``keep_checkpoints=0``;
2. ``robotrl.twin.select.select_checkpoint``: the narrow start and every ``every``-th later checkpoint
   scored on 256 validation draws from the mined regions and 256 from the own distribution (seed 11,
   which the report below does not use), and the rule of that module (2 points of tolerance);
3. the report: the narrow policy, this retraining's last checkpoint and its chosen one, on
   ``planted_width_retrain``'s test scenarios (``twin_planted_width.test_sets``, env seed 2) and on 384
   draws of the own distribution (env seed 2).

``paste=0.05``: the same recipe on the mined file of the pasting step (``robotrl.twin.paste``):
``<run>_retrain/mined_paste0.05_reach.yaml``, mined as ``mined.yaml`` (the same options and seed) with ``paste``,
and its arm ``..._paste0.05_reach``. Its regions keep the plain box for training and the grown one as their
``reach`` (session 59; session 58's file and arm without ``_reach`` trained on the grown boxes). The report is
then given three times: on the test scenarios of the file's regions (what training drew from), on those of
their reach (keys ``reach_*``), and on those of ``mined.yaml``'s (keys ``plain_regions_*``), the scenarios the
plain recipe was scored on.

``planted_width_soup`` (after ``planted_width_select``): the second answer, fixed before it was scored:
``robotrl.twin.select.average_checkpoints`` over every checkpoint of the second half of that retraining
(iterations past the midpoint between the start and the end), reported on the same test scenarios.
"""

import shutil
import time
from pathlib import Path

import numpy as np
from twin_planted_width import BANK, RETRAIN_MIX, WIDTH_PARAMS, test_sets

SELECT_SEED = 11  # validation draws and env seed; the report uses 7/8/9 (test_sets) and env seed 2


def width_select(run: str, seed: int = 0, mix: float = RETRAIN_MIX, extra_s: int = 480, every: int = 6,
                 n_eval: int = 384, within_s: float | None = None, paste: float = 0.0) -> dict:
    """Retrain with every checkpoint kept, choose one on validation draws, report it (module docstring).

    ``within_s``: a shorter retraining read off the kept one (no training): the rule applied to the
    checkpoints of its first ``within_s`` seconds only, and "last" is the newest of those.
    """
    from twin_planted import _train, _trained_s

    from robotrl.storage.checkpoint import resolve
    from robotrl.twin.paste import reach_regions
    from robotrl.twin.scenarios import ScenarioFile
    from robotrl.twin.select import select_checkpoint

    path, work = Path(run), Path(f"{run}_retrain")
    plain_file = mined_file = work / "mined.yaml"
    if not mined_file.is_file():
        raise SystemExit(f"planted_width_select: no {mined_file}; run planted_width_retrain {run} seed={seed} first")
    if paste:
        mined_file = _mine_pasted(path, work, paste)
    train_s = max(600, round(_trained_s(path)))
    arm = work / (f"select_mix{mix:g}" + ("" if extra_s == 480 else f"_extra{extra_s}")
                  + (f"_paste{paste:g}_reach" if paste else ""))
    base = ["task=driving", f"seed={seed}", "progress=false", "tensorboard=false", "eval_at_end=false"]
    out: dict = {"run": str(path), "train_seed": seed, "scenario_mix": mix, "retrain_extra_s": extra_s,
                 "mined_file": str(mined_file), "paste": paste,
                 "select_every": every, "select_seed": SELECT_SEED, "select_tolerance_points": 2.0,
                 "select_episodes_per_distribution": 256, "arm": str(arm)}
    if within_s is not None:
        if _trained_s(arm) < train_s + extra_s:
            raise SystemExit(f"planted_width_select within_s={within_s:g}: {arm} has not finished its {extra_s} s "
                             f"retraining; run planted_width_select {run} seed={seed} mix={mix:g} first")
        out["select_within_s"] = within_s
    elif _trained_s(arm) < train_s + extra_s:
        if arm.exists():
            shutil.rmtree(arm)  # an interrupted retraining starts again from the narrow run
        shutil.copytree(path, arm)
        t0 = time.time()
        _train(arm, train_s + extra_s, ["resume=true", f"task.scenarios={mined_file.resolve()}",
                                        f"task.scenario_mix={mix}", "keep_checkpoints=0"], base=base)
        out["retrain_wall_s"] = round(time.time() - t0, 1)
    t0 = time.time()
    sel = select_checkpoint(path, arm, mined_file, overrides=BANK, episodes=256, every=every, tolerance=0.02,
                            seed=SELECT_SEED, within_s=within_s)
    sel.save(arm / ("select.json" if within_s is None else f"select_within{within_s:g}.json"))
    out["select_wall_s"] = round(time.time() - t0, 1)
    out.update({"select_iterations": sel.iterations, "select_val_in_regions": sel.in_regions,
                "select_val_own": sel.own, "chosen_iteration": sel.iterations[sel.chosen],
                "chosen_is_start": sel.chosen == 0})
    last = resolve(str(arm)) if within_s is None else Path(sel.checkpoints[-1])
    policies = {"narrow": resolve(str(path)), "last": last, "chosen": Path(sel.checkpoint)}
    mined = ScenarioFile.load(mined_file)
    out["mined_regions"] = [f"{r.summary} ({round(r.failure_rate * r.samples)}/{r.samples} failed)"
                            for r in mined.regions]
    if paste:
        reach = ScenarioFile(mined.task, mined.params, reach_regions(mined.regions), weighting=mined.weighting)
        out["mined_reach"] = [f"{e.summary} ({round(e.failure_rate * e.samples)}/{e.samples} failed)"
                              for e in reach.regions]
        _report(out, policies, ScenarioFile.load(plain_file), n_eval, prefix="plain_regions_")
        _report(out, policies, reach, n_eval, prefix="reach_")
    return _report(out, policies, mined, n_eval)


def _mine_pasted(path: Path, work: Path, paste: float) -> Path:
    """``<work>/mined_paste<paste>_reach.yaml``: ``planted_width_retrain``'s mining of ``path``, with pasting."""
    from twin_planted_width import BOX, OPTIONS, RETRAIN_WEIGHTING, TRAINED_WIDTH

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import mine
    from robotrl.twin.scenarios import ScenarioFile

    out = work / f"mined_paste{paste:g}_reach.yaml"
    if not out.is_file():
        ev = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=1)
        res = mine(ev, ev.params, 512, rounds=4, seed=0, min_leaf=OPTIONS["min_leaf"], baseline=OPTIONS["baseline"],
                   reference={BOX[0]: TRAINED_WIDTH}, validate=OPTIONS["validate"], validate_rule="sequential",
                   paste=paste)
        if not res.regions:
            raise SystemExit(f"planted_width_select paste={paste:g}: the miner kept no region on {path}")
        ScenarioFile("driving", ev.params, res.regions, weighting=RETRAIN_WEIGHTING).save(out)
    return out


def _report(out: dict, policies: dict, mined, n_eval: int, prefix: str = "") -> dict:
    """Each policy's success on the retraining report's scenarios, and its gains over ``policies["narrow"]``.

    ``prefix`` names the keys of the figures that depend on the scenarios drawn from ``mined``'s regions; with a
    prefix the own distribution (the same for any file) is not scored again.
    """
    from robotrl.twin.evaluate import ScenarioEvaluator

    x_in, x_out = test_sets(mined, n_eval)
    x_own = np.full((n_eval, 1), np.nan, dtype=np.float32)
    for name, ckpt in policies.items():
        e = ScenarioEvaluator(ckpt, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=2)
        out[f"{name}_checkpoint"] = str(ckpt)
        out[f"{prefix}{name}_success_in_mined_regions_pct"] = round(100 * float(e(x_in).mean()), 1)
        out[f"{prefix}{name}_success_elsewhere_pct"] = round(100 * float(e(x_out).mean()), 1)
        if not prefix:  # the own distribution does not depend on the file: scored once
            own = ScenarioEvaluator(ckpt, WIDTH_PARAMS[:1], worlds=128, seed=2)
            out[f"{name}_success_own_distribution_pct"] = round(100 * float(own(x_own).mean()), 1)
    for name in policies:
        if name == "narrow":
            continue
        for where in ("in_mined_regions", "elsewhere") + (() if prefix else ("own_distribution",)):
            out[f"{prefix}{name}_gain_{where}_points"] = round(
                out[f"{prefix}{name}_success_{where}_pct"] - out[f"{prefix}narrow_success_{where}_pct"], 1)
    return out


def width_soup(run: str, mix: float = RETRAIN_MIX, n_eval: int = 384) -> dict:
    """Average the second half of ``planted_width_select``'s retraining, report it beside the narrow policy."""
    from robotrl.storage.checkpoint import load_checkpoint, resolve
    from robotrl.twin.scenarios import ScenarioFile
    from robotrl.twin.select import average_checkpoints

    path, work = Path(run), Path(f"{run}_retrain")
    arm = work / f"select_mix{mix:g}"
    if not (arm / "select.json").is_file():
        raise SystemExit(f"planted_width_soup: no {arm}/select.json; run planted_width_select {run} first")
    start = int(load_checkpoint(resolve(str(path)))[1]["iteration"])
    kept = sorted((int(p.stem.split("_")[1]), p) for p in (arm / "checkpoints").glob("ckpt_*.safetensors"))
    end = kept[-1][0]
    half = [p for it, p in kept if it > (start + end) / 2]
    soup = average_checkpoints(half, arm / "soup")
    out: dict = {"run": str(path), "arm": str(arm), "scenario_mix": mix, "soup_of": len(half),
                 "soup_iterations": [half[0].stem, half[-1].stem], "start_iteration": start}
    return _report(out, {"narrow": resolve(str(path)), "soup": soup}, ScenarioFile.load(work / "mined.yaml"), n_eval)
