"""The miner finds a planted failure region of a cheap synthetic policy; scenario files round-trip."""

import numpy as np
import pytest
import torch

from robotrl.twin.mine import failure_coverage, inside_regions, mine, region_coverage
from robotrl.twin.scenarios import Region, ScenarioFile, ScenarioParam

PARAMS = [ScenarioParam("thickness", 0.005, 0.05, unit="m"), ScenarioParam("mass", 0.1, 1.0, unit="kg"),
          ScenarioParam("friction", 0.3, 1.2)]
PLANTED = {"thickness": [0.005, 0.02], "mass": [0.5, 1.0]}


def synthetic_policy(x: np.ndarray, noise: float = 0.03, seed: int = 1) -> np.ndarray:
    """Fails inside the planted box (thin and heavy), plus a few random failures elsewhere."""
    inside = (x[:, 0] <= 0.02) & (x[:, 1] >= 0.5)
    flips = np.random.default_rng(seed + len(x)).random(len(x)) < noise
    return ~(inside ^ flips)


def test_miner_finds_planted_region_with_readable_summary():
    result = mine(synthetic_policy, PARAMS, budget=600, rounds=4)
    covered, false = region_coverage(result.regions, PLANTED, PARAMS)
    assert covered >= 0.8
    assert false <= 1
    best = max(result.regions, key=lambda r: r.samples * r.failure_rate)
    assert "thickness <" in best.summary and "mass >" in best.summary
    edge = max(r.bounds["thickness"][1] for r in result.regions if "thickness" in r.bounds)
    assert edge == pytest.approx(0.02, abs=0.004)


def test_miner_finds_nothing_when_nothing_fails():
    result = mine(lambda x: np.ones(len(x), dtype=bool), PARAMS, budget=200)
    assert result.regions == []


def test_scenario_file_round_trip_and_sampling_stays_in_boxes(tmp_path):
    regions = [Region(bounds={"thickness": [0.005, 0.02]}, failure_rate=0.9, samples=50, summary="thin")]
    path = ScenarioFile("tool_use", PARAMS, regions).save(tmp_path / "s.yaml")
    loaded = ScenarioFile.load(path)
    draws = loaded.sample(1000, torch.Generator().manual_seed(0))
    t = draws["thickness"]
    assert ((t >= 0.005) & (t <= 0.02)).all()
    assert torch.isnan(draws["mass"]).all()  # left to the task's own draw
    assert loaded.sample(0, torch.Generator())["thickness"].shape == (0,)  # a reset where no world drew
    (tmp_path / "bad.yaml").write_text(path.read_text().replace("thickness: [", "nope: [").replace(
        "thickness:\n", "nope:\n"))
    with pytest.raises(ValueError, match="undeclared"):
        ScenarioFile.load(tmp_path / "bad.yaml")


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
