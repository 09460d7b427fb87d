import mujoco
import numpy as np
import pytest
import torch

from robotrl.sim import SimConfig, make_sim

XML = """
<mujoco>
  <option solver="Newton"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <geom name="wall" type="box" pos="2 0 0.5" size="0.1 1 0.5"/>
    <body name="ball" pos="0 0 0.5">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
    <body name="slider" pos="0 2 0.5">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="x" gear="1"/></actuator>
</mujoco>
"""


@pytest.fixture
def sim():
    return make_sim(mujoco.MjModel.from_xml_string(XML), SimConfig(num_envs=3, nthread=2))


def test_bind_is_a_zero_copy_view(sim):
    ctrl = sim.bind("ctrl")
    assert ctrl.shape == (3, 1) and sim.bind("ctrl") is ctrl
    ctrl[:, 0] = torch.tensor([0.0, 1.0, -1.0])
    sim.step(50)
    x = sim.bind("qpos")[:, 7]
    assert x[0] == 0.0 and x[1] > 0 > x[2]


def test_reset_to_given_state_and_derived_fields(sim):
    ids = torch.tensor([1])
    qpos = sim.bind("qpos")[1:2].clone()
    qpos[0, :3] = torch.tensor([0.5, 0.0, 2.0], dtype=qpos.dtype)
    sim.reset(ids, qpos=qpos)
    assert sim.bind("qpos")[1, 2] == 2.0
    ball = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, "ball")
    assert torch.allclose(sim.bind("xpos")[1, ball], torch.tensor([0.5, 0.0, 2.0], dtype=torch.float64))


def test_per_world_model_field(sim):
    ball = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, "ball")
    mass = sim.model_field("body_mass")[:2].clone()
    mass[1, ball] = 5.0
    sim.set_model_field("body_mass", torch.tensor([0, 1]), mass)
    assert sim.model_field("body_mass")[:, ball].tolist() == [1.0, 5.0, 1.0]


def test_ray_distance_to_a_known_wall(sim):
    pnt = torch.tensor([[[0.0, 0.0, 0.5]]], dtype=torch.float64).expand(3, 1, 3).contiguous()
    vec = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=torch.float64).expand(3, 1, 3).contiguous()
    ball = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, "ball")
    dist = sim.ray(pnt, vec, bodyexclude=ball)
    assert np.allclose(dist.numpy(), 1.9)  # wall face at x = 2 - 0.1


def test_nan_world_is_reported(sim):
    sim.bind("qvel")[0, 0] = float("nan")
    bad = sim.step(1)
    assert bad.tolist() == [0]


def test_healthy_step_reports_no_world(sim):
    for _ in range(3):
        bad = sim.step(5)
        assert bad.dtype == torch.int64 and bad.tolist() == []


@pytest.mark.parametrize("value", [float("inf"), -1.0e5])
def test_infinite_or_diverged_velocity_reports_only_that_world(sim, value):
    sim.step(1)
    sim.bind("qvel")[2, 6] = value  # the slider: inf is caught before the step, 1e5 > divergence_threshold after
    assert sim.step(1).tolist() == [2]
    sim.reset(torch.tensor([2]))
    assert sim.step(1).tolist() == []


def test_reset_writes_float32_states_into_the_given_worlds_only(sim):
    before = sim.bind("qpos").clone()
    qpos = before[[0, 2]].float()
    qpos[:, 7] = torch.tensor([0.25, -0.5])
    sim.reset(torch.tensor([0, 2], dtype=torch.int32), qpos=qpos)
    x = sim.bind("qpos")[:, 7]
    assert x.tolist() == [0.25, before[1, 7].item(), -0.5]
    assert sim.bind("qvel")[[0, 2]].abs().max() == 0.0


RESET_XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="ball" pos="0 0 0.5">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
    <body name="target" mocap="true" pos="1 1 1"><geom type="sphere" size=".05" contype="0" conaffinity="0"/></body>
    <body name="slider" pos="0 2 0.5">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator><general joint="x" dyntype="integrator" gainprm="5"/></actuator>
</mujoco>
"""
STATE = ("time", "qpos", "qvel", "act", "qacc_warmstart", "ctrl", "qfrc_applied", "xfrc_applied", "mocap_pos",
         "mocap_quat")


def reset_by_mujoco(sim, ids, qpos, qvel):
    """What ``reset(ids, qpos, qvel)`` must equal: mujoco.batch's own reset, the state written, a forward."""
    ids_np = ids.numpy().astype(np.int32)
    sim._batch.reset(ids=ids_np, stage=mujoco.mjtStage.mjSTAGE_NONE)
    sim.bind("qpos")[ids], sim.bind("qvel")[ids] = qpos, qvel
    sim._batch.forward(ids=ids_np)


@pytest.mark.parametrize("randomized", [False, True])
def test_reset_to_a_state_equals_mujocos_reset_then_the_writes(randomized):
    model = mujoco.MjModel.from_xml_string(RESET_XML)
    ours, ref = (make_sim(model, SimConfig(num_envs=3, nthread=2)) for _ in range(2))
    ids = torch.tensor([0, 2])
    for sim in (ours, ref):
        if randomized:  # a reset input: the mocap body's default position, in worlds ids
            body_pos = torch.from_numpy(model.body_pos.copy()).expand(2, -1, -1).clone()
            body_pos[:, model.body("target").id] = torch.tensor([3.0, 2.0, 1.0])
            sim.set_model_field("body_pos", ids, body_pos)
        sim.bind("ctrl")[:] = 1.0
        sim.bind("qfrc_applied")[:, 0] = 2.0
        sim.bind("mocap_pos")[:] = 0.3
        sim.step(20)
    qpos = ref.bind("qpos")[ids].clone()
    qpos[:, 2] += 0.25
    qvel = torch.full((2, ref.bind("qvel").shape[1]), 0.1, dtype=torch.float64)
    ours.reset(ids, qpos, qvel)
    reset_by_mujoco(ref, ids, qpos, qvel)
    for field in (*STATE, "xpos", "qacc"):
        assert torch.equal(ours.bind(field), ref.bind(field)), field
    assert ours.bind("act")[ids].abs().max() == 0 and ours.bind("act")[1] != 0  # only ids were reset
    want = [3.0, 2.0, 1.0] if randomized else [1.0, 1.0, 1.0]
    assert ours.bind("mocap_pos")[0, 0].tolist() == want
    for sim in (ours, ref):
        sim.step(5)
    assert torch.equal(ours.bind("qpos"), ref.bind("qpos"))


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="valid choices: cpu, warp"):
        make_sim(mujoco.MjModel.from_xml_string(XML), SimConfig(backend="bullet"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_warp_without_cuda_says_what_to_do():
    with pytest.raises(RuntimeError, match="sim=cpu"):
        make_sim(mujoco.MjModel.from_xml_string(XML), SimConfig(backend="warp"))


def test_warp_on_its_cpu_device_is_not_refused_for_lack_of_cuda():
    # sim.device=cpu: MuJoCo Warp's CPU device; without the gpu extra the error names it instead
    try:
        sim = make_sim(mujoco.MjModel.from_xml_string(XML), SimConfig(backend="warp", num_envs=2, device="cpu"))
    except ImportError as err:
        assert "gpu" in str(err)
    else:
        assert sim.device == torch.device("cpu") and sim.step(1).numel() == 0
