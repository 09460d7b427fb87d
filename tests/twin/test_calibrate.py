"""Calibration with mujoco.sysid recovers a known perturbation from a short bag."""

import sys

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
