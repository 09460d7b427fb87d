"""Robomimic-style HDF5 demonstrations: round trip, plain-h5py layout, demo replay buffer."""

import json

import h5py
import numpy as np
import pytest
import torch

from robotrl.storage.demos import demos_to_buffer, read_demos, write_demos


def _episodes():
    g = torch.Generator().manual_seed(0)
    eps = []
    for T, success in ((3, True), (5, False)):
        eps.append(
            {
                "obs": torch.randn(T, 4, generator=g),
                "next_obs": torch.randn(T, 4, generator=g),
                "actions": torch.rand(T, 2, generator=g) * 2 - 1,
                "rewards": torch.randn(T, generator=g),
                "terminated": torch.tensor([False] * (T - 1) + [success]),
                "success": success,
            }
        )
    return eps


def test_round_trip_and_plain_h5py_layout(tmp_path):
    path = tmp_path / "demos.hdf5"
    eps = _episodes()
    write_demos(path, eps, {"task": "reach", "teacher": "scripted"})
    back, env_args = read_demos(path)
    assert env_args == {"task": "reach", "teacher": "scripted"}
    assert len(back) == 2
    for a, b in zip(eps, back, strict=True):
        for key in ("obs", "next_obs", "actions", "rewards", "terminated"):
            assert torch.equal(a[key].to(b[key].dtype), b[key]), key
        assert a["success"] == b["success"]
    # plain h5py, robomimic keys
    with h5py.File(path, "r") as f:
        assert f["data"].attrs["total"] == 8
        assert json.loads(f["data"].attrs["env_args"])["task"] == "reach"
        d0 = f["data/demo_0"]
        assert d0.attrs["num_samples"] == 3 and bool(d0.attrs["success"])
        assert d0["obs/policy"].shape == (3, 4) and d0["next_obs/policy"].shape == (3, 4)
        assert d0["actions"].shape == (3, 2) and d0["actions"].dtype == np.float32
        np.testing.assert_array_equal(d0["dones"][()], [0, 0, 1])
        np.testing.assert_allclose(f["data/demo_1/rewards"][()], eps[1]["rewards"].numpy())


def test_success_only_filter(tmp_path):
    path = tmp_path / "d.hdf5"
    write_demos(path, _episodes(), {})
    back, _ = read_demos(path, success_only=True)
    assert len(back) == 1 and back[0]["success"]


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="robotrl collect"):
        read_demos(tmp_path / "nope.hdf5")


def test_demo_buffer_sparse_rewards_and_episode_ends():
    eps = _episodes()
    buf = demos_to_buffer(eps, "cpu", sparse_reward=True)
    assert len(buf) == 8
    r = buf.reward[:, 0]
    # success demo: 1 on its last step; failed demo: all zero
    assert r.tolist() == [0, 0, 1, 0, 0, 0, 0, 0]
    # success demo ends terminated (no bootstrap), the failed one truncated (bootstrap)
    assert buf.terminated[:, 0].tolist() == [False, False, True] + [False] * 5
    assert buf.truncated[:, 0].tolist() == [False] * 7 + [True]
    # n-step from the first demo's step 1 stops at its end: 0 + 0.9 * 1, no bootstrap
    b = buf.gather(torch.tensor([1]), torch.tensor([0]), n_step=3, gamma=0.9)
    assert b["nstep_return"].item() == pytest.approx(0.9) and b["discount"].item() == 0.0


def test_demo_buffer_appends_relabelled_base_actions():
    eps = _episodes()
    base = [torch.full((3, 2), 0.5), torch.full((5, 2), -0.5)]
    nxt = [torch.full((3, 2), 0.25), torch.full((5, 2), -0.25)]
    buf = demos_to_buffer(eps, "cpu", True, base, nxt)
    assert buf.obs_dim == 6
    assert buf.obs[:3, 0, 4:].eq(0.5).all() and buf.obs[3:, 0, 4:].eq(-0.5).all()
    assert buf.next_obs[:3, 0, 4:].eq(0.25).all()
    assert torch.equal(buf.obs[:3, 0, :4], eps[0]["obs"])
