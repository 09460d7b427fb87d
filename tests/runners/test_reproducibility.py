"""Reproducible runs: one seed gives one run; resume restores every stream; failures keep the last good checkpoint."""

import json

import pytest
import torch

from robotrl.monitoring import read_metrics
from robotrl.runners import make_runner
from robotrl.storage.checkpoint import load_checkpoint

# Keys that depend on the wall clock, not on the random streams.
CLOCK_KEYS = ("time_s", "perf/")


def _learning_metrics(run_dir):
    return [{k: v for k, v in row.items() if not k.startswith(CLOCK_KEYS)} for row in read_metrics(run_dir)]


def _ppo(train_cfg, run_dir, seed, iters, *extra):
    # pushes every 0.3 s and quick command resampling: those random streams matter within a few iterations
    cfg = train_cfg("task=humanoid", "sim.num_envs=8", "sim.nthread=2", "algo.num_steps=16",
                    f"max_iterations={iters}", f"seed={seed}", "save_interval=2", "progress=false",
                    "tensorboard=false", "task.push_interval_s=0.3", "task.command_resample_s=0.3", *extra)
    return make_runner(cfg, run_dir)


def test_same_seed_gives_identical_metrics_and_other_seed_differs(train_cfg, tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        _ppo(train_cfg, tmp_path / name, seed, 4).learn()
    a, b, c = (_learning_metrics(tmp_path / n) for n in "abc")
    assert len(a) == 4 and a == b
    assert a != c


def test_checkpoint_holds_every_random_stream_and_resume_restores_them(train_cfg, tmp_path):
    run = _ppo(train_cfg, tmp_path / "run", 0, 2)
    run.learn()
    tensors, meta = load_checkpoint(tmp_path / "run")
    assert meta["iteration"] == 2
    assert {"rng.torch", "rng.env"} <= set(tensors)
    # the checkpoint holds the streams as they were at the end of iteration 2, not the seed's start
    assert torch.equal(tensors["rng.env"], run.task_env.gen.get_state())
    fresh = torch.Generator().manual_seed(0).get_state()
    assert not torch.equal(tensors["rng.env"], fresh)

    resumed = _ppo(train_cfg, tmp_path / "run", 0, 3, "resume=true")
    assert resumed.restore()
    assert torch.equal(resumed.task_env.gen.get_state(), tensors["rng.env"])
    assert torch.equal(torch.get_rng_state(), tensors["rng.torch"])
    assert resumed.iteration == 2 and resumed.env_steps == meta["env_steps"]


def test_two_resumes_from_one_checkpoint_continue_identically(train_cfg, tmp_path):
    _ppo(train_cfg, tmp_path / "base", 5, 2).learn()
    for name in ("r1", "r2"):
        (tmp_path / name).mkdir()
        for f in (tmp_path / "base" / "checkpoints").iterdir():
            (tmp_path / name / "checkpoints").mkdir(exist_ok=True)
            (tmp_path / name / "checkpoints" / f.name).write_bytes(f.read_bytes())
        _ppo(train_cfg, tmp_path / name, 5, 5, "resume=true").learn()
    r1, r2 = _learning_metrics(tmp_path / "r1"), _learning_metrics(tmp_path / "r2")
    assert [r["iteration"] for r in r1] == [3, 4, 5]
    assert r1 == r2


def test_exception_mid_run_keeps_the_last_good_checkpoint(train_cfg, tmp_path):
    runner = _ppo(train_cfg, tmp_path, 0, 10)
    original = runner._iterate
    calls = {"n": 0}

    def failing(obs, stats):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("boom in iteration 4")  # after iteration 3 updated the weights, unsaved
        return original(obs, stats)

    runner._iterate = failing
    with pytest.raises(RuntimeError, match="boom"):
        runner.learn()
    latest = json.loads((tmp_path / "checkpoints" / "latest.json").read_text())
    assert latest["name"] == "ckpt_000002"  # saved at iteration 2; nothing written after the failure
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("ckpt_*.json")) == ["ckpt_000002.json"]


