"""Procedural tools (SimToolReal): a handle (box or cylinder) plus an optional box head at +x.

Six families (hammer, screwdriver, marker, spatula, eraser, brush) each have their own size
distribution; handle density is 300-600 kg/m^3 and head density 800-2000 kg/m^3. A tool is
a pure function of ``(family, index, seed)``: the same triple always gives the same tool.

Splits: ``train`` uses the training families with instance indices ``0..n-1``; ``heldout``
uses the *same* families with indices from a disjoint range (new instances); and
``heldout_family`` uses the family that never appears in training (zero-shot).

Every tool body has exactly three geoms, ``handle_box``, ``handle_cyl`` and ``head``; the
unused ones are tiny, massless and hidden inside the handle. So one compiled model holds a
different tool in every world through per-world sizes, poses and inertias (``tool_fields``),
with geom types and collision classes shared, as MuJoCo Warp requires.

Tool frame: origin at the handle centre, handle along +x, head centred at
``x = handle_half_length + head_half[0]``. Sizes are half-sizes in metres.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TypedDict

import mujoco
import numpy as np
from robotrl.tasks.tool_use import constants as C

log = logging.getLogger(__name__)

FAMILIES = ("hammer", "screwdriver", "marker", "spatula", "eraser", "brush")
TRAIN_FAMILIES = ("hammer", "screwdriver", "marker", "spatula", "eraser")
HELDOUT_FAMILIES = ("brush",)
SPLITS = ("train", "heldout", "heldout_family")
HELDOUT_INDEX_OFFSET = 1_000_000
HANDLE_DENSITY = (300.0, 600.0)
HEAD_DENSITY = (800.0, 2000.0)
NO_HEAD_HALF = 0.002

Range = tuple[float, float]


class FamilyRanges(TypedDict):
    """Size distribution of one family (an entry of ``FAMILY_RANGES``)."""

    p_box: float
    handle_len: Range
    handle_r: Range
    head: tuple[Range, Range, Range] | None


# Per family: handle shapes and their probability of "box"; full lengths/widths in metres.
# handle: (length range, cross-section half-width range, half-height range or None for cylinder radius)
FAMILY_RANGES: dict[str, FamilyRanges] = {
    "hammer": {"p_box": 0.5, "handle_len": (0.15, 0.30), "handle_r": (0.010, 0.018),
               "head": ((0.025, 0.045), (0.07, 0.12), (0.022, 0.035))},
    "screwdriver": {"p_box": 0.0, "handle_len": (0.08, 0.12), "handle_r": (0.012, 0.020),
                    "head": ((0.06, 0.12), (0.006, 0.009), (0.006, 0.009))},
    "marker": {"p_box": 0.0, "handle_len": (0.11, 0.15), "handle_r": (0.008, 0.013), "head": None},
    "spatula": {"p_box": 0.5, "handle_len": (0.12, 0.20), "handle_r": (0.008, 0.013),
                "head": ((0.06, 0.10), (0.05, 0.08), (0.004, 0.008))},
    "eraser": {"p_box": 1.0, "handle_len": (0.05, 0.10), "handle_r": (0.010, 0.020), "head": None},
    "brush": {"p_box": 0.5, "handle_len": (0.12, 0.20), "handle_r": (0.009, 0.015),
              "head": ((0.04, 0.06), (0.03, 0.05), (0.02, 0.03))},
}


@dataclass(frozen=True)
class ToolSpec:
    """One generated tool (all sizes are half-sizes in m, densities in kg/m^3).

    Attributes:
        family: one of ``FAMILIES``.
        index: instance index within the family.
        handle_shape: ``box`` or ``cylinder`` (cylinder axis along the tool's x).
        handle_half: ``(half_length, half_width, half_height)``; a cylinder has width = height = radius.
        handle_density: handle density.
        head_half: head box half-sizes, or None for a tool without a head.
        head_density: head density (0 without a head).

    """

    family: str
    index: int
    handle_shape: str
    handle_half: tuple[float, float, float]
    handle_density: float
    head_half: tuple[float, float, float] | None
    head_density: float

    @property
    def head_center_x(self) -> float:
        """X of the head centre in the tool frame."""
        return self.handle_half[0] + (self.head_half[0] if self.head_half else 0.0)

    def bbox(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounding box in the tool frame: ``(center (3,), half_extent (3,))``."""
        lo = -np.asarray(self.handle_half)
        hi = np.asarray(self.handle_half)
        if self.head_half:
            h = np.asarray(self.head_half)
            c = np.array([self.head_center_x, 0.0, 0.0])
            lo, hi = np.minimum(lo, c - h), np.maximum(hi, c + h)
        return (lo + hi) / 2, (hi - lo) / 2

    def volume(self) -> tuple[float, float]:
        """``(handle, head)`` volumes in m^3."""
        hx, hy, hz = self.handle_half
        handle = 8 * hx * hy * hz if self.handle_shape == "box" else np.pi * hy * hy * 2 * hx
        head = 8 * float(np.prod(self.head_half)) if self.head_half else 0.0
        return float(handle), head


def _rng(family: str, index: int, seed: int) -> np.random.Generator:
    fam = FAMILIES.index(family)
    return np.random.default_rng([int(seed), fam, int(index)])


def sample_tool(family: str, index: int, seed: int = 0) -> ToolSpec:
    """The tool ``index`` of ``family`` for generator ``seed`` (deterministic).

    Raises:
        ValueError: unknown family (the message lists the valid ones).

    """
    if family not in FAMILY_RANGES:
        raise ValueError(f"Unknown tool family {family!r}; valid families: {', '.join(FAMILIES)}.")
    r = FAMILY_RANGES[family]
    rng = _rng(family, index, seed)
    shape = "box" if rng.random() < float(r["p_box"]) else "cylinder"
    half_len = rng.uniform(*r["handle_len"]) / 2
    half_w = rng.uniform(*r["handle_r"])
    half_h = half_w if shape == "cylinder" else half_w * rng.uniform(0.6, 1.0)
    density = rng.uniform(*HANDLE_DENSITY)
    head, head_density = None, 0.0
    if r["head"] is not None:
        lx, ly, lz = r["head"]
        head = (rng.uniform(*lx) / 2, rng.uniform(*ly) / 2, rng.uniform(*lz) / 2)
        head_density = rng.uniform(*HEAD_DENSITY)
    handle = (half_len, half_w, half_h)
    return ToolSpec(family, int(index), shape, handle, float(density), head, float(head_density))


def split_families(split: str) -> tuple[str, ...]:
    """Families used by ``split``.

    Raises:
        ValueError: unknown split.

    """
    if split not in SPLITS:
        raise ValueError(f"Unknown tool split {split!r}; valid splits: {', '.join(SPLITS)}.")
    return HELDOUT_FAMILIES if split == "heldout_family" else TRAIN_FAMILIES


def scaled_tool(tool: ToolSpec, factor: float) -> ToolSpec:
    """``tool`` with every size multiplied by ``factor`` (densities kept: mass scales with ``factor**3``)."""
    def mul(half: tuple[float, float, float]) -> tuple[float, float, float]:
        return (half[0] * factor, half[1] * factor, half[2] * factor)

    return replace(tool, handle_half=mul(tool.handle_half),
                   head_half=None if tool.head_half is None else mul(tool.head_half))


def tool_pool(split: str, per_family: int, seed: int = 0,
              scale: tuple[float, float] = (1.0, 1.0)) -> list[ToolSpec]:
    """``per_family`` tools of every family of ``split`` (train and held-out indices never overlap).

    ``scale``: range of a size multiplier, one per tool, drawn uniformly from its own stream of
    ``(seed, family, index)``, so the pool's shapes and densities are those of ``scale=(1, 1)``.

    Raises:
        ValueError: ``per_family < 1``, or ``scale`` is not ``(low, high)`` with ``0 < low <= high``.

    """
    if per_family < 1:
        raise ValueError(f"tools_per_family must be >= 1, got {per_family}.")
    if len(scale) != 2 or not 0.0 < float(scale[0]) <= float(scale[1]):
        raise ValueError(f"tool_size_scale must be [low, high] with 0 < low <= high, got {list(scale)}.")
    low, high = float(scale[0]), float(scale[1])
    offset = HELDOUT_INDEX_OFFSET if split == "heldout" else 0
    pool = [sample_tool(f, offset + i, seed) for f in split_families(split) for i in range(per_family)]
    if (low, high) == (1.0, 1.0):
        return pool
    factors = [np.random.default_rng([int(seed), FAMILIES.index(t.family), t.index, 1]).uniform(low, high)
               for t in pool]
    return [scaled_tool(t, float(f)) for t, f in zip(pool, factors, strict=True)]


_CYL_QUAT = (np.sqrt(0.5), 0.0, np.sqrt(0.5), 0.0)  # rotates the cylinder's z axis onto x


GEOMS = ("handle_box", "handle_cyl", "head")


def add_tool(
    parent: mujoco.MjsBody, tool: ToolSpec, name: str = "tool", pos: tuple = (0.0, 0.0, 0.0)
) -> mujoco.MjsBody:
    """Add ``tool`` as a free body ``name`` with geoms ``<name>_handle_box/_handle_cyl/_head``.

    Every tool has the same three geoms (types and collision classes never change, which MuJoCo
    Warp needs); the ones a tool does not use are tiny, massless and hidden at the handle centre,
    inside the handle, where nothing can touch them.
    """
    body = parent.add_body(name=name, pos=list(pos))
    body.add_freejoint(name=f"{name}_joint")
    common = {"contype": C.TOOL_CONTYPE, "conaffinity": C.TOOL_CONAFFINITY, "condim": 3,
              "friction": [1.0, 0.01, 0.0001]}
    hidden = {"density": 0.0, "rgba": [0, 0, 0, 0]}
    s = NO_HEAD_HALF
    hx, hy, hz = tool.handle_half
    wood = {"density": tool.handle_density, "rgba": [0.55, 0.35, 0.2, 1]}
    box = tool.handle_shape == "box"
    body.add_geom(name=f"{name}_handle_box", type=mujoco.mjtGeom.mjGEOM_BOX,
                  size=[hx, hy, hz] if box else [s, s, s], **(wood if box else hidden), **common)
    body.add_geom(name=f"{name}_handle_cyl", type=mujoco.mjtGeom.mjGEOM_CYLINDER, quat=list(_CYL_QUAT),
                  size=[s, s, 0] if box else [hy, hx, 0], **(hidden if box else wood), **common)
    if tool.head_half:
        body.add_geom(name=f"{name}_head", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(tool.head_half),
                      pos=[tool.head_center_x, 0, 0], density=tool.head_density, rgba=[0.6, 0.6, 0.65, 1],
                      **common)
    else:
        body.add_geom(name=f"{name}_head", type=mujoco.mjtGeom.mjGEOM_BOX, size=[s, s, s], **hidden, **common)
    return body


def tool_scene(tool: ToolSpec, height: float = 0.05) -> mujoco.MjSpec:
    """A standalone scene: a table plane and ``tool`` dropped from ``height`` above its lowest point."""
    spec = mujoco.MjSpec()
    spec.option.timestep = C.TIMESTEP
    spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.worldbody.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[1, 1, 0.05],
                            contype=C.TABLE_CONTYPE, conaffinity=C.TABLE_CONAFFINITY)
    add_tool(spec.worldbody, tool, pos=(0, 0, rest_height(tool) + height))
    return spec


