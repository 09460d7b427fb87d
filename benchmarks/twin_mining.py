"""Twin benchmark, synthetic failure mining (``python benchmarks/twin.py mining|mining_narrowed|mining_validate``).

Cheap stand-in policies with planted failures, the miner against uniform draws at the same budget;
the method is in twin.py's docstring (Mining, Mining narrowed, Validation).
"""

import os

import numpy as np

from robotrl.twin.mine import mine
from robotrl.twin.regions import region_coverage
from robotrl.twin.scenarios import ScenarioParam

SYN_PARAMS = [ScenarioParam("thickness", 0.005, 0.05, unit="m"), ScenarioParam("mass", 0.1, 1.0, unit="kg"),
              ScenarioParam("friction", 0.3, 1.2), ScenarioParam("size", 0.05, 0.3, unit="m")]
# 2% of the volume: the thinnest 14% of handles and the heaviest 14% of tools
PLANTED = {"thickness": [0.005, 0.0113], "mass": [0.874, 1.0]}


def synthetic_policy(x, noise=0.03):
    inside = (x[:, 0] <= PLANTED["thickness"][1]) & (x[:, 1] >= PLANTED["mass"][0])
    return ~(inside ^ (np.random.default_rng(len(x) + int(1e6 * x[0, 0])).random(len(x)) < noise))


NARROWED_PARAMS = [ScenarioParam("friction", 0.3, 1.2), ScenarioParam("max_curvature", 0.0, 1.0),
                   ScenarioParam("traffic_speed", 0.0, 1.0), ScenarioParam("obstacles", 0.0, 3.0)]
TRAINED_REGIME = {"friction": [1.0, 1.2]}  # the narrowed training distribution (NARROW in twin_planted.py)


def narrowed_failure_prob(x):
    """15% failures in the trained regime, rising linearly below friction 1.0 to 100% at 0.45."""
    return np.where(x[:, 0] >= 1.0, 0.15, np.clip(0.15 + (1.0 - x[:, 0]) / 0.55 * 0.85, 0.0, 1.0))


def narrowed_rows(budgets=(256, 512, 1024), seeds=range(5), baselines=("uniform", "reference", "complement"),
                  min_leafs=(8, 16)):
    from robotrl.twin.regions import failure_coverage, inside_regions

    rng = np.random.default_rng(99)
    hx = np.column_stack([p.low + rng.random(20000) * (p.high - p.low) for p in NARROWED_PARAMS])
    hf = rng.random(20000) < narrowed_failure_prob(hx)
    planted = hx[:, 0] < 1.0
    rows = []
    for budget in budgets:
        for baseline in baselines:
            for min_leaf in min_leafs:
                for seed in seeds:
                    for name, uniform in (("miner", False), ("uniform", True)):
                        pol_rng = np.random.default_rng(seed)
                        res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x),
                                   NARROWED_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform,
                                   min_leaf=min_leaf, baseline=baseline, reference=TRAINED_REGIME)
                        inside = inside_regions(hx, res.regions, NARROWED_PARAMS)
                        each = [hf[inside_regions(hx, [r], NARROWED_PARAMS)] for r in res.regions]
                        rows.append({"method": name, "baseline": baseline, "min_leaf": min_leaf, "seed": seed,
                                     "budget": budget, "background": round(res.background, 3),
                                     "coverage_pct": round(100 * failure_coverage(inside, hf, planted), 1),
                                     "false_regions": int(sum(f.size == 0 or f.mean() < 0.5 for f in each)),
                                     "regions": len(res.regions),
                                     "precision_pct": round(100 * float(hf[inside].mean()), 1) if inside.any()
                                     else float("nan")})
    summary = {}
    for budget in budgets:
        for baseline in baselines:
            for min_leaf in min_leafs:
                for m in ("miner", "uniform"):
                    rs = [r for r in rows if (r["method"], r["baseline"], r["min_leaf"], r["budget"]) ==
                          (m, baseline, min_leaf, budget)]
                    key = f"{m}_{baseline}_leaf{min_leaf}_budget{budget}"
                    summary[f"{key}_coverage_pct_mean"] = round(float(np.mean([r["coverage_pct"] for r in rs])), 1)
                    summary[f"{key}_false_regions_mean"] = float(np.mean([r["false_regions"] for r in rs]))
                    summary[f"{key}_regions_mean"] = float(np.mean([r["regions"] for r in rs]))
                    summary[f"{key}_precision_pct_mean"] = round(float(np.nanmean([r["precision_pct"] for r in rs])), 1)
    # the budget split of the miner's later rounds: focused share (rest uniform), confirmation share of it
    for baseline, min_leaf in (("uniform", 8), ("reference", 16)):
        for focus, confirm in ((0.5, 0.5), (0.25, 0.5), (0.75, 0.5), (0.5, 0.0), (0.5, 1.0)):
            covs, false = [], []
            for seed in seeds:
                pol_rng = np.random.default_rng(seed)
                res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x), NARROWED_PARAMS, 512,
                           seed=seed, min_leaf=min_leaf, baseline=baseline, reference=TRAINED_REGIME, focus=focus,
                           confirm=confirm)
                covs.append(100 * failure_coverage(inside_regions(hx, res.regions, NARROWED_PARAMS), hf, planted))
                false.append(sum(hf[inside_regions(hx, [r], NARROWED_PARAMS)].mean() < 0.5 for r in res.regions))
            key = f"split_miner_{baseline}_leaf{min_leaf}_budget512_focus{focus}_confirm{confirm}"
            summary[f"{key}_coverage_pct_mean"] = round(float(np.mean(covs)), 1)
            summary[f"{key}_false_regions_mean"] = float(np.mean(false))
    import sys

    return {"trained_regime": TRAINED_REGIME, "failure": "0.15 in the trained regime, linear to 1.0 at friction 0.45",
            "seeds": len(list(seeds)), "command": "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv),
            "loadavg_1m": os.getloadavg()[0], "summary": summary, "runs": rows}


