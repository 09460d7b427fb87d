"""FastTD3: a short run on PointReach (dense reward) improves; exploration noise, checkpoint state, eval."""

import pytest
import torch

from robotrl.algos.fasttd3 import FastTD3, FastTD3Config
from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.policies.frozen import eval_module
from robotrl.runners.off_policy import evaluate_success


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _td3(num_envs=32, **kw):
    # PointReach dense returns lie in about [-60, 1]; the support covers them
    cfg = FastTD3Config(batch_size=256, utd=1.0, learning_starts=1000, actor_hidden=[64, 64],
                        critic_hidden=[128, 128], num_atoms=51, v_min=-60.0, v_max=10.0, **kw)
    return FastTD3(4, 2, cfg, num_envs, "cpu", seed=0)


def test_short_fasttd3_run_on_reach_raises_return_and_success():
    torch.manual_seed(0)
    env = PointReach(ReachConfig(num_envs=32, reward="dense"), seed=0)
    ev = PointReach(ReachConfig(num_envs=128, reward="dense"), seed=3)
    algo = _td3()
    act = lambda o: algo.policy.act_inference(o["policy"])  # noqa: E731
    before = evaluate_success(ev, act)
    obs = env.reset()
    for _ in range(1200):
        action = algo.act(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        algo.process_step(obs, reward, terminated, truncated, info)
        if algo.ready():
            algo.update(obs)
    after = evaluate_success(ev, act)
    assert algo.num_updates == 1200 - 1000 // 32  # utd 1 once 1000 transitions are in
    assert after["return"] > before["return"] + 10.0, (before, after)
    assert after["success"] > 0.5 > before["success"]


def test_exploration_std_is_redrawn_only_for_worlds_whose_episode_ended():
    algo = _td3(num_envs=6, noise_std_min=0.05, noise_std_max=0.3)
    std = algo.noise_std.clone()
    assert ((std >= 0.05) & (std <= 0.3)).all() and std.unique().numel() == 6
    obs = {"policy": torch.zeros(6, 4)}
    algo.act(obs)
    terminated = torch.tensor([True, False, False, False, False, False])
    truncated = torch.tensor([False, False, False, True, False, False])
    algo.process_step(obs, torch.zeros(6), terminated, truncated, {"final_obs": obs})
    changed = algo.noise_std != std
    assert changed.tolist() == [True, False, False, True, False, False]
    assert ((algo.noise_std >= 0.05) & (algo.noise_std <= 0.3)).all()


def test_actions_are_uniform_before_learning_starts_then_actor_plus_per_world_noise():
    algo = _td3(num_envs=4, noise_std_min=0.0, noise_std_max=0.0)
    obs = {"policy": torch.randn(4, 4)}
    random_action = algo.act(obs)
    assert not torch.allclose(random_action, algo.policy.act_inference(obs["policy"]))
    algo.replay.add(obs["policy"], random_action, torch.zeros(4), obs["policy"], torch.zeros(4, dtype=torch.bool),
                    torch.zeros(4, dtype=torch.bool))
    algo.cfg.learning_starts = 4  # now past learning_starts: zero noise std gives the actor's action
    assert torch.equal(algo.act(obs), algo.policy.act_inference(obs["policy"]))


def test_update_reports_critic_and_delayed_actor_losses():
    algo = _td3(num_envs=4, actor_delay=2)
    algo.cfg.learning_starts = 16
    obs = {"policy": torch.randn(4, 4)}
    for _ in range(8):
        algo.act(obs)
        algo.process_step(obs, torch.randn(4), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool),
                          {"final_obs": obs})
    first = algo.gradient_step()
    second = algo.gradient_step()
    assert "loss/actor" not in first and "loss/actor" in second  # one actor step per two critic steps
    assert first["loss/critic"] > 0


def test_bad_noise_range_names_the_fields():
    with pytest.raises(ValueError, match="noise_std_min"):
        _td3(noise_std_min=0.5, noise_std_max=0.1)


def test_state_round_trip_and_checkpoint_actor_acts_the_same():
    a, b = _td3(num_envs=4), _td3(num_envs=4)
    torch.nn.init.normal_(a.policy.net[0].weight)
    a.noise_std.fill_(0.123)
    tensors = a.state_tensors()
    b.load_state_tensors(tensors, {"algo_state": a.state_meta()})
    obs = torch.randn(8, 4)
    assert torch.equal(a.policy.act_inference(obs), b.policy.act_inference(obs))
    assert torch.equal(b.noise_std, torch.full((4,), 0.123))
    net = eval_module(tensors, {"policy": a.policy_meta()})  # how robotrl eval / export rebuild the actor
    assert torch.equal(net.act_inference(obs), a.policy.act_inference(obs))
    assert torch.equal(net(obs), a.policy.act_inference(obs))
