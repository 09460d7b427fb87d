"""End-to-end PPO: return rises on the humanoid; resume after kill -9 continues the run; update threads."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from robotrl.monitoring import read_metrics
from robotrl.runners import make_runner
from robotrl.runners.base import resolve_update_threads


def test_short_ppo_run_on_humanoid_raises_mean_return(train_cfg, tmp_path):
    cfg = train_cfg("task=humanoid", "sim.num_envs=32", "sim.nthread=2", "max_iterations=40",
                    "progress=false", "tensorboard=false", "save_interval=1000", "seed=1")
    runner = make_runner(cfg, tmp_path)
    runner.learn()
    rows = [r for r in read_metrics(tmp_path) if r.get("episode/return") is not None]
    early = sum(r["episode/return"] for r in rows[:5]) / 5
    late = sum(r["episode/return"] for r in rows[-5:]) / 5
    assert late > 1.5 * early, (early, late)
    assert (tmp_path / "checkpoints" / "latest.json").is_file()


def _train_cmd(run_dir, iters, *extra):
    return [sys.executable, "-m", "robotrl.cli", "train", "task=humanoid", f"run_dir={run_dir}",
            f"max_iterations={iters}", "save_interval=2", "sim.num_envs=8", "sim.nthread=1", "algo.num_steps=8",
            "progress=false", "tensorboard=false", "eval_at_end=false", *extra]


def test_resume_after_kill_9(tmp_path):
    run_dir = tmp_path / "run"
    latest = run_dir / "checkpoints" / "latest.json"
    proc = subprocess.Popen(_train_cmd(run_dir, 100000), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if latest.is_file() and json.loads(latest.read_text())["name"] >= "ckpt_000006":
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no checkpoint within 120 s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    saved = int(json.loads(latest.read_text())["name"].split("_")[1])
    assert saved >= 6
    before = len(read_metrics(run_dir))
    out = subprocess.run(_train_cmd(run_dir, saved + 4, "resume=true"), capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"resumed from ckpt_{saved:06d}" in out.stdout + out.stderr
    rows = read_metrics(run_dir)[before:]
    assert [r["iteration"] for r in rows] == list(range(saved + 1, saved + 5))
    assert json.loads(latest.read_text())["name"] == f"ckpt_{saved + 4:06d}"


def test_update_runs_with_update_threads_and_collection_with_torch_threads(train_cfg, tmp_path, thread_spy):
    cfg = train_cfg("task=humanoid", "sim.num_envs=8", "sim.nthread=1", "algo.num_steps=8", "max_iterations=2",
                    "progress=false", "tensorboard=false", "eval_at_end=false", "torch_threads=1",
                    "update_threads=3")
    runner = make_runner(cfg, tmp_path)
    seen = thread_spy(runner.algo)
    runner.learn()
    assert seen["update"] == [3, 3]
    assert set(seen["act"]) == {1} and len(seen["act"]) == 16
    assert torch.get_num_threads() == 1


def test_update_threads_zero_shares_the_cpus_among_local_ranks_and_negative_is_an_error(monkeypatch):
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert resolve_update_threads(0) == cpus
    assert resolve_update_threads(5) == 5
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cpus * 2))
    assert resolve_update_threads(0) == 1
    with pytest.raises(ValueError, match="update_threads must be >= 0"):
        resolve_update_threads(-1)
