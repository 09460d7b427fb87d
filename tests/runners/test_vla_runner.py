"""`robotrl train algo=vla_sft`, then `algo=grpo` and `algo=vla_ppo` from it, end to end (tiny vision tower)."""

import json
import subprocess
import sys

import pytest

TINY = ["task=tool_use_language", "sim.num_envs=8", "sim.nthread=1", "algo.image_size=32", "algo.vla.vision=tiny",
        "algo.vla.image_size=32", "algo.vla.d_model=32", "algo.vla.layers=1", "algo.eval_episodes=8"]


def _train(tmp_path, name, *args):
    run = tmp_path / name
    cmd = [sys.executable, "-m", "robotrl.cli", "train", *TINY, f"run_dir={run}", "progress=false", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return run


@pytest.mark.slow
def test_sft_then_grpo_and_ppo_runs_write_weights_and_success(tmp_path):
    sft = _train(tmp_path, "sft", "algo=vla_sft", "algo.demo_episodes=8", "algo.steps=20", "algo.dagger_rounds=1",
                 "algo.dagger_episodes=8", "algo.dagger_steps=10")
    assert (sft / "vla.safetensors").is_file() and (sft / "demos.hdf5").is_file()
    lines = [json.loads(x) for x in (sft / "metrics.jsonl").read_text().splitlines()]
    assert "dagger/rows" in lines[1] and 0.0 <= lines[-1]["episode/success"] <= 1.0
    for algo in ("grpo", "vla_ppo"):
        run = _train(tmp_path, algo, f"algo={algo}", f"algo.init={sft}", "max_iterations=1", "algo.group_size=4")
        last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        assert last["iteration"] == 1 and (run / "vla.safetensors").is_file()
