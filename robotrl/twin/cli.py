"""``robotrl twin <report|calibrate|mine|select|triage>``: key=value arguments.

robotrl twin report bags=<dir> task=humanoid [robot=<profile>] [physics=<yaml>] [engines=mujoco,pybullet]
[out=twin_report]
open-loop replay of every bag under the nominal (and, if given, the calibrated) physics, in each engine
(pybullet: the same model rebuilt in PyBullet, for a sim-to-sim check); writes report.json and overlay PNGs.
robotrl twin calibrate bags=<dir> task=humanoid [robot=<profile>] [params=body_mass,dof_damping,actuator_gain]
[delays=0,1,2] [segment=0] [starts=1] [out=twin_calibration]
mujoco.sysid fit; writes <out>/physics.yaml and sysid's results (confidence intervals). params: any of
body_mass, object_mass (the tool, on top of body_mass), dof_damping, dof_armature, dof_frictionloss,
geom_friction, actuator_gain, actuator_bias; with object_mass, the bags' object pose (tool_use) is observed
too. segment=k: fit windows of k control steps, each from its recorded state (contact-rich bags: grasps, pushes);
starts=n: n optimizer runs (nominal, then random starts in the bounds), the lowest cost wins.
robotrl twin mine checkpoint=<run> budget=N [params=friction,max_curvature] [rounds=4] [worlds=128]
[seed=0] [uniform=false] [weighting=learnability] [baseline=uniform] [reference=friction:1.0:1.2]
[min_leaf=8] [validate=0.2] [validate_rule=sequential] [refine=0] [paste=0] [paste_floor=0.6] [workers=0]
[address=] [threads=1] [out=scenarios.yaml] [task.<field>=<value> ...]
the policy over N scenarios (batched worlds), adaptive search for low-success regions, each tested against
the failure rate of the uniform draws (``baseline=uniform``), of those in the ``reference`` box (the regime the
policy was trained on: ``baseline=reference``) or of those outside it (``complement``); ``validate`` (0.2) holds
that share of N back to re-test each region on fresh draws, dropping those the fresh draws contradict
(``validate_rule``: ``sequential``, the default, spends them on the regions not yet settled and keeps one
only if its fresh failure rate reaches 0.5; ``even`` splits them evenly and keeps a region unless they
contradict it: a little more coverage, more false regions, robotrl/twin/README.md); ``refine``
(e.g. 0.25) also samples around the regions found so far, grown by that share of their width, so sharp edges
(a handle thinner than 1 cm fails, thicker does not) are placed precisely; ``paste`` (e.g. 0.05) grows each
region before its re-test while the uniform draws in it still fail ``paste_floor`` of the time (PRIM's pasting
step): a weakness that fades gradually is reported past its 0.5 crossing (each region's ``reach``), and training
still draws from the plain box where that passed its re-test too; writes the
scenario file (regions with summaries; training picks its regions by ``weighting``, learnability or
failure_rate) and <out>.samples.json (every scenario and its success). ``workers=N`` runs each round's chunks of
``worlds`` scenarios as Ray tasks (Ray on 127.0.0.1, or the cluster at ``address``, ``threads`` each), with the
same answers as in process (``robotrl.twin.evaluate``).
robotrl twin select start=<run or ckpt> run=<retrained run> scenarios=<mined.yaml> [episodes=256] [every=1]
[tolerance=0.02] [seed=11] [worlds=128] [within_s=<s>] [out=<run>/select.json] [task.<field>=<value> ...]
after a retraining with the mined scenarios (resume=true from start, keep_checkpoints=0): scores the start
and every ``every``-th later checkpoint on ``episodes`` fresh draws from the file's regions (``task.`` overrides:
e.g. the track bank the miner used) and on the task's own distribution, and chooses the one with the highest
success in the regions whose own-distribution success is within ``tolerance`` of the start's (the start if
none is): the checkpoint to evaluate, export and deploy (robotrl/twin/select.py). ``within_s`` chooses only
among the checkpoints of the retraining's first ``within_s`` seconds.
robotrl twin triage bags=<dir> policy=<export/policy.onnx|run dir> task=humanoid [robot=<profile>]
[out=twin_triage]
failed episodes replayed closed loop in the twin: reproduced -> policy weakness (a scenario file
for training), not reproduced -> dynamics gap (bags linked under <out>/dynamics_gap for calibrate).
"""

from __future__ import annotations

import json
import logging
import sys

log = logging.getLogger(__name__)


# per command: the keys it needs, then every key it reads (``mine`` and ``select`` also take ``task.<field>``)
_REQUIRED = {"report": ("bags",), "calibrate": ("bags",), "mine": ("checkpoint", "budget"),
             "select": ("start", "run", "scenarios"), "triage": ("bags", "policy")}