def validate_rows(budgets=(512, 1024), seeds=range(10), min_leafs=(8, 16), shares=(0.0, 0.2, 0.3), rules=("even",)):
    """Miner and uniform draws on the narrowed stand-in, with and without the fresh-draw re-test of regions.

    ``rules``: the re-test's ``validate_rule`` values to compare (keys of a rule other than ``even`` end
    in ``_<rule>``).
    """
    import sys

    from robotrl.twin.regions import failure_coverage, inside_regions

    rng = np.random.default_rng(99)
    hx = np.column_stack([p.low + rng.random(20000) * (p.high - p.low) for p in NARROWED_PARAMS])
    hf = rng.random(20000) < narrowed_failure_prob(hx)
    planted = hx[:, 0] < 1.0
    summary = {}
    for budget in budgets:
        for min_leaf in min_leafs:
            for share, rule in ((share, rule) for share in shares for rule in rules if share or rule == "even"):
                for name, uniform in (("miner", False), ("uniform", True)):
                    covs, false, count = [], [], []
                    for seed in seeds:
                        pol_rng = np.random.default_rng(seed)
                        res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x),
                                   NARROWED_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform,
                                   min_leaf=min_leaf, baseline="reference", reference=TRAINED_REGIME, validate=share,
                                   validate_rule=rule)
                        covs.append(100 * failure_coverage(inside_regions(hx, res.regions, NARROWED_PARAMS), hf,
                                                           planted))
                        each = [hf[inside_regions(hx, [r], NARROWED_PARAMS)] for r in res.regions]
                        false.append(sum(f.size == 0 or f.mean() < 0.5 for f in each))
                        count.append(len(res.regions))
                    key = f"{name}_leaf{min_leaf}_budget{budget}_validate{share}" + (f"_{rule}" if rule != "even"
                                                                                         else "")
                    summary[f"{key}_coverage_pct_mean"] = round(float(np.mean(covs)), 1)
                    summary[f"{key}_false_regions_mean"] = float(np.mean(false))
                    summary[f"{key}_regions_mean"] = float(np.mean(count))
    return {"baseline": "reference", "trained_regime": TRAINED_REGIME, "seeds": len(list(seeds)), "rules": list(rules),
            "command": "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv),
            "loadavg_1m": os.getloadavg()[0], "summary": summary}