def rest_height(tool: ToolSpec) -> float:
    """Height of the tool frame above the table when the tool lies flat (its lowest half-height)."""
    z = tool.handle_half[2]
    if tool.head_half:
        z = max(z, tool.head_half[2])
    return float(z)


@dataclass
class ToolFields:
    """Per-tool values of the model fields that differ between tools, from a compiled tool scene.

    Every array has one row per tool: ``geom_*`` are ``(T, 3, ...)`` (``GEOMS`` order),
    ``body_*`` are ``(T, ...)``; ``bbox_center``/``bbox_half`` are ``(T, 3)`` in the tool frame;
    ``rest_z`` ``(T,)`` is the height of the tool frame once the tool has settled on the table
    (simulated); ``family`` ``(T,)`` family index.
    """

    geom_size: np.ndarray
    geom_pos: np.ndarray
    geom_quat: np.ndarray
    geom_rbound: np.ndarray
    geom_aabb: np.ndarray
    geom_rgba: np.ndarray
    body_mass: np.ndarray
    body_inertia: np.ndarray
    body_ipos: np.ndarray
    body_iquat: np.ndarray
    bbox_center: np.ndarray
    bbox_half: np.ndarray
    rest_z: np.ndarray
    family: np.ndarray


def tool_fields(tools: list[ToolSpec]) -> ToolFields:
    """Compile each tool alone (MuJoCo computes its mass and inertia) and gather its model fields."""
    rows: dict[str, list[np.ndarray]] = {k: [] for k in ToolFields.__dataclass_fields__}
    for tool in tools:
        m = tool_scene(tool, height=0.0).compile()
        d = mujoco.MjData(m)
        mujoco.mj_step(m, d, nstep=int(0.6 / m.opt.timestep))
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "tool")
        g = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"tool_{n}") for n in GEOMS]
        for key in ("size", "pos", "quat", "rbound", "aabb", "rgba"):
            rows[f"geom_{key}"].append(np.array(getattr(m, f"geom_{key}")[g]))
        for key in ("mass", "inertia", "ipos", "iquat"):
            rows[f"body_{key}"].append(np.array(getattr(m, f"body_{key}")[b]))
        center, half = tool.bbox()
        rows["bbox_center"].append(center)
        rows["bbox_half"].append(half)
        rows["rest_z"].append(np.array(d.qpos[2]))
        rows["family"].append(np.array(FAMILIES.index(tool.family)))
    return ToolFields(**{k: np.stack(v) for k, v in rows.items()})
