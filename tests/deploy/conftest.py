"""Deploy test fixtures. Every DDS participant in these tests stays on loopback.

``CYCLONEDDS_URI`` is pinned to the loopback-only, no-multicast config before any
participant exists, so in-process transports and every child process (which inherit the
environment) confine discovery and data to 127.0.0.1, whatever a test passes.
"""

import os

import pytest
from robotrl.deploy.dds import LOCALHOST_CONFIG

os.environ["CYCLONEDDS_URI"] = LOCALHOST_CONFIG

from tests.deploy.helpers import make_humanoid_checkpoint  # noqa: E402 - after the URI pin


@pytest.fixture(scope="session")
def humanoid_export(tmp_path_factory):
    """(run_dir, onnx_path, spec_path) of an exported untrained humanoid policy."""
    pytest.importorskip("onnxruntime")
    from robotrl.export.onnx import export_policy

    run = make_humanoid_checkpoint(tmp_path_factory.mktemp("humanoid_run"))
    onnx_path, spec_path = export_policy(str(run))
    return run, onnx_path, spec_path
