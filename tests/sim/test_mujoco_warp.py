"""Parity of the MuJoCo Warp backend with mujoco.batch: same model, same actions, same trajectory.

On CUDA (``-m gpu``) this is the real check. Warp also runs its kernels on the CPU, slowly,
so ``-m slow`` exercises the same backend code here; compiling the kernels takes minutes cold.
"""

import numpy as np
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
    worst = []
    for _ in range(steps):
        ctrl = (torch.rand(nworld, model.nu, generator=gen) - 0.5) * 0.8
        warp.bind("ctrl").copy_(ctrl.to(warp.device))
        cpu.bind("ctrl").copy_(ctrl)
        assert warp.step(5).numel() == 0 and cpu.step(5).numel() == 0
        worst.append((warp.bind("qpos").double().cpu() - cpu.bind("qpos")).abs().amax(1))
    # float32 against float64: on an H100, 64 worlds stayed within 1.1e-5 for 20 control steps (100 substeps);
    # later a chaotic world drifts (4.5e-4 at 30 steps, 1.3e-2 at 40) while the median stays below 1e-5
    assert max(float(w.max()) for w in worst[:20]) < 1e-4, [float(w.max()) for w in worst[:20]]
    assert float(worst[-1].median()) < 1e-4, float(worst[-1].median())
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


def _render_checks(device: str, nworld: int) -> None:
    from robotrl.sim.mujoco_warp import WarpBatchSim

    model = _humanoid()
    warp = WarpBatchSim(model, SimConfig(backend="warp", num_envs=nworld, device=device, cuda_graph=False))
    warp.step(5)
    frames = warp.render("track", torch.arange(nworld), (32, 48))
    assert frames.shape == (nworld, 32, 48, 3) and frames.dtype == np.uint8
    # the tracking camera sees the floor below the horizon and the body: not one flat colour
    assert frames.std() > 20 and len(np.unique(frames.reshape(-1, 3), axis=0)) > 8
    # one world picked out is the same image as in the batch (same state, same pixels)
    np.testing.assert_array_equal(warp.render("track", torch.tensor([1]), (32, 48))[0], frames[1])
    # the device-side frames (what TaskEnv puts in obs["image"]) are the same pixels, left on the sim's device
    tensor = warp.render_tensor("track", torch.arange(nworld), (32, 48))
    # "cuda" and "cuda:0" are one device but compare unequal: resolve the sim's device as torch places tensors
    assert tensor.device == torch.empty(0, device=warp.device).device and tensor.dtype == torch.uint8
    np.testing.assert_array_equal(tensor.cpu().numpy(), frames)
    with pytest.raises(KeyError, match="no camera 'nope'"):
        warp.render("nope", torch.tensor([0]), (32, 48))


@pytest.mark.slow
def test_warp_batch_render_gives_every_world_the_same_image_as_alone_on_the_cpu_device():
    _render_checks("cpu", nworld=2)


@pytest.mark.slow
def test_warp_free_camera_renders_through_opengl_as_array_and_tensor_on_the_cpu_device():
    from robotrl.sim.mujoco_warp import WarpBatchSim

    warp = WarpBatchSim(_humanoid(), SimConfig(backend="warp", num_envs=2, device="cpu", cuda_graph=False))
    frames = warp.render(-1, torch.tensor([1]), (24, 32))  # no batched form: world by world through OpenGL
    assert frames.shape == (1, 24, 32, 3) and frames.dtype == np.uint8 and frames.std() > 5
    tensor = warp.render_tensor(-1, torch.tensor([1]), (24, 32))
    assert tensor.device == warp.device
    np.testing.assert_array_equal(tensor.cpu().numpy(), frames)


@pytest.mark.slow
def test_warp_set_const_fields_are_applied_once_before_the_next_forward_on_the_cpu_device(monkeypatch):
    from robotrl.sim.mujoco_warp import WarpBatchSim

    model = _humanoid()
    warp = WarpBatchSim(model, SimConfig(backend="warp", num_envs=2, device="cpu", cuda_graph=False))
    calls = []
    original = mjw.set_const
    monkeypatch.setattr(mjw, "set_const", lambda m, d: (calls.append(1), original(m, d)))
    mass = warp.model_field("body_mass")[:1] * 3.0
    warp.set_model_field("body_mass", torch.tensor([0]), mass)
    warp.set_model_field("body_mass", torch.tensor([0]), mass)  # two writes, one set_const
    friction = warp.model_field("geom_friction")[:1]
    warp.set_model_field("geom_friction", torch.tensor([0]), friction)  # needs none
    assert calls == []
    warp.reset(torch.tensor([0]))  # forward: set_const first
    assert calls == [1]
    warp.step(1)
    assert calls == [1]  # nothing pending
    # world 0 keeps the mass written to it
    assert torch.allclose(warp.model_field("body_mass")[0], mass[0])


@pytest.mark.slow
def test_warp_set_const_derives_each_worlds_constants_from_its_own_masses_on_the_cpu_device():
    import mujoco
    import warp as wp

    from robotrl.sim.mujoco_warp import WarpBatchSim

    model = _humanoid()
    warp = WarpBatchSim(model, SimConfig(backend="warp", num_envs=3, device="cpu", cuda_graph=False,
                                         per_world_fields=["body_mass"]))
    warp.set_model_field("body_mass", torch.tensor([1]), warp.model_field("body_mass")[:1] * 3.0)
    warp.reset(torch.arange(3))  # set_const runs before this forward
    heavy = model.__copy__()
    heavy.body_mass[:] = model.body_mass * 3.0  # only the masses were written, as on world 1
    mujoco.mj_setConst(heavy, mujoco.MjData(heavy))
    invweight = wp.to_torch(warp.m.dof_invweight0).double().cpu()  # (3, nv): one row per world
    subtree = wp.to_torch(warp.m.body_subtreemass).double().cpu()
    assert invweight.shape[0] == 3 and subtree.shape[0] == 3
    # worlds 0 and 2 keep the model's constants; world 1 gets those of its own 3x masses, not the last writer's
    for world in (0, 2):
        np.testing.assert_allclose(invweight[world], model.dof_invweight0, rtol=1e-3)
        np.testing.assert_allclose(subtree[world], model.body_subtreemass, rtol=1e-5)
    np.testing.assert_allclose(invweight[1], heavy.dof_invweight0, rtol=1e-3)
    np.testing.assert_allclose(subtree[1], heavy.body_subtreemass, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_warp_batch_render_on_cuda_matches_single_world_images():
    _render_checks("cuda", nworld=64)
