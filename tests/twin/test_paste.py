"""PRIM's pasting step grows a mined region across a fading edge while the box still fails often enough."""

import numpy as np
import pytest

from robotrl.twin.mine import mine
from robotrl.twin.paste import paste_box, paste_regions, pick_retested, reach_regions
from robotrl.twin.regions import failure_coverage, from_unit, inside_regions, region_coverage
from robotrl.twin.scenarios import Region, ScenarioParam

# 100 uniform draws on a grid of one parameter: every draw below 0.4 fails, every other one in [0.4, 0.6), none above
GRID = (np.arange(100)[:, None] + 0.5) / 100
FADING = (GRID[:, 0] < 0.4) | ((GRID[:, 0] < 0.6) & (np.arange(100) % 2 == 0))


@pytest.mark.parametrize(("floor", "edge"), [(0.6, 0.833), (0.9, 0.5)])
def test_paste_grows_a_box_until_its_failure_rate_would_fall_below_the_floor(floor, edge):
    """By hand: the box [0, h] holds 100h draws. For h in [0.4, 0.6] 40 + 50(h - 0.4) of them fail, a rate of
    (20 + 50h) / 100h, which is 0.9 at h = 0.5; above 0.6 all 50 failures over 100h draws, 0.6 at h = 0.833.
    On the grid itself [0, 0.51] holds 46 failures of 51 draws, 0.902."""
    lo, hi, steps = paste_box(GRID, FADING, np.zeros(1), np.array([0.3]), floor, alpha=0.05)
    assert lo[0] == 0.0
    assert steps > 0
    inside = GRID[:, 0] <= hi[0]
    assert FADING[inside].mean() >= floor
    assert hi[0] <= edge + 0.011  # never past the point where the rate crosses the floor (one grid draw of slack)
    assert hi[0] >= edge - 0.05  # and within one step (5% of the box's draws) of it


def test_paste_does_not_grow_a_box_with_fewer_draws_than_min_samples():
    lo, hi, steps = paste_box(GRID, FADING, np.zeros(1), np.array([0.05]), 0.6, alpha=0.05, min_samples=8)
    assert steps == 0 and hi[0] == 0.05


def test_paste_regions_recount_the_grown_box_and_drop_one_grown_into_another():
    params = [ScenarioParam("half_width", 0.3, 1.0, unit="m")]
    x = from_unit(GRID, params)
    a = Region(bounds={"half_width": [0.3, 0.51]}, failure_rate=1.0, samples=30)
    b = Region(bounds={"half_width": [0.37, 0.51]}, failure_rate=1.0, samples=20)
    pairs = paste_regions([a, b], params, GRID, FADING, np.ones(100, dtype=bool), floor=0.6, alpha=0.05)
    assert [p for _, p in pairs] == [a, b]
    grown = pick_retested(pairs, [g for g, _ in pairs])
    assert len(grown) == 1  # b grows to the same box as a, or inside it: one region stays
    hi = grown[0].bounds["half_width"][1]
    assert hi > 0.51 + 0.3 * 0.7  # grown well past the last failing draw below 0.4 (x 0.58 m)
    inside = x[:, 0] <= hi
    assert grown[0].samples == int(inside.sum())
    assert grown[0].failure_rate == pytest.approx(FADING[inside].mean())
    assert "half_width <" in grown[0].summary


def test_paste_regions_measure_the_box_on_uniform_draws_only():
    """Focused draws crowd into failures: counting them would let the box grow further than its true rate allows."""
    params = [ScenarioParam("x", 0.0, 1.0)]
    crowd = np.full((200, 1), 0.95)  # focused draws, all failing, far out on the edge the box grows towards
    u = np.concatenate([GRID, crowd])
    fail = np.concatenate([FADING, np.ones(200, dtype=bool)])
    uniform = np.concatenate([np.ones(100, dtype=bool), np.zeros(200, dtype=bool)])
    region = Region(bounds={"x": [0.0, 0.3]}, failure_rate=1.0, samples=30)
    (grown, _), = paste_regions([region], params, u, fail, uniform, floor=0.6, alpha=0.05)
    assert grown.bounds["x"][1] <= 0.834


def test_pick_retested_keeps_the_plain_box_with_the_grown_one_as_reach_and_falls_back_when_one_fails():
    def box(hi, rate=0.9):
        return Region(bounds={"x": [0.0, hi]}, failure_rate=rate, samples=20, summary=f"fails when x < {hi}")

    def far(hi, rate=0.9):
        return Region(bounds={"x": [0.9, hi]}, failure_rate=rate, samples=20)

    pairs = [(box(0.5), box(0.3)), (far(1.0), far(0.95)), (box(0.6), box(0.1)), (far(0.99), far(0.97))]
    kept = [box(0.5, 0.55), box(0.3, 0.95), far(0.95, 0.9), far(0.99, 0.6)]  # re-tested copies
    picked = pick_retested(pairs, kept)
    # both kept: the plain box with the grown one as its reach; plain in place of a dropped grown box; neither
    # kept; the grown box alone where its plain box failed, and it holds the second pair's plain box
    assert [r.bounds["x"] for r in picked] == [[0.0, 0.3], [0.9, 0.99]]
    assert [r.reach for r in picked] == [{"x": [0.0, 0.5]}, None]
    assert [r.failure_rate for r in picked] == [0.95, 0.6]  # the re-test's figures
    assert picked[0].reach_failure_rate == 0.55 and picked[0].reach_samples == 20
    assert picked[0].summary == "fails when x < 0.3 (reaches x < 0.5, failing 55% there)"
    assert picked[0].extent().bounds == {"x": [0.0, 0.5]} and picked[0].extent().failure_rate == 0.55
    assert picked[0].extent().summary == "fails when x < 0.5"
    assert picked[1].extent() is picked[1]


