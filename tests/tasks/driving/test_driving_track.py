"""Procedural tracks: determinism, train/held-out separation and geometric validity."""

import numpy as np
import pytest
from robotrl.tasks.driving import constants as C
from robotrl.tasks.driving.track import (
    Track,
    TrackParams,
    generate_track,
    segments_intersect,
    track_set,
    validate,
)

PARAMS = TrackParams()


def _fresh(seed: int) -> Track:
    return generate_track.__wrapped__(seed, PARAMS)


def test_same_seed_same_track_and_different_seeds_differ():
    a, b = _fresh(3), _fresh(3)
    for name in ("center", "tangent", "normal", "s", "curvature", "checkpoints"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.length == b.length and a.half_width == b.half_width
    c = _fresh(4)
    assert np.abs(a.center - c.center).max() > 0.5


def test_train_and_heldout_sets_are_disjoint():
    train, held = track_set("train", 6), track_set("heldout", 6)
    assert [t.seed for t in train] == list(range(6))
    assert [t.seed for t in held] == [C.HELDOUT_SEED_OFFSET + i for i in range(6)]
    for h in held:
        assert all(np.abs(h.center - t.center).max() > 0.5 for t in train)
    with pytest.raises(ValueError, match="train' or 'heldout"):
        track_set("test", 2)


@pytest.mark.parametrize("track", track_set("train", 8) + track_set("heldout", 4), ids=lambda t: f"seed{t.seed}")
def test_geometry_is_valid(track):
    m = len(track.center)
    # closed and evenly spaced: the wrap-around step is one spacing like every other step
    steps = np.linalg.norm(np.diff(np.vstack([track.center, track.center[:1]]), axis=0), axis=1)
    np.testing.assert_allclose(steps, track.spacing, rtol=0.02)
    np.testing.assert_allclose(track.s[-1] + track.spacing, track.length, rtol=1e-9)
    # unit tangents along the direction of travel; normals point left
    np.testing.assert_allclose(np.linalg.norm(track.tangent, axis=1), 1.0, atol=1e-9)
    ahead = np.roll(track.center, -1, axis=0) - track.center
    assert (np.sum(ahead * track.tangent, axis=1) > 0).all()
    np.testing.assert_allclose(track.tangent[:, 0] * track.normal[:, 1] - track.tangent[:, 1] * track.normal[:, 0], 1)
    # no self-intersection of the centreline or either lane boundary
    left, right = track.boundaries()
    for poly in (track.center, left, right):
        assert not segments_intersect(poly)
    # lane width respected: every boundary point is exactly half_width from the nearest centreline point
    # (if the road folded or overlapped another stretch, a nearer centreline point would exist)
    for edge in (left, right):
        nearest = np.linalg.norm(edge[:, None] - track.center[None], axis=-1).min(1)
        assert nearest.min() > track.half_width - 0.01 * track.half_width
        np.testing.assert_allclose(np.linalg.norm(edge - track.center, axis=1), track.half_width)
    lo, hi = PARAMS.half_width
    assert lo <= track.half_width <= hi
    assert 1.0 / np.abs(track.curvature).max() >= PARAMS.min_turn_radius
    # checkpoints: evenly spaced in arc length, in route order
    assert len(track.checkpoints) == PARAMS.num_checkpoints
    assert (np.diff(track.checkpoints) > 0).all() and track.checkpoints[-1] < m
    assert validate(track, PARAMS) == []


def test_intersection_check_detects_a_figure_eight():
    u = np.linspace(0, 2 * np.pi, 200, endpoint=False) + 0.013
    assert segments_intersect(np.stack([np.sin(u), np.sin(u) * np.cos(u)], axis=1))
    assert not segments_intersect(np.stack([np.cos(u), np.sin(u)], axis=1))


def test_validate_rejects_tight_turns_and_overlapping_road():
    good = _fresh(0)
    tight = TrackParams(min_turn_radius=50.0)
    assert any("turn radius" in p for p in validate(good, tight))
    # a road whose half-width reaches across the track overlaps itself
    wide = Track(
        good.seed,
        good.center,
        good.tangent,
        good.normal,
        good.s,
        good.length,
        6.0,
        good.curvature,
        good.checkpoints,
    )
    assert any("overlaps" in p for p in validate(wide, PARAMS))


def test_impossible_params_raise_a_helpful_error():
    with pytest.raises(RuntimeError, match="min_turn_radius"):
        generate_track.__wrapped__(1, TrackParams(min_turn_radius=100.0))
