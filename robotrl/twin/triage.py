"""Triage of real failures, as in TwinRL: policy weakness (into training) or dynamics gap (to calibration).

Every recorded episode that failed on the robot (its ``/sim/episode`` success flag, or the
``success`` metadata) is replayed **closed loop** in the twin: the same policy, from the
recorded initial state, with the episode's command and scenario parameters (bag metadata
``scenario.<name>``), under the twin's physics (nominal, or a calibrated ``Physics``).

* The twin fails too: the failure is reproduced, so it is the policy's: a **policy
  weakness**. Its scenario goes into training (``policy_weakness.yaml``, a scenario file of
  small boxes around the failed scenarios, for ``task.scenarios=``). The scenario is the bag's
  metadata where it names a parameter, and otherwise what the bag itself measures of it (the
  task's ``scenario_from_episode``: the humanoid's failing command and its largest push); each
  result says where every value came from (``scenario_source``: ``metadata`` or ``bag``).
* The twin succeeds: the simulator does not reproduce what the robot did: a **dynamics
  gap**. The bag goes to calibration (linked under ``dynamics_gap/`` for
  ``robotrl twin calibrate bags=<out>/dynamics_gap``).

Episodes that succeeded on the robot are not triaged. Each verdict also carries the
closed-loop divergence time, to read the verdict against.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from robotrl.twin.episode import Episode
from robotrl.twin.metrics import divergence_time
from robotrl.twin.physics import Physics
from robotrl.twin.replay import PolicyFn, Twin, episode_scenario
from robotrl.twin.scenarios import Region, ScenarioFile, check_values

log = logging.getLogger(__name__)

POLICY_WEAKNESS, DYNAMICS_GAP = "policy_weakness", "dynamics_gap"


@dataclass
class TriageResult:
    """The verdict on one failed episode."""

    bag: str
    verdict: str
    real_success: bool
    twin_success: bool
    divergence_time_s: float
    scenario: dict[str, float]
    scenario_source: dict[str, str] = field(default_factory=dict)  # name -> "metadata" or "bag"


def policy_fn(path: str | Path) -> PolicyFn:
    """A numpy policy ``obs (N, P) -> actions (N, A)``: an exported ``.onnx`` (or ``.json`` spec), or a run."""
    path = Path(path)
    if path.suffix in (".onnx", ".json"):
        import onnxruntime as ort

        onnx = path if path.suffix == ".onnx" else path.with_suffix(".onnx")
        session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda obs: session.run(None, {name: np.asarray(obs, np.float32)})[0]
    import torch

    from robotrl.policies.io import load_policy

    policy, _ = load_policy(path)

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            # nn.Module types attribute lookups as Tensor | Module; every load_policy module has this method
            act_inference = cast(Callable[[torch.Tensor], torch.Tensor], policy.act_inference)
            return act_inference(torch.as_tensor(obs, dtype=torch.float32)).numpy()

    return act


def triage(task: str, episodes: list[Episode], policy: PolicyFn, physics: Physics | None = None,
           overrides: dict[str, Any] | None = None, eps: float = 0.05, m: int = 5) -> list[TriageResult]:
    """Replay every failed episode closed loop in the twin and classify it (module docstring).

    Args:
        task: the twin's task.
        episodes: recorded episodes (same robot); those without a failure flag are skipped.
        policy: the deployed policy, ``obs (N, P) -> actions (N, A)``.
        physics: the twin's physics (default nominal; pass the calibrated one after calibration).
        overrides: task config fields.
        eps: divergence threshold (rad) of the reported divergence time.
        m: steps the error must stay above ``eps``.

    """
    failed = [e for e in episodes if e.success is False]
    skipped = len(episodes) - len(failed)
    if skipped:
        log.info("triage: %d of %d episodes did not fail on the robot (or carry no success flag)", skipped,
                 len(episodes))
    if not failed:
        return []
    roll = Twin(task, failed, [physics or Physics()], overrides=overrides, nthread=1).closed_loop(policy)
    assert roll.success is not None  # closed_loop always reports it
    out = []
    for w, ep in enumerate(failed):
        n = int(min(roll.length[w], ep.num_steps))
        twin_ok = bool(roll.success[w])
        scenario, source = episode_scenario(task, ep)
        out.append(TriageResult(bag=str(ep.path), verdict=DYNAMICS_GAP if twin_ok else POLICY_WEAKNESS,
                                real_success=False, twin_success=twin_ok,
                                divergence_time_s=float(divergence_time(roll.q[w, :n], ep.q[:n], ep.dt, eps, m)),
                                scenario=scenario, scenario_source=source))
    return out


def weakness_scenarios(task: str, results: list[TriageResult], width: float = 0.02) -> ScenarioFile | None:
    """A scenario file with a box (``width`` of each range wide) around every reproduced failure's scenario."""
    from robotrl.tasks import task_class

    declared = {p.name: p for p in getattr(task_class(task), "scenario_params", [])}
    regions = []
    for r in results:
        if r.verdict != POLICY_WEAKNESS or not r.scenario:
            continue
        check_values(task, list(declared.values()), r.scenario, f"{r.bag}: metadata scenario.*", ranges=False)
        bounds = {}
        for name, value in r.scenario.items():
            p = declared[name]
            if not p.low <= value <= p.high:  # a real scenario may lie outside the ranges training draws from
                log.warning("%s: scenario.%s=%g is outside task %r's range %g..%g; its box is moved to the edge",
                            r.bag, name, value, task, p.low, p.high)
                value = min(max(value, p.low), p.high)
            half = 0.0 if p.kind == "choice" else 0.5 * width * (p.high - p.low)
            bounds[name] = [max(p.low, value - half), min(p.high, value + half)]
        regions.append(Region(bounds=bounds, failure_rate=1.0, samples=1,
                              summary=f"reproduced in the twin: {Path(r.bag).name}"))
    return ScenarioFile(task, list(declared.values()), regions) if regions else None


def write_triage(out_dir: str | Path, task: str, results: list[TriageResult]) -> list[Path]:
    """``triage.json``; ``policy_weakness.yaml`` (if any reproduced failure has a scenario); ``dynamics_gap/`` links."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "triage.json"]
    counts = {v: sum(r.verdict == v for r in results) for v in (POLICY_WEAKNESS, DYNAMICS_GAP)}
    written[0].write_text(json.dumps({"task": task, "counts": counts, "episodes": [asdict(r) for r in results]},
                                     indent=1))
    scenarios = weakness_scenarios(task, results)
    if scenarios is not None:
        written.append(scenarios.save(out / "policy_weakness.yaml"))
    gaps = [r for r in results if r.verdict == DYNAMICS_GAP]
    if gaps:
        gap_dir = out / "dynamics_gap"
        gap_dir.mkdir(exist_ok=True)
        for r in gaps:
            link = gap_dir / Path(r.bag).name
            if not link.exists():
                link.symlink_to(Path(r.bag).resolve(), target_is_directory=True)
        written.append(gap_dir)
    return written
