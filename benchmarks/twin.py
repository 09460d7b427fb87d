"""Twin benchmark: calibration (humanoid, arm), failure mining (synthetic and on a trained driving policy).

    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py calibration   # sysid fits, divergence before/after
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py calibration_object runs/tool_use  # tool mass + friction
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining        # synthetic miner vs uniform (seconds)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining_narrowed  # synthetic narrowed policy, baselines
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining_validate  # the same, regions re-tested on fresh draws
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining_validate_rule  # re-test rules even / sequential
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py mining_refine  # robotrl twin mine's defaults, refine 0 / 0.25
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py planted train # driving planted weakness, one stage
    # per call (train, mine, heldout, retrain_mined, retrain_control, eval), each < 10 min; state in TWIN_PLANT_DIR
    # mining options after the stage: planted mine baseline=reference min_leaf=16 (written to the section
    # planted_reference_leaf16; use a TWIN_PLANT_DIR of its own, with narrow/ and heldout.npz copied in);
    # validate=0.2 holds back that share of the budget to re-test each region (section ..._validate0.2)
    # planted uniform_plain <options>: beside such a run, uniform draws with no re-test (the plain baseline)
    # budgets after the stage: train_s=900 extra_s=480 (narrow training and each retraining's extra seconds;
    # section ..._train900_extra480; those stages then take longer than 10 min); seed=1: the narrow policy's
    # training seed (section ..._seed1; use a TWIN_PLANT_DIR of its own)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py planted_width runs/drv_s0 [seed=0]  # width plant (~5 min
    # after a 10-min default driving run, trained first when the run dir has none; twin_planted_width.py)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py planted_width_repeats runs/a,runs/b 1,2,3,4 [section=S]
    # both arms on trained width-plant runs over mining seeds, validate_rule even and sequential (~3 min per
    # run and seed at budget=512, the default; rules=sequential for one rule; paste=0.05 grows each region, both
    # arms, before the re-test: robotrl/twin/paste.py); section (default planted_width_repeats) names the section
    python benchmarks/twin.py planted_width_ceiling runs/a,runs/b  # the coverage a region failing at least half
    # the time can reach, read off each run's cached held-out labels (seconds)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py planted_width_retrain runs/drv_s0 [seed=0] [extra_s=480]
    # [mix=0.5]: mine a width-plant run (sequential re-test), retrain it with the mined scenarios and without, score the
    # three policies in the mined regions and elsewhere (~20 min after the run; section planted_width_retrain[_seed<k>])
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py snapshot_spread runs/drv54,runs/drv54_retrain/control
    # [seeds=1,2,3]: every kept checkpoint of each run on the task's own distribution (eval seed 1, robotrl eval's
    # default), and the last one under each eval seed: the snapshot spread against the evaluation noise (~1 min per
    # score; section snapshot_spread)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim       # MuJoCo bags replayed in PyBullet (~1 min)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_policy runs/humanoid runs/tool_use
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_passive  # zero actions in both engines (control)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_substeps runs/humanoid 2,8  # PyBullet substeps
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py sim2sim_sensitivity runs/humanoid  # model changes (~5 min)
    #   MuJoCo-trained checkpoints closed loop in MuJoCo and in PyBullet (robotrl eval engine=...)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py bag_scenario  # triage's scenario read off bags (~1 min)
    python benchmarks/twin.py tool_family  # the tool family read off a perceived box, against the truth (seconds)
    flock /tmp/robotrl-cpu.lock python benchmarks/twin.py scan_scenario  # driving obstacles + traffic off the scan

Calibration: bags recorded from a robot with perturbed physics (robotrl.twin.record, known
truth); mujoco.sysid fits mass, damping and actuator gain plus the delay over a grid; we
report the relative error of each fitted value and the open-loop divergence time before
and after (eps 0.05 rad for 5 steps).

Calibration of the object (tool_use): a trained policy handles the tool closed loop on a "real" robot whose
tool is heavier (``object_mass`` 1.4) and whose friction is lower (``geom_friction`` 0.7); sysid observes the
joints and the tool's recorded pose and fits those two multipliers; we report the relative errors and the
open-loop divergence of the joints and of the tool's position (1 cm for 5 steps) before and after.

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
``sim2sim_sensitivity``: one humanoid checkpoint (randomization off, 32 worlds, 64 episodes,
seed 1) in MuJoCo under single model changes (joint armature or damping scaled, geom
friction scaled, an elliptic cone with impratio 10, noslip iterations, no contact margin) and
in PyBullet with damping doubled or the armature rotors removed: which change makes the policy
fall in MuJoCo as soon as it does in PyBullet.

Bag scenario (triage): 45 humanoid bags of the sim robot (5 pushes, none among them, x 3 commands
x 3 seeds; a push every 0.3 s), the scenario ``robotrl twin triage`` reads off each one where the
metadata is silent (``tasks/humanoid/bag_scenario.py``) against the truth: push strength and
direction errors, pushes read where there were none, and the command error. Then 16 tool_use bags (8
random scenes x 2 seeds; ``tasks/tool_use/bag_scenario.py``): the tool's start pose and size and the first
goal read off the perception topics, against the scene set up (``bag_scenario_tool_use``).

Each section is merged into ``benchmarks/results/twin.json``.

Code: this file holds the command line (``main``) and the merge into twin.json; the rows are built in
``twin_calibration.py`` (calibration), ``twin_mining.py`` (mining, mining_narrowed, mining_validate),
``twin_planted.py`` (planted), ``twin_sim2sim.py`` (sim2sim, sim2sim_policy, sim2sim_passive,
sim2sim_substeps, sim2sim_sensitivity) and ``twin_triage.py`` (bag_scenario), all in benchmarks/.
"""

