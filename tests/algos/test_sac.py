"""SAC: a short run on PointReach (dense reward) improves; networks and checkpoint state."""

import pytest
import torch

from robotrl.algos.sac import SAC, SACConfig
from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.policies.offpolicy import QEnsemble
from robotrl.runners.off_policy import evaluate_success


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _sac(num_envs=32, **kw):
    cfg = SACConfig(
        batch_size=256,
        utd=1.0,
        learning_starts=1000,
        actor_hidden=[64, 64],
        critic_hidden=[128, 128],
        init_alpha=0.05,
        **kw,
    )
    return SAC(4, 2, cfg, num_envs, "cpu", seed=0)


def test_short_sac_run_on_reach_improves():
    torch.manual_seed(0)
    env = PointReach(ReachConfig(num_envs=32, reward="dense"), seed=0)
    ev = PointReach(ReachConfig(num_envs=128, reward="dense"), seed=3)
    algo = _sac()
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


def test_random_actions_until_learning_starts_then_policy():
    algo = _sac(num_envs=4)
    obs = {"policy": torch.zeros(4, 4)}
    a = algo.act(obs)
    assert a.abs().max() <= 1 and not algo.ready()
    info = {"final_obs": obs}
    for _ in range(260):
        algo.act(obs)
        algo.process_step(
            obs, torch.zeros(4), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool), info
        )
    assert algo.ready()
    stats = algo.update(obs)
    assert {"loss/critic", "loss/actor", "alpha", "entropy"} <= set(stats)


def test_layer_norm_q_ensemble_heads_are_independent():
    q = QEnsemble(3, 1, [16, 16], heads=2)
    assert sum(isinstance(m, torch.nn.Module) and "LayerNorm" in type(m).__name__ for m in q.modules()) == 2
    out = q(torch.randn(5, 3), torch.randn(5, 1))
    assert out.shape == (2, 5)
    assert not torch.allclose(out[0], out[1])


def test_state_round_trip():
    a, b = _sac(num_envs=4), _sac(num_envs=4)
    with torch.no_grad():
        a.log_alpha.fill_(-1.234)
    b.load_state_tensors(a.state_tensors(), {"algo_state": a.state_meta()})
    obs = torch.randn(8, 4)
    assert torch.equal(a.policy.act_inference(obs), b.policy.act_inference(obs))
    assert b.log_alpha.item() == pytest.approx(-1.234)
