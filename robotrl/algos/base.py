"""Algorithm contract: math and parameters only. No I/O, no devices chosen, no loops over envs.

A runner drives an algorithm like this (``obs`` is the env's observation dict, all
tensors ``[B, ...]`` on the env's device)::

    action = algo.act(obs)                                   # (B, A) in [-1, 1]
    obs, reward, terminated, truncated, info = env.step(action)
    algo.process_step(obs, reward, terminated, truncated, info)
    if algo.ready():                                         # e.g. horizon filled
        stats = algo.update(obs)                             # dict of float metrics

``state_tensors()`` / ``load_state_tensors()`` give every tensor needed to resume
(weights, normalizers, optimizer state), as a flat ``name -> Tensor`` dict for
safetensors; ``state_meta()`` gives the JSON-safe rest.
"""

from __future__ import annotations

import abc
from typing import Any

import torch


class Algorithm(abc.ABC):
    """Base class of robotrl's learning algorithms (see module docstring)."""

    policy: torch.nn.Module

    @abc.abstractmethod
    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Exploratory ``(B, A)`` action for ``obs``; remembers what ``process_step`` needs."""

    @abc.abstractmethod
    def process_step(
        self,
        obs: dict[str, torch.Tensor],
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        info: dict[str, Any],
    ) -> None:
        """Store the transition produced by the last ``act``."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether enough data was collected for ``update``."""

    @abc.abstractmethod
    def update(self, obs: dict[str, torch.Tensor]) -> dict[str, float]:
        """Learn from the collected data; return scalar statistics."""

    @abc.abstractmethod
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor needed to resume, keyed ``policy.*``, ``optim.*``, ..."""

    @abc.abstractmethod
    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Inverse of ``state_tensors`` plus ``state_meta``."""

    @abc.abstractmethod
    def policy_meta(self) -> dict[str, Any]:
        """JSON description of the acting policy (``kind``, dims, sizes) to rebuild it for eval/export."""

    def state_meta(self) -> dict[str, Any]:
        """JSON-safe state (learning rate, optimizer hyperparameters)."""
        return {}

    def generators(self) -> dict[str, torch.Generator]:
        """The algorithm's own random streams (exploration noise, batch sampling), by name.

        The runner saves and restores their states with every checkpoint. The default finds a
        ``self.gen``; an algorithm with more streams overrides this.
        """
        gen = getattr(self, "gen", None)
        return {"gen": gen} if isinstance(gen, torch.Generator) else {}


class ReplayAlgorithm(Algorithm):
    """Off-policy learners that replay every transition at a fixed update-to-data ratio.

    Each env step owes ``cfg.utd`` gradient steps once ``cfg.learning_starts`` transitions
    are stored. Subclasses provide ``policy`` (with an ``obs_norm``), ``replay`` (``add(obs, action,
    reward, next_obs, terminated, truncated)``, ``len``), ``cfg``, an ``act`` that sets
    ``self._pending = {"obs": (B, P), "action": (B, A)}``, and ``gradient_step``.
    """

    replay: Any
    cfg: Any
    num_updates: int
    _pending: dict[str, torch.Tensor]
    _credit: float

    def process_step(
        self,
        obs: dict[str, torch.Tensor],
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        info: dict[str, Any],
    ) -> None:
        """Store the transition (next obs = the pre-reset ``final_obs``) and update the normalizer."""
        from robotrl.policies.normalizer import RunningNorm

        next_obs = info["final_obs"]["policy"] if "final_obs" in info else obs["policy"]
        self.replay.add(self._pending["obs"], self._pending["action"], reward, next_obs, terminated, truncated)
        obs_norm = getattr(self.policy, "obs_norm", None)
        if isinstance(obs_norm, RunningNorm):
            obs_norm.update(self._pending["obs"])
        if len(self.replay) >= self.cfg.learning_starts:
            self._credit += self.cfg.utd

    def ready(self) -> bool:
        """Learning has started and at least one gradient step is owed."""
        return len(self.replay) >= max(self.cfg.learning_starts, 1) and self._credit >= 1.0

    def update(self, obs: dict[str, torch.Tensor]) -> dict[str, float]:
        """Run the owed ``floor(credit)`` gradient steps (credit grows by ``utd`` per env step)."""
        n = int(self._credit)
        self._credit -= n
        totals: dict[str, float] = {}
        for _ in range(n):
            for k, v in self.gradient_step().items():
                totals[k] = totals.get(k, 0.0) + v / n
        return totals

    @abc.abstractmethod
    def gradient_step(self) -> dict[str, float]:
        """One gradient step on a sampled batch; scalar statistics."""

    def _step(self, opt: torch.optim.Optimizer, loss: torch.Tensor, params: Any) -> None:
        """Backpropagate ``loss`` and step ``opt``; clip ``params``' grad norm to ``cfg.max_grad_norm`` if > 0."""
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(list(params), self.cfg.max_grad_norm)
        opt.step()

    @abc.abstractmethod
    def _modules(self) -> dict[str, torch.nn.Module]:
        """Networks to checkpoint (policy, critics, targets), by name."""

    @abc.abstractmethod
    def _optims(self) -> dict[str, torch.optim.Optimizer]:
        """Optimizers to checkpoint, by name."""

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every network and Adam state (the runner saves the replay buffer beside the checkpoint)."""
        from robotrl.storage.checkpoint import optimizer_tensors, prefixed

        out: dict[str, torch.Tensor] = {}
        for name, module in self._modules().items():
            out.update(prefixed(module.state_dict(), name))
        for name, opt in self._optims().items():
            out.update(prefixed(optimizer_tensors(opt)[0], f"optim_{name}"))
        return out

    def state_meta(self) -> dict[str, Any]:
        """Update count and optimizer hyperparameters."""
        from robotrl.storage.checkpoint import optimizer_tensors

        return {"num_updates": self.num_updates, "utd_credit": self._credit,
                "optim": {name: optimizer_tensors(opt)[1] for name, opt in self._optims().items()}}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        """Inverse of ``state_tensors`` plus ``state_meta``."""
        from robotrl.storage.checkpoint import restore_optimizer, strip

        for name, module in self._modules().items():
            module.load_state_dict(strip(tensors, name))
        algo_meta = meta.get("algo_state", {})
        for name, opt in self._optims().items():
            if name in algo_meta.get("optim", {}):
                restore_optimizer(opt, strip(tensors, f"optim_{name}"), algo_meta["optim"][name])
        self.num_updates = algo_meta.get("num_updates", 0)
        self._credit = float(algo_meta.get("utd_credit", 0.0))
