"""Replay buffer: batched insertion, n-step sampling across terminations/time-outs, ring wrap,
mixed demo/online sampling ratio."""

import pytest
import torch

from robotrl.storage.replay import MixedSampler, ReplayBuffer

G = 0.9


def _fill(buf, rewards, terminated, truncated):
    """rewards etc. are [T][W] lists; obs of world w at step t is 10*t + w, next_obs 10*t + w + 1000."""
    W = buf.num_worlds
    for t, (r, te, tr) in enumerate(zip(rewards, terminated, truncated, strict=True)):
        obs = torch.tensor([[10.0 * t + w] for w in range(W)])
        buf.add(
            obs,
            torch.zeros(W, 1),
            torch.tensor(r, dtype=torch.float32),
            obs + 1000.0,
            torch.tensor(te),
            torch.tensor(tr),
        )


def test_batched_insert_and_nstep_gather_hand_worked():
    buf = ReplayBuffer(capacity=8, num_worlds=2, obs_dim=1, action_dim=1)
    # world 0: terminates after t=1. world 1: times out after t=0.
    _fill(
        buf,
        rewards=[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]],
        terminated=[[False, False], [True, False], [False, False], [False, False]],
        truncated=[[False, True], [False, False], [False, False], [False, False]],
    )
    assert len(buf) == 8
    b = buf.gather(torch.tensor([0, 0, 2, 3]), torch.tensor([0, 1, 0, 1]), n_step=3, gamma=G)
    # (t0,w0): 1 + 0.9*2 = 2.8, terminated -> discount 0
    # (t0,w1): time-out at t0: 1, bootstrap 0.9 from next_obs of t0 = 1001
    # (t2,w0): 3 + 0.9*4 = 6.6, only 2 steps written -> discount 0.81, next_obs of t3 = 1030
    # (t3,w1): 4, only 1 step written -> discount 0.9, next_obs of t3 = 1031
    assert b["nstep_return"].tolist() == pytest.approx([2.8, 1.0, 6.6, 4.0])
    assert b["discount"].tolist() == pytest.approx([0.0, 0.9, 0.81, 0.9])
    assert b["next_obs"][:, 0].tolist() == [1010.0, 1001.0, 1030.0, 1031.0]
    assert b["obs"][:, 0].tolist() == [0.0, 1.0, 20.0, 31.0]


def test_truncated_and_terminated_flag_kept_apart():
    buf = ReplayBuffer(4, 1, 1, 1)
    _fill(buf, [[1.0]], [[True]], [[True]])  # both set: a termination wins
    b = buf.gather(torch.tensor([0]), torch.tensor([0]), 1, G)
    assert b["terminated"].item() and not b["truncated"].item()
    assert b["discount"].item() == 0.0


def test_ring_wraps_and_nstep_does_not_cross_the_write_head():
    buf = ReplayBuffer(capacity=3, num_worlds=1, obs_dim=1, action_dim=1)
    _fill(buf, [[1.0], [2.0], [3.0], [4.0], [5.0]], [[False]] * 5, [[False]] * 5)
    # slots hold steps 3, 4, 2 (slot = step % 3); newest is step 4 in slot 1
    assert buf.size == 3 and buf.ptr == 2
    assert sorted(buf.obs[:, 0, 0].tolist()) == [20.0, 30.0, 40.0]
    b = buf.gather(torch.tensor([2]), torch.tensor([0]), n_step=5, gamma=G)  # step 2 -> 3 -> 4, then stop
    assert b["nstep_return"].item() == pytest.approx(3 + 0.9 * 4 + 0.81 * 5)
    assert b["discount"].item() == pytest.approx(0.729)
    assert b["next_obs"].item() == 1040.0
    # sampling only ever starts at stored steps
    s = buf.sample(256, gen=torch.Generator().manual_seed(0))
    assert set(s["obs"][:, 0].tolist()) <= {20.0, 30.0, 40.0}


def test_add_sequence_matches_add():
    a = ReplayBuffer(10, 1, 1, 1)
    b = ReplayBuffer(10, 1, 1, 1)
    _fill(a, [[1.0], [2.0], [3.0]], [[False], [False], [True]], [[False]] * 3)
    obs = torch.tensor([[[0.0]], [[10.0]], [[20.0]]])
    b.add_sequence(
        obs,
        torch.zeros(3, 1, 1),
        torch.tensor([[1.0], [2.0], [3.0]]),
        obs + 1000,
        torch.tensor([[False], [False], [True]]),
        torch.zeros(3, 1, dtype=torch.bool),
    )
    for name in ("obs", "next_obs", "reward", "terminated", "truncated"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert (a.ptr, a.size) == (b.ptr, b.size)


def test_memory_per_transition_is_stated():
    buf = ReplayBuffer(2, 2, obs_dim=70, action_dim=17)
    assert buf.bytes_per_transition == 4 * (2 * 70 + 17 + 1) + 2
    stored = sum(
        getattr(buf, n).element_size() * getattr(buf, n).nelement()
        for n in ("obs", "next_obs", "action", "reward", "terminated", "truncated")
    )
    assert stored == buf.bytes_per_transition * buf.capacity * buf.num_worlds


def test_bad_shapes_name_the_expected_ones():
    buf = ReplayBuffer(2, 4, 3, 2)
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        buf.add(
            torch.zeros(3, 3),
            torch.zeros(3, 2),
            torch.zeros(3),
            torch.zeros(3, 3),
            torch.zeros(3, dtype=torch.bool),
            torch.zeros(3, dtype=torch.bool),
        )


@pytest.mark.parametrize("ratio,batch", [(0.5, 256), (0.25, 100), (0.0, 64), (1.0, 64)])
def test_mixed_sampler_keeps_its_ratio(ratio, batch):
    online = ReplayBuffer(50, 4, 1, 1)
    demos = ReplayBuffer(50, 1, 1, 1)
    for _ in range(50):
        online.add(
            torch.zeros(4, 1),
            torch.zeros(4, 1),
            torch.zeros(4),
            torch.zeros(4, 1),
            torch.zeros(4, dtype=torch.bool),
            torch.zeros(4, dtype=torch.bool),
        )
        demos.add(
            torch.ones(1, 1),
            torch.zeros(1, 1),
            torch.zeros(1),
            torch.ones(1, 1),
            torch.zeros(1, dtype=torch.bool),
            torch.zeros(1, dtype=torch.bool),
        )
    sampler = MixedSampler(online, demos, ratio)
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        b = sampler.sample(batch, n_step=3, gamma=G, gen=gen)
        n_demo = int(b["is_demo"].sum())
        assert n_demo == round(ratio * batch)
        # rows really come from the buffer they are tagged with (demo obs are 1, online 0)
        assert torch.equal(b["obs"][:, 0] == 1.0, b["is_demo"])
        assert b["obs"].shape == (batch, 1)


def test_mixed_sampler_without_demos_is_all_online():
    online = ReplayBuffer(5, 2, 1, 1)
    online.add(
        torch.zeros(2, 1),
        torch.zeros(2, 1),
        torch.zeros(2),
        torch.zeros(2, 1),
        torch.zeros(2, dtype=torch.bool),
        torch.zeros(2, dtype=torch.bool),
    )
    b = MixedSampler(online, None, 0.5).sample(32)
    assert not b["is_demo"].any()
    with pytest.raises(ValueError, match="ratio"):
        MixedSampler(online, None, 1.5)
