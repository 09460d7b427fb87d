"""Cyclone DDS transport: ROS 2 naming, QoS matching, arrival stamps, and the localhost-only option."""

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("cyclonedds")

from robotrl.deploy import msgs  # noqa: E402
from robotrl.deploy.dds import LOCALHOST_CONFIG, dds_topic_name, type_hash_user_data  # noqa: E402
from robotrl.deploy.transport import COMMAND_QOS, RELIABLE_QOS, SENSOR_QOS  # noqa: E402

from tests.deploy.helpers import free_domain  # noqa: E402


def test_ros_names_and_type_hash():
    assert dds_topic_name("/joint_states") == "rt/joint_states"
    with pytest.raises(ValueError, match="fully qualified"):
        dds_topic_name("joint_states")
    assert msgs.JointState.__idl_typename__ == "sensor_msgs::msg::dds_::JointState_"
    assert type_hash_user_data("sensor_msgs/msg/JointState").startswith(b"typehash=RIHS01_")


def test_best_effort_reader_matches_reliable_writer_and_stamps_arrival():
    from robotrl.deploy.dds import CycloneTransport

    tr = CycloneTransport(domain_id=free_domain(), localhost_only=True)
    sub = tr.subscription("/joint_states", msgs.JointState, SENSOR_QOS)  # BEST_EFFORT reader
    pub = tr.publisher("/joint_states", msgs.JointState, COMMAND_QOS)  # RELIABLE writer
    end = time.monotonic() + 5
    while pub.matched() == 0 and time.monotonic() < end:
        time.sleep(0.01)
    assert pub.matched() == 1 and sub.matched() == 1
    sent = time.monotonic()
    pub.publish(msgs.JointState(name=["a"], position=[1.5]))
    got, end = [], time.monotonic() + 30
    while not got and time.monotonic() < end:
        time.sleep(0.05)  # the sample arrives while the test sleeps ...
        before_take = time.monotonic()
        got = sub.take()
    assert len(got) == 1 and got[0][1].position == [1.5]
    assert sent <= got[0][0] <= before_take  # ... and carries its arrival time, not the time of take()
    assert sub.take() == []
    assert [t.name for t in tr.receive_threads()] == ["dds-receive"]  # the thread an rt_priority node raises
    tr.close()
    assert tr.receive_threads() == []


CHILD = """
import os, subprocess, time
from robotrl.deploy import msgs
from robotrl.deploy.dds import CycloneTransport
from robotrl.deploy.transport import RELIABLE_QOS
tr = CycloneTransport(domain_id={domain}, localhost_only=True)
pub = tr.publisher("/ping", msgs.Bool, RELIABLE_QOS)
end = time.monotonic() + 10
while pub.matched() == 0 and time.monotonic() < end:
    time.sleep(0.01)
pub.publish(msgs.Bool(data=True))
time.sleep(0.3)
print("URI", os.environ["CYCLONEDDS_URI"] == {config!r})
ss = subprocess.run(["ss", "-uapn"], capture_output=True, text=True).stdout
mine = [l.split()[3] for l in ss.splitlines() if f"pid={{os.getpid()}}," in l]
print("BOUND", " ".join(sorted(a.rsplit(":", 1)[0] for a in mine)))
"""


def test_localhost_only_across_processes():
    from robotrl.deploy.dds import CycloneTransport

    domain = free_domain()
    tr = CycloneTransport(domain_id=domain, localhost_only=True)
    sub = tr.subscription("/ping", msgs.Bool, RELIABLE_QOS)
    out = subprocess.run([sys.executable, "-c", CHILD.format(domain=domain, config=LOCALHOST_CONFIG)],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "CYCLONEDDS_URI": ""})
    assert out.returncode == 0, out.stderr
    got, end = [], time.monotonic() + 30
    while not got and time.monotonic() < end:
        got = sub.take()
        time.sleep(0.01)
    assert [m.data for _, m in got] == [True]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["URI"] == "True"
    # Cyclone listens on the wildcard address but binds every socket it sends from to loopback;
    # with multicast off and only 127.0.0.1 advertised, no traffic leaves the host.
    assert set(lines["BOUND"].split()) <= {"0.0.0.0", "127.0.0.1"}
    assert "127.0.0.1" in lines["BOUND"].split()
    tr.close()
