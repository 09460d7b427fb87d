"""CLI: config printing, and errors that list the valid choices."""

import json
import subprocess
import sys

import pytest


def run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "robotrl.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_cfg_job_prints_the_composed_config():
    out = run("train", "task=humanoid", "--cfg", "job")
    assert out.returncode == 0, out.stderr
    assert "name: humanoid" in out.stdout and "num_steps: 32" in out.stdout  # tuning/humanoid_ppo applied


def test_unknown_task_lists_choices():
    out = run("train", "task=nope", "--cfg", "job")
    assert out.returncode != 0
    assert "Could not find 'task/nope'" in out.stderr and "humanoid" in out.stderr


def test_unknown_key_is_rejected():
    out = run("train", "task=humanoid", "algo.nope=1", "--cfg", "job")
    assert out.returncode != 0 and "nope" in out.stderr


def test_wrong_type_is_rejected():
    out = run("train", "task=humanoid", "sim.num_envs=many", "--cfg", "job")
    assert out.returncode != 0 and "num_envs" in out.stderr


@pytest.mark.parametrize("override,needle", [("sim.backend=bullet", "valid choices: cpu, warp"),
                                             ("policy.activation=swish", "valid: elu")])
def test_bad_value_lists_valid_choices(override, needle, tmp_path):
    out = run("train", "task=humanoid", override, "max_iterations=1", f"run_dir={tmp_path}", "progress=false")
    assert out.returncode != 0 and needle in out.stderr


def test_unknown_command():
    out = run("fly")
    assert out.returncode == 2 and "Valid commands" in out.stderr


def test_bad_input_to_a_plain_subcommand_is_one_message_without_a_traceback(tmp_path, monkeypatch, capsys):
    from robotrl.cli import main

    missing = tmp_path / "no_run"
    assert main(["export", f"checkpoint={missing}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"robotrl export: FileNotFoundError: No checkpoint at '{missing}'")
    assert "Traceback" not in err and "ROBOTRL_FULL_ERROR=1" in err
    assert main(["rewards", "train-encoder", "bogus=1"]) == 1
    assert "robotrl rewards: ConfigKeyError: Key 'bogus' not in 'TrainEncoderConfig'" in capsys.readouterr().err
    monkeypatch.setenv("ROBOTRL_FULL_ERROR", "1")
    with pytest.raises(FileNotFoundError):
        main(["export", f"checkpoint={missing}"])


def test_train_then_eval_writes_video_curve_metrics_and_a_pybullet_eval(tmp_path):
    """The main job's path: train, a checkpoint, then an MP4 and a learning-curve PNG (headless GL); eval with
    task overrides, and in PyBullet (engine=pybullet) with a different return from MuJoCo's."""
    out = run("train", "task=humanoid", "max_iterations=8", "sim.num_envs=8", "algo.num_steps=8",
              f"run_dir={tmp_path}", "progress=false", "tensorboard=false", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "eval" / "eval.mp4").stat().st_size > 10_000
    assert (tmp_path / "eval" / "learning_curve.png").stat().st_size > 5_000
    out = run("eval", f"checkpoint={tmp_path}", "num_envs=4", "episodes=4", "video=false", "split=train",
              timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert '"return"' in out.stdout and (tmp_path / "eval" / "eval_train.json").is_file()

    # stress the policy on conditions it never saw: task overrides (a scenario file mixed in) on a chosen backend
    from robotrl.tasks.humanoid.task import HumanoidTask

    from robotrl.twin.scenarios import Region, ScenarioFile

    mined = ScenarioFile("humanoid", HumanoidTask.scenario_params, [Region({"cmd_vx": [1.4, 1.5]}, 1.0, 9)])
    mined.save(tmp_path / "mined.yaml")
    out = run("eval", f"checkpoint={tmp_path}", "sim=cpu", "sim.nthread=1", "task.episode_length_s=0.3",
              "task.push_interval_s=0.1", f"task.scenarios={tmp_path}/mined.yaml", "task.scenario_mix=0.5",
              "num_envs=4", "episodes=8", "video=false", f"out_dir={tmp_path}/stress", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "evaluating with 50% of the resets drawn from task.scenarios=" in " ".join((out.stdout + out.stderr).split())
    result = json.loads((tmp_path / "stress" / "eval_train.json").read_text())
    assert result["task_overrides"] == {"episode_length_s": 0.3, "push_interval_s": 0.1,
                                        "scenarios": f"{tmp_path}/mined.yaml", "scenario_mix": 0.5}
    assert result["scenario_mix"] == 0.5
    assert result["backend"] == "cpu" and result["episodes"] == 8  # two per world
    assert result["length"] <= 20  # 0.3 s of 15 ms steps: the override reached the env

    # sim-to-sim: the same policy and episodes with PyBullet physics, written beside the MuJoCo eval
    short = ("task.episode_length_s=0.3", "num_envs=2", "episodes=2", "video=false", "sim.nthread=1")
    out = run("eval", f"checkpoint={tmp_path}", "engine=pybullet", *short, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    bullet = json.loads((tmp_path / "eval_pybullet" / "eval_train.json").read_text())
    out = run("eval", f"checkpoint={tmp_path}", *short, f"out_dir={tmp_path}/short", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    mujoco = json.loads((tmp_path / "short" / "eval_train.json").read_text())
    assert bullet["engine"] == "pybullet" and mujoco["engine"] == "mujoco" and bullet["episodes"] == 2
    assert bullet["return"] != mujoco["return"]  # same seed, same policy: only the physics differs
    out = run("eval", f"checkpoint={tmp_path}", "engine=ode", "video=false", timeout=120)
    assert out.returncode != 0 and "valid: mujoco, pybullet" in out.stderr

    out = run("eval", f"checkpoint={tmp_path}", "task.no_such_field=1", "video=false", timeout=120)
    assert out.returncode != 0 and "no_such_field" in out.stderr and "episode_length_s" in out.stderr
    out = run("eval", f"checkpoint={tmp_path}", "task.episode_length_s=long", "video=false", timeout=120)
    assert out.returncode != 0 and "episode_length_s" in out.stderr
