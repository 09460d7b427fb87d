"""Scenario parameters and scenario files: the failure regions mining writes and training mixes in.

A task declares its scenario parameters as ``SCENARIO_PARAMS`` (``ScenarioParam``: name,
range, and the sampling, ``uniform`` or ``choice`` over integers). A scenario file (YAML)
holds the task name, those declarations and a list of regions: boxes over some of the
parameters with the failure rate measured there and a readable summary (and, when mining pasted
them, ``reach``: how far the weakness extends beyond the box training draws from).

With ``task.scenarios=<file> task.scenario_mix=0.25`` a task draws, for that fraction of the
worlds it resets, a region and the region's parameters uniformly inside its box; the other
parameters keep the task's own draw. The file's ``weighting`` says how a region is picked:

- ``failure_rate`` (the default, and what a file without the key means): in proportion to
  its measured failure rate;
- ``learnability``: in proportion to ``p (1 - p)``, with ``p`` the failure rate smoothed by
  its sample count (``(failures + 1) / (samples + 2)``), as in prioritized level replay's
  "neither solved nor hopeless" curricula. A region where every sample failed is most likely
  beyond what the robot can do (the car's grip, a push no controller survives) and teaches
  little; one where the policy sometimes succeeds is where training helps.

This module is a leaf (numpy, torch, yaml): tasks import it lazily.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml


@dataclass(frozen=True)
class ScenarioParam:
    """One scenario parameter: ``name`` in ``[low, high]``; ``kind`` is ``uniform`` or ``choice`` (integers)."""

    name: str
    low: float
    high: float
    kind: str = "uniform"
    unit: str = ""


@dataclass
class Region:
    """A box over some parameters (``bounds[name] = [lo, hi]``) with its measured failure rate.

    ``reach`` (mining with ``paste``, ``paste.py``): the larger box the weakness was grown into, where it still
    fails at least the pasting floor of the time, with that box's own re-test figures and summary. Training draws from
    ``bounds``, the denser box it grew from; ``extent()`` is the region as far as the weakness reaches.
    """

    bounds: dict[str, list[float]]
    failure_rate: float
    samples: int
    summary: str = ""
    reach: dict[str, list[float]] | None = None
    reach_failure_rate: float | None = None
    reach_samples: int | None = None
    reach_summary: str = ""

    def extent(self) -> Region:
        """``reach`` as a region of its own (its failure rate, samples and summary), or this region without one."""
        if self.reach is None:
            return self
        return Region(bounds=self.reach, failure_rate=float(self.reach_failure_rate or 0.0),
                      samples=int(self.reach_samples or 0), summary=self.reach_summary)


WEIGHTINGS = ("failure_rate", "learnability")


def region_weights(regions: list[Region], weighting: str = "failure_rate") -> torch.Tensor:
    """``(R,)`` sampling weight of each region under ``weighting`` (module docstring), at least 1e-3."""
    if weighting == "failure_rate":
        w = [r.failure_rate for r in regions]
    elif weighting == "learnability":
        p = [(r.failure_rate * r.samples + 1.0) / (r.samples + 2.0) for r in regions]
        w = [q * (1.0 - q) for q in p]
    else:
        raise ValueError(f"unknown scenario weighting {weighting!r}; one of {WEIGHTINGS}.")
    return torch.tensor([max(x, 1e-3) for x in w])


@dataclass
class ScenarioFile:
    """The content of a scenario file (module docstring); ``weighting`` picks regions when sampling."""

    task: str
    params: list[ScenarioParam]
    regions: list[Region] = field(default_factory=list)
    weighting: str = "failure_rate"

    def __post_init__(self) -> None:
        """Reject an unknown ``weighting``."""
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"unknown scenario weighting {self.weighting!r}; one of {WEIGHTINGS}.")

    def save(self, path: str | Path) -> Path:
        """Write as YAML."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"task": self.task, "weighting": self.weighting,
                                        "params": [asdict(p) for p in self.params],
                                        "regions": [asdict(r) for r in self.regions]}, sort_keys=False))
        return path

    @classmethod
    def load(cls, path: str | Path) -> ScenarioFile:
        """Read a scenario file; regions naming undeclared parameters are errors."""
        data = yaml.safe_load(Path(path).read_text()) or {}
        params = [ScenarioParam(**p) for p in data.get("params", [])]
        names = {p.name for p in params}
        regions = [Region(**r) for r in data.get("regions", [])]
        for r in regions:
            unknown = sorted((set(r.bounds) | set(r.reach or {})) - names)
            if unknown:
                raise ValueError(f"{path}: a region bounds undeclared parameters {unknown}; declared: {sorted(names)}.")
        if not regions:
            raise ValueError(f"{path}: the scenario file has no regions.")
        weighting = data.get("weighting", "failure_rate")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"{path}: unknown weighting {weighting!r}; one of {WEIGHTINGS}.")
        return cls(task=data.get("task", ""), params=params, regions=regions, weighting=weighting)

    def sample(self, k: int, gen: torch.Generator, device: torch.device | str = "cpu",
               weighting: str | None = None) -> dict[str, torch.Tensor]:
        """Draw ``k`` scenarios: ``{name: (k,) float32}`` with NaN where a drawn region leaves ``name`` free.

        Regions are picked by ``weighting`` (default: the file's).
        """
        if k == 0:
            return {p.name: torch.zeros(0, device=device) for p in self.params}
        weights = region_weights(self.regions, weighting or self.weighting)
        pick = torch.multinomial(weights, k, replacement=True, generator=gen)
        kinds = {p.name: p.kind for p in self.params}
        out = {p.name: torch.full((k,), float("nan")) for p in self.params}
        u = torch.rand(k, len(self.params), generator=gen)
        for i, p in enumerate(self.params):
            for j, region in enumerate(self.regions):
                if p.name not in region.bounds:
                    continue
                rows = pick == j
                lo, hi = region.bounds[p.name]
                value = lo + (hi - lo) * u[rows, i]
                out[p.name][rows] = value.round() if kinds[p.name] == "choice" else value
        return {n: v.to(device) for n, v in out.items()}


