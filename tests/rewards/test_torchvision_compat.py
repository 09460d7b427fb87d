"""The torchvision fix: declared nms/qnms schemas make torchvision, timm and open_clip importable."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

# Importing torchvision here would itself hit the bug: look it up without importing it.
_MISSING = [m for m in ("torchvision", "timm", "open_clip") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"needs the vlm extra (missing {_MISSING})")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_prepare_torchvision_makes_transforms_timm_and_open_clip_work():
    result = _run("""
        import torch
        from robotrl.rewards.torchvision_compat import prepare_torchvision
        state = prepare_torchvision()
        assert prepare_torchvision() == state  # idempotent
        import torchvision.transforms.functional as TF, timm, open_clip
        img = torch.rand(3, 40, 50)
        assert tuple(TF.resize(img, [20, 25], antialias=True).shape) == (3, 20, 25)
        net = timm.create_model("efficientnet_lite0", pretrained=False, num_classes=0)
        assert tuple(net(torch.rand(1, 3, 64, 64)).shape) == (1, 1280)
        assert "ViT-B-32" in open_clip.list_models()
        if state["declared_schemas"]:
            import torchvision.ops
            try:
                torchvision.ops.nms(torch.rand(2, 4), torch.rand(2), 0.5)
            except (NotImplementedError, RuntimeError) as err:
                print("nms unavailable:", type(err).__name__)
            else:
                raise AssertionError("a declared-only nms must not run")
        print("STATE", state)
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "STATE" in result.stdout


def test_plain_import_fails_without_the_fix_when_compiled_ops_do_not_load():
    probe = _run("""
        import torch, importlib.util, os
        path = os.path.join(os.path.dirname(importlib.util.find_spec("torchvision").origin), "_C.so")
        try:
            torch.ops.load_library(path); print("LOADS")
        except OSError:
            print("BROKEN")
    """)
    if "LOADS" in probe.stdout:
        pytest.skip("this torchvision's compiled ops load: nothing to fix here")
    result = _run("import torchvision")
    assert result.returncode != 0
    assert "torchvision::nms does not exist" in result.stderr
