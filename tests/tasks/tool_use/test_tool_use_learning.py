"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift and reach goals.

The default recipe (256 worlds x 24 steps = 6144 env steps per iteration, 0.01 s physics steps x 2 per control
step, 2 epochs per update, rewards over the running return std, orthogonal init, grasp, held-lift and held-
goal shaping, the goal-scale and tolerance curriculum) trained for 550 iterations (3.38M env steps, about 8.5
minutes on 2 idle cores). Reference run (session 40, the test itself; fixed-iteration runs repeated their
figures to the last digit in sessions 26 and 28): from the first to the last fifth, lift reward per episode
0.093 -> 0.205, lift rate 0.008 -> 0.548, goals per episode 0.0004 -> 0.136, and the goal scale 0.10 -> 0.70
(mean over the fifth). Before session 26's held-goal term and tolerance curriculum no run reached a goal, so a
regression in PPO, the curriculum, the goal test or the shaping terms breaks these. The goals margin (+0.1
against the 0.136 measured) is the tightest: the curriculum moves goals further out as they get reached, which
holds the per-episode count down. Seed 0 is the recipe's best of three seeds (tasks/tool_use/README.md), so
the margins pin this seed's behaviour, not the recipe's average.

The last-digit repeats hold on one host, not across hosts: the floating-point paths differ between CPUs and the
run is chaotic. Session 61's host (an AMD EPYC with AVX-512) gave, at b804dc6 (the commit of this pin) and at
b6cc879 alike, lift rate 0.009 -> 0.685, goals per episode 0.0005 -> 0.061 (by fifth: 0.0005, 0.027, 0.288,
0.133, 0.058), goal scale 0.10 -> 0.70: the goals assertion fails there, with no code change behind it.
"""

import json
import subprocess
import sys

import pytest


# Pinned 2026-11-27 (session 40) when the default physics step became 0.01 s x 2: passed in 515 s with the figures
# above (549 rows, stage 2, lift rate 0.0083 -> 0.5482, goals 0.0004 -> 0.1361, scale 0.10 -> 0.70). The pin before it
# (session 26, 0.005 s x 4, screen cpu_screen_goaltol_step005): lift 0.000 -> 0.449, goals 0.0005 -> 0.358.
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
