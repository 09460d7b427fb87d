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


# near |vx - cmd| = 0.3 m/s with randomized dynamics and initial states: the answers depend on the draws
NOISY = {"episode_length_s": 0.3, "randomize": True}


def _boundary_scenarios(n=16):
    return np.linspace(0.15, 0.45, n, dtype=np.float32)[:, None]


def test_a_chunks_answers_depend_on_its_seed_not_on_the_chunks_before(humanoid_run):
    from robotrl.twin.evaluate import ScenarioEvaluator

    ev = ScenarioEvaluator(humanoid_run, ["cmd_vx"], NOISY, worlds=16, nthread=1)
    x = _boundary_scenarios()
    first = ev.run_chunk(x, 7)
    others = [ev.run_chunk(x, s) for s in (8, 9, 10)]
    assert ev.run_chunk(x, 7).tolist() == first.tolist()  # after three other chunks, the same answers
    assert any(o.tolist() != first.tolist() for o in others)  # and the seed does matter here


def test_fan_out_over_two_ray_workers_gives_the_in_process_answers(humanoid_run, local_ray):
    from robotrl.twin.evaluate import FanOutEvaluator, ScenarioEvaluator

    here = ScenarioEvaluator(humanoid_run, ["cmd_vx"], NOISY, worlds=8, nthread=1)
    fan = FanOutEvaluator(humanoid_run, ["cmd_vx"], NOISY, worlds=8, workers=2)
    assert fan.task_name == "humanoid" and [p.name for p in fan.params] == ["cmd_vx"]
    for x in (_boundary_scenarios(20), _boundary_scenarios(12)):  # two rounds: chunk indices carry over
        assert fan(x).tolist() == here(x).tolist()
    assert fan.chunks == here.chunks == 5 and fan.evaluated == 32


def test_mine_cli_over_two_ray_workers_draws_and_labels_the_same_scenarios_as_in_process(humanoid_run, local_ray,
                                                                                           tmp_path):
    from robotrl.cli import main

    samples = []
    for workers in ("0", "2"):
        out = tmp_path / f"mined_{workers}.yaml"
        assert main(["twin", "mine", f"checkpoint={humanoid_run}", "budget=48", "params=cmd_vx", "worlds=16",
                     "task.episode_length_s=0.3", "task.randomize=true", "validate=0", f"workers={workers}",
                     f"out={out}"]) == 0
        samples.append(json.loads(out.with_suffix(".samples.json").read_text()))
    assert len(samples[0]["x"]) == 48
    assert samples[1]["x"] == samples[0]["x"] and samples[1]["success"] == samples[0]["success"]
    assert 0 < sum(samples[0]["success"]) < 48  # mixed answers: the comparison is not between constant labels
