"""robotrl collect: scripted, noisy and checkpoint teachers to robomimic-style HDF5."""

import h5py
import pytest
import torch

from robotrl.cli import collect_main as main
from robotrl.data.collect import collect, parse_args
from robotrl.envs.base import VecEnv
from robotrl.envs.reach import PointReach, ReachConfig


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


class _FixedLengths(VecEnv):
    """World ``i``'s episodes all last ``lengths[i]`` steps and succeed when ``i`` is odd.

    The observation is ``[world, episode index, step]``.
    """

    def __init__(self, lengths):
        self.lengths = torch.tensor(lengths)
        self.num_envs, self.num_actions = len(lengths), 1
        self.obs_dims, self.max_episode_length = {"policy": 3}, int(self.lengths.max())
        self.device, self.step_dt = torch.device("cpu"), 0.1
        self.episode = torch.zeros(self.num_envs, dtype=torch.long)
        self.t = torch.zeros(self.num_envs, dtype=torch.long)

    def _obs(self):
        return {"policy": torch.stack([torch.arange(self.num_envs), self.episode, self.t], 1).float()}

    def reset(self):
        self.episode.zero_(), self.t.zero_()
        return self._obs()

    def step(self, action):
        self.t += 1
        final = self._obs()
        terminated = self.t >= self.lengths
        truncated = torch.zeros_like(terminated)
        ids = terminated.nonzero().squeeze(1)
        info = {"final_obs": final, "episode": {"success": (ids % 2).float(), "length": self.t[ids].float()}}
        self.episode[ids] += 1
        self.t[ids] = 0
        return self._obs(), torch.zeros(self.num_envs), terminated, truncated, info


class _LengthLog(VecEnv):
    """Passes through to ``env`` and logs, per world, the length of every episode it finishes."""

    def __init__(self, env):
        self.env = env
        for name in ("num_envs", "num_actions", "obs_dims", "max_episode_length", "device", "step_dt"):
            setattr(self, name, getattr(env, name))
        self.lengths = [[] for _ in range(env.num_envs)]

    def reset(self):
        return self.env.reset()

    def step(self, action):
        out = self.env.step(action)
        done = (out[2] | out[3]).nonzero().squeeze(1).tolist()
        for j, i in enumerate(done):
            self.lengths[i].append(int(out[4]["episode"]["length"][j]))
        return out


def test_every_world_contributes_its_first_episodes_short_and_long_alike():
    # episodes of world 0 last 1 step, world 3's 25: in the first 8 episodes to *finish*, 7 are
    # world 0's (steps 1..7) and one is world 1's (step 4). Unbiased: 2 per world, lengths
    # (1, 1, 4, 4, 10, 10, 25, 25), mean 80 / 8 = 10.
    env = _FixedLengths([1, 4, 10, 25])
    eps = collect(env, lambda o: torch.zeros(4, 1), episodes=8)
    got = sorted((int(e["obs"][0, 0]), int(e["obs"][0, 1])) for e in eps)
    assert got == [(w, k) for w in range(4) for k in range(2)]
    for e in eps:
        world = int(e["obs"][0, 0])
        assert e["actions"].shape[0] == [1, 4, 10, 25][world]
        assert e["obs"][:, 2].tolist() == list(range(e["actions"].shape[0]))  # starts at the episode start
        assert e["success"] == (world % 2 == 1)  # the env's per-finished-episode info, mapped to its world
    assert sum(e["actions"].shape[0] for e in eps) / len(eps) == 10.0
    # 6 of 8 (not a multiple of the worlds): every world's first episode, then worlds 0 and 1's second
    six = collect(_FixedLengths([1, 4, 10, 25]), lambda o: torch.zeros(4, 1), episodes=6)
    assert sorted(e["actions"].shape[0] for e in six) == [1, 1, 4, 4, 10, 25]


def test_noisy_teacher_succeeds_less_than_the_clean_one():
    def success(noise):
        env = PointReach(ReachConfig(num_envs=8, radius=0.02, max_episode_length=30), seed=0)
        eps = collect(env, lambda o: env.scripted_action(), episodes=32, noise=noise, seed=1)
        return sum(e["success"] for e in eps) / len(eps)

    assert success(0.0) == 1.0 and success(1.0) < 0.9


def test_noisy_reach_episodes_are_each_worlds_first_not_the_first_to_finish():
    env = _LengthLog(PointReach(ReachConfig(num_envs=16, radius=0.02, max_episode_length=60), seed=0))
    eps = collect(env, lambda o: env.env.scripted_action(), episodes=16, noise=0.5, seed=1)
    got = sorted(e["actions"].shape[0] for e in eps)
    assert got == sorted(n for world in env.lengths for n in world[:1])  # lengths the env itself counted
    # the check can tell: the first 16 episodes to finish (fast worlds' second and third ones
    # included) are much shorter on average (14.4 against 24.9 steps with these seeds)
    ends = sorted((sum(world[: k + 1]), n) for world in env.lengths for k, n in enumerate(world))
    first_finished = [n for _, n in ends[:16]]
    assert sum(first_finished) / 16 < sum(got) / 16 - 5.0


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