def test_two_regions_grown_into_one_reach_keep_both_boxes_for_training_and_report_the_reach_once():
    """Session 59: a run's always-failing narrow box and its fainter neighbour grew into one reach; dropping
    either box by its reach alone took the narrowest roads out of training."""
    narrow = Region(bounds={"x": [0.0, 0.4]}, failure_rate=1.0, samples=13, summary="fails when x < 0.4")
    mid = Region(bounds={"x": [0.4, 0.5], "y": [0.0, 0.9]}, failure_rate=0.66, samples=60,
                 summary="fails when 0.4 < x < 0.5 and y < 0.9")
    reach = Region(bounds={"x": [0.0, 0.63]}, failure_rate=0.68, samples=31, summary="fails when x < 0.63")
    picked = pick_retested([(reach, narrow), (reach, mid)], [narrow, mid, reach])
    assert [r.bounds for r in picked] == [narrow.bounds, mid.bounds]
    assert all(r.reach == reach.bounds for r in picked)
    assert [r.bounds for r in reach_regions(picked)] == [reach.bounds]


def _fading_policy(x: np.ndarray) -> np.ndarray:
    """Fails 90% of the time below half-width 0.45 m, fading linearly to 20% at 0.6 m, 5% above."""
    hw = x[:, 0]
    p = np.where(hw < 0.45, 0.9, np.where(hw < 0.6, 0.9 - (hw - 0.45) / 0.15 * 0.7, 0.05))
    return np.random.default_rng(len(x) + int(1e6 * x[0, 0])).random(len(x)) >= p


def test_pasting_covers_more_of_a_fading_weakness_than_the_plain_regions_without_false_ones():
    """The width plant's shape (robotrl/twin/README.md): the plain regions stop where the rate crosses 0.5 and
    leave the fading band out; grown and re-tested, they cover nearly all of its failures, and still fail
    more than half the time on fresh draws."""
    params = [ScenarioParam("half_width", 0.3, 1.0, unit="m"), ScenarioParam("curvature", 0.0, 1.0),
              ScenarioParam("traffic_speed", 0.0, 1.0)]
    x = from_unit(np.random.default_rng(5).random((20_000, 3)), params)
    fail, planted = ~_fading_policy(x), x[:, 0] < 0.6
    covered: dict[float, list[float]] = {}
    for paste in (0.0, 0.05):
        covered[paste] = []
        for seed in range(4):
            res = mine(_fading_policy, params, 512, seed=seed, min_leaf=16, baseline="reference",
                       reference={"half_width": [0.6, 1.0]}, validate=0.2, validate_rule="sequential", paste=paste)
            reach = [r.extent() for r in res.regions]
            assert region_coverage(reach, {"half_width": [0.3, 0.6]}, params)[1] == 0
            assert all(r.failure_rate >= 0.5 for r in res.regions + reach)
            for r, e in zip(res.regions, reach, strict=True):  # training draws inside the reach, where it is denser
                assert e.bounds["half_width"][1] >= r.bounds["half_width"][1]
                assert e is r or r.failure_rate >= e.failure_rate - 0.1
            covered[paste].append(failure_coverage(inside_regions(x, reach, params), fail, planted))
    assert np.mean(covered[0.0]) < 0.9
    assert min(covered[0.05]) >= 0.9
    assert np.mean(covered[0.05]) >= np.mean(covered[0.0]) + 0.08


def test_a_grown_box_that_fails_its_retest_leaves_the_plain_region_in_place():
    """With a floor of 0 every region grows to the whole space, which fails only about a third of the time on the
    fresh draws: the re-test drops the grown boxes, and the plain regions (re-tested beside them) stay."""
    params = [ScenarioParam("half_width", 0.3, 1.0, unit="m"), ScenarioParam("curvature", 0.0, 1.0)]
    for seed in range(2):
        plain = mine(_fading_policy, params, 512, seed=seed, min_leaf=16, validate=0.2, validate_rule="sequential")
        grown = mine(_fading_policy, params, 512, seed=seed, min_leaf=16, validate=0.2, validate_rule="sequential",
                     paste=0.05, paste_floor=0.0)
        assert plain.regions and len(grown.regions) == len(plain.regions)
        for r in grown.regions:
            assert r.failure_rate >= 0.5
            assert r.bounds["half_width"][1] < 0.65
            assert r.reach is None


@pytest.mark.parametrize(("kwargs", "match"), [({"paste": -0.1}, "paste="), ({"paste": 1.5}, "paste="),
                                               ({"paste": 0.05, "paste_floor": 1.2}, "paste_floor=")])
def test_paste_options_outside_their_range_are_errors_that_name_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mine(_fading_policy, [ScenarioParam("half_width", 0.3, 1.0)], budget=50, **kwargs)