def mining_rows(budgets=(200, 400, 800), seeds=range(5)):
    rows = []
    for budget in budgets:
        for seed in seeds:
            for name, uniform in (("miner", False), ("uniform", True)):
                res = mine(synthetic_policy, SYN_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform, min_leaf=4)
                cov, false = region_coverage(res.regions, PLANTED, SYN_PARAMS)
                rows.append({"method": name, "seed": seed, "budget": budget, "coverage_pct": round(100 * cov, 1),
                             "false_regions": false, "regions": len(res.regions),
                             "failures_seen": int((~res.success).sum()),
                             "summaries": [r.summary for r in res.regions][:4]})
    summary = {}
    for budget in budgets:
        for m in ("miner", "uniform"):
            rs = [r for r in rows if r["method"] == m and r["budget"] == budget]
            summary[f"{m}_budget{budget}_coverage_pct_mean"] = float(np.mean([r["coverage_pct"] for r in rs]))
            summary[f"{m}_budget{budget}_found80_count"] = int(sum(r["coverage_pct"] >= 80 for r in rs))
            summary[f"{m}_budget{budget}_false_regions_mean"] = float(np.mean([r["false_regions"] for r in rs]))
            summary[f"{m}_budget{budget}_failures_seen_mean"] = float(np.mean([r["failures_seen"] for r in rs]))
    return {"planted_box": PLANTED, "planted_volume_pct": 2.0, "seeds": len(list(seeds)), "summary": summary,
            "runs": rows}


def refine_rows(seeds=range(10), refines=(0.0, 0.25)):
    """The miner with and without ``refine``, and uniform draws, at ``robotrl twin mine``'s defaults (min_leaf 8,
    validate 0.2): on the synthetic planted box (sharp edges; coverage of its volume) and on the narrowed
    stand-in (a failure rate rising gradually below friction 1.0; coverage of its failures, baseline reference)."""
    import sys

    from robotrl.twin.regions import failure_coverage, inside_regions

    rng = np.random.default_rng(99)
    hx = np.column_stack([p.low + rng.random(20000) * (p.high - p.low) for p in NARROWED_PARAMS])
    hf = rng.random(20000) < narrowed_failure_prob(hx)
    planted = hx[:, 0] < 1.0
    arms = [("miner", False, r) for r in refines] + [("uniform", True, 0.0)]
    summary = {}
    for case, budgets in (("synthetic", (400, 800)), ("narrowed", (512, 1024))):
        for budget in budgets:
            for name, uniform, refine in arms:
                covs, false = [], []
                for seed in seeds:
                    if case == "synthetic":
                        res = mine(synthetic_policy, SYN_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform,
                                   min_leaf=8, validate=0.2, refine=refine)
                        cov, n_false = region_coverage(res.regions, PLANTED, SYN_PARAMS)
                        covs.append(100 * cov)
                        false.append(n_false)
                    else:
                        pol_rng = np.random.default_rng(seed)
                        res = mine(lambda x, r=pol_rng: r.random(len(x)) >= narrowed_failure_prob(x),
                                   NARROWED_PARAMS, budget, rounds=4, seed=seed, uniform_only=uniform, min_leaf=8,
                                   baseline="reference", reference=TRAINED_REGIME, validate=0.2, refine=refine)
                        covs.append(100 * failure_coverage(inside_regions(hx, res.regions, NARROWED_PARAMS), hf,
                                                           planted))
                        each = [hf[inside_regions(hx, [r], NARROWED_PARAMS)] for r in res.regions]
                        false.append(sum(f.size == 0 or f.mean() < 0.5 for f in each))
                key = f"{case}_{name}" + (f"_refine{refine}" if not uniform else "") + f"_budget{budget}"
                summary[f"{key}_coverage_pct_mean"] = round(float(np.mean(covs)), 1)
                summary[f"{key}_found80_count"] = int(sum(c >= 80 for c in covs))
                summary[f"{key}_false_regions_mean"] = float(np.mean(false))
    return {"min_leaf": 8, "validate": 0.2, "seeds": len(list(seeds)),
            "command": "flock /tmp/robotrl-cpu.lock python " + " ".join(sys.argv),
            "loadavg_1m": os.getloadavg()[0], "summary": summary}
