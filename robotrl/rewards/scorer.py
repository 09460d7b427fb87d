"""Batched frame scoring, synchronous or asynchronous (Found-RL style).

A scorer takes rendered frames of many worlds with their ``(world, step)`` keys and returns
rewards keyed the same way. ``AsyncScorer`` runs the score function on a background thread:
frames accumulate until ``batch_size`` of them are pending or the oldest has waited
``max_wait_s``, then one batch is scored. ``submit`` never waits on scoring, so the simulation
runs on; results come back through ``collect()`` (what is ready) or ``flush()`` (everything
submitted, waiting as needed). ``SyncScorer`` scores inside ``submit``, for debugging and comparison.

Torch releases the GIL inside its kernels, so the encoder forward overlaps with MuJoCo stepping
(which also releases it) on a multi-core machine.
"""

from __future__ import annotations

import abc
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

log = logging.getLogger(__name__)

ScoreFn = Callable[[np.ndarray], torch.Tensor]  # (B, H, W, 3) uint8 -> (B,) float32


@dataclass
class Scores:
    """Rewards for ``k`` frames: ``worlds`` ``(k,)`` long, ``steps`` ``(k,)`` long, ``rewards`` ``(k,)`` float32."""

    worlds: torch.Tensor
    steps: torch.Tensor
    rewards: torch.Tensor

    @staticmethod
    def cat(parts: list[Scores]) -> Scores:
        """Concatenate results (empty list: empty ``Scores``)."""
        if not parts:
            z = torch.zeros(0, dtype=torch.long)
            return Scores(z, z.clone(), torch.zeros(0))
        return Scores(*(torch.cat([getattr(p, f) for p in parts]) for f in ("worlds", "steps", "rewards")))


@dataclass
class ScorerStats:
    """Counters: frames submitted and scored, batches, seconds inside the score function."""

    submitted: int = 0
    scored: int = 0
    batches: int = 0
    score_s: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)


class Scorer(abc.ABC):
    """Scores frames keyed by ``(world, step)`` (see module docstring)."""

    stats: ScorerStats

    @abc.abstractmethod
    def submit(self, worlds: torch.Tensor, steps: torch.Tensor, frames: np.ndarray) -> None:
        """Queue ``(k, H, W, 3)`` uint8 frames of worlds ``(k,)`` at env steps ``(k,)``."""

    @abc.abstractmethod
    def collect(self) -> Scores:
        """Scores finished since the last ``collect``/``flush``; never waits."""

    @abc.abstractmethod
    def flush(self, timeout_s: float = 600.0) -> Scores:
        """Every score not yet returned, waiting until all submitted frames are scored."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Stop background work."""


class SyncScorer(Scorer):
    """Scores inside ``submit`` (the caller waits)."""

    def __init__(self, score_fn: ScoreFn) -> None:
        self.score_fn = score_fn
        self.stats = ScorerStats()
        self._done: list[Scores] = []

    def submit(self, worlds: torch.Tensor, steps: torch.Tensor, frames: np.ndarray) -> None:
        """Score now."""
        t0 = time.perf_counter()
        rewards = self.score_fn(frames).float().cpu()
        self.stats.score_s += time.perf_counter() - t0
        self.stats.submitted += len(frames)
        self.stats.scored += len(frames)
        self.stats.batches += 1
        self.stats.batch_sizes.append(len(frames))
        self._done.append(Scores(worlds.cpu().long(), steps.cpu().long(), rewards))

    def collect(self) -> Scores:
        """All scores so far."""
        out, self._done = Scores.cat(self._done), []
        return out

    def flush(self, timeout_s: float = 600.0) -> Scores:
        """Same as ``collect`` (nothing is ever pending)."""
        return self.collect()


