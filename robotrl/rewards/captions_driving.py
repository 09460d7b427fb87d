"""Driving frames captioned from the running driving env's measured state.

A noisy lane-keeping controller drives ``worlds`` cars on the training tracks with obstacles
and traffic in every episode (``scenario_prob=1``). Every step, before the autoreset (so a
crash is seen), each world's state is turned into a key ``(lane, scene)``:

* ``scene``: ``collided_car`` / ``collided_obstacle`` when the task's geometric collision test
  fires against a traffic vehicle / an obstacle (lane ``any``); else ``car_ahead`` /
  ``obstacle_ahead`` when the nearest active object in the car's frame lies within
  ``AHEAD_X`` metres in front and ``AHEAD_Y`` to the side, ``clear`` when nothing is within
  ``CLEAR_X`` x ``CLEAR_Y``; anything in between is ambiguous and not used.
* ``lane``: ``left`` / ``centre`` / ``right`` from the signed lateral offset over the road's
  half-width (positive left), split at ``+-LANE_SPLIT``; off the road is not used.

Worlds whose class still needs frames are rendered from the ``chase`` camera (lean settings),
exactly as a VLM reward term renders them in training.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from robotrl.rewards.captions import CLASSES, Key

log = logging.getLogger(__name__)

AHEAD_X, AHEAD_Y = 2.5, 0.6
CLEAR_X, CLEAR_Y = 4.0, 1.2
LANE_SPLIT = 0.3


def _car_frame(task: object, xy: torch.Tensor) -> torch.Tensor:
    """``(N, K, 2)`` world points -> the car frame (x forward, y left)."""
    pos = task.qpos[:, :2].float()  # type: ignore[attr-defined]
    from robotrl.rotations import yaw_from_quat

    yaw = yaw_from_quat(task.qpos[:, 3:7].float())  # type: ignore[attr-defined]
    d = xy - pos[:, None]
    c, s = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
    return torch.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], -1)


def driving_keys(task: object) -> list[Key | None]:
    """``(lane, scene)`` of every world from the driving task's measured state (see module docstring)."""
    from robotrl.rotations import yaw_from_quat
    from robotrl.tasks.driving.scenario import car_contacts

    t = task
    pos, yaw = t.qpos[:, :2].float(), yaw_from_quat(t.qpos[:, 3:7].float())  # type: ignore[attr-defined]
    active = t.active  # type: ignore[attr-defined]
    obstacles, traffic = car_contacts(pos, yaw, t.obstacle_xy, t.obstacle_r, t.traffic_xy, t.traffic_yaw)  # type: ignore
    hit_car, hit_obs = traffic.any(1) & active, obstacles.any(1) & active
    lat = t.lateral / t.bank.half_width[t.track_id]  # type: ignore[attr-defined]
    objs = torch.cat([t.traffic_xy, t.obstacle_xy], 1)  # type: ignore[attr-defined]
    local = _car_frame(t, objs)
    is_car = torch.arange(objs.shape[1]) < t.traffic_xy.shape[1]  # type: ignore[attr-defined]
    front = (local[..., 0] > 0) & active[:, None]
    near = front & (local[..., 0] < AHEAD_X) & (local[..., 1].abs() < AHEAD_Y)
    around = front & (local[..., 0] < CLEAR_X) & (local[..., 1].abs() < CLEAR_Y)
    dist = torch.where(near, local[..., 0], torch.full_like(local[..., 0], float("inf")))
    nearest = dist.argmin(1)
    keys: list[Key | None] = []
    for i in range(len(lat)):
        if bool(hit_car[i]) or bool(hit_obs[i]):
            keys.append(("any", "collided_car" if bool(hit_car[i]) else "collided_obstacle"))
            continue
        if abs(float(lat[i])) > 1.0:
            keys.append(None)
            continue
        lane = "left" if lat[i] > LANE_SPLIT else "right" if lat[i] < -LANE_SPLIT else "centre"
        if bool(near[i].any()):
            keys.append((lane, "car_ahead" if bool(is_car[nearest[i]]) else "obstacle_ahead"))
        elif not bool(around[i].any()):
            keys.append((lane, "clear"))
        else:
            keys.append(None)
    return keys


