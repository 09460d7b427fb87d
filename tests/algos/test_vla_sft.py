"""VLA SFT: a short behaviour-cloning run whose loss falls; the shuffled-instruction control; DAgger rows."""

import pytest
import torch
from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig

from robotrl.algos import vla_sft as S
from robotrl.data.collect import collect
from robotrl.envs.task_env import make_env
from robotrl.policies.vla import VLA, VLAConfig
from robotrl.sim.backend import SimConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _env(n=8, seed=0):
    return make_env(ToolUseLanguageConfig(), SimConfig(num_envs=n, nthread=1), seed=seed, image_size=(32, 32))


def _tiny(env, head="tokens"):
    torch.manual_seed(0)
    m = VLA(VLAConfig(vision="tiny", image_size=32, text_dim=16, d_model=32, layers=1, heads=2, head=head), 7, 4)
    m.set_instructions(torch.randn(len(env.instructions), 16, generator=torch.Generator().manual_seed(1)))
    return m


def test_short_sft_run_lowers_the_bc_loss():
    env = _env()
    eps = collect(env, lambda o: env.task.scripted_action(), episodes=16, noise=0.05,
                  extra_obs=("image", "instruction"))
    assert eps[0]["extra_obs"]["image"].dtype == torch.uint8
    for head in ("tokens", "chunk"):
        model = _tiny(env, head)
        data = S.build_dataset(model, eps)
        losses = S.train_bc(model, data, steps=150, batch_size=64, lr=1e-3, gen=torch.Generator().manual_seed(0))
        first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
        assert last < 0.7 * first, (head, first, last)


def test_chunk_targets_repeat_the_last_action():
    a = torch.arange(3.0)[:, None]
    assert S.chunk_targets(a, 2).squeeze(-1).tolist() == [[0.0, 1.0], [1.0, 2.0], [2.0, 2.0]]


class InstructionFollower:
    """Stands in for a VLA that uses the language: fetches the tool its *seen* instruction names."""

    def __init__(self, env):
        self.env = env

    def act(self, obs, temperature=1.0, deterministic=True, generator=None):
        target = self.env.task._instr_target[obs["instruction"]]
        return {"action": self.env.task.scripted_action(target)}


def test_shuffled_instruction_control_drops_a_language_following_policy_to_chance():
    env = _env(16, seed=3)
    follower = InstructionFollower(env)
    gen = torch.Generator().manual_seed(0)
    normal = S.evaluate(env, follower, 64, gen=gen)
    shuffled = S.evaluate(env, follower, 64, shuffle_instructions=True, gen=gen)
    chance = 1 / len(env.task.specs)
    assert normal["success"] > 0.9
    assert abs(shuffled["success"] - chance) < 0.15 and shuffled["wrong_tool"] > 0.5


def test_dagger_rows_are_labelled_by_the_teacher():
    env = _env(4)
    model = _tiny(env)
    rows = S.dagger_rows(env, model, lambda o: env.task.scripted_action(), steps=5, beta=0.0)
    assert rows["vision"].shape[0] == 20 and rows["action"].shape == (20, 4)
    assert rows["action"][:, 3].abs().eq(1).all()  # the teacher's grip command, not the student's bins


def test_noisy_collection_labels_rows_with_the_teachers_clean_actions(tmp_path):
    from robotrl.storage.demos import read_demos, write_demos

    env = _env(4)
    eps = collect(env, lambda o: env.task.scripted_action(), episodes=4, noise=0.3,
                  extra_obs=("image", "instruction"))
    write_demos(tmp_path / "d.hdf5", eps, {})
    eps, _ = read_demos(tmp_path / "d.hdf5")
    applied, clean = eps[0]["actions"], eps[0]["teacher_actions"]
    assert clean[:, 3].abs().eq(1).all() and not applied[:, 3].abs().eq(1).all()  # grip is exactly +-1 before noise
    assert (applied - clean).abs().max() > 0.05
    data = S.build_dataset(_tiny(env), eps)
    assert torch.equal(data["action"], torch.cat([ep["teacher_actions"] for ep in eps]))
    del eps[0]["teacher_actions"]  # demos without clean labels fall back to the applied actions
    assert torch.equal(S.demo_labels(eps[0]), eps[0]["actions"])


def test_evaluate_reports_wrong_tool_only_for_tasks_that_count_it():
    from robotrl.tasks.driving.language.config import DrivingLanguageConfig

    tool_env = _env(n=4)
    tool = S.evaluate(tool_env, None, 4, policy=lambda o: tool_env.task.scripted_action())
    drive_env = make_env(DrivingLanguageConfig(episode_length_s=2.0), SimConfig(num_envs=4, nthread=1), seed=0)
    drive = S.evaluate(drive_env, None, 4, policy=lambda o: drive_env.task.scripted_action())
    assert tool["wrong_tool"] == 0.0 and tool["episodes"] == 4
    assert "wrong_tool" not in drive and drive["episodes"] == 4
