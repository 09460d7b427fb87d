"""robotrl collect: scripted, noisy and checkpoint teachers to robomimic-style HDF5."""

import h5py
import pytest
import torch

from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.data.collect import collect, main, parse_args


def test_collect_cli_writes_plain_h5py_readable_demos(tmp_path, capsys):
    out = tmp_path / "reach.hdf5"
    assert main(["task=reach", "teacher=scripted", "episodes=6", "num_envs=4", f"out={out}",
                 "task.radius=0.05"]) == 0
    assert "wrote 6 demos" in capsys.readouterr().out
    with h5py.File(out, "r") as f:
        demos = sorted(f["data"].keys())
        assert len(demos) == 6
        total = 0
        for name in demos:
            g = f["data"][name]
            T = g.attrs["num_samples"]
            assert g["obs/policy"].shape == (T, 4) and g["actions"].shape == (T, 2)
            assert g["rewards"].shape == (T,) and g["dones"][-1] == 1
            assert bool(g.attrs["success"])  # the scripted controller always reaches in 50 steps
            total += T
        assert f["data"].attrs["total"] == total


def test_noisy_teacher_is_worse_and_episodes_are_not_biased_short():
    def run(noise):
        env = PointReach(ReachConfig(num_envs=8, radius=0.02, max_episode_length=30), seed=0)
        eps = collect(env, lambda o: env.scripted_action(), episodes=32, noise=noise, seed=1)
        return sum(e["success"] for e in eps) / len(eps), eps

    clean, _ = run(0.0)
    noisy, eps = run(1.0)
    assert clean == 1.0 and noisy < 0.9
    # every world contributes its first 4 episodes: mean length is not that of the fastest episodes
    assert len(eps) == 32


def test_bad_arguments_name_the_valid_keys():
    with pytest.raises(ValueError, match="Valid keys"):
        parse_args(["task=reach", "teacher=scripted", "bogus=1"])
    with pytest.raises(ValueError, match="task=<name> and teacher"):
        parse_args(["episodes=3"])
    assert main(["task=reach"]) == 2


def test_collect_from_a_trained_checkpoint(tmp_path):
    from robotrl.algos.sac import SACConfig
    from robotrl.config import TrainConfig
    from robotrl.runners.off_policy import OffPolicyRunner
    from robotrl.storage.demos import read_demos

    run = tmp_path / "sac"
    algo = SACConfig(batch_size=32, learning_starts=32, actor_hidden=[16], critic_hidden=[16], steps_per_iteration=4)
    cfg = TrainConfig(task=ReachConfig(num_envs=8), algo=algo, run_dir=str(run), progress=False, tensorboard=False,
                      max_iterations=1)
    runner = OffPolicyRunner(cfg, run, env=PointReach(ReachConfig(num_envs=8), seed=0))
    runner.learn()
    out = tmp_path / "from_ckpt.hdf5"
    assert main(["task=reach", f"teacher={run}", "episodes=4", "num_envs=4", f"out={out}"]) == 0
    episodes, env_args = read_demos(out)
    assert len(episodes) == 4 and env_args["teacher"] == str(run)
    # the recorded actions are the checkpoint's deterministic actions (no noise was asked for)
    ep = episodes[0]
    assert torch.allclose(ep["actions"], runner.algo.policy.act_inference(ep["obs"]), atol=1e-6)
