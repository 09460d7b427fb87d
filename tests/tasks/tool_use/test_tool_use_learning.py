"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift and reach goals.

The default recipe (256 worlds x 24 steps = 6144 env steps per iteration, 2 epochs per update,
rewards over the running return std, orthogonal init, grasp, held-lift and held-goal shaping, the
goal-scale and tolerance curriculum) trained for 550 iterations (3.38M env steps, about 10 minutes on
2 idle cores). Reference run (benchmarks/results/tool_use.json, cpu_screen_goaltol_step005_*, same
recipe and seed; a fixed-iteration run repeats a screen's first iterations exactly, as the previous
pins did to the last digit): from the first to the last fifth, lift reward per episode 0.061 -> 0.153,
lift rate 0.000 -> 0.449, goals per episode 0.0005 -> 0.358, and the goal scale 0.10 -> 0.33 (mean
over the fifth). Before session 26's held-goal term and tolerance curriculum no run reached a goal
(the same seed: 0 goals), so a regression in PPO, the curriculum, the goal test or the shaping terms
breaks these. Seed 0 was the recipe's best of three seeds in session 25, so the margins pin this
seed's behaviour, not the recipe's average.
"""

import json
import subprocess
import sys

import pytest


# Pinned 2026-11-24 (session 26) from the reference screen's first 550 iterations; run once after: passed in 614 s
# with exactly its figures (549 rows, stage 2, lift rate 0.0000 -> 0.4485, goals 0.0005 -> 0.3584, scale 0.10 -> 0.33).
# Run again in session 28 with PPO updates on 2 torch threads (update_threads=0): the same figures to the last digit,
# in 530 s.
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the 550 iterations alone can exceed pyproject's default --timeout=600
def test_default_tool_use_run_reaches_the_goal_stage_its_lift_rate_rises_and_goals_get_reached(tmp_path):
    run = tmp_path / "tool_use"
    cmd = [sys.executable, "-m", "robotrl.cli", "train", "task=tool_use", "max_iterations=550", "max_time_s=100000",
           "seed=0", f"run_dir={run}", "progress=false", "tensorboard=false"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "episode/lifted" in r]
    fifth = len(rows) // 5

    def mean(key: str, part: list[dict]) -> float:
        return sum(r[key] for r in part) / len(part)

    first, last = rows[:fifth], rows[-fifth:]
    stage = max(r["episode/curriculum_stage"] for r in rows)
    lift = mean("episode/reward/lift", first), mean("episode/reward/lift", last)
    lifted = mean("episode/lifted", first), mean("episode/lifted", last)
    goals = mean("episode/goals_reached", first), mean("episode/goals_reached", last)
    scale = mean("episode/goal_scale", first), mean("episode/goal_scale", last)
    measured = (f"{len(rows)} rows, max curriculum stage {stage}, lift reward {lift[0]:.4f} -> {lift[1]:.4f}, "
                f"lift rate {lifted[0]:.4f} -> {lifted[1]:.4f}, goals per episode {goals[0]:.4f} -> {goals[1]:.4f}, "
                f"goal scale {scale[0]:.3f} -> {scale[1]:.3f} (first -> last fifth)")
    print(measured)
    assert stage >= 2, f"the curriculum never reached the goal stage: {measured}"
    assert lift[1] > 1.5 * lift[0], measured
    assert lifted[1] > lifted[0] + 0.25, measured
    assert goals[1] > goals[0] + 0.1, measured
    assert scale[1] > scale[0] + 0.1, measured  # the curriculum widened the goals as they were reached
