"""Every deploy message type serializes byte-for-byte like rosbags' ROS 2 CDR serializer.

rosbags is an independent implementation of the ROS 2 type system and CDR encoding, so
agreement on random, fully populated messages (odd string lengths, empty and long
sequences, nested structs) checks the type names' fields, order, widths and alignment.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("cyclonedds")
rosbags_typesys = pytest.importorskip("rosbags.typesys")

from robotrl.deploy import msgs  # noqa: E402

TS = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_HUMBLE)
BASE = {
    "float64": st.floats(allow_nan=False, width=64),
    "float32": st.floats(allow_nan=False, width=32),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "uint8": st.integers(0, 255),
    # ROS 2 ``byte`` is an octet; rosbags packs it signed, so draw the range both accept.
    "byte": st.integers(0, 127),
    "bool": st.booleans(),
    "string": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=9),
}
NP = {"float64": np.float64, "float32": np.float32, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32}


def _value(node: tuple, draw) -> object:
    kind, detail = node
    if kind == 1:
        return draw(BASE[detail[0]])
    if kind == 2:
        return _message(detail, draw)
    inner, size = detail
    n = size if kind == 3 else draw(st.integers(0, 5))
    items = [_value(inner, draw) for _ in range(n)]
    if inner[0] == 1 and inner[1][0] in NP:
        return np.array(items, dtype=NP[inner[1][0]])
    return items


def _message(ros_type: str, draw) -> object:
    _, fields = TS.fielddefs[ros_type]
    return TS.types[ros_type](**{name: _value(node, draw) for name, node in fields})


def from_rosbags(obj: object) -> object:
    """Convert a rosbags message into the deploy struct with the same ROS type."""
    if hasattr(obj, "__msgtype__"):
        cls = msgs.lookup(obj.__msgtype__)
        return cls(**{name: from_rosbags(getattr(obj, name)) for name in cls.__dataclass_fields__})
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, list):
        return [from_rosbags(x) for x in obj]
    return obj


def test_every_issue_type_is_defined():
    wanted = {
        "sensor_msgs/msg/JointState", "sensor_msgs/msg/Imu", "nav_msgs/msg/Odometry", "geometry_msgs/msg/Twist",
        "geometry_msgs/msg/TwistStamped", "std_msgs/msg/Float64MultiArray", "trajectory_msgs/msg/JointTrajectory",
        "std_msgs/msg/Bool", "geometry_msgs/msg/PoseStamped", "sensor_msgs/msg/Image",
        "sensor_msgs/msg/CompressedImage", "diagnostic_msgs/msg/DiagnosticArray",
    }
    assert wanted <= set(msgs.ROS_TYPES)


@pytest.mark.parametrize("ros_type", sorted(msgs.ROS_TYPES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cdr_bytes_match_rosbags(ros_type, data):
    reference = _message(ros_type, data.draw)
    ours = from_rosbags(reference)
    assert type(ours).__idl_typename__ == ros_type.replace("/msg/", "::msg::dds_::") + "_"
    expected = bytes(TS.serialize_cdr(reference, ros_type))
    assert ours.serialize() == expected
    # and the reverse direction: rosbags decodes our bytes to the same message
    assert from_rosbags(TS.deserialize_cdr(ours.serialize(), ros_type)) == ours


def test_lookup_names_the_supported_types():
    with pytest.raises(KeyError, match="sensor_msgs/msg/JointState"):
        msgs.lookup("sensor_msgs/msg/Nope")
