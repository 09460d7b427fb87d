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

The obstacles, the traffic speed and the friction are not read: the bag has the lidar scan
but nothing that tells a parked car from traffic or gives the road's grip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from robotrl.twin.episode import Episode


def route_max_curvature(center: np.ndarray, heading: np.ndarray) -> float:
    """Largest ``|d heading / d s|`` (1/m) of a closed route: ``center`` ``(M, 2)``, ``heading`` ``(M,)`` rad."""
    turn = (np.roll(heading, -1) - np.roll(heading, 1) + np.pi) % (2 * np.pi) - np.pi  # as route.wrap_angle
    chords = np.linalg.norm(np.roll(center, -1, axis=0) - np.roll(center, 1, axis=0), axis=1)
    return float(np.max(np.abs(turn) / np.maximum(chords, 1e-9)))


def scenario_from_episode(episode: Episode) -> dict[str, float]:
    """``{name: value}`` of the scenario parameters ``episode`` measures (module docstring); may be empty."""
    if episode.route is None or len(episode.route) < 3:
        return {}
    route = episode.route
    return {"max_curvature": route_max_curvature(route[:, :2], route[:, 2]),
            "half_width": float(np.median(route[:, 3]))}
