"""Run metrics: JSONL (always), TensorBoard (optional), and a rich progress bar.

``metrics.jsonl`` holds one JSON object per iteration with ``iteration``, ``env_steps``,
``time_s`` and every scalar; ``robotrl eval`` plots it as the learning curve.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

log = logging.getLogger(__name__)


def setup_logging(level: str = "INFO") -> None:
    """Route robotrl's log records to a rich console handler at ``level``."""
    from rich.logging import RichHandler

    root = logging.getLogger("robotrl")
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        root.addHandler(RichHandler(show_path=False, rich_tracebacks=False, markup=False))
    root.setLevel(level.upper())
    root.propagate = False


class MetricsLogger:
    """Appends scalar metrics to ``<run_dir>/metrics.jsonl`` and TensorBoard event files."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(self.run_dir / "metrics.jsonl", "a")  # noqa: SIM115 - closed in close()
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.run_dir / "tb"))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Write one record (non-finite values are stored as null)."""
        clean = {k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()}
        self._jsonl.write(json.dumps({"env_steps": step, **clean}) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            for key, value in clean.items():
                if value is not None:
                    self._tb.add_scalar(key, value, step)

    def close(self) -> None:
        """Flush and close the files."""
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file (a run dir is accepted too)."""
    p = Path(path)
    if p.is_dir():
        p = p / "metrics.jsonl"
    with open(p) as f:
        return [json.loads(line) for line in f if line.strip()]


class TrainProgress:
    """Rich progress bar toward whichever stop comes first (iterations or the wall-clock budget).

    Shows the iteration, steps/s, mean return and episode length; the bar and the time left
    follow the larger of the two fractions done.
    """

    _UNITS = 1000

    def __init__(self, total: int, enabled: bool = True, start: int = 0, max_time_s: float = 0.0) -> None:
        self.enabled = enabled
        self.total, self.max_time_s = total, max_time_s
        self._progress = Progress(
            TextColumn("[bold]train"), BarColumn(), TextColumn("iter {task.fields[iteration]}"),
            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            disable=not enabled, transient=False,
        )
        # rich types ``completed`` as int but keeps it in the float ``Task.completed``: a fractional start
        # (a resumed run) is shown as is; rounding or a later update() would change the bar or its estimate
        self._task = self._progress.add_task("train", total=self._UNITS,
                                             completed=self._done(start, 0.0),  # type: ignore[arg-type]
                                             stats="", iteration=start)

    def _done(self, iteration: int, elapsed_s: float) -> float:
        fraction = iteration / self.total if self.total > 0 else 0.0
        if self.max_time_s > 0:
            fraction = max(fraction, elapsed_s / self.max_time_s)
        return self._UNITS * min(fraction, 1.0)

    def __enter__(self) -> TrainProgress:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()

    def update(self, iteration: int, stats: dict[str, float]) -> None:
        """Advance to ``iteration`` (and ``stats["time_s"]``) and show the headline numbers."""
        text = (f"{stats.get('perf/steps_per_s', 0):8.0f} steps/s  "
                f"return {stats.get('episode/return', float('nan')):8.2f}  "
                f"len {stats.get('episode/length', float('nan')):6.1f}")
        self._progress.update(self._task, completed=self._done(iteration, stats.get("time_s", 0.0)), stats=text,
                              iteration=iteration)
