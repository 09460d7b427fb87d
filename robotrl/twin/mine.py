"""Failure mining: adaptive search for low-success regions over a task's scenario parameters.

``mine(evaluate, params, budget)`` spends ``budget`` evaluations in rounds. Round 0 samples
uniformly. Each later round is half uniform (so new regions can still appear, and the
uniform draws estimate the background failure rate) and half focused (``focus``): a
cross-entropy step on the failure rate (a Gaussian fitted to the failures so far, in the unit
cube of the parameters, widened so boundaries are explored) and, for half of the focused
draws (``confirm``), a confirmation step: uniform draws inside the candidate regions (leaves
failing often enough but not yet significant) not yet confirmed. With ``refine`` > 0 that step
samples every leaf failing often enough, significant or not, in its box grown by ``refine`` of its
width on each bounded side: the draws straddle the edges, so a sharp edge is placed where it is.
Measured on the synthetic planted box (``python benchmarks/twin.py mining_refine``): much more of it
covered; on a failure rate that rises gradually it changes little and adds some false regions, so it is
off by default.

With ``validate`` > 0 that share of the budget is held back from the search. Once the regions
are read off, each is re-tested on fresh uniform draws inside its box, which the tree never
saw. It stays a region unless the fresh draws alone contradict it: their Wilson lower bound
must still exceed the background, and their rate may be below ``min_failure_rate`` only within
its noise (the Wilson *upper* bound must reach it; the tree's draws already showed the rate).
So a noise region is dropped, and a true region near the ``min_failure_rate`` edge is not
dropped for a few unlucky draws. Its ``failure_rate`` and ``samples`` are then the fresh
draws', an unbiased estimate instead of the tree's optimistic one.

``validate_rule`` says how the fresh draws are spent and read (``retest.py``). ``even`` (above): split evenly among
the regions, the lenient test. ``sequential``: spent in four rounds on the regions not yet settled
(a region is settled once its fresh draws' Wilson interval lies wholly above ``min_failure_rate``
and the background, or wholly below either), so a region failing 90% of the time is settled by
about a dozen draws and the rest go to the regions near the edge; at the end a region stays only
if its fresh rate is at least ``min_failure_rate`` (the point estimate, from the larger sample)
and its Wilson lower bound exceeds the background. Measured on the width plant
(``python benchmarks/twin.py planted_width_repeats``).

With ``paste`` > 0 each region read off the search is grown (PRIM's pasting step, ``paste.py``) while the
uniform draws in the grown box still fail at least ``paste_floor`` of the time (default ``min_failure_rate``
+ 0.1), before the re-test: a weakness that fades gradually is then covered past the point where its failure
rate crosses ``min_failure_rate``, at the cost of density (``python benchmarks/twin.py planted_width_repeats``).
Where the plain box passes its re-test too, the region keeps it for training and records the grown box as its
``reach`` (``Region.extent()``): the report says how far the weakness goes, and training draws where it is dense.

Regions are read off all samples with a small axis-aligned decision tree (Gini splits,
depth and leaf-size limited). A leaf is a region only when its failure rate is at least
``min_failure_rate`` *and* significantly above the background: the Wilson lower
bound of its rate (``z`` 1.96: the 95% interval's lower end) exceeds a background failure
rate. The tree picks its purest leaves, so a small leaf's observed rate is optimistic (the
winner's curse); the bound discounts it by its sample count. Sibling regions whose union
also passes the test are merged into their parent's box. Each region gets a summary sentence.

The background (``baseline``) is estimated from the uniform draws only:

- ``uniform``: their failure rate over the whole space. A large weakness raises it (its own
  failures are in it), so the regions of that weakness barely clear it;
- ``reference``: their failure rate inside a ``reference`` box, the regime the policy was
  trained on (``{"friction": [1.0, 1.2]}``): a region must fail more than the policy fails
  where it is supposed to work;
- ``complement``: their failure rate outside the box under test.

``evaluate`` takes ``(N, D)`` parameter values and returns ``(N,)`` success flags; for a
policy it runs the scenarios as batched worlds (``robotrl twin mine``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robotrl.twin.paste import paste_regions, pick_retested, unique_boxes
from robotrl.twin.regions import (
    BackgroundFn,
    EvaluateFn,
    from_unit,
    inside_regions,
    to_unit,
    wilson_lower,
)
from robotrl.twin.retest import retest_even, retest_sequential
from robotrl.twin.scenarios import Region, ScenarioParam, summarize

log = logging.getLogger(__name__)

@dataclass
class MiningResult:
    """Samples ``(N, D)`` in parameter units, their ``(N,)`` success, and the regions found.

    ``background`` is the failure rate of the uniformly drawn samples under ``baseline``
    (``complement``: over the whole space; each box is tested against the rate outside it).
    """

    samples: np.ndarray
    success: np.ndarray
    regions: list[Region]
    background: float = float("nan")
    baseline: str = "uniform"


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


BASELINES = ("uniform", "reference", "complement")
VALIDATE_RULES = ("even", "sequential")


def _reference_mask(u: np.ndarray, reference: dict[str, list[float]], params: list[ScenarioParam]) -> np.ndarray:
    """``(N,)`` whether unit-cube points ``u`` ``(N, D)`` lie in the ``reference`` box (parameter units, by name)."""
    unknown = sorted(set(reference) - {p.name for p in params})
    if unknown:
        raise ValueError(f"reference box names undeclared parameters {unknown}; declared: {[p.name for p in params]}")
    return inside_regions(from_unit(u, params), [Region(bounds=reference, failure_rate=0.0, samples=0)], params)


def background_fn(fail: np.ndarray, uniform: np.ndarray, baseline: str = "uniform",
                  reference: np.ndarray | None = None) -> tuple[BackgroundFn, float]:
    """The rate a box must be significantly above, as ``(box member mask (N,) -> rate, summary rate)``.

    Args:
        fail: ``(N,)`` failure flags of all samples.
        uniform: ``(N,)`` which samples were drawn uniformly (only they estimate a background).
        baseline: ``uniform``, ``reference`` or ``complement`` (module docstring).
        reference: ``(N,)`` which samples lie in the reference box (``reference`` only).

    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline {baseline!r}: expected one of {BASELINES}")
    overall = float(fail[uniform].mean()) if uniform.any() else float(fail.mean()) if fail.size else 0.0
    if baseline == "uniform":
        return (lambda mask: overall), overall
    if baseline == "reference":
        if reference is None:
            raise ValueError("baseline 'reference' needs a reference box (the regime the policy was trained on)")
        ref = uniform & reference
        if not ref.any():
            raise ValueError("no uniform draw fell in the reference box: it is too small for the budget")
        rate = float(fail[ref].mean())
        return (lambda mask: rate), rate

    def outside(mask: np.ndarray) -> float:
        rest = uniform & ~mask
        return float(fail[rest].mean()) if rest.any() else overall

    return outside, overall


