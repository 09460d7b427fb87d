import pytest

from tests.deploy.helpers import make_humanoid_checkpoint


@pytest.fixture(scope="session")
def humanoid_export(tmp_path_factory):
    """(run_dir, onnx_path, spec_path) of an exported untrained humanoid policy."""
    pytest.importorskip("onnxruntime")
    from robotrl.export.onnx import export_policy

    run = make_humanoid_checkpoint(tmp_path_factory.mktemp("humanoid_run"))
    onnx_path, spec_path = export_policy(str(run))
    return run, onnx_path, spec_path
