"""The driving scenario parameters read off a recorded episode (``robotrl twin triage``).

A driving cell publishes the route its policy follows (``/robotrl/route``, a latched
``nav_msgs/Path``: centreline points, heading as yaw, road half-width as position.z; see
``robot_io.sim_route`` and ``deploy/README.md``), and the bag records it. Two of the task's
scenario parameters (``DrivingTask.scenario_params``) are properties of that route:

* ``max_curvature`` (1/m): the route's sharpest turn, the largest ``|d heading / d s|`` over
  the closed centreline (central differences: the heading change across a point's two
  neighbours over the two chords). On the 64 tracks of the task's bank (512 points each) it is
  within 1.5% of the spline's analytic curvature (0.6% on average;
  ``tests/tasks/driving/test_driving_bag_scenario.py``).
* ``half_width`` (m): the road half-width, the median over the route's points.

Two more are read off the recorded range scan (``/scan``, ``sensor_msgs/LaserScan``; the task's
rays see only obstacles and traffic) and the odometry, against that route
(``obstacles_and_traffic``):

* ``traffic_speed`` (m/s): every hit becomes a world point (odometry pose, ray angle, range,
  pushed ``CENTRE_OFFSET`` further along the ray towards the object's centre), then arc length
  and lateral offset along the route. The hits of one scan on adjacent rays that lie close
  together are one detection, placed at its nearest hit. Detections are linked over time into
  fragments (nearest within a gate that grows with the gap; ``scan_objects``). A fragment's
  speed is the least-squares slope of its arc length against time: traffic drives along the
  route, obstacles stay put. ``traffic_speed`` is the median speed of the moving fragments'
  detections (each fragment's speed counted once per detection, so that a short fragment that
  mixed two objects weighs little); it is absent when nothing was seen moving.
* ``obstacles`` (count): the distinct obstacles (still fragments pooled by place: traffic that
  passes in front of an obstacle cuts it into pieces), when that count is known. The task
  places its ``num_obstacles`` (3, the parameter's high end) obstacles in equal slots of the
  lap (``scenario.place_obstacles``: obstacle ``i`` in the middle 60% of slot ``i``), and a
  scenario of ``k`` obstacles keeps the first ``k``. So ``m`` obstacles seen give the count
  ``m`` once the scan has reached the whole of slot ``m``: a bag that ends earlier (a failure
  ends the episode) shows only a lower bound, and ``obstacles`` is left out.

Measured on 40 simulated laps (``benchmarks/twin.py scan_scenario``, twin.json ``scan_scenario``)
the count is right in 37 (an obstacle that a traffic car drives through, which the task's
traffic does, since it ignores obstacles, is lost in the car's fragment) and the traffic speed
is within 0.06 m/s in 9 of 10. Far objects are hit by one ray that slides along them: a vehicle
seen only that way gets a speed far off (0.78 against 1.45 m/s in one lap of 40).

The friction is not read: nothing in the bag gives the road's grip.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from robotrl.tasks.driving.scenario_params import SCENARIO_PARAMS

if TYPE_CHECKING:
    from robotrl.twin.episode import Episode


def route_max_curvature(center: np.ndarray, heading: np.ndarray) -> float:
    """Largest ``|d heading / d s|`` (1/m) of a closed route: ``center`` ``(M, 2)``, ``heading`` ``(M,)`` rad."""
    turn = (np.roll(heading, -1) - np.roll(heading, 1) + np.pi) % (2 * np.pi) - np.pi  # as route.wrap_angle
    chords = np.linalg.norm(np.roll(center, -1, axis=0) - np.roll(center, 1, axis=0), axis=1)
    return float(np.max(np.abs(turn) / np.maximum(chords, 1e-9)))


CENTRE_OFFSET = 0.15
"""m a hit is moved along its ray: about an obstacle's or a traffic car's radius (0.12-0.2 m)."""
HIT_MARGIN = 0.02
"""m: a range below ``range_max - HIT_MARGIN`` is a hit."""
SAME_OBJECT = 0.6
"""m: hits of one scan closer than this (in turn, along the rays) are one detection."""
GATE = (0.4, 1.8)
"""A detection joins a track ``dt`` s after its last one if within ``GATE[0] + GATE[1] * dt`` m along the
route of where the track's speed puts it (and ``GATE[0]`` m across)."""
MAX_GAP = 1.0
"""s: a track not seen for longer ends."""
MIN_TRACK = (6, 0.5)
"""A track counts with at least this many detections over at least this many seconds."""
STILL_SPEED = 0.2
"""m/s: tracks slower than this are obstacles, faster ones traffic (the slowest scenario traffic is 0.3)."""
_OBSTACLES_MAX = int(next(p.high for p in SCENARIO_PARAMS if p.name == "obstacles"))
_SLOTS = (6.0, 4.0)  # obstacles stand from 6 m ahead of the start to 4 m behind it (scenario.place_obstacles)


