"""Deploy test fixtures. Every DDS participant in these tests stays on loopback, on private domains.

Before any participant exists:

* ``CYCLONEDDS_URI`` is pinned to robotrl's loopback-only, no-multicast config (with the
  Fast DDS type-information compatibility setting), so in-process transports and every child
  process (which inherit the environment) confine Cyclone to 127.0.0.1;
* ``FASTDDS_DEFAULT_PROFILES_FILE`` points at robotrl's Fast DDS loopback profile (UDPv4 on
  127.0.0.1 only, builtin transports off) and ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, for
  rclpy (``robotrl[ros2]``, Fast DDS) in process and in children;
* ``ROS_PYTHON_CHECK_FIELDS=1`` makes rclpy assert on any field of the wrong type.
"""

import os

import pytest
from robotrl.deploy.dds import LOCALHOST_CONFIG
from robotrl.deploy.interop import write_fastdds_loopback_profile

os.environ["CYCLONEDDS_URI"] = LOCALHOST_CONFIG
os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(write_fastdds_loopback_profile())  # the shared per-user file
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_PYTHON_CHECK_FIELDS"] = "1"

from tests.deploy.helpers import (  # noqa: E402 - after the pin
    make_driving_checkpoint,
    make_humanoid_checkpoint,
    make_tool_use_checkpoint,
)


@pytest.fixture(scope="session")
def humanoid_export(tmp_path_factory):
    """(run_dir, onnx_path, spec_path) of an exported untrained humanoid policy."""
    pytest.importorskip("onnxruntime")
    from robotrl.export.onnx import export_policy

    run = make_humanoid_checkpoint(tmp_path_factory.mktemp("humanoid_run"))
    onnx_path, spec_path = export_policy(str(run))
    return run, onnx_path, spec_path


@pytest.fixture(scope="session")
def driving_export(tmp_path_factory):
    """(run_dir, onnx_path, spec_path) of an exported untrained driving policy."""
    pytest.importorskip("onnxruntime")
    from robotrl.export.onnx import export_policy

    run = make_driving_checkpoint(tmp_path_factory.mktemp("driving_run"))
    onnx_path, spec_path = export_policy(str(run))
    return run, onnx_path, spec_path


@pytest.fixture(scope="session")
def tool_use_export(tmp_path_factory):
    """(run_dir, onnx_path, spec_path) of an exported untrained tool_use policy (KUKA iiwa arm)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("pybullet_data", reason="the KUKA iiwa model ships with pybullet: pip install pybullet")
    from robotrl.export.onnx import export_policy

    run = make_tool_use_checkpoint(tmp_path_factory.mktemp("tool_use_run"))
    onnx_path, spec_path = export_policy(str(run))
    return run, onnx_path, spec_path
