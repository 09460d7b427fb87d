"""Slow: the README's main job, `robotrl train task=tool_use`, on a fixed step budget learns to lift.

The default recipe (128 worlds x 24 steps = 3072 env steps per iteration) trained for 420
iterations (1.29M env steps, about 6 minutes on 2 idle cores, 10 on a loaded machine). Reference
run (benchmarks/results/tool_use.json, same budget): the curriculum leaves the reach stage at
~0.6M steps; lift reward per episode 0.045 -> 0.114 and lift rate 0.001 -> 0.011 from the first
to the last fifth of training. A regression in PPO, the curriculum or the lift terms breaks these.
"""

import json
import subprocess
import sys

import pytest


# Measured 2026-11-23: passed in 608.6 s (training 566 s, load avg ~1.4), stage 1 at 0.53M steps, lift 0.045->0.114.
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the 420 iterations alone can exceed pyproject's default --timeout=600
def test_default_tool_use_run_reaches_the_lift_stage_and_its_lift_rate_rises(tmp_path):
    run = tmp_path / "tool_use"
    cmd = [sys.executable, "-m", "robotrl.cli", "train", "task=tool_use", "max_iterations=420", "max_time_s=100000",
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
    assert lifted[1] > lifted[0] + 0.003, measured
