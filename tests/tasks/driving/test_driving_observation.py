"""The driving critic's privileged inputs (``observation.critic_extras``), against hand-worked numbers."""

import math

import pytest
import torch
from robotrl.tasks.driving.observation import critic_extras


def _inputs(active: bool):
    car = {
        "completion": torch.tensor([0.25]), "time_frac": torch.tensor([0.5]),
        "dynamics": torch.tensor([[1.1, 0.9, 1.0]]), "s": torch.tensor([10.0]), "lateral": torch.tensor([0.2]),
        "v_fwd": torch.tensor([2.0]), "yaw": torch.tensor([math.pi / 2]), "pos": torch.tensor([[1.0, 2.0]]),
        "half_width": torch.tensor([0.5]), "length": torch.tensor([40.0]),
    }
    others = {
        "traffic_s": torch.tensor([[2.0, 28.0]]), "traffic_off": torch.tensor([[-0.3, 0.2]]),
        "traffic_v": torch.tensor([[1.0, 2.0]]), "obstacle_xy": torch.tensor([[[1.0, 5.0]]]),
    }
    return car, others, torch.tensor([active]), {"horizon": 8.0, "ray_range": 6.0}


def test_critic_extras_give_lap_dynamics_route_frame_traffic_and_car_frame_obstacles():
    got = critic_extras(*_inputs(True))
    # own: completion, time, active; dynamics - 1; traffic gaps (2 - 10 = -8 m; 28 - 10 = 18 m > 2 horizons: clipped),
    # lateral offsets over the half-width, speeds relative to the car over TOP_SPEED 5; the obstacle 3 m straight ahead
    want = [0.25, 0.5, 1.0, 0.1, -0.1, 0.0, -1.0, 2.0, -1.0, 0.0, -0.2, 0.0, 0.5, 0.0]
    assert got.shape == (1, 14)
    assert got[0].tolist() == pytest.approx(want, abs=1e-6)


def test_critic_extras_wrap_traffic_gaps_to_half_a_lap():
    car, others, active, scales = _inputs(True)
    others["traffic_s"] = torch.tensor([[35.0, 9.0]])  # 25 m ahead on a 40 m lap is 15 m behind; 1 m behind
    got = critic_extras(car, others, active, scales)
    assert got[0, 6:8].tolist() == pytest.approx([-15.0 / 8.0, -1.0 / 8.0])


def test_critic_extras_zero_traffic_and_obstacles_off_the_road():
    got = critic_extras(*_inputs(False))
    assert got[0, :6].tolist() == pytest.approx([0.25, 0.5, 0.0, 0.1, -0.1, 0.0])
    assert torch.count_nonzero(got[0, 6:]) == 0
