"""Headless simulation batches: one job over many scenarios, in-process or as Ray tasks.

A *scenario* is a seed plus overrides of a task's config, named by a unique id. A *job* is
a picklable callable ``job(scenario) -> dict`` that builds its own worlds, runs them and
returns a JSON-safe result (optionally with numpy arrays, see ``robotrl.cluster.jobs``). Its
result must depend on the scenario only, never on the process that ran it: then the merged
output is the same whatever the number of workers.

``run_batch`` runs every scenario exactly once:

- ``workers=0``: in this process, one scenario after the other, through the same
  ``run_scenario`` a Ray worker calls.
- ``workers>=1``: one Ray task per scenario (``max_retries``: a worker process that dies is
  replaced and its scenario rerun). Without ``address`` a local Ray instance with
  ``workers`` CPUs starts on 127.0.0.1; with ``address`` (``auto`` or ``<head ip>:6379``)
  the tasks go to that cluster, at most ``workers`` in flight at a time.

Results come back through Ray's object store and are merged in the driver sorted by
scenario id, so a retried scenario is counted once and none is lost. There is no
scheduler, queue or RPC here: Ray places, runs and retries the tasks.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

Job = Callable[["Scenario"], dict[str, Any]]


@dataclass(frozen=True)
class Scenario:
    """One unit of a batch.

    Attributes:
        id: unique, sortable name (``grid`` and ``sample`` zero-pad a counter); the merged
            output is sorted by it.
        seed: seeds the scenario's env and torch (``run_scenario``).
        task: overrides of the task config (``field -> value``), type-checked by the job.

    """

    id: str
    seed: int
    task: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe ``{"id", "seed", "task"}``."""
        return {"id": self.id, "seed": self.seed, "task": dict(self.task)}


def grid(axes: Mapping[str, Sequence[Any]], seeds: Sequence[int]) -> list[Scenario]:
    """Every combination of the ``axes`` values, once per seed (axes vary slowest, in key order).

    ``grid({"num_obstacles": [0, 4]}, seeds=[0, 1])`` gives 4 scenarios ``000000..000003``.
    """
    names = sorted(axes)
    combos = list(itertools.product(*(list(axes[n]) for n in names))) or [()]
    out: list[Scenario] = []
    for values, seed in itertools.product(combos, seeds):
        out.append(Scenario(f"{len(out):06d}", int(seed), dict(zip(names, values, strict=True))))
    return out


def sample(ranges: Mapping[str, Sequence[Any]], n: int, seed: int = 0) -> list[Scenario]:
    """``n`` scenarios drawn from ``ranges`` with their own seeds, reproducibly from ``seed``.

    A range of two numbers ``[lo, hi]`` is sampled uniformly (integers if both ends are
    integers, inclusive); any other list is a set of choices.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        task: dict[str, Any] = {}
        for name in sorted(ranges):
            spec = list(ranges[name])
            numeric = len(spec) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in spec)
            if numeric and all(isinstance(v, int) for v in spec):
                task[name] = rng.randint(int(spec[0]), int(spec[1]))
            elif numeric:
                task[name] = rng.uniform(float(spec[0]), float(spec[1]))
            else:
                task[name] = rng.choice(spec)
        out.append(Scenario(f"{i:06d}", rng.randrange(2**31), task))
    return out


def run_scenario(job: Job, scenario: Scenario, threads: int = 1) -> dict[str, Any]:
    """Run one scenario with fixed seeding and torch threads; the same in-process and on a Ray worker.

    Returns ``{"scenario": scenario.as_dict(), "result": job(scenario)}``.
    """
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    torch.manual_seed(scenario.seed)
    try:
        result = job(scenario)
    finally:
        torch.set_num_threads(saved_threads)
    return {"scenario": scenario.as_dict(), "result": result}


class BatchProgress:
    """Rich progress bar: scenarios done out of the total, and the throughput in scenarios/s."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total
        self.start = time.perf_counter()
        self._progress = Progress(
            TextColumn("[bold]batch"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), disable=not enabled, transient=False,
        )
        self._task = self._progress.add_task("batch", total=total, rate="")
        self.done = 0

    def __enter__(self) -> BatchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def advance(self) -> None:
        """One more scenario finished."""
        self.done += 1
        rate = self.done / max(time.perf_counter() - self.start, 1e-9)
        self._progress.update(self._task, completed=self.done, rate=f"{rate:.2f} scenarios/s")


def _ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError("robotrl batch with workers>=1 needs Ray: pip install 'robotrl[cluster]'.") from err
    return ray


LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"


