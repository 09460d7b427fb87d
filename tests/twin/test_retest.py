"""Re-testing mined regions on fresh draws: the sequential rule settles clear regions early; the even one is lenient."""

import numpy as np

from robotrl.twin.retest import retest_even, retest_sequential
from robotrl.twin.scenarios import Region, ScenarioParam

PARAMS = [ScenarioParam("thickness", 0.005, 0.05, unit="m"), ScenarioParam("mass", 0.1, 1.0, unit="kg"),
          ScenarioParam("friction", 0.3, 1.2)]


def _two_regions():
    """A region failing 95% of the time (thin tools) and one failing 42% (thick), a constant 5% background."""
    regions = [Region(bounds={"thickness": [0.005, 0.02]}, failure_rate=1.0, samples=30, summary="thin"),
               Region(bounds={"thickness": [0.035, 0.05]}, failure_rate=0.6, samples=30, summary="thick")]
    noise = np.random.default_rng(5)

    def policy(x: np.ndarray) -> np.ndarray:
        r = noise.random(len(x))
        return ~(((x[:, 0] <= 0.02) & (r < 0.95)) | ((x[:, 0] >= 0.035) & (r < 0.42)))

    return regions, policy


def test_sequential_validation_settles_a_clear_region_early_and_drops_one_failing_below_half():
    regions, policy = _two_regions()
    args = (PARAMS, np.zeros((0, 3)), 200, np.random.default_rng(0), lambda mask: 0.05, 0.5, 1.96)
    u, ok, kept = retest_sequential(policy, regions, *args)
    assert [r.summary for r in kept] == ["thin"]
    thin_draws = int((u[:, 0] * 0.045 + 0.005 <= 0.02).sum())
    assert thin_draws <= 25 and len(u) == 200  # settled in the first round; the rest re-test the thick region
    assert kept[0].samples == thin_draws and kept[0].failure_rate > 0.8
    # the even split keeps the 42% region: 100 draws leave its Wilson upper bound above 0.5
    regions, policy = _two_regions()
    assert [r.summary for r in retest_even(policy, regions, *args)[2]] == ["thin", "thick"]
