"""Twin benchmark, a sharper planted weakness: road width (``python benchmarks/twin.py planted_width <run>``).

The friction plant (``twin_planted.py``) fails gradually: the narrow policy fails 23-38% of the time over
much of its planted box, below the background, so no region can hold those failures without being a
false one (held-out failure rate < 0.5). Here the plant is the road's half-width: ``robotrl train
task=driving`` trains on half-widths 0.6-1.0 m (``configs/task/driving.yaml``), and the miner searches
0.3-1.0 m, so the planted box is ``half_width < 0.6``: roads narrower than any the policy saw, where its
centre leaves the road more and more often as the road narrows.

Steps (one call; a missing run is trained first, the bare default command with ``seed=<k>``):

1. the miner and the uniform baseline each get ``budget`` scenarios over half-width, curvature,
   traffic speed and obstacles (friction and the rest keep the task's own draws), the same region
   extraction and test as the friction plant's recorded runs (``baseline=reference`` against the
   trained regime ``half_width`` 0.6-1.0, ``min_leaf=16``, ``validate=0.2``), chosen before this ran;
2. held out: ``n_heldout`` uniform scenarios labelled by the policy (another env seed);
3. the same held-out metrics as the friction plant (``twin_planted.heldout_metrics``, the box
   ``half_width < 0.6``): the share of the planted failures the regions cover, of the excess over
   the trained regime's failure rate, of the box's volume, and the false regions.

The evaluator widens the task's track bank to half-widths 0.3-1.0 m and 256 tracks
(``ScenarioEvaluator`` overrides), so that narrow roads exist to be picked.
"""

import time
from pathlib import Path

import numpy as np

WIDTH_PARAMS = ["half_width", "max_curvature", "traffic_speed", "obstacles"]
TRAINED_WIDTH = [0.6, 1.0]  # configs/task/driving.yaml: task.half_width, what the default run trains on
BOX = ("half_width", TRAINED_WIDTH[0])  # the planted box: half_width below it
BANK = {"half_width": [0.3, 1.0], "num_tracks": 256}  # the evaluator's track bank (narrow roads to pick)
OPTIONS = {"baseline": "reference", "min_leaf": 16, "validate": 0.2}


def width_rows(run: str, seed: int = 0, train_s: int = 600, budget: int = 512, n_heldout: int = 768) -> dict:
    """Mine a default driving run over road width and score the regions on held-out scenarios (module docstring)."""
    from twin_planted import _train, heldout_metrics, mining_figures

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import mine

    path = Path(run)
    if not (path / "checkpoints" / "latest.json").is_file():
        _train(path, train_s, base=["task=driving", f"seed={seed}", "progress=false", "tensorboard=false",
                                    "eval_at_end=false"])
    out: dict = {"run": str(path), "train_seed": seed, "mine_budget": budget, "mine_params": WIDTH_PARAMS,
                 "trained_half_width": TRAINED_WIDTH, "planted_box": f"{BOX[0]} < {BOX[1]}", "bank": BANK,
                 "mine_options": OPTIONS}
    t0 = time.time()
    ev = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=1)
    regions = {}
    for name, uniform in (("miner", False), ("uniform", True)):
        res = mine(ev, ev.params, budget, rounds=4, seed=0, uniform_only=uniform, min_leaf=OPTIONS["min_leaf"],
                   baseline=OPTIONS["baseline"], reference={BOX[0]: TRAINED_WIDTH}, validate=OPTIONS["validate"])
        regions[name] = res.regions
        out.update(mining_figures(name, res))
    out["mine_wall_s"] = round(time.time() - t0, 1)
    t0 = time.time()
    x, fail = _heldout(path, n_heldout)
    planted = x[:, 0] < BOX[1]
    out.update({"heldout_scenarios": n_heldout, "heldout_wall_s": round(time.time() - t0, 1),
                "heldout_failure_rate_planted_pct": round(100 * float(fail[planted].mean()), 1),
                "heldout_failure_rate_trained_pct": round(100 * float(fail[~planted].mean()), 1)})
    edges = np.arange(0.3, 1.01, 0.1)
    bins = np.digitize(x[:, 0], edges[1:-1])
    out["heldout_failure_rate_by_half_width"] = {
        f"{edges[k]:.1f}-{edges[k + 1]:.1f}": round(float(fail[bins == k].mean()), 3) for k in range(len(edges) - 1)}
    out.update(heldout_metrics(x, fail, regions, ev.params, BOX))
    return out


