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


def _sim_episode(seed: int, scenario: dict[str, float], steps: int):
    import torch
    from robotrl.tasks.driving.bag_scenario import sim_scan_episode

    from robotrl.twin.record import make_task_env

    env = make_task_env("driving", seed=seed)
    env.task.apply_scenario(torch.tensor([0]), {k: torch.tensor([v]) for k, v in scenario.items()}, env.gen)
    return sim_scan_episode(env, steps)


@pytest.mark.parametrize(("seed", "obstacles", "speed"), [(3, 0.0, 0.5), (4, 2.0, 1.0), (7, 3.0, 1.4)])
def test_a_lap_of_scans_counts_the_obstacles_and_measures_the_traffic_speed(seed, obstacles, speed):
    from robotrl.tasks.driving.bag_scenario import obstacles_and_traffic

    got = obstacles_and_traffic(_sim_episode(seed, {"obstacles": obstacles, "traffic_speed": speed}, 600))
    assert got["scan_coverage"] == 1.0
    assert got["obstacles"] == obstacles
    assert got["traffic_speed"] == pytest.approx(speed, abs=0.15)
    assert set(scenario_from_episode(_sim_episode(seed, {"obstacles": obstacles}, 30))) == {
        "max_curvature", "half_width"}  # 1.5 s of scans: too little to count or to see traffic move


def test_a_short_bag_gives_the_obstacles_seen_but_no_count():
    from robotrl.tasks.driving.bag_scenario import obstacles_and_traffic

    got = obstacles_and_traffic(_sim_episode(6, {"obstacles": 3.0, "traffic_speed": 0.8}, 200))
    assert 0.25 < got["scan_coverage"] < 0.6
    assert "obstacles" not in got  # more may stand beyond the scan
    assert got["obstacles_seen"] >= 1


def test_obstacle_count_needs_the_slot_after_the_last_seen_obstacle():
    from robotrl.tasks.driving.bag_scenario import obstacle_count

    # three slots of the span: obstacle i in [(i + 0.2) / 3, (i + 0.8) / 3]
    assert obstacle_count(1, 0.5) is None  # slot 1 ends at 0.6: a second obstacle may be beyond
    assert obstacle_count(1, 0.6) == 1
    assert obstacle_count(0, 0.2) is None and obstacle_count(0, 0.27) == 0  # slot 0 ends at 0.2667
    assert obstacle_count(3, 0.1) == 3  # all the slots are taken: nothing more can stand beyond


def test_objects_tell_an_obstacle_seen_in_pieces_from_traffic_moving_along_the_route():
    from robotrl.tasks.driving.bag_scenario import scan_objects

    t = np.repeat(np.arange(40) * 0.05, 2)
    s = np.stack([np.full(40, 10.0), 5.0 + 0.9 * np.arange(40) * 0.05], axis=1).ravel()
    lat = np.tile([0.3, -0.1], 40)
    keep = np.ones(80, dtype=bool)
    keep[2 * np.arange(5, 40, 4)] = False  # the obstacle is missed in some scans (sparse rays)
    keep[2 * np.arange(12, 30)] = False  # and hidden for 0.9 s in the middle: two fragments, one obstacle
    objects = sorted(scan_objects(t[keep], s[keep], lat[keep], 40.0), key=lambda o: o["speed"])
    assert [o["kind"] for o in objects] == ["obstacle", "traffic"]
    assert objects[0]["speed"] == pytest.approx(0.0, abs=1e-9) and objects[0]["s"] == pytest.approx(10.0)
    assert objects[1]["speed"] == pytest.approx(0.9) and objects[1]["lateral"] == pytest.approx(-0.1)
    slow = scan_objects(np.arange(20) * 0.05, 3.0 + 0.4 * np.arange(20) * 0.05, np.zeros(20), 40.0)
    assert [o["kind"] for o in slow] == ["traffic"]  # 0.4 m in a second: not still, though within SAME_OBJECT


