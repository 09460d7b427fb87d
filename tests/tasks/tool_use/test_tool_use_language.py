"""Language-conditioned tool use: the instruction decides which tool is right."""

import torch
from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig
from robotrl.tasks.tool_use.language.instructions import HELDOUT_TEMPLATES, TRAIN_TEMPLATES, instruction_list

from robotrl.envs.task_env import make_env
from robotrl.sim.backend import SimConfig


def _run(env, target=None, episodes=16):
    env.reset()
    succ, wrong, n = 0.0, 0.0, 0
    while n < episodes:
        obs, _, _, _, info = env.step(env.task.scripted_action(target))
        if "episode" in info:
            succ += info["episode"]["success"].sum().item()
            wrong += info["episode"]["wrong_tool"].sum().item()
            n += info["episode"]["success"].numel()
    return succ / n, wrong / n


def test_heldout_paraphrases_never_share_a_template_with_training():
    assert not set(TRAIN_TEMPLATES) & set(HELDOUT_TEMPLATES)
    texts, target = instruction_list(("hammer", "eraser"), "heldout")
    assert texts[1] == HELDOUT_TEMPLATES[0].format(tool="eraser") and target[:2] == [0, 1]


def test_scripted_teacher_lifts_the_named_tool():
    env = make_env(ToolUseLanguageConfig(), SimConfig(num_envs=8, nthread=1), seed=1)
    success, wrong = _run(env)
    assert success >= 0.95 and wrong == 0.0


def test_lifting_another_tool_is_a_failure():
    env = make_env(ToolUseLanguageConfig(), SimConfig(num_envs=8, nthread=1), seed=2)
    env.reset()
    other = (env.task.target_tool + 1) % len(env.task.specs)
    success, wrong = 0.0, 0.0
    for _ in range(env.max_episode_length):
        _, _, term, _, info = env.step(env.task.scripted_action(other))
        if "episode" in info:
            success += info["episode"]["success"].sum().item()
            wrong += info["episode"]["wrong_tool"].sum().item()
        other = torch.where(env.task.held < 0, (env.task.target_tool + 1) % 4, other)
    assert success == 0.0 and wrong >= 6


def test_held_tool_follows_the_gripper():
    env = make_env(ToolUseLanguageConfig(), SimConfig(num_envs=4, nthread=1), seed=3)
    env.reset()
    t = env.task
    for _ in range(env.max_episode_length):
        env.step(t.scripted_action())
        if bool((t.held >= 0).all()):
            break
    offset = t._tool_pos()[t._arange, t.held] - t._tip_pos()
    env.step(torch.tensor([[0.0, 0.0, 1.0, 1.0]]).expand(4, -1))
    moved = t._tool_pos()[t._arange, t.held] - t._tip_pos()
    assert torch.allclose(offset, moved, atol=0.01)