def check_names(task: str, params: list[ScenarioParam], names: Iterable[str], where: str) -> None:
    """Raise ``ValueError`` naming ``where`` if ``names`` holds a parameter the task does not declare."""
    declared = {p.name for p in params}
    unknown = sorted(set(names) - declared)
    if unknown:
        raise ValueError(f"{where}: {unknown} are not scenario parameters of task {task!r}; valid: {sorted(declared)}.")


def check_values(task: str, params: list[ScenarioParam], values: dict[str, float], where: str,
                 ranges: bool = True) -> None:
    """Check a scenario's values against a task's declared parameters.

    Raises:
        ValueError: naming ``where``: an undeclared parameter, or (``ranges``) a value outside its
            parameter's range or a non-integer value of a ``choice`` parameter.

    """
    check_names(task, params, values, where)
    declared = {p.name: p for p in params}
    for name, v in values.items() if ranges else ():
        p = declared[name]
        if not p.low <= v <= p.high or (p.kind == "choice" and v != round(v)):
            kind = "an integer in " if p.kind == "choice" else ""
            raise ValueError(f"{where}: {name}={v:g} is not valid for task {task!r}; it takes {kind}"
                             f"{p.low:g}..{p.high:g}{' ' + p.unit if p.unit else ''}.")


def point_scenario(task: str, params: list[ScenarioParam], values: dict[str, float], summary: str = ""
                   ) -> ScenarioFile:
    """A scenario file whose one region is the point ``values``: every draw from it is exactly these values.

    Raises:
        ValueError: an undeclared parameter or a value outside its range (``check_values``).

    """
    check_values(task, params, values, summary or "scenario")
    return ScenarioFile(task, list(params), [Region({k: [float(v), float(v)] for k, v in values.items()},
                                                     failure_rate=1.0, samples=0, summary=summary)])


def summarize(bounds: dict[str, list[float]], params: list[ScenarioParam]) -> str:
    """A readable sentence for a box, e.g. ``fails when cmd_vx > 1.2 m/s and friction < 0.7``."""
    info = {p.name: p for p in params}
    parts = []
    for name, (lo, hi) in bounds.items():
        p = info[name]
        unit = f" {p.unit}" if p.unit else ""
        at_low, at_high = np.isclose(lo, p.low), np.isclose(hi, p.high)
        if at_low and not at_high:
            parts.append(f"{name} < {hi:.3g}{unit}")
        elif at_high and not at_low:
            parts.append(f"{name} > {lo:.3g}{unit}")
        elif not (at_low and at_high):
            parts.append(f"{lo:.3g} < {name} < {hi:.3g}{unit}")
    return "fails when " + (" and ".join(parts) if parts else "anywhere")


def as_dict(values: dict[str, Any]) -> dict[str, Any]:
    """Plain-python copy (for logs and JSON)."""
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in values.items()}
