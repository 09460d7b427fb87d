"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift.

The default recipe (256 worlds x 24 steps = 6144 env steps per iteration, rewards over the
running return std, orthogonal init) trained for 370 iterations (2.27M env steps, about 10
minutes on 2 idle cores). Reference run (benchmarks/results/tool_use.json,
cpu_screen_worlds256_norm_ortho_*, same recipe and budget): the curriculum leaves the reach
stage at 0.92M steps; lift reward per episode 0.046 -> 0.090 and lift rate 0.000 -> 0.158 from
the first to the last fifth of training. With the previous recipe (128 worlds, neither option)
the lift rate ended at 0.010, so a regression in PPO, the curriculum or the lift terms breaks these.
"""

import json
import subprocess
import sys

import pytest


# Measured 2026-11-23: passed in 559 s (idle machine), exactly the reference screen's figures (lift 0.0004 -> 0.158).
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the 370 iterations alone can exceed pyproject's default --timeout=600
def test_default_tool_use_run_reaches_the_lift_stage_and_its_lift_rate_rises(tmp_path):
    run = tmp_path / "tool_use"
    cmd = [sys.executable, "-m", "robotrl.cli", "train", "task=tool_use", "max_iterations=370", "max_time_s=100000",
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
    assert stage >= 1, f"the curriculum never left the reach stage: {measured}"
    assert lift[1] > 1.5 * lift[0], measured
    assert lifted[1] > lifted[0] + 0.05, measured
