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
from typing import Any, cast

import torch
from torch import nn

from robotrl.policies.offpolicy import ChunkPolicy, DeterministicActor, ResidualActor, TanhGaussianActor

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
        return cast(Any, self.module).act_inference(obs)

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


class ChunkInference(nn.Module):
    """A ``ChunkPolicy`` replanned every step (first action of each chunk), for ``robotrl eval``.

    Stateless, so it needs no episode-reset hook; ``ChunkExecutor`` is the chunked execution.
    """

    def __init__(self, policy: ChunkPolicy) -> None:
        super().__init__()
        self.policy = policy
        self.action_dim = policy.action_dim

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, A)`` first action of the predicted chunk."""
        return self.policy(obs)[:, 0]

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Deterministic action and zero log-probabilities (BC has no action distribution)."""
        action = self.act_inference(obs)
        return action, action.new_zeros(action.shape[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Same as ``act_inference``."""
        return self.act_inference(obs)


class ResidualPolicy(nn.Module):
    """Base policy plus ResFiT residual in one module, for ``robotrl eval``: ``(B, P) -> (B, A)``.

    The base is queried statelessly (a chunked base replans every step here).
    """

    def __init__(self, actor: ResidualActor, base: nn.Module | None) -> None:
        super().__init__()
        self.actor, self.base = actor, base
        self.action_dim = actor.action_dim

    def act_inference(self, obs: torch.Tensor) -> torch.Tensor:
        """Composed action ``clip(a_base + s * tanh(f([obs, a_base])), -1, 1)``."""
        if self.base is None:
            base = obs.new_zeros(obs.shape[0], self.action_dim)
        else:
            base = cast(Any, self.base).act_inference(obs)
        return self.actor(torch.cat([obs, base], dim=1))

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Deterministic action and zero log-probabilities (TD3 actors are deterministic)."""
        action = self.act_inference(obs)
        return action, action.new_zeros(action.shape[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Same as ``act_inference``."""
        return self.act_inference(obs)


def module_from_meta(
    p: dict[str, Any], weights: dict[str, torch.Tensor], device: torch.device | str
) -> nn.Module:
    """The trained network described by a checkpoint's ``meta["policy"]`` ``p``, with ``weights`` loaded.

    Kinds: ``actor_critic`` (PPO), ``tanh_gaussian`` (SAC), ``deterministic`` (FastTD3), ``chunk`` (BC, as a
    raw ``ChunkPolicy``).

    Raises:
        ValueError: an unknown kind.

    """
    kind = p.get("kind", "actor_critic")
    if kind == "chunk":
        net: nn.Module = ChunkPolicy(
            p["obs_dim"], p["action_dim"], p["chunk"], list(p["hidden"]), p.get("activation", "relu")
        )
    elif kind == "tanh_gaussian":
        net = TanhGaussianActor(p["obs_dim"], p["action_dim"], list(p["hidden"]), p["normalize_obs"])
    elif kind == "deterministic":
        net = DeterministicActor(p["obs_dim"], p["action_dim"], list(p["hidden"]), p["normalize_obs"])
    elif kind == "actor_critic":
        from robotrl.policies.mlp import ActorCritic, PolicyConfig

        net = ActorCritic(p["obs_dim"], p["critic_dim"], p["action_dim"], PolicyConfig(**p["config"]))
    else:
        raise ValueError(
            f"Unknown policy kind {kind!r}; valid: actor_critic, tanh_gaussian, deterministic, chunk, residual."
        )
    net = net.to(device)
    net.load_state_dict(weights)
    return net.eval()


def eval_module(
    tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: torch.device | str = "cpu"
) -> nn.Module:
    """A module with ``act_inference(obs)`` and ``act(obs)`` for any off-policy/BC checkpoint.

    Residual checkpoints carry their base (``meta["base_policy"]``, tensors ``base.*``).
    """
    from robotrl.storage.checkpoint import strip

    p = meta["policy"]
    if p["kind"] == "residual":
        actor = ResidualActor(
            p["obs_dim"], p["action_dim"], list(p["hidden"]), p["scale"], p["normalize_obs"]
        )
        actor.load_state_dict(strip(tensors, "policy"))
        base = None
        if meta.get("base_policy"):
            base = module_from_meta(meta["base_policy"], strip(tensors, "base"), device)
            base = ChunkInference(base) if isinstance(base, ChunkPolicy) else base
        return ResidualPolicy(actor.to(device), base).eval()
    net = module_from_meta(p, strip(tensors, "policy"), device)
    return ChunkInference(net).eval() if isinstance(net, ChunkPolicy) else net


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

    Raises:
        ValueError: the checkpoint holds a residual policy (not a base).

    """
    from robotrl.storage.checkpoint import load_checkpoint, strip

    tensors, meta = load_checkpoint(path, device=device)
    p = meta.get("policy", {})
    if p.get("kind") == "residual":
        raise ValueError(
            f"Checkpoint {path!r} holds a residual policy; use a BC (algo=bc), PPO or SAC checkpoint."
        )
    net = module_from_meta(p, strip(tensors, "policy"), device)
    if isinstance(net, ChunkPolicy):
        return ChunkExecutor(
            net, num_envs, execution or p.get("execution", "ensemble"), p.get("ensemble_decay", 0.01)
        ), meta
    return ModulePolicy(net, p["action_dim"]), meta


def ensemble_weights(chunk: int, decay: float) -> torch.Tensor:
    """ACT's normalized weights ``exp(-decay * i) / sum`` over ``i = 0..K-1`` (0 = oldest)."""
    w = torch.tensor([math.exp(-decay * i) for i in range(chunk)])
    return w / w.sum()
