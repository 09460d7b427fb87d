"""``robotrl twin select``: the rule on hand-made scores, the candidates, and a real retraining's checkpoints."""

import json

import pytest

from robotrl.twin.select import candidates, choose


def test_choose_takes_the_best_in_regions_among_those_within_tolerance_of_the_start():
    # start own 0.80, tolerance 0.02 -> floor 0.78: candidate 1 (best in the regions) lost 5 points, out
    in_regions = [0.10, 0.50, 0.30, 0.20]
    own = [0.80, 0.75, 0.79, 0.85]
    assert choose(in_regions, own, 0.02) == 2
    assert choose(in_regions, own, 0.06) == 1  # a looser tolerance lets candidate 1 in


def test_choose_keeps_the_start_when_every_candidate_lost_the_own_distribution():
    assert choose([0.1, 0.9, 0.8], [0.9, 0.7, 0.6], 0.02) == 0


def test_choose_breaks_ties_towards_the_earlier_checkpoint():
    assert choose([0.1, 0.4, 0.4], [0.8, 0.8, 0.8], 0.0) == 1


def _fake_run(tmp_path, iterations):
    ckpts = tmp_path / "run" / "checkpoints"
    ckpts.mkdir(parents=True)
    for i in iterations:
        (ckpts / f"ckpt_{i:06d}.safetensors").write_bytes(b"")
    return tmp_path / "run"


def test_candidates_are_every_nth_after_the_start_and_always_the_newest(tmp_path):
    run = _fake_run(tmp_path, [90, 100, 110, 120, 130, 140, 150])
    assert [p.stem for p in candidates(run, 100, 2)] == ["ckpt_000120", "ckpt_000140", "ckpt_000150"]
    assert [p.stem for p in candidates(run, 100, 1)][0] == "ckpt_000110"
    assert [p.stem for p in candidates(run, 100, 10)] == ["ckpt_000150"]


def test_candidates_without_a_checkpoint_after_the_start_name_keep_checkpoints(tmp_path):
    run = _fake_run(tmp_path, [90, 100])
    with pytest.raises(FileNotFoundError, match="keep_checkpoints=0"):
        candidates(run, 100)
    with pytest.raises(ValueError, match="every must be >= 1"):
        candidates(run, 0, 0)


def test_candidates_within_s_keep_the_first_seconds_after_the_start_and_their_newest(tmp_path):
    run = _fake_run(tmp_path, [100, 110, 120, 130, 140, 150])
    for i, t in zip([100, 110, 120, 130, 140, 150], [600.0, 610.0, 625.0, 640.0, 655.0, 670.0], strict=True):
        (run / "checkpoints" / f"ckpt_{i:06d}.json").write_text(json.dumps({"iteration": i, "elapsed_s": t}))
    # start at 600 s: within 40 s are 110 (10 s), 120 (25 s), 130 (40 s); 140 (55 s) is past the window
    assert [p.stem for p in candidates(run, 100, 2, within_s=40, start_elapsed_s=600.0)] == \
        ["ckpt_000120", "ckpt_000130"]
    assert [p.stem for p in candidates(run, 100, 1, within_s=40, start_elapsed_s=600.0)] == \
        ["ckpt_000110", "ckpt_000120", "ckpt_000130"]
    with pytest.raises(FileNotFoundError, match="within 5 s"):
        candidates(run, 100, 1, within_s=5, start_elapsed_s=600.0)
    with pytest.raises(ValueError, match="within_s must be > 0"):
        candidates(run, 100, 1, within_s=0)
    (run / "checkpoints" / "ckpt_000110.json").write_text("{}")
    with pytest.raises(ValueError, match="elapsed_s"):
        candidates(run, 100, 1, within_s=40, start_elapsed_s=600.0)


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    """A humanoid run of 3 iterations that kept every checkpoint (keep_checkpoints=0, save_interval=1)."""
    from robotrl.cli import main

    run = tmp_path_factory.mktemp("select") / "run"
    assert main(["train", "task=humanoid", f"run_dir={run}", "max_iterations=3", "save_interval=1",
                 "keep_checkpoints=0", "sim.num_envs=4", "sim.nthread=1", "algo.num_steps=8", "progress=false",
                 "tensorboard=false", "eval_at_end=false", "max_time_s=0"]) == 0
    return run


def test_keep_checkpoints_zero_keeps_every_checkpoint(kept_run):
    assert sorted(p.stem for p in (kept_run / "checkpoints").glob("ckpt_*.safetensors")) == [
        "ckpt_000001", "ckpt_000002", "ckpt_000003"]


# 10-step episodes: standing still is tracked (success), 1.4-1.5 m/s cannot be reached (failure)
SHORT = {"episode_length_s": 0.15, "randomize": False, "init_noise": 0.0}


