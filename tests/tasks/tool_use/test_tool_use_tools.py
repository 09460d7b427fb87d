"""Procedural tool generator: determinism, size/density ranges, splits, and physics of every family."""

import mujoco
import numpy as np
import pytest
from robotrl.tasks.tool_use import tools as T


def test_same_seed_same_tools_and_different_seed_differs():
    a = T.tool_pool("train", 4, seed=3)
    b = T.tool_pool("train", 4, seed=3)
    c = T.tool_pool("train", 4, seed=4)
    assert a == b
    assert a != c
    # the generated MjSpec compiles to bit-identical models for the same seed
    ma, mb = T.tool_scene(a[0]).compile(), T.tool_scene(b[0]).compile()
    np.testing.assert_array_equal(ma.geom_size, mb.geom_size)
    np.testing.assert_array_equal(ma.body_mass, mb.body_mass)


@pytest.mark.parametrize("family", T.FAMILIES)
def test_sizes_and_densities_respect_family_ranges(family):
    ranges = T.FAMILY_RANGES[family]
    tools = [T.sample_tool(family, i, seed=11) for i in range(200)]
    lengths = np.array([2 * t.handle_half[0] for t in tools])
    lo, hi = ranges["handle_len"]
    assert lengths.min() >= lo and lengths.max() <= hi
    assert lengths.max() - lengths.min() > 0.5 * (hi - lo)  # the range is actually explored
    widths = np.array([t.handle_half[1] for t in tools])
    assert widths.min() >= ranges["handle_r"][0] and widths.max() <= ranges["handle_r"][1]
    dens = np.array([t.handle_density for t in tools])
    assert dens.min() >= 300.0 and dens.max() <= 600.0
    if ranges["head"] is None:
        assert all(t.head_half is None for t in tools)
    else:
        head_dens = np.array([t.head_density for t in tools])
        assert head_dens.min() >= 800.0 and head_dens.max() <= 2000.0
        for axis, (hlo, hhi) in enumerate(ranges["head"]):
            full = np.array([2 * t.head_half[axis] for t in tools])
            assert full.min() >= hlo and full.max() <= hhi
    shapes = {t.handle_shape for t in tools}
    p_box = ranges["p_box"]
    assert shapes == ({"box"} if p_box == 1 else {"cylinder"} if p_box == 0 else {"box", "cylinder"})


def test_hammer_handles_follow_methods_range():
    lengths = [2 * T.sample_tool("hammer", i).handle_half[0] for i in range(100)]
    assert 0.15 <= min(lengths) and max(lengths) <= 0.30


def test_splits_are_disjoint():
    train = T.tool_pool("train", 8)
    held = T.tool_pool("heldout", 8)
    fam = T.tool_pool("heldout_family", 8)
    assert {t.family for t in train} == set(T.TRAIN_FAMILIES) == {t.family for t in held}
    assert {t.family for t in fam} == set(T.HELDOUT_FAMILIES)
    assert not set(T.HELDOUT_FAMILIES) & set(T.TRAIN_FAMILIES)
    assert not {(t.family, t.index) for t in train} & {(t.family, t.index) for t in held}
    assert not set(train) & set(held)
    with pytest.raises(ValueError, match="valid splits"):
        T.tool_pool("test", 2)
    with pytest.raises(ValueError, match="valid families"):
        T.sample_tool("wrench", 0)


def test_compiled_mass_matches_density_times_volume():
    tools = [T.sample_tool(f, i) for f in T.FAMILIES for i in range(3)]
    fields = T.tool_fields(tools)
    for tool, mass in zip(tools, fields.body_mass, strict=True):
        handle, head = tool.volume()
        expected = handle * tool.handle_density + head * tool.head_density
        assert mass == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("family", T.FAMILIES)
def test_every_family_settles_without_blowup(family):
    for index in range(4):
        tool = T.sample_tool(family, index, seed=5)
        model = T.tool_scene(tool, height=0.05).compile()
        data = mujoco.MjData(model)
        z_top = []
        for _ in range(300):  # 1.5 s: fall, impact, settle
            mujoco.mj_step(model, data)
            assert np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()
            z_top.append(data.qpos[2])
        assert np.abs(data.qvel).max() < 0.05, f"{family}#{index} still moving: {np.abs(data.qvel).max()}"
        # resting on the table (heavy heads may tilt a tool): touching, no penetration beyond 2 mm
        assert data.ncon > 0
        assert min(data.contact.dist[: data.ncon]) > -2e-3
        assert 0.0 < data.qpos[2] <= float(tool.bbox()[1].max())
        assert max(z_top) <= T.rest_height(tool) + 0.05 + 1e-3  # never bounced above the drop height


def test_tool_size_scale_multiplies_every_size_within_range_and_keeps_shapes_and_densities():
    plain = T.tool_pool("train", 4, seed=3)
    assert T.tool_pool("train", 4, seed=3, scale=(1.0, 1.0)) == plain  # the default pool, untouched
    bigger = T.tool_pool("train", 4, seed=3, scale=(1.2, 1.3))
    factors = []
    for a, b in zip(plain, bigger, strict=True):
        assert (b.family, b.index, b.handle_shape) == (a.family, a.index, a.handle_shape)
        assert (b.handle_density, b.head_density) == (a.handle_density, a.head_density)
        f = np.asarray(b.handle_half) / np.asarray(a.handle_half)
        np.testing.assert_allclose(f, f[0], rtol=1e-12)  # one factor for every size of a tool
        if a.head_half is not None:
            np.testing.assert_allclose(np.asarray(b.head_half) / np.asarray(a.head_half), f[0], rtol=1e-12)
        factors.append(f[0])
    assert 1.2 <= min(factors) and max(factors) <= 1.3 and np.ptp(factors) > 0.02  # drawn per tool
    # mass goes with the cube of the factor (density kept)
    m_plain, m_big = T.tool_fields(plain).body_mass, T.tool_fields(bigger).body_mass
    np.testing.assert_allclose(m_big / m_plain, np.asarray(factors) ** 3, rtol=1e-6)
    assert T.tool_pool("train", 4, seed=3, scale=(1.2, 1.3)) == bigger  # deterministic


@pytest.mark.parametrize("scale", [(0.0, 1.0), (1.3, 1.2), (-1.0, -0.5), (1.2,), (0.9, 1.0, 1.1)])
def test_tool_size_scale_rejects_anything_but_two_positive_ordered_values(scale):
    with pytest.raises(ValueError, match="tool_size_scale"):
        T.tool_pool("train", 2, scale=scale)
