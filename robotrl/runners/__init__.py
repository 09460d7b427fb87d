"""Runners own the training loop, devices, checkpoints, logging and progress."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

# algorithm name -> "module:Runner". Algorithms plug in here; configs name the algorithm only.
_RUNNERS: dict[str, str] = {
    "ppo": "robotrl.runners.on_policy:OnPolicyRunner",
    "sac": "robotrl.runners.off_policy:OffPolicyRunner",
    "fasttd3": "robotrl.runners.off_policy:OffPolicyRunner",
    "residual": "robotrl.runners.off_policy:OffPolicyRunner",
    "bc": "robotrl.runners.off_policy:OffPolicyRunner",
    "vla_sft": "robotrl.runners.vla:VLARunner",
    "grpo": "robotrl.runners.vla:VLARunner",
    "vla_ppo": "robotrl.runners.vla:VLARunner",
}


def make_runner(cfg: Any, run_dir: str | Path, config_yaml: str = "") -> Any:
    """The runner for ``cfg.algo.name``, built for ``cfg``.

    Raises:
        KeyError: unknown algorithm, with the valid names.

    """
    name = cfg.algo.name
    if name not in _RUNNERS:
        raise KeyError(f"Unknown algo {name!r}. Valid algorithms: {', '.join(sorted(_RUNNERS))}.")
    module, cls = _RUNNERS[name].split(":")
    return getattr(importlib.import_module(module), cls)(cfg, run_dir, config_yaml=config_yaml)