def test_ctrl_c_saves_a_checkpoint(train_cfg, tmp_path):
    runner = _ppo(train_cfg, tmp_path, 0, 10, "save_interval=100")
    original = runner._iterate
    calls = {"n": 0}

    def interrupted(obs, stats):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(obs, stats)

    runner._iterate = interrupted
    runner.learn()
    assert json.loads((tmp_path / "checkpoints" / "latest.json").read_text())["name"] == "ckpt_000001"


def _sac(train_cfg, run_dir, iters, *extra):
    cfg = train_cfg("task=humanoid", "algo=sac", "sim.num_envs=4", "sim.nthread=2", f"max_iterations={iters}",
                    "algo.steps_per_iteration=8", "algo.learning_starts=16", "algo.batch_size=16",
                    "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "save_interval=2", "progress=false",
                    "tensorboard=false", "eval_at_end=false", *extra)
    return make_runner(cfg, run_dir)


def test_sac_resume_restores_the_replay_buffer_and_its_sampling_stream(train_cfg, tmp_path):
    run = _sac(train_cfg, tmp_path, 3)
    run.learn()
    replay = run.algo.replay
    assert len(replay) == 3 * 8 * 4
    files = sorted(p.name for p in (tmp_path / "checkpoints").glob("replay_*.safetensors"))
    assert files == ["replay_000003.safetensors"]  # the newest only

    resumed = _sac(train_cfg, tmp_path, 4, "resume=true")
    assert resumed.restore()
    assert len(resumed.algo.replay) == len(replay) and resumed.algo.replay.ptr == replay.ptr
    n = replay.size
    for field in ("obs", "action", "reward", "next_obs", "terminated", "truncated"):
        assert torch.equal(getattr(resumed.algo.replay, field)[:n], getattr(replay, field)[:n]), field
    assert torch.equal(resumed.algo.gen.get_state(), run.algo.gen.get_state())
    assert resumed.algo._credit == run.algo._credit


def test_sac_resume_without_saved_replay_starts_empty(train_cfg, tmp_path):
    _sac(train_cfg, tmp_path, 2, "save_replay=false").learn()
    assert not list((tmp_path / "checkpoints").glob("replay_*"))
    resumed = _sac(train_cfg, tmp_path, 3, "resume=true")
    assert resumed.restore() and len(resumed.algo.replay) == 0


def _fasttd3(train_cfg, run_dir, iters, *extra):
    cfg = train_cfg("task=humanoid", "algo=fasttd3", "sim.num_envs=4", "sim.nthread=2", f"max_iterations={iters}",
                    "algo.steps_per_iteration=8", "algo.learning_starts=16", "algo.batch_size=16",
                    "algo.actor_hidden=[16]", "algo.critic_hidden=[16]", "algo.num_atoms=11", "save_interval=1",
                    "progress=false", "tensorboard=false", "eval_at_end=false", *extra)
    return make_runner(cfg, run_dir)


def test_fasttd3_resume_restores_exploration_stds_and_two_resumes_continue_identically(train_cfg, tmp_path):
    base = _fasttd3(train_cfg, tmp_path / "base", 3)
    base.learn()
    runs = []
    for name in ("r1", "r2"):
        (tmp_path / name / "checkpoints").mkdir(parents=True)
        for f in (tmp_path / "base" / "checkpoints").iterdir():
            (tmp_path / name / "checkpoints" / f.name).write_bytes(f.read_bytes())
        run = _fasttd3(train_cfg, tmp_path / name, 5, "resume=true")
        assert run.restore()
        assert torch.equal(run.algo.noise_std, base.algo.noise_std)  # per-world exploration stds come back
        assert run.algo.num_updates == base.algo.num_updates > 0
        run.learn()
        runs.append(run)
    a, b = (r.algo for r in runs)
    assert a.num_updates == b.num_updates > base.algo.num_updates
    assert torch.equal(a.noise_std, b.noise_std)
    for (name, x), y in zip(a.policy.state_dict().items(), b.policy.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
