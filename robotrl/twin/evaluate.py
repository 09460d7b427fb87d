"""Evaluate a trained policy on given scenarios, one scenario per world of a batched TaskEnv.

``ScenarioEvaluator(checkpoint, params)`` is the ``evaluate(x (N, D)) -> success (N,)``
function the miner calls: it rebuilds the checkpoint's task (``task_config_from_meta``, with
``overrides``) in one ``TaskEnv`` of ``worlds`` worlds and runs the scenarios in chunks of
that many. Each world gets its scenario at its first reset (the task's ``apply_scenario``
through its ``scenario_draws`` hook, so the first observation already sees it), and its
first episode's ``success`` (``info["episode"]``, as ``robotrl eval`` reports it) is the
answer. Parameters not given keep the task's own draw (its randomization as configured).

This runs in process. Large budgets can be fanned out as ``robotrl batch`` jobs over chunks
(``robotrl.cluster``); the miner's rounds are sequential either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from robotrl.twin.scenarios import ScenarioParam

log = logging.getLogger(__name__)


class ScenarioEvaluator:
    """Success of a checkpoint's policy on scenarios (module docstring).

    Args:
        checkpoint: run dir, checkpoints dir or ``ckpt_*.safetensors``.
        params: the scenario parameters the columns of ``x`` stand for (default: all of the task's).
        overrides: task config fields (e.g. ``{"half_width": [0.3, 1.0]}`` to widen a bank).
        worlds: worlds per batch.
        seed: env seed (draws of the parameters not given).
        nthread: BatchSim threads (0: all cores).
        deterministic: mean actions.

    """

    def __init__(self, checkpoint: str | Path, params: list[str] | None = None,
                 overrides: dict[str, Any] | None = None, worlds: int = 128, seed: int = 0, nthread: int = 0,
                 deterministic: bool = True) -> None:
        from robotrl.envs.task_env import TaskEnv
        from robotrl.policies.io import load_policy
        from robotrl.sim.backend import SimConfig
        from robotrl.storage.checkpoint import load_checkpoint, resolve, strip
        from robotrl.tasks import task_config_from_meta

        weights = resolve(str(checkpoint))
        tensors, meta = load_checkpoint(weights)
        self.task_name = meta["task"]["name"]
        cfg = task_config_from_meta(meta, **(overrides or {}))
        cfg = replace(cfg, scenarios="", scenario_mix=0.0)
        self.env = TaskEnv(cfg, SimConfig(num_envs=worlds, nthread=nthread), seed=seed)
        self.env.task.load_state_dict(strip(tensors, "task"))  # e.g. the curriculum stage the run reached
        declared = {p.name: p for p in getattr(self.env.task, "scenario_params", [])}
        if not declared:
            raise ValueError(f"task {self.task_name!r} declares no scenario parameters.")
        names = params or list(declared)
        unknown = [n for n in names if n not in declared]
        if unknown:
            raise KeyError(f"task {self.task_name!r} has no scenario parameters {unknown}; declared: {list(declared)}.")
        self.params: list[ScenarioParam] = [declared[n] for n in names]
        self.policy, _ = load_policy(weights, device=self.env.device)
        self.deterministic = deterministic
        self.evaluated = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x`` ``(N, D)`` parameter values (columns as ``self.params``) -> ``(N,)`` bool success."""
        x = np.asarray(x, dtype=np.float32)
        out = np.zeros(len(x), dtype=bool)
        W = self.env.num_envs
        for start in range(0, len(x), W):
            chunk = x[start:start + W]
            out[start:start + len(chunk)] = self._run(chunk)
        self.evaluated += len(x)
        return out

    def _run(self, chunk: np.ndarray) -> np.ndarray:
        env, task, m = self.env, self.env.task, len(chunk)
        values = {p.name: torch.full((env.num_envs,), float("nan"), device=env.device) for p in self.params}
        for i, p in enumerate(self.params):
            values[p.name][:m] = torch.as_tensor(chunk[:, i], device=env.device)

        def pinned(ids: torch.Tensor, _gen: torch.Generator) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            return ids, {n: v[ids] for n, v in values.items()}

        task.scenario_draws = pinned  # type: ignore[method-assign]  # this first reset only
        try:
            obs = env.reset()
        finally:
            del task.scenario_draws
        done = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        done[m:] = True
        success = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        # nn.Module types attribute lookups as Tensor | Module; every load_policy module has both methods
        if self.deterministic:
            act = cast(Callable[[torch.Tensor], torch.Tensor], self.policy.act_inference)
        else:
            sample = cast(Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]], self.policy.act)
            act = lambda o: sample(o)[0]  # noqa: E731 - the sampled action of (action, log_prob)
        with torch.no_grad():
            for _ in range(env.max_episode_length + 1):
                obs, _, terminated, truncated, info = env.step(act(obs["policy"]))
                if "episode" in info:
                    ended = (terminated | truncated).nonzero().squeeze(1)
                    first = ~done[ended]
                    success[ended[first]] = info["episode"]["success"][first] > 0.5
                    done[ended] = True
                if bool(done.all()):
                    break
        if not bool(done.all()):
            raise RuntimeError("some worlds did not finish an episode within the task's time limit.")
        return success[:m].cpu().numpy()
