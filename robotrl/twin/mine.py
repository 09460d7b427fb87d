"""Failure mining: adaptive search for low-success regions over a task's scenario parameters.

``mine(evaluate, params, budget)`` spends ``budget`` evaluations in rounds. Round 0 samples
uniformly. Each later round is half uniform (so new regions can still appear, and the
uniform draws estimate the background failure rate) and half focused: a cross-entropy step
on the failure rate (a Gaussian fitted to the failures so far, in the unit cube of the
parameters, widened so boundaries are explored) and, for half of the focused draws, a
confirmation step: uniform draws inside the candidate regions not yet confirmed.

Regions are read off all samples with a small axis-aligned decision tree (Gini splits,
depth and leaf-size limited). A leaf is a region only when its failure rate is at least
``min_failure_rate`` *and* significantly above the background: the Wilson lower
bound of its rate (``z`` 1.96: the 95% interval's lower end) exceeds the failure rate of the uniform draws. The
tree picks its purest leaves, so a small leaf's observed rate is optimistic (the winner's
curse); the bound discounts it by its sample count. Sibling regions whose union also
passes the test are merged into their parent's box. Each region gets a summary sentence.

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
    """Samples ``(N, D)`` in parameter units, their ``(N,)`` success, and the regions found.

    ``background`` is the failure rate of the uniformly drawn samples, the rate a region's
    must be significantly above.
    """

    samples: np.ndarray
    success: np.ndarray
    regions: list[Region]
    background: float = float("nan")


def _to_unit(x: np.ndarray, params: list[ScenarioParam]) -> np.ndarray:
    lo, hi = np.array([p.low for p in params]), np.array([p.high for p in params])
    return (x - lo) / (hi - lo)


def _from_unit(u: np.ndarray, params: list[ScenarioParam]) -> np.ndarray:
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


@dataclass
class _Node:
    """A box ``[lo, hi]`` of the unit cube, its member mask over all samples, and its two children (or none)."""

    lo: np.ndarray
    hi: np.ndarray
    mask: np.ndarray
    children: tuple[_Node, _Node] | None = None


def _best_split(u: np.ndarray, fail: np.ndarray, min_leaf: int) -> tuple[int, float]:
    """``(dimension, cut)`` of the Gini-best split with ``min_leaf`` samples each side; dimension -1 if none helps."""
    n = fail.size
    p = fail.mean()
    best = (2.0 * p * (1.0 - p) * n, -1, 0.0)
    for d in range(u.shape[1]):
        order = np.argsort(u[:, d])
        xs, cum = u[order, d], np.cumsum(fail[order].astype(float))
        for i in range(min_leaf, n - min_leaf + 1):
            if xs[i - 1] == xs[min(i, n - 1)]:
                continue
            pl, pr = cum[i - 1] / i, (cum[-1] - cum[i - 1]) / (n - i)
            score = i * 2 * pl * (1 - pl) + (n - i) * 2 * pr * (1 - pr)
            if score < best[0] - 1e-9:
                best = (score, d, 0.5 * (xs[i - 1] + xs[min(i, n - 1)]))
    return best[1], best[2]


def _tree(u: np.ndarray, fail: np.ndarray, lo: np.ndarray, hi: np.ndarray, depth: int, min_leaf: int,
          members: np.ndarray | None = None) -> _Node:
    """Gini tree over unit-cube samples ``u`` ``(N, D)``; ``members`` ``(N,)`` marks the samples in ``[lo, hi]``."""
    members = np.ones(fail.size, dtype=bool) if members is None else members
    node = _Node(lo, hi, members)
    f = fail[members]
    if depth == 0 or f.size < 2 * min_leaf or f.all() or not f.any():
        return node
    d, cut = _best_split(u[members], f, min_leaf)
    if d < 0:
        return node
    left = members & (u[:, d] <= cut)
    node.children = (_tree(u, fail, lo, np.where(np.arange(len(hi)) == d, cut, hi), depth - 1, min_leaf, left),
                     _tree(u, fail, np.where(np.arange(len(lo)) == d, cut, lo), hi, depth - 1, min_leaf,
                           members & ~left))
    return node


def _leaves(node: _Node) -> list[_Node]:
    return [node] if node.children is None else [leaf for c in node.children for leaf in _leaves(c)]


def _significant(node: _Node, fail: np.ndarray, background: float, z: float, min_leaf: int,
                 min_failure_rate: float) -> bool:
    n, k = int(node.mask.sum()), int(fail[node.mask].sum())
    return n >= min_leaf and k >= min_failure_rate * n and wilson_lower(k, n, z) > background


def _region_nodes(node: _Node, test: Callable[[_Node], bool]) -> tuple[list[_Node], bool]:
    """Region boxes under ``node`` and whether they are the whole node (siblings that both are merge upwards)."""
    if node.children is None:
        ok = test(node)
        return ([node] if ok else []), ok
    (left, whole_l), (right, whole_r) = (_region_nodes(c, test) for c in node.children)
    if whole_l and whole_r and test(node):
        return [node], True
    return left + right, False


def extract_regions(samples: np.ndarray, success: np.ndarray, params: list[ScenarioParam], depth: int = 6,
                    min_leaf: int = 8, min_failure_rate: float = 0.5, background: float | None = None,
                    z: float = 1.96) -> list[Region]:
    """Low-success boxes from evaluated samples (module docstring).

    Args:
        samples: ``(N, D)`` parameter values.
        success: ``(N,)`` success flags.
        params: the parameters of the columns.
        depth: tree depth.
        min_leaf: smallest leaf and region, in samples.
        min_failure_rate: smallest observed failure rate of a region.
        background: the failure rate a region must be significantly above (default: that of all samples;
            ``mine`` passes the rate of its uniform draws).
        z: one-sided normal quantile of the Wilson lower bound (0: the observed rate must exceed background).

    """
    u = np.clip(_to_unit(samples, params), 0.0, 1.0)
    fail = ~np.asarray(success, dtype=bool)
    if background is None:
        background = float(fail.mean()) if fail.size else 0.0
    D = len(params)
    root = _tree(u, fail, np.zeros(D), np.ones(D), depth, min_leaf)

    def test(node: _Node) -> bool:
        return _significant(node, fail, background, z, min_leaf, min_failure_rate)

    regions = []
    for node in _region_nodes(root, test)[0]:
        bounds = {}
        for i, p in enumerate(params):
            if node.lo[i] > 0 or node.hi[i] < 1:
                bounds[p.name] = [float(p.low + node.lo[i] * (p.high - p.low)),
                                  float(p.low + node.hi[i] * (p.high - p.low))]
        regions.append(Region(bounds=bounds, failure_rate=float(fail[node.mask].mean()),
                              samples=int(node.mask.sum()), summary=summarize(bounds, params)))
    return regions


def _candidate_boxes(u: np.ndarray, fail: np.ndarray, uniform: np.ndarray, depth: int, min_leaf: int,
                     min_failure_rate: float, z: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Unit-cube boxes of the leaves that fail often enough but are not yet significant: to be confirmed."""
    background = float(fail[uniform].mean()) if uniform.any() else float(fail.mean())
    root = _tree(u, fail, np.zeros(u.shape[1]), np.ones(u.shape[1]), depth, min_leaf)
    out = []
    for leaf in _leaves(root):
        n, k = int(leaf.mask.sum()), int(fail[leaf.mask].sum())
        if n and k >= min_failure_rate * n and wilson_lower(k, n, z) <= background:
            out.append((leaf.lo, leaf.hi))
    return out


