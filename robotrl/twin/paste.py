"""Pasting mined regions (PRIM's pasting step): grow each box while the policy still fails in it often enough.

A region the tree reads off is a box whose draws failed at least ``min_failure_rate`` of the time. A
weakness that fades gradually (a policy failing 90% of the time on the narrowest roads and 30% next to the
widths it trained on) is cut where its failure rate crosses that rate, so the region leaves out the failures
on the other side of the crossing. Pasting (Friedman and Fisher's PRIM, the step after peeling) grows the
box into its neighbours while the failure rate of the *whole* box stays at or above ``floor``. That buys
coverage of the weakness with density: the box fails less often than the tree's leaf did, but still at
least ``floor`` of the time.

Each step, for every bounded side of the box, the candidate moves that edge outwards just far enough to take
in the next ``alpha`` share (at least one) of the box's current draws from the slab beyond it; the candidate
whose box then fails most often is taken, if that rate is at least ``floor``. Only the uniformly drawn
samples count: the focused draws crowd around failures and would overstate the rate of a grown box. A box
with fewer than ``min_samples`` uniform draws is not grown (too little evidence to grow it on).

The grown box is re-tested on fresh draws like any region (``mine``'s ``validate``): that, not the draws
it was grown on, decides whether it stays. Its plain box is re-tested beside it (``pick_retested``):

- both pass: the region keeps its plain box, which training draws from, and records the grown one as its
  ``reach`` (``Region.extent()``), which says how far the weakness goes. On the width plant (twin README)
  training on the grown boxes themselves gained 5.3 points less in the narrow regions than training on the
  plain ones: the grown box spends a third of its resets where the policy already succeeds;
- only the grown box passes: it is the region;
- only the plain box passes: it is the region, with no reach. The greedy steps pick the best of several
  candidates, so a grown box's rate on the draws it was grown on is optimistic, and pasting must not lose
  a region the plain search would have kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from robotrl.twin.retest import unit_boxes
from robotrl.twin.scenarios import Region, ScenarioParam, summarize

log = logging.getLogger(__name__)


def _inside(u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(N,)`` whether unit-cube points ``u`` ``(N, D)`` lie in the box ``[lo, hi]`` ``(D,)``."""
    return np.all((u >= lo) & (u <= hi), axis=1)


def _candidates(u: np.ndarray, lo: np.ndarray, hi: np.ndarray, take: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Boxes with one edge of ``[lo, hi]`` moved out to take in the next ``take`` points of ``u`` beyond it."""
    out = []
    for d in range(u.shape[1]):
        others = np.all(np.delete((u >= lo) & (u <= hi), d, axis=1), axis=1)
        for side in (-1, 1):
            edge = lo[d] if side < 0 else hi[d]
            beyond = others & ((u[:, d] < edge) if side < 0 else (u[:, d] > edge))
            if not beyond.any():
                continue
            xs = np.sort(u[beyond, d])[::-1] if side < 0 else np.sort(u[beyond, d])
            if len(xs) > take:  # halfway to the next point beyond, so that point stays out
                new = 0.5 * (xs[take - 1] + xs[take])
            else:
                new = 0.0 if side < 0 else 1.0
            c_lo, c_hi = lo.copy(), hi.copy()
            if side < 0:
                c_lo[d] = new
            else:
                c_hi[d] = new
            out.append((c_lo, c_hi))
    return out


def paste_box(u: np.ndarray, fail: np.ndarray, lo: np.ndarray, hi: np.ndarray, floor: float, alpha: float = 0.05,
              min_samples: int = 8) -> tuple[np.ndarray, np.ndarray, int]:
    """Grow one unit-cube box ``[lo, hi]`` ``(D,)`` over uniform draws ``u`` ``(N, D)`` failing at ``fail`` ``(N,)``.

    Returns:
        the grown box's corners ``(D,)`` each, and the number of steps taken (0: not grown).

    """
    lo, hi = lo.astype(float).copy(), hi.astype(float).copy()
    steps = 0
    while True:
        inn = _inside(u, lo, hi)
        n = int(inn.sum())
        if n < min_samples:
            return lo, hi, steps
        best, best_rate = None, -1.0
        for c_lo, c_hi in _candidates(u, lo, hi, max(1, int(np.ceil(alpha * n)))):
            m = _inside(u, c_lo, c_hi)
            rate = float(fail[m].mean())
            if rate > best_rate:
                best, best_rate = (c_lo, c_hi), rate
        if best is None or best_rate < floor:
            return lo, hi, steps
        lo, hi = best
        steps += 1


def paste_regions(regions: list[Region], params: list[ScenarioParam], u: np.ndarray, fail: np.ndarray,
                  uniform: np.ndarray, floor: float, alpha: float = 0.05,
                  min_samples: int = 8) -> list[tuple[Region, Region]]:
    """Grow every region (module docstring).

    Args:
        regions: the regions read off the search.
        params: the scenario parameters (the columns of ``u``).
        u: ``(N, D)`` every search draw, in the unit cube of ``params``.
        fail: ``(N,)`` their failure flags.
        uniform: ``(N,)`` which draws were uniform: only they measure a grown box's rate.
        floor: the least failure rate a grown box may have.
        alpha: share of the box's uniform draws each step adds (at least one).
        min_samples: a box with fewer uniform draws is not grown.

    Returns:
        ``(grown, plain)`` per region: the region with its grown box (its ``failure_rate`` and
        ``samples`` those of every search draw in it, as ``extract_regions`` counts them) and the region as
        it was read off.

    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"paste={alpha}: the share of a box's draws each pasting step adds must be in (0, 1]")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"paste_floor={floor}: the least failure rate of a grown region must be in [0, 1]")
    if not regions:
        return []
    box_lo, box_hi = unit_boxes(regions, params)
    uu, ff = u[uniform], fail[uniform]
    grown = []
    for r, lo, hi in zip(regions, box_lo, box_hi, strict=True):
        g_lo, g_hi, steps = paste_box(uu, ff, lo, hi, floor, alpha, min_samples)
        grown.append((r, g_lo, g_hi, steps))
    kept = []
    for r, lo, hi, steps in grown:
        bounds = {p.name: [float(p.low + lo[d] * (p.high - p.low)), float(p.low + hi[d] * (p.high - p.low))]
                  for d, p in enumerate(params) if lo[d] > 0 or hi[d] < 1}
        inn, inn_uniform = _inside(u, lo, hi), _inside(uu, lo, hi)
        summary = summarize(bounds, params)
        kept.append((Region(bounds=bounds, failure_rate=float(fail[inn].mean()) if inn.any() else r.failure_rate,
                            samples=int(inn.sum()), summary=summary), r))
        log.info("pasting: %s -> %s (%d steps; uniform draws inside fail %.2f)", r.summary, summary, steps,
                 float(ff[inn_uniform].mean()) if inn_uniform.any() else float("nan"))
    return kept



