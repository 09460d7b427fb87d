"""Image and instruction observations through the VecEnv, and the instruction-embedding cache."""

import pytest
import torch
from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig

from robotrl.envs import instructions as I
from robotrl.envs.task_env import make_env
from robotrl.sim.backend import SimConfig


@pytest.fixture(scope="module")
def env():
    return make_env(ToolUseLanguageConfig(), SimConfig(num_envs=4, nthread=1), seed=0, image_size=(32, 48))


def test_image_and_instruction_obs_have_shapes_dtypes_and_one_device(env):
    obs = env.reset()
    assert obs["image"].shape == (4, 32, 48, 3) and obs["image"].dtype == torch.uint8
    assert obs["instruction"].shape == (4,) and obs["instruction"].dtype == torch.int64
    assert int(obs["instruction"].max()) < len(env.instructions)
    assert {v.device for v in obs.values()} == {env.device}
    obs, _, _, _, info = env.step(torch.zeros(4, env.num_actions))
    assert obs["image"].shape == (4, 32, 48, 3) and info["final_obs"]["image"].dtype == torch.uint8
    assert obs["image"].float().std() > 5.0  # a rendered scene, not a blank frame
    assert "image" not in env.obs_dims and "instruction" not in env.obs_dims


def test_image_changes_when_the_gripper_moves(env):
    first = env.reset()["image"].clone()
    for _ in range(5):
        obs, *_ = env.step(torch.tensor([[1.0, 0.0, -1.0, -1.0]]).expand(4, -1))
    assert (obs["image"].int() - first.int()).abs().sum() > 0


def test_autoreset_rerenders_only_reset_worlds(env):
    env.reset()
    for _ in range(env.max_episode_length - 1):
        env.step(torch.zeros(4, env.num_actions))
    obs, _, term, trunc, info = env.step(torch.zeros(4, env.num_actions))
    assert bool((term | trunc).all())  # every world timed out this step and was reset
    fresh = env._render(torch.arange(4))
    assert torch.equal(obs["image"], fresh)


def test_no_image_key_without_image_size():
    env = make_env(ToolUseLanguageConfig(), SimConfig(num_envs=2, nthread=1))
    assert "image" not in env.reset()


class CountingEncoder:
    name = "counting"

    def __init__(self):
        self.calls = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return torch.stack([torch.tensor([float(len(t)), float(i)]) for i, t in enumerate(texts)])


def test_instruction_embeddings_are_computed_once_per_text(tmp_path):
    I.clear_cache()
    enc = CountingEncoder()
    a = I.cached_embeddings(enc, ["lift the hammer", "take the eraser", "lift the hammer"])
    b = I.cached_embeddings(enc, ["take the eraser", "lift the hammer"])
    assert enc.calls == [["lift the hammer", "take the eraser"]]
    assert torch.equal(a[0], a[2]) and torch.equal(b[0], a[1])
    # the disk cache serves a fresh process (memory cleared) without calling the encoder
    I.clear_cache()
    I.cached_embeddings(enc, ["pick up the spatula"], cache_dir=str(tmp_path))
    I.clear_cache()
    again = I.cached_embeddings(enc, ["pick up the spatula"], cache_dir=str(tmp_path))
    assert len(enc.calls) == 2 and again.shape == (1, 2)


def test_env_instruction_embeddings_cover_its_instruction_list(env):
    I.clear_cache()
    enc = CountingEncoder()
    table = env.instruction_embeddings(enc)
    env.instruction_embeddings(enc)
    assert table.shape == (len(env.instructions), 2) and len(enc.calls) == 1
