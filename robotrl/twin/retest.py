"""Re-testing mined regions on fresh draws: ``retest_even`` and ``retest_sequential`` (``mine``'s ``validate_rule``).

The rules, and why a region is kept or dropped, are in ``mine.py``'s module docstring.
"""

from __future__ import annotations

import logging

import numpy as np

from robotrl.twin.regions import (
    BackgroundFn,
    EvaluateFn,
    from_unit,
    inside_regions,
    to_unit,
    wilson_lower,
    wilson_upper,
)
from robotrl.twin.scenarios import Region, ScenarioParam

log = logging.getLogger(__name__)


def unit_boxes(regions: list[Region], params: list[ScenarioParam]) -> tuple[np.ndarray, np.ndarray]:
    """The regions' boxes in the unit cube: lower and upper corners, ``(R, D)`` each."""
    edges = np.asarray([[r.bounds.get(p.name, [p.low, p.high]) for p in params] for r in regions], dtype=float)
    lo, hi = (to_unit(edges[:, :, k], params).clip(0.0, 1.0) for k in (0, 1))
    return lo, hi


def retest_even(evaluate: EvaluateFn, regions: list[Region], params: list[ScenarioParam], u_search: np.ndarray,
              n: int, rng: np.random.Generator, background: BackgroundFn, min_failure_rate: float,
              z: float) -> tuple[np.ndarray, np.ndarray, list[Region]]:
    """Re-test ``regions`` on ``n`` fresh uniform draws split evenly among their boxes (module docstring).

    Returns:
        the draws ``(n, D)`` (unit cube), their success ``(n,)``, and the regions that pass on the
        fresh draws alone, each with the fresh failure rate and draw count.

    """
    box_lo, box_hi = unit_boxes(regions, params)
    if n // len(regions) < 10:
        log.warning("validating %d regions with %d fresh draws (%d each): too few to pass the test; raise the "
                    "budget or lower validate", len(regions), n, n // len(regions))
    owner = np.arange(n) % len(regions)
    lo, hi = box_lo[owner], box_hi[owner]
    u = lo + (hi - lo) * rng.random((n, len(params)))
    ok = np.asarray(evaluate(from_unit(u, params)), dtype=bool)
    x_search = from_unit(u_search, params)
    kept = []
    for j, r in enumerate(regions):
        own = owner == j
        m, k = int(own.sum()), int((~ok[own]).sum())
        in_box = inside_regions(x_search, [r], params)
        passed = m > 0 and wilson_lower(k, m, z) > background(in_box) and wilson_upper(k, m, z) >= min_failure_rate
        kept += _verdict(r, k, m, passed)
    return u, ok, kept


def retest_sequential(evaluate: EvaluateFn, regions: list[Region], params: list[ScenarioParam],
                         u_search: np.ndarray, n: int, rng: np.random.Generator, background: BackgroundFn,
                         min_failure_rate: float, z: float, rounds: int = 4) -> tuple[np.ndarray, np.ndarray,
                                                                                      list[Region]]:
    """Re-test ``regions`` on ``n`` fresh uniform draws, spent in ``rounds`` on the unsettled ones (module docstring).

    Returns:
        the draws ``(n', D)`` (unit cube, ``n' <= n``: draws left when every region is settled are not
        spent), their success ``(n',)``, and the regions that pass, each with its fresh failure rate and
        draw count.

    """
    box_lo, box_hi = unit_boxes(regions, params)
    x_search = from_unit(u_search, params)
    bg = np.array([background(inside_regions(x_search, [r], params)) for r in regions])  # (R,)
    drawn, failed = np.zeros(len(regions), dtype=int), np.zeros(len(regions), dtype=int)
    us, oks = [], []
    left = n
    for r in range(rounds):
        open_ = [j for j in range(len(regions)) if not _settled(int(failed[j]), int(drawn[j]), bg[j],
                                                                   min_failure_rate, z)]
        if not open_ or left <= 0:
            break
        spend = left if r == rounds - 1 else min(left, max(n // rounds, len(open_)))
        owner = np.asarray(open_)[np.arange(spend) % len(open_)]
        u = box_lo[owner] + (box_hi[owner] - box_lo[owner]) * rng.random((spend, len(params)))
        ok = np.asarray(evaluate(from_unit(u, params)), dtype=bool)
        np.add.at(drawn, owner, 1)
        np.add.at(failed, owner, (~ok).astype(int))
        us.append(u)
        oks.append(ok)
        left -= spend
    kept = []
    for j, reg in enumerate(regions):
        m, k = int(drawn[j]), int(failed[j])
        passed = m > 0 and k >= min_failure_rate * m and wilson_lower(k, m, z) > bg[j]
        kept += _verdict(reg, k, m, passed)
    D = len(params)
    return (np.concatenate(us) if us else np.zeros((0, D)),
            np.concatenate(oks) if oks else np.zeros(0, dtype=bool), kept)


def _verdict(region: Region, failed: int, drawn: int, passed: bool) -> list[Region]:
    """Log a re-test's outcome; the region with its fresh rate and count when it passed, else nothing."""
    log.info("validating %s: %d of %d fresh draws failed (tree: %.2f over %d) -> %s", region.summary, failed, drawn,
             region.failure_rate, region.samples, "kept" if passed else "dropped")
    if not passed:
        return []
    return [Region(bounds=region.bounds, failure_rate=failed / drawn, samples=drawn, summary=region.summary)]


def _settled(failed: int, drawn: int, background: float, min_failure_rate: float, z: float) -> bool:
    """Whether a region's fresh draws decide it: Wilson interval wholly above both bars, or wholly below one."""
    if drawn == 0:
        return False
    lo, hi = wilson_lower(failed, drawn, z), wilson_upper(failed, drawn, z)
    return (lo >= min_failure_rate and lo > background) or hi < min_failure_rate or hi <= background
