"""Replay modes: open loop, teacher forced and closed loop reproduce bags of unperturbed physics."""

import numpy as np
import torch

from robotrl.twin.episode import load_episode
from robotrl.twin.physics import Physics
from robotrl.twin.replay import Twin


def test_open_loop_reproduces_nominal_bag_to_1e6(nominal_bag):
    ep = load_episode(nominal_bag)
    roll = Twin("humanoid", [ep], nthread=1).open_loop()
    assert np.abs(roll.q[0] - ep.q).max() < 1e-6
    assert np.abs(roll.dq[0] - ep.dq).max() < 1e-6
    assert np.abs(roll.base_pos[0] - ep.base_pos).max() < 1e-6
    assert np.abs(roll.tau[0, 1:] - ep.tau[1:]).max() < 1e-6


def test_teacher_forced_torque_error_shows_the_actuator_gain_gap(perturbed_bag):
    """The bag's effort is the applied joint torque, so a weaker motor (gain 0.85) shows up in tau even when
    teacher forcing keeps q on the record: 15% of each torque, and nothing under the true physics."""
    bag, truth = perturbed_bag
    ep = load_episode(bag)
    roll = Twin("humanoid", [ep], [Physics(), truth], nthread=1).teacher_forced(1)
    nominal, true = roll.tau[0, 1:], roll.tau[1, 1:]
    assert np.abs(true - ep.tau[1:]).max() < 1e-6
    moving = np.abs(nominal) > 1e-3
    assert np.allclose(ep.tau[1:][moving] / nominal[moving], truth.actuator_gain)


def test_candidates_are_parallel_worlds_and_only_the_truth_reproduces(perturbed_bag):
    bag, truth = perturbed_bag
    ep = load_episode(bag)
    twin = Twin("humanoid", [ep, ep], [Physics(), truth], nthread=1)
    roll = twin.open_loop()
    assert roll.q.shape[0] == 4 and list(roll.candidate) == [0, 1, 0, 1] and list(roll.episode) == [0, 0, 1, 1]
    err = np.abs(roll.q - ep.q[None]).max(axis=(1, 2))
    assert err[1] < 1e-6 and err[3] < 1e-6  # the true physics
    assert err[0] > 1e-3 and err[2] > 1e-3  # the nominal model does not


def test_teacher_forcing_bounds_drift_below_open_loop(perturbed_bag):
    bag, _ = perturbed_bag
    ep = load_episode(bag)
    twin = Twin("humanoid", [ep], nthread=1)
    open_err = np.abs(twin.open_loop().q[0] - ep.q).max()
    forced = twin.teacher_forced(2).q[0]
    forced_err = np.abs(forced - ep.q).max()
    assert forced_err < 0.5 * open_err
    # one step from a recorded state under the wrong model: a small, not zero, error
    assert 0 < np.abs(forced[3] - ep.q[3]).max() < np.abs(twin.open_loop().q[0, 3:] - ep.q[3:]).max()


def test_closed_loop_policy_reproduces_its_own_bag(tmp_path, humanoid_profile):
    from robotrl.twin.record import record_episode

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(63, 17), torch.nn.Tanh())

    def torch_policy(obs, k):
        return net(obs) * 0.5

    def numpy_policy(obs):
        with torch.no_grad():
            return (net(torch.as_tensor(obs)) * 0.5).numpy()

    bag = record_episode("humanoid", tmp_path, torch_policy, 20, profile=humanoid_profile)
    ep = load_episode(bag)
    roll = Twin("humanoid", [ep], nthread=1).closed_loop(numpy_policy)
    n = int(roll.length[0])
    assert n == ep.num_steps
    assert np.abs(roll.q[0, :n] - ep.q).max() < 1e-6
    # and a different policy does not reproduce it
    other = Twin("humanoid", [ep], nthread=1).closed_loop(lambda o: -numpy_policy(o))
    assert np.abs(other.q[0, :n] - ep.q).max() > 1e-3


def test_arm_twin_rebuilds_the_unreported_tool_from_the_bag(tmp_path):
    """The tool's identity and pose are not in the bag: the twin rebuilds them from the bag's seed."""
    from robotrl.twin.record import make_task_env, record_episode, task_profile

    profile = task_profile(make_task_env("tool_use"), "tool_use_twin")
    acts = (torch.rand(12, 23, generator=torch.Generator().manual_seed(0)) * 2 - 1) * 0.6
    eps = [load_episode(record_episode("tool_use", tmp_path, lambda obs, k: acts[k:k + 1], 10, seed=s,
                                       profile=profile, name=f"seed{s}"), profile) for s in (0, 1)]
    roll = Twin("tool_use", eps, nthread=1).open_loop()
    for w in range(2):
        assert np.abs(roll.q[w] - eps[w].q).max() < 1e-6


def test_open_loop_reproduces_the_pushed_tools_recorded_path_to_1e6(tool_push_bags, tool_profile):
    nominal, _, _ = tool_push_bags
    ep = load_episode(nominal, tool_profile)
    assert np.linalg.norm(ep.object_pose[-1, :3] - ep.object_pose[0, :3]) > 0.03  # the push moved the tool
    roll = Twin("tool_use", [ep], nthread=1).open_loop()
    assert roll.object_pos is not None and roll.object_pos.shape == (1, ep.num_steps, 3)
    assert np.abs(roll.object_pos[0] - ep.object_pose[:, :3]).max() < 1e-6


def test_a_heavier_slicker_tool_moves_differently_and_only_its_physics_replays_it(tool_push_bags, tool_profile):
    _, perturbed, truth = tool_push_bags
    ep = load_episode(perturbed, tool_profile)
    roll = Twin("tool_use", [ep], [Physics(), truth], nthread=1).open_loop()
    err = [np.abs(roll.object_pos[w] - ep.object_pose[:, :3]).max() for w in range(2)]
    assert err[0] > 5e-3 and err[1] < 1e-6
