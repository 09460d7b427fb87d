"""Parity of the MuJoCo Warp backend with mujoco.batch: same model, same actions, same trajectory.

On CUDA (``-m gpu``) this is the real check. Warp also runs its kernels on the CPU, slowly,
so ``-m slow`` exercises the same backend code here; compiling the kernels takes minutes cold.
"""

import pytest
import torch

from robotrl.sim import SimConfig
from robotrl.sim.mujoco_cpu import CpuBatchSim

mjw = pytest.importorskip("mujoco_warp", reason="needs the gpu extra: pip install 'robotrl[gpu]'")


def _humanoid():
    from robotrl.tasks.humanoid.config import HumanoidConfig
    from robotrl.tasks.humanoid.task import HumanoidTask

    return HumanoidTask(HumanoidConfig(), 1, torch.device("cpu")).build_model()


def _parity(device: str, nworld: int, steps: int, graph: bool) -> None:
    from robotrl.sim.mujoco_warp import WarpBatchSim

    model = _humanoid()
    warp = WarpBatchSim(model, SimConfig(backend="warp", num_envs=nworld, device=device, cuda_graph=graph))
    cpu = CpuBatchSim(model, SimConfig(num_envs=nworld, nthread=2))
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        ctrl = (torch.rand(nworld, model.nu, generator=gen) - 0.5) * 0.8
        warp.bind("ctrl").copy_(ctrl.to(warp.device))
        cpu.bind("ctrl").copy_(ctrl)
        assert warp.step(5).numel() == 0 and cpu.step(5).numel() == 0
    err = (warp.bind("qpos").double().cpu() - cpu.bind("qpos")).abs().max().item()
    assert err < 1e-3, err  # float32 vs float64 over the same contacts
    # per-world randomization and masked reset behave as on the CPU backend
    mass = warp.model_field("body_mass")[:1] * 2.0
    warp.set_model_field("body_mass", torch.tensor([0]), mass)
    assert torch.allclose(warp.model_field("body_mass")[0].cpu(), mass[0].cpu())
    warp.reset(torch.tensor([1]))
    assert torch.allclose(warp.bind("qpos")[1].cpu().double(), torch.as_tensor(model.qpos0), atol=1e-6)
    assert not torch.allclose(warp.bind("qpos")[0].cpu().double(), torch.as_tensor(model.qpos0), atol=1e-3)


@pytest.mark.slow
def test_warp_cpu_device_matches_mujoco_batch():
    _parity("cpu", nworld=2, steps=20, graph=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_warp_cuda_graph_matches_mujoco_batch():
    _parity("cuda", nworld=64, steps=40, graph=True)
