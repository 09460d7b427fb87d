"""Region membership, failure coverage and the Wilson bounds, on hand-worked numbers."""

import numpy as np
import pytest

from robotrl.twin.regions import failure_coverage, inside_regions, wilson_lower, wilson_upper
from robotrl.twin.scenarios import Region, ScenarioParam

PARAMS = [ScenarioParam("thickness", 0.005, 0.05, unit="m"), ScenarioParam("mass", 0.1, 1.0, unit="kg"),
          ScenarioParam("friction", 0.3, 1.2)]


def test_failure_coverage_weights_points_by_failure_and_subtracts_background():
    region = Region(bounds={"friction": [0.3, 0.6]}, failure_rate=1.0, samples=10)
    x = np.array([[0.01, 0.5, 0.4], [0.01, 0.5, 0.5], [0.01, 0.5, 0.8], [0.01, 0.5, 0.9], [0.01, 0.5, 1.1]])
    fail = np.array([True, True, True, False, True])
    inside = inside_regions(x, [region], PARAMS)
    assert inside.tolist() == [True, True, False, False, False]
    assert failure_coverage(inside, fail) == pytest.approx(2 / 4)
    target = x[:, 2] < 1.0  # the last scenario is outside the target band
    assert failure_coverage(inside, fail, target) == pytest.approx(2 / 3)
    # background 0.5: weights +0.5 for failures, -0.5 for successes -> (0.5 + 0.5) / (1.5 - 0.5)
    assert failure_coverage(inside, fail, target, background=0.5) == pytest.approx(1.0)
    assert np.isnan(failure_coverage(inside, np.zeros(5, dtype=bool)))


def test_wilson_lower_bound_matches_hand_worked_values():
    # 8 of 13, z 1.96: (p + z2/2n - z sqrt(p(1-p)/n + z2/4n2)) / (1 + z2/n) = (0.76314 - 0.30295) / 1.29551
    assert wilson_lower(8, 13, 1.96) == pytest.approx(0.35522, abs=1e-4)
    assert wilson_lower(8, 13, 0.0) == pytest.approx(8 / 13)  # no discount at z 0
    assert wilson_lower(26, 26, 1.645) == pytest.approx(26 / (26 + 1.645**2))  # all failed: n / (n + z2)
    assert wilson_lower(0, 0) == 0.0


def test_wilson_upper_bound_matches_hand_worked_values():
    # 8 of 13: 1 - lower(5 of 13); p 5/13, centre 0.53237, half 0.30295, lower 0.22942 / 1.29551 = 0.17709
    assert wilson_upper(8, 13, 1.96) == pytest.approx(0.82291, abs=1e-4)
    assert wilson_upper(0, 26, 1.645) == pytest.approx(1.645**2 / (26 + 1.645**2))  # none failed: z2 / (n + z2)
    assert wilson_upper(0, 0) == 1.0

