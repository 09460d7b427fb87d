"""driving's scenario read off a bag: the recorded route's sharpest turn and its road half-width."""

from pathlib import Path

import numpy as np
import pytest
from robotrl.tasks.driving.bag_scenario import route_max_curvature, scenario_from_episode

from robotrl.twin.episode import Episode


def _episode(route=None) -> Episode:
    zeros = np.zeros((3, 1))
    return Episode(path=Path("bags/ep"), robot="driving_sim", task="driving", joint_names=["j"],
                   t=np.arange(3) * 0.05, q=zeros, dq=zeros, tau=zeros, command=zeros[1:],
                   command_held=np.zeros(2, dtype=bool), route=route)


def test_a_circle_of_radius_4_has_curvature_one_quarter_through_the_heading_wrap():
    phi = np.linspace(0, 2 * np.pi, 400, endpoint=False)
    center = 4.0 * np.stack([np.cos(phi), np.sin(phi)], axis=1)
    heading = np.angle(np.exp(1j * (phi + np.pi / 2)))  # crosses +-pi once
    route = np.column_stack([center, heading, np.full(400, 0.6)])
    route[7, 3] = 0.9  # one odd width point: the median ignores it
    got = scenario_from_episode(_episode(route))
    assert got["max_curvature"] == pytest.approx(0.25, rel=1e-3)
    assert got["half_width"] == pytest.approx(0.6)
    assert scenario_from_episode(_episode()) == {}


def test_the_estimate_is_within_2_percent_of_the_analytic_curvature_on_every_bank_track():
    from robotrl.twin.record import make_task_env

    tracks = make_task_env("driving").task.bank.tracks
    for track in tracks:
        heading = np.arctan2(track.tangent[:, 1], track.tangent[:, 0])
        true = float(np.abs(track.curvature).max())
        assert route_max_curvature(np.asarray(track.center, float), heading) == pytest.approx(true, rel=0.02)


def test_the_route_written_into_a_bag_is_read_back_with_its_tracks_curvature_and_width(tmp_path):
    pytest.importorskip("rosbags")
    pytest.importorskip("cyclonedds")  # the bag holds robotrl.deploy.msgs structs
    from robotrl.deploy import msgs
    from robotrl.deploy.profile import load_profile
    from robotrl.deploy.recorder import EpisodeBag
    from robotrl.tasks.driving import robot_io

    from robotrl.twin.episode import load_episode
    from robotrl.twin.record import make_task_env

    task = make_task_env("driving").task
    profile = load_profile("driving_sim")
    bag = EpisodeBag(tmp_path / "ep", {"robot_profile": profile.name, "task": "driving"})
    _, center, heading, half_width = robot_io.sim_route(task)  # world 0's track, as robotrl-sim-robot sends it
    names = list(profile.joints.names)
    for k in range(3):
        log_ns = 10**9 + k * 50_000_000
        header = msgs.Header(stamp=msgs.stamp(k * 0.05), frame_id="")
        if k == 0:
            bag.write(profile.topics.route, msgs.route_path(msgs.Header(header.stamp, "odom"), center, heading,
                                                            half_width), log_ns)
        bag.write(profile.topics.joint_states, msgs.JointState(header=header, name=names, position=[0.0] * len(names),
                                                               velocity=[0.0] * len(names),
                                                               effort=[0.0] * len(names)), log_ns + 100)
        bag.write(profile.output.topic, msgs.Float64MultiArray(data=[0.0] * len(names)), log_ns + 1000)
    ep = load_episode(bag.close())
    assert ep.route is not None and ep.route.shape == (len(center), 4)
    got = scenario_from_episode(ep)
    track = task.bank.tracks[int(task.track_id[0])]
    assert got["half_width"] == pytest.approx(float(track.half_width))
    assert got["max_curvature"] == pytest.approx(float(np.abs(track.curvature).max()), rel=0.02)
