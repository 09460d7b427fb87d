"""Twin benchmark, a sharper planted weakness: road width (``python benchmarks/twin.py planted_width <run>``).

The friction plant (``twin_planted.py``) fails gradually: the narrow policy fails 23-38% of the time over
much of its planted box, below the background, so no region can hold those failures without being a
false one (held-out failure rate < 0.5). Here the plant is the road's half-width: ``robotrl train
task=driving`` trains on half-widths 0.6-1.0 m (``configs/task/driving.yaml``), and the miner searches
0.3-1.0 m, so the planted box is ``half_width < 0.6``: roads narrower than any the policy saw, where its
centre leaves the road more and more often as the road narrows.

Steps (one call; a missing run is trained first, the bare default command with ``seed=<k>``):

1. the miner and the uniform baseline each get ``budget`` scenarios over half-width, curvature,
   traffic speed and obstacles (friction and the rest keep the task's own draws), the same region
   extraction and test as the friction plant's recorded runs (``baseline=reference`` against the
   trained regime ``half_width`` 0.6-1.0, ``min_leaf=16``, ``validate=0.2``), chosen before this ran;
2. held out: ``n_heldout`` uniform scenarios labelled by the policy (another env seed);
3. the same held-out metrics as the friction plant (``twin_planted.heldout_metrics``, the box
   ``half_width < 0.6``): the share of the planted failures the regions cover, of the excess over
   the trained regime's failure rate, of the box's volume, and the false regions.

The evaluator widens the task's track bank to half-widths 0.3-1.0 m and 256 tracks
(``ScenarioEvaluator`` overrides), so that narrow roads exist to be picked.
"""

import time
from pathlib import Path

import numpy as np

WIDTH_PARAMS = ["half_width", "max_curvature", "traffic_speed", "obstacles"]
TRAINED_WIDTH = [0.6, 1.0]  # configs/task/driving.yaml: task.half_width, what the default run trains on
BOX = ("half_width", TRAINED_WIDTH[0])  # the planted box: half_width below it
BANK = {"half_width": [0.3, 1.0], "num_tracks": 256}  # the evaluator's track bank (narrow roads to pick)
OPTIONS = {"baseline": "reference", "min_leaf": 16, "validate": 0.2}


def width_rows(run: str, seed: int = 0, train_s: int = 600, budget: int = 512, n_heldout: int = 768) -> dict:
    """Mine a default driving run over road width and score the regions on held-out scenarios (module docstring)."""
    from twin_planted import _train, heldout_metrics, mining_figures

    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.mine import _from_unit, mine

    path = Path(run)
    if not (path / "checkpoints" / "latest.json").is_file():
        _train(path, train_s, base=["task=driving", f"seed={seed}", "progress=false", "tensorboard=false",
                                    "eval_at_end=false"])
    out: dict = {"run": str(path), "train_seed": seed, "mine_budget": budget, "mine_params": WIDTH_PARAMS,
                 "trained_half_width": TRAINED_WIDTH, "planted_box": f"{BOX[0]} < {BOX[1]}", "bank": BANK,
                 "mine_options": OPTIONS}
    t0 = time.time()
    ev = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=1)
    regions = {}
    for name, uniform in (("miner", False), ("uniform", True)):
        res = mine(ev, ev.params, budget, rounds=4, seed=0, uniform_only=uniform, min_leaf=OPTIONS["min_leaf"],
                   baseline=OPTIONS["baseline"], reference={BOX[0]: TRAINED_WIDTH}, validate=OPTIONS["validate"])
        regions[name] = res.regions
        out.update(mining_figures(name, res))
    out["mine_wall_s"] = round(time.time() - t0, 1)
    t0 = time.time()
    held = ScenarioEvaluator(path, WIDTH_PARAMS, overrides=BANK, worlds=128, seed=3)
    x = _from_unit(np.random.default_rng(123).random((n_heldout, len(WIDTH_PARAMS))), held.params)
    fail = ~held(x)
    planted = x[:, 0] < BOX[1]
    out.update({"heldout_scenarios": n_heldout, "heldout_wall_s": round(time.time() - t0, 1),
                "heldout_failure_rate_planted_pct": round(100 * float(fail[planted].mean()), 1),
                "heldout_failure_rate_trained_pct": round(100 * float(fail[~planted].mean()), 1)})
    edges = np.arange(0.3, 1.01, 0.1)
    bins = np.digitize(x[:, 0], edges[1:-1])
    out["heldout_failure_rate_by_half_width"] = {
        f"{edges[k]:.1f}-{edges[k + 1]:.1f}": round(float(fail[bins == k].mean()), 3) for k in range(len(edges) - 1)}
    out.update(heldout_metrics(x, fail, regions, ev.params, BOX))
    return out
