"""Data-parallel training with ``torch.distributed``: N ranks, each with its own worlds.

``torchrun --nproc_per_node=N -m robotrl.cli train ...`` starts N processes; each builds its
own ``sim.num_envs`` worlds, seeded by ``rank_seed``. The algorithm does not know about
it: ``DataParallel`` attaches to an algorithm from the outside (the runner calls it) and

- averages every gradient across ranks as soon as backward has accumulated it (autograd
  post-accumulate hooks, the mechanism ``torch.nn.parallel.DistributedDataParallel`` uses),
  so gradient clipping and the optimizer step see the same gradient on every rank;
- averages the learning rate of every optimizer group just before each step (an optimizer
  step pre-hook); with the adaptive-KL schedule each rank adapts the rate from its own
  mini-batch KL and all ranks then step with the mean (written back to ``algo.lr``);
- merges the observation- and return-normalizer statistics after every iteration into the
  statistics of all ranks' data together (``merge_running_stats``);
- broadcasts rank 0's initial weights, and checks at every checkpoint that the weights
  are still bit-identical on all ranks.

Only rank 0 writes checkpoints, metrics and logs. Backend: gloo on CPU, NCCL for CUDA
tensors. With ``MASTER_ADDR`` on loopback, gloo is told to use the loopback interface.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from robotrl.policies.normalizer import RunningNorm

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    """Place of this process in a ``torchrun`` job (from ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``)."""

    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes checkpoints, metrics and logs."""
        return self.rank == 0


def from_env() -> DistInfo | None:
    """The ``torchrun`` environment, or None in a plain single process (or ``WORLD_SIZE=1``)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    return DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))


def rank_seed(seed: int, rank: int, iteration: int = 0) -> int:
    """Seed of ``rank``'s stream: ``seed`` itself for rank 0 at the start, so one rank equals a plain run.

    Other ranks (and every rank resumed at ``iteration > 0``) get independent 31-bit seeds from
    numpy's ``SeedSequence(seed, spawn_key=(rank, iteration))``.
    """
    if rank == 0 and iteration == 0:
        return seed
    return int(np.random.SeedSequence(seed, spawn_key=(rank, iteration)).generate_state(1)[0] & 0x7FFFFFFF)


def init(info: DistInfo) -> None:
    """Join the process group of ``info`` (no-op if this process already did)."""
    if dist.is_initialized():
        return
    if os.environ.get("MASTER_ADDR", "127.0.0.1") in ("127.0.0.1", "localhost") and sys.platform == "linux":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo otherwise resolves the host name
    backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size)
    log.info("rank %d of %d joined the %s process group", info.rank, info.world_size, backend)


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def merge_running_stats(
    prior: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    posts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Statistics of ``prior`` plus every rank's new data, from each rank's updated statistics.

    Each ``post`` is ``prior`` with one rank's batches folded in (``RunningNorm.update``); this
    recovers each rank's batch count, mean and variance (Chan's formula backwards) and folds
    them into ``prior`` in rank order, in float64. ``(count (), mean (D,), var (D,))`` each.
    """
    c, m, v = (t.double() for t in prior)
    c0, m0, v0 = c.clone(), m.clone(), v.clone()
    for post in posts:
        cr, mr, vr = (t.double() for t in post)
        n = cr - c0
        if float(n) <= 0:
            continue
        delta = (mr - m0) * cr / n
        batch_var = (vr * cr - v0 * c0 - delta.square() * c0 * n / cr) / n
        batch_mean = m0 + delta
        total = c + n
        d = batch_mean - m
        m = m + d * n / total
        v = (v * c + batch_var * n + d.square() * c * n / total) / total
        c = total
    return c, m, v


def running_norms(algo: Any) -> dict[str, RunningNorm]:
    """Every ``RunningNorm`` of the algorithm's policy and of the algorithm itself, by name."""
    found = {f"policy.{k}": mod for k, mod in algo.policy.named_modules() if isinstance(mod, RunningNorm)}
    for name, value in vars(algo).items():
        if isinstance(value, RunningNorm):
            found[name] = value
    return dict(sorted(found.items()))


class DataParallel:
    """Keeps an algorithm's replicas identical across ranks (see module docstring).

    Construct it on every rank after the algorithm, before training; it broadcasts rank 0's
    weights and normalizer statistics.
    """

    def __init__(self, algo: Any, info: DistInfo) -> None:
        self.algo, self.info = algo, info
        self.world = info.world_size
        self._handles: list[Any] = []
        with torch.no_grad():
            for tensor in self._state():
                dist.broadcast(tensor, src=0)
        for param in algo.policy.parameters():
            if param.requires_grad:
                self._handles.append(param.register_post_accumulate_grad_hook(self._average_grad))
        for optim in self._optimizers():
            self._handles.append(optim.register_step_pre_hook(self._average_lr))

    def _state(self) -> list[torch.Tensor]:
        out = [*self.algo.policy.parameters(), *self.algo.policy.buffers()]
        for norm in running_norms(self.algo).values():
            out.extend(b for b in norm.buffers() if all(b is not o for o in out))
        return out

    def _optimizers(self) -> list[torch.optim.Optimizer]:
        return [v for v in vars(self.algo).values() if isinstance(v, torch.optim.Optimizer)]

    def _average_grad(self, param: torch.Tensor) -> None:
        grad = param.grad
        if grad is None:  # a parameter that took no part in this loss
            return
        dist.all_reduce(grad)
        grad.div_(self.world)

    def _average_lr(self, optim: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        lrs = torch.tensor([float(g["lr"]) for g in optim.param_groups], dtype=torch.float64)
        dist.all_reduce(lrs)
        lrs /= self.world
        for group, lr in zip(optim.param_groups, lrs.tolist(), strict=True):
            group["lr"] = lr
        if hasattr(self.algo, "lr"):
            self.algo.lr = lrs[0].item()

    @contextmanager
    def sync_normalizers(self) -> Iterator[None]:
        """Around one iteration: afterwards every ``RunningNorm`` holds the statistics of all ranks' data."""
        norms = running_norms(self.algo)
        prior = {k: (n.count.clone(), n.mean.clone(), n.var.clone()) for k, n in norms.items()}
        yield
        for key, norm in norms.items():
            local = torch.cat([norm.count.reshape(1), norm.mean, norm.var]).double().cpu()
            gathered = [torch.empty_like(local) for _ in range(self.world)]
            dist.all_gather(gathered, local)
            dim = norm.mean.shape[0]
            posts = [(g[0], g[1:1 + dim], g[1 + dim:]) for g in gathered]
            c, m, v = merge_running_stats(prior[key], posts)
            norm.count.copy_(c)
            norm.mean.copy_(m)
            norm.var.copy_(v)

    def any(self, flag: bool) -> bool:
        """True on every rank if ``flag`` is true on any (a collective stop decision)."""
        t = torch.tensor([1.0 if flag else 0.0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    def max_divergence(self) -> float:
        """Largest absolute difference of any weight or normalizer value between rank 0 and another rank."""
        flat = torch.cat([t.detach().reshape(-1).double().cpu() for t in self._state()])
        gathered = [torch.empty_like(flat) for _ in range(self.world)]
        dist.all_gather(gathered, flat)
        return max(float((g - gathered[0]).abs().max()) for g in gathered)

    def close(self) -> None:
        """Remove the hooks (the process group stays for the caller)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def make_data_parallel(algo: Any) -> DataParallel | None:
    """``DataParallel(algo)`` under ``torchrun`` with several ranks (joining the group if needed), else None."""
    info = from_env()
    if info is None:
        return None
    init(info)
    return DataParallel(algo, info)
