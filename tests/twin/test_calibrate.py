"""Calibration with mujoco.sysid recovers a known perturbation from a short bag."""

import sys

import numpy as np
import pytest

from robotrl.twin.episode import load_episode


def test_sysid_recovers_known_perturbation_on_short_bag(perturbed_bag, tmp_path):
    pytest.importorskip("tabulate")  # mujoco[sysid]
    from robotrl.twin.calibrate import calibrate
    from robotrl.twin.physics import load_physics

    bag, truth = perturbed_bag
    ep = load_episode(bag).truncated(15)
    result = calibrate("humanoid", [ep], params=("body_mass", "dof_damping", "actuator_gain"), delays=(0, 1))
    assert result.physics.delay_steps == 0
    assert result.cost_by_delay[0] < 1e-3 * result.cost_by_delay[1]
    for name in ("body_mass", "dof_damping", "actuator_gain"):
        assert getattr(result.physics, name) == pytest.approx(getattr(truth, name), rel=0.02), name
    saved = load_physics(result.save(tmp_path / "calibrated.yaml"))
    assert saved == result.physics


def test_empty_sysid_import_raises_naming_the_extra(monkeypatch):
    import types

    from robotrl.twin import calibrate as cal

    monkeypatch.setitem(sys.modules, "mujoco.sysid", types.ModuleType("mujoco.sysid"))
    with pytest.raises(ImportError, match=r"robotrl\[twin\]"):
        cal.sysid()


def test_unknown_calibration_params_are_named_with_the_valid_ones():
    from robotrl.twin.calibrate import calibrate

    with pytest.raises(ValueError, match=r"unknown \['tool_mass'\].*object_mass"):
        calibrate("tool_use", [], params=("tool_mass",))


def test_sysid_fits_the_tools_mass_and_friction_from_its_pushed_path(tool_push_bags, tool_profile):
    pytest.importorskip("tabulate")  # mujoco[sysid]
    from robotrl.twin.calibrate import calibrate

    _, perturbed, truth = tool_push_bags
    ep = load_episode(perturbed, tool_profile)
    result = calibrate("tool_use", [ep], params=("object_mass", "geom_friction"), delays=(0,))
    assert result.physics.object_mass == pytest.approx(truth.object_mass, rel=0.05)
    assert result.physics.geom_friction == pytest.approx(truth.geom_friction, rel=0.05)
    assert result.cost_by_delay[0] < 0.05 * result.initial_cost


def test_windowed_sysid_started_from_recorded_states_fits_the_pushed_tool_too(tool_push_bags, tool_profile):
    """Windows after the first start from the bag's float32 poses with differenced velocities: still within 5%."""
    pytest.importorskip("tabulate")
    from robotrl.twin.calibrate import calibrate

    _, perturbed, truth = tool_push_bags
    ep = load_episode(perturbed, tool_profile)
    result = calibrate("tool_use", [ep], params=("object_mass", "geom_friction"), delays=(0,), segment=10)
    assert len(result.params) == 2
    assert result.physics.object_mass == pytest.approx(truth.object_mass, rel=0.05)
    assert result.physics.geom_friction == pytest.approx(truth.geom_friction, rel=0.05)


def test_windows_tile_the_episode_and_each_starts_from_its_recorded_state(tool_push_bags, tool_profile):
    from robotrl.twin.calibrate import _windows

    ep = load_episode(tool_push_bags[1], tool_profile)  # 31 states, 30 commands
    assert [(s, w.num_steps) for s, w in _windows(ep, 10)] == [(0, 11), (10, 11), (20, 11)]
    assert _windows(ep, 0)[0][1] is ep
    for s, w in _windows(ep, 10):
        np.testing.assert_array_equal(w.q[0], ep.q[s])
        np.testing.assert_array_equal(w.object_pose[-1], ep.object_pose[s + 10])
        np.testing.assert_array_equal(w.command, ep.command[s:s + 10])


def test_object_velocity_from_poses_matches_a_constant_screw_motion():
    from robotrl.twin.calibrate import _object_velocity

    dt, lin, rate = 0.02, np.array([0.3, -0.1, 0.05]), 2.0  # m/s, rad/s about the body's own z axis
    t = np.arange(5) * dt
    tilt = np.array([np.cos(0.2), np.sin(0.2), 0.0, 0.0])  # a body tilted 0.4 rad about x
    spin = np.stack([np.cos(rate * t / 2), 0 * t, 0 * t, np.sin(rate * t / 2)], axis=1)
    quat = np.stack([_mul(tilt, s) for s in spin])  # q(t) = tilt * spin(t): body-frame angular velocity (0, 0, rate)
    track = np.concatenate([lin * t[:, None], quat], axis=1)
    np.testing.assert_allclose(_object_velocity(track, 2, dt), [*lin, 0.0, 0.0, rate], atol=1e-9)
    assert not _object_velocity(track, 0, dt).any()  # an episode's first state: at rest


def _mul(a, b):
    import torch

    from robotrl.rotations import quat_mul

    return quat_mul(torch.as_tensor(a)[None], torch.as_tensor(b)[None])[0].numpy()


def test_more_starts_keep_the_lowest_cost_run_and_a_bad_count_is_refused(tool_push_bags, tool_profile):
    pytest.importorskip("tabulate")
    from robotrl.twin.calibrate import calibrate

    _, perturbed, truth = tool_push_bags
    ep = load_episode(perturbed, tool_profile)
    params = ("object_mass", "geom_friction")
    one = calibrate("tool_use", [ep], params=params, delays=(0,))
    three = calibrate("tool_use", [ep], params=params, delays=(0,), starts=3)
    assert three.cost_by_delay[0] <= one.cost_by_delay[0]  # the nominal start is among the three
    assert three.physics.object_mass == pytest.approx(truth.object_mass, rel=0.05)
    assert three.physics.geom_friction == pytest.approx(truth.geom_friction, rel=0.05)
    with pytest.raises(ValueError, match="starts=0"):
        calibrate("tool_use", [ep], params=("object_mass",), starts=0)
