"""Build a policy from a checkpoint: safetensors weights plus JSON metadata, never pickle."""

from __future__ import annotations

import os
from typing import Any

import torch

from robotrl.policies.mlp import ActorCritic, PolicyConfig
from robotrl.storage.checkpoint import load_checkpoint, strip


def policy_from_meta(meta: dict[str, Any]) -> ActorCritic:
    """An untrained ActorCritic with the shapes and settings recorded in ``meta["policy"]``."""
    p = meta["policy"]
    return ActorCritic(p["obs_dim"], p["critic_dim"], p["action_dim"], PolicyConfig(**p["config"]))


def load_policy(path: str | os.PathLike, device: str | torch.device = "cpu") -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load ``(policy, meta)`` from a run dir, checkpoints dir or ``ckpt_*.safetensors``.

    ``meta`` carries ``task`` (name and config), ``obs_layout``, ``joint_names``,
    ``action_spec``, ``step_dt``, ``config_yaml`` and ``config_hash``.
    """
    tensors, meta = load_checkpoint(path, device=device)
    if meta["policy"].get("kind", "actor_critic") != "actor_critic":
        from robotrl.policies.frozen import eval_module  # SAC, BC and residual checkpoints

        return eval_module(tensors, meta, device), meta
    policy = policy_from_meta(meta)
    policy.to(device)
    policy.load_state_dict(strip(tensors, "policy"))
    policy.eval()
    return policy, meta
