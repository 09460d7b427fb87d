"""Shared helpers for benchmark scripts: machine facts, flat JSON results, a printed table."""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """CPU model, core count, GPU (if any), library versions and the UTC date."""
    import mujoco
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "machine_cpu": cpu,
        "machine_cpu_count": os.cpu_count(),
        "machine_gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "torch_version": torch.__version__,
        "mujoco_version": mujoco.__version__,
        "python_version": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def save(name: str, figures: dict, merge: bool = True) -> Path:
    """Write ``results/<name>.json``: a flat object of figures plus the machine facts."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    old = json.loads(path.read_text()) if merge and path.exists() else {}
    out = {**old, **figures, **machine()}
    path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return path


def table(rows: list[tuple[str, str]], title: str) -> str:
    """A plain two-column text table."""
    width = max(len(k) for k, _ in rows) + 2
    lines = [title, "-" * (width + 20)] + [f"{k:<{width}}{v}" for k, v in rows]
    return "\n".join(lines)


def timed(fn, min_seconds: float = 5.0, warmup: int = 5) -> float:
    """Call ``fn()`` (one batch of work, returning its step count) for ``min_seconds``; steps/s."""
    for _ in range(warmup):
        fn()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds:
        steps += fn()
    return steps / (time.perf_counter() - start)