def pick_retested(pairs: list[tuple[Region, Region]], kept: list[Region]) -> list[Region]:
    """Per ``(grown, plain)`` pair, the region the re-test leaves (module docstring): plain with reach, or either.

    ``kept`` are the regions (grown and plain boxes alike) that passed the re-test, matched by their bounds;
    each pick carries its own box's re-test figures (and the grown box's as ``reach_*``). Of the picks, one
    whose box and reach both lie inside another's (two plain regions grown into one box, a plain box inside a
    grown one) is dropped; two regions that grew into one reach from different boxes both stay, since training
    draws from the boxes (``reach_regions`` gives the report's regions).
    """
    passed = {_key(r): r for r in kept}
    picks = []
    for grown, plain in pairs:
        g, p = passed.get(_key(grown)), passed.get(_key(plain))
        if g is not None and p is not None and _key(grown) != _key(plain):
            reach = g.summary.removeprefix("fails when ")
            picks.append(replace(p, reach=g.bounds, reach_failure_rate=g.failure_rate, reach_samples=g.samples,
                                 reach_summary=g.summary,
                                 summary=f"{p.summary} (reaches {reach}, failing {g.failure_rate:.0%} there)"))
        elif g is not None:
            picks.append(g)
        elif p is not None:
            log.info("pasting: the grown box of %s failed its re-test; the region keeps its plain box", plain.summary)
            picks.append(p)
    return _outermost(picks, lambda a, b: _contains(a, b) and _contains(a.extent(), b.extent()))


def reach_regions(regions: list[Region]) -> list[Region]:
    """Each region as far as it reaches (``Region.extent()``), those inside another's reach dropped.

    These are the report's regions; training draws from every region's own box (two regions grown into one reach
    keep both boxes).
    """
    return _outermost([r.extent() for r in regions], _contains)


def _outermost(regions: list[Region], holds: Callable[[Region, Region], bool]) -> list[Region]:
    """``regions`` without those another one ``holds`` (of two that hold each other, the first stays)."""
    return [r for i, r in enumerate(regions)
            if not any(holds(o, r) and (j < i or not holds(r, o)) for j, o in enumerate(regions) if j != i)]


def unique_boxes(regions: list[Region]) -> list[Region]:
    """``regions`` without repeats of a box (the first of each kept)."""
    seen: dict[tuple, Region] = {}
    for r in regions:
        seen.setdefault(_key(r), r)
    return list(seen.values())


def _contains(outer: Region, inner: Region) -> bool:
    """Whether ``outer``'s box contains ``inner``'s (a parameter a region does not name spans its whole range)."""
    return all(k in inner.bounds and inner.bounds[k][0] >= lo and inner.bounds[k][1] <= hi
               for k, (lo, hi) in outer.bounds.items())


def _key(r: Region) -> tuple:
    return tuple(sorted((k, tuple(v)) for k, v in r.bounds.items()))
