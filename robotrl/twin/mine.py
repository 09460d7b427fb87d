"""Failure mining: adaptive search for low-success regions over a task's scenario parameters.

``mine(evaluate, params, budget)`` spends ``budget`` evaluations in rounds. Round 0 samples
uniformly. Each later round is a cross-entropy step on the failure rate: half of its
samples are drawn around the failures found so far (a Gaussian fitted to them, in the unit
cube of the parameters, widened so boundaries are explored), half uniformly (so new
regions can still appear). Regions are then read off all samples with a small
axis-aligned decision tree (Gini splits, depth and leaf-size limited): leaves whose failure
rate is at least ``min_failure_rate`` become boxes, each with a summary sentence.

``evaluate`` takes ``(N, D)`` parameter values and returns ``(N,)`` success flags; for a
policy it runs the scenarios as batched worlds (``robotrl twin mine``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robotrl.twin.scenarios import Region, ScenarioParam, summarize

log = logging.getLogger(__name__)

EvaluateFn = Callable[[np.ndarray], np.ndarray]


@dataclass
class MiningResult:
    """Samples ``(N, D)`` in parameter units, their ``(N,)`` success, and the regions found."""

    samples: np.ndarray
    success: np.ndarray
    regions: list[Region]


def _to_unit(x: np.ndarray, params: list[ScenarioParam]) -> np.ndarray:
    lo, hi = np.array([p.low for p in params]), np.array([p.high for p in params])
    return (x - lo) / (hi - lo)


def _from_unit(u: np.ndarray, params: list[ScenarioParam]) -> np.ndarray:
    lo, hi = np.array([p.low for p in params]), np.array([p.high for p in params])
    x = lo + u * (hi - lo)
    choice = np.array([p.kind == "choice" for p in params])
    x[:, choice] = np.round(x[:, choice])
    return x


def _gini(fail: np.ndarray) -> float:
    p = fail.mean() if fail.size else 0.0
    return 2.0 * p * (1.0 - p)


def _boxes(u: np.ndarray, fail: np.ndarray, lo: np.ndarray, hi: np.ndarray, depth: int, min_leaf: int
           ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Leaves ``(lo, hi, member mask)`` of a Gini tree over unit-cube samples ``u`` ``(N, D)``."""
    n = fail.size
    if depth == 0 or n < 2 * min_leaf or fail.all() or not fail.any():
        return [(lo, hi, np.ones(n, dtype=bool))]
    best = (_gini(fail) * n, -1, 0.0)
    for d in range(u.shape[1]):
        order = np.argsort(u[:, d])
        xs, fs = u[order, d], fail[order].astype(float)
        cum = np.cumsum(fs)
        for i in range(min_leaf, n - min_leaf + 1):
            if xs[i - 1] == xs[min(i, n - 1)]:
                continue
            pl, pr = cum[i - 1] / i, (cum[-1] - cum[i - 1]) / (n - i)
            score = i * 2 * pl * (1 - pl) + (n - i) * 2 * pr * (1 - pr)
            if score < best[0] - 1e-9:
                best = (score, d, 0.5 * (xs[i - 1] + xs[min(i, n - 1)]))
    _, d, cut = best
    if d < 0:
        return [(lo, hi, np.ones(n, dtype=bool))]
    left = u[:, d] <= cut
    out = []
    for mask, (blo, bhi) in ((left, (lo, np.where(np.arange(len(hi)) == d, cut, hi))),
                             (~left, (np.where(np.arange(len(lo)) == d, cut, lo), hi))):
        for clo, chi, sub in _boxes(u[mask], fail[mask], blo, bhi, depth - 1, min_leaf):
            full = np.zeros(n, dtype=bool)
            full[np.flatnonzero(mask)[sub]] = True
            out.append((clo, chi, full))
    return out


def extract_regions(samples: np.ndarray, success: np.ndarray, params: list[ScenarioParam], depth: int = 6,
                    min_leaf: int = 8, min_failure_rate: float = 0.5) -> list[Region]:
    """Low-success boxes from evaluated samples (module docstring)."""
    u = np.clip(_to_unit(samples, params), 0.0, 1.0)
    fail = ~np.asarray(success, dtype=bool)
    regions = []
    D = len(params)
    for lo, hi, mask in _boxes(u, fail, np.zeros(D), np.ones(D), depth, min_leaf):
        rate = float(fail[mask].mean()) if mask.any() else 0.0
        if rate < min_failure_rate or mask.sum() < min_leaf:
            continue
        bounds = {}
        for i, p in enumerate(params):
            if lo[i] > 0 or hi[i] < 1:
                bounds[p.name] = [float(p.low + lo[i] * (p.high - p.low)), float(p.low + hi[i] * (p.high - p.low))]
        regions.append(Region(bounds=bounds, failure_rate=rate, samples=int(mask.sum()),
                              summary=summarize(bounds, params)))
    return regions


def mine(evaluate: EvaluateFn, params: list[ScenarioParam], budget: int, rounds: int = 4, seed: int = 0,
         uniform_only: bool = False, depth: int = 6, min_leaf: int = 8) -> MiningResult:
    """Search ``budget`` scenarios for failure regions (module docstring).

    Args:
        evaluate: ``(N, D)`` parameter values -> ``(N,)`` success flags.
        params: the task's scenario parameters.
        budget: total evaluations.
        rounds: sampling rounds (round 0 uniform).
        seed: sampling seed.
        uniform_only: the uniform-random baseline (every round uniform) at the same budget.
        depth: region tree depth.
        min_leaf: smallest region, in samples.

    """
    rng = np.random.default_rng(seed)
    D = len(params)
    per_round = max(1, budget // rounds)
    us, ok = [], []
    for r in range(rounds):
        n = per_round if r < rounds - 1 else budget - per_round * (rounds - 1)
        u = rng.random((n, D))
        fails = np.concatenate(us)[~np.concatenate(ok)] if us else np.zeros((0, D))
        if not uniform_only and r > 0 and len(fails) >= 2:
            focused = n // 2
            mean, std = fails.mean(0), fails.std(0) * 1.5 + 0.05
            u[:focused] = np.clip(rng.normal(mean, std, (focused, D)), 0.0, 1.0)
        success = np.asarray(evaluate(_from_unit(u, params)), dtype=bool)
        us.append(u)
        ok.append(success)
        log.info("mining round %d: %d samples, failure rate %.2f", r, n, 1.0 - success.mean())
    samples = _from_unit(np.concatenate(us), params)
    success = np.concatenate(ok)
    return MiningResult(samples=samples, success=success,
                        regions=extract_regions(samples, success, params, depth, min_leaf))


def region_coverage(regions: list[Region], planted: dict[str, list[float]], params: list[ScenarioParam],
                    n: int = 200_000, seed: int = 0) -> tuple[float, int]:
    """Monte-Carlo ``(fraction of the planted box's volume the regions cover, number of false regions)``.

    A region is false when less than half of its own volume lies inside the planted box.
    """
    rng = np.random.default_rng(seed)
    x = _from_unit(rng.random((n, len(params))), params) if not any(p.kind == "choice" for p in params) else \
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
