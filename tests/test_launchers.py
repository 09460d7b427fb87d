"""Hydra multirun through an existing launcher (submitit, locally): no home-made scheduler."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install hydra-submitit-launcher")


def test_multirun_sweep_on_submitit_local(tmp_path):
    sweep = tmp_path / "sweep"
    out = subprocess.run(
        [sys.executable, "-m", "robotrl.cli", "train", "-m", "+launcher=local", "task=humanoid", "seed=0,1",
         "max_iterations=2", "sim.num_envs=4", "sim.nthread=1", "algo.num_steps=4", "progress=false",
         "tensorboard=false", "eval_at_end=false", f"hydra.sweep.dir={sweep}",
         f"hydra.launcher.submitit_folder={tmp_path}/submitit"],
        capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    for job in ("0", "1"):
        latest = sweep / job / "checkpoints" / "latest.json"
        assert json.loads(latest.read_text())["name"] == "ckpt_000002"
    seeds = {json.loads((sweep / j / "checkpoints" / "ckpt_000002.json").read_text())["config_yaml"].split("seed: ")[1]
             .split("\n")[0] for j in ("0", "1")}
    assert seeds == {"0", "1"}


@pytest.mark.parametrize("name", ["local", "slurm", "ray"])
def test_launcher_presets_compose(name):
    plugin = {"local": "hydra_submitit_launcher", "slurm": "hydra_submitit_launcher", "ray": "hydra_ray_launcher"}
    pytest.importorskip(f"hydra_plugins.{plugin[name]}")
    out = subprocess.run([sys.executable, "-m", "robotrl.cli", "train", f"+launcher={name}", "--cfg", "hydra"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "launcher:" in out.stdout
