"""robotrl.sim.backend: torch settings that depend on the device."""

import pytest
import torch

from robotrl.sim.backend import set_cuda_matmul


def test_set_cuda_matmul_leaves_cpu_precision_unchanged():
    before = torch.get_float32_matmul_precision()
    set_cuda_matmul(torch.device("cpu"), "tf32")
    assert torch.get_float32_matmul_precision() == before


def test_set_cuda_matmul_rejects_unknown_precision_naming_choices():
    with pytest.raises(ValueError, match="tf32, fp32"):
        set_cuda_matmul(torch.device("cpu"), "bf16")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_set_cuda_matmul_sets_tf32_then_fp32_on_cuda():
    before = torch.get_float32_matmul_precision()
    try:
        set_cuda_matmul(torch.device("cuda"), "tf32")
        assert torch.get_float32_matmul_precision() == "high"
        set_cuda_matmul(torch.device("cuda"), "fp32")
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)