def _heldout(path: Path, n_heldout: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_heldout`` uniform scenarios ``(N, 4)`` and their failure flags ``(N,)``, labelled by the run's policy.

    Env seed 3 and draw seed 123, as every width-plant figure; cached in the run dir under the name of the
    checkpoint that labelled them (a run trained further gets new labels).
    """
    import json

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.regions import from_unit

    ckpt = json.loads((path / "checkpoints" / "latest.json").read_text())["name"]
    cache = path / f"twin_width_heldout_{n_heldout}_{ckpt}.npz"
    if cache.is_file():
        data = np.load(cache)
        return data["x"], data["fail"]
    held = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=3)
    x = from_unit(np.random.default_rng(123).random((n_heldout, len(WIDTH_PARAMS))), held.params)
    fail = ~held(x)
    np.savez(cache, x=x, fail=fail)
    return x, fail


REPEAT_KEYS = ("false_regions", "regions_count", "planted_failure_coverage_pct", "precision_failure_rate_inside_pct",
               "recall_of_heldout_failures_pct")


def width_repeats(runs: list[str], mine_seeds: list[int], rules: tuple[str, ...] = ("even", "sequential"),
                  budget: int = 512, n_heldout: int = 768, paste: float = 0.0,
                  uniform_validate: float | None = None) -> dict:
    """Both arms on trained runs, over mining seeds and validation rules: the false-region count with a spread.

    One mining run per (run, mining seed, rule, arm), ``OPTIONS`` otherwise, ``paste`` (``mine``'s pasting step,
    0: off) for both arms, ``uniform_validate`` (default ``OPTIONS["validate"]``) the uniform arm's held-back
    share (0: plain uniform-random search, its whole budget on the tree, no re-test); each scored on the run's
    held-out labels (``_heldout``). Returns the rows and, per rule and arm, the means of ``REPEAT_KEYS``,
    the share of runs covering >= 80% of the planted failures, and the paired miner-minus-uniform
    false-region difference with its standard error.
    """
    from twin_planted import heldout_metrics

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import mine

    rows = []
    t0 = time.time()
    for run in runs:
        path = Path(run)
        if not (path / "checkpoints" / "latest.json").is_file():
            raise SystemExit(f"planted_width_repeats: {run} has no checkpoint; train it first "
                             f"(python benchmarks/twin.py planted_width {run} seed=<k>)")
        x, fail = _heldout(path, n_heldout)
        ev = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=1)
        for mine_seed in mine_seeds:
            for rule in rules:
                regions = {}
                for arm, uniform in (("miner", False), ("uniform", True)):
                    held = uniform_validate if uniform and uniform_validate is not None else OPTIONS["validate"]
                    regions[arm] = mine(ev, ev.params, budget, rounds=4, seed=mine_seed, uniform_only=uniform,
                                        min_leaf=OPTIONS["min_leaf"], baseline=OPTIONS["baseline"],
                                        reference={BOX[0]: TRAINED_WIDTH}, validate=held,
                                        validate_rule=rule, paste=paste).regions
                m = heldout_metrics(x, fail, regions, ev.params, BOX)
                row = {"run": run, "mine_seed": mine_seed, "rule": rule,
                       **{f"{arm}_{k}": m[f"{arm}_{k}"] for arm in ("miner", "uniform") for k in REPEAT_KEYS}}
                rows.append(row)
                print(row, flush=True)
    out: dict = {"runs": runs, "mine_seeds": mine_seeds, "mine_budget": budget, "mine_options": OPTIONS, "paste": paste,
                 "uniform_validate": OPTIONS["validate"] if uniform_validate is None else uniform_validate,
                 "planted_box": f"{BOX[0]} < {BOX[1]}", "rows": rows, "wall_s": round(time.time() - t0, 1)}
    for rule in rules:
        sel = [r for r in rows if r["rule"] == rule]
        for arm in ("miner", "uniform"):
            for k in REPEAT_KEYS:
                vals = np.array([r[f"{arm}_{k}"] for r in sel], dtype=float)
                out[f"{rule}_{arm}_{k}_mean"] = round(float(np.nanmean(vals)), 3)
            cov = np.array([r[f"{arm}_planted_failure_coverage_pct"] for r in sel], dtype=float)
            out[f"{rule}_{arm}_share_covering_80pct"] = round(float((cov >= 80).mean()), 3)
        diff = np.array([r["miner_false_regions"] - r["uniform_false_regions"] for r in sel], dtype=float)
        out[f"{rule}_false_regions_miner_minus_uniform_mean"] = round(float(diff.mean()), 3)
        out[f"{rule}_false_regions_miner_minus_uniform_se"] = round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 3)
        out[f"{rule}_runs"] = len(sel)
    return out


def coverage_ceiling(runs: list[str], band: float = 0.05, n_heldout: int = 768) -> dict:
    """What a region test of "fails at least half the time" can cover of each run's planted failures.

    From the run's held-out labels (``_heldout``): the failure rate in ``band``-wide slices of half-width from
    the narrow end of the planted box; the cut at the first slice failing less than half the time; the share
    of the planted failures narrower than that cut. An oracle's figure (it reads the held-out labels the
    coverage is scored on), to set the miner's coverage against.
    """
    out: dict = {"runs": runs, "band_m": band, "heldout_scenarios": n_heldout, "planted_box": f"{BOX[0]} < {BOX[1]}"}
    ceilings = []
    for run in runs:
        x, fail = _heldout(Path(run), n_heldout)
        fail = np.asarray(fail, dtype=bool)
        hw = x[:, WIDTH_PARAMS.index(BOX[0])]
        planted = fail & (hw < BOX[1])
        lo = float(BANK["half_width"][0])
        cut, rates, contiguous = lo, [], True
        for a in np.arange(lo, BOX[1] - 1e-9, band):
            rate = float(fail[(hw >= a) & (hw < a + band)].mean())
            rates.append(round(rate, 3))
            contiguous = contiguous and rate >= 0.5  # the cut stops at the first slice below 0.5
            if contiguous:
                cut = float(a + band)
        name = Path(run).name
        ceilings.append(100 * float((planted & (hw < cut)).sum() / planted.sum()))
        out[f"{name}_failure_rate_by_band"] = rates
        out[f"{name}_cut_half_width_m"] = round(cut, 3)
        out[f"{name}_ceiling_planted_failure_coverage_pct"] = round(ceilings[-1], 1)
    out["mean_ceiling_planted_failure_coverage_pct"] = round(float(np.mean(ceilings)), 1)
    return out


RETRAIN_MIX = 0.5  # task.scenario_mix of the mined retraining, as the friction plant's
RETRAIN_WEIGHTING = "learnability"  # how the mined file picks regions for training, as the friction plant's


def width_retrain(run: str, seed: int = 0, train_s: int = 600, extra_s: int = 480, budget: int = 512,
                  mine_seed: int = 0, n_eval: int = 384, mix: float = RETRAIN_MIX) -> dict:
    """Mine a width-plant run, retrain it with the mined scenarios and without (control), score all three.

    1. the miner with ``OPTIONS`` and the sequential re-test (``robotrl twin mine``'s default) writes
       ``<run>_retrain/mined.yaml`` (weighting ``learnability``, as the friction plant's retraining);
    2. ``mined``: the run continued to ``train_s + extra_s`` s with ``task.scenarios=mined.yaml
       task.scenario_mix=0.5``; its bank gains ``task.scenario_tracks`` tracks of the mined widths that only
       the mined resets reach (``tasks/driving/scenario_params.scenario_tracks``); ``control``: continued as
       long without them, so both see the same extra training on the default distribution otherwise;
    3. success of the narrow, mined and control policies on ``n_eval`` scenarios drawn from the mined
       regions (weighted by failure rate) and ``n_eval`` uniform ones outside them, on the evaluator's
       widened bank (``BANK``), the same scenarios and env seed for all three.

    ``mix`` other than 0.5: the mined arm trains with that ``task.scenario_mix`` (``<run>_retrain/mined_mix<mix>``;
    it is still reported as ``mined``), beside the same control.
    Each step is cached under ``<run>_retrain/`` (a finished retraining is not redone).
    """
    import shutil

    from twin_planted import _train, _trained_s

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import mine
    from robotrl.twin.scenarios import ScenarioFile

    path, work = Path(run), Path(f"{run}_retrain")
    base = ["task=driving", f"seed={seed}", "progress=false", "tensorboard=false", "eval_at_end=false"]
    if not (path / "checkpoints" / "latest.json").is_file():
        _train(path, train_s, base=base)
    train_s = max(train_s, round(_trained_s(path)))  # each retraining runs extra_s past the run's own training
    work.mkdir(exist_ok=True)
    mined_file = work / "mined.yaml"
    out: dict = {"run": str(path), "train_seed": seed, "train_s": train_s, "retrain_extra_s": extra_s,
                 "mine_budget": budget, "mine_seed": mine_seed, "mine_params": WIDTH_PARAMS, "bank": BANK,
                 "mine_options": {**OPTIONS, "validate_rule": "sequential"}, "scenario_mix": mix,
                 "scenario_weighting_train": RETRAIN_WEIGHTING, "scenario_weighting_eval": "failure_rate",
                 "planted_box": f"{BOX[0]} < {BOX[1]}"}
    ev = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=1)
    if not mined_file.is_file():
        t0 = time.time()
        res = mine(ev, ev.params, budget, rounds=4, seed=mine_seed, min_leaf=OPTIONS["min_leaf"],
                   baseline=OPTIONS["baseline"], reference={BOX[0]: TRAINED_WIDTH}, validate=OPTIONS["validate"],
                   validate_rule="sequential")
        if not res.regions:
            raise SystemExit(f"planted_width_retrain: the miner kept no region on {run}; nothing to retrain on")
        ScenarioFile("driving", ev.params, res.regions, weighting=RETRAIN_WEIGHTING).save(mined_file)
        print(f"mined {len(res.regions)} region(s) in {time.time() - t0:.0f} s -> {mined_file}", flush=True)
    mined = ScenarioFile.load(mined_file)
    out["mined_regions"] = [f"{r.summary} ({round(r.failure_rate * r.samples)}/{r.samples} failed)"
                            for r in mined.regions]
    x, fail = _heldout(path, 768)
    out.update({f"miner_{k}": v for k, v in _coverage(x, fail, mined.regions, ev.params).items()})
    mined_dir = "mined" if mix == RETRAIN_MIX else f"mined_mix{mix:g}"
    for arm, extra in ((mined_dir, [f"task.scenarios={mined_file.resolve()}", f"task.scenario_mix={mix}"]),
                       ("control", [])):
        arm_run = work / arm
        if _trained_s(arm_run) >= train_s + extra_s:
            continue
        if arm_run.exists():
            shutil.rmtree(arm_run)  # an interrupted retraining starts again from the narrow run
        shutil.copytree(path, arm_run)
        t0 = time.time()
        _train(arm_run, train_s + extra_s, ["resume=true", *extra], base=base)
        out[f"{arm}_retrain_wall_s"] = round(time.time() - t0, 1)
    x_in, x_out = test_sets(mined, n_eval)
    out.update({"eval_scenarios_in_mined": len(x_in), "eval_scenarios_elsewhere": len(x_out)})
    for name, policy in (("narrow", path), ("mined", work / mined_dir), ("control", work / "control")):
        e = ScenarioEvaluator(policy, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=2)
        out[f"{name}_success_in_mined_regions_pct"] = round(100 * float(e(x_in).mean()), 1)
        out[f"{name}_success_elsewhere_pct"] = round(100 * float(e(x_out).mean()), 1)
        out[f"{name}_trained_s"] = round(_trained_s(policy), 1)
    for name in ("mined", "control"):
        for where in ("in_mined_regions", "elsewhere"):
            out[f"{name}_gain_{where}_points"] = round(
                out[f"{name}_success_{where}_pct"] - out[f"narrow_success_{where}_pct"], 1)
    return out


def test_sets(mined, n_eval: int) -> tuple[np.ndarray, np.ndarray]:
    """The retraining report's scenarios: ``n_eval`` from the mined regions, ``n_eval`` uniform outside them.

    In the regions: picked by failure rate, a parameter a region leaves free uniform over its declared
    range. Fixed generators (7, 8, 9), so every policy and every report gets the same scenarios.
    """
    import torch

    from robotrl.twin.regions import from_unit, inside_regions

    draws = mined.sample(n_eval, torch.Generator().manual_seed(7), weighting="failure_rate")
    x_in = np.stack([draws[n].numpy() for n in WIDTH_PARAMS], 1)
    nan = np.isnan(x_in)
    x_in[nan] = from_unit(np.random.default_rng(9).random(x_in.shape), mined.params)[nan]
    pool = from_unit(np.random.default_rng(8).random((4 * n_eval, len(WIDTH_PARAMS))), mined.params)
    return x_in, pool[~inside_regions(pool, mined.regions, mined.params)][:n_eval]


def _coverage(x: np.ndarray, fail: np.ndarray, regions: list, params: list) -> dict:
    """The width plant's held-out figures of one region list (``twin_planted.heldout_metrics``, one arm)."""
    from twin_planted import heldout_metrics

    m = heldout_metrics(x, fail, {"arm": regions}, params, BOX)
    return {k.removeprefix("arm_"): v for k, v in m.items()}


def snapshot_spread(runs: list[str], eval_seeds: tuple[int, ...] = (1, 2, 3), num_envs: int = 128,
                    episodes: int = 256) -> dict:
    """Success on the task's own distribution of every checkpoint a run kept, and of its last one under other seeds.

    The retraining figures above compare one final checkpoint per arm. This separates the two noises in
    such a comparison: the **snapshot spread** (the kept checkpoints, 25 iterations apart at the end of
    training, all scored with env seed ``eval_seeds[0]``, the same draws for each) and the **evaluation
    noise** (the last checkpoint scored with each of ``eval_seeds``). Each score is ``robotrl eval
    checkpoint=<ckpt> num_envs=<num_envs> episodes=<episodes> video=false task.scenario_mix=0.0`` (the
    task's own distribution, as the own-distribution tables of ``robotrl/twin/README.md``).
    """
    import json
    import subprocess
    import sys
    import tempfile

    out: dict = {"num_envs": num_envs, "episodes": episodes, "eval_seeds": list(eval_seeds),
                 "protocol": "robotrl eval ... video=false task.scenario_mix=0.0, deterministic actions"}

    def score(ckpt: Path, seed: int) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "robotrl.cli", "eval", f"checkpoint={ckpt}", f"num_envs={num_envs}",
                   f"episodes={episodes}", "video=false", f"seed={seed}", f"out_dir={tmp}", "task.scenario_mix=0.0"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"snapshot_spread: {' '.join(cmd)} exited {done.returncode}:\n"
                                   f"{(done.stdout + done.stderr)[-3000:]}")
            with open(Path(tmp) / "eval_train.json") as f:
                return float(json.load(f)["success"])

    for run in runs:
        ckpts = sorted(Path(run, "checkpoints").glob("ckpt_*.safetensors"))
        if not ckpts:
            raise SystemExit(f"snapshot_spread: no ckpt_*.safetensors under {run}/checkpoints")
        parent = Path(run).parent.name
        label = f"{parent}_{Path(run).name}" if parent.endswith("_retrain") else Path(run).name
        snaps = [score(c, eval_seeds[0]) for c in ckpts]
        seeds = [snaps[-1]] + [score(ckpts[-1], s) for s in eval_seeds[1:]]
        print(f"{label}: snapshots {snaps}, last checkpoint over seeds {seeds}", flush=True)
        out[f"{label}_checkpoints"] = [c.stem for c in ckpts]
        out[f"{label}_snapshot_success"] = snaps
        out[f"{label}_snapshot_success_range_points"] = round(100 * (max(snaps) - min(snaps)), 1)
        out[f"{label}_snapshot_success_sd_points"] = round(100 * float(np.std(snaps, ddof=1)), 1)
        out[f"{label}_last_success_by_eval_seed"] = seeds
        out[f"{label}_eval_seed_sd_points"] = round(100 * float(np.std(seeds, ddof=1)), 1)
    return out