def lane_keeping_action(task: object, target: torch.Tensor, throttle: torch.Tensor, gen: torch.Generator,
                        noise: float = 0.15) -> torch.Tensor:
    """``(N, 2)`` steering toward lateral offset ``target`` (in half-widths) along the route, with noise."""
    hw = task.bank.half_width[task.track_id]  # type: ignore[attr-defined]
    err = task.lateral / hw - target  # type: ignore[attr-defined]
    steer = -(1.5 * task.heading_err + 1.2 * err)  # type: ignore[attr-defined]
    steer = steer + noise * torch.randn(steer.shape, generator=gen)
    return torch.stack([steer.clamp(-1, 1), throttle], 1)


def driving_samples(n: int, rng: np.random.Generator, size: tuple[int, int] = (96, 96), worlds: int = 64,
                    max_steps: int = 3000) -> tuple[np.ndarray, list[Key]]:
    """``n`` chase-camera frames ``(n, H, W, 3)`` uint8 and their keys, classes balanced where possible.

    Each class gets up to ``ceil(n / classes)`` frames; if a rare class (a crash) has not filled
    its share after ``max_steps`` steps, the other classes fill the rest and a warning says so.
    """
    from robotrl.envs.task_env import TaskEnv
    from robotrl.sim.backend import SimConfig
    from robotrl.tasks.driving.config import DrivingConfig

    classes = CLASSES["driving"]
    quota = -(-n // len(classes))
    seed = int(rng.integers(2**31))
    env = TaskEnv(DrivingConfig(scenario_prob=1.0), SimConfig(num_envs=worlds, nthread=1), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    task = env.task
    frames: list[np.ndarray] = []
    keys: list[Key] = []
    counts = dict.fromkeys(classes, 0)

    def grab(env_: TaskEnv, info: dict) -> None:
        share = quota if steps < max_steps else n
        cand = [(i, k) for i, k in enumerate(driving_keys(task)) if k is not None]
        rng.shuffle(cand)  # type: ignore[arg-type]
        take: list[tuple[int, Key]] = []  # (world, key) of the frames grabbed now
        for i, k in cand:
            if counts[k] < share and len(frames) + len(take) < n:
                counts[k] += 1
                take.append((i, k))
        if take:
            frames.extend(env_.sim.render("chase", torch.tensor([i for i, _ in take]), size))
            keys.extend(k for _, k in take)

    steps = 0
    env.pre_reset_hooks.append(grab)
    env.reset()
    target = torch.empty(worlds).uniform_(-0.8, 0.8, generator=gen)
    throttle = torch.empty(worlds).uniform_(0.2, 0.9, generator=gen)
    try:
        while len(frames) < n and steps < 4 * max_steps:
            if steps % 20 == 0:  # a new lane offset and speed for some worlds
                change = torch.rand(worlds, generator=gen) < 0.3
                target[change] = torch.empty(int(change.sum())).uniform_(-0.8, 0.8, generator=gen)
                throttle[change] = torch.empty(int(change.sum())).uniform_(0.2, 0.9, generator=gen)
            env.step(lane_keeping_action(task, target, throttle, gen))
            steps += 1
    finally:
        env.close()
    short = {" / ".join(k): c for k, c in counts.items() if c < quota}
    if short:
        log.warning("driving captions: classes below their share of %d after %d steps: %s", quota, steps, short)
    log.info("driving captions: %d frames in %d steps of %d worlds; per class %s", len(frames), steps, worlds,
             {" / ".join(k): c for k, c in counts.items()})
    return np.stack(frames[:n]), keys[:n]
