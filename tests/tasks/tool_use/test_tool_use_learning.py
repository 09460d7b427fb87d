"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift.

The default recipe (256 worlds x 24 steps = 6144 env steps per iteration, 2 epochs per update,
rewards over the running return std, orthogonal init, grasp and held-lift shaping) trained for 550
iterations (3.38M env steps, about 10 minutes on 2 idle cores). Reference run
(benchmarks/results/tool_use.json, cpu_screen_grasp_seed0_*, same recipe and seed; a fixed-iteration
run repeats a screen's first iterations exactly, as the previous pins did to the last digit): lift
reward per episode 0.059 -> 0.608 and lift rate 0.001 -> 0.483 from the first to the last fifth, and
the curriculum reaches the goal stage. Without the shaping (the previous recipe) the same seed's lift
rate ended at 0.153, so a regression in PPO, the curriculum or the lift terms breaks these. Seed 0 is
the recipe's best of three seeds (seeds 1 and 2 ended at 0.176 and 0.028 in 10 minutes), so the
margin pins this seed's behaviour, not the recipe's average.
"""

import json
import subprocess
import sys

import pytest


# Pinned 2026-11-24 from the reference screen's first 550 iterations; run once after: passed in 557 s (idle
# machine) with exactly its figures (549 rows, stage 2, lift reward 0.0594 -> 0.6084, lift rate 0.0008 -> 0.4827).
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the 550 iterations alone can exceed pyproject's default --timeout=600
def test_default_tool_use_run_reaches_the_goal_stage_and_its_lift_rate_rises(tmp_path):
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
    measured = (f"{len(rows)} rows, max curriculum stage {stage}, lift reward {lift[0]:.4f} -> {lift[1]:.4f}, "
                f"lift rate {lifted[0]:.4f} -> {lifted[1]:.4f} (first -> last fifth)")
    print(measured)
    assert stage >= 2, f"the curriculum never reached the goal stage: {measured}"
    assert lift[1] > 1.5 * lift[0], measured
    assert lifted[1] > lifted[0] + 0.25, measured