def _yaw(quat_wxyz: np.ndarray) -> np.ndarray:
    """Headings ``(...)`` of ``(..., 4)`` (w, x, y, z) quaternions (``robotrl.rotations.yaw_from_quat``)."""
    import torch

    from robotrl.rotations import yaw_from_quat

    return yaw_from_quat(torch.as_tensor(quat_wxyz, dtype=torch.float64)).numpy()


def route_coordinates(route: np.ndarray, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Arc length ``(H,)`` in ``[0, L)`` and signed lateral offset ``(H,)`` (left +) of points ``xy`` ``(H, 2)``.

    ``route`` is ``(M, 4)`` (x, y, heading, half-width) of a closed centreline; also returns its length ``L``.
    """
    center, heading = route[:, :2], route[:, 2]
    chords = np.linalg.norm(np.roll(center, -1, axis=0) - center, axis=1)
    s_pts = np.concatenate([[0.0], np.cumsum(chords)[:-1]])
    length = float(chords.sum())
    tangent = np.stack([np.cos(heading), np.sin(heading)], axis=1)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
    idx = np.empty(len(xy), dtype=np.int64)
    for lo in range(0, len(xy), 2048):  # nearest centreline point, in chunks of (2048, M) distances
        d = ((xy[lo:lo + 2048, None, :] - center[None]) ** 2).sum(-1)
        idx[lo:lo + 2048] = d.argmin(1)
    rel = xy - center[idx]
    s = np.mod(s_pts[idx] + (rel * tangent[idx]).sum(1), length)
    return s, (rel * normal[idx]).sum(1), length


def _wrap(ds: np.ndarray | float, length: float) -> np.ndarray | float:
    """Arc-length difference wrapped to ``[-L/2, L/2)``."""
    return (np.asarray(ds) + 0.5 * length) % length - 0.5 * length


def scan_detections(episode: Episode) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The objects each scan saw: ``(t (D,), s (D,), lateral (D,), lap length)`` (module docstring).

    Raises:
        ValueError: the episode lacks the scan, the odometry or the route.

    """
    if episode.scan is None or episode.scan_angles is None or episode.base_pos is None or episode.base_quat is None:
        raise ValueError(f"{episode.path}: reading obstacles and traffic needs the scan and the odometry "
                         "(profile topics scan and odom).")
    if episode.route is None or len(episode.route) < 3:
        raise ValueError(f"{episode.path}: reading obstacles and traffic needs the route (profile topic route).")
    scan, rmax = episode.scan, float(episode.scan_range_max or np.nanmax(episode.scan))
    step, ray = np.nonzero(scan < rmax - HIT_MARGIN)  # NaN rows (before the first scan) are not hits
    angle = _yaw(episode.base_quat[step]) + episode.scan_angles[ray]
    dist = scan[step, ray] + CENTRE_OFFSET
    xy = episode.base_pos[step, :2] + dist[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    s, lat, length = route_coordinates(episode.route, xy)
    det_t, det_s, det_l = [], [], []
    start = 0
    for k in range(1, len(step) + 1):  # hits come sorted by step, then by ray
        if k < len(step) and step[k] == step[start] and ray[k] == ray[k - 1] + 1 \
                and np.hypot(xy[k, 0] - xy[k - 1, 0], xy[k, 1] - xy[k - 1, 1]) < SAME_OBJECT:
            continue
        near = start + int(np.argmin(dist[start:k]))  # the object's nearest face: the same face from scan to scan
        det_t.append(episode.t[step[start]])
        det_s.append(float(s[near]))
        det_l.append(float(lat[near]))
        start = k
    return np.asarray(det_t), np.asarray(det_s), np.asarray(det_l), length


def _unwrapped(points: np.ndarray, length: float) -> np.ndarray:
    """Arc lengths of ``points`` ``(k, 3)`` (t, s, lateral) unwrapped along the lap from the first."""
    return points[0, 1] + np.concatenate([[0.0], np.cumsum(_wrap(np.diff(points[:, 1]), length))])


def _slope(points: np.ndarray, length: float) -> float:
    """Least-squares speed along the route (m/s) of ``points`` ``(k, 3)`` sorted by time."""
    return float(np.polyfit(points[:, 0], _unwrapped(points, length), 1)[0]) if np.ptp(points[:, 0]) > 0 else 0.0


def _link(t: np.ndarray, s: np.ndarray, lat: np.ndarray, length: float) -> list[np.ndarray]:
    """Detections linked over time into fragments ``(k, 3)`` (t, s, lateral): nearest within the gate."""
    live: list[list[tuple[float, float, float]]] = []
    done: list[list[tuple[float, float, float]]] = []
    speeds: list[float] = []
    for tk in np.unique(t):
        keep = [i for i, tr in enumerate(live) if tk - tr[-1][0] <= MAX_GAP]
        done += [tr for i, tr in enumerate(live) if i not in keep]
        live, speeds = [live[i] for i in keep], [speeds[i] for i in keep]
        taken: set[int] = set()
        for j in np.flatnonzero(t == tk):
            best, cost = -1, np.inf
            for i, tr in enumerate(live):
                if i in taken:
                    continue
                dt = tk - tr[-1][0]
                ds = abs(float(_wrap(s[j] - tr[-1][1] - speeds[i] * dt, length)))
                dl = abs(lat[j] - tr[-1][2])
                if ds < GATE[0] + GATE[1] * dt and dl < GATE[0] and ds + dl < cost:
                    best, cost = i, ds + dl
            if best < 0:
                live.append([])
                speeds.append(0.0)
            live[best].append((float(tk), float(s[j]), float(lat[j])))
            speeds[best] = _slope(np.asarray(live[best]), length)
            taken.add(best if best >= 0 else len(live) - 1)
    return [np.asarray(tr) for tr in done + live]


def _summary(points: np.ndarray, length: float, kind: str) -> dict[str, Any]:
    ref = points[0, 1]
    return {"kind": kind, "speed": _slope(points, length), "points": len(points),
            "duration": float(np.ptp(points[:, 0])),
            "s": float(np.mod(ref + np.mean(_wrap(points[:, 1] - ref, length)), length)),
            "lateral": float(points[:, 2].mean())}


def scan_objects(t: np.ndarray, s: np.ndarray, lat: np.ndarray, length: float) -> list[dict[str, Any]]:
    """Obstacles and traffic in the detections: ``[{"kind", "speed", "s", "lateral", "points", "duration"}]``.

    Detections are linked over time into fragments (``_link``). Traffic passing in front of an
    obstacle hides it, so one obstacle is often seen in short fragments whose own slopes are
    noisy (the hit point slides round it as the view turns). So the fragments that stay within
    ``SAME_OBJECT`` along the route are pooled by place first; a pool with at least
    ``MIN_TRACK`` detections and seconds whose slope is below ``STILL_SPEED`` is an obstacle
    (``kind="obstacle"``). Any other fragment of that size moving forward faster than
    ``STILL_SPEED`` is a traffic vehicle (``kind="traffic"``).
    """
    fragments = [f for f in _link(t, s, lat, length) if len(f) >= 2]
    pools: list[list[np.ndarray]] = []
    places: list[dict[str, Any]] = []  # the summary of each pool's first fragment
    for f in fragments:
        if np.ptp(_unwrapped(f, length)) >= SAME_OBJECT:
            continue
        here = _summary(f, length, "")
        for pool, there in zip(pools, places, strict=True):
            if abs(float(_wrap(here["s"] - there["s"], length))) < SAME_OBJECT \
                    and abs(here["lateral"] - there["lateral"]) < SAME_OBJECT:
                pool.append(f)
                break
        else:
            pools.append([f])
            places.append(here)
    out: list[dict[str, Any]] = []
    still: set[int] = set()
    for pool in pools:
        points = np.concatenate(pool)
        points = points[np.argsort(points[:, 0], kind="stable")]
        if len(points) >= MIN_TRACK[0] and np.ptp(points[:, 0]) >= MIN_TRACK[1] \
                and abs(_slope(points, length)) < STILL_SPEED:
            out.append(_summary(points, length, "obstacle"))
            still.update(id(f) for f in pool)
    for f in fragments:
        if id(f) not in still and len(f) >= MIN_TRACK[0] and np.ptp(f[:, 0]) >= MIN_TRACK[1] \
                and _slope(f, length) >= STILL_SPEED:
            out.append(_summary(f, length, "traffic"))
    return out


def obstacle_count(seen: int, coverage: float, slots: int = _OBSTACLES_MAX) -> int | None:
    """The obstacle count when ``seen`` obstacles were seen over ``coverage`` of the obstacle span, or None.

    The span runs from 6 m ahead of the episode's start to 4 m behind it, in ``slots`` equal
    slots (module docstring); ``None`` when slot ``seen`` was not reached to its end, so that
    more obstacles may stand beyond the scan.
    """
    if seen >= slots or coverage >= (seen + 0.8) / slots:
        return min(seen, slots)
    return None


def obstacles_and_traffic(episode: Episode) -> dict[str, float]:
    """``obstacles``, ``traffic_speed`` (when seen) and the diagnostics ``scan_coverage``, ``obstacles_seen``.

    See the module docstring. ``scan_coverage`` is the fraction of the lap's obstacle span that
    came within the scan's range; ``obstacles`` is left out while the count is only a lower bound.
    """
    t, s, lat, length = scan_detections(episode)
    objects = scan_objects(t, s, lat, length)
    merged = [o for o in objects if o["kind"] == "obstacle"]
    moving = [o for o in objects if o["kind"] == "traffic"]
    car_s, _, _ = route_coordinates(episode.route, episode.base_pos[:, :2])  # type: ignore[index,arg-type]
    travelled = float(np.sum(np.clip(_wrap(np.diff(car_s), length), 0.0, None)))
    rmax = float(episode.scan_range_max or np.nanmax(episode.scan))  # type: ignore[arg-type]
    span = length - sum(_SLOTS)
    coverage = float(np.clip((travelled + rmax - _SLOTS[0]) / span, 0.0, 1.0))
    out = {"scan_coverage": coverage, "obstacles_seen": float(len(merged))}
    count = obstacle_count(len(merged), coverage)
    if count is not None:
        out["obstacles"] = float(count)
    if moving:  # the median over the moving tracks' detections: a short, mixed-up track weighs little
        speed = np.asarray([tr["speed"] for tr in moving])
        weight = np.cumsum(np.asarray([tr["points"] for tr in moving])[np.argsort(speed)])
        out["traffic_speed"] = float(np.sort(speed)[np.searchsorted(weight, 0.5 * weight[-1])])
    return out


def scenario_from_episode(episode: Episode) -> dict[str, float]:
    """``{name: value}`` of the scenario parameters ``episode`` measures (module docstring); may be empty."""
    if episode.route is None or len(episode.route) < 3:
        return {}
    route = episode.route
    out = {"max_curvature": route_max_curvature(route[:, :2], route[:, 2]),
           "half_width": float(np.median(route[:, 3]))}
    if episode.scan is not None and episode.base_pos is not None and episode.base_quat is not None:
        read = obstacles_and_traffic(episode)
        out.update({k: v for k, v in read.items() if k in ("obstacles", "traffic_speed")})
    return out


def sim_scan_episode(env: Any, steps: int, speed: float = 1.8, lookahead: float = 1.2) -> Episode:
    """World 0 of a driving ``TaskEnv`` driven along its centreline, as an ``Episode`` of what a bag gives.

    A pure-pursuit controller (privileged: the task's own route position) follows the centreline
    at ``speed`` m/s for ``steps`` control steps. The task's collisions are geometric, so the car
    drives on through obstacles and traffic; nothing ends the episode early. The episode holds the
    fields the scan reading uses: time, odometry pose, the scan, its angles and range, the route.
    Tests and ``benchmarks/twin.py scan_scenario`` use it. On a robot the same fields come from
    its bag: ``/scan``, ``/odom`` and the latched route, which ``robotrl-sim-robot`` publishes too
    (``load_episode`` reads the scan onto the state grid).
    """
    from pathlib import Path

    import torch
    from robotrl.tasks.driving import constants as C
    from robotrl.tasks.driving import robot_io

    from robotrl.twin.episode import Episode

    task, zero = env.task, torch.zeros(1, dtype=torch.long)
    states = steps + 1  # the state before each action and after the last
    t, pos, quat = np.zeros(states), np.zeros((states, 3)), np.zeros((states, 4))
    rows = []
    _, center, heading, half_width = robot_io.sim_route(task)
    with torch.no_grad():
        for k in range(states):
            qpos = task.qpos[0].double().cpu().numpy()
            t[k], pos[k], quat[k] = k * env.step_dt, qpos[:3], qpos[3:7]
            rows.append(task.rays[0].double().cpu().numpy())
            if k == steps:
                break
            goal, _ = task.bank.point_at(task.track_id[zero], task.s[zero] + lookahead)
            rel = goal[0] - task.qpos[0, :2].float()
            yaw = float(_yaw(quat[k:k + 1])[0])
            x = math.cos(yaw) * float(rel[0]) + math.sin(yaw) * float(rel[1])
            y = -math.sin(yaw) * float(rel[0]) + math.cos(yaw) * float(rel[1])
            steer = math.atan(C.WHEELBASE * 2.0 * y / max(x * x + y * y, 1e-4)) / C.MAX_STEER
            throttle = speed / C.TOP_SPEED + 1.5 * (speed - float(task.v_fwd[0]))
            action = torch.zeros(env.num_envs, 2)
            action[0] = torch.tensor([steer, throttle]).clamp(-1.0, 1.0)
            task.apply_action(action)
            env.sim.step(env.cfg.frame_skip)
            task.update(env.gen)
    scan = np.stack(rows)
    zeros = np.zeros((states, 1))
    return Episode(path=Path("sim/world0"), robot="driving_sim", task="driving", joint_names=["steering"], t=t,
                   q=zeros, dq=zeros, tau=zeros, command=zeros[1:], command_held=np.zeros(steps, dtype=bool),
                   base_pos=pos, base_quat=quat, scan=scan, scan_angles=task.ray_angles.double().cpu().numpy(),
                   scan_range_max=float(task.cfg.ray_range),
                   route=np.column_stack([center, heading, half_width]))
