"""Frozen base policies: black boxes that map observations to actions, with per-world state.

ResFiT's base policy is frozen and chunked; the env wrapper (``robotrl.envs.residual``)
queries it every step and the residual sees its action. A ``FrozenPolicy`` is:

* ``act(obs)``: ``(N, P) -> (N, A)``, the action for this step of every world (advances
  per-world chunk state);
* ``reset(ids)``: forget the chunk state of worlds ``ids`` ``(k,)`` (new episodes);
* ``predict(obs)``: ``(k, P) -> (k, A)``, stateless first action for arbitrary observations
  (the pre-reset observation of finished episodes, demonstration relabelling).

``load_frozen`` builds one from any robotrl checkpoint: BC (chunked), PPO or SAC.
"""

from __future__ import annotations

import abc
import math
import os
from typing import Any

import torch
from torch import nn

from robotrl.policies.offpolicy import ChunkPolicy, TanhGaussianActor

EXECUTIONS = ("ensemble", "open_loop")


class FrozenPolicy(abc.ABC):
    """Black-box base policy (see module docstring)."""

    action_dim: int

    @abc.abstractmethod
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """``(N, A)`` action for ``(N, P)`` observations of all worlds; advances chunk state."""

    def reset(self, ids: torch.Tensor) -> None:  # noqa: B027 - optional hook, stateless policies keep it
        """Forget the state of worlds ``ids`` ``(k,)``."""

    @abc.abstractmethod
    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Stateless ``(k, A)`` action for ``(k, P)`` observations."""

    def spawn(self, num_envs: int) -> FrozenPolicy:
        """The same frozen policy with fresh state for ``num_envs`` worlds (stateless: ``self``)."""
        return self


class ZeroPolicy(FrozenPolicy):
    """No base policy: always 0 (the residual becomes a plain TD3/RLPD actor)."""

    def __init__(self, action_dim: int) -> None:
        self.action_dim = action_dim

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros ``(N, A)``."""
        return obs.new_zeros(obs.shape[0], self.action_dim)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros ``(k, A)``."""
        return self.act(obs)


class ModulePolicy(FrozenPolicy):
    """Any module with ``act_inference(obs) -> (B, A)`` (PPO ``ActorCritic``, SAC actor)."""

    def __init__(self, module: nn.Module, action_dim: int) -> None:
        self.module = module.eval()
        self.action_dim = action_dim

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action."""
        return self.module.act_inference(obs)

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """Same as ``act`` (no state)."""
        return self.act(obs)


