import mujoco
import numpy as np
import torch

from robotrl.sim import SimConfig, make_sim
from robotrl.sim.render import BatchRenderer

XML = """
<mujoco>
  <worldbody>
    <light pos="0 0 3"/>
    <geom type="plane" size="2 2 0.1" rgba="0.3 0.3 0.3 1"/>
    <camera name="top" pos="0 0 2.5"/>
    <body name="box" pos="0 0 0.2">
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom name="box" type="box" size="0.2 0.2 0.2" rgba="0.9 0.2 0.2 1"/>
    </body>
  </worldbody>
</mujoco>
"""


def randomized_sim(n=3):
    """``n`` worlds whose box differs in position, size and colour."""
    sim = make_sim(mujoco.MjModel.from_xml_string(XML), SimConfig(num_envs=n, nthread=1))
    ids = torch.arange(n)
    box = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_GEOM, "box")
    size = sim.model_field("geom_size")
    size[:, box] = torch.tensor([[0.1, 0.1, 0.1], [0.3, 0.3, 0.3], [0.2, 0.4, 0.2]], dtype=size.dtype)[:n]
    sim.set_model_field("geom_size", ids, size)
    rgba = sim.model_field("geom_rgba")
    rgba[:, box] = torch.tensor([[0.9, 0.2, 0.2, 1], [0.2, 0.9, 0.2, 1], [0.2, 0.2, 0.9, 1]], dtype=rgba.dtype)[:n]
    sim.set_model_field("geom_rgba", ids, rgba)
    sim.reset(ids, qpos=torch.tensor([[-0.6], [0.0], [0.7]], dtype=torch.float64)[:n])
    return sim


def test_get_world_into_given_buffers_returns_them_with_that_worlds_state_and_fields():
    sim = randomized_sim()
    model, data = sim.get_world(0)
    box = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "box")
    for w in (2, 1):
        fresh_model, fresh_data = sim.get_world(w)
        m, d = sim.get_world(w, model, data)
        assert m is model and d is data
        np.testing.assert_array_equal(d.qpos, fresh_data.qpos)
        np.testing.assert_array_equal(d.geom_xpos, fresh_data.geom_xpos)
        np.testing.assert_array_equal(m.geom_size[box], fresh_model.geom_size[box])
        np.testing.assert_array_equal(m.geom_rgba[box], fresh_model.geom_rgba[box])


def test_render_worlds_with_reused_buffers_matches_fresh_copies_pixel_for_pixel():
    sim = randomized_sim()
    order = torch.tensor([2, 0, 1, 2, 0])
    frames = sim.render("top", order, (32, 32))
    reference = BatchRenderer(sim.model, size=(32, 32), lean=True)
    expected = [reference.render_data(*sim.get_world(int(w)), "top") for w in order]
    np.testing.assert_array_equal(frames, np.stack(expected))
    # the worlds really differ, so a frame left over from another world would fail the comparison
    assert not np.array_equal(frames[0], frames[1]) and not np.array_equal(frames[1], frames[2])
    np.testing.assert_array_equal(frames[0], frames[3])
    # a second call, after the state moved, renders the new state
    sim.reset(torch.tensor([0]), qpos=torch.tensor([[0.5]], dtype=torch.float64))
    again = sim.render("top", torch.tensor([0]), (32, 32))
    np.testing.assert_array_equal(again[0], reference.render_data(*sim.get_world(0), "top"))
    assert not np.array_equal(again[0], frames[1])


def test_a_sim_that_rendered_is_freed_when_dropped_without_waiting_for_the_cycle_collector():
    import gc
    import weakref

    sim = randomized_sim()
    sim.render("top", torch.tensor([0, 1]), (16, 16))
    ref = weakref.ref(sim)
    gc.disable()
    try:
        del sim
        assert ref() is None  # the renderer it owns refers back to it only weakly
    finally:
        gc.enable()
