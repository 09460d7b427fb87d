"""VLM rewards benchmark: encoder accuracy and speed, env steps/s with the VLM-RM term sync vs async.

    python benchmarks/vlm_rewards.py encoder   # zero-shot accuracy (seen/unseen wording), frames/s (batch 16/64)
    python benchmarks/vlm_rewards.py steps     # humanoid env steps/s: no VLM, VLM-RM sync, VLM-RM async; late fraction
    python benchmarks/vlm_rewards.py all
    python benchmarks/vlm_rewards.py pose      # humanoid pose demo (default: kneeling, VLM-RM scored every 4th step,
                                               # 400 s per learner); keys pose_<pose>_*
    python benchmarks/vlm_rewards.py driving_finetune  # CLG as a fine-tune of one CaRL pretrain, equal env steps
    python benchmarks/vlm_rewards.py ft_summary  # means over the driving_finetune seeds (keys ft_seed<k>_*)

Run it under the shared CPU lock: ``flock /tmp/robotrl-cpu.lock python benchmarks/vlm_rewards.py all``.

**Encoder.** The ``lit`` humanoid artefact (``~/.cache/robotrl/encoders/lit_humanoid``) is loaded
if present; otherwise a small one is trained here (600 frames, 300 steps) and the JSON says so
(``encoder_source``). Accuracy is measured on *fresh* frames: poses drawn with a seed the
training never used (``--eval-seed``), classes balanced, 12 classes (posture x arms). Prompts are
one per class, either the canonical sentence of the seen wordings, the canonical sentence of
the unseen wordings (subjects, templates and phrases never used in training), or random
paraphrases of either split (mean over ``--paraphrase-draws`` draws).

**Steps/s.** The humanoid ``TaskEnv`` with ``--worlds`` worlds and random actions, rendering a
96x96 ``track`` frame per world per step: without a VLM term, with VLM-RM in ``sync`` mode
(every step waits for its scores) and in ``async`` mode (a scorer thread; the env never waits;
``relabel_rollout`` waits for what is still pending at the end of every ``--rollout``-step
rollout, as PPO's update does). Async is reported both while collecting and end to end
(collection + the wait at the update). The late fraction is the share of scores not ready
when the rollout ended.

Code: this file holds the command line (``main``), the JSON it saves and ``ft_summary``; the encoder and
steps/s figures (encoder, text_heads, steps) are in ``vlm_rewards_encoder.py``, the demonstrations
(pose, driving, driving_finetune, prefs, prefs_sac) in ``vlm_rewards_demos.py``, both in benchmarks/.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt, load_avg, save, table  # noqa: E402
from vlm_rewards_demos import (  # noqa: E402
    driving_demo,
    driving_finetune_demo,
    pose_demo,
    prefs_demo,
    prefs_sac_demo,
)
from vlm_rewards_encoder import GOALS, encoder_bench, steps_bench, text_head_bench  # noqa: E402

NAME = "vlm_rewards"


FT_METRICS = ("collision_rate", "collision_obstacle_rate", "collision_traffic_rate",
              "collision_rear_ended_rate", "route_completion", "lap_rate", "mean_speed_mps")


def ft_summary(args: argparse.Namespace) -> dict[str, float | str]:
    """Means over the driving_finetune seeds in the results file, per family of runs: ``ft_seed<k>_``
    runs give ``ft_seeds_*`` keys, ``ft_<family>_seed<k>_`` runs ``ft_<family>_seeds_*``. Each arm's
    held-out rates, and the paired differences (same pretrain and evaluation episodes per seed) of
    CLG minus CaRL alone and, where run, of CLG minus the contrast-free speed term, each with its
    standard error over seeds."""
    import json
    import re

    from common import RESULTS_DIR

    saved = json.loads((Path(args.out_dir or RESULTS_DIR) / f"{NAME}.json").read_text())
    runs: dict[str, list[str]] = {}
    for k in saved:
        if m := re.fullmatch(r"ft_((?:[a-z0-9]+_)?)(seed\d+)_carl_clg_heldout_collision_rate", k):
            runs.setdefault(m[1], []).append(m[1] + m[2])
    if not runs:
        raise SystemExit("ft_summary: no ft_seed<k>_ runs in the results; run driving_finetune --ft-prefix seed<k>")
    out: dict[str, float | str] = {}
    for family, prefixes in sorted(runs.items()):
        f = f"ft_{family}seeds"
        prefixes.sort()
        out |= {f: ",".join(prefixes), f"{f}_count": float(len(prefixes))}
        for metric in FT_METRICS:
            arms = [a for a in ("pretrain", "carl_only", "carl_clg", "carl_speed")
                    if all(f"ft_{p}_{a}_heldout_{metric}" in saved for p in prefixes)]
            rows = {a: torch.tensor([float(saved[f"ft_{p}_{a}_heldout_{metric}"]) for p in prefixes]) for a in arms}
            out |= {f"{f}_{arm}_{metric}_mean": float(v.mean()) for arm, v in rows.items()}
            for other in ("carl_only", "carl_speed"):
                if other not in rows:
                    continue
                diff = rows["carl_clg"] - rows[other]
                key = f"{f}_clg_minus_{'carl' if other == 'carl_only' else 'speed'}_{metric}"
                out[f"{key}_mean"] = float(diff.mean())
                out[f"{key}_se"] = float(diff.std() / len(diff) ** 0.5) if len(diff) > 1 else 0.0
    return out


def main() -> None:
    """Parse, run, print the table, save flat JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["encoder", "steps", "all", "pose", "driving", "prefs",
                                          "prefs_sac", "demos", "driving_finetune", "ft_summary", "text_heads"])
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: the scorer thread and the "
                   "simulation each get one of this machine's 2 shared cores)")
    p.add_argument("--sim-threads", type=int, default=1)
    p.add_argument("--eval-frames", type=int, default=240)
    p.add_argument("--eval-seed", type=int, default=2024)
    p.add_argument("--paraphrase-draws", type=int, default=10)
    p.add_argument("--compare-frames", type=int, default=2400, help="text_heads: training frames (shared)")
    p.add_argument("--compare-steps", type=int, default=1500, help="text_heads: optimizer steps of every variant")
    p.add_argument("--speed-frames", type=int, default=128)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--worlds", type=int, default=16)
    p.add_argument("--rollout", type=int, default=24)
    p.add_argument("--rollouts", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--demo-seconds", type=float, default=180.0,
                   help="training budget of each driving and prefs_sac demo run")
    p.add_argument("--demo-worlds", type=int, default=16)
    p.add_argument("--pose", default="kneeling", choices=sorted(GOALS), help="goal pose of the pose demo")
    p.add_argument("--pose-seconds", type=float, default=400.0, help="training budget of each pose demo run")
    p.add_argument("--pose-arms", default="", help="pose demo: comma-separated learners to run (default all: "
                   "vlm_rm_seen,vlm_rm_unseen,velocity_tracking,alive_only); the random policy is always evaluated")
    p.add_argument("--pose-seed", type=int, default=0, help="pose demo: the training seed of every learner")
    p.add_argument("--pose-prefix", default="", help="pose demo: keys become pose_<pose>_<prefix>_... (a repeat "
                   "with another seed or encoder beside the main keys); set ROBOTRL_ENCODER_DIR to pick the encoder")
    p.add_argument("--pose-healthy-z", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                   help="pose demo: task.healthy_z of every learner and of the random policy (default: "
                   "POSE_HEALTHY_Z for the pose, else the task's; 0.8 2.1 is what runs before it used)")
    p.add_argument("--pose-every", type=int, default=4, help="score every k-th step in the pose demo's VLM runs")
    p.add_argument("--vlm-scale", type=float, default=10.0, help="reward.scale of the pose demo's VLM-RM term")
    p.add_argument("--every", type=int, default=2, help="score every k-th step in the driving demo's CLG run")
    p.add_argument("--finetune-iterations", type=int, default=40,
                   help="driving_finetune: PPO iterations of each arm after the shared CaRL pretrain")
    p.add_argument("--ft-seed", type=int, default=0, help="driving_finetune: training seed of the pretrain and arms")
    p.add_argument("--ft-rounds", type=int, default=1, help="driving_finetune: evaluation rounds of 64 episodes")
    p.add_argument("--ft-prefix", default="", help="driving_finetune: keys and run dirs become ft_<prefix>_...")
    p.add_argument("--ft-eval-only", action="store_true", help="driving_finetune: only evaluate the runs again")
    p.add_argument("--ft-task", nargs="*", default=[], help="driving_finetune: task overrides of the pretrain and "
                   "every arm, e.g. task.traffic_yields=true")
    p.add_argument("--ft-reward", nargs="*", default=[], help="driving_finetune: reward overrides of the arms with "
                   "the CLG speed term, e.g. reward.v_max=2.0")
    p.add_argument("--ft-speed-control", action="store_true", help="driving_finetune: a third arm, the CLG speed "
                   "term without its contrast (negative = goal prompt, so v_des = v_max on every frame)")
    p.add_argument("--pairs", type=int, default=300)
    p.add_argument("--out-dir", default="", help="where the JSON goes (default benchmarks/results/)")
    p.add_argument("--pref-steps", type=int, default=60, help="random-policy steps whose frames are labelled")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    figures: dict[str, float | str] = {**load_avg(f"{args.what}_start"), "torch_threads": args.threads,
                                       "sim_threads": args.sim_threads}
    t0 = time.perf_counter()
    if args.what in ("encoder", "all"):
        figures |= encoder_bench(args, "humanoid") | encoder_bench(args, "driving")
    if args.what == "text_heads":
        figures |= text_head_bench(args, "humanoid") | text_head_bench(args, "driving")
    if args.what in ("steps", "all"):
        figures |= steps_bench(args)
    if args.what in ("prefs", "demos"):
        figures |= prefs_demo(args)
    if args.what in ("prefs_sac", "demos"):
        figures |= prefs_sac_demo(args)
    if args.what in ("pose", "demos"):
        figures |= pose_demo(args)
    if args.what in ("driving", "demos"):
        figures |= driving_demo(args)
    if args.what == "driving_finetune":
        figures |= driving_finetune_demo(args)
    if args.what == "ft_summary":
        figures |= ft_summary(args)
    figures[f"{args.what}_bench_wall_s"] = time.perf_counter() - t0
    path = save(NAME, figures, out_dir=args.out_dir or None)
    print(table([(k, fmt(v)) for k, v in sorted(figures.items())], f"VLM rewards ({args.what})"))  # noqa: T201
    print(f"saved {path}")  # noqa: T201


if __name__ == "__main__":
    main()
