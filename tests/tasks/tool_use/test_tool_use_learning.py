"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift and reach goals.

The default recipe (256 worlds x 24 steps = 6144 env steps per iteration, 0.01 s physics steps x 2 per control
step, 2 epochs per update, rewards over the running return std, orthogonal init, grasp, held-lift and held-goal
shaping, the goal-scale and tolerance curriculum) trained for 550 iterations (3.38M env steps, 6-7 minutes on 2
idle cores) on each of seeds 0, 1 and 2; the test passed in 1194 s in session 62. The assertions hold the mean over
the three seeds of each figure (first and last fifth of the run) to the margins of the session-40 single-seed pin,
unchanged; the goal stage must be reached on every seed.

Why three seeds: a fixed-iteration run repeats its figures to the last digit on one host but not across hosts
(the floating-point paths differ between CPUs, and the run is chaotic), so another host is in effect another
seed. One seed's last fifth swings with when its curriculum happens to advance. Seed 0, pinned alone in session
40, passed there (goals per episode 0.0004 -> 0.136, +0.1 needed) and failed on session 61's host (0.0005 ->
0.061 at b804dc6, the pin's own commit, and at b6cc879 alike). Session 62 ran this test on that host (first ->
last fifth; goals per fifth in brackets, the last one being the test's last fifth):

| seed | lift rate | goals per episode | goal scale | single-seed pin |
|---|---|---|---|---|
| 0 | 0.009 -> 0.685 | 0.0005 -> 0.061 (0.0005, 0.027, 0.288, 0.133, 0.061) | 0.10 -> 0.70 | fails: goals |
| 1 | 0.000 -> 0.585 | 0.000 -> 0.165 (0.000, 0.009, 0.027, 0.318, 0.165) | 0.10 -> 0.66 | passes |
| 2 | 0.002 -> 0.399 | 0.000 -> 0.257 (0.000, 0.000, 0.000, 0.001, 0.257) | 0.10 -> 0.12 | fails: goal scale |
| mean | 0.004 -> 0.556 | 0.0002 -> 0.161 | 0.10 -> 0.50 | passes |

Seed 2 reached the goal stage later and spent its last fifth reaching goals at the first goal scales; seed 0
had widened its goals to 0.70 and reached fewer of them. The mean over seeds keeps both kinds of progress in
view, and its noise is about 1/sqrt(3) of one seed's. Before session 26's held-goal term and tolerance
curriculum no run reached a goal, so a regression in PPO, the curriculum, the goal test or the shaping terms
breaks these.
"""

import json
import subprocess
import sys
from statistics import fmean

import pytest

SEEDS = (0, 1, 2)
ITERATIONS = 550


def _train(tmp_path, seed: int) -> list[dict]:
    """One run of the main job's recipe for ``ITERATIONS`` iterations; its metric rows with episode stats."""
    run = tmp_path / f"tool_use_seed{seed}"
    cmd = [sys.executable, "-m", "robotrl.cli", "train", "task=tool_use", f"max_iterations={ITERATIONS}",
           "max_time_s=100000", f"seed={seed}", f"run_dir={run}", "progress=false", "tensorboard=false"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, f"seed {seed}: {out.stderr[-3000:]}"
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in rows if "episode/lifted" in r]


def _fifths(rows: list[dict], key: str) -> tuple[float, float]:
    """Mean of ``key`` over the first and the last fifth of the rows."""
    fifth = len(rows) // 5
    return fmean(r[key] for r in rows[:fifth]), fmean(r[key] for r in rows[-fifth:])


# Pinned 2026-11-27 (session 40) on seed 0 alone: 549 rows, stage 2, lift rate 0.0083 -> 0.5482, goals 0.0004 ->
# 0.1361, scale 0.10 -> 0.70, in 515 s. Session 62 (2026-12-07): the same margins on the mean over seeds 0-2 (the
# module docstring gives each seed's figures on that host).
@pytest.mark.slow
@pytest.mark.timeout(5400)  # three runs of 550 iterations: 1194 s in all on 2 idle cores
def test_default_tool_use_runs_over_three_seeds_reach_the_goal_stage_lift_rate_rises_and_goals_get_reached(
        tmp_path):
    keys = ("episode/reward/lift", "episode/lifted", "episode/goals_reached", "episode/goal_scale")
    per_seed: dict[int, dict[str, tuple[float, float]]] = {}
    stages: dict[int, float] = {}
    for seed in SEEDS:
        rows = _train(tmp_path, seed)
        stages[seed] = max(r["episode/curriculum_stage"] for r in rows)
        per_seed[seed] = {k: _fifths(rows, k) for k in keys}
    mean = {k: (fmean(per_seed[s][k][0] for s in SEEDS), fmean(per_seed[s][k][1] for s in SEEDS)) for k in keys}
    measured = "; ".join(
        f"{name}: " + ", ".join(f"{per_seed[s][k][0]:.4f} -> {per_seed[s][k][1]:.4f}" for s in SEEDS)
        + f" (mean {mean[k][0]:.4f} -> {mean[k][1]:.4f})"
        for name, k in zip(("lift reward", "lift rate", "goals per episode", "goal scale"), keys, strict=True))
    measured = f"seeds {SEEDS}, max curriculum stage {list(stages.values())}; first -> last fifth, {measured}"
    print(measured)
    lift, lifted = mean["episode/reward/lift"], mean["episode/lifted"]
    goals, scale = mean["episode/goals_reached"], mean["episode/goal_scale"]
    assert min(stages.values()) >= 2, f"a seed's curriculum never reached the goal stage: {measured}"
    assert lift[1] > 1.5 * lift[0], measured
    assert lifted[1] > lifted[0] + 0.25, measured
    assert goals[1] > goals[0] + 0.1, measured
    assert scale[1] > scale[0] + 0.1, measured  # the curriculum widened the goals as they were reached