def ray_loopback_only() -> None:
    """Make a Ray instance started by this process use 127.0.0.1 for every address (GCS, raylet, workers).

    Ray turns ``_node_ip_address="127.0.0.1"`` into the machine's network address unless it runs
    in its single-machine mode, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which it reads when
    imported; this sets the variable (inherited by Ray's processes) and, if Ray is already
    imported, its constant. Call it before starting a local instance, never for a cluster.

    It also switches off Ray's usage statistics (``RAY_USAGE_STATS_ENABLED=0`` unless the caller set
    it), whose hourly report goes to usage-stats.ray.io. Not switched off, because Ray has no setting
    for it (2.60): its API server's usage module asks the cloud metadata service (169.254.169.254,
    metadata.google.internal) once at start which cloud it runs on, before it reads that switch.
    """
    os.environ[LOOPBACK_ENV] = "0"
    os.environ.setdefault(USAGE_STATS_ENV, "0")
    if "ray" in sys.modules:
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False


def init_ray(workers: int, address: str | None = None) -> Any:
    """Connect to the Ray cluster at ``address``, or start a local one on 127.0.0.1 with ``workers`` CPUs.

    Returns the ``ray`` module. An already initialized Ray (a caller's own) is reused as is.
    """
    if not address:
        ray_loopback_only()
    ray = _ray()
    if ray.is_initialized():
        return ray
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        ray.init(num_cpus=workers, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=True)
    return ray


def _run_local(job: Job, scenarios: list[Scenario], threads: int, bar: BatchProgress) -> list[dict[str, Any]]:
    out = []
    for scenario in scenarios:
        out.append(run_scenario(job, scenario, threads))
        bar.advance()
    return out


def _run_ray(job: Job, scenarios: list[Scenario], workers: int, address: str | None, threads: int,
             max_retries: int, bar: BatchProgress) -> list[dict[str, Any]]:
    ray = init_ray(workers, address)
    remote = ray.remote(run_scenario).options(num_cpus=threads, max_retries=max_retries)
    job_ref = ray.put(job)
    pending = list(scenarios)
    in_flight: list[Any] = []
    out: list[dict[str, Any]] = []
    while pending or in_flight:
        while pending and len(in_flight) < workers:
            in_flight.append(remote.remote(job_ref, pending.pop(0), threads))
        done, in_flight = ray.wait(in_flight, num_returns=1)
        out.extend(ray.get(done))
        bar.advance()
    return out


def run_batch(
    job: Job,
    scenarios: Iterable[Scenario],
    workers: int = 0,
    address: str | None = None,
    threads: int = 1,
    max_retries: int = 3,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run ``job`` on every scenario; results sorted by scenario id (see module docstring).

    Args:
        job: picklable ``job(scenario) -> dict`` (a module-level function or an instance of a
            module-level class, so Ray workers can import it).
        scenarios: unique ids required.
        workers: 0 runs in this process without Ray; ``n >= 1`` runs at most ``n`` Ray tasks at once.
        address: Ray cluster address (``auto``, ``<ip>:6379``); None starts a local instance on loopback.
        threads: CPU threads per scenario (torch's, and the job's simulation threads); the Ray
            task asks for that many CPUs.
        max_retries: Ray reruns a scenario whose worker process died up to this many times.
        progress: show scenarios done / total and scenarios/s.

    Returns:
        One ``{"scenario": {...}, "result": {...}}`` per scenario, sorted by id.

    Raises:
        ValueError: duplicate scenario ids or a negative worker count.
        RuntimeError: the result set does not match the scenarios (lost or duplicated).

    """
    scenarios = list(scenarios)
    ids = [s.id for s in scenarios]
    if len(set(ids)) != len(ids):
        raise ValueError("scenario ids must be unique")
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    start = time.perf_counter()
    with BatchProgress(len(scenarios), enabled=progress) as bar:
        if workers == 0:
            out = _run_local(job, scenarios, threads, bar)
        else:
            out = _run_ray(job, scenarios, workers, address, threads, max_retries, bar)
    got = sorted(r["scenario"]["id"] for r in out)
    if got != sorted(ids):
        raise RuntimeError(f"batch returned {len(got)} results for {len(ids)} scenarios")
    elapsed = time.perf_counter() - start
    log.info("batch: %d scenarios in %.1f s (%.2f scenarios/s) on %s", len(out), elapsed,
             len(out) / max(elapsed, 1e-9), f"{workers} Ray worker(s)" if workers else "this process")
    return sorted(out, key=lambda r: r["scenario"]["id"])


def write_results(path: str | os.PathLike, results: list[dict[str, Any]], meta: Mapping[str, Any]) -> Path:
    """Write merged results as one JSON file, byte-identical for identical inputs.

    Keys are sorted and no timing or host information is written (the log has that).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"meta": dict(meta), "results": results}, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path
