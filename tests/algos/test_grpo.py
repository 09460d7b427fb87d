"""GRPO/PPO pieces: same-state groups through the VecEnv, rollouts, updates that follow the advantage."""

import pytest
import torch
from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig

from robotrl.algos import grpo as G
from robotrl.envs.task_env import make_env
from robotrl.policies.vla import VLA, VLAConfig
from robotrl.sim.backend import SimConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _env(n=8, seed=0):
    return make_env(ToolUseLanguageConfig(), SimConfig(num_envs=n, nthread=1), seed=seed, image_size=(32, 32))


def _tiny(env):
    torch.manual_seed(0)
    m = VLA(VLAConfig(vision="tiny", image_size=32, text_dim=16, d_model=32, layers=1, heads=2, num_bins=5), 7, 4)
    m.set_instructions(torch.randn(len(env.instructions), 16, generator=torch.Generator().manual_seed(1)))
    return m


def test_reset_groups_starts_every_rollout_of_a_group_from_one_state():
    env = _env(8)
    obs = env.reset_groups(4)
    q = env.task.qpos
    for g in (0, 4):
        assert torch.equal(q[g:g + 4], q[g].expand(4, -1))
        assert torch.equal(obs["image"][g:g + 4], obs["image"][g].expand(4, -1, -1, -1))
        assert (obs["instruction"][g:g + 4] == obs["instruction"][g]).all()
    assert not torch.equal(q[0], q[4])  # two task instances differ
    # identical actions keep a group identical; different actions separate it
    action = torch.zeros(8, 4)
    action[1, 0] = 1.0
    for _ in range(3):
        obs, *_ = env.step(action)
    assert torch.equal(q[2], q[3]) and not torch.equal(q[0], q[1])


def test_reset_groups_rejects_a_batch_that_does_not_split():
    env = _env(6)
    try:
        env.reset_groups(4)
    except ValueError as err:
        assert "multiple" in str(err)
    else:
        raise AssertionError("no error")


def test_rollout_records_one_episode_per_world_with_a_binary_reward():
    env = _env(4)
    batch = G.rollout(env, _tiny(env), temperature=1.6, group_size=2, gen=torch.Generator().manual_seed(0))
    T = batch["valid"].shape[0]
    assert batch["tokens"].shape == (T, 4, 4) and batch["vision"].shape[:2] == (T, 4)
    assert batch["valid"][0].all() and set(batch["success"].tolist()) <= {0.0, 1.0}
    assert torch.equal(batch["reward"].sum(0), batch["success"])


def _fake_batch(model, T=3, n=4, a=4):
    gen = torch.Generator().manual_seed(0)
    vis = torch.randn(T, n, model.num_vision_tokens, model.vision_channels, generator=gen)
    tokens = torch.randint(0, model.cfg.num_bins, (T, n, a), generator=gen)
    batch = {"vision": vis, "proprio": torch.randn(T, n, 7, generator=gen), "instruction": torch.zeros(T, n).long(),
             "tokens": tokens, "valid": torch.ones(T, n, dtype=torch.bool), "done": torch.zeros(T, n, dtype=torch.bool),
             "success": torch.tensor([1.0, 0.0, 0.0, 0.0]), "value": torch.zeros(T, n)}
    batch["reward"] = torch.zeros(T, n)
    batch["reward"][-1] = batch["success"]
    with torch.no_grad():
        feat = model.features(vis.flatten(0, 1), batch["proprio"].flatten(0, 1), model.instruction_table[[0] * T * n])
        batch["log_prob"] = model.token_log_prob(feat, tokens.flatten(0, 1), 1.6)[0].view(T, n, a)
    return batch


def _sum_logp(model, batch, world):
    with torch.no_grad():
        T = batch["tokens"].shape[0]
        feat = model.features(batch["vision"][:, world], batch["proprio"][:, world], model.instruction_table[[0] * T])
        return model.token_log_prob(feat, batch["tokens"][:, world], 1.6)[0].sum().item()


def test_grpo_update_raises_the_successful_rollouts_tokens_and_lowers_the_failed_ones():
    env = _env(4)
    model = _tiny(env)
    batch = _fake_batch(model)
    cfg = G.GRPOConfig(group_size=4, lr=1e-3, epochs=4, minibatches=1, temperature=1.6)
    before = [_sum_logp(model, batch, w) for w in range(4)]
    opt = torch.optim.Adam(model.trainable_parameters(), lr=cfg.lr)
    metrics = G.grpo_update(model, opt, batch, cfg)
    after = [_sum_logp(model, batch, w) for w in range(4)]
    assert metrics["kept_groups"] == 1.0  # success 1/4 is inside [0.1, 0.9]
    assert after[0] > before[0] and sum(after[1:]) < sum(before[1:])


def test_grpo_update_skips_groups_outside_the_filter():
    env = _env(4)
    model = _tiny(env)
    batch = _fake_batch(model)
    batch["success"] = torch.ones(4)
    params = [p.clone() for p in model.trainable_parameters()]
    metrics = G.grpo_update(model, torch.optim.Adam(model.trainable_parameters(), lr=1e-2), batch,
                            G.GRPOConfig(group_size=4))
    assert metrics["kept_groups"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(params, model.trainable_parameters(), strict=True))


def test_ppo_update_runs_with_action_level_gae_and_fits_the_value():
    env = _env(4)
    model = _tiny(env)
    batch = _fake_batch(model)
    cfg = G.GRPOConfig(method="ppo", lr=1e-3, epochs=20, minibatches=1, value_coef=1.0)
    opt = torch.optim.Adam(model.trainable_parameters(), lr=cfg.lr)
    first = G.ppo_update(model, opt, batch, cfg)
    last = G.ppo_update(model, opt, batch, cfg)
    assert last["loss/value"] < first["loss/value"]
