"""Batch jobs: demonstration collection with images into one HDF5 file; the command-line parsing."""

import h5py
import numpy as np
import pytest

from robotrl.cluster import CollectJob, Scenario, run_batch
from robotrl.cluster.cli import main, parse, scenarios_of


def test_collect_job_writes_demos_with_one_image_per_step_in_scenario_order(humanoid_checkpoint, tmp_path):
    job = CollectJob(task="humanoid", teacher=humanoid_checkpoint, episodes=2, num_envs=2, image_size=[24, 32],
                     camera="track")
    scenarios = [Scenario("b", 1, {"episode_length_s": 0.3}), Scenario("a", 0, {"episode_length_s": 0.2})]
    results = run_batch(job, scenarios, progress=False)
    path = job.write(tmp_path / "demos.hdf5", results, {"job": "collect"})
    with h5py.File(path) as f:
        demos = [f[f"data/demo_{i}"] for i in range(4)]
        assert [d.attrs["scenario"] for d in demos] == ["a", "a", "b", "b"]
        for d in demos:
            image, actions = d["obs/image"][()], d["actions"][()]
            assert image.dtype == np.uint8 and image.shape == (actions.shape[0], 24, 32, 3)
            assert image.std() > 0  # a rendered scene, not a blank buffer
            assert d["obs/policy"].shape[0] == actions.shape[0]


def test_cli_parse_splits_batch_and_job_arguments_and_builds_the_grid():
    cfg, job = parse("eval", ["checkpoint=/x", "workers=2", "grid.push_vel=[0.0,1.0]", "seeds=[3,4]",
                              "task.episode_length_s=0.5", "episodes=4"])
    assert (cfg.workers, job.checkpoint, job.episodes) == (2, "/x", 4)
    scenarios = scenarios_of(cfg)
    assert [(s.seed, s.task) for s in scenarios] == [
        (3, {"episode_length_s": 0.5, "push_vel": 0.0}), (4, {"episode_length_s": 0.5, "push_vel": 0.0}),
        (3, {"episode_length_s": 0.5, "push_vel": 1.0}), (4, {"episode_length_s": 0.5, "push_vel": 1.0})]


def test_cli_rejects_unknown_job_and_argument(capsys):
    assert main(["nope"]) == 2
    assert "Valid jobs: collect, eval" in capsys.readouterr().err
    assert main(["eval", "bogus=1"]) == 2
    assert "checkpoint" in capsys.readouterr().err
    with pytest.raises(ValueError, match="sample"):
        scenarios_of(parse("eval", ["range.push_vel=[0,1]"])[0])


@pytest.mark.parametrize(("argv", "message"), [
    (["eval"], "the eval job needs checkpoint=<run dir or ckpt file>"),
    (["eval", "checkpoint=/nonexistent/run"], "No checkpoint at '/nonexistent/run'"),
    (["collect"], "the collect job needs task=<name>"),
    (["collect", "task=nope"], "Unknown task 'nope'. Valid tasks:"),
])
def test_cli_rejects_a_missing_checkpoint_or_task_before_any_scenario_runs(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "0/1" not in err  # no progress bar: nothing was scheduled


def test_cli_eval_batch_in_process_writes_merged_json(humanoid_checkpoint, tmp_path, capsys):
    import json

    out = tmp_path / "b.json"
    assert main(["eval", f"checkpoint={humanoid_checkpoint}", "num_envs=2", "episodes=2", "sample=2",
                 "range.episode_length_s=[0.2,0.3]", f"out={out}", "progress=false"]) == 0
    data = json.loads(out.read_text())
    assert [r["scenario"]["id"] for r in data["results"]] == ["000000", "000001"]
    assert all(r["result"]["episodes"] >= 2 for r in data["results"])
