"""Chunked behaviour cloning: chunk targets, temporal ensembling and open-loop execution, learning."""

import pytest
import torch

from robotrl.algos.bc import BC, BCConfig, chunk_targets
from robotrl.data.collect import collect
from robotrl.envs.reach import PointReach, ReachConfig
from robotrl.policies.frozen import ChunkExecutor
from robotrl.policies.offpolicy import ChunkPolicy
from robotrl.runners.off_policy import evaluate_success


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_chunk_targets_pad_with_last_action_and_mask():
    actions = torch.tensor([[1.0], [2.0], [3.0]])
    y, m = chunk_targets(actions, 2)
    assert y[:, :, 0].tolist() == [[1, 2], [2, 3], [3, 3]]
    assert m.tolist() == [[True, True], [True, True], [True, False]]


class _Scripted(ChunkPolicy):
    """Predicts the chunk [c, c+1, c+2] where c is the observation: easy to hand-check execution."""

    def __init__(self):
        super().__init__(1, 1, 3, [4])

    def forward(self, obs):
        return (obs[:, :1, None] + torch.arange(3.0)[None, :, None]).reshape(-1, 3, 1)


def test_open_loop_executes_the_chunk_then_replans():
    ex = ChunkExecutor(_Scripted(), 1, "open_loop")
    outs = [ex.act(torch.tensor([[10.0 * t]])).item() for t in range(5)]
    assert outs == [0.0, 1.0, 2.0, 30.0, 31.0]


def test_temporal_ensembling_weights_older_predictions_more():
    m = 0.5
    ex = ChunkExecutor(_Scripted(), 1, "ensemble", decay=m)
    a0 = ex.act(torch.tensor([[0.0]])).item()
    a1 = ex.act(torch.tensor([[10.0]])).item()
    a2 = ex.act(torch.tensor([[20.0]])).item()
    assert a0 == 0.0
    # step 1: prediction from t=0 says 1 (weight 1), from t=1 says 10 (weight e^-0.5)
    w = torch.exp(torch.tensor(-m)).item()
    assert a1 == pytest.approx((1 + w * 10) / (1 + w))
    # step 2: 2 (w 1), 11 (w e^-0.5), 20 (w e^-1)
    assert a2 == pytest.approx((2 + w * 11 + w * w * 20) / (1 + w + w * w))
    ex.reset(torch.tensor([0]))
    assert ex.act(torch.tensor([[5.0]])).item() == 5.0


def test_bc_on_scripted_reach_demos_learns():
    torch.manual_seed(0)
    env = PointReach(ReachConfig(num_envs=16, radius=0.05), seed=0)
    episodes = collect(env, lambda o: env.scripted_action(), episodes=32)
    bc = BC(episodes, BCConfig(chunk=4, hidden=[64, 64], updates_per_iteration=100), "cpu", num_envs=64)
    ev = PointReach(ReachConfig(num_envs=64, radius=0.05), seed=1)
    before = evaluate_success(ev, bc.act, reset=bc.executor.reset)["success"]
    first = bc.update()["loss/bc"]
    for _ in range(5):
        last = bc.update()["loss/bc"]
    assert last < 0.5 * first
    after = evaluate_success(ev, bc.act, reset=bc.executor.reset)["success"]
    assert after > 0.7 and after > before + 0.3