class AsyncScorer(Scorer):
    """Scores on a daemon thread in batches of ``batch_size`` or after ``max_wait_s`` (see module docstring).

    Args:
        score_fn: ``(B, H, W, 3)`` uint8 -> ``(B,)`` rewards.
        batch_size: frames per batch.
        max_wait_s: longest a pending frame waits for a full batch.

    """

    def __init__(self, score_fn: ScoreFn, batch_size: int = 64, max_wait_s: float = 0.02) -> None:
        self.score_fn, self.batch_size, self.max_wait_s = score_fn, batch_size, max_wait_s
        self.stats = ScorerStats()
        self._inbox: queue.Queue[tuple[torch.Tensor, torch.Tensor, np.ndarray] | None] = queue.Queue()
        self._outbox: queue.Queue[Scores] = queue.Queue()
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="robotrl-vlm-scorer", daemon=True)
        self._thread.start()

    def submit(self, worlds: torch.Tensor, steps: torch.Tensor, frames: np.ndarray) -> None:
        """Queue frames; returns at once."""
        self._raise_if_failed()
        self.stats.submitted += len(frames)
        self._inbox.put((worlds.cpu().long(), steps.cpu().long(), frames))

    def _score(self, pending: list[tuple[torch.Tensor, torch.Tensor, np.ndarray]]) -> None:
        worlds = torch.cat([p[0] for p in pending])
        steps = torch.cat([p[1] for p in pending])
        frames = np.concatenate([p[2] for p in pending])
        t0 = time.perf_counter()
        rewards = self.score_fn(frames).float().cpu()
        with self._cond:
            self.stats.score_s += time.perf_counter() - t0
            self.stats.batches += 1
            self.stats.batch_sizes.append(len(frames))
            self._outbox.put(Scores(worlds, steps, rewards))
            self.stats.scored += len(frames)
            self._cond.notify_all()

    def _run(self) -> None:
        pending: list[tuple[torch.Tensor, torch.Tensor, np.ndarray]] = []
        count, first_t = 0, 0.0
        try:
            while True:
                timeout = None if not pending else max(0.0, first_t + self.max_wait_s - time.perf_counter())
                try:
                    item = self._inbox.get(timeout=timeout)
                except queue.Empty:
                    item = ()  # type: ignore[assignment]
                if item is None:
                    if pending:
                        self._score(pending)
                    return
                if item:
                    if not pending:
                        first_t = time.perf_counter()
                    pending.append(item)
                    count += len(item[2])
                if pending and (count >= self.batch_size or time.perf_counter() - first_t >= self.max_wait_s):
                    self._score(pending)
                    pending, count = [], 0
        except BaseException as err:  # re-raised in the caller's thread by submit/collect/flush
            log.error("VLM scorer thread failed: %s", err)
            with self._cond:
                self._error = err
                self._cond.notify_all()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the VLM scorer thread failed: {self._error!r}") from self._error

    def collect(self) -> Scores:
        """Scores that are ready."""
        self._raise_if_failed()
        parts = []
        while True:
            try:
                parts.append(self._outbox.get_nowait())
            except queue.Empty:
                return Scores.cat(parts)

    def flush(self, timeout_s: float = 600.0) -> Scores:
        """Wait until every submitted frame is scored; return what was not yet collected."""
        deadline = time.perf_counter() + timeout_s
        with self._cond:
            while self.stats.scored < self.stats.submitted and self._error is None:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError(f"VLM scorer: {self.stats.submitted - self.stats.scored} frames still "
                                       f"unscored after {timeout_s:.0f} s.")
                self._cond.wait(timeout=min(left, 1.0))
        return self.collect()

    def close(self) -> None:
        """Score what is pending and stop the thread."""
        if self._thread.is_alive():
            self._inbox.put(None)
            self._thread.join(timeout=60.0)


def make_scorer(score_fn: ScoreFn, mode: str, batch_size: int = 64, max_wait_s: float = 0.02) -> Scorer:
    """``sync`` or ``async`` scorer around ``score_fn``."""
    if mode == "sync":
        return SyncScorer(score_fn)
    if mode == "async":
        return AsyncScorer(score_fn, batch_size, max_wait_s)
    raise KeyError(f"Unknown reward.mode={mode!r}; valid: async, sync.")
