"""VecEnv: the batched environment contract every algorithm and adapter talks to.

Everything is a torch tensor on ``env.device``; the first dimension is the world
(``N = env.num_envs``).

* ``reset() -> obs``
* ``step(action) -> (obs, reward, terminated, truncated, info)``

  - ``action``: ``(N, A)`` float32 in ``[-1, 1]``.
  - ``obs``: dict with ``"policy"`` ``(N, P)`` float32 and optionally ``"critic"``
    ``(N, C)`` (privileged, asymmetric actor-critic), ``"image"`` ``(N, H, W, 3)`` uint8
    (rendered with lean settings), and ``"instruction"`` ``(N,)`` int64 indices into the
    env's ``instructions`` list of texts, whose embeddings are computed once and cached.
  - ``reward``: ``(N,)`` float32. ``terminated``/``truncated``: ``(N,)`` bool. A world
    whose episode ends is reset *inside* ``step`` (autoreset), so ``obs`` is already the
    first observation of its next episode.
  - ``info`` reserved keys:

    - ``"final_obs"``: dict of ``(N, ...)`` observations *before* the autoreset (rows of
      worlds that did not end are the same as ``obs``). Algorithms bootstrap
      time-outs from ``final_obs["critic"|"policy"]``.
    - ``"episode"``: dict of ``(k,)`` tensors for the ``k`` episodes that ended this
      step: ``return``, ``length``, ``success`` and ``reward/<term>`` sums.
    - ``"reward_terms"``: dict of named ``(N,)`` scaled reward terms of this step.
    - ``"sim_resets"``: int, worlds reset this step because physics failed (NaN,
      divergence, solver error). Those worlds report ``terminated=True`` and reward 0.
    - ``"nan_resets"``, ``"nan_reward"``, ``"nan_obs"`` (only on a step where task code
      produced NaN/Inf in a world whose physics is fine): the number of such worlds, and
      dicts of term or observation name -> ``(N,)`` bool mask of the worlds it hit. Those
      worlds are reset like failed simulations; a task that keeps doing it raises
      ``FloatingPointError`` naming the term.
"""

from __future__ import annotations

import abc
from typing import Any

import torch

Obs = dict[str, torch.Tensor]
StepResult = tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]


class VecEnv(abc.ABC):
    """Batched environment (see module docstring for shapes and reserved ``info`` keys).

    Attributes:
        num_envs: number of worlds ``N``.
        num_actions: action size ``A``.
        obs_dims: size of each flat observation group, e.g. ``{"policy": P, "critic": C}``.
        max_episode_length: control steps before a time-out.
        device: torch device of every tensor.
        step_dt: seconds of simulated time per control step.

    """

    num_envs: int
    num_actions: int
    obs_dims: dict[str, int]
    max_episode_length: int
    device: torch.device
    step_dt: float

    @abc.abstractmethod
    def reset(self) -> Obs:
        """Reset every world; return the first observation dict."""

    @abc.abstractmethod
    def step(self, action: torch.Tensor) -> StepResult:
        """Apply ``(N, A)`` actions for one control step; autoreset finished worlds."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release simulator and renderer resources."""
