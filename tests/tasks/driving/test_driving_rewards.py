"""CaRL factors, collision geometry and route projection, on hand-worked numbers."""

import math

import numpy as np
import pytest
import torch
from robotrl.tasks.driving.car import ackermann_angles
from robotrl.tasks.driving.rewards import (
    carl_factors,
    heading_segment,
    point_segment_distance,
    segment_segment_distance,
    time_to_collision,
)
from robotrl.tasks.driving.route import TrackBank, progress_delta, wrap_angle
from robotrl.tasks.driving.track import Track

KW = dict(
    lane_penalty=0.5,
    comfort_lat_acc=4.0,
    comfort_penalty=0.5,
    ttc_min=1.0,
    ttc_penalty=0.5,
    min_speed=1.0,
    min_speed_penalty=0.5,
)


def test_carl_factors_hand_worked():
    t = torch.tensor
    f = carl_factors(
        lateral=t([0.0, 0.5, -1.0, 3.0]),
        half_width=t([1.0, 1.0, 1.0, 1.0]),
        lat_acc=t([0.0, 6.0, -8.0, 20.0]),
        ttc=t([5.0, 0.5, float("inf"), 1.0]),
        speed=t([2.0, 0.5, 0.0, 1.0]),
        **KW,
    )
    torch.testing.assert_close(f["lane"], t([1.0, 0.75, 0.5, 0.5]))
    torch.testing.assert_close(f["comfort"], t([1.0, 0.75, 0.5, 0.5]))
    torch.testing.assert_close(f["ttc"], t([1.0, 0.5, 1.0, 1.0]))
    torch.testing.assert_close(f["speed"], t([1.0, 0.75, 0.5, 1.0]))


def test_time_to_collision():
    ttc = time_to_collision(torch.tensor([3.25, 1.0, 2.0]), torch.tensor([2.0, 0.0, -1.0]), gap=0.25)
    assert ttc[0].item() == pytest.approx(1.5)
    assert math.isinf(ttc[1].item()) and math.isinf(ttc[2].item())


def test_segment_distances():
    a, b = torch.tensor([0.0, 0.0]), torch.tensor([2.0, 0.0])
    p = torch.tensor([[1.0, 1.0], [3.0, 0.0], [-1.0, -1.0]])
    torch.testing.assert_close(point_segment_distance(p, a, b), torch.tensor([1.0, 1.0, math.sqrt(2)]))
    # parallel, crossing and T-shaped pairs
    d = segment_segment_distance(
        torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
        torch.tensor([[2.0, 0.0], [2.0, 2.0], [2.0, 0.0]]),
        torch.tensor([[0.0, 0.5], [0.0, 2.0], [1.0, 0.3]]),
        torch.tensor([[2.0, 0.5], [2.0, 0.0], [1.0, 1.0]]),
    )
    torch.testing.assert_close(d, torch.tensor([0.5, 0.0, 0.3]))
    # broadcast, as the collision check calls it: one car segment (1, 2) against every vehicle's (3, 2)
    one = segment_segment_distance(torch.tensor([[0.0, 0.0]]), torch.tensor([[2.0, 0.0]]),
                                   torch.tensor([[0.0, 0.5], [1.0, -1.0], [3.0, 0.0]]),
                                   torch.tensor([[2.0, 0.5], [1.0, 1.0], [4.0, 0.0]]))
    torch.testing.assert_close(one, torch.tensor([0.5, 0.0, 1.0]))
    lo, hi = heading_segment(torch.tensor([[1.0, 1.0]]), torch.tensor([math.pi / 2]), 0.5)
    torch.testing.assert_close(lo, torch.tensor([[1.0, 0.5]]))
    torch.testing.assert_close(hi, torch.tensor([[1.0, 1.5]]))


def test_ackermann_inner_wheel_turns_more():
    left, right = ackermann_angles(0.3, wheelbase=0.33, track=0.26)
    radius = 0.33 / math.tan(0.3)
    assert math.tan(left) == pytest.approx(0.33 / (radius - 0.13))
    assert math.tan(right) == pytest.approx(0.33 / (radius + 0.13))
    assert left > 0.3 > right > 0
    tl, tr = ackermann_angles(torch.tensor([-0.3]), wheelbase=0.33, track=0.26)
    assert tl.item() == pytest.approx(-right) and tr.item() == pytest.approx(-left)


def _circle_track(radius: float = 5.0, m: int = 400) -> Track:
    u = np.linspace(0, 2 * np.pi, m, endpoint=False)
    center = radius * np.stack([np.cos(u), np.sin(u)], 1)
    tangent = np.stack([-np.sin(u), np.cos(u)], 1)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], 1)
    length = 2 * np.pi * radius
    return Track(0, center, tangent, normal, u * radius, length, 1.0, np.full(m, 1 / radius), np.arange(0, m, 25))


def test_projection_on_a_circle():
    bank = TrackBank([_circle_track()], torch.device("cpu"))
    ang = torch.tensor([0.3, 2.0, 5.0])
    r = torch.tensor([5.4, 4.5, 5.0])  # outside (right of travel), inside (left), on the line
    pos = torch.stack([r * torch.cos(ang), r * torch.sin(ang)], 1)
    tid = torch.zeros(3, dtype=torch.long)
    idx, s, lateral, heading = bank.project(tid, pos)
    torch.testing.assert_close(s, 5.0 * ang, atol=0.02, rtol=0)
    torch.testing.assert_close(lateral, 5.0 - r, atol=1e-4, rtol=0)
    torch.testing.assert_close(wrap_angle(heading - ang - math.pi / 2), torch.zeros(3), atol=0.02, rtol=0)
    # windowed search from the previous index follows the car; point_at inverts the projection
    idx2, s2, _, _ = bank.project(tid, pos, idx)
    assert torch.equal(idx2, idx)
    p, h = bank.point_at(tid, s)
    torch.testing.assert_close(p, 5.0 * torch.stack([torch.cos(ang), torch.sin(ang)], 1), atol=5e-3, rtol=0)


def test_progress_delta_unwraps_across_the_start_line():
    length = torch.tensor([10.0, 10.0, 10.0])
    d = progress_delta(torch.tensor([0.2, 9.8, 5.5]), torch.tensor([9.9, 0.1, 5.0]), length)
    torch.testing.assert_close(d, torch.tensor([0.3, -0.3, 0.5]))