def _significant(node: _Node, fail: np.ndarray, background: BackgroundFn, z: float, min_leaf: int,
                 min_failure_rate: float) -> bool:
    n, k = int(node.mask.sum()), int(fail[node.mask].sum())
    return n >= min_leaf and k >= min_failure_rate * n and wilson_lower(k, n, z) > background(node.mask)


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
                    min_leaf: int = 8, min_failure_rate: float = 0.5, background: float | BackgroundFn | None = None,
                    z: float = 1.96) -> list[Region]:
    """Low-success boxes from evaluated samples (module docstring).

    Args:
        samples: ``(N, D)`` parameter values.
        success: ``(N,)`` success flags.
        params: the parameters of the columns.
        depth: tree depth.
        min_leaf: smallest leaf and region, in samples.
        min_failure_rate: smallest observed failure rate of a region.
        background: the failure rate a region must be significantly above, or a function of the box's
            member mask ``(N,)`` giving it (``background_fn``); default: the failure rate of all samples.
        z: one-sided normal quantile of the Wilson lower bound (0: the observed rate must exceed background).

    """
    u = np.clip(to_unit(samples, params), 0.0, 1.0)
    fail = ~np.asarray(success, dtype=bool)
    if background is None:
        background = float(fail.mean()) if fail.size else 0.0
    rate_fn = background if callable(background) else (lambda mask, b=float(background): b)
    D = len(params)
    root = _tree(u, fail, np.zeros(D), np.ones(D), depth, min_leaf)

    def test(node: _Node) -> bool:
        return _significant(node, fail, rate_fn, z, min_leaf, min_failure_rate)

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


