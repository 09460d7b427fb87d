"""Choose the checkpoint of a retraining that best keeps both distributions (``robotrl twin select``).

Retraining a policy with mined scenarios (``resume=true task.scenarios=<file> task.scenario_mix=0.25``)
does not improve it monotonically: on the driving width plant the continued PPO run drifted by up to
20 points of success on the task's own distribution within 8 minutes, with or without the mined
scenarios (``robotrl/twin/README.md``). A retraining that keeps every checkpoint
(``keep_checkpoints=0``) can be scored afterwards on fresh validation draws, and the one to deploy
chosen by a rule fixed in advance:

- each candidate (every ``every``-th checkpoint after the start, and the last one) and the start
  itself are scored on ``episodes`` draws from the scenario file's regions (the file's regions picked
  by failure rate, parameters the regions leave free keep the task's own draw) and on ``episodes``
  draws of the task's own distribution (no scenario mixed in), the same draws for every candidate;
- **rule**: among the candidates whose own-distribution success is at least the start's minus
  ``tolerance``, the one with the highest success in the regions; if none qualifies, the start
  (the retraining is not shipped).

The validation draws must not be the ones a benchmark then reports: pass another ``seed``.

``average_checkpoints`` is the other answer to the same drift: a uniform average of the policy weights
(and observation normalizer) of a run's later checkpoints, as stochastic weight averaging does for
deep RL (Nikishin et al., 2018), written as one more checkpoint.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)


@dataclass
class Selection:
    """The scores of every candidate and the one the rule chose (module docstring).

    ``checkpoints[i]`` scored ``in_regions[i]`` and ``own[i]`` (success rates in [0, 1]); index 0 is
    the start. ``chosen`` indexes ``checkpoints``; ``chosen == 0`` means no candidate qualified.
    """

    checkpoints: list[str]
    iterations: list[int]
    in_regions: list[float]
    own: list[float]
    chosen: int
    tolerance: float
    episodes: int
    seed: int
    rule: str = ("the highest success in the regions among candidates whose own-distribution success is at least "
                 "the start's minus tolerance; the start if none")
    overrides: dict[str, Any] = field(default_factory=dict)
    within_s: float | None = None

    @property
    def checkpoint(self) -> str:
        """The chosen checkpoint's ``.safetensors`` path."""
        return self.checkpoints[self.chosen]

    def save(self, path: str | Path) -> Path:
        """Write the scores and the choice as JSON; returns ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**asdict(self), "checkpoint": self.checkpoint}, indent=1))
        return path


def average_checkpoints(paths: list[Path], out_dir: str | Path) -> Path:
    """Average the ``policy.*`` float tensors of ``paths`` (checkpoints of one run) into one checkpoint.

    Every other tensor (optimizer, normalizers of the return, random streams) and the metadata come from
    the last of ``paths``; the metadata lists what was averaged (``averaged_from``). Written under
    ``out_dir/checkpoints`` as ``ckpt_<last iteration>``; returns its ``.safetensors`` path.

    Raises:
        ValueError: no paths, or checkpoints whose policy tensors differ in names or shapes.

    """
    from robotrl.storage.checkpoint import load_checkpoint, save_checkpoint

    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint.")
    last, meta = load_checkpoint(paths[-1])
    keys = sorted(k for k, v in last.items() if k.startswith("policy.") and v.is_floating_point())
    total = {k: torch.zeros(last[k].shape, dtype=torch.float64) for k in keys}
    for path in paths:
        tensors, _ = load_checkpoint(path)
        mismatch = [k for k in keys if k not in tensors or tensors[k].shape != last[k].shape]
        if mismatch:
            raise ValueError(f"{path} does not match {paths[-1]} in {mismatch[:3]}: average checkpoints of one run.")
        for k in keys:
            total[k] += tensors[k].double()
    averaged = {**last, **{k: (total[k] / len(paths)).to(last[k].dtype) for k in keys}}
    meta = {**meta, "averaged_from": [str(p) for p in paths]}
    return save_checkpoint(Path(out_dir) / "checkpoints", int(meta["iteration"]), averaged, meta, keep=0)


def candidates(run: str | Path, start_iteration: int, every: int = 1, within_s: float | None = None,
               start_elapsed_s: float = 0.0) -> list[Path]:
    """Every ``every``-th checkpoint of ``run`` after ``start_iteration``, always with the newest.

    With ``within_s``, only the checkpoints saved within ``within_s`` seconds of training after the start
    (their metadata's ``elapsed_s`` minus ``start_elapsed_s``) take part, and "the newest" is the newest of
    those: the candidates a retraining of ``within_s`` seconds would have left.

    Raises:
        FileNotFoundError: ``run`` kept no checkpoint after the start (naming ``keep_checkpoints=0``).
        ValueError: ``every`` < 1, or ``within_s`` <= 0.

    """
    if every < 1:
        raise ValueError(f"every must be >= 1 (score every n-th checkpoint), got {every}.")
    if within_s is not None and within_s <= 0:
        raise ValueError(f"within_s must be > 0 (seconds of retraining to choose from), got {within_s}.")
    found = sorted(Path(run, "checkpoints").glob("ckpt_*.safetensors"))
    after = [p for p in found if int(p.stem.split("_")[1]) > start_iteration]
    if within_s is not None:
        after = [p for p in after if _elapsed_s(p) - start_elapsed_s <= within_s]
    if not after:
        window = "" if within_s is None else f" within {within_s:g} s of training"
        raise FileNotFoundError(f"{run} has no checkpoint after iteration {start_iteration} (the start){window}: "
                                "retrain it with resume=true, and keep_checkpoints=0 to choose among all of them.")
    picked = after[every - 1::every]
    return picked if picked and picked[-1] == after[-1] else [*picked, after[-1]]


def _elapsed_s(ckpt: Path) -> float:
    """The training seconds a checkpoint's metadata records (``elapsed_s``)."""
    from robotrl.storage.checkpoint import load_meta

    try:
        return float(load_meta(ckpt)["elapsed_s"])
    except (OSError, KeyError, ValueError) as err:
        raise ValueError(f"{ckpt.with_suffix('.json')} does not record elapsed_s ({err!r}); within_s needs "
                         "checkpoints that do, or leave within_s unset.") from err


def choose(in_regions: list[float], own: list[float], tolerance: float) -> int:
    """Index chosen by the module's rule; index 0 is the start. Ties go to the earlier checkpoint."""
    floor = own[0] - tolerance
    ok = [i for i in range(1, len(own)) if own[i] >= floor]
    return max(ok, key=lambda i: (in_regions[i], -i)) if ok else 0


def select_checkpoint(start: str | Path, run: str | Path, scenarios: str | Path,
                      overrides: dict[str, Any] | None = None, episodes: int = 256, every: int = 1,
                      tolerance: float = 0.02, seed: int = 11, worlds: int = 128,
                      own_overrides: dict[str, Any] | None = None, within_s: float | None = None) -> Selection:
    """Score the start and ``run``'s later checkpoints, and choose one (module docstring).

    Args:
        start: the checkpoint the retraining resumed from (run dir or ``ckpt_*.safetensors``).
        run: the retraining's run dir.
        scenarios: the scenario file it trained with.
        overrides: task fields for the draws in the regions (a widened track bank); the own-distribution
            draws use each checkpoint's own task config.
        episodes: draws per distribution and candidate.
        every: score every n-th checkpoint after the start (and the last).
        tolerance: the own-distribution success a candidate may lose against the start (0.02: 2 points).
        seed: seeds the draws and the env (use one the final report does not).
        worlds: worlds per batch.
        own_overrides: task fields for the own-distribution draws (default: none, the checkpoint's config).
        within_s: choose only among the checkpoints of the first ``within_s`` seconds of the retraining
            (``candidates``): a shorter retraining, read off a longer one.

    """
    from tqdm import tqdm

    from robotrl.storage.checkpoint import load_meta, resolve
    from robotrl.twin.evaluate import ScenarioEvaluator
    from robotrl.twin.scenarios import ScenarioFile

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}.")
    start_ckpt = resolve(str(start))
    start_meta = load_meta(start_ckpt)
    if within_s is not None and "elapsed_s" not in start_meta:
        raise ValueError(f"{start_ckpt} does not record elapsed_s, so within_s={within_s:g} has no start to count "
                         "from; choose the start a run saved, or leave within_s unset.")
    ckpts = [start_ckpt, *candidates(run, int(start_meta["iteration"]), every, within_s,
                                     float(start_meta.get("elapsed_s", 0.0)))]
    mined = ScenarioFile.load(scenarios)
    names = [p.name for p in mined.params]
    draws = mined.sample(episodes, torch.Generator().manual_seed(seed), weighting="failure_rate")
    x_in = np.stack([draws[n].numpy() for n in names], 1)  # NaN: the task's own draw
    x_own = np.full((episodes, 1), np.nan, dtype=np.float32)
    in_regions, own, iterations = [], [], []
    for ckpt in tqdm(ckpts, desc="scoring checkpoints", unit="ckpt"):
        ev = ScenarioEvaluator(ckpt, names, overrides=overrides, worlds=worlds, seed=seed)
        if ev.task_name != mined.task:
            raise ValueError(f"{scenarios} is for task {mined.task!r}, {ckpt} for {ev.task_name!r}.")
        in_regions.append(float(ev(x_in).mean()))
        ev = ScenarioEvaluator(ckpt, names[:1], overrides=own_overrides, worlds=worlds, seed=seed)
        own.append(float(ev(x_own).mean()))
        iterations.append(int(ckpt.stem.split("_")[1]))
        log.info("%s: success %.3f in the regions, %.3f on the own distribution", ckpt.name, in_regions[-1], own[-1])
    chosen = choose(in_regions, own, tolerance)
    sel = Selection([str(c) for c in ckpts], iterations, in_regions, own, chosen, tolerance, episodes, seed,
                    overrides=dict(overrides or {}), within_s=within_s)
    if chosen == 0:
        log.warning("no checkpoint of %s kept the own-distribution success within %.0f points of the start (%.3f); "
                    "the start stays the policy to deploy", run, 100 * tolerance, own[0])
    else:
        log.info("chose %s: %.3f in the regions (start %.3f), %.3f on the own distribution (start %.3f)",
                 ckpts[chosen].name, in_regions[chosen], in_regions[0], own[chosen], own[0])
    return sel
