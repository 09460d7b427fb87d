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