import json
import os
import platform
import sys
from datetime import datetime
from pathlib import Path

from robotrl.twin.physics import Physics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twin_calibration import calib_row, object_calib_row  # noqa: E402
from twin_mining import mining_rows, narrowed_rows, refine_rows, validate_rows  # noqa: E402
from twin_planted import (  # noqa: E402
    _OLD_MINE_OPTIONS,
    MINE_OPTIONS,
    NARROW,
    PLANT_BUDGETS,
    PLANT_STAGES,
    planted_rows,
)
from twin_planted_width import (  # noqa: E402
    RETRAIN_MIX,
    coverage_ceiling,
    snapshot_spread,
    width_repeats,
    width_retrain,
    width_rows,
)
from twin_select import width_select, width_soup  # noqa: E402
from twin_sim2sim import (  # noqa: E402
    sim2sim_passive_rows,
    sim2sim_policy_rows,
    sim2sim_rows,
    sim2sim_sensitivity_rows,
    sim2sim_substeps_rows,
)
from twin_triage import (  # noqa: E402
    bag_scenario_rows,
    bag_scenario_tool_use_rows,
    scan_scenario_rows,
    tool_family_rows,
)


def _merge(section, value):
    path = Path(__file__).parent / "results" / "twin.json"
    body = json.loads(path.read_text()) if path.exists() else {}
    body[section] = value
    body.update({"date": datetime.now().isoformat(timespec="seconds"), "machine": platform.node(),
                 "cpu_count": os.cpu_count(), "loadavg_1m": os.getloadavg()[0]})
    path.write_text(json.dumps(body, indent=1, default=float))
    print("wrote", path, "section", section)