class ChunkExecutor(FrozenPolicy):
    """Runs a ``ChunkPolicy`` in ``N`` worlds, open-loop or with ACT's temporal ensembling.

    * ``open_loop``: predict ``K`` actions, execute them one by one, predict again.
    * ``ensemble``: predict every step; the action for step ``t`` is the average of every
      prediction made for ``t`` (up to ``K``), the prediction made at step ``s`` weighted by
      ``exp(-decay * s)`` so older predictions weigh more (ACT).

    State: ``acc`` ``(N, K, A)`` weighted sums and ``wsum`` ``(N, K)`` weights for steps
    ``t .. t+K-1``; ``step`` ``(N,)`` steps since reset.
    """

    def __init__(
        self, policy: ChunkPolicy, num_envs: int, execution: str = "ensemble", decay: float = 0.01
    ) -> None:
        if execution not in EXECUTIONS:
            raise ValueError(f"Unknown chunk execution {execution!r}; valid: {', '.join(EXECUTIONS)}.")
        self.policy = policy.eval()
        self.action_dim, self.chunk = policy.action_dim, policy.chunk
        self.execution, self.decay = execution, decay
        dev = policy.obs_mean.device
        self.acc = torch.zeros(num_envs, self.chunk, self.action_dim, device=dev)
        self.wsum = torch.zeros(num_envs, self.chunk, device=dev)
        self.step = torch.zeros(num_envs, dtype=torch.long, device=dev)

    def spawn(self, num_envs: int) -> ChunkExecutor:
        """Same network and execution, fresh chunk state for ``num_envs`` worlds."""
        return ChunkExecutor(self.policy, num_envs, self.execution, self.decay)

    def reset(self, ids: torch.Tensor) -> None:
        """Drop pending predictions of worlds ``ids``."""
        self.acc[ids] = 0.0
        self.wsum[ids] = 0.0
        self.step[ids] = 0

    @torch.no_grad()
    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        """First action of a fresh chunk."""
        return self.policy(obs)[:, 0]

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Action for this step; shifts the chunk window by one."""
        if self.execution == "open_loop":
            need = (self.step % self.chunk) == 0
            if need.any():
                ids = need.nonzero().squeeze(1)
                self.acc[ids] = self.policy(obs[ids])
                self.wsum[ids] = 1.0
            slot = self.step % self.chunk
            action = self.acc[torch.arange(obs.shape[0], device=obs.device), slot]
        else:
            w = torch.exp(-self.decay * self.step.float())[:, None]
            self.acc += w[:, :, None] * self.policy(obs)
            self.wsum += w
            action = self.acc[:, 0] / self.wsum[:, :1]
            self.acc = torch.roll(self.acc, -1, dims=1)
            self.wsum = torch.roll(self.wsum, -1, dims=1)
            self.acc[:, -1] = 0.0
            self.wsum[:, -1] = 0.0
        self.step += 1
        return action


def chunk_policy_from_meta(meta: dict[str, Any]) -> ChunkPolicy:
    """Untrained ``ChunkPolicy`` with the shapes recorded in a BC checkpoint's ``meta["policy"]``."""
    p = meta["policy"]
    return ChunkPolicy(
        p["obs_dim"], p["action_dim"], p["chunk"], list(p["hidden"]), p.get("activation", "relu")
    )


def load_frozen(
    path: str | os.PathLike, num_envs: int, device: torch.device | str = "cpu", execution: str | None = None
) -> tuple[FrozenPolicy, dict[str, Any]]:
    """A frozen base policy from a BC, PPO or SAC checkpoint (run dir, checkpoints dir or file).

    Args:
        path: the checkpoint.
        num_envs: worlds the policy will run in (chunk state).
        device: where it runs.
        execution: override the BC checkpoint's chunk execution (``ensemble``/``open_loop``).

    Returns:
        ``(policy, meta)`` with the checkpoint's metadata.

    """
    from robotrl.policies.io import policy_from_meta
    from robotrl.runners.checkpoint import load_checkpoint, strip

    tensors, meta = load_checkpoint(path, device=device)
    kind = meta.get("policy", {}).get("kind", "actor_critic")
    weights = strip(tensors, "policy")
    if kind == "chunk":
        net = chunk_policy_from_meta(meta).to(device)
        net.load_state_dict(weights)
        p = meta["policy"]
        return ChunkExecutor(
            net, num_envs, execution or p.get("execution", "ensemble"), p.get("ensemble_decay", 0.01)
        ), meta
    if kind == "tanh_gaussian":
        p = meta["policy"]
        actor = TanhGaussianActor(p["obs_dim"], p["action_dim"], list(p["hidden"]), p["normalize_obs"]).to(
            device
        )
        actor.load_state_dict(weights)
        return ModulePolicy(actor, p["action_dim"]), meta
    if kind == "actor_critic":
        ac = policy_from_meta(meta).to(device)
        ac.load_state_dict(weights)
        return ModulePolicy(ac, ac.action_dim), meta
    raise ValueError(
        f"Checkpoint {path!r} holds a {kind!r} policy, which cannot be a frozen base; "
        "use a BC (algo=bc), PPO or SAC checkpoint."
    )


def ensemble_weights(chunk: int, decay: float) -> torch.Tensor:
    """ACT's normalized weights ``exp(-decay * i) / sum`` over ``i = 0..K-1`` (0 = oldest)."""
    w = torch.tensor([math.exp(-decay * i) for i in range(chunk)])
    return w / w.sum()