def _candidate_boxes(u: np.ndarray, fail: np.ndarray, background: BackgroundFn, depth: int, min_leaf: int,
                     min_failure_rate: float, z: float, refine: float = 0.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Unit-cube boxes of the leaves that fail often enough but are not yet significant: to be confirmed.

    With ``refine`` > 0 the significant leaves are boxes too, and every box grows by ``refine`` of its
    width (plus 0.02) on each bounded side, so the draws straddle its edges and the tree can place them.
    """
    root = _tree(u, fail, np.zeros(u.shape[1]), np.ones(u.shape[1]), depth, min_leaf)
    out = []
    for leaf in _leaves(root):
        n, k = int(leaf.mask.sum()), int(fail[leaf.mask].sum())
        if n and k >= min_failure_rate * n and (refine > 0 or wilson_lower(k, n, z) <= background(leaf.mask)):
            grow = (refine * (leaf.hi - leaf.lo) + 0.02) * (refine > 0)
            out.append((np.clip(leaf.lo - grow, 0.0, 1.0), np.clip(leaf.hi + grow, 0.0, 1.0)))
    return out


def mine(evaluate: EvaluateFn, params: list[ScenarioParam], budget: int, rounds: int = 4, seed: int = 0,
         uniform_only: bool = False, depth: int = 6, min_leaf: int = 8, min_failure_rate: float = 0.5,
         z: float = 1.96, baseline: str = "uniform", reference: dict[str, list[float]] | None = None,
         focus: float = 0.5, confirm: float = 0.5, validate: float = 0.0, refine: float = 0.0,
         validate_rule: str = "even", paste: float = 0.0, paste_floor: float | None = None) -> MiningResult:
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
        baseline: what the background is (module docstring): ``uniform``, ``reference`` or ``complement``.
        reference: the box (``{name: [lo, hi]}``, parameter units) of the regime the policy was trained
            on, for ``baseline="reference"``.
        focus: share of each round after the first drawn by the search (the rest uniform).
        confirm: share of the focused draws spent confirming candidate regions (when there are any).
        validate: share of ``budget`` held back to re-test each region on fresh draws (module docstring);
            unspent when no region is found.
        refine: 0, or how far (a share of its width, plus 0.02 of the unit cube) the confirmation step
            grows each box, regions already significant included: draws across a region's edges let the
            tree place a sharp edge precisely (module docstring).
        validate_rule: ``even`` or ``sequential``: how the fresh draws are spent and read (module docstring).
        paste: 0 (off), or the share of a region's uniform draws each pasting step adds (PRIM's alpha, e.g.
            0.05): grow the regions before the re-test (module docstring, ``paste.py``).
        paste_floor: the least failure rate of a grown region (default ``min_failure_rate`` + 0.1).

    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline {baseline!r}: expected one of {BASELINES}")
    if not 0.0 <= validate < 1.0:
        raise ValueError(f"validate={validate}: the held-back share of the budget must be in [0, 1)")
    if validate_rule not in VALIDATE_RULES:
        raise ValueError(f"validate_rule={validate_rule!r}: expected one of {VALIDATE_RULES}")
    if not refine >= 0.0:
        raise ValueError(f"refine={refine}: give 0 (off) or how far to grow each box, a share of its width (e.g. 0.25)")
    if not 0.0 <= paste <= 1.0:
        raise ValueError(f"paste={paste}: give 0 (off) or the share of a region's draws each pasting step adds "
                         "(e.g. 0.05)")
    floor = min(1.0, min_failure_rate + 0.1) if paste_floor is None else paste_floor
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"paste_floor={paste_floor}: the least failure rate of a grown region must be in [0, 1]")
    held_back = int(budget * validate)
    budget -= held_back
    if baseline == "reference" and not reference:
        raise ValueError("baseline 'reference' needs reference={name: [lo, hi]}: the regime the policy was trained on")
    rng = np.random.default_rng(seed)
    D = len(params)
    per_round = max(1, budget // rounds)
    us: list[np.ndarray] = []  # (n, D) unit-cube draws of each round
    ok: list[np.ndarray] = []  # (n,) their success
    drawn_uniform: list[np.ndarray] = []  # (n,) whether each was drawn uniformly
    for r in range(rounds):
        n = per_round if r < rounds - 1 else budget - per_round * (rounds - 1)
        u = rng.random((n, D))
        uniform = np.ones(n, dtype=bool)
        u_all = np.concatenate(us) if us else np.zeros((0, D))
        fail_all = ~np.concatenate(ok) if ok else np.zeros(0, dtype=bool)
        if not uniform_only and r > 0 and fail_all.sum() >= 2:
            focused = int(n * focus)
            drawn = np.concatenate(drawn_uniform)
            # ``and reference`` is always true here (checked above); it narrows the Optional for mypy
            ref = _reference_mask(u_all, reference, params) if baseline == "reference" and reference else None
            # until a uniform draw lands in the reference box, candidates are judged against the overall rate
            early = baseline == "reference" and not (ref & drawn).any()
            rate_fn, _ = background_fn(fail_all, drawn, "uniform" if early else baseline, ref)
            boxes = _candidate_boxes(u_all, fail_all, rate_fn, depth, min_leaf, min_failure_rate, z, refine)
            n_confirm = int(focused * confirm) if boxes else 0
            fails = u_all[fail_all]
            mean, std = fails.mean(0), fails.std(0) * 1.5 + 0.05
            u[: focused - n_confirm] = np.clip(rng.normal(mean, std, (focused - n_confirm, D)), 0.0, 1.0)
            for j, b in enumerate(rng.integers(0, max(len(boxes), 1), n_confirm)):
                lo, hi = boxes[b]
                u[focused - n_confirm + j] = lo + (hi - lo) * rng.random(D)
            uniform[:focused] = False
        success = np.asarray(evaluate(from_unit(u, params)), dtype=bool)
        us.append(u)
        ok.append(success)
        drawn_uniform.append(uniform)
        log.info("mining round %d: %d samples, failure rate %.2f", r, n, 1.0 - success.mean())
    u_all = np.concatenate(us)
    samples = from_unit(u_all, params)
    success = np.concatenate(ok)
    uniform = np.concatenate(drawn_uniform)
    ref = _reference_mask(u_all, reference, params) if baseline == "reference" and reference else None
    rate_fn, background = background_fn(~success, uniform, baseline, ref)
    regions = extract_regions(samples, success, params, depth, min_leaf, min_failure_rate, rate_fn, z)
    pairs = paste_regions(regions, params, u_all, ~success, uniform, floor, paste, min_leaf) if paste > 0 else []
    if held_back and regions:
        check = retest_even if validate_rule == "even" else retest_sequential
        # grown boxes are re-tested beside the plain ones they grew from, to fall back on (paste.py)
        to_test = unique_boxes([g for g, _ in pairs] + [p for _, p in pairs]) if pairs else regions
        fresh_u, fresh_ok, kept = check(evaluate, to_test, params, u_all, held_back, rng, rate_fn,
                                        min_failure_rate, z)
        regions = pick_retested(pairs, kept) if pairs else kept
        samples = np.concatenate([samples, from_unit(fresh_u, params)])
        success = np.concatenate([success, fresh_ok])
    elif pairs:  # no re-test: every box stands
        regions = pick_retested(pairs, [r for pair in pairs for r in pair])
    log.info("background failure rate (%s) %.3f; %d regions", baseline, background, len(regions))
    return MiningResult(samples=samples, success=success, regions=regions, background=background, baseline=baseline)