def main():
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
    if mode == "calibration_object":  # calibration_object <run> [steps= episodes= segment= starts= name= object_mass=]
        opts = dict(a.split("=", 1) for a in sys.argv[3:])
        steps, episodes = int(opts.pop("steps", 60)), int(opts.pop("episodes", 2))
        segment, starts, name = int(opts.pop("segment", 0)), int(opts.pop("starts", 1)), opts.pop("name", "")
        truth = Physics(**{"object_mass": 1.4, "geom_friction": 0.7, **{k: float(v) for k, v in opts.items()}})
        row = object_calib_row(sys.argv[2], truth, steps=steps, episodes=episodes, segment=segment, starts=starts)
        row["command"] = "flock /tmp/robotrl-cpu.lock python benchmarks/twin.py " + " ".join(sys.argv[1:])
        for k, v in row.items():
            print(f"{k:36s} {v}")
        _merge("calibration_object" + (f"_{name}" if name else ""), row)
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
    if mode == "mining_validate_rule":
        validated = validate_rows(min_leafs=(16,), shares=(0.2,), rules=("even", "sequential"))
        for k, v in validated["summary"].items():
            print(f"{k:55s} {v}")
        _merge("mining_validate_rule", validated)
    if mode == "mining_refine":
        refined = refine_rows()
        for k, v in refined["summary"].items():
            print(f"{k:55s} {v}")
        _merge("mining_refine", refined)
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
    if mode == "sim2sim_sensitivity":  # sim2sim_sensitivity <humanoid run>: which model change transfers the fall
        rows = sim2sim_sensitivity_rows(sys.argv[2])
        _merge("sim_to_sim_sensitivity", rows)
    if mode in ("bag_scenario", "all"):
        summary, rows = bag_scenario_rows()
        for k, v in summary.items():
            print(f"{k:36s} {v:.4g}" if isinstance(v, float) else f"{k:36s} {v}")
        _merge("bag_scenario", {**summary, "bags": rows,
                                "command": "flock /tmp/robotrl-cpu.lock python benchmarks/twin.py bag_scenario"})
        summary, rows = bag_scenario_tool_use_rows()
        for k, v in summary.items():
            print(f"{k:36s} {v:.4g}" if isinstance(v, float) else f"{k:36s} {v}")
        _merge("bag_scenario_tool_use", {**summary, "bags": rows, "command": "flock /tmp/robotrl-cpu.lock python "
                                                                             "benchmarks/twin.py bag_scenario"})
    if mode in ("scan_scenario", "all"):
        summary, rows = scan_scenario_rows()
        for k, v in summary.items():
            print(f"{k:50s} {v}")
        _merge("scan_scenario", {**summary, "bags": rows,
                                 "command": "flock /tmp/robotrl-cpu.lock python benchmarks/twin.py scan_scenario"})
    if mode in ("tool_family", "all"):
        family = tool_family_rows()
        for k, v in family.items():
            print(f"{k:45s} {v}")
        _merge("tool_family_from_box", {**family, "command": "python benchmarks/twin.py tool_family"})
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

    if mode == "planted_width":
        seed = int(sys.argv[3].split("=", 1)[1]) if len(sys.argv) > 3 else 0
        width = width_rows(sys.argv[2], seed=seed)
        for k, v in width.items():
            print(f"{k:45s} {v}")
        width["command"] = "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv)
        _merge("planted_width" + (f"_seed{seed}" if seed else ""), width)

    if mode == "planted_width_retrain":
        # python benchmarks/twin.py planted_width_retrain runs/drv_s0 [seed=0] [extra_s=480]
        opts = dict(a.split("=", 1) for a in sys.argv[3:])
        unknown = set(opts) - {"seed", "extra_s", "mix"}
        if unknown:
            raise SystemExit(f"planted_width_retrain: unknown option(s) {sorted(unknown)}; "
                             "valid: seed=, extra_s=, mix=")
        seed, mix = int(opts.get("seed", 0)), float(opts.get("mix", RETRAIN_MIX))
        ret = width_retrain(sys.argv[2], seed=seed, extra_s=int(opts.get("extra_s", 480)), mix=mix)
        for k, v in ret.items():
            print(f"{k:45s} {v}")
        ret["command"] = "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv)
        suffix = (f"_seed{seed}" if seed else "") + (f"_mix{mix:g}" if mix != RETRAIN_MIX else "")
        _merge("planted_width_retrain" + suffix, ret)

    if mode in ("planted_width_select", "planted_width_soup"):
        # python benchmarks/twin.py planted_width_select runs/drv55_seed4 [seed=0] [mix=0.25] [every=6] [within_s=240]
        # [extra_s=480] (within_s: after the full retraining, choose among its first within_s seconds only, section
        # ..._within240; extra_s: a retraining of its own of that length, arm select_mix<mix>_extra<s>, ..._extra<s>;
        # paste=0.05: mined again with the pasting step, retrained on that file's plain boxes (their grown boxes as
        # reach), arm and section ..._paste0.05_reach)
        # python benchmarks/twin.py planted_width_soup runs/drv55_seed4 seed=4 mix=0.25 (after planted_width_select)
        valid = ({"seed", "mix", "every", "within_s", "extra_s", "paste"} if mode == "planted_width_select"
                 else {"seed", "mix"})
        opts = dict(a.split("=", 1) for a in sys.argv[3:])
        unknown = set(opts) - valid
        if unknown:
            raise SystemExit(f"{mode}: unknown option(s) {sorted(unknown)}; valid: "
                             + ", ".join(f"{k}=" for k in sorted(valid)))
        seed, mix = int(opts.get("seed", 0)), float(opts.get("mix", RETRAIN_MIX))
        within = float(opts["within_s"]) if "within_s" in opts else None
        extra, paste = int(opts.get("extra_s", 480)), float(opts.get("paste", 0.0))
        if mode == "planted_width_select":
            res = width_select(sys.argv[2], seed=seed, mix=mix, every=int(opts.get("every", 6)), within_s=within,
                               extra_s=extra, paste=paste)
        else:
            res = width_soup(sys.argv[2], mix=mix)
        for k, v in res.items():
            print(f"{k:45s} {v}")
        res["command"] = "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv)
        _merge(f"{mode}_seed{seed}_mix{mix:g}" + (f"_within{within:g}" if within else "")
               + (f"_extra{extra}" if extra != 480 else "") + (f"_paste{paste:g}_reach" if paste else ""), res)

    if mode == "snapshot_spread":
        # python benchmarks/twin.py snapshot_spread runs/a,runs/b_retrain/control [seeds=1,2,3] [section=S]
        opts = dict(a.split("=", 1) for a in sys.argv[3:])
        unknown = set(opts) - {"seeds", "section"}
        if unknown:
            raise SystemExit(f"snapshot_spread: unknown option(s) {sorted(unknown)}; valid: seeds=, section=")
        seeds = tuple(int(s) for s in opts.get("seeds", "1,2,3").split(","))
        spread = snapshot_spread(sys.argv[2].split(","), eval_seeds=seeds)
        for k, v in spread.items():
            print(f"{k:55s} {v}")
        spread["command"] = "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv)
        _merge(opts.get("section", "snapshot_spread"), spread)

    if mode == "planted_width_ceiling":
        # python benchmarks/twin.py planted_width_ceiling runs/a,runs/b: the coverage a "fails at least half the
        # time" region can reach, from each run's cached held-out labels (section planted_width_coverage_ceiling)
        ceil = coverage_ceiling(sys.argv[2].split(","))
        for k, v in ceil.items():
            print(f"{k:55s} {v}")
        ceil["command"] = "python " + " ".join(sys.argv)
        _merge("planted_width_coverage_ceiling", ceil)

    if mode == "planted_width_repeats":
        # python benchmarks/twin.py planted_width_repeats runs/a,runs/b 1,2,3,4 [rules=even,sequential] [budget=512]
        # [paste=0.05] [uniform_validate=0] [section=S] (uniform_validate=0: the uniform arm without the re-test)
        opts = dict(a.split("=", 1) for a in sys.argv[4:])
        unknown = set(opts) - {"rules", "budget", "paste", "uniform_validate", "section"}
        if unknown:
            raise SystemExit(f"planted_width_repeats: unknown option(s) {sorted(unknown)}; "
                             "valid: rules=, budget=, paste=, uniform_validate=, section=")
        rules = tuple(opts.get("rules", "even,sequential").split(","))
        rep = width_repeats(sys.argv[2].split(","), [int(s) for s in sys.argv[3].split(",")], rules,
                            budget=int(opts.get("budget", 512)), paste=float(opts.get("paste", 0.0)),
                            uniform_validate=float(opts["uniform_validate"]) if "uniform_validate" in opts else None)
        for k, v in rep.items():
            if k != "rows":
                print(f"{k:55s} {v}")
        rep["command"] = "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv)
        _merge(opts.get("section", "planted_width_repeats"), rep)


if __name__ == "__main__":
    main()