def mine(evaluate: EvaluateFn, params: list[ScenarioParam], budget: int, rounds: int = 4, seed: int = 0,
         uniform_only: bool = False, depth: int = 6, min_leaf: int = 8, min_failure_rate: float = 0.5,
         z: float = 1.96) -> MiningResult:
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
        min_failure_rate: smallest failure rate of a region.
        z: significance of a region against the background (``extract_regions``).

    """
    rng = np.random.default_rng(seed)
    D = len(params)
    per_round = max(1, budget // rounds)
    us, ok, drawn_uniform = [], [], []
    for r in range(rounds):
        n = per_round if r < rounds - 1 else budget - per_round * (rounds - 1)
        u = rng.random((n, D))
        uniform = np.ones(n, dtype=bool)
        u_all = np.concatenate(us) if us else np.zeros((0, D))
        fail_all = ~np.concatenate(ok) if ok else np.zeros(0, dtype=bool)
        if not uniform_only and r > 0 and fail_all.sum() >= 2:
            focused = n // 2
            boxes = _candidate_boxes(u_all, fail_all, np.concatenate(drawn_uniform), depth, min_leaf,
                                     min_failure_rate, z)
            confirm = focused // 2 if boxes else 0
            fails = u_all[fail_all]
            mean, std = fails.mean(0), fails.std(0) * 1.5 + 0.05
            u[: focused - confirm] = np.clip(rng.normal(mean, std, (focused - confirm, D)), 0.0, 1.0)
            for j, b in enumerate(rng.integers(0, max(len(boxes), 1), confirm)):
                lo, hi = boxes[b]
                u[focused - confirm + j] = lo + (hi - lo) * rng.random(D)
            uniform[:focused] = False
        success = np.asarray(evaluate(_from_unit(u, params)), dtype=bool)
        us.append(u)
        ok.append(success)
        drawn_uniform.append(uniform)
        log.info("mining round %d: %d samples, failure rate %.2f", r, n, 1.0 - success.mean())
    samples = _from_unit(np.concatenate(us), params)
    success = np.concatenate(ok)
    uniform = np.concatenate(drawn_uniform)
    background = float(1.0 - success[uniform].mean())
    regions = extract_regions(samples, success, params, depth, min_leaf, min_failure_rate, background, z)
    return MiningResult(samples=samples, success=success, regions=regions, background=background)


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
