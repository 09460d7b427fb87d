"""A non-editable wheel install finds tasks, configs and the CLI without the source tree.

The wheel goes into a fresh venv whose dependencies come from the *running* environment:
a ``.pth`` file lists the running interpreter's site-packages. ``venv --system-site-packages``
would not do: inside a venv it points at the base interpreter, which lacks torch.
"""

import site
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHECK = r"""
import os, sys, robotrl, robotrl.tasks, robotrl.configs
from importlib.resources import files
assert "site-packages" in robotrl.__file__, robotrl.__file__
assert os.path.realpath(robotrl.__file__).startswith(os.path.realpath(sys.prefix)), robotrl.__file__
assert "humanoid" in robotrl.tasks.available(), robotrl.tasks.available()
assert files("robotrl.configs").joinpath("train.yaml").is_file()
assert files("robotrl.configs").joinpath("task", "humanoid.yaml").is_file()
from robotrl.tasks import task_class
from robotrl.tasks.humanoid.config import HumanoidConfig
task_class("humanoid")(HumanoidConfig(), 1, "cpu").build_model()
print("OK", robotrl.__file__)
"""


def test_wheel_install_finds_tasks_and_configs(tmp_path):
    wheel_dir = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheel_dir)], check=True, timeout=300)
    wheel = next(wheel_dir.glob("robotrl-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    venv_site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
    running = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                             *site.getsitepackages()])
    # appended after the venv's own site-packages, so the installed wheel wins over an editable checkout
    Path(venv_site, "zz_running_env.pth").write_text("\n".join(p for p in running if Path(p).is_dir()) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300)
    out = subprocess.run([str(py), "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr
    cli = subprocess.run([str(venv / "bin" / "robotrl"), "train", "task=humanoid", "--cfg", "job"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "name: humanoid" in cli.stdout, cli.stderr