def test_a_laser_scan_in_a_bag_is_read_onto_the_state_grid(tmp_path):
    pytest.importorskip("rosbags")
    pytest.importorskip("cyclonedds")
    from robotrl.deploy import msgs
    from robotrl.deploy.profile import load_profile
    from robotrl.deploy.recorder import EpisodeBag

    from robotrl.twin.episode import BagError, load_episode

    profile = load_profile("driving_sim")
    names = list(profile.joints.names)

    def write(path, ray_counts):
        bag = EpisodeBag(path, {"robot_profile": profile.name, "task": "driving"})
        for k in range(4):
            log_ns = 10**9 + k * 50_000_000
            header = msgs.Header(stamp=msgs.stamp(k * 0.05), frame_id="")
            bag.write(profile.topics.joint_states, msgs.JointState(header=header, name=names,
                                                                   position=[0.0] * len(names),
                                                                   velocity=[0.0] * len(names),
                                                                   effort=[0.0] * len(names)), log_ns)
            if k >= 1:  # the first scan comes with the second state
                ranges = [float("inf") if k == 2 and r == 0 else 1.0 + k + 0.25 * r for r in range(ray_counts[k])]
                bag.write(profile.topics.scan, msgs.LaserScan(header=msgs.Header(header.stamp, "laser"),
                                                              angle_min=-0.5, angle_max=0.5, angle_increment=0.5,
                                                              range_max=6.0, ranges=ranges), log_ns + 50)
            bag.write(profile.output.topic, msgs.Float64MultiArray(data=[0.0] * len(names)), log_ns + 1000)
        return bag.close()

    ep = load_episode(write(tmp_path / "ok", [3, 3, 3, 3]))
    assert ep.scan.shape == (4, 3) and np.isnan(ep.scan[0]).all()
    np.testing.assert_allclose(ep.scan[1], [2.0, 2.25, 2.5])
    np.testing.assert_allclose(ep.scan[2], [6.0, 3.25, 3.5])  # +inf (no return) reads as a miss at range_max
    np.testing.assert_allclose(ep.scan_angles, [-0.5, 0.0, 0.5])
    assert ep.scan_range_max == 6.0
    with pytest.raises(BagError, match=r"/scan.*changed its rays"):
        load_episode(write(tmp_path / "changed", [3, 3, 2, 3]))


def test_a_clear_lap_reads_no_obstacles_and_no_traffic_speed():
    from robotrl.tasks.driving.bag_scenario import obstacles_and_traffic

    phi = np.linspace(0, 2 * np.pi, 400, endpoint=False)  # a circle of radius 8 m: a 50.3 m lap
    route = np.column_stack([8.0 * np.cos(phi), 8.0 * np.sin(phi), phi + np.pi / 2, np.full(400, 0.6)])
    steps = 400  # 2 m/s for 20 s: 40 m along the lap
    a = 2.0 * np.arange(steps) * 0.05 / 8.0
    pos = np.column_stack([8.0 * np.cos(a), 8.0 * np.sin(a), np.zeros(steps)])
    yaw = a + np.pi / 2
    quat = np.column_stack([np.cos(yaw / 2), np.zeros(steps), np.zeros(steps), np.sin(yaw / 2)])
    scan = np.full((steps, 15), 6.0)  # every ray a miss
    zeros = np.zeros((steps, 1))
    ep = Episode(path=Path("bags/clear"), robot="driving_sim", task="driving", joint_names=["j"],
                 t=np.arange(steps) * 0.05, q=zeros, dq=zeros, tau=zeros, command=zeros[1:],
                 command_held=np.zeros(steps - 1, dtype=bool), base_pos=pos, base_quat=quat, scan=scan,
                 scan_angles=np.linspace(-np.pi / 2, np.pi / 2, 15), scan_range_max=6.0, route=route)
    got = obstacles_and_traffic(ep)
    # (39.9 m travelled + 6 m of range - 6 m) / (50.3 m - 10 m) of the span, past slot 0's end (0.267)
    assert got["scan_coverage"] == pytest.approx(39.9 / 40.27, abs=0.01)
    assert got["obstacles_seen"] == 0 and got["obstacles"] == 0
    assert "traffic_speed" not in got
