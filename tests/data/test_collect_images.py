"""VLA demos: images and instructions recorded by collect, written and read back as HDF5 demos."""

import torch

from robotrl.cli import collect_main as main
from robotrl.storage.demos import read_demos


def test_collect_cli_records_images_and_instructions_into_hdf5_demos(tmp_path):
    out = tmp_path / "vla.hdf5"
    assert main(["task=tool_use_language", "teacher=scripted", "image_size=32", "episodes=4", "num_envs=4",
                 f"out={out}"]) == 0
    episodes, env_args = read_demos(out)
    ep = episodes[0]
    T = ep["actions"].shape[0]
    assert ep["extra_obs"]["image"].shape == (T, 32, 32, 3) and ep["extra_obs"]["image"].dtype == torch.uint8
    assert ep["extra_obs"]["instruction"].shape == (T,) and ep["extra_obs"]["instruction"].dtype == torch.int64
    assert (ep["extra_obs"]["instruction"] == ep["extra_obs"]["instruction"][0]).all()  # one instruction per episode
    assert env_args["task"] == "tool_use_language" and all(e["success"] for e in episodes)
