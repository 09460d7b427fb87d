"""Twin metrics on constructed traces with hand-worked answers."""

import numpy as np
import pytest

from robotrl.twin.metrics import base_drift, divergence_step, divergence_time, joint_errors, success_mismatch


def test_divergence_step_needs_m_consecutive_steps_above_eps():
    real = np.zeros((10, 2))
    sim = np.zeros((10, 2))
    sim[2, 0] = 0.5  # a single spike: not a divergence for m=2
    sim[5:, 1] = 0.2  # stays above from step 5
    assert divergence_step(sim, real, eps=0.1, m=2) == 5
    assert divergence_step(sim, real, eps=0.1, m=1) == 2
    assert divergence_step(sim, real, eps=0.3, m=1) == 2
    assert divergence_step(sim, real, eps=0.3, m=2) is None
    assert divergence_step(sim, real, eps=0.1, m=6) is None  # only 5 steps (5..9) remain above


def test_divergence_time_is_duration_when_never_diverging():
    real = np.zeros(8)
    assert divergence_time(real + 0.01, real, dt=0.5, eps=0.1, m=2) == pytest.approx(4.0)
    assert divergence_time(real + 1.0, real, dt=0.5, eps=0.1, m=2) == 0.0


def test_joint_errors_hand_worked():
    real = np.zeros((4, 2))
    sim = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [1.0, 2.0]])
    out = joint_errors(sim, real)
    assert out["rmse"] == pytest.approx([1.0, 1.0])  # sqrt(4/4), sqrt(4/4)
    assert out["max"] == pytest.approx([1.0, 2.0])


def test_base_drift_and_success_mismatch():
    real = np.zeros((3, 3))
    sim = np.array([[0.0, 0, 5], [3.0, 4.0, 0], [0.0, 1.0, 9]])  # z ignored
    assert base_drift(sim, real) == {"final": pytest.approx(1.0), "max": pytest.approx(5.0)}
    assert success_mismatch(np.array([1, 0, 1, 1]), np.array([1, 1, 1, 0])) == pytest.approx(0.5)
