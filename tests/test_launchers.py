"""Hydra multirun through an existing launcher (submitit, locally): no home-made scheduler."""

import ipaddress
import json
import subprocess
import sys
import time

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


def _run_watching_connections(cmd, cwd, timeout):
    """Run ``cmd``; return (exit code, output, every peer address its process tree connected to)."""
    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    seen = set()
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        try:
            root = psutil.Process(proc.pid)
            for p in [root, *root.children(recursive=True)]:
                seen |= {c.raddr.ip for c in p.net_connections(kind="inet") if c.raddr}
        except psutil.Error:
            pass
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    return proc.returncode, proc.communicate()[0], seen


RAY_CLOUD_PROBE = {"169.254.169.254"}  # the cloud metadata service (link-local), probed once by Ray's API server


def _is_loopback(ip):
    addr = ipaddress.ip_address(ip)
    return (getattr(addr, "ipv4_mapped", None) or addr).is_loopback


def test_multirun_sweep_on_local_ray_over_loopback(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="pip install 'robotrl[cluster]'")
    sweep = tmp_path / "sweep"
    rc, out, peers = _run_watching_connections(
        [sys.executable, "-m", "robotrl.cli", "train", "-m", "+launcher=ray", "task=humanoid", "seed=0,1",
         "max_iterations=2", "sim.num_envs=4", "sim.nthread=1", "algo.num_steps=4", "progress=false",
         "tensorboard=false", "eval_at_end=false", f"hydra.sweep.dir={sweep}", "hydra.launcher.ray.init.num_cpus=2",
         "hydra.launcher.ray.remote.num_cpus=1"], cwd=tmp_path, timeout=400)
    assert rc == 0, out[-3000:]
    for job in ("0", "1"):
        meta = json.loads((sweep / job / "checkpoints" / "ckpt_000002.json").read_text())
        assert f"seed: {job}\n" in meta["config_yaml"]
    # the driver, Ray's GCS, raylet and workers talked to loopback addresses only, but for one probe Ray 2.60 makes
    # whatever its settings: its API server asks the link-local cloud metadata service which cloud it is on
    # (UsageStatsHead.run -> get_cluster_config_to_report, before the usage-stats switch is read; README "Sweeps")
    assert peers and all(_is_loopback(ip) or ip in RAY_CLOUD_PROBE for ip in peers), peers


@pytest.mark.parametrize("name", ["local", "slurm", "ray"])
def test_launcher_presets_compose(name):
    plugin = {"local": "hydra_submitit_launcher", "slurm": "hydra_submitit_launcher", "ray": "hydra_ray_launcher"}
    pytest.importorskip(f"hydra_plugins.{plugin[name]}")
    out = subprocess.run([sys.executable, "-m", "robotrl.cli", "train", f"+launcher={name}", "--cfg", "hydra"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "launcher:" in out.stdout