_KNOWN = {
    "report": ("bags", "task", "robot", "physics", "engines", "out"),
    "calibrate": ("bags", "task", "robot", "params", "delays", "segment", "starts", "out"),
    "mine": ("checkpoint", "budget", "params", "rounds", "worlds", "seed", "uniform", "weighting", "baseline",
             "reference", "min_leaf", "validate", "validate_rule", "refine", "paste", "paste_floor", "workers",
             "address", "threads", "out"),
    "select": ("start", "run", "scenarios", "episodes", "every", "tolerance", "seed", "worlds", "within_s", "out"),
    "triage": ("bags", "policy", "task", "robot", "out"),
}
_TASK_OVERRIDES = ("mine", "select")  # commands that take task.<field>=<value>


def _usage(cmd: str) -> str:
    """The docstring's paragraph on ``robotrl twin <cmd>``."""
    doc = __doc__ or ""
    start = doc.find(f"robotrl twin {cmd} ")
    end = min([i for i in (doc.find(f"robotrl twin {c} ", start + 1) for c in _KNOWN) if i > start] or [len(doc)])
    return doc[start:end].strip()


def _args(cmd: str, argv: list[str]) -> dict[str, str]:
    """``key=value`` arguments of ``robotrl twin <cmd>``; a malformed, unknown or missing key is an error."""
    out = {}
    for a in argv:
        if "=" not in a:
            raise SystemExit(f"robotrl twin {cmd}: expected key=value, got {a!r}.\n{_usage(cmd)}")
        k, v = a.split("=", 1)
        if k not in _KNOWN[cmd] and not (cmd in _TASK_OVERRIDES and k.startswith("task.")):
            raise SystemExit(f"robotrl twin {cmd}: unknown argument {k!r}; it takes {', '.join(_KNOWN[cmd])}"
                             + (" and task.<field>=<value>" if cmd in _TASK_OVERRIDES else "") + f".\n{_usage(cmd)}")
        out[k] = v
    missing = [k for k in _REQUIRED[cmd] if not out.get(k)]
    if missing:
        raise SystemExit(f"robotrl twin {cmd}: missing {', '.join(f'{k}=' for k in missing)}.\n{_usage(cmd)}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``robotrl twin``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in _KNOWN:
        sys.stderr.write(__doc__ or "")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cmd = argv[0]
    args = _args(cmd, argv[1:])
    if cmd == "mine":
        return _mine(args)
    if cmd == "triage":
        return _triage(args)
    if cmd == "select":
        return _select(args)
    from robotrl.twin.episode import load_episodes
    from robotrl.twin.physics import Physics, load_physics
    from robotrl.twin.replay import Twin

    episodes = load_episodes(args["bags"], args.get("robot") or None)
    task = args.get("task") or episodes[0].task
    if cmd == "report":
        from robotrl.twin.report import write_report

        candidates = {"nominal": Physics()}
        if args.get("physics"):
            candidates["calibrated"] = load_physics(args["physics"])
        engines = args.get("engines", "mujoco").split(",")
        rolls = {}
        for engine in engines:
            for name, phys in candidates.items():
                key = name if engine == "mujoco" else f"{name}_{engine}"
                rolls[key] = Twin(task, episodes, [phys], engine=engine).open_loop()
        report, pngs = write_report(args.get("out", "twin_report"), episodes, rolls)
        summary = json.loads(report.read_text())["summary"]
        log.info("%-24s %10s %10s %10s %14s", "rollout", "q rad", "dq rad/s", "tau N m", "divergence s")
        for name, row in summary.items():
            log.info("%-24s %10.4g %10.4g %10.4g %14.3g", name, row["q_rmse"], row["dq_rmse"], row["tau_rmse"],
                     row["divergence_time_s"])
            if "object_pos_rmse_m" in row:
                log.info("%-24s object position RMSE %.4g m, diverged at %.3g s", "", row["object_pos_rmse_m"],
                         row["object_divergence_time_s"])
        log.info("wrote %s and %d overlays (mean per-joint RMSE over %d episode(s))", report, len(pngs),
                 len(episodes))
        return 0
    from pathlib import Path

    from robotrl.twin.calibrate import DEFAULT_PARAMS, calibrate

    out = Path(args.get("out", "twin_calibration"))
    params = tuple(args["params"].split(",")) if args.get("params") else DEFAULT_PARAMS
    delays = tuple(int(d) for d in args.get("delays", "0").split(","))
    segment, starts = int(args.get("segment", 0)), int(args.get("starts", 1))
    result = calibrate(task, episodes, params=params, delays=delays, out_dir=out, segment=segment, starts=starts)
    log.info("calibrated physics: %s -> %s", result.physics, result.save(out / "physics.yaml"))
    return 0


def _value(text: str) -> object:
    import yaml

    return yaml.safe_load(text)


def _mine(args: dict[str, str]) -> int:
    import json
    from pathlib import Path

    from robotrl.twin.evaluate import FanOutEvaluator, ScenarioEvaluator
    from robotrl.twin.mine import mine
    from robotrl.twin.scenarios import ScenarioFile

    if "checkpoint" not in args or "budget" not in args:
        raise SystemExit(f"robotrl twin mine needs checkpoint= and budget=.\n{__doc__}")
    overrides = {k.removeprefix("task."): _value(v) for k, v in args.items() if k.startswith("task.")}
    params = args["params"].split(",") if args.get("params") else None
    workers = int(args.get("workers", 0))
    evaluator: ScenarioEvaluator | FanOutEvaluator
    if workers > 0:
        evaluator = FanOutEvaluator(args["checkpoint"], params, overrides, worlds=int(args.get("worlds", 128)),
                                    seed=int(args.get("seed", 0)), workers=workers, address=args.get("address") or None,
                                    threads=int(args.get("threads", 1)))
    else:
        evaluator = ScenarioEvaluator(args["checkpoint"], params, overrides, worlds=int(args.get("worlds", 128)),
                                      seed=int(args.get("seed", 0)))
    uniform = str(args.get("uniform", "false")).lower() in ("1", "true", "yes")
    reference = {}
    for item in filter(None, args.get("reference", "").split(",")):
        name, lo, hi = item.split(":")
        reference[name] = [float(lo), float(hi)]
    result = mine(evaluator, evaluator.params, int(args["budget"]), rounds=int(args.get("rounds", 4)),
                  seed=int(args.get("seed", 0)), uniform_only=uniform, min_leaf=int(args.get("min_leaf", 8)),
                  baseline=args.get("baseline", "uniform"), reference=reference or None,
                  validate=float(args.get("validate", 0.2)), refine=float(args.get("refine", 0.0)),
                  validate_rule=args.get("validate_rule", "sequential"), paste=float(args.get("paste", 0.0)),
                  paste_floor=float(args["paste_floor"]) if args.get("paste_floor") else None)
    out = Path(args.get("out", "scenarios.yaml"))
    if not result.regions:
        log.warning("no failure region found in %d scenarios (failure rate %.3f); no scenario file written",
                    len(result.success), 1.0 - result.success.mean())
    else:
        ScenarioFile(evaluator.task_name, evaluator.params, result.regions,
                     weighting=args.get("weighting", "learnability")).save(out)
        for r in result.regions:
            log.info("%s (failure rate %.2f over %d scenarios)", r.summary, r.failure_rate, r.samples)
        log.info("wrote %s: train with task.scenarios=%s task.scenario_mix=0.25 (robotrl/twin/README.md: a quarter "
                 "of the resets kept more of the default distribution than half did); continuing a run with "
                 "resume=true keep_checkpoints=0 (240 s more held the target in 5 seeds of 5 on the width plant), "
                 "choose its checkpoint with robotrl twin select", out, out)
    samples = out.with_suffix(".samples.json")
    samples.write_text(json.dumps({"task": evaluator.task_name, "params": [p.name for p in evaluator.params],
                                   "x": result.samples.tolist(), "success": result.success.astype(int).tolist(),
                                   "background_failure_rate": result.background,
                                   "baseline": result.baseline, "reference": reference,
                                   "regions": [r.summary for r in result.regions]}))
    return 0


def _select(args: dict[str, str]) -> int:
    from pathlib import Path

    from robotrl.twin.select import select_checkpoint

    overrides = {k.removeprefix("task."): _value(v) for k, v in args.items() if k.startswith("task.")}
    sel = select_checkpoint(args["start"], args["run"], args["scenarios"], overrides=overrides,
                            episodes=int(args.get("episodes", 256)), every=int(args.get("every", 1)),
                            tolerance=float(args.get("tolerance", 0.02)), seed=int(args.get("seed", 11)),
                            worlds=int(args.get("worlds", 128)),
                            within_s=float(args["within_s"]) if "within_s" in args else None)
    out = sel.save(args.get("out") or Path(args["run"]) / "select.json")
    log.info("%-28s %12s %12s", "checkpoint", "in regions", "own")
    for i, (ckpt, a, b) in enumerate(zip(sel.checkpoints, sel.in_regions, sel.own, strict=True)):
        mark = " <- chosen" if i == sel.chosen else (" (start)" if i == 0 else "")
        log.info("%-28s %12.3f %12.3f%s", Path(ckpt).name, a, b, mark)
    log.info("wrote %s; evaluate or export the chosen one: robotrl eval checkpoint=%s", out, sel.checkpoint)
    return 0


def _triage(args: dict[str, str]) -> int:
    from robotrl.twin.episode import load_episodes
    from robotrl.twin.triage import policy_fn, triage, write_triage

    episodes = load_episodes(args["bags"], args.get("robot") or None)
    task = args.get("task") or episodes[0].task
    results = triage(task, episodes, policy_fn(args["policy"]))
    for path in write_triage(args.get("out", "twin_triage"), task, results):
        log.info("wrote %s", path)
    return 0
