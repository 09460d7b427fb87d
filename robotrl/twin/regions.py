"""Scenario regions as sets: the unit cube of the parameters, membership, coverage, and Wilson bounds.

The pieces the miner (``mine.py``), its re-test (``retest.py``) and the benchmarks share. A leaf module
(numpy only, besides the scenario types).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from robotrl.twin.scenarios import Region, ScenarioParam

EvaluateFn = Callable[[np.ndarray], np.ndarray]  # (N, D) parameter values -> (N,) success
BackgroundFn = Callable[[np.ndarray], float]  # (N,) member mask of a box -> the failure rate it must beat


def to_unit(x: np.ndarray, params: list[ScenarioParam]) -> np.ndarray:
    """Parameter values ``(N, D)`` -> the unit cube of ``params``' ranges."""
    lo, hi = np.array([p.low for p in params]), np.array([p.high for p in params])
    return (x - lo) / (hi - lo)


def from_unit(u: np.ndarray, params: list[ScenarioParam]) -> np.ndarray:
    """Unit-cube points ``(N, D)`` -> parameter values (``choice`` parameters rounded to integers)."""
    lo, hi = np.array([p.low for p in params]), np.array([p.high for p in params])
    x = lo + u * (hi - lo)
    choice = np.array([p.kind == "choice" for p in params])
    x[:, choice] = np.round(x[:, choice])
    return x


def wilson_lower(failures: int, n: int, z: float = 1.96) -> float:
    """Wilson score lower bound of a failure rate from ``failures`` of ``n`` (0 when ``n`` is 0)."""
    if n <= 0:
        return 0.0
    p, z2 = failures / n, z * z
    centre = p + z2 / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return float((centre - half) / (1 + z2 / n))


def wilson_upper(failures: int, n: int, z: float = 1.96) -> float:
    """Wilson score upper bound of a failure rate from ``failures`` of ``n`` (1 when ``n`` is 0)."""
    return 1.0 - wilson_lower(n - failures, n, z)


def region_coverage(regions: list[Region], planted: dict[str, list[float]], params: list[ScenarioParam],
                    n: int = 200_000, seed: int = 0) -> tuple[float, int]:
    """Monte-Carlo ``(fraction of the planted box's volume the regions cover, number of false regions)``.

    A region is false when less than half of its own volume lies inside the planted box.
    """
    rng = np.random.default_rng(seed)
    x = from_unit(rng.random((n, len(params))), params) if not any(p.kind == "choice" for p in params) else \
        np.array([p.low for p in params]) + rng.random((n, len(params))) * np.array([p.high - p.low for p in params])

    def inside(bounds: dict[str, list[float]]) -> np.ndarray:
        m = np.ones(n, dtype=bool)
        for i, p in enumerate(params):
            if p.name in bounds:
                lo, hi = bounds[p.name]
                m &= (x[:, i] >= lo) & (x[:, i] <= hi)
        return m

    target = inside(planted)
    union = np.zeros(n, dtype=bool)
    false = 0
    for r in regions:
        m = inside(r.bounds)
        union |= m
        if m.sum() == 0 or (m & target).sum() < 0.5 * m.sum():
            false += 1
    return float((union & target).sum() / max(target.sum(), 1)), false


def inside_regions(x: np.ndarray, regions: list[Region], params: list[ScenarioParam]) -> np.ndarray:
    """``(N,)`` whether each scenario of ``x`` ``(N, D)`` (parameter units, columns as ``params``) is in a region."""
    names = [p.name for p in params]
    m = np.zeros(len(x), dtype=bool)
    for r in regions:
        inn = np.ones(len(x), dtype=bool)
        for name, (lo, hi) in r.bounds.items():
            col = x[:, names.index(name)]
            inn &= (col >= lo) & (col <= hi)
        m |= inn
    return m


def failure_coverage(inside: np.ndarray, fail: np.ndarray, target: np.ndarray | None = None,
                     background: float = 0.0) -> float:
    """Fraction of a failure region's volume that mined regions cover, from labelled uniform scenarios.

    With scenarios drawn uniformly and labelled by the policy (``fail`` ``(N,)``), the failures
    inside ``target`` ``(N,)`` (default: everywhere) estimate the failure region there, each
    point weighted by its failure probability; ``inside`` ``(N,)`` marks the scenarios in the
    mined regions. ``background`` (a failure rate) is subtracted from every label first, so
    only the failures in excess of it count: the part of the region a weakness adds.
    Returns ``sum((fail - background)[target & inside]) / sum((fail - background)[target])``.
    """
    w = np.asarray(fail, dtype=float) - background
    t = np.ones(len(w), dtype=bool) if target is None else np.asarray(target, dtype=bool)
    total = w[t].sum()
    return float(w[t & np.asarray(inside, dtype=bool)].sum() / total) if total > 0 else float("nan")
