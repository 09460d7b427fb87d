"""``robotrl twin mine`` on a real checkpoint: scenarios reach each world's first episode; regions come out."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def humanoid_run(tmp_path_factory):
    from robotrl.cli import main

    run = tmp_path_factory.mktemp("mine") / "run"
    assert main(["train", "task=humanoid", f"run_dir={run}", "max_iterations=1", "save_interval=1",
                 "sim.num_envs=4", "sim.nthread=1", "algo.num_steps=8", "progress=false", "tensorboard=false",
                 "eval_at_end=false", "max_time_s=0"]) == 0
    return run


def test_evaluator_runs_each_scenario_in_its_own_world(humanoid_run):
    from robotrl.twin.evaluate import ScenarioEvaluator

    # 10-step episodes: standing still is tracked (success), 1.5 m/s cannot be reached (failure)
    ev = ScenarioEvaluator(humanoid_run, ["cmd_vx"], {"episode_length_s": 0.15, "randomize": False,
                                                      "init_noise": 0.0}, worlds=8, nthread=1)
    x = np.array([[0.0], [1.5]] * 6)  # 12 scenarios: two chunks of 8 worlds
    ok = ev(x)
    assert ok.tolist() == [True, False] * 6
    assert ev.evaluated == 12


def test_mine_cli_writes_scenario_file_with_summaries(humanoid_run, tmp_path):
    from robotrl.cli import main
    from robotrl.twin.scenarios import ScenarioFile

    out = tmp_path / "mined.yaml"
    assert main(["twin", "mine", f"checkpoint={humanoid_run}", "budget=96", "params=cmd_vx,friction", "worlds=32",
                 "task.episode_length_s=0.15", "task.randomize=false", "task.init_noise=0.0", "validate=0",
                 f"out={out}"]) == 0  # 96 scenarios leave too few fresh draws per region to re-test them
    mined = ScenarioFile.load(out)
    assert mined.task == "humanoid" and [p.name for p in mined.params] == ["cmd_vx", "friction"]
    assert mined.weighting == "learnability"  # the CLI's default for training
    assert all(r.summary.startswith("fails when cmd_vx >") for r in mined.regions)
    lows = [r.bounds["cmd_vx"][0] for r in mined.regions]
    assert 0.1 < min(lows) < 0.6  # |vx - cmd| < 0.3 m/s is success, and the policy barely moves
    samples = json.loads(out.with_suffix(".samples.json").read_text())
    assert len(samples["x"]) == 96 and len(samples["success"]) == 96
