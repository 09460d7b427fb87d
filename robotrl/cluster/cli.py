"""``robotrl batch <job> key=value ...``: one job over a scenario grid or sample, locally or on Ray.

    robotrl batch eval checkpoint=runs/driving/x 'grid.num_obstacles=[0,2,4]' 'seeds=[0,1]' out=eval.json
    robotrl batch eval checkpoint=runs/driving/x sample=1000 'range.num_obstacles=[0,6]' workers=64 address=auto
    robotrl batch collect task=tool_use teacher=scripted episodes=8 'seeds=[0,1,2,3]' workers=2 out=demos.hdf5

Batch arguments (the rest go to the job, see ``robotrl batch <job> --help``):
    workers      0: this process, no Ray (default); n: up to n Ray tasks at once.
    address      Ray cluster address (``auto``, ``<head ip>:6379``); empty starts Ray on 127.0.0.1.
    threads      CPU threads per scenario (default 1).
    max_retries  reruns of a scenario whose worker died (default 3).
    seeds        list of seeds; every grid point runs once per seed (default [0]).
    grid.<field>=[a,b,...]   task-config values to combine (a grid).
    sample=N with range.<field>=[lo,hi] (uniform) or [a,b,c] (choices), sample_seed=S.
    task.<field>=value       a task override shared by every scenario.
    out          merged output (default batch_<job>.json, or .hdf5 for collect).
    progress     show scenarios done / total and scenarios/s (default true).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf

from robotrl.cluster.batch import Scenario, grid, run_batch, sample, write_results
from robotrl.cluster.jobs import JOBS


@dataclass
class BatchConfig:
    """Batch-level arguments of ``robotrl batch`` (see module docstring)."""

    workers: int = 0
    address: str = ""
    threads: int = 1
    max_retries: int = 3
    seeds: list[int] = field(default_factory=lambda: [0])
    grid: dict[str, Any] = field(default_factory=dict)
    range: dict[str, Any] = field(default_factory=dict)
    sample: int = 0
    sample_seed: int = 0
    task: dict[str, Any] = field(default_factory=dict)
    out: str = ""
    progress: bool = True


def parse(job_name: str, argv: list[str]) -> tuple[BatchConfig, Any]:
    """Split ``key=value`` arguments into the typed batch config and the job instance.

    Raises:
        KeyError: unknown job, listing the valid ones.
        ValueError: an argument that is neither a batch nor a job field, listing both.

    """
    if job_name not in JOBS:
        raise KeyError(f"Unknown batch job {job_name!r}. Valid jobs: {', '.join(sorted(JOBS))}.")
    job_cls = JOBS[job_name]
    batch_keys = {f.name for f in dataclasses.fields(BatchConfig)}
    job_keys = {f.name for f in dataclasses.fields(job_cls)}
    batch_args: list[str] = []
    job_args: list[str] = []
    for arg in argv:
        key = arg.split("=", 1)[0].split(".", 1)[0]
        if "=" not in arg or key not in batch_keys | job_keys:
            raise ValueError(f"Bad argument {arg!r}. Batch keys: {', '.join(sorted(batch_keys))}; "
                             f"{job_name} keys: {', '.join(sorted(job_keys))}.")
        (batch_args if key in batch_keys and key not in job_keys else job_args).append(arg)
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BatchConfig), OmegaConf.from_dotlist(batch_args)))
    job = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(job_cls), OmegaConf.from_dotlist(job_args)))
    assert isinstance(cfg, BatchConfig)
    return cfg, job


def scenarios_of(cfg: BatchConfig) -> list[Scenario]:
    """The scenario list: a sample when ``sample > 0``, else the grid (``task.*`` added to every one)."""
    if cfg.sample > 0:
        out = sample(cfg.range, cfg.sample, cfg.sample_seed)
    else:
        if cfg.range:
            raise ValueError("range.<field> needs sample=<number of scenarios>")
        out = grid({k: v if isinstance(v, list) else [v] for k, v in cfg.grid.items()}, cfg.seeds)
    return [dataclasses.replace(s, task={**cfg.task, **s.task}) for s in out]


def main(argv: list[str]) -> int:
    """Entry point of ``robotrl batch`` (see module docstring)."""
    from robotrl.monitoring import setup_logging

    if not argv or argv[0] in ("-h", "--help"):
        print(f"{__doc__}\nJobs: {', '.join(sorted(JOBS))}")  # noqa: T201
        return 0
    if len(argv) > 1 and argv[1] in ("-h", "--help") and argv[0] in JOBS:
        print(JOBS[argv[0]].__doc__)  # noqa: T201
        return 0
    setup_logging("INFO")
    try:
        cfg, job = parse(argv[0], argv[1:])
        scenarios = scenarios_of(cfg)
        check = getattr(job, "check", None)
        if check is not None:
            check()  # a missing checkpoint or task fails here, not in every worker
    except (KeyError, ValueError, FileNotFoundError) as err:
        print(err, file=sys.stderr)  # noqa: T201
        return 2
    results = run_batch(job, scenarios, workers=cfg.workers, address=cfg.address or None, threads=cfg.threads,
                        max_retries=cfg.max_retries, progress=cfg.progress)
    meta = {"job": argv[0], "args": dataclasses.asdict(job), "scenarios": len(scenarios)}
    writer = getattr(job, "write", None)
    default = f"batch_{argv[0]}.hdf5" if writer is not None else f"batch_{argv[0]}.json"
    path = (writer or (lambda p, r, m: write_results(p, r, m)))(cfg.out or default, results, meta)
    print(json.dumps({"scenarios": len(results), "out": str(path)}))  # noqa: T201
    return 0
