"""Evaluate a trained policy on given scenarios, one scenario per world of a batched TaskEnv.

``ScenarioEvaluator(checkpoint, params)`` is the ``evaluate(x (N, D)) -> success (N,)``
function the miner calls: it rebuilds the checkpoint's task (``task_config_from_meta``, with
``overrides``) in one ``TaskEnv`` of ``worlds`` worlds and runs the scenarios in chunks of
that many. Each world gets its scenario at its first reset (the task's ``apply_scenario``
through its ``scenario_draws`` hook, so the first observation already sees it), and its
first episode's ``success`` (``info["episode"]``, as ``robotrl eval`` reports it) is the
answer. Parameters not given keep the task's own draw (its randomization as configured).

Chunk ``i`` of an evaluator's life runs from the task state the checkpoint left (a curriculum
stage is restored before every chunk) with the env's generator seeded by ``chunk_seed(seed, i)``,
so its successes depend on the chunk and its index only, never on the chunks before it.
That is what lets ``FanOutEvaluator`` send the chunks of a round to Ray workers
(``robotrl.cluster.run_batch``, one ``MineChunkJob`` per chunk; ``robotrl twin mine
workers=N [address=auto]``) and get the same answers as this process. The miner's rounds
stay sequential: each round's draws depend on the last round's answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from robotrl.twin.scenarios import ScenarioParam

log = logging.getLogger(__name__)


def chunk_seed(seed: int, index: int) -> int:
    """The env seed of an evaluator's chunk ``index`` (module docstring)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def declared_params(task_name: str, declared: list[ScenarioParam], params: list[str] | None) -> list[ScenarioParam]:
    """The scenario parameters ``params`` names (default: all ``declared``), in that order.

    Raises:
        ValueError: the task declares none.
        KeyError: a name the task does not declare, listing the declared ones.

    """
    by_name = {p.name: p for p in declared}
    if not by_name:
        raise ValueError(f"task {task_name!r} declares no scenario parameters.")
    names = params or list(by_name)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"task {task_name!r} has no scenario parameters {unknown}; declared: {list(by_name)}.")
    return [by_name[n] for n in names]


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
        self._task_state = strip(tensors, "task")  # e.g. the curriculum stage the run reached
        self.env.task.load_state_dict(self._task_state)
        self.params = declared_params(self.task_name, getattr(self.env.task, "scenario_params", []), params)
        self.policy, _ = load_policy(weights, device=self.env.device)
        self.deterministic = deterministic
        self.seed = seed
        self.evaluated = 0
        self.chunks = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x`` ``(N, D)`` parameter values (columns as ``self.params``) -> ``(N,)`` bool success."""
        x = np.asarray(x, dtype=np.float32)
        out = np.zeros(len(x), dtype=bool)
        W = self.env.num_envs
        for start in range(0, len(x), W):
            chunk = x[start:start + W]
            out[start:start + len(chunk)] = self.run_chunk(chunk, chunk_seed(self.seed, self.chunks))
            self.chunks += 1
        self.evaluated += len(x)
        return out

    def run_chunk(self, chunk: np.ndarray, env_seed: int) -> np.ndarray:
        """At most ``worlds`` scenarios ``(M, D)`` -> ``(M,)`` success.

        Run from the checkpoint's task state with the env generator seeded by ``env_seed``, so the same
        chunk and seed give the same answer whatever ran before.
        """
        if len(chunk) > self.env.num_envs:
            raise ValueError(f"a chunk of {len(chunk)} scenarios does not fit in {self.env.num_envs} worlds.")
        self.env.task.load_state_dict(self._task_state)
        self.env.gen.manual_seed(int(env_seed))
        return self._run(np.asarray(chunk, dtype=np.float32))

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


_EVALUATORS: dict[str, ScenarioEvaluator] = {}  # per worker process: one env per job configuration


@dataclass
class MineChunkJob:
    """A ``robotrl.cluster`` job: one chunk of scenarios, ``scenario.task["x"]`` ``(M, D)``, in one env.

    Its result is ``{"success": [0/1] * M}``; ``scenario.seed`` is the chunk's env seed. A worker keeps
    the env it built for a job configuration and reuses it for the next chunk.
    """

    checkpoint: str
    params: list[str]
    overrides: dict[str, Any] = field(default_factory=dict)
    worlds: int = 128
    threads: int = 1
    deterministic: bool = True

    def __call__(self, scenario: Any) -> dict[str, Any]:
        """Success of each scenario of the chunk."""
        key = json.dumps(asdict(self), sort_keys=True, default=str)
        if key not in _EVALUATORS:
            _EVALUATORS[key] = ScenarioEvaluator(self.checkpoint, self.params, self.overrides, self.worlds,
                                                 nthread=self.threads, deterministic=self.deterministic)
        ok = _EVALUATORS[key].run_chunk(np.asarray(scenario.task["x"], dtype=np.float32), scenario.seed)
        return {"success": ok.astype(int).tolist()}


class FanOutEvaluator:
    """``ScenarioEvaluator``'s answers, with each call's chunks run as Ray tasks (``robotrl.cluster.run_batch``).

    Chunk ``i`` gets the same env seed as in ``ScenarioEvaluator`` (``chunk_seed(seed, i)``), so both give
    the same successes for the same calls. ``workers=0`` runs the chunks in this process, through the same job.

    Args:
        checkpoint, params, overrides, worlds, seed, deterministic: as ``ScenarioEvaluator``.
        workers: Ray tasks in flight (0: this process).
        address: Ray cluster (``auto``, ``<head ip>:6379``); None starts one on 127.0.0.1.
        threads: simulation and torch threads per task.
        max_retries: reruns of a chunk whose worker died.

    """

    def __init__(self, checkpoint: str | Path, params: list[str] | None = None,
                 overrides: dict[str, Any] | None = None, worlds: int = 128, seed: int = 0, workers: int = 2,
                 address: str | None = None, threads: int = 1, max_retries: int = 3,
                 deterministic: bool = True) -> None:
        from robotrl.storage.checkpoint import load_checkpoint, resolve
        from robotrl.tasks import task_class

        weights = resolve(str(checkpoint))
        _, meta = load_checkpoint(weights)
        self.task_name = meta["task"]["name"]
        self.params = declared_params(self.task_name, getattr(task_class(self.task_name), "scenario_params", []),
                                      params)
        self.job = MineChunkJob(str(weights), [p.name for p in self.params], dict(overrides or {}), worlds, threads,
                                deterministic)
        self.seed, self.workers, self.address, self.max_retries = seed, workers, address, max_retries
        self.evaluated = 0
        self.chunks = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x`` ``(N, D)`` -> ``(N,)`` bool success, one Ray task per chunk of ``worlds`` scenarios."""
        from robotrl.cluster.batch import Scenario, run_batch

        x = np.asarray(x, dtype=np.float32)
        W = self.job.worlds
        scenarios = []
        for start in range(0, len(x), W):
            scenarios.append(Scenario(f"{self.chunks:06d}", chunk_seed(self.seed, self.chunks),
                                      {"x": x[start:start + W].tolist()}))
            self.chunks += 1
        results = run_batch(self.job, scenarios, workers=self.workers, address=self.address,
                            threads=self.job.threads, max_retries=self.max_retries, progress=False)
        out = np.concatenate([np.asarray(r["result"]["success"], dtype=bool) for r in results]) if results else \
            np.zeros(0, dtype=bool)
        self.evaluated += len(x)
        return out