def _standing_file(tmp_path):
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.twin.scenarios import Region, ScenarioFile

    params = [p for p in HumanoidTask.scenario_params if p.name == "cmd_vx"]
    region = Region({"cmd_vx": [0.0, 0.05]}, failure_rate=0.9, samples=20)
    return ScenarioFile("humanoid", params, [region]).save(tmp_path / "mined.yaml")


def test_select_scores_start_and_later_checkpoints_and_applies_the_rule(kept_run, tmp_path):
    from robotrl.twin.select import select_checkpoint

    start = kept_run / "checkpoints" / "ckpt_000001.safetensors"
    own = {**SHORT, "cmd_vx": [1.4, 1.5]}  # the own distribution: commands no policy here reaches
    sel = select_checkpoint(start, kept_run, _standing_file(tmp_path), overrides=SHORT, episodes=8, worlds=8,
                            own_overrides=own)
    assert sel.iterations == [1, 2, 3]
    assert sel.in_regions == [1.0, 1.0, 1.0] and sel.own == [0.0, 0.0, 0.0]
    assert sel.chosen == 1  # all within tolerance and tied in the regions: the earliest after the start
    strict = select_checkpoint(start, kept_run, _standing_file(tmp_path), overrides=SHORT, episodes=8, worlds=8,
                               own_overrides=own, tolerance=-0.01)  # must beat the start's own success
    assert strict.chosen == 0 and strict.checkpoint == str(start)
    saved = json.loads(sel.save(tmp_path / "select.json").read_text())
    assert saved["checkpoint"].endswith("ckpt_000002.safetensors")


def test_select_within_s_scores_only_the_checkpoints_of_the_first_seconds(kept_run, tmp_path):
    import shutil

    from robotrl.twin.select import select_checkpoint

    ckpts = kept_run / "checkpoints"
    elapsed = {i: json.loads((ckpts / f"ckpt_{i:06d}.json").read_text())["elapsed_s"] for i in (1, 2, 3)}
    window = (elapsed[2] + elapsed[3]) / 2 - elapsed[1]  # past checkpoint 2, short of checkpoint 3
    start = ckpts / "ckpt_000001.safetensors"
    sel = select_checkpoint(start, kept_run, _standing_file(tmp_path), overrides=SHORT, episodes=8, worlds=8,
                            within_s=window)
    assert sel.iterations == [1, 2] and sel.within_s == window
    bare = tmp_path / "bare"  # a start whose metadata has no elapsed_s: nothing to count the window from
    bare.mkdir()
    shutil.copy(start, bare / start.name)
    meta = json.loads((ckpts / "ckpt_000001.json").read_text())
    del meta["elapsed_s"]
    (bare / "ckpt_000001.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="does not record elapsed_s"):
        select_checkpoint(bare / start.name, kept_run, _standing_file(tmp_path), overrides=SHORT, episodes=8,
                          worlds=8, within_s=window)


def test_average_checkpoints_is_the_elementwise_mean_of_the_policy_and_loads_as_a_policy(kept_run, tmp_path):
    import torch

    from robotrl.policies.io import load_policy
    from robotrl.storage.checkpoint import load_checkpoint
    from robotrl.twin.select import average_checkpoints

    paths = sorted((kept_run / "checkpoints").glob("ckpt_*.safetensors"))
    soup = average_checkpoints(paths, tmp_path / "soup")
    tensors, meta = load_checkpoint(soup)
    each = [load_checkpoint(p)[0] for p in paths]
    for key in ("policy.actor.0.weight", "policy.obs_norm.mean", "policy.log_std"):
        assert torch.allclose(tensors[key], sum(t[key] for t in each) / 3, atol=1e-6)
    assert not torch.equal(tensors["policy.actor.0.weight"], each[-1]["policy.actor.0.weight"])
    assert torch.equal(tensors["rng.torch"], each[-1]["rng.torch"])  # the rest is the last checkpoint's
    assert meta["iteration"] == 3 and len(meta["averaged_from"]) == 3
    policy, _ = load_policy(soup)
    assert policy.act_inference(torch.zeros(1, tensors["policy.obs_norm.mean"].numel())).shape[0] == 1


def test_average_checkpoints_rejects_an_empty_list():
    from robotrl.twin.select import average_checkpoints

    with pytest.raises(ValueError, match="at least one"):
        average_checkpoints([], "unused")


def test_select_cli_rejects_an_unknown_argument_naming_the_valid_ones(capsys):
    from robotrl.cli import main

    with pytest.raises(SystemExit, match="unknown argument 'budget'.*start, run, scenarios"):
        main(["twin", "select", "start=a", "run=b", "scenarios=c", "budget=3"])
