"""Checkpoints: safetensors weights plus a JSON sidecar, written atomically.

Layout inside ``<run_dir>/checkpoints/``::

    ckpt_000100.safetensors   tensors: "policy.<param>", "optim.<i>.<state>", "rng.torch"
    ckpt_000100.json          iteration, env steps, policy/task/config metadata
    latest.json               {"name": "ckpt_000100"}  (written last)

Each file is written to a temporary name, fsynced and ``os.replace``d, and
``latest.json`` moves only after both files of a checkpoint are complete, so a
``kill -9`` at any instant leaves a loadable previous checkpoint. Loading reads
safetensors and JSON only: nothing is unpickled.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

log = logging.getLogger(__name__)


def _atomic_write(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)

    _atomic_write(path, write)


def save_checkpoint(
    ckpt_dir: str | os.PathLike, iteration: int, tensors: dict[str, torch.Tensor], meta: dict[str, Any], keep: int = 5
) -> Path:
    """Write ``ckpt_<iteration>`` (tensors + meta) atomically; keep the newest ``keep`` (0: all).

    Returns:
        Path of the ``.safetensors`` file.

    """
    if keep < 0:
        raise ValueError(f"keep must be >= 0 (0 keeps every checkpoint), got {keep}.")
    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    name = f"ckpt_{iteration:06d}"
    weights = ckpt_dir / f"{name}.safetensors"
    contiguous = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    _atomic_write(weights, lambda tmp: save_file(contiguous, tmp))
    _write_json(ckpt_dir / f"{name}.json", {**meta, "iteration": iteration, "name": name})
    _write_json(ckpt_dir / "latest.json", {"name": name})
    old = sorted(ckpt_dir.glob("ckpt_*.safetensors"))[:-keep] if keep > 0 else []
    for path in old:
        path.unlink(missing_ok=True)
        path.with_suffix(".json").unlink(missing_ok=True)
    log.debug("saved checkpoint %s", weights)
    return weights


def save_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor]) -> Path:
    """Write ``tensors`` to one safetensors file atomically (tmp, fsync, ``os.replace``)."""
    path = Path(path)
    contiguous = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    _atomic_write(path, lambda tmp: save_file(contiguous, tmp))
    return path


def load_tensors(path: str | os.PathLike, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Read a safetensors file written by ``save_tensors`` (nothing is unpickled)."""
    return load_file(str(path), device=str(device))


def resolve(path: str | os.PathLike) -> Path:
    """Find the ``.safetensors`` file for a run dir, a checkpoints dir, or a checkpoint path.

    Raises:
        FileNotFoundError: naming what was looked for.

    """
    p = Path(path).expanduser()
    for candidate in (p / "checkpoints", p):
        latest = candidate / "latest.json"
        if latest.is_file():
            with open(latest) as f:
                return candidate / f"{json.load(f)['name']}.safetensors"
    if p.suffix == ".json" and p.name != "latest.json":
        p = p.with_suffix(".safetensors")
    if p.suffix != ".safetensors":
        p = p.with_suffix(".safetensors")
    if not p.is_file():
        raise FileNotFoundError(
            f"No checkpoint at {path!r}: expected a run directory, its checkpoints/ directory, "
            "or a ckpt_*.safetensors file."
        )
    return p


def load_meta(path: str | os.PathLike) -> dict:
    """Load only a checkpoint's metadata (iteration, elapsed_s, config, ...), without its tensors.

    Raises:
        FileNotFoundError: no checkpoint at ``path`` (``resolve``), or no metadata file beside it.

    """
    weights = resolve(path)
    meta_path = weights.with_suffix(".json")
    if not meta_path.is_file():
        raise FileNotFoundError(f"Checkpoint {weights} has no metadata file {meta_path.name}.")
    with open(meta_path) as f:
        return json.load(f)


def load_checkpoint(
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> tuple[dict[str, torch.Tensor], dict]:
    """Load ``(tensors, meta)`` from a checkpoint (see ``resolve`` for accepted paths)."""
    meta = load_meta(path)
    return load_file(str(resolve(path)), device=str(device)), meta


def prefixed(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """``{prefix + "." + k: v}`` for every entry."""
    return {f"{prefix}.{k}": v for k, v in state.items()}


def strip(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Entries under ``prefix.`` with the prefix removed."""
    head = prefix + "."
    return {k[len(head):]: v for k, v in tensors.items() if k.startswith(head)}


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten an optimizer's state into tensors and JSON-safe hyperparameters."""
    state = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    for pid, pstate in state["state"].items():
        for key, value in pstate.items():
            tensors[f"{pid}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    groups = [{k: v for k, v in g.items()} for g in state["param_groups"]]
    return tensors, {"param_groups": groups}


def restore_optimizer(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Inverse of ``optimizer_tensors``."""
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        pid, name = key.split(".", 1)
        per_param.setdefault(int(pid), {})[name] = value
    opt.load_state_dict({"state": per_param, "param_groups": meta["param_groups"]})
